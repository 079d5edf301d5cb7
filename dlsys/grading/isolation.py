"""What keeps a submission's processes and files from outliving its test, and the reference
out of its reach (docs/exercises.md, "Threats"). Linux only.

The pieces, by who calls them:

- ``grade_run()``: the grader's outer ``with``: sweeps what a SIGKILLed grader left
  (``sweep_stale``), makes the run's folder ``/tmp/dlsys-grade-<pidns>-<pid>-<start>``, turns
  SIGTERM and SIGHUP into an exception (so every ``finally`` runs, as for Ctrl-C) and, on
  any exit, kills every descendant and removes the folder.
- ``watch_parent(pid)``: a helper process (the sandbox) dies with its parent
  (``PR_SET_PDEATHSIG``), and adopts its orphaned descendants (``PR_SET_CHILD_SUBREAPER``).
- ``contain(memory_bytes, max_processes, cover)``: called in a forked child that will run
  untrusted code; returns in a grandchild that is pid 1 of a new pid namespace (when it
  dies the kernel kills every process it left: a double-forked daemon too) with a private
  /dev/shm of at most ``memory_bytes`` and the reference covered by the course build (a mount
  namespace, ``course_cover``), running as ``unprivileged_ids()`` under RLIMIT_AS and
  RLIMIT_NPROC. The namespaces need root with CAP_SYS_ADMIN; root without it (a Docker
  container) still gets the user, and ``end_untrusted`` kills that uid's processes and
  removes its files in /dev/shm and the temporary folder; another user gets its own session, RLIMIT_AS and the
  parent-death signal only (docs/exercises.md says what that leaves open).
- ``course_build(dest)``: the package the untrusted code imports, solution regions stubbed.

Why: Gradescope runs ``run_autograder`` as root in a fresh container per submission and
reads results.json once it returns (gradescope-autograders.readthedocs.io, "Technical
Details"); its default image trusts the student's code entirely, so a submission can
rewrite results.json (github.com/saligrama/securescope, README: it adds a deprivileged
``student`` user to run submissions as). UNSW's ``run_student_code`` likewise runs student
code as a subordinate uid in its own namespaces; otter-grader grades in a Docker container
per submission ("better security by sandboxing", otter-grader docs, "Executing
Submissions"), which a per-test pid and mount namespace stand in for here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import select
import shutil
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Iterator

import psutil

from ..exercises import EXERCISES, REPO_ROOT
from .release import student_source

RUN_PREFIX = "dlsys-grade-"
# the owner's pid namespace (the inode of /proc/self/ns/pid, as the comm layer names its
# /dev/shm segments), pid and start time (centiseconds since boot): a pid alone may be reused
_RUN_NAME = re.compile(rf"^{RUN_PREFIX}(\d+)-(\d+)-(\d+)$")
RUN_ENV = "DLSYS_GRADE_RUN"  # the run's folder, for the sandbox and the untrusted children
COURSE = "course"  # the run folder's course build (``course_build``), which untrusted children import
# The uid an untrusted child runs as: this base plus the pid (in the grader's namespace) of
# the child that drops to it, so two tests never share a uid (RLIMIT_NPROC counts per uid).
# Far above the uids of real users and of nobody (65534); it needs no passwd entry.
UID_BASE = 0x40000000
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
KILL_WAIT_S = 5.0

# <sys/prctl.h>, <sched.h>, <sys/mount.h>
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36
_CLONE_NEWNS, _CLONE_NEWPID = 0x00020000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args) -> None:
    if getattr(_libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _call(
        "mount",
        source.encode(),
        target.encode(),
        fstype and fstype.encode(),
        ctypes.c_ulong(flags),
        data and data.encode(),
    )


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: raised like KeyboardInterrupt so that every ``finally`` runs."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _raise_stopped(signum, frame):
    raise Stopped(signum)


def _start_ticks(pid: int) -> int:
    return round(psutil.Process(pid).create_time() * 100)


def _run_name(pid: int) -> str:
    return f"{RUN_PREFIX}{os.stat('/proc/self/ns/pid').st_ino}-{pid}-{_start_ticks(pid)}"


def _owner_alive(pid: int, ticks: int) -> bool:
    try:
        return _start_ticks(pid) == ticks
    except psutil.NoSuchProcess:
        return False


def sweep_stale(tmp: str | None = None) -> list[Path]:
    """Remove the run folders (copies of the tests and of the student's files) of graders
    that died without cleaning up (SIGKILL); returns them. A folder is stale only if no
    process has its owner's pid *and* start time, and it is ours (same uid and pid
    namespace: a pid we cannot see may be alive in another), so a live run is never touched. Their tests' processes died with their pid
    namespaces (``contain``); where there were none, the uids the run recorded are killed."""
    stale = []
    for path in Path(tmp or tempfile.gettempdir()).glob(f"{RUN_PREFIX}*"):
        name = _RUN_NAME.match(path.name)
        if (
            name
            and int(name.group(1)) == os.stat("/proc/self/ns/pid").st_ino
            and path.is_dir()
            and path.stat().st_uid == os.geteuid()
            and not _owner_alive(int(name.group(2)), int(name.group(3)))
        ):
            if os.geteuid() == 0 and (path / "uids").is_dir():  # tests that ran without namespaces
                for uid in (path / "uids").iterdir():
                    _kill_uid(int(uid.name))
            shutil.rmtree(path, ignore_errors=True)
            stale.append(path)
    return stale


def kill_descendants(pid: int | None = None, spare: set[int] = frozenset()) -> None:
    """SIGKILL every descendant of ``pid`` (default: this process) but the children in
    ``spare`` and theirs (the tests still running), and reap ours."""
    try:
        children = [c for c in psutil.Process(pid).children() if c.pid not in spare]
    except psutil.NoSuchProcess:
        return
    procs = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            procs += [child, *child.children(recursive=True)]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=KILL_WAIT_S)


@contextlib.contextmanager
def grade_run() -> Iterator[Path]:
    """The run's private folder (0711: an unprivileged test reaches its own sub-folder, lists
    nothing). SIGTERM and SIGHUP raise ``Stopped`` meanwhile (in the main thread); on every
    exit every descendant is killed and the folder removed. What a SIGKILL leaves, the next
    run's ``sweep_stale`` removes; the descendants die by their parent-death signals.
    Nested in this process's own run, it is that run."""
    folder = Path(tempfile.gettempdir()) / _run_name(os.getpid())
    if os.environ.get(RUN_ENV) == str(folder):  # inside this process's run already: that run cleans up
        yield folder
        return
    sweep_stale()
    folder.mkdir(mode=0o700)
    folder.chmod(0o711)
    previous = {}
    if threading.current_thread() is threading.main_thread():  # only there can Python handle signals
        previous = {s: signal.signal(s, _raise_stopped) for s in _STOP_SIGNALS}
    outer = os.environ.get(RUN_ENV)
    os.environ[RUN_ENV] = str(folder)
    try:
        yield folder
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if outer is None:
            os.environ.pop(RUN_ENV, None)
        else:
            os.environ[RUN_ENV] = outer
        kill_descendants()
        shutil.rmtree(folder, ignore_errors=True)


