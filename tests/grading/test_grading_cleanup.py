"""Hostile submissions against the containment of ``dlsys grade`` (docs/exercises.md,
"Threats"): each attack scores 0 and leaves no process, no /dev/shm file and no temporary
folder behind, whichever way the grader ends. A survivor is found by a marker: each attack
execs ``sleep <marker>`` or names its file by it. The namespaces and the unprivileged user
need root; as another user some attacks are not stopped and their tests are skipped."""

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from dlsys.exercises import REPO_ROOT, get
from dlsys.grading import isolation
from dlsys.grading.grader import grade
from dlsys.grading.gradescope import CONFIG
from dlsys.grading.gradescope import run as run_gradescope
from dlsys.grading.release import replace_regions
from dlsys.grading.untrusted import MAX_PROCESSES

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="namespaces and the unprivileged user need root")
WAIT_S = 60.0


@pytest.fixture
def mark():
    """A number ``sleep`` accepts and no other process has on its command line; whatever
    carries it is removed after the test, failed or not."""
    mark = f"{random.randint(5000, 9999)}.{random.randint(10**8, 10**9 - 1)}"
    yield mark
    for proc in survivors(mark):
        with contextlib.suppress(psutil.Error):
            proc.kill()
    for path in Path("/dev/shm").glob(f"*{mark}*"):
        path.unlink()


def token_ring_submission(folder: Path, body: str) -> Path:
    """A student directory whose token_ring region is ``body``; a line ``DAEMON`` in it
    becomes ``daemon``'s lines at its indentation."""
    e = get("token_ring")
    body = textwrap.dedent(body)
    body = "".join(
        textwrap.indent(DAEMON_LINES, line.split("DAEMON")[0]) if line.strip() == "DAEMON" else line
        for line in body.splitlines(keepends=True)
    )
    source = replace_regions((REPO_ROOT / e.file).read_text(), lambda r: textwrap.indent(body, "    "))
    (folder / e.student_file).parent.mkdir(parents=True, exist_ok=True)
    (folder / e.student_file).write_text(source)
    return folder


# double-forks a daemon in a new session, out of the test's process group; ``mark`` is in scope
DAEMON_LINES = """\
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", mark])
    os._exit(0)
"""


def survivors(mark: str) -> list:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if mark in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def our_run_folders(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"{isolation.RUN_PREFIX}*-{pid}-*"))


