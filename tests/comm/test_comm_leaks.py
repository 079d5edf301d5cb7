"""No rank process and no shared-memory segment outlives a run whose launcher is killed."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

import dlsys
from dlsys.comm.backends import reaper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LAUNCHER = """
import time, dlsys

def busy(comm):
    comm.alloc(1 << 16)  # a segment of each rank's own, besides the launcher's board
    while True:
        time.sleep(0.02)
        comm.compute(seconds=0.02)

dlsys.launch(busy, 3, "processes", timeout_s=120)
"""


def segments_of(pid: int) -> set:
    return {f for f in os.listdir("/dev/shm") if f.startswith(f"dlsys-{pid}-")}


def ranks_of(pid: int) -> list:
    """Live rank processes of runs launched by pid (their command line names the run)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(a.startswith(f"dlsys-{pid}-") for a in cmdline):
            found.append(proc)
    return found


def poll(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def start_launcher() -> subprocess.Popen:
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=REPO)
    )
    poll(
        lambda: len(ranks_of(launcher.pid)) == 3 and len(segments_of(launcher.pid)) >= 4,
        60,
        "the launcher did not start its 3 ranks",
    )
    return launcher


def stop(proc: subprocess.Popen, sig) -> str:
    """Send ``sig`` to ``proc``, wait for it (killed if it outlives 20 s); return its stderr."""
    try:
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    return stderr


def assert_nothing_left(pid: int) -> None:
    poll(lambda: not ranks_of(pid), 10, f"rank processes of the killed launcher remain: {ranks_of(pid)}")
    poll(lambda: not segments_of(pid), 5, f"segments of the killed launcher remain: {segments_of(pid)}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killing_the_launcher_leaves_no_rank_and_no_segment(sig):
    launcher = start_launcher()
    stderr = stop(launcher, sig)
    if sig == signal.SIGTERM:
        assert launcher.returncode == 128 + signal.SIGTERM, stderr  # 143: "terminated"
        assert "Traceback" not in stderr
    else:
        assert launcher.returncode == -signal.SIGKILL
    assert_nothing_left(launcher.pid)


def _name(pid, start, namespace=None) -> str:
    namespace = reaper._pid_namespace() if namespace is None else namespace
    return f"/dev/shm/dlsys-{pid}-{start}-{namespace}-0badc0de-board"


def test_a_run_sweeps_only_the_segments_of_launchers_that_died():
    """Dead: no such pid, or the pid now belongs to a process started later. Alive: this
    process; a launcher in another PID namespace (its pid means nothing here: finding 10)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me, start = os.getpid(), reaper._start_ticks("self")
    gone = [_name(dead.pid, 12345), _name(me, start + 1)]
    kept = [
        _name(me, start),
        _name(dead.pid, 12345, reaper._pid_namespace() + 1),
        f"/dev/shm/dlsys-{dead.pid}-0badc0de-board",
    ]  # not a run's name: not ours to judge
    for path in gone + kept:
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
    try:
        assert dlsys.launch(lambda comm: comm.rank, 2, "processes").values == [0, 1]
        assert [os.path.exists(p) for p in gone + kept] == [False] * len(gone) + [True] * len(kept)
    finally:
        for path in gone + kept:
            if os.path.exists(path):
                os.unlink(path)
