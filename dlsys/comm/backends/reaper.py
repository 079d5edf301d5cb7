"""Nothing outlives a run, however its launcher ends: run keys, the reaper, the sweep.

Three mechanisms, one per way a launcher can end (docs/mpi.md, "Stopping a run"):

* it returns or raises (success, a failing rank, deadlock, deadline, Ctrl-C, and SIGTERM or
  SIGHUP, which ``launch`` turns into SystemExit): its ``finally`` ends the ranks;
* it is SIGKILLed, or dies inside a C call: the **reaper**, a small stdlib-only process in
  a session of its own started before any rank, blocks reading a pipe whose only write end
  the launcher holds. The kernel closes that end whenever the launcher dies, however it
  dies; then the reaper SIGKILLs every process whose environment carries the run's marker
  ``DLSYS_RUN=<run id>`` (the ranks, mpirun, and whatever they forked: a fork inherits the
  environment) and removes the run's files and folders. The ranks of the processes backend
  also get the kernel's parent-death signal (``set_parent_death_signal``), so they stop
  at once even if the reaper is gone too;
* the reaper itself was killed (``kill -9`` of both): the next run's ``sweep_dead_runs``
  removes what the dead run left. It must never touch a live run, so a run's files are
  named ``dlsys-<pid>-<start>-<pidns>-<token>-...``: the launcher's pid, its start time
  (clock ticks after boot, /proc/<pid>/stat field 22) and its PID namespace (the inode of
  /proc/self/ns/pid). A file is removed only if it comes from this PID namespace and no
  process with that pid and that start time exists; a launcher in another PID namespace
  (another container sharing /dev/shm) cannot be seen from here, so its files are left
  alone (issue 25, finding 10).

Linux-only (``/proc``, ``prctl``), like the backends that use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SHM_DIR = "/dev/shm"
MARKER = "DLSYS_RUN"
REAPER_MARKER = "DLSYS_REAPER"  # =1 in a reaper's environment: never a rank's fork
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36  # linux/prctl.h
REAP_TIMEOUT_S = 10.0

# The reaper's program: stdlib only, run with -I -S so it starts in ~20 ms. argv: the run
# id, then glob patterns of the run's files and folders.
_REAPER = r"""
import glob, os, shutil, signal, sys, time
run_id, patterns = sys.argv[1], sys.argv[2:]
sys.stdin.buffer.read()  # returns at EOF: the launcher closed it, or died
marker, me = ("DLSYS_RUN=" + run_id).encode(), str(os.getpid())
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    found = False
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != me:
            try:
                with open("/proc/" + pid + "/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
                        found = True
            except OSError:
                pass  # gone, a zombie, or another user's
    if not found:
        break
    time.sleep(0.02)
for pattern in patterns:
    for path in glob.glob(pattern):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
"""


def _start_ticks(pid: int | str) -> int | None:
    """A process's start time in clock ticks after boot (/proc/<pid>/stat field 22), or
    None if no such process is visible."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19])


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def new_run_id() -> str:
    """``<pid>-<start ticks>-<pid namespace>-<token>`` of a new run of this process."""
    return f"{os.getpid()}-{_start_ticks('self')}-{_pid_namespace()}-{secrets.token_hex(4)}"


def owner_alive(name: str) -> bool:
    """Whether the launcher named in ``dlsys-<pid>-<start>-<pidns>-...`` may still exist.
    Names of another form, or from another PID namespace, count as alive (left alone)."""
    parts = os.path.basename(name).split("-")
    if len(parts) < 5 or parts[0] != "dlsys" or not all(p.isdigit() for p in parts[1:4]):
        return True
    pid, start, namespace = parts[1], int(parts[2]), int(parts[3])
    if namespace != _pid_namespace():
        return True  # its pid means nothing here
    return _start_ticks(pid) == start


def sweep_dead_runs() -> None:
    """Remove the files and folders (in /dev/shm and the temp folder) of runs whose
    launcher no longer exists (a pid reused by another process does not count)."""
    for folder in (SHM_DIR, tempfile.gettempdir()):
        for path in glob.glob(os.path.join(folder, "dlsys-*")):
            if owner_alive(path):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def now_ticks() -> int:
    """Clock ticks after boot now, the unit of a process's start time."""
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def descendants() -> dict[int, int]:
    """This process's live descendants: pid -> start time (from /proc/<pid>/stat)."""
    if not _has_children():
        return {}  # the usual case, without reading every process's stat (~10 ms)
    children: dict[int, list[tuple[int, int]]] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != b"Z":
                children.setdefault(int(fields[1]), []).append((int(pid), int(fields[19])))
    found, todo = {}, [os.getpid()]
    while todo:
        for child, start in children.get(todo.pop(), []):
            found[child] = start
            todo.append(child)
    return found


def _has_children() -> bool:
    for task in glob.glob("/proc/self/task/*/children"):
        with contextlib.suppress(OSError), open(task) as f:
            if f.read().strip():
                return True
    return False


def _of_another_run(pid: int) -> bool:
    """A reaper, or a process of a run other than this process's (its marker differs):
    not something this process's rank program forked."""
    mine = f"{MARKER}={os.environ.get(MARKER, '')}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return True  # gone, or not ours to judge
    return f"{REAPER_MARKER}=1".encode() in env or any(v.startswith(f"{MARKER}=".encode()) and v != mine for v in env)


def adopt_orphans() -> set[int]:
    """Make this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): what its
    descendants fork and abandon stays its descendant, so ``end_descendants`` finds it.
    Returns the descendants it has now, which ``end_descendants`` spares."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    return set(descendants())


def end_descendants(spare: set[int] = frozenset(), since_ticks: int = 0, timeout_s: float = 5.0) -> None:
    """SIGKILL what a rank program forked: every descendant of this process started at or
    after ``since_ticks``, but ``spare`` and the processes of other runs (it must not
    outlive the rank, nor keep mpirun waiting for its output pipes)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [
            pid
            for pid, start in descendants().items()
            if pid not in spare and start >= since_ticks and not _of_another_run(pid)
        ]
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
        time.sleep(0.01)


def set_parent_death_signal(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (prctl
    PR_SET_PDEATHSIG), then exit at once if the parent already has: it may have died
    before the request (the check closes that race). The signal needs no GIL, so it stops
    a rank stuck in a long C call. (prctl(2): the signal comes when the *thread* that
    started this process ends; ``launch`` runs in that thread until the run is over. The
    ctypes call as in cocrawler/cocrawler, cocrawler/pdeathsig.py.)"""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(70)


class Reaper:
    """The run's reaper (see the module docstring). ``env`` is what the run's processes
    must be started with (the marker added); ``close()`` ends the run's processes and
    removes its files now, and returns when that is done."""

    def __init__(self, run_id: str, patterns: list[str]):
        self.run_id = run_id
        self.env = dict(os.environ, **{MARKER: run_id})
        # the reaper itself must not carry the marker, or it would be among what it kills
        env = {k: v for k, v in os.environ.items() if k != MARKER}
        env[REAPER_MARKER] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER, run_id, *patterns],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )

    def pipe_fd(self) -> int:
        """The write end of the reaper's pipe (``dlsys mpirun`` hands it to mpirun by exec)."""
        return self.proc.stdin.fileno()

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(REAP_TIMEOUT_S + 5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
