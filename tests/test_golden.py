"""Values and virtual-time traces are those recorded before the wave-2 engine refactor
(tests/golden/make_golden.py), on threads and on processes, and for training on mpi
(ps-asp and ps-ssp with a straggler: recv_any's distributed rule; tests/test_mpi.py holds
every collective on mpi to threads at 2, 3, 4 and 8 ranks)."""

import gzip
import json
import os
import sys

import pytest

from dlsys.comm.backends.mpi import mpi_unavailable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "golden"))
import make_golden  # noqa: E402

with gzip.open(make_golden.PATH, "rt") as f:
    GOLDEN = json.load(f)


def check(name, values, result):
    want = GOLDEN[name]
    got = {"values": [make_golden.digest(v) for v in values], **make_golden.trace_record(result)}
    got = json.loads(json.dumps(got))  # the same float and tuple encoding as the stored file
    assert got["messages"] == want["messages"], name
    assert got["spans"] == want["spans"], name
    assert got["clocks_s"] == want["clocks_s"], name
    assert got["values"] == want["values"], name


# processes: the 5-rank cases suffice (a trace does not depend on the backend)
COLLECTIVE_CASES = [(case, backend) for case in make_golden.collective_cases()
                    for backend in ("threads", "processes") if backend == "threads" or case[3] == 5]


@pytest.mark.parametrize("case,backend", COLLECTIVE_CASES, ids=lambda c: c[0] if isinstance(c, tuple) else c)
def test_collective_matches_golden(case, backend):
    name, collective, algorithm, ranks = case
    result = make_golden.run_collective(collective, algorithm, ranks, backend)
    check(name, result.values, result)


@pytest.mark.parametrize("backend", ["threads", "processes", pytest.param("mpi", marks=pytest.mark.skipif(
    mpi_unavailable() is not None, reason=str(mpi_unavailable())))])
@pytest.mark.parametrize("strategy", make_golden.TRAIN_STRATEGIES)
def test_training_matches_golden(strategy, backend):
    result, params = make_golden.run_train(strategy, backend)
    check(f"train/{strategy}", [params], result)


@pytest.mark.parametrize("ranks", [2, 3, 8])
def test_every_collective_on_processes_gives_the_threads_trace(ranks):
    """The golden cases are at 4 and 5 ranks; tests/test_mpi.py holds mpi to threads at 2, 3, 4, 8."""
    for collective, algorithm in dict.fromkeys((c[1], c[2]) for c in make_golden.collective_cases()):
        on_threads = make_golden.run_collective(collective, algorithm, ranks, "threads")
        on_processes = make_golden.run_collective(collective, algorithm, ranks, "processes")
        assert make_golden.trace_record(on_processes) == make_golden.trace_record(on_threads), (collective, algorithm)
        assert ([make_golden.digest(v) for v in on_processes.values]
                == [make_golden.digest(v) for v in on_threads.values]), (collective, algorithm)
