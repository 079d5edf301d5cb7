"""``launch``: run one rank program on every rank of a world, on a chosen backend.

    result = dlsys.launch(program, world_size=4, backend="processes", link="rdma-edr")
    result.values          # each rank's return value
    result.trace           # the virtual-time trace (dlsys.comm.trace.Trace)
    result.virtual_time_s  # the emulated makespan
    result.wall_time_s     # how long it really took here

Input is checked before any rank starts. Nothing hangs: a failing or killed rank fails the
run with its traceback, a deadlock (every live rank waiting, nothing in flight) is detected
and reported, and the whole run has a wall-clock deadline.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..net import LinkModel, NodeModel, get_link, get_node
from .communicator import BLOCKED, DONE, POSTED, PULLED, RELEASE, RUNNING, STATE, WAIT_SRC, WAIT_TAG
from .trace import Trace

BACKENDS = ("threads", "processes")
MAX_THREAD_RANKS = 4096
MAX_PROCESS_RANKS = 256


class RankFailed(RuntimeError):
    """A rank raised or died; ``rank`` says which, ``rank_traceback`` shows where."""

    def __init__(self, rank: int, summary: str, rank_traceback: str = ""):
        self.rank, self.summary, self.rank_traceback = rank, summary, rank_traceback
        text = f"rank {rank} failed: {summary}"
        super().__init__(text + (f"\n--- traceback of rank {rank} ---\n{rank_traceback}" if rank_traceback else ""))


class DeadlockError(RuntimeError):
    """Every live rank waits for a message that no rank will send."""


class RunSpec(NamedTuple):
    program: Callable
    args: tuple
    kwargs: dict
    size: int
    link: LinkModel
    nodes: tuple
    seed: int
    charge_reductions: bool
    record: bool
    deadline: float  # time.monotonic() after which the run is abandoned


class Outcome(NamedTuple):
    value: Any
    spans: list
    messages: list
    clock_s: float


@dataclass
class LaunchResult:
    values: list
    trace: Trace
    clocks_s: list
    wall_time_s: float
    backend: str
    link: LinkModel
    nodes: tuple

    @property
    def virtual_time_s(self) -> float:
        """Emulated makespan: the latest final clock of any rank."""
        return max(self.clocks_s)

    @property
    def world_size(self) -> int:
        return len(self.values)


def _check_int(name, value, low, high):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return int(value)


def launch(program: Callable, world_size: int, backend: str = "processes", *,
           link: str | LinkModel = "tcp-10gbe", node: str | NodeModel | Sequence = "laptop-cpu",
           seed: int = 0, args: tuple = (), kwargs: dict | None = None,
           charge_reductions: bool = False, record: bool = True,
           timeout_s: float = 600.0) -> LaunchResult:
    """Run ``program(comm, *args, **kwargs)`` on ``world_size`` ranks and collect the results.

    ``node`` is one node model for all ranks or a sequence of one per rank (a straggler is
    ``get_node("v100").slowed(4)``). ``charge_reductions`` adds n * gamma for every reduced
    byte. ``record=False`` skips the trace (faster for huge emulations).
    """
    if not callable(program):
        raise TypeError(f"program must be a callable program(comm, ...), got {type(program).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    limit = MAX_THREAD_RANKS if backend == "threads" else MAX_PROCESS_RANKS
    size = _check_int("world_size", world_size, 1, limit)
    seed = _check_int("seed", seed, 0, 2**63 - 1)
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s < math.inf):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of extra arguments, got {type(args).__name__}")
    if isinstance(node, (str, NodeModel)):
        nodes = (get_node(node),) * size
    else:
        nodes = tuple(get_node(n) for n in node)
        if len(nodes) != size:
            raise ValueError(f"node: a sequence of node models needs one per rank ({size}), got {len(nodes)}")
    spec = RunSpec(program, tuple(args), dict(kwargs or {}), size, get_link(link), nodes, seed,
                   bool(charge_reductions), bool(record), time.monotonic() + timeout_s)
    start = time.perf_counter()
    if backend == "threads":
        outcomes = run_threads(spec)
    else:
        from .processes import run_processes
        outcomes = run_processes(spec)
    wall = time.perf_counter() - start
    spans = [s for o in outcomes for s in o.spans]
    messages = sorted((m for o in outcomes for m in o.messages), key=lambda m: (m.arrive_s, m.dst, m.src))
    return LaunchResult([o.value for o in outcomes], Trace(spans, messages, size),
                        [o.clock_s for o in outcomes], wall, backend, spec.link, nodes)


def deadlock_report(board: np.ndarray) -> str | None:
    """Who waits for whom, if every live rank waits and no message is in flight."""
    states = board[:, STATE]
    if (states == RUNNING).any() or (states == DONE).all():
        return None
    if board[:, POSTED].sum() != board[:, PULLED].sum():
        return None
    waits = [_waiting(r, board[r]) for r in range(len(board)) if states[r] == BLOCKED]
    done = [str(r) for r in range(len(board)) if states[r] == DONE]
    return "; ".join(waits) + (f"; finished: ranks {', '.join(done)}" if done else "")


def _waiting(rank: int, row: np.ndarray) -> str:
    src, tag = int(row[WAIT_SRC]), int(row[WAIT_TAG])
    if tag == RELEASE:
        return (f"rank {rank} waits for rank {src} to drop the array rank {rank} lent it "
                f"(isend of comm.alloc memory completes only then)")
    return f"rank {rank} waits for " + (f"rank {src}" if src >= 0 else "any rank") + f" (tag {tag})"


def supervise(board: np.ndarray, finished: Callable[[], bool], wait: Callable[[float], Any],
              deadline: float, poll_s: float = 0.1, confirm_s: float = 0.5) -> None:
    """Wait until ``finished()``; raise DeadlockError or TimeoutError instead of hanging.

    ``finished`` raises RankFailed itself. A deadlock is reported only after the board has
    stayed unchanged for ``confirm_s`` (a woken rank may not have been scheduled yet).
    """
    seen = None  # (report, board snapshot, first seen at)
    while not finished():
        report = deadlock_report(board)
        if report is None:
            seen = None
        elif seen is None or seen[0] != report or not np.array_equal(seen[1], board):
            seen = (report, board.copy(), time.monotonic())
        elif time.monotonic() - seen[2] >= confirm_s:
            raise DeadlockError(f"deadlock: no rank can make progress: {report}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the run did not finish before its deadline (timeout_s); board: {report or 'ranks still running'}")
        wait(poll_s)


# --- the threads backend: every rank a thread of this process -------------------------

class _ThreadTransport:
    def __init__(self, boxes, rank):
        self.boxes, self.rank = boxes, rank
        self.take = boxes[rank].take  # bound once: one call less per receive

    def post(self, dst, header, array, lend=False):
        self.boxes[dst].deliver(header, array.copy())  # the sender may reuse its buffer

    @property
    def mailbox(self):
        return self.boxes[self.rank]


def run_threads(spec: RunSpec) -> list[Outcome]:
    from .baton import Baton, BatonCondition
    from .communicator import Aborted, Communicator, Mailbox, board_row, board_width

    board = np.zeros((spec.size, board_width(spec.size)))
    baton = Baton(spec.size)  # ranks take turns: see dlsys/comm/baton.py for why
    boxes = [Mailbox(r, board, BatonCondition(baton, r, board_row(board, r))) for r in range(spec.size)]
    outcomes: list = [None] * spec.size
    failures: dict = {}
    changed = threading.Event()

    def body(rank):
        baton.enter(rank)
        comm = Communicator(rank, spec.size, _ThreadTransport(boxes, rank), spec.link,
                            spec.nodes[rank], spec.seed, spec.deadline, board,
                            spec.charge_reductions, spec.record)
        try:
            value = spec.program(comm, *spec.args, **spec.kwargs)
            outcomes[rank] = Outcome(value, comm.spans, comm.messages, comm.clock)
        except Aborted:
            pass
        except BaseException as exc:  # noqa: BLE001 - any rank failure fails the run
            failures[rank] = (exc, traceback.format_exc())
        finally:
            board[rank, STATE] = DONE
            baton.leave(rank)
            changed.set()

    def finished():
        if failures:
            rank = min(failures)
            exc, tb = failures[rank]
            raise RankFailed(rank, f"{type(exc).__name__}: {exc}", tb) from exc
        return all(o is not None for o in outcomes)

    def wait(timeout):
        changed.wait(timeout)
        changed.clear()

    threads = [threading.Thread(target=body, args=(r,), name=f"dlsys-rank-{r}", daemon=True)
               for r in range(spec.size)]
    try:
        for t in threads:
            t.start()
        baton.start()
        supervise(board, finished, wait, spec.deadline)
    finally:
        for box in boxes:
            box.abort()
        baton.close()
        for t in threads:
            t.join(timeout=1.0)
    return outcomes
