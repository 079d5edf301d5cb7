"""Run a student's code where it cannot touch the verdict: ``Submission.run(observe, **kwargs)``.

A graded test never runs student code itself. It hands a module-level *observe* function
to ``run``, which forks an untrusted child that: keeps no inherited file descriptor but the
write end of its answer pipe (stdin is /dev/null, stdout and stderr a file in its private
directory); limits its CPU time and file sizes (RLIMIT_CPU, RLIMIT_FSIZE); is contained
(``isolation.contain``: its own session, parent-death signal and RLIMIT_AS; as root a pid and
mount namespace whose files are the course build, not the reference, a private /dev/shm, and
a uid of its own under RLIMIT_NPROC); then execs a fresh interpreter, ``python -m
dlsys.grading.child``, so that nothing of the trusted test's heap (which imported every
exercise's reference, for its oracles) is in its memory. The parent wrote into the child's
private directory all it needs: the files of the exercise under test (the student's, or
the reference's when grading the reference), every exercise's reference file with the
graded exercise's regions stubbed (``testing.use_student_files`` imports the other
exercises from there: each exercise is graded on its own), a copy of the test module that
defines ``observe`` and the call, pickled (this way only: the child's answer is JSON). The
child calls ``observe(**kwargs)`` and writes its return value, or the exception it raised,
as JSON to the pipe.

The parent (the trusted test) reads at most ``MAX_ANSWER_BYTES`` until the test's
deadline, then kills the child's session and every process it left (this process is
their subreaper: PR_SET_CHILD_SUBREAPER; ``isolation.end_untrusted`` kills its uid), and decodes the JSON (answer.py): plain data only (numbers,
strings, lists, dicts, numpy arrays of numbers as {"dtype", "shape", "data"}); nothing of
the child runs here, and an object whose ``__eq__`` lies cannot cross. A failure raises
``SubmissionFailed`` with what the student's code did ("rank 2: NotImplementedError:
token_ring", "timed out after 30 s", "exited without an answer").

As in Gradescope's autograder (run_autograder as root; the docs advise a separate user for
the submission) and otter-grader (the notebook runs in a container), the verdict stays out of
the submission's reach only when the grader is root: as the same user, a submission could
still write the grader's files or trace the trusted test. The threats each measure stops: docs/exercises.md.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib
import json
import os
import pickle
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import psutil

from ..exercises import EXERCISES, REPO_ROOT, Exercise, get
from . import isolation
from .answer import decode
from .release import find_regions, replace_regions, stub
from .testing import locate

MAX_ANSWER_BYTES = 64 << 20  # an answer larger than this is an attack or a bug, not a result
MAX_OUTPUT_CHARS = 2000  # of what the child printed, shown with a failure
MAX_FILE_BYTES = 64 << 20  # RLIMIT_FSIZE: a file the child writes
DEFAULT_MEMORY_BYTES = 1 << 30  # RLIMIT_AS (and /dev/shm) of a child whose test has no limit (plain pytest)
CHILD_PROCESSES = 256  # not root (no uid of its own): RLIMIT_NPROC above the user's tasks now
MAX_PROCESSES = 64  # as root: tasks (processes and threads) the child's own uid may have
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
# the untrusted child's private directory: its call, the files it imports, what it printed
CALL, STUDENT, REFERENCE, OBSERVE, OUTPUT = "call.pickle", "student", "reference", "observe", "output.txt"
_libc = ctypes.CDLL(None, use_errno=True)


def preload() -> None:
    """Import every exercise module's reference (and what they import) once in the trusted
    process, before it forks the tests (the sandbox, the exercises' conftest): their oracles
    use it, and a forked test finds it loaded. An untrusted child never sees it (it execs)."""
    for module in ["dlsys.train", "dlsys.experiments", *(m for e in EXERCISES for m in e.modules)]:
        importlib.import_module(module)


class SubmissionFailed(AssertionError):
    """The student's code raised, hung, or answered nothing; the message says which, in words."""


def prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")


def observe_calls(module: str, calls: list) -> list:
    """An observe function for exercises that are functions: ``module.name(*args)`` for each
    (name, args) of ``calls``. A ValueError (bad input, which some tests ask for) is an answer,
    {"raised": "ValueError", "message": ...}; any other exception fails the run."""
    found = importlib.import_module(module)
    answers = []
    for name, args in calls:
        try:
            answers.append(getattr(found, name)(*args))
        except ValueError as exc:
            answers.append({"raised": "ValueError", "message": str(exc)})
    return answers


def trace_summary(run) -> dict:
    """What a graded test reads of a LaunchResult: values, messages (src, dst, nbytes) and the
    virtual time; plain data for the answer."""
    return {
        "values": run.values,
        "time_s": run.virtual_time_s,
        "messages": [[m.src, m.dst, m.nbytes] for m in run.trace.messages],
    }


# --- the child -------------------------------------------------------------------------


def _where(exc: BaseException | None, private: str) -> str:
    """'collectives/ring.py:12': the deepest frame (or the syntax error) in the student's files."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.filename.startswith(private):
        return f"{os.path.relpath(exc.filename, private)}:{exc.lineno}"
    text = getattr(exc, "rank_traceback", "") or "".join(traceback.format_tb(exc.__traceback__) if exc else [])
    found = re.findall(rf'File "{re.escape(private)}/([^"]+)", line (\d+)', text)
    return f"{found[-1][0]}:{found[-1][1]}" if found else ""


def describe(exc: BaseException, private: str) -> dict:
    """An exception as data: its type, first line, the rank that raised it (a RankFailed's),
    and where in the student's files."""
    rank = getattr(exc, "rank", None)
    if type(exc).__name__ == "RankFailed" and type(rank) is int:
        summary = str(exc.summary)
    else:
        rank, summary = None, f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    text = getattr(exc, "rank_traceback", "") or "".join(traceback.format_exception(exc))
    return {
        "type": type(exc).__name__,
        "summary": summary.splitlines()[0] if summary else type(exc).__name__,
        "rank": rank,
        "where": _where(exc, private),
        "traceback": text.replace(private + "/", "")[-MAX_OUTPUT_CHARS:],
    }


def _limit(cpu_s: float) -> None:
    """The limits ``isolation.contain`` leaves to us: CPU seconds, file sizes, no core dumps,
    and not as root (where ``contain`` limits the child's own uid) the user's processes."""
    limits = [(resource.RLIMIT_CPU, int(cpu_s) + 1), (resource.RLIMIT_FSIZE, MAX_FILE_BYTES), (resource.RLIMIT_CORE, 0)]
    if os.getuid() != 0:  # every task of the user counts toward RLIMIT_NPROC
        limits.append(
            (resource.RLIMIT_NPROC, sum(1 for _ in Path("/proc").glob("[0-9]*/task/[0-9]*")) + CHILD_PROCESSES)
        )
    for limit, value in limits:
        hard = resource.getrlimit(limit)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, hard if os.getuid() == 0 else value))


