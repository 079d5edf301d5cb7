"""Every exit is clean (issue 25): SIGINT, SIGTERM, SIGHUP and SIGKILL of a launcher (a
Python process calling dlsys.launch) on every backend, and of ``dlsys mpirun``, leave no
process (psutil), no /dev/shm file and no temp folder; and the edge cases of a run behave
the same on threads, processes and mpi."""

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import psutil
import pytest

import dlsys
from dlsys.comm.backends import BACKENDS
from dlsys.comm.supervise import RankFailed, RunTimeout

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_MPI = BACKENDS["mpi"].unavailable()
needs_mpi = pytest.mark.skipif(NO_MPI is not None, reason=str(NO_MPI))
BACKEND_PARAMS = ["threads", "processes", pytest.param("mpi", marks=needs_mpi)]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
# how the launcher ends: Python re-raises SIGINT's KeyboardInterrupt as the signal itself;
# SIGTERM and SIGHUP exit with the shell's 128 + n (launch's SystemExit)
EXIT = {
    signal.SIGINT: -signal.SIGINT,
    signal.SIGTERM: 128 + signal.SIGTERM,
    signal.SIGHUP: 128 + signal.SIGHUP,
    signal.SIGKILL: -signal.SIGKILL,
}

# argv: backend, ready file, how the ranks busy themselves ("python" or "c": a call that
# holds the GIL and never returns to Python, where no watchdog thread of the rank can run)
LAUNCHER = """
import itertools, os, sys, time, dlsys

def busy(comm, ready, how):
    if comm.rank == 0:
        open(ready, "w").close()
    if how == "c":
        sum(itertools.repeat(1, 10**13))
    while True:
        time.sleep(0.02)
        comm.compute(seconds=0.02)

dlsys.launch(busy, 2, sys.argv[1], args=(sys.argv[2], sys.argv[3]), timeout_s=120)
"""

SCRIPT = """
import sys, time, dlsys
from mpi4py import MPI

def busy(comm, ready):
    if comm.rank == 0:
        open(ready, "w").close()
    while True:
        time.sleep(0.02)
        comm.compute(seconds=0.02)

dlsys.launch(busy, MPI.COMM_WORLD.Get_size(), "mpi", args=(sys.argv[1],), timeout_s=120)
"""


def runs_of(pid: int) -> list:
    """Live processes of runs launched by pid: they carry DLSYS_RUN=<pid>-... (reaper.py)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("DLSYS_RUN", "").startswith(f"{pid}-"):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def files_of(pid: int) -> list:
    return [p for d in ("/dev/shm", tempfile.gettempdir()) for p in glob.glob(os.path.join(d, f"dlsys-{pid}-*"))]


def open_mpi_files() -> set:
    return set(glob.glob("/dev/shm/sm_segment*")) | set(glob.glob(os.path.join(tempfile.gettempdir(), "ompi.*")))


def poll(condition, timeout_s: float, what) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def stop_and_check(proc: subprocess.Popen, sig: int, ready: str, before: set) -> int:
    """Wait for the ranks, send sig to proc, and check that nothing of the run remains."""
    try:
        poll(lambda: os.path.exists(ready) or proc.poll() is not None, 60, lambda: "the ranks did not start")
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.3)  # every rank inside its program
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    poll(lambda: not runs_of(proc.pid), 15, lambda: f"processes of the run remain: {runs_of(proc.pid)}")
    poll(lambda: not files_of(proc.pid), 5, lambda: f"files of the run remain: {files_of(proc.pid)}")
    assert open_mpi_files() <= before, open_mpi_files() - before
    return proc.returncode, stderr


@pytest.mark.serial
@pytest.mark.timeout(90)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_a_signalled_launcher_leaves_nothing(backend, sig, tmp_path):
    ready, before = str(tmp_path / "ready"), open_mpi_files()
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, backend, ready, "python"],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    returncode, stderr = stop_and_check(proc, sig, ready, before)
    assert returncode == EXIT[sig], stderr
    if sig in (signal.SIGTERM, signal.SIGHUP):
        assert "Traceback" not in stderr


@pytest.mark.serial
@pytest.mark.timeout(90)
def test_a_killed_launcher_ends_ranks_stuck_in_a_c_call(tmp_path):
    """The rank's watcher thread would need the GIL: the parent-death signal needs none."""
    ready, before = str(tmp_path / "ready"), open_mpi_files()
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, "processes", ready, "c"],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert stop_and_check(proc, signal.SIGKILL, ready, before)[0] == -signal.SIGKILL


@pytest.mark.serial
@needs_mpi
@pytest.mark.timeout(90)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signalled_dlsys_mpirun_leaves_nothing(sig, tmp_path):
    script, ready, before = tmp_path / "script.py", str(tmp_path / "ready"), open_mpi_files()
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlsys.cli", "mpirun", "-n", "2", "--", sys.executable, str(script), ready],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    returncode, stderr = stop_and_check(proc, sig, ready, before)
    assert returncode != 0, stderr


# --- the edge cases, the same on every backend ---


def send_to_a_finished_rank(comm):
    if comm.rank == 0:
        comm.recv(source=1)  # rank 1 has returned when this arrives
        comm.send(np.ones(3), 1)
        return "sent"
    comm.send(np.zeros(1), 0)
    return "returned"


def long_phase(comm):
    if comm.rank == 0:
        comm.send(np.ones(3), 1, phase="x" * 5000)
        return 0.0
    return float(comm.recv(source=0).sum())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_edge_cases_behave_the_same_on_every_backend(backend):
    result = dlsys.launch(send_to_a_finished_rank, 2, backend, timeout_s=60)
    assert result.values == ["sent", "returned"]
    result = dlsys.launch(long_phase, 2, backend, timeout_s=60)
    assert result.values == [0.0, 3.0]


def exits(comm):
    if comm.rank == 1:
        os._exit(0)
    return comm.recv(source=1)


def forks(comm, pids):
    pid = os.fork()
    if pid == 0:
        time.sleep(100)
        os._exit(0)
    with open(os.path.join(pids, str(comm.rank)), "w") as f:
        f.write(str(pid))
    return comm.rank


def spins(comm):
    while True:
        pass


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_os_exit_in_a_rank_is_an_error_naming_it(backend):
    with pytest.raises(RankFailed) as failed:
        dlsys.launch(exits, 3, backend, timeout_s=60)
    assert failed.value.rank == 1


@pytest.mark.serial  # wall time: another worker's load would stretch the teardown it bounds
@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_every_timeout_is_honoured(backend):
    start = time.monotonic()
    with pytest.raises(RunTimeout):
        dlsys.launch(spins, 2, backend, timeout_s=1.5)
    assert time.monotonic() - start < 1.5 + 2.0  # the teardown included


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_what_a_rank_forks_ends_with_the_run(backend, tmp_path):
    start = time.monotonic()
    assert dlsys.launch(forks, 2, backend, args=(str(tmp_path),), timeout_s=60).values == [0, 1]
    assert time.monotonic() - start < 30  # not held until the deadline by the fork's pipes
    pids = [int((tmp_path / str(r)).read_text()) for r in range(2)]
    poll(
        lambda: not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE],
        10,
        lambda: f"forked processes remain: {pids}",
    )
