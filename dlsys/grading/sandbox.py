"""Run graded tests, each in a forked child of this process, under a time and a memory limit:

    python -m dlsys.grading.sandbox < spec.json

The spec is {"tests": [pytest node ids], "pytest_args": [...], "jobs": int,
"kill_after_s": float, "grader_pid": int, "memory_bytes": int, "out_dir": str, "work_dir":
str, "files": {relative path: text}, "student_dir": relative path or null}. This process imports pytest,
pytest-timeout, numpy and dlsys once, then forks one child per test, at most ``jobs`` at a
time. A child is trusted: it runs pytest on its one test, and the test runs the student's
code only in an untrusted grandchild (``untrusted.Submission``, which ``isolation.contain``s
it). A child stays root (so the grandchild, another uid, can neither trace it nor reopen its
pipes), starts its own session, dies with this process (PR_SET_PDEATHSIG), limits its
address space (RLIMIT_AS), keeps no file descriptor of the other tests,
writes ``files`` (the graded tests and the student's files, read before any student code
ran) into its own directory ``work_dir/<i>`` and runs there. Its output goes to
``out_dir/<i>.txt`` (for people); its verdict (passed, and the one-line reason of its first
exception) to a pipe that only this process reads. One still running ``kill_after_s`` after
it started is killed with its process group, and what its untrusted children left is killed
here (this process is their subreaper, ``isolation.watch_parent``: it also dies with the
grader). Forking saves each test the half second of starting
Python and importing pytest. Prints one JSON list: per test, its exit code (negative:
killed by that signal), whether it was killed for time, its seconds, and the verdict.
Interrupted (SIGINT, SIGTERM), it kills the children's process groups first: they lead
their own sessions, so nothing else would.
"""

import contextlib
import json
import os
import resource
import signal
import sys
import time

import numpy  # noqa: F401 - imported once here, inherited by every child
import pytest
import pytest_timeout

from dlsys.comm.supervise import RankFailed
from dlsys.grading import isolation, untrusted
from dlsys.grading.testing import STUDENT_DIR_ENV

untrusted.preload()

POLL_S = 0.005
MAX_REASON_CHARS = 200


def reason(exc: BaseException) -> str:
    """One line: 'NotImplementedError: ring_allreduce', an assertion's message, or for a
    failed rank 'rank 0: NotImplementedError: token_ring' (not RankFailed's traceback);
    a SubmissionFailed's own message (it says what the student's code did)."""
    if isinstance(exc, RankFailed):
        text = f"rank {exc.rank}: {exc.summary}"
    elif isinstance(exc, untrusted.SubmissionFailed):
        text = str(exc).strip().splitlines()[0]
    else:
        lines = str(exc).strip().splitlines()
        text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


class _Verdict:
    """A pytest plugin: whether the test passed (its call passed, no phase failed) and the
    reason of its first exception. It lives in the trusted test process, which runs no
    student code (untrusted.Submission does, in a child), so nothing of the student's reaches it."""

    def __init__(self):
        self.called = self.failed = False
        self.reason = ""

    def pytest_runtest_logreport(self, report):
        self.failed |= report.failed
        self.called |= report.when == "call" and report.passed

    def pytest_exception_interact(self, node, call, report):
        self.reason = self.reason or reason(call.excinfo.value)


def _write_files(work: str, files: dict) -> None:
    for relative, text in files.items():
        path = os.path.join(work, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def _child(i: int, node: str, spec: dict, verdict_fd: int) -> None:
    code, verdict = 3, _Verdict()
    out_path = os.path.join(spec["out_dir"], f"{i}.txt")
    try:  # whatever happens, this process ends here: never back in the parent's loop
        os.setsid()
        untrusted.prctl(untrusted.PR_SET_PDEATHSIG, signal.SIGKILL)  # the sandbox's finally may never run
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's handler is not the test's
        resource.setrlimit(resource.RLIMIT_AS, (spec["memory_bytes"], spec["memory_bytes"]))
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1), os.dup2(out, 2)  # first: the grader reads this file whatever fails below
        os.dup2(verdict_fd, 3)
        os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # the other tests' pipes, the grader's files
        verdict_fd = 3
        work = os.path.join(spec["work_dir"], str(i))
        _write_files(work, spec["files"])
        os.chdir(work)
        if spec["student_dir"] is not None:
            os.environ[STUDENT_DIR_ENV] = os.path.join(work, spec["student_dir"])
        # pytest-timeout as the imported module, not "-p pytest_timeout": pytest would try to
        # rewrite the asserts of a module imported already and warn (PytestAssertRewriteWarning)
        code = pytest.main([*spec["pytest_args"], node], plugins=[pytest_timeout, verdict])
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        with contextlib.suppress(OSError):
            os.write(
                verdict_fd,
                json.dumps(
                    {"passed": code == 0 and verdict.called and not verdict.failed, "reason": verdict.reason}
                ).encode(),
            )
        os._exit(int(code))


def run(spec: dict) -> list[dict]:
    """Run every test of the spec; one result dict per test, in the spec's order."""
    pending = list(enumerate(spec["tests"]))
    running: dict[int, tuple[int, float, int]] = {}  # pid -> (index, start, read end of its verdict pipe)
    killed: set[int] = set()
    results: list = [None] * len(pending)
    try:
        _loop(spec, pending, running, killed, results)
    finally:
        for pid in running:  # interrupted: the children lead their own sessions, no signal reaches them
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        isolation.kill_descendants()  # the tests, and what they left to this subreaper
    return results


def _read_verdict(fd: int) -> dict:
    """The test process's verdict; a test that died before writing it failed."""
    with contextlib.suppress(OSError, ValueError):
        os.set_blocking(fd, False)
        verdict = json.loads(os.read(fd, 1 << 16))
        os.close(fd)
        return {"passed": verdict["passed"] is True, "reason": str(verdict["reason"])}
    os.close(fd)
    return {"passed": False, "reason": ""}


def _loop(spec, pending, running, killed, results) -> None:
    while pending or running:
        while pending and len(running) < spec["jobs"]:
            i, node = pending.pop(0)
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                _child(i, node, spec, write_fd)
            os.close(write_fd)
            running[pid] = (i, time.monotonic(), read_fd)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid and pid in running:
            i, start, read_fd = running.pop(pid)
            results[i] = {
                "code": os.waitstatus_to_exitcode(status),
                "timed_out": pid in killed,
                "seconds": time.monotonic() - start,
                **_read_verdict(read_fd),
            }
            isolation.kill_descendants(spare=set(running))  # what a killed test's untrusted child left here
            continue
        if pid:
            continue  # a stray, reaped
        for pid, (i, start, _) in running.items():
            if pid not in killed and time.monotonic() - start > spec["kill_after_s"]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # the child leads its own session
                killed.add(pid)
        time.sleep(POLL_S)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    isolation.undumpable()  # no process of this user reads our memory or reopens our pipes
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # the grader stops us so: run's finally kills the children
    try:
        spec = json.load(sys.stdin)
        isolation.watch_parent(spec["grader_pid"])  # a SIGKILLed grader takes us, and so our tests, down
        print(json.dumps(run(spec)))
    except KeyboardInterrupt:
        sys.exit(130)  # the children are gone (run's finally); the grader reports the interrupt