def enclosing(source: str, line: int) -> str:
    """The qualified name (``KVServer.aggregate``) of the innermost function or method
    around ``line`` (0-based) of ``source``."""
    best, stack = "", [(node, "") for node in ast.parse(source).body]
    while stack:
        node, prefix = stack.pop()
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.lineno - 1 <= line <= (node.end_lineno or node.lineno) - 1
        ):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                best = name
            stack += [(child, f"{name}.") for child in node.body]
    return best


def reference_functions(exercise: Exercise) -> dict[str, list[str]]:
    """{module: functions} of ``exercise``'s modules that hold another exercise's region:
    the child takes the reference's of those, so that each exercise is graded on its own
    (ring_allreduce on the reference reduce-scatter and all-gather, whatever the student's are)."""
    functions = {}
    for module, file in zip(exercise.modules, exercise.files):
        source = (REPO_ROOT / file).read_text()
        functions[module] = sorted(
            {enclosing(source, r.begin) for r in find_regions(source, file) if r.exercise != exercise.id}
        )
    return functions


def reference_files(exercise: Exercise) -> dict[str, str]:
    """{path in a released directory: text} of every exercise's file, the reference with
    ``exercise``'s regions stubbed: what a child grading ``exercise`` imports the others from."""
    files = dict.fromkeys(zip((n for e in EXERCISES for n in e.student_files), (f for e in EXERCISES for f in e.files)))
    return {
        name: replace_regions(
            (REPO_ROOT / file).read_text(), lambda r: stub(r) if r.exercise == exercise.id else r.body, file
        )
        for name, file in files
    }


