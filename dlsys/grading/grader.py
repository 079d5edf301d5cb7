"""Grade a submission: every graded test in its own process, then a score table, a
one-line reason per failed test (``TestResult.reason``: the exception's line, or the
timeout) and Gradescope's results.json.

``sandbox.py`` runs each test in a forked, trusted child, in its own session, with a
timeout (pytest-timeout reports every thread's stack; the process group is killed if it
outlives the grace) and a memory limit (RLIMIT_AS). The test runs the student's code only
through ``untrusted.Submission``: in a child of its own, which answers plain data, so an
infinite loop, a deadlocked ring, a memory bomb or a forged answer costs that one test. The
tests are always the reference checkout's, never the submission's copy. Each test is worth
an equal share of its exercise's points. A test passes only if the trusted pytest says its
call passed, over a pipe the student's code cannot reach, and its process exits 0 (a skip
is not a pass). ``isolation.py`` keeps what a test starts from outliving it and the reference
out of the student's reach (a pid and mount namespace showing the course build, a uid of its
own, as root) and ``isolation.grade_run`` every exit of the grader clean (docs/exercises.md,
"Threats").
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..exercises import EXERCISES, REPO_ROOT, Exercise, get
from ..outputs import write_atomic
from . import isolation
from .testing import STUDENT_EXERCISES_ENV, TIMEOUT_ENV, locate

TIMEOUT_S = 30.0
MEMORY_BYTES = 1 << 30
MAX_OUTPUT_CHARS = 4000
_KILL_GRACE_S = 5.0  # pytest-timeout reports first (every thread's stack); the kill is the backstop
# Entry-point plugins (hypothesis, anyio) cost a second per process; the tests need none.
_ENV = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
_PYTEST_ARGS = ["-p", "no:cacheprovider", "-q", "--no-header", "--tb=short", "-rN"]  # the sandbox adds pytest-timeout
_TIMEOUT_BANNER = re.compile(r"^\++ Timeout \++$", re.MULTILINE)  # pytest-timeout's, before it ends the process
_STOP_GRACE_S = 10.0  # an interrupted sandbox kills its tests, then exits


@dataclass
class TestResult:
    name: str  # pytest node id
    exercise: str
    passed: bool
    score: float
    max_score: float
    seconds: float
    output: str  # pytest's full report
    reason: str = ""  # why it failed, one line ("NotImplementedError: ring_allreduce")


def collect(exercises: list[Exercise], root: Path = REPO_ROOT) -> list[tuple[Exercise, str]]:
    """(exercise, node id) of every graded test of ``exercises``, from the tests under ``root``
    (the reference checkout's, or an autograder bundle's copy of them)."""
    # --rootdir: node ids relative to root, where a bundle has no pyproject.toml to say so
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-p",
        "pytest_timeout",
        *_PYTEST_ARGS,
        f"--rootdir={root}",
        *(e.tests for e in exercises),
    ]
    done = subprocess.run(cmd, cwd=root, env=os.environ | _ENV, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"collecting the graded tests failed:\n{done.stdout}{done.stderr}")
    by_file = {e.tests: e for e in exercises}
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    return [(by_file[node.split("::")[0]], node) for node in ids]


def _clip(text: str) -> str:
    """At most MAX_OUTPUT_CHARS: the head (a timeout dumps the ranks' stacks first) and the tail."""
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    head = MAX_OUTPUT_CHARS * 2 // 5
    return f"{text[:head]}\n[... {len(text) - MAX_OUTPUT_CHARS} characters left out ...]\n{text[head - MAX_OUTPUT_CHARS :]}"


def _graded_files(root: Path, student_dir: Path | None) -> dict[str, str]:
    """What every test's private directory holds: the graded tests and the student's files."""
    files = {f"tests/exercises/{t.name}": t.read_text() for t in sorted((root / "tests" / "exercises").glob("*.py"))}
    if student_dir is not None:
        names = sorted({n for e in EXERCISES for n in e.student_files})
        files |= {
            f"submission/{n}": found.read_text(errors="replace")
            for n in names
            if (found := locate(student_dir, n)) is not None
        }
    return files


def run_tests(
    nodes: list[str],
    student_dir: Path | None,
    timeout_s: float,
    memory_bytes: int,
    jobs: int,
    root: Path = REPO_ROOT,
    student_exercises: list[str] | None = None,
) -> list[tuple[bool, str, str, float]]:
    """Run graded tests in the sandbox, ``jobs`` at a time: (passed, output, reason, seconds) each.
    ``student_exercises``: the exercises whose modules come from ``student_dir`` (default: all).
    Call inside ``isolation.grade_run()``: the copies of the tests and of the student's files
    go into its folder, which no exit leaves behind."""
    env = os.environ | _ENV
    if student_exercises is not None:
        env[STUDENT_EXERCISES_ENV] = ",".join(student_exercises)
    env[TIMEOUT_ENV] = f"{timeout_s:g}"  # the student's runs in a test, together (untrusted.Submission)
    kill_after_s = timeout_s + 2 * _KILL_GRACE_S
    isolation.undumpable()  # as the same user, a submission would write into our pipe from the sandbox
    course = Path(os.environ[isolation.RUN_ENV]) / isolation.COURSE
    if not course.exists():  # the untrusted children import it (a run grading twice builds it once)
        isolation.course_build(course)
    with (
        tempfile.TemporaryDirectory(prefix="out-", dir=os.environ[isolation.RUN_ENV]) as out_dir,
        tempfile.TemporaryDirectory(prefix="work-", dir=os.environ[isolation.RUN_ENV]) as work_dir,
    ):
        os.chmod(work_dir, 0o711)  # an untrusted child reaches its own folder in it, lists nothing
        spec = {
            "tests": nodes,
            "jobs": jobs,
            "kill_after_s": kill_after_s,
            "grader_pid": os.getpid(),
            "memory_bytes": memory_bytes,
            "out_dir": out_dir,
            "work_dir": work_dir,
            "files": _graded_files(root, student_dir),
            "student_dir": None if student_dir is None else "submission",
            "pytest_args": [*_PYTEST_ARGS, f"--timeout={timeout_s + _KILL_GRACE_S:g}", "--timeout-method=thread"],
        }
        budget_s = (math.ceil(len(nodes) / jobs) + 1) * (kill_after_s + 1) + 60
        code, stdout, stderr = _run_sandbox(json.dumps(spec), env, budget_s)
        if code != 0:
            raise RuntimeError(f"the grading sandbox failed:\n{stdout}{stderr}")
        results = []
        for i, r in enumerate(json.loads(stdout)):
            output = (Path(out_dir) / f"{i}.txt").read_text(errors="replace")
            reason = ""
            if r["timed_out"] or (not r["reason"] and _TIMEOUT_BANNER.search(output)):
                reason = f"timed out after {timeout_s:g} s (an infinite loop or a deadlock?)"
                output += f"\n{reason}" + (": killed" if r["timed_out"] else "")
            elif r["code"] < 0:
                reason = f"killed by signal {-r['code']}"
                output += f"\n{reason}"
            passed = r["passed"] and r["code"] == 0  # the trusted test process's verdict, over its own pipe
            reason = reason or r["reason"]
            if not passed and not reason:  # a skip, or a failure outside any test: pytest's last line says
                reason = next((line.strip("= ") for line in reversed(output.splitlines()) if line.strip()), "no output")
            results.append((passed, _clip(output), "" if passed else reason, r["seconds"]))
    return results


def _run_sandbox(spec: str, env: dict, budget_s: float) -> tuple[int, str, str]:
    """The sandbox's exit code, stdout and stderr. Interrupted (Ctrl-C, or SIGTERM and SIGHUP
    as ``isolation.Stopped``), first stop the sandbox with SIGTERM so that it kills its tests
    (they lead their own sessions, and subprocess.run would SIGKILL it at once, leaving them
    running), then re-raise. SIGKILLed, the sandbox dies by its parent-death signal."""
    with subprocess.Popen(
        [sys.executable, "-m", "dlsys.grading.sandbox"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(spec, timeout=budget_s)
        except BaseException:
            proc.terminate()
            try:
                proc.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    return proc.returncode, stdout, stderr


def grade(
    student_dir=None,
    exercise_ids=None,
    timeout_s: float = TIMEOUT_S,
    memory_bytes: int = MEMORY_BYTES,
    jobs: int | None = None,
    root: Path = REPO_ROOT,
    homework: bool = False,
) -> list[TestResult]:
    """Run the graded tests of ``exercise_ids`` (default: all) against the student files in
    ``student_dir`` (default: the reference). ``jobs`` tests run at once (default: CPUs).
    ``root`` holds tests/exercises/. A ``homework`` takes only its exercises' files from the
    submission; the other exercise modules stay the reference."""
    exercises = [get(i) for i in exercise_ids] if exercise_ids else list(EXERCISES)
    if student_dir is not None:
        student_dir = Path(student_dir).resolve()
        if not student_dir.is_dir():
            raise ValueError(f"DIR must be a directory holding the student files, got {str(student_dir)!r}")
    if not (timeout_s > 0 and memory_bytes > 0 and (jobs is None or jobs >= 1)):
        raise ValueError(
            f"timeout_s and memory_bytes must be > 0 and jobs >= 1, got {timeout_s!r}, {memory_bytes!r}, {jobs!r}"
        )
    with isolation.grade_run():
        tests = collect(exercises, root)
        present = [
            (e, node)
            for e, node in tests
            if student_dir is None or all(locate(student_dir, name) for name in e.student_files)
        ]
        ran = dict(
            zip(
                present,
                run_tests(
                    [node for _, node in present],
                    student_dir,
                    timeout_s,
                    memory_bytes,
                    jobs or os.cpu_count() or 1,
                    root,
                    [e.id for e in exercises] if homework else None,
                ),
            )
        )
    results = []
    for exercise, node in tests:
        if (exercise, node) in ran:
            passed, output, reason, seconds = ran[exercise, node]
        else:
            missing = (
                f"the submission has no {', '.join(n for n in exercise.student_files if not locate(student_dir, n))}"
            )
            passed, output, reason, seconds = False, missing, missing, 0.0
        max_score = exercise.points / sum(1 for e, _ in tests if e is exercise)
        results.append(
            TestResult(node, exercise.id, passed, max_score if passed else 0.0, max_score, seconds, output, reason)
        )
    return results


def score_table(results: list[TestResult]) -> str:
    """One row per exercise: tests passed, points; then the total."""
    rows = [f"{'exercise':<22} {'tests passed':>12} {'points':>14}"]
    for exercise in EXERCISES:
        mine = [r for r in results if r.exercise == exercise.id]
        if mine:
            passed = sum(r.passed for r in mine)
            score, max_score = sum(r.score for r in mine), sum(r.max_score for r in mine)
            rows.append(f"{exercise.id:<22} {f'{passed}/{len(mine)}':>12} {f'{score:.2f}/{max_score:.2f}':>14}")
    total, max_total = sum(r.score for r in results), sum(r.max_score for r in results)
    rows.append(
        f"{'total':<22} {f'{sum(r.passed for r in results)}/{len(results)}':>12} {f'{total:.2f}/{max_total:.2f}':>14}"
    )
    return "\n".join(rows)


def gradescope_results(results: list[TestResult]) -> dict:
    """Gradescope's results.json: score, max_score, and one entry per test."""
    return {
        "score": round(sum(r.score for r in results), 6),
        "max_score": round(sum(r.max_score for r in results), 6),
        "tests": [
            {
                "name": r.name,
                "score": round(r.score, 6),
                "max_score": round(r.max_score, 6),
                "status": "passed" if r.passed else "failed",
                "output": r.output,
                "tags": [r.exercise],
            }
            for r in results
        ],
    }


def write_results_json(results: list[TestResult], path) -> None:
    write_atomic(path, json.dumps(gradescope_results(results), indent=2))
