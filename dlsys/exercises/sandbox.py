"""Run graded tests, each in a forked child of this process, under a time and a memory limit:

    python -m dlsys.exercises.sandbox < spec.json

The spec is {"tests": [pytest node ids], "pytest_args": [...], "jobs": int,
"kill_after_s": float, "memory_bytes": int, "out_dir": str}. This process imports pytest,
numpy and the Communicator once (never an exercise module: the children import those,
from the student's files), then forks one child per test, at most ``jobs`` at a time.
A child starts its own session, limits its address space (RLIMIT_AS), writes its output to
``out_dir/<i>.txt`` and runs pytest on its one test; one still running ``kill_after_s``
after it started is killed with its process group. Forking saves each test the half
second of starting Python and importing pytest. Prints one JSON list: per test, its exit
code (negative: killed by that signal), whether it was killed for time, and its seconds.
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
import pytest_timeout  # noqa: F401

import dlsys  # noqa: F401 - the Communicator and the link models; never the exercise modules

POLL_S = 0.005


def _child(node: str, spec: dict, out_path: str) -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (spec["memory_bytes"], spec["memory_bytes"]))
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1), os.dup2(out, 2)
    code = 3
    try:
        code = pytest.main([*spec["pytest_args"], node])
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(int(code))


def run(spec: dict) -> list[dict]:
    """Run every test of the spec; one result dict per test, in the spec's order."""
    pending = list(enumerate(spec["tests"]))
    running: dict[int, tuple[int, float]] = {}  # pid -> (index, start)
    killed: set[int] = set()
    results: list = [None] * len(pending)
    while pending or running:
        while pending and len(running) < spec["jobs"]:
            i, node = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(node, spec, os.path.join(spec["out_dir"], f"{i}.txt"))
            running[pid] = (i, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
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
    return results


if __name__ == "__main__":
    print(json.dumps(run(json.load(sys.stdin))))
