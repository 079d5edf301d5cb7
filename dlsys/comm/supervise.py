"""Run supervision, the same on every backend: wait for the ranks, never hang.

A backend starts the ranks of a ``RunSpec`` and calls ``supervise`` with the run's status
board; supervise returns when every rank has finished, and raises instead of hanging:
``RankFailed`` (a rank raised or died; raised by the backend's ``finished``),
``DeadlockError`` (every live rank waits and no message is in flight, dlsys.comm.board)
or ``RunTimeout``, a TimeoutError (the run's wall-clock deadline passed). Each message says
what every unfinished rank was doing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..machine.ledger import MemoryLedger
from ..machine.topology import Topology
from .board import FROM, deadlock_report, stalled, status_report
from .replay.oplog import OpLog


class RankFailed(RuntimeError):
    """A rank raised or died; ``rank`` says which, ``rank_traceback`` shows where."""

    def __init__(self, rank: int, summary: str, rank_traceback: str = ""):
        self.rank, self.summary, self.rank_traceback = rank, summary, rank_traceback
        text = f"rank {rank} failed: {summary}"
        super().__init__(text + (f"\n--- traceback of rank {rank} ---\n{rank_traceback}" if rank_traceback else ""))


class DeadlockError(RuntimeError):
    """Every live rank waits for a message that no rank will send."""


class RunTimeout(TimeoutError):
    """The run's deadline passed: 'the run did not finish within timeout_s=5: rank 0 computing;
    rank 1 waits for rank 0 (tag 3)'. ``ranks`` is the part after the colon; supervise knows
    it, and launch, which knows ``timeout_s``, completes the message."""

    def __init__(self, ranks: str, timeout_s: float | None = None):
        self.ranks = ranks
        within = "before its deadline" if timeout_s is None else f"within timeout_s={timeout_s:g}"
        super().__init__(f"the run did not finish {within}: {ranks}")


class RunSpec(NamedTuple):
    """Everything a rank needs to run its program (it travels to processes by value)."""

    program: Callable
    args: tuple
    kwargs: dict
    size: int
    network: Topology  # the link between every pair of ranks
    nodes: tuple
    seed: int
    charge_reductions: bool
    record: bool
    deadline: float  # time.monotonic() after which the run is abandoned
    log_ops: bool = False  # keep each rank's operations for a replay (dlsys.comm.replay)
    log_labels: bool = True  # with the labels of sends: the replay records a trace
    eager_limit_bytes: int | None = None  # sends above it are synchronous (launch's eager_limit_bytes)


class Outcome(NamedTuple):
    """What a rank returns to the launcher."""

    value: Any
    spans: list
    messages: list
    clock_s: float
    ops: OpLog | None = None  # the rank's operations in program order (RunSpec.log_ops)
    memory: MemoryLedger | None = None  # the rank's ledger, if its program used comm.memory


def supervise(
    board: np.ndarray,
    finished: Callable[[], bool],
    wait: Callable[[float], Any],
    deadline: float,
    poll_s: float = 0.1,
    confirm_s: float = 0.5,
) -> None:
    """Wait until ``finished()``; raise DeadlockError or RunTimeout instead of hanging.

    ``finished`` raises RankFailed itself. A deadlock is reported only after the board has
    stayed unchanged for ``confirm_s`` (a woken rank may not have been scheduled yet).
    """
    seen = None  # (the board's state columns, first seen at)
    while not finished():
        # Only the cheap test runs at every poll: a 512-rank ring stalls for a moment each
        # time a rank finishes, and building the report's text cost 2.6 ms of GIL each time.
        # The state columns change whenever a rank blocks, wakes or moves a message.
        if not stalled(board):
            seen = None
        elif seen is None or not np.array_equal(seen[0], board[:, :FROM]):
            seen = (board[:, :FROM].copy(), time.monotonic())
        elif time.monotonic() - seen[1] >= confirm_s:
            raise DeadlockError(f"deadlock: no rank can make progress: {deadlock_report(board)}")
        if time.monotonic() > deadline:
            raise RunTimeout(status_report(board))
        wait(poll_s)
