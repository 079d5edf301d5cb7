"""Values and virtual-time traces are those recorded before the wave-2 engine refactor
(tests/golden/make_golden.py), on threads and on processes, and for training on mpi
(ps-asp and ps-ssp with a straggler: recv_any's distributed rule; tests/comm/test_mpi.py holds
every collective on mpi to threads at 2, 3, 4 and 8 ranks). Traces and collectives' values
are held bit for bit; training's weights, summed by the CPU's BLAS kernel, within
make_golden.TRAIN_ATOL, so the suite passes on any CPU (issue 28)."""

import gzip
import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from dlsys.comm.backends.mpi import mpi_unavailable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "golden"))
import make_golden  # noqa: E402

with gzip.open(make_golden.PATH, "rt") as f:
    GOLDEN = json.load(f)
with np.load(make_golden.PARAMS_PATH) as stored:
    GOLDEN_PARAMS = dict(stored)


def stored_form(record):
    """The same float and tuple encoding as the stored file."""
    return json.loads(json.dumps(record))


def check_trace(name, record):
    want, got = GOLDEN[name], stored_form(record)
    assert got["messages"] == want["messages"], name
    assert got["spans"] == want["spans"], name
    assert got["clocks_s"] == want["clocks_s"], name


def check(name, values, result):
    """A collective: its trace and its values exactly (every sum is ours, elementwise)."""
    check_trace(name, make_golden.trace_record(result))
    assert [make_golden.digest(v) for v in values] == GOLDEN[name]["values"], name


def check_params(strategy, params):
    """Training's weights: dtype and shape exactly, values within the BLAS kernels' spread."""
    want = GOLDEN_PARAMS[strategy]
    assert (params.dtype, params.shape) == (want.dtype, want.shape), strategy
    np.testing.assert_allclose(params, want, rtol=0, atol=make_golden.TRAIN_ATOL, err_msg=strategy)


# processes: the 5-rank cases suffice (a trace does not depend on the backend)
COLLECTIVE_CASES = [
    (case, backend)
    for case in make_golden.collective_cases()
    for backend in ("threads", "processes")
    if backend == "threads" or case[3] == 5
]


@pytest.mark.parametrize("case,backend", COLLECTIVE_CASES, ids=lambda c: c[0] if isinstance(c, tuple) else c)
def test_collective_matches_golden(case, backend):
    name, collective, algorithm, ranks = case
    result = make_golden.run_collective(collective, algorithm, ranks, backend)
    check(name, result.values, result)


@pytest.mark.parametrize(
    "backend",
    [
        "threads",
        "processes",
        pytest.param("mpi", marks=pytest.mark.skipif(mpi_unavailable() is not None, reason=str(mpi_unavailable()))),
    ],
)
@pytest.mark.parametrize("strategy", make_golden.TRAIN_STRATEGIES)
def test_training_matches_golden(strategy, backend):
    result, params = make_golden.run_train(strategy, backend)
    check_trace(f"train/{strategy}", make_golden.trace_record(result))
    check_params(strategy, params)


def test_the_stored_weights_are_the_recorded_golden_values():
    """train_params.npz holds the very weights whose digests traces.json.gz recorded."""
    for strategy in make_golden.TRAIN_STRATEGIES:
        assert [make_golden.digest(GOLDEN_PARAMS[strategy])] == GOLDEN[f"train/{strategy}"]["values"], strategy


def test_a_weight_beyond_the_tolerance_or_a_trace_one_ulp_off_fails():
    result, params = make_golden.run_train("allreduce")
    for i, atol_units in ((0, 0.5), (int(np.argmax(np.abs(params))), -0.5)):
        nudged = params.copy()
        nudged[i] += atol_units * make_golden.TRAIN_ATOL
        check_params("allreduce", nudged)  # within the tolerance
        nudged[i] += 2 * atol_units * make_golden.TRAIN_ATOL  # 1.5 tolerances away
        with pytest.raises(AssertionError):
            check_params("allreduce", nudged)
    record = stored_form(make_golden.trace_record(result))
    record["spans"][-1][2] = float(np.nextafter(record["spans"][-1][2], np.inf))  # one ulp later
    with pytest.raises(AssertionError):
        check_trace("train/allreduce", record)


