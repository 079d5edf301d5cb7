"""Run graded tests, each in a forked child of this process, under a time and a memory limit:

    python -m dlsys.grading.sandbox < spec.json

The spec is {"tests": [pytest node ids], "pytest_args": [...], "jobs": int,
"kill_after_s": float, "grader_pid": int, "memory_bytes": int, "max_processes": int,
"out_dir": str, "work_dir": str, "files":
{relative path: text}, "student_dir": relative path or null}. This process imports pytest,
pytest-timeout, numpy and the Communicator once (never an exercise module: the children
import those, from the student's files), then forks one child per test, at most ``jobs``
at a time. A child writes ``files`` (the graded tests and the student's files, read
before any student code ran) into its own directory ``work_dir/<i>``, is contained
(``isolation.contain``: its own session, RLIMIT_AS, and as root its own pid and mount
namespace and uid) and runs there, so a submission that deletes
files (its own, the tests, the working directory) spoils only that test. It writes its
output to ``out_dir/<i>.txt`` and, if the test fails with an exception, that exception's
one-line reason to ``out_dir/<i>.reason``, and runs pytest on its one test; one still
running ``kill_after_s`` after it started is killed with its process group.
Forking saves each test the half second of starting Python and importing pytest. Prints
one JSON list: per test, its exit code (negative: killed by that signal), whether it was
killed for time, and its seconds. Interrupted (SIGINT, SIGTERM), it kills the children's
process groups first: they lead their own sessions, so nothing else would. It dies with
the grader (``isolation.watch_parent``) and adopts what its tests orphan, killed at the end.
"""

import contextlib
import json
import os
import signal
import sys
import time

import numpy  # noqa: F401 - imported once here, inherited by every child
import pytest
import pytest_timeout

from dlsys.comm import RankFailed  # and so the Communicator and the link models; never the exercise modules
from dlsys.grading import isolation
from dlsys.grading.testing import STUDENT_DIR_ENV

POLL_S = 0.005
MAX_REASON_CHARS = 200


def reason(exc: BaseException) -> str:
    """One line: 'NotImplementedError: ring_allreduce', an assertion's message, or for a
    failed rank 'rank 0: NotImplementedError: token_ring' (not RankFailed's traceback)."""
    if isinstance(exc, RankFailed):
        text = f"rank {exc.rank}: {exc.summary}"
    else:
        lines = str(exc).strip().splitlines()
        text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 3] + "..."


class _Reason:
    """A pytest plugin writing the reason of the test's first exception to the file ``fd``
    (opened before the test dropped its rights: it may not reach the folder)."""

    def __init__(self, fd: int):
        self.fd, self.written = fd, False

    def pytest_exception_interact(self, node, call, report):
        if not self.written:
            os.write(self.fd, reason(call.excinfo.value).encode())
            self.written = True


def _write_files(work: str, files: dict) -> None:
    for relative, text in files.items():
        path = os.path.join(work, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def _child(i: int, node: str, spec: dict) -> None:
    code = 3
    out_path = os.path.join(spec["out_dir"], f"{i}.txt")
    try:  # whatever happens, this process ends here: never back in the parent's loop
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's handler is not the test's
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1), os.dup2(out, 2)  # first: the grader reads this file whatever fails below
        reason_fd = os.open(out_path.removesuffix(".txt") + ".reason", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        work = os.path.join(spec["work_dir"], str(i))
        _write_files(work, spec["files"])
        isolation.contain(spec["memory_bytes"], spec["max_processes"], writable=(work,))
        os.chdir(work)
        if spec["student_dir"] is not None:
            os.environ[STUDENT_DIR_ENV] = os.path.join(work, spec["student_dir"])
        # pytest-timeout as the imported module, not "-p pytest_timeout": pytest would try to
        # rewrite the asserts of a module imported already and warn (PytestAssertRewriteWarning)
        code = pytest.main([*spec["pytest_args"], node], plugins=[pytest_timeout, _Reason(reason_fd)])
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(int(code))


def run(spec: dict) -> list[dict]:
    """Run every test of the spec; one result dict per test, in the spec's order."""
    pending = list(enumerate(spec["tests"]))
    running: dict[int, tuple[int, float]] = {}  # pid -> (index, start)
    killed: set[int] = set()
    results: list = [None] * len(pending)
    try:
        _loop(spec, pending, running, killed, results)
    finally:
        for pid in running:  # interrupted: the children lead their own sessions, no signal reaches them
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for pid in running:
            os.waitpid(pid, 0)
            isolation.end_untrusted(pid)
        isolation.kill_descendants()  # what the tests left and this subreaper adopted
    return results


def _loop(spec, pending, running, killed, results) -> None:
    while pending or running:
        while pending and len(running) < spec["jobs"]:
            i, node = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(i, node, spec)
            isolation.record_untrusted(pid)
            running[pid] = (i, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid in running:  # not a daemon this subreaper adopted
            isolation.end_untrusted(pid)
            i, start = running.pop(pid)
            results[i] = {"code": os.waitstatus_to_exitcode(status), "timed_out": pid in killed,
                          "seconds": time.monotonic() - start}
            continue
        for pid, (i, start) in running.items():
            if pid not in killed and time.monotonic() - start > spec["kill_after_s"]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # the child leads its own session
                killed.add(pid)
        time.sleep(POLL_S)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # the grader stops us so: run's finally kills the children
    try:
        spec = json.load(sys.stdin)
        isolation.watch_parent(spec["grader_pid"])  # a SIGKILLed grader takes us, and so our tests, down
        print(json.dumps(run(spec)))
    except KeyboardInterrupt:
        sys.exit(130)  # the children are gone (run's finally); the grader reports the interrupt
