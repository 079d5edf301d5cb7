"""Hostile submissions: each tries to score without solving token_ring, or to outlive its
test. Each must score 0 and leave no process and no file behind (the untrusted child of
dlsys.grading.untrusted: the verdict is the trusted test's, over a pipe the child cannot reach)."""

import os
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest

from dlsys.exercises import get
from dlsys.grading import isolation
from dlsys.grading.answer import decode, encode
from dlsys.grading.grader import grade, run_tests
from dlsys.grading.untrusted import SubmissionFailed

NODES = [
    "tests/exercises/test_token_ring.py::test_keeps_dtype_and_shape",
    "tests/exercises/test_token_ring.py::test_each_rank_returns_the_token_it_received[2]",
]
WRONG = """
def token_ring(comm, token):
    return None
"""

ATTACKS = {
    # pytest's summary line written to every file descriptor this process and its ancestors hold
    "fd_write": """
import os
def _ancestors():
    pid = os.getpid()
    while pid > 1:
        yield pid
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
for pid in _ancestors():
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            out = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_APPEND)
            os.write(out, b'1 passed in 0.01s\\n{"passed": true, "reason": ""}\\n')
        except OSError:
            pass
os._exit(0)
"""
    + WRONG,
    # pytest's reports, numpy's comparisons and assert patched: in the child only
    "patch_pytest": """
import builtins, numpy, _pytest.reports, _pytest.runner
_pytest.reports.TestReport.passed = property(lambda self: True)
_pytest.reports.TestReport.failed = property(lambda self: False)
_pytest.runner.call_and_report = lambda *a, **k: None
numpy.array_equal = lambda *a, **k: True
builtins.AssertionError = type("AssertionError", (Exception,), {})
"""
    + WRONG,
    "print_and_exit_0": """
import os
print("1 passed in 0.01s")
os._exit(0)
"""
    + WRONG,
    "system_exit": """
def token_ring(comm, token):
    raise SystemExit(0)
""",
    "lying_eq": """
import numpy as np
class Liar(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(other), bool)
    def __ne__(self, other):
        return np.zeros(np.shape(other), bool)
def token_ring(comm, token):
    return np.zeros(token.shape, token.dtype).view(Liar)
""",
    "huge_answer": """
def token_ring(comm, token):
    return ["x" * 1000] * 100_000
""",
    "huge_output": """
import sys
def token_ring(comm, token):
    while True:
        sys.stdout.write("1 passed in 0.01s\\n" * 10000)
""",
    # the grader's processes, signalled or traced
    "kill_the_parent": """
import os, signal
os.kill(os.getppid(), signal.SIGKILL)
"""
    + WRONG,
}

# daemons and forks meant to outlive the test, writing their pids into MARKERS
SURVIVORS = (
    """
import os, time
def _spawn(detach):
    if os.fork() == 0:
        if detach:
            os.setsid()
            if os.fork():
                os._exit(0)
        open(os.path.join(MARKERS, f"{os.getpid()}-{os.urandom(4).hex()}"), "w").close()  # pids repeat across namespaces
        open("/dev/shm/dlsys-hostile-" + str(os.getpid()), "wb").write(b"x" * (1 << 20))
        time.sleep(600)
        os._exit(0)
for detach in (False, True, True):
    _spawn(detach)
time.sleep(0.3)
"""
    + WRONG
)


def student_dir(tmp_path, source: str) -> Path:
    target = tmp_path / get("token_ring").student_file
    target.parent.mkdir(parents=True)
    target.write_text(source)
    return tmp_path


def unprivileged_processes() -> set:
    """The processes of the submissions' uids (``isolation.UID_BASE`` + a pid, when the grader is root)."""
    return {
        p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real >= isolation.UID_BASE
    }


def graded(*args, **kwargs):
    """``run_tests`` in a grading run of its own (its folder holds the course build)."""
    with isolation.grade_run():
        return run_tests(*args, **kwargs)


@pytest.mark.serial
@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_scores_zero(tmp_path, attack):
    before = unprivileged_processes()
    results = graded(NODES, student_dir(tmp_path, ATTACKS[attack]), timeout_s=5, memory_bytes=1 << 30, jobs=2)
    assert [passed for passed, *_ in results] == [False, False], [reason for _, _, reason, _ in results]
    assert unprivileged_processes() <= before, "a process of the submission outlived its test"


@pytest.mark.serial
def test_processes_it_starts_die_with_the_test(tmp_path):
    markers = tempfile.mkdtemp(prefix="dlsys-hostile-")
    os.chmod(markers, 0o777)  # the child runs as a uid of its own when the grader is root
    before = unprivileged_processes()
    try:
        source = f"MARKERS = {markers!r}\n" + SURVIVORS
        results = grade(student_dir(tmp_path, source), ["token_ring"], timeout_s=5)
        assert sum(r.score for r in results) == 0
        pids = [int(p.name.split("-")[0]) for p in Path(markers).iterdir()]
        assert len(pids) == 3 * len(results), "every test's child started its three survivors"
        if os.geteuid() == 0:  # the pids are those of the children's own pid namespaces: look for their uids
            alive = sorted(unprivileged_processes() - before)
        else:
            alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert alive == [], f"still running after grade returned: {alive}"
        if os.geteuid() == 0:  # as another user, the submission's /dev/shm files are not told apart (docs/exercises.md)
            assert not list(Path("/dev/shm").glob("dlsys-hostile-*")), "files the submission left in /dev/shm"
    finally:
        for left in Path(markers).iterdir():
            left.unlink()
        os.rmdir(markers)