def test_the_tolerance_counts_every_update():
    """TRAIN_ATOL's UPDATES: the gradients every strategy's workers compute in the golden run."""
    from dlsys.experiments import train

    updates = {
        strategy: len(
            train(strategy, make_golden.train_config(), 3, straggler=(2, 3.0), **make_golden.train_options(strategy))[
                "losses"
            ]
        )
        for strategy in make_golden.TRAIN_STRATEGIES
    }
    assert max(updates.values()) == make_golden.UPDATES, updates


def blas_kernel(env=None) -> str:
    """The kernel numpy's OpenBLAS chose ("" for another BLAS), in a fresh interpreter under ``env``."""
    code = (
        "import json, numpy, threadpoolctl; print(json.dumps([i.get('architecture') or '' for i in "
        "threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env or os.environ
    )
    return (json.loads(done.stdout) or [""])[0]


# numpy's baseline on x86 (x86-64-v2) includes SSE3, so OpenBLAS's Prescott kernel runs on any CPU that runs numpy
ANOTHER_CPU = {"OPENBLAS_CORETYPE": "Prescott"}
ANOTHER_CPU_PROGRAM = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import make_golden
traces, params = {}, {}
for strategy in make_golden.TRAIN_STRATEGIES:
    result, params[strategy] = make_golden.run_train(strategy)
    traces[strategy] = make_golden.trace_record(result)
np.savez(sys.argv[2], **params)
with open(sys.argv[3], "w") as f:
    json.dump(traces, f)
"""


def test_another_cpus_blas_changes_the_weights_bits_but_passes(tmp_path):
    """Another CPU, simulated by another OpenBLAS kernel: the weights' digests (the old check)
    differ from the recorded ones, the traces are equal bit for bit, the weights within TRAIN_ATOL."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"OPENBLAS_CORETYPE=Prescott is an x86 kernel; this is {platform.machine()}")
    here, there = blas_kernel(), blas_kernel(os.environ | ANOTHER_CPU)
    if not here or here == there:
        pytest.skip(
            f"numpy's BLAS here ({here or 'not OpenBLAS'}) cannot be switched to another kernel by {ANOTHER_CPU}"
        )
    params_path, traces_path = tmp_path / "params.npz", tmp_path / "traces.json"
    subprocess.run(
        [
            sys.executable,
            "-c",
            ANOTHER_CPU_PROGRAM,
            os.path.dirname(make_golden.__file__),
            str(params_path),
            str(traces_path),
        ],
        env=os.environ | ANOTHER_CPU,
        timeout=120,
        check=True,
    )
    with np.load(params_path) as stored:
        params = dict(stored)
    traces = json.loads(traces_path.read_text())
    assert any(make_golden.digest(params[s]) != GOLDEN[f"train/{s}"]["values"][0] for s in params), (
        f"{there} gave the recorded bits: no other CPU simulated"
    )
    for strategy in make_golden.TRAIN_STRATEGIES:
        check_trace(f"train/{strategy}", traces[strategy])
        check_params(strategy, params[strategy])


@pytest.mark.parametrize("ranks", [2, 3, 8])
def test_every_collective_on_processes_gives_the_threads_trace(ranks):
    """The golden cases are at 4 and 5 ranks; tests/comm/test_mpi.py holds mpi to threads at 2, 3, 4, 8."""
    for collective, algorithm in dict.fromkeys((c[1], c[2]) for c in make_golden.collective_cases()):
        on_threads = make_golden.run_collective(collective, algorithm, ranks, "threads")
        on_processes = make_golden.run_collective(collective, algorithm, ranks, "processes")
        assert make_golden.trace_record(on_processes) == make_golden.trace_record(on_threads), (collective, algorithm)
        assert [make_golden.digest(v) for v in on_processes.values] == [
            make_golden.digest(v) for v in on_threads.values
        ], (collective, algorithm)
