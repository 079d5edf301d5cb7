"""The mpi backend: the same values and traces as threads and processes, and MPI's faults
handled as the other backends handle theirs (issue 14). The training strategies, the
ASP parameter server with a straggler among them, are held to the golden traces in
tests/test_golden.py."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

import dlsys
from dlsys import collectives
from dlsys.comm import DeadlockError, RankFailed
from dlsys.comm.backends.mpi import mpi_unavailable, mpirun_command

pytestmark = pytest.mark.skipif(mpi_unavailable() is not None, reason=str(mpi_unavailable()))
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
import make_golden  # noqa: E402

# Every process these tests start inherits this mark, so that another session's MPI run on
# the same machine (a CI job's prterun) is not taken for one of ours left behind.
OWNER = "DLSYS_TEST_MPI_OWNER"
os.environ[OWNER] = str(os.getpid())


def leftover_ranks() -> list:
    """Processes of an mpi run these tests started still alive: mpirun's, and ranks started by launch."""
    alive = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if "dlsys.comm.backends.mpi" in line or "golden_job.py" in line or "prterun" in line:
            try:
                ours = proc.environ().get(OWNER) == os.environ[OWNER]
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                ours = False  # another user's, or gone
            if ours:
                alive.append(line)
    return alive


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_every_collective_gives_the_threads_trace_under_mpirun(p, tmp_path):
    """A student's script under ``mpirun -n p``: each launch runs one rank per process."""
    out = tmp_path / "equal.json"
    cmd, env = mpirun_command(p)
    env["PYTHONPATH"] = ROOT
    subprocess.run(
        [*cmd, sys.executable, os.path.join(HERE, "mpi", "golden_job.py"), str(out)],
        env=env,
        check=True,
        timeout=240,
        capture_output=True,
    )
    equal = json.loads(out.read_text())
    assert len(equal) == sum(len(a) for a in collectives.ALGORITHMS.values())
    assert [case for case, same in equal.items() if not same] == []


def ring_with_recv_any(comm):
    """Sends in rank order, received by recv_any: the choice must be the threads one."""
    x = np.arange(10.0) * comm.rank
    order = None
    if comm.rank == 0:
        order = [comm.recv_any(tag=4)[0] for _ in range(comm.size - 1)]
    else:
        comm.compute(seconds=1e-3 * (comm.size - comm.rank))
        comm.send(x, 0, tag=4)
    return order, collectives.allreduce(comm, x, algorithm="ring")


def test_launch_starts_mpirun_itself_and_matches_threads():
    on_mpi = dlsys.launch(ring_with_recv_any, 4, "mpi", link="rdma-edr", seed=3)
    on_threads = dlsys.launch(ring_with_recv_any, 4, "threads", link="rdma-edr", seed=3)
    assert on_mpi.values[0][0] == on_threads.values[0][0] == [3, 2, 1]
    assert np.array_equal(on_mpi.values[1][1], on_threads.values[1][1])
    assert on_mpi.trace.messages == on_threads.trace.messages
    assert on_mpi.trace.spans == on_threads.trace.spans
    assert on_mpi.backend == "mpi" and leftover_ranks() == []


# A failure or a deadlock ends the job at once, not at the launcher's deadline (600 s by
# default): the bound says that much and no more, as mpirun's start is wall clock that a
# loaded machine stretches (a 3 s run took 12 s at a load average of 15 on 2 cores).
ENDS_BEFORE_THE_DEADLINE_S = 60.0


def failing(comm):
    if comm.rank == 2:
        raise ZeroDivisionError("rank two divides by zero")
    comm.recv(source=(comm.rank + 1) % comm.size)


def test_a_rank_that_raises_ends_the_job_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(RankFailed) as info:
        dlsys.launch(failing, 4, "mpi")
    assert time.monotonic() - start < ENDS_BEFORE_THE_DEADLINE_S
    assert info.value.rank == 2 and "ZeroDivisionError: rank two divides by zero" in str(info.value)
    assert "in failing" in info.value.rank_traceback
    assert leftover_ranks() == []


def waits_on_each_other(comm):
    comm.recv(source=1 - comm.rank, tag=5)


def waits_on_a_finished_rank(comm):
    if comm.rank == 0:
        comm.recv(source=1, tag=9)


def recv_any_of_silent_ranks(comm):
    if comm.rank == 0:
        comm.recv_any(tag=2)
    else:
        comm.recv(source=0, tag=3)


@pytest.mark.parametrize(
    "program,match",
    [
        (waits_on_each_other, r"rank \d waits for rank \d \(tag 5\); rank \d waits for rank \d \(tag 5\)"),
        (waits_on_a_finished_rank, r"rank 0 waits for rank 1 \(tag 9\); rank 1 has finished"),
        (recv_any_of_silent_ranks, r"rank 0 waits for any rank \(tag 2\); rank \d waits for rank 0 \(tag 3\)"),
    ],
)
def test_a_deadlock_names_who_waits_for_whom(program, match):
    start = time.monotonic()
    with pytest.raises(DeadlockError, match=match):
        dlsys.launch(program, 2 if program is not recv_any_of_silent_ranks else 3, "mpi")
    assert time.monotonic() - start < ENDS_BEFORE_THE_DEADLINE_S
    assert leftover_ranks() == []


def sleeper(comm):
    time.sleep(60)


def test_the_run_has_a_wall_clock_deadline_and_leaves_nothing():
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        dlsys.launch(sleeper, 2, "mpi", timeout_s=3.0)
    assert time.monotonic() - start < 15
    assert leftover_ranks() == []