def watch_parent(parent_pid: int) -> None:
    """This process gets SIGKILL when ``parent_pid`` (its parent) dies, even by SIGKILL, and
    adopts its orphaned descendants (so ``kill_descendants`` finds a daemon that double-forked)."""
    _call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before the prctl
        os._exit(128 + signal.SIGKILL)
    _call("prctl", _PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def undumpable() -> None:
    """No other process of this user may trace this one, read its memory or reopen its file
    descriptors through /proc (PR_SET_DUMPABLE 0; a fork inherits it): the grader and the
    sandbox call it, for the trusted tests, which a submission run as the same user (not
    root) could otherwise reach."""
    _call("prctl", _PR_SET_DUMPABLE, 0, 0, 0, 0)


def unprivileged_ids(pid: int | None = None) -> tuple[int, int] | None:
    """(uid, gid) that the untrusted child ``pid`` (default: this process) runs as:
    ``UID_BASE + pid``; None when not root (then the child keeps the grader's user)."""
    if os.geteuid() != 0:
        return None
    uid = UID_BASE + (os.getpid() if pid is None else pid)
    return uid, uid


def record_untrusted(pid: int) -> None:
    """Note in the run's folder that the untrusted child ``pid`` runs as its own uid, so
    that the sweep finds that uid's processes if the grader is SIGKILLed."""
    ids = unprivileged_ids(pid)
    if ids is not None and RUN_ENV in os.environ:
        uids = Path(os.environ[RUN_ENV]) / "uids"
        uids.mkdir(mode=0o700, exist_ok=True)
        (uids / str(ids[0])).touch()


def end_untrusted(pid: int) -> None:
    """After the untrusted child ``pid`` ended: kill every process of its uid (needed where
    ``contain`` could not make namespaces: a container without CAP_SYS_ADMIN) and remove its
    files in /dev/shm (the same) and the temporary folder (its mount namespace shares it)."""
    ids = unprivileged_ids(pid)
    if ids is None:
        return
    _kill_uid(ids[0])
    if RUN_ENV in os.environ:
        with contextlib.suppress(FileNotFoundError):
            (Path(os.environ[RUN_ENV]) / "uids" / str(ids[0])).unlink()


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``: kill(-1) from a helper that is that uid reaches all
    of them at once (a fork bomb cannot outrun it); then its files in /dev/shm and the
    temporary folder go."""
    for _ in range(2):  # the second sweeps what was being forked during the first
        helper = os.fork()
        if helper == 0:
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(helper, 0)
    for path in [*Path("/dev/shm").iterdir(), *Path(tempfile.gettempdir()).iterdir()]:
        with contextlib.suppress(FileNotFoundError):
            if path.lstat().st_uid == uid:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def _unshare_namespaces() -> bool:
    """A new mount and pid namespace for this process's children; False where it is not
    allowed (Docker's default seccomp profile and capabilities refuse it)."""
    try:
        _call("unshare", _CLONE_NEWNS | _CLONE_NEWPID)
    except PermissionError:
        return False
    return True


def _reachable(paths: list[Path], uid: int) -> bool:
    return all(_blocked_ancestor(p, uid) is None for p in paths)


def _blocked_ancestor(path: Path, uid: int) -> Path | None:
    """The highest folder above ``path`` that ``uid`` (not its owner) cannot traverse."""
    for folder in reversed(path.parents):
        st = folder.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return folder
    return None


def _expose(needed: list[Path], uid: int) -> None:
    """In this mount namespace, make each of ``needed`` (the interpreter, the packages)
    reachable by ``uid``: a folder above it that others cannot traverse (a 0700 home holding
    pyenv) is covered by an empty tmpfs into which only the needed path is bound back."""
    for _ in range(16):  # each round covers one folder; nested blocks take a few
        blocked = [(a, p) for p in needed if (a := _blocked_ancestor(p, uid)) is not None]
        if not blocked:
            return
        above = blocked[0][0]
        keep = sorted({above / p.relative_to(above).parts[0] for a, p in blocked if a == above})
        fds = [os.open(k, os.O_PATH) for k in keep]
        _mount("tmpfs", str(above), "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
        for k, fd in zip(keep, fds):
            (k.mkdir if Path(f"/proc/self/fd/{fd}").is_dir() else k.touch)()
            _mount(f"/proc/self/fd/{fd}", str(k), None, _MS_BIND | _MS_REC)
            os.close(fd)
    raise RuntimeError(f"cannot expose {needed} to uid {uid}")


def contain(
    memory_bytes: int,
    max_processes: int,
    cover: dict[str, str | None] | None = None,
    writable: tuple[str, ...] = (),
    needed: tuple[str, ...] = (),
) -> None:
    """Call in a forked child of a watched parent (``watch_parent``), or as Popen's
    ``preexec_fn``, before running untrusted code; returns in the process that runs it. As root, where namespaces are allowed: the
    caller becomes a shepherd that waits for its own child, exits with its status and never
    returns; that child is pid 1 of a new pid namespace (its exit kills every process left
    in it), in a new mount namespace (a fresh /proc, a private /dev/shm tmpfs of
    ``memory_bytes``, each folder of ``cover`` showing, read-only, the folder it maps to or
    nothing (None): ``course_cover`` puts the course build where the reference was;
    ``needed`` and the interpreter reachable). As root either way: it runs as
    ``unprivileged_ids()`` of the caller (of the shepherd), owning ``writable``, under
    RLIMIT_NPROC = ``max_processes`` (it counts the uid's tasks, threads included); the
    parent calls ``end_untrusted(pid)`` when it ends. Always: its own session, RLIMIT_AS =
    ``memory_bytes``, SIGKILL when the parent dies."""
    os.setsid()
    parent = os.getppid()
    _call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)
    ids = unprivileged_ids()
    reach = [
        Path(p)
        for p in dict.fromkeys([*needed, sys.base_prefix, sys.prefix, *(p for p in sys.path if os.path.isabs(p))])
        if os.path.exists(p)
    ]
    if ids is not None and _unshare_namespaces():
        _become_namespace_init(memory_bytes, cover or {}, reach, ids[0])
    elif ids is not None and not _reachable(reach, ids[0]):
        ids = None  # no namespace to expose the interpreter in: keep the grader's user
    if ids is not None:
        for path in writable:
            os.chown(path, *ids)
            for folder, dirs, files in os.walk(path):
                for name in [*dirs, *files]:
                    os.chown(os.path.join(folder, name), *ids)
        os.environ["HOME"] = writable[0] if writable else "/"
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if ids is not None:  # per real uid: the grader's own user has processes of its own
        resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
        os.setgroups([])
        os.setgid(ids[1])
        os.setuid(ids[0])
        _call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # changing the uid cleared it


def _become_namespace_init(memory_bytes: int, cover: dict[str, str | None], reach: list[Path], uid: int) -> None:
    """Fork; the caller becomes the shepherd (never returns), the child, pid 1 of the new pid
    namespace, mounts its /proc, its /dev/shm, ``cover`` and makes ``reach`` reachable by ``uid``."""
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)  # nothing we mount leaks to the host
    alive, held = os.pipe()  # the shepherd holds ``held``: EOF on ``alive`` says it died
    init = os.fork()
    if init:  # holds nothing else open (under Popen's preexec_fn its error pipe would wait for it)
        os.closerange(0, held)
        os.closerange(held + 1, os.sysconf("SC_OPEN_MAX"))
        _shepherd(init)
    os.close(held)
    _call("prctl", _PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([alive], [], [], 0)[0]:  # it died before the prctl (getppid() is 0 here)
        os._exit(128 + signal.SIGKILL)
    os.close(alive)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV)  # this namespace's pids
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=1777,size={memory_bytes}")
    for path, shown in cover.items():
        if shown is None:
            _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_RDONLY, "mode=0555,size=4k")
        else:
            _mount(shown, path, None, _MS_BIND | _MS_REC)
            _mount("none", path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    _expose([p for p in reach if p.exists()], uid)


def _shepherd(init: int) -> None:
    """Wait for the namespace's init and exit as it did (a signal's death as 128 + signal)."""
    code = 1
    try:
        _, status = os.waitpid(init, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # die the same way, so the parent reads the signal
            signal.signal(-code, signal.SIG_DFL) if -code != signal.SIGKILL else None
            os.kill(os.getpid(), -code)
            code = 128 - code
    finally:
        os._exit(code)


def course_cover(course: Path) -> dict[str, str | None]:
    """``contain``'s ``cover`` for an untrusted child: the imported dlsys package's folder
    shows the course build ``course``/dlsys (so every path and every later import stays
    valid, stubbed) and the checkout's graded tests' folder, if any, shows nothing."""
    package = Path(sys.modules["dlsys"].__file__).parent
    tests = REPO_ROOT / "tests"  # a checkout's; an installed wheel has none
    return {str(package): str(course / "dlsys"), **({str(tests): None} if tests.is_dir() else {})}


def course_build(dest) -> Path:
    """The package an untrusted child imports, written to ``dest``/dlsys: this checkout's
    dlsys with every solution region replaced by its stub (``release.student_source``), as CMU's needle hands
    students a skeleton. Returns ``dest``: put it first on the child's sys.path."""
    dest = Path(dest)
    package = dest / "dlsys"
    if package.exists():
        raise FileExistsError(f"dest already holds a dlsys package: {package}")
    shutil.copytree(
        REPO_ROOT / "dlsys",
        package,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        copy_function=shutil.copyfile,
    )
    for file in dict.fromkeys(f for e in EXERCISES for f in e.files):
        (dest / file).write_text(student_source((REPO_ROOT / file).read_text(), file))
    for folder, _, files in os.walk(package):  # readable by the unprivileged user, whatever the reference's modes
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return dest