def assert_nothing_left(mark: str, pid: int = os.getpid()) -> None:
    deadline = time.monotonic() + 5  # a SIGKILLed process is gone once its parent reaps it
    while survivors(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not survivors(mark)
    if ROOT:  # another user's submission runs as that user: its /dev/shm files are not told apart (docs/exercises.md)
        assert not [p for p in Path("/dev/shm").iterdir() if mark in p.name]
    assert not our_run_folders(pid)


def grade_attack(tmp_path, body: str) -> list:
    student = token_ring_submission(tmp_path / "student", body)
    results = grade(student, ["token_ring"], timeout_s=10, memory_bytes=512 << 20, jobs=2, homework=True)
    assert [r.score for r in results] == [0.0] * len(results)
    return results


def test_a_double_forked_daemon_dies_with_its_test(tmp_path, mark):
    results = grade_attack(
        tmp_path,
        f"""
        import os
        mark = "{mark}"
        if comm.rank == 0:
            DAEMON
        raise RuntimeError("daemon started")
    """,
    )
    assert all(
        r.reason.startswith("rank 0: RuntimeError: daemon started (at exercises/token_ring.py:") for r in results
    )
    assert_nothing_left(mark)


@needs_root
def test_a_fork_bomb_stops_at_the_process_limit(tmp_path, mark):
    results = grade_attack(
        tmp_path,
        f"""
        import os
        forked = 0
        if comm.rank == 0:
            try:
                while forked < 1000:
                    if os.fork() == 0:
                        os.execvp("sleep", ["sleep", "{mark}"])
                    forked += 1
            except OSError:
                pass
        raise RuntimeError(f"forked {{forked}}")
    """,
    )
    counts = [int(m.group(1)) for r in results if (m := re.search(r"forked (\d+)", r.reason))]
    assert counts and max(counts) < MAX_PROCESSES
    assert_nothing_left(mark)


@needs_root
def test_a_dev_shm_bomb_is_capped_and_removed(tmp_path, mark):
    results = grade_attack(
        tmp_path,
        f"""
        written = 0
        if comm.rank == 0:
            with open("/dev/shm/dlsys-bomb-{mark}", "wb") as f:
                try:
                    for _ in range(2048):  # 2 GiB
                        f.write(bytes(1 << 20))
                except OSError:
                    pass
                written = f.tell()
        raise RuntimeError(f"wrote {{written}}")
    """,
    )
    written = [int(m.group(1)) for r in results if (m := re.search(r"wrote (\d+)", r.reason))]
    assert written and max(written) <= 512 << 20  # a private /dev/shm of the memory limit
    assert_nothing_left(mark)


@needs_root
def test_the_untrusted_child_sees_the_course_build_not_the_reference(tmp_path):
    """A fresh interpreter started inside ``contain`` (as Popen's preexec_fn) with
    ``course_cover``: the reference's file shows the stub, the graded tests are not there."""
    course = isolation.course_build(tmp_path / "course")
    token_ring = Path(sys.modules["dlsys"].__file__).parent / "exercises" / "token_ring.py"
    probe = f"""if True:
        import json, os
        from dlsys.exercises.token_ring import token_ring
        try:
            token_ring(None, None)
            called = "ran"
        except NotImplementedError as exc:
            called = str(exc)
        print(json.dumps({{"source": open({str(token_ring)!r}).read(), "called": called,
                           "tests": os.listdir({str(REPO_ROOT / "tests")!r}), "uid": os.getuid()}}))
    """
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        preexec_fn=lambda: isolation.contain(
            1 << 30, MAX_PROCESSES, isolation.course_cover(course), needed=(str(course),)
        ),
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["called"].startswith("token_ring: see lessons/")
    assert "BEGIN SOLUTION" not in seen["source"] and "raise NotImplementedError" in seen["source"]
    assert seen["tests"] == [] and seen["uid"] >= isolation.UID_BASE


def test_a_course_build_stubs_every_region(tmp_path):
    course = isolation.course_build(tmp_path)
    for e in map(get, ["token_ring", "ring_allreduce", "topk_error_feedback"]):
        for file in e.files:
            assert "# BEGIN SOLUTION" not in (course / file).read_text()
    with pytest.raises(FileExistsError):
        isolation.course_build(tmp_path)


def test_the_sweep_removes_a_dead_runs_folder_and_never_a_live_one(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    stale = tmp_path / isolation._run_name(dead.pid)
    dead.wait()
    live = tmp_path / isolation._run_name(os.getpid())
    namespace, pid, start = live.name.removeprefix(isolation.RUN_PREFIX).split("-")
    recycled = tmp_path / f"{isolation.RUN_PREFIX}{namespace}-{pid}-{int(start) - 1}"  # our pid, not our start
    elsewhere = tmp_path / f"{isolation.RUN_PREFIX}{int(namespace) + 1}-{dead.pid}-1"  # another pid namespace
    for folder in (live, stale, recycled, elsewhere):
        (folder / "work").mkdir(parents=True)
    assert sorted(isolation.sweep_stale(str(tmp_path))) == sorted([stale, recycled])
    assert live.is_dir() and elsewhere.is_dir()


@needs_root
@pytest.mark.parametrize("ender", ["end_untrusted", "sweep_stale"])
def test_without_namespaces_the_uid_is_killed_and_its_shm_files_removed(tmp_path, ender, mark):
    """Gradescope's Docker container refuses namespaces: a test that ran as its own uid left
    a daemon and a /dev/shm file; ``end_untrusted`` after the test, or the next run's sweep
    after a SIGKILLed grader (the run recorded the uid), kills and removes them."""
    pid = os.fork()
    if pid == 0:
        try:
            uid, gid = isolation.unprivileged_ids()
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            open(f"/dev/shm/dlsys-leak-{mark}", "wb").close()
            if os.fork() == 0:
                os.setsid()
                os.execvp("sleep", ["sleep", mark])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + WAIT_S
    while not survivors(mark):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    if ender == "end_untrusted":
        isolation.end_untrusted(pid)
    else:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        stale = tmp_path / isolation._run_name(dead.pid)
        dead.wait()
        (stale / "uids").mkdir(parents=True)
        (stale / "uids" / str(isolation.unprivileged_ids(pid)[0])).touch()
        assert isolation.sweep_stale(str(tmp_path)) == [stale]
    assert_nothing_left(mark)


def test_results_json_is_written_after_the_submission_is_dead(tmp_path, mark):
    """The Gradescope run in an /autograder-shaped tree: a detached daemon keeps rewriting
    results.json with full marks; the grader's file, written after it died, stands."""
    root = tmp_path / "autograder"
    (root / "source" / "tests" / "exercises").mkdir(parents=True)
    for name in ("conftest.py", "test_token_ring.py"):
        shutil.copyfile(REPO_ROOT / "tests" / "exercises" / name, root / "source" / "tests" / "exercises" / name)
    (root / "source" / CONFIG).write_text(
        json.dumps(
            {
                "name": "hw",
                "exercises": ["token_ring"],
                "files": ["exercises/token_ring.py"],
                "points": 10,
                "visibility": "visible",
                "timeout_s": 10,
                "memory_mib": 512,
                "wheel": "-",
                "commit": "-",
            }
        )
    )
    results = root / "results"
    results.mkdir()
    forged = json.dumps({"score": 10.0, "output": "forged"})
    token_ring_submission(
        root / "submission",
        f"""
        import os, time
        if comm.rank == 0 and os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for _ in range(1200):  # a minute of rewrites, longer than the grader runs
                    try:
                        with open({str(results / "results.json")!r}, "w") as f:
                            f.write({forged!r})
                    except OSError:
                        pass
                    time.sleep(0.05)
                os.execvp("sleep", ["sleep", "{mark}"])
            os._exit(0)
        raise RuntimeError("rewriter started")
    """,
    )
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "dlsys.grading.gradescope", "run", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    time.sleep(1.0)  # a surviving rewriter would strike now
    report = json.loads((results / "results.json").read_text())
    assert report["score"] == 0 and "forged" not in report["output"]
    assert all(t["output"].startswith("rank 0: RuntimeError: rewriter started") for t in report["tests"])
    assert oct((results / "results.json").stat().st_mode & 0o777) == "0o644"
    assert_nothing_left(mark)


def test_the_gradescope_run_in_process_keeps_its_files_in_the_run_folder(tmp_path):
    with pytest.raises(FileNotFoundError):  # no config: nothing made, nothing left
        run_gradescope(tmp_path)
    assert not our_run_folders(os.getpid())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_to_dlsys_grade_mid_run_leaves_nothing(tmp_path, signum, mark):
    """The test hangs after starting a daemon and a /dev/shm file; the grader gets ``signum``."""
    student = token_ring_submission(
        tmp_path / "student",
        f"""
        import os
        mark = "{mark}"
        if comm.rank == 0:
            open("/dev/shm/dlsys-leak-{mark}", "wb").write(bytes(1 << 20))
            DAEMON
        while True:
            pass
    """,
    )
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    grader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlsys.cli",
            "grade",
            str(student),
            "--exercise",
            "token_ring",
            "--timeout-s",
            "120",
            "--jobs",
            "1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not survivors(mark):
            assert time.monotonic() < deadline and grader.poll() is None, "the attack never started"
            time.sleep(0.1)
        grader.send_signal(signum)
        code = grader.wait(30)
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait()
    assert code == ({signal.SIGINT: 130, signal.SIGKILL: -9}.get(signum, 128 + signum)), grader.stderr.read()
    if signum == signal.SIGKILL:
        if not ROOT:
            pytest.skip("as another user than root, a daemon outlives a SIGKILLed grader")
        isolation.sweep_stale()  # what the next dlsys grade does first
    assert_nothing_left(mark, grader.pid)


@needs_root
def test_reading_the_reference_scores_zero(tmp_path):
    """The reference's file (the course build's stub over it) run as the student's answer."""
    token_ring = Path(sys.modules["dlsys"].__file__).parent / "exercises" / "token_ring.py"
    grade_attack(
        tmp_path,
        f"""
        found = {{}}
        exec(compile(open({str(token_ring)!r}).read(), "reference", "exec"), found)
        return found["token_ring"](comm, token)
    """,
    )


def test_calling_the_reference_in_memory_scores_zero(tmp_path):
    """The trusted test imported the reference (its oracles); the child, a fresh interpreter, never did."""
    grade_attack(
        tmp_path,
        """
        import sys
        seen, todo = set(), [*sys.modules.values(), *sys.meta_path]
        while todo:  # every object reachable from a module or an import hook
            obj = todo.pop()
            if id(obj) in seen or type(obj).__name__ in ("str", "bytes", "int", "float", "ndarray"):
                continue
            seen.add(id(obj))
            if getattr(obj, "__name__", "") == "token_ring" and callable(obj) and \\
                    "NotImplementedError" not in getattr(getattr(obj, "__code__", None), "co_names", ("NotImplementedError",)):
                return obj(comm, token)
            if isinstance(obj, dict):
                todo += obj.values()
            elif isinstance(obj, (list, tuple, set)):
                todo += obj
            elif hasattr(obj, "__dict__") and isinstance(obj.__dict__, dict):
                todo += obj.__dict__.values()
        raise NotImplementedError("token_ring")
    """,
    )


def test_calling_the_reference_code_in_the_heap_scores_zero(tmp_path):
    """Every function in the heap, and the code objects inside them: none comes from the reference's file."""
    grade_attack(
        tmp_path,
        """
        import gc, types
        gc.unfreeze()  # a frozen heap (gc.freeze) is not in gc.get_objects()
        codes = [f.__code__ for f in gc.get_objects() if isinstance(f, types.FunctionType)]
        codes += [c for code in codes for c in code.co_consts if isinstance(c, types.CodeType)]
        for code in codes:
            if code.co_name == "token_ring" and code.co_filename.endswith("dlsys/exercises/token_ring.py") and \\
                    "NotImplementedError" not in code.co_names:
                return types.FunctionType(code, globals())(comm, token)
        raise NotImplementedError("token_ring")
    """,
    )


def _observe_rank_count(ranks: int) -> int:
    from dlsys import launch

    return len(launch(lambda comm: comm.rank, ranks).values)


def test_a_submission_kills_what_its_child_left_but_not_this_process_s_other_children(mark):
    """The test process may run servers or browsers of its own; the submission's clean-up
    kills only its child's tree (and the orphans it adopted meanwhile)."""
    from dlsys.grading.untrusted import Submission

    own = subprocess.Popen(["sleep", mark])
    try:
        assert Submission(None, "token_ring", 30.0).run(_observe_rank_count, ranks=2) == 2
        assert own.poll() is None, "the submission killed a child it did not start"
    finally:
        own.kill()
        own.wait()