def test_ctrl_c_ends_every_rank(tmp_path):
    marker = tmp_path / "started"
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import pathlib, time, dlsys
        def program(comm):
            pathlib.Path({str(marker)!r} + str(comm.rank)).touch()
            time.sleep(60)
        dlsys.launch(program, 3, "mpi")
    """)
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=dict(os.environ, PYTHONPATH=ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not all(os.path.exists(f"{marker}{r}") for r in range(3)):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 10
    assert b"KeyboardInterrupt" in err
    assert leftover_ranks() == []


def test_world_size_must_be_the_mpi_worlds(tmp_path):
    script = tmp_path / "wrong.py"
    script.write_text("import dlsys\ndlsys.launch(lambda comm: 0, world_size=3, backend='mpi')\n")
    cmd, env = mpirun_command(2)
    env["PYTHONPATH"] = ROOT
    run = subprocess.run([*cmd, sys.executable, str(script)], env=env, capture_output=True, timeout=120)
    assert run.returncode != 0
    assert b"world_size=3, but this MPI job has 2 processes (mpirun -n 2): pass world_size=2" in run.stderr


def test_without_mpi4py_the_error_says_how_to_install(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mpi4py" else find_spec(name, *a))
    with pytest.raises(RuntimeError, match=r"needs mpi4py and an MPI runtime: pip install -e '.\[mpi\]'"):
        dlsys.launch(failing, 2, "mpi")


def test_dlsys_mpirun_runs_a_students_script(tmp_path):
    script = tmp_path / "ring.py"
    script.write_text(
        textwrap.dedent("""
        import numpy as np, dlsys
        from dlsys import collectives
        def program(comm):
            return collectives.allreduce(comm, np.full(10, comm.rank + 1.0), algorithm="ring")
        result = dlsys.launch(program, world_size=3, backend="mpi", link="rdma-edr")
        print(result.values[2][0], f"{result.virtual_time_s:.9f}")
    """)
    )
    run = subprocess.run(
        [sys.executable, "-m", "dlsys.cli", "mpirun", "-n", "3", "--", sys.executable, str(script)],
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split("\n")
    assert len([l for l in lines if l.startswith("6.0 ")]) == 3  # every rank has the whole result
    threads = dlsys.launch(_ring, 3, "threads", link="rdma-edr")
    assert f"{threads.virtual_time_s:.9f}" in run.stdout


def _ring(comm):
    return collectives.allreduce(comm, np.full(10, comm.rank + 1.0), algorithm="ring")


def test_dlsys_mpirun_needs_a_command():
    run = subprocess.run(
        [sys.executable, "-m", "dlsys.cli", "mpirun", "-n", "2"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert run.returncode == 2 and "give the command each rank runs after --" in run.stderr


def test_simulate_on_mpi_reports_the_threads_virtual_time():
    def simulate(backend):
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "dlsys.cli",
                "simulate",
                "allreduce",
                "--algo",
                "ring",
                "--ranks",
                "3",
                "--size",
                "1MiB",
                "--backend",
                backend,
                "--json",
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=ROOT),
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    on_mpi, on_threads = simulate("mpi"), simulate("threads")
    assert on_mpi["virtual_time_s"] == on_threads["virtual_time_s"]


def test_bench_reports_busbw_for_ours_and_the_librarys_allreduce():
    from dlsys.experiments.wallclock import allreduce_bench

    rec = allreduce_bench(ranks=2, size="1MiB", repeats=2, warmup=1, backend="mpi")
    assert rec["backend"] == "mpi" and rec["busbw_Bps"] > 0
    assert rec["peer"]["backend"] == "mpi4py" and rec["peer"]["busbw_Bps"] > 0
    assert rec["ratio_to_peer"] == pytest.approx(rec["busbw_Bps"] / rec["peer"]["busbw_Bps"])
    with pytest.raises(ValueError, match="backend must be one of processes, mpi"):
        allreduce_bench(backend="threads")


def test_dlsys_backend_runs_an_unchanged_script_on_mpi(monkeypatch):
    monkeypatch.setenv("DLSYS_BACKEND", "mpi")
    result = dlsys.launch(_ring, 3, "threads", link="rdma-edr")
    monkeypatch.delenv("DLSYS_BACKEND")
    assert result.backend == "mpi"
    assert result.trace.messages == dlsys.launch(_ring, 3, "threads", link="rdma-edr").trace.messages


def test_bench_stack_measures_mpi_messages():
    from dlsys.experiments import wallclock

    record = wallclock.stack_bench([8, 1 << 20], ["mpi"])
    one_way = {r["nbytes"]: r["one_way_s"] for r in record["rows"]}
    assert 0 < one_way[8] < one_way[1 << 20]
    assert "mpi" in wallclock.available_transports() and record["fits"]["mpi"]["alpha_s"] > 0


@pytest.mark.parametrize("workers", [2, 4, 8])
@pytest.mark.parametrize("strategy", make_golden.TRAIN_STRATEGIES)
def test_every_training_strategy_gives_the_threads_trace_on_mpi(strategy, workers):
    """3 workers are in tests/test_golden.py; the ASP and SSP servers decide by recv_any."""
    import dataclasses

    from dlsys.experiments import train

    config = make_golden.train_config()
    if strategy == "model-parallel" and workers > 4:  # a stage per layer: the model needs 8 layers
        config = dataclasses.replace(config, hidden=(32,) * 7)
    runs = {
        backend: train(
            strategy, config, workers, backend=backend, straggler=(1, 3.0), **make_golden.train_options(strategy)
        )
        for backend in ("threads", "mpi")
    }
    threads, mpi = runs["threads"]["result"], runs["mpi"]["result"]
    assert json.dumps(mpi.trace.to_chrome()) == json.dumps(threads.trace.to_chrome())
    assert make_golden.digest(runs["mpi"]["params"]) == make_golden.digest(runs["threads"]["params"])