def test_a_syntax_error_names_the_file_and_costs_only_its_exercise(tmp_path):
    """topk.py broken: only topk_error_feedback loses points; terngrad (also in dlsys.compress) keeps them."""
    from dlsys.exercises import REPO_ROOT
    from dlsys.grading.release import replace_regions

    for e in (get("terngrad_quantizer"), get("topk_error_feedback")):
        for file, name in zip(e.files, e.student_files):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(replace_regions((REPO_ROOT / file).read_text(), lambda r: r.body))
    topk = tmp_path / "compress/topk.py"
    lines = topk.read_text().splitlines(keepends=True)
    lines[21] = "def broken(:\n"  # a blank line between two methods: a SyntaxError, not an IndentationError
    topk.write_text("".join(lines))
    results = grade(tmp_path, ["terngrad_quantizer", "topk_error_feedback"])
    assert all(r.passed for r in results if r.exercise == "terngrad_quantizer")
    topk_results = [r for r in results if r.exercise == "topk_error_feedback"]
    assert not any(r.passed for r in topk_results)
    assert all(r.reason.startswith("SyntaxError") and "(at compress/topk.py:22)" in r.reason for r in topk_results), (
        topk_results[0].reason
    )


def test_the_backend_environment_variable_does_not_override_a_graded_tests_backend(tmp_path, monkeypatch):
    """DLSYS_BACKEND replaces every launch's backend (a lesson, unchanged, on mpi); a graded
    test's launch(..., "threads") stays on threads: on processes each rank would have its own pid."""
    monkeypatch.setenv("DLSYS_BACKEND", "processes")
    source = (
        (Path(__file__).parents[2] / "dlsys/exercises/token_ring.py")
        .read_text()
        .replace("    # BEGIN SOLUTION token_ring\n", "    assert os.getpid() == IMPORTED_BY, 'not on threads'\n")
        .replace("import numpy as np\n", "import os\nimport numpy as np\nIMPORTED_BY = os.getpid()\n")
    )
    results = graded(NODES[:1], student_dir(tmp_path, source), timeout_s=10, memory_bytes=1 << 30, jobs=1)
    assert results[0][0], results[0][2]


def test_answers_are_plain_data_and_nothing_else():
    value = {
        "a": [1, 2.5, None, "s", True],
        "x": np.arange(6, dtype=np.int32).reshape(2, 3),
        "y": np.float32(2.5),
        "nan": float("nan"),
    }
    import json

    back = decode(json.dumps(encode(value)).encode())
    assert back["x"].dtype == np.int32 and back["x"].shape == (2, 3) and back["y"] == np.float32(2.5)
    assert np.isnan(back["nan"]) and back["a"] == value["a"]
    for forged in (
        np.zeros(2).view(type("Sub", (np.ndarray,), {})),
        np.array([object()]),
        {"__ndarray__": 1},
        {1: 2},
        type("F", (float,), {})(1.0),
        object(),
    ):
        with pytest.raises(TypeError):
            encode(forged)
    for text in (
        b"NaN",
        b'{"__ndarray__": {"dtype": "|O", "shape": [1], "data": "AAAAAAAAAAA="}}',
        b'{"__ndarray__": {"dtype": "<f8", "shape": [4], "data": "AAAAAAAAAAA="}}',
        b'{"__call__": 1}',
    ):
        with pytest.raises(ValueError):
            decode(text)
    assert issubclass(SubmissionFailed, AssertionError)


def edited(tmp_path, exercise: str, reference: str, wrong: str) -> Path:
    """A submission of ``exercise``'s files: the reference with one edit."""
    from dlsys.exercises import REPO_ROOT

    source = (REPO_ROOT / get(exercise).file).read_text()
    assert source.count(reference) == 1
    (tmp_path / get(exercise).student_file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / get(exercise).student_file).write_text(source.replace(reference, wrong))
    return tmp_path


def test_an_exercise_that_builds_on_another_is_graded_on_the_others_reference(tmp_path):
    """ring.py with the reduce-scatter one block off: the all-reduce built on it keeps full marks."""
    student = edited(
        tmp_path,
        "ring_reduce_scatter",
        "send_i, recv_i = (r - step - 1) % p, (r - step - 2) % p",
        "send_i, recv_i = (r - step) % p, (r - step - 1) % p",
    )
    results = grade(student, ["ring_reduce_scatter", "ring_allreduce"])
    assert all(r.passed for r in results if r.exercise == "ring_allreduce")
    assert not all(r.passed for r in results if r.exercise == "ring_reduce_scatter")


def test_a_server_that_forgets_to_average_is_told_so(tmp_path):
    student = edited(
        tmp_path, "ps_aggregation", "self.grad[local] += values / len(self.workers)", "self.grad[local] += values"
    )
    reasons = {r.name.split("::")[1]: r.reason for r in grade(student, ["ps_aggregation"]) if not r.passed}
    assert "3x the reference" in reasons["test_bsp_waits_for_all_w_gradients_then_holds_their_mean"]
    assert "did you average over the workers?" in reasons["test_bsp_waits_for_all_w_gradients_then_holds_their_mean"]
    assert "2x the reference" in reasons["test_every_bsp_round_starts_from_zero"], "not the round reset's fault"
