"""The playground: a student's own rank program, run in the grader's sandbox.

``run_program(source, ranks, link, topology, nbytes)`` runs ``def program(comm): ...``
(mpi4py style: ``comm.rank``, ``comm.size``, ``comm.send``/``comm.recv`` and the other
point-to-point calls with mpi4py's signatures, ``MPI.ANY_SOURCE``, ``MPI.ANY_TAG`` and
``MPI.Status``, ``dlsys.collectives``) on ``ranks`` thread ranks, never in the calling process: the
untrusted child of ``untrusted.Submission`` (a fresh interpreter, ``isolation.contain``:
its own session, parent-death signal, RLIMIT_AS, RLIMIT_CPU; as root its own pid and mount
namespace, /dev/shm and uid) runs ``observe_program`` and answers plain JSON data. The
trusted side kills the child's whole session at ``time_limit_s``, so an infinite loop or a
fork bomb costs only the run.

What comes back (``PlaygroundRun``): each rank's value as a short repr, the trace as
records (``Trace.records``) and the virtual time; or an error in words: a deadlock names
every rank and the (source, tag) it waits on (the launcher's ``DeadlockError``), an
exception names the rank and the line of the student's code, a timeout what each rank was
doing. ``closed_form_s`` evaluates the student's formula in p, n, alpha, beta with ``ast``
(arithmetic and log2/ceil/floor only), never ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
import pickle
import re
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..checks import check_int
from ..comm.board import ANY_SOURCE, ANY_TAG
from ..comm.launch import launch
from ..comm.request import Status
from ..comm.supervise import DeadlockError, RankFailed, RunTimeout
from ..comm.trace import Message, Span, Trace
from ..machine.topology import get_network
from .untrusted import CALL, DEFAULT_MEMORY_BYTES, Submission, SubmissionFailed

MPI = SimpleNamespace(ANY_SOURCE=ANY_SOURCE, ANY_TAG=ANY_TAG, Status=Status)  # mpi4py's names a program uses
PROGRAM_FILE = "<your program>"  # the student's code's file name in tracebacks
TIME_LIMIT_S = 20.0  # wall clock for one run, the child's start included
MEMORY_BYTES = DEFAULT_MEMORY_BYTES  # RLIMIT_AS of the child (and its /dev/shm under a namespace)
MAX_RANKS = 16
MAX_NBYTES = 1 << 20  # the real arrays the starters make: n bytes per rank
REPORT_S = 4.0  # the launcher's deadline comes this much before the kill, to say who waited
VALUE_CHARS = 120  # of a rank's value's repr

TOKEN_RING = '''\
def program(comm):
    """Pass a token once around the ring 0 -> 1 -> ... -> p-1 -> 0; each rank adds 1.
    comm.recv() receives from any rank (mpi4py's default source): here only the left
    neighbour ever sends, so it is the token. comm.recv(source=left) says so."""
    right = (comm.rank + 1) % comm.size
    token = np.zeros(n // 8)  # n bytes of float64
    if comm.rank == 0:
        comm.send(token + 1, dest=right)
        return comm.recv()[0]
    received = comm.recv()
    comm.send(received + 1, dest=right)
    return received[0]
'''

NAIVE_ALLREDUCE = '''\
def program(comm):
    """Everyone sends its whole array to everyone, then adds what it received."""
    x = np.full(n // 8, comm.rank + 1.0)
    for other in range(comm.size):
        if other != comm.rank:
            comm.send(x, dest=other)
    total = x.copy()
    for other in range(comm.size):
        if other != comm.rank:
            total += comm.recv(source=other)
    return total[0]
'''

RING_ALLREDUCE = '''\
from dlsys import collectives


def program(comm):
    """The ring all-reduce (reduce-scatter, then all-gather) of dlsys.collectives."""
    x = np.full(n // 8, comm.rank + 1.0)
    return collectives.allreduce(comm, x, algorithm="ring")[0]
'''

SSEND_SHIFT = '''\
def program(comm):
    """Shift an array one rank to the right with a synchronous send: the classic deadlock.
    ssend returns only once the receiver has posted its receive, and every rank is in
    ssend, so none reaches its recv. The fix, one line: return comm.sendrecv(x, dest=right,
    source=left)[0] (or comm.send: buffered, so it returns at once)."""
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    x = np.full(n // 8, float(comm.rank))
    comm.ssend(x, dest=right)
    return comm.recv(source=left)[0]
'''

# name: (source, closed form in p, n, alpha, beta or "" where none is exact)
STARTERS = {
    "token ring": (TOKEN_RING, "p * (alpha + n * beta)"),
    "naive all-reduce": (NAIVE_ALLREDUCE, ""),
    "ring all-reduce": (RING_ALLREDUCE, "2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta"),
    "ssend deadlock (fix it)": (SSEND_SHIFT, "alpha + n * beta"),  # the form of the fixed shift
}


# --- the child: runs the program ------------------------------------------------------


def _line(text: str) -> int | None:
    """The last line of the student's code in a traceback's text."""
    found = re.findall(rf'File "{re.escape(PROGRAM_FILE)}", line (\d+)', text)
    return int(found[-1]) if found else None


WAIT = re.compile(
    r"rank (\d+) waits for (rank \d+|any rank)(?: \((?:tag (\d+)|any tag)\)|( to receive its synchronous send))"
)


def _waits(report: str) -> list[dict]:
    """[{"rank", "source" (None: any), "tag" (None: any, or a synchronous send's match),
    "text"}] from the board's 'rank 1 waits for rank 0 (tag 3)', '... (any tag)' and 'rank 0
    waits for rank 1 to receive its synchronous send' (dlsys.comm.board.waits_text)."""
    return [
        {
            "rank": int(m[1]),
            "source": None if m[2] == "any rank" else int(m[2].split()[1]),
            "tag": None if m[3] is None else int(m[3]),
            "text": m[0],
        }
        for m in WAIT.finditer(report)
    ]


def _short(value) -> str:
    """A rank's value as a short repr: 4.0, not np.float64(4.0); arrays cut to a few items."""
    if isinstance(value, np.generic):
        value = value.item()
    with np.printoptions(threshold=8, precision=6, edgeitems=3):
        text = repr(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def observe_program(source: str, ranks: int, link: str, topology: str, nbytes: int, timeout_s: float) -> dict:
    """In the untrusted child: compile and run ``source``'s ``program`` on ``ranks`` thread
    ranks; plain data back ({"values", "spans", "messages", "time_s"} or {"error"})."""
    try:
        code = compile(source, PROGRAM_FILE, "exec")
    except SyntaxError as exc:
        return {"error": {"kind": "syntax", "message": f"SyntaxError: {exc.msg}", "line": exc.lineno}}
    namespace = {"__name__": "playground", "np": np, "n": nbytes, "MPI": MPI}
    try:
        exec(code, namespace)  # the sandboxed child: the student's code is meant to run here
    except Exception as exc:
        return {
            "error": {
                "kind": "exception",
                "rank": None,
                "message": f"{type(exc).__name__}: {exc}",
                "line": _line("".join(traceback.format_tb(exc.__traceback__))),
            }
        }
    program = namespace.get("program")
    if not callable(program):
        return {
            "error": {
                "kind": "exception",
                "rank": None,
                "line": None,
                "message": "the code defines no function program(comm)",
            }
        }
    try:
        run = launch(program, ranks, "threads", link=link, topology=topology, timeout_s=timeout_s)
    except DeadlockError as exc:
        return {"error": {"kind": "deadlock", "message": str(exc), "waits": _waits(str(exc))}}
    except RunTimeout as exc:
        return {
            "error": {
                "kind": "timeout",
                "waits": _waits(exc.ranks),
                "message": f"the ranks did not finish within {timeout_s:g} s (an infinite loop?): {exc.ranks}",
            }
        }
    except RankFailed as exc:
        return {
            "error": {"kind": "exception", "rank": exc.rank, "message": exc.summary, "line": _line(exc.rank_traceback)}
        }
    spans, messages = run.trace.records()
    return {
        "values": [_short(v) for v in run.values],
        "spans": spans,
        "messages": messages,
        "time_s": run.virtual_time_s,
    }


# --- the trusted side -----------------------------------------------------------------


class _Sandbox(Submission):
    """``Submission``'s child and its limits with no exercise: the child imports dlsys as it
    is and calls ``observe_program`` (a dlsys function: no test module to copy)."""

    def __init__(self, timeout_s: float):
        self.root, self.exercise, self.timeout_s = None, None, timeout_s
        self.deadline = time.monotonic() + timeout_s

    def _write_call(self, private: Path, observe, kwargs: dict) -> None:
        call = {
            "exercise": None,
            "foreign": {},
            "observe": [observe.__module__, observe.__qualname__, None],
            "kwargs": pickle.dumps(kwargs),
        }
        (private / CALL).write_bytes(pickle.dumps(call))


@dataclass
class PlaygroundRun:
    """One run's plain data: ``values`` (a repr per rank), ``trace``, ``time_s``; or
    ``error`` ({"kind": "syntax" | "exception" | "deadlock" | "timeout" | "sandbox", "message", ...})."""

    values: list[str] = field(default_factory=list)
    trace: Trace | None = None
    time_s: float | None = None
    error: dict | None = None


_one_at_a_time = threading.Lock()  # a run makes this process a subreaper for a while: one run at a time


def run_program(
    source: str,
    ranks: int,
    link: str = "tcp-10gbe",
    topology: str = "flat",
    nbytes: int = 1024,
    time_limit_s: float = TIME_LIMIT_S,
) -> PlaygroundRun:
    """Run ``source``'s ``program(comm)`` on ``ranks`` ranks in the sandbox (module doc),
    within ``time_limit_s`` of wall clock and ``MEMORY_BYTES`` of address space (the
    untrusted child's default, which a process without RLIMIT_AS gives it)."""
    ranks = check_int("ranks", ranks, 2, MAX_RANKS)
    nbytes = check_int("nbytes", nbytes, 8, MAX_NBYTES)
    get_network(topology, link, "topology").check_nodes(ranks, "ranks")  # a bad name: ValueError, here
    if not isinstance(source, str):
        raise ValueError(f"source must be the program's text, got {type(source).__name__}")
    if not time_limit_s > REPORT_S:
        raise ValueError(f"time_limit_s must be > {REPORT_S:g}, got {time_limit_s!r}")
    kwargs = dict(
        source=source, ranks=ranks, link=link, topology=topology, nbytes=nbytes, timeout_s=time_limit_s - REPORT_S
    )
    try:
        with _one_at_a_time:
            answer = _Sandbox(time_limit_s).run(observe_program, **kwargs)
    except SubmissionFailed as exc:
        message = str(exc)
        if message.startswith("timed out"):
            message = (
                f"the program did not end within the time limit of {time_limit_s:g} s and was "
                f"killed (an infinite loop outside the ranks?)" + message.partition("?)")[2]
            )
        return PlaygroundRun(error={"kind": "timeout" if "timed out" in str(exc) else "sandbox", "message": message})
    if "error" in answer:
        return PlaygroundRun(error=answer["error"])
    trace = Trace([Span(**s) for s in answer["spans"]], [Message(**m) for m in answer["messages"]], ranks)
    return PlaygroundRun(answer["values"], trace, answer["time_s"])


def describe_error(error: dict) -> str:
    """An error in a sentence for the page."""
    kind = error["kind"]
    if kind == "deadlock":
        waits = "; ".join(w["text"] for w in error["waits"])
        return f"Deadlock: every rank that has not finished waits for a message no rank will send. {waits}."
    if kind in ("exception", "syntax"):
        rank = f"rank {error['rank']} raised " if error.get("rank") is not None else ""
        line = f" at line {error['line']} of your program" if error.get("line") else ""
        memory = f" (the sandbox allows {MEMORY_BYTES >> 20} MiB)" if error["message"].startswith("MemoryError") else ""
        return f"{rank}{error['message'].rstrip(': ')}{line}{memory}."
    return error["message"]


# --- the closed form: arithmetic only ---------------------------------------------------

NAMES = ("p", "n", "alpha", "beta")
FUNCTIONS = {"log2": math.log2, "ceil": math.ceil, "floor": math.floor}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_FORMULA_CHARS = 300


def closed_form_s(text: str, p: int, n: int, alpha: float, beta: float) -> float:
    """The value of ``text``, an expression of p, n (bytes), alpha (s), beta (s per byte)
    with + - * / // % **, numbers and log2/ceil/floor; anything else (a name, an attribute,
    ``__import__``) is a ValueError naming it. Evaluated over floats by walking the tree:
    no ``eval``, and a huge power is an OverflowError turned into a ValueError."""
    if len(text) > MAX_FORMULA_CHARS:
        raise ValueError(f"the closed form is longer than {MAX_FORMULA_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"the closed form is not an expression: {exc.msg}") from None
    values = {"p": float(p), "n": float(n), "alpha": float(alpha), "beta": float(beta)}

    def value(node) -> float:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in values:
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return float(_BINARY[type(node.op)](value(node.left), value(node.right)))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](value(node.operand))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FUNCTIONS
            and len(node.args) == 1
            and not node.keywords
        ):
            return float(FUNCTIONS[node.func.id](value(node.args[0])))
        shown = ast.get_source_segment(text.strip(), node) or type(node).__name__
        raise ValueError(
            f"the closed form may use numbers, + - * / // % **, the names {', '.join(NAMES)} and "
            f"{', '.join(FUNCTIONS)}(...); not {shown!r}"
        )

    try:
        return value(tree.body)
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("the closed form"):
            raise
        raise ValueError(f"the closed form cannot be computed: {exc}") from None