def write_answer(answer_fd: int, answer: dict, student_dir: str):
    """Never returns: ``answer`` ({"value": v} or {"error": exc}) as JSON on ``answer_fd``, then exit."""
    try:  # whatever the student's exception does when described, this process ends here
        if "error" in answer:
            answer = {"error": describe(answer["error"], student_dir)}
        sys.stdout.flush(), sys.stderr.flush()
        text = json.dumps(answer, allow_nan=False).encode()
        view = memoryview(len(text).to_bytes(8, "big") + text)
        while view:
            view = view[os.write(answer_fd, view) :]
    finally:
        os._exit(0)


def _child(answer_fd: int, private: str, cpu_s: float):
    """Never returns: contained, execs ``python -m dlsys.grading.child`` on ``private``/call.pickle
    (the answer pipe is its descriptor 3); answers the error itself if it cannot."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        output = os.open(os.path.join(private, OUTPUT), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0), os.dup2(output, 1), os.dup2(output, 2)
        os.dup2(answer_fd, 3)  # inheritable, unlike every other descriptor Python opened
        os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # the verdict's pipe, the grader's files: gone
        answer_fd = 3
        signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.pop("DLSYS_BACKEND", None)  # a graded test's backend= is the one it means
        _limit(cpu_s)
        course = Path(os.environ.get(isolation.RUN_ENV, "/nonexistent")) / isolation.COURSE
        memory_bytes = resource.getrlimit(resource.RLIMIT_AS)[0]  # the sandbox's, for the test
        isolation.contain(
            memory_bytes if memory_bytes != resource.RLIM_INFINITY else DEFAULT_MEMORY_BYTES,
            MAX_PROCESSES,
            cover=isolation.course_cover(course) if course.is_dir() else None,
            writable=(private,),
            needed=(private,),
        )
        os.chdir(private)
        if course.is_dir():  # without namespaces (Docker) nothing covers the package: the course build comes first
            os.environ["PYTHONPATH"] = str(course)
        # -P: the private directory (the student's files) is not on sys.path; -B: nothing written to the course build
        os.execv(sys.executable, [sys.executable, "-B", "-P", "-m", "dlsys.grading.child", CALL])
    except BaseException as exc:
        write_answer(answer_fd, {"error": exc}, os.path.join(private, STUDENT))


# --- the parent ------------------------------------------------------------------------


def _read_answer(fd: int, deadline: float) -> tuple[bytes, str]:
    """The child's answer (8 bytes of length, then the JSON): (data, '') or (b'', why not).
    The length, not the end of the pipe, ends it: a process the child started may hold the pipe."""
    data, want, header = b"", 8, True
    while len(data) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", "timeout"
        if not select.select([fd], [], [], left)[0]:
            continue
        chunk = os.read(fd, min(want - len(data), 1 << 20))
        if not chunk:
            return b"", ""
        data += chunk
        if header and len(data) == 8:
            data, want, header = b"", int.from_bytes(data, "big"), False
            if want > MAX_ANSWER_BYTES:
                return b"", f"answered more than {MAX_ANSWER_BYTES >> 20} MiB"
            if want == 0:
                return b"", ""
    return data, ""


def _reap_adopted(ours: set[int]) -> None:
    """Reap the children this subreaper adopted from the child's tree (killed by then: a
    namespace's init orphaned as its parent died), which would stay zombies; never a child it
    had before (another part of this process waits for those)."""
    for child in psutil.Process().children():
        if child.pid not in ours:
            with contextlib.suppress(ChildProcessError, psutil.Error):
                child.wait(timeout=isolation.KILL_WAIT_S)


class Submission:
    """What a graded test runs the student's code through. ``root``: the student's files
    (None: the reference); ``exercise``: the exercise under test (only its files come from
    ``root``); ``timeout_s``: the time all of this test's runs may take together."""

    def __init__(self, root: Path | None, exercise: str, timeout_s: float):
        self.root, self.exercise, self.timeout_s = root, get(exercise), timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.foreign = reference_functions(self.exercise)
        self.reference = reference_files(self.exercise)

    def run(self, observe, **kwargs):
        """``observe(**kwargs)`` run on the student's code in an untrusted child: its
        return value, decoded. Raises SubmissionFailed saying what went wrong."""
        # the private directory inside one of ours (mode 0711): the removal of what the
        # child's uid left in the temporary folder passes over it
        base = tempfile.mkdtemp(prefix="dlsys-untrusted-", dir=os.environ.get(isolation.RUN_ENV))
        os.chmod(base, 0o711)
        try:
            os.mkdir(private := os.path.join(base, "work"), 0o700)
            return self._run(private, observe, kwargs)
        finally:
            shutil.rmtree(base, ignore_errors=True)

    def _run(self, private: str, observe, kwargs: dict):
        self._write_call(Path(private), observe, kwargs)
        read_fd, write_fd = os.pipe()
        sys.stdout.flush(), sys.stderr.flush()
        left_s = max(self.deadline - time.monotonic(), 0.0)
        # adopt what the child orphans only while it runs: a process that stayed a subreaper
        # (pytest running tests/exercises itself) would collect every later orphan as a zombie
        ours = {child.pid for child in psutil.Process().children()}
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(write_fd, private, left_s)
        isolation.record_untrusted(pid)
        os.close(write_fd)
        try:
            data, stopped = _read_answer(read_fd, self.deadline)
        finally:
            os.close(read_fd)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # it leads its own session (``contain``)
            # and what it left to this subreaper (killed and reaped), sparing the children this
            # process had before (a test's own servers or browsers)
            isolation.kill_descendants(spare=ours)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            prctl(PR_SET_CHILD_SUBREAPER, 0)
            _reap_adopted(ours)
            isolation.end_untrusted(pid)
        printed = self._printed(private)
        if stopped == "timeout":
            raise SubmissionFailed(f"timed out after {self.timeout_s:g} s (an infinite loop or a deadlock?){printed}")
        if stopped:
            raise SubmissionFailed(f"the student's code {stopped}{printed}")
        if not data:
            raise SubmissionFailed(
                f"the student's code exited without an answer (os._exit, a signal, or out of memory?){printed}"
            )
        try:
            answer = decode(data)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise SubmissionFailed(f"the student's code wrote an unreadable answer: {exc}"[:300]) from None
        if type(answer) is not dict or set(answer) not in ({"value"}, {"error"}):
            raise SubmissionFailed("the student's code wrote an unreadable answer")
        if "error" in answer:
            error = answer["error"]
            rank = f"rank {error['rank']}: " if error.get("rank") is not None else ""
            where = f" (at {error['where']})" if error.get("where") else ""
            shown = f"\n--- the student's code raised ---\n{error['traceback']}" if error.get("traceback") else ""
            raise SubmissionFailed(f"{rank}{error['summary']}{where}{shown}{printed}")
        return answer["value"]

    def _write_call(self, private: Path, observe, kwargs: dict) -> None:
        """What the child reads (it runs with none of this process's memory): the exercise's
        files (the student's, else the reference's) in ``STUDENT``, the other exercises' in
        ``REFERENCE``, the module defining ``observe`` (unless it is dlsys's) in ``OBSERVE``,
        and the call in ``CALL``."""
        for name, file in zip(self.exercise.student_files, self.exercise.files):
            found = REPO_ROOT / file if self.root is None else locate(self.root, name)
            if found is None:
                raise SubmissionFailed(f"the submission has no {name}")
            (private / STUDENT / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, private / STUDENT / name)
        for name, text in self.reference.items():
            (private / REFERENCE / name).parent.mkdir(parents=True, exist_ok=True)
            (private / REFERENCE / name).write_text(text)
        module, file = observe.__module__, None
        if module.partition(".")[0] != "dlsys":  # a test module: the child's files hide the checkout's tests
            file = f"{OBSERVE}/{Path(sys.modules[module].__file__).name}"
            (private / OBSERVE).mkdir()
            shutil.copyfile(sys.modules[module].__file__, private / file)
        call = {
            "exercise": self.exercise.id,
            "foreign": self.foreign,
            "observe": [module, observe.__qualname__, file],
            "kwargs": pickle.dumps(kwargs),
        }  # unpickled after the student's modules are in place
        (private / CALL).write_bytes(pickle.dumps(call))

    def calls(self, module: str, calls: list) -> list:
        """``module.name(*args)`` on the student's code, for each (name, args) of ``calls``,
        in one child (``observe_calls``)."""
        return self.run(observe_calls, module=module, calls=calls)

    @staticmethod
    def _printed(private: str) -> str:
        path = Path(private) / OUTPUT
        if not path.is_file():
            return ""
        with open(path, errors="replace") as f:
            text = f.read(MAX_OUTPUT_CHARS + 1)
        if not text.strip():
            return ""
        return (
            "\n--- what the student's code printed ---\n"
            + text[:MAX_OUTPUT_CHARS]
            + ("\n[... cut]" if len(text) > MAX_OUTPUT_CHARS else "")
        )
