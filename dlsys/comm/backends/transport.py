"""What a backend is: a way to run a world of ranks, and each rank's transport.

Everything about time lives above the backend, in the Communicator and its VirtualClock:
a transport only moves (header, array) pairs between mailboxes and waits. So a new
backend (MPI next) is one file with a ``Transport`` and a ``Backend``, plus one entry in
the registry, ``dlsys.comm.backends.BACKENDS``.

A backend's ``run(spec)`` must:

* start ``spec.size`` ranks; rank r builds its Communicator with ``rank_communicator(spec, r,
  transport, board)``, runs ``spec.program(comm, *spec.args, **spec.kwargs)`` and hands back
  ``Outcome(value, comm.spans, comm.messages, comm.clock, comm.ops, comm.used_memory)``;
* give every rank and the launcher the same status board (dlsys.comm.board; shared memory
  across processes), set a rank's STATE to DONE when it ends, and wait with
  ``supervise(board, finished, wait, spec.deadline)``, whose ``finished`` raises
  RankFailed with the rank's traceback if a rank raised or died;
* on every way out (success, failure, deadlock, deadline, Ctrl-C) abort the ranks still
  waiting, and leave no thread, process or operating-system resource behind.

Values and traces must equal those of the threads backend for the same program and seed
(tests/test_golden.py holds every backend to the recorded ones).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from ..board import DONE, STATE
from ..board import least_pending as board_least_pending
from ..board import silent as board_silent
from ..communicator import Communicator
from ..mailbox import Header, Mailbox
from ..supervise import Outcome, RunSpec


def rank_communicator(spec: RunSpec, rank: int, transport: Transport, board: np.ndarray) -> Communicator:
    """Rank ``rank``'s Communicator for the run ``spec``, the same on every backend."""
    return Communicator(
        rank,
        spec.size,
        transport,
        spec.network,
        spec.nodes[rank],
        spec.seed,
        spec.deadline,
        board,
        spec.charge_reductions,
        spec.record,
        spec.log_ops,
        spec.log_labels,
        spec.eager_limit_bytes,
    )


class Transport(ABC):
    """One rank's end of a backend, as its Communicator uses it.

    Every wait takes a deadline (time.monotonic()) and raises TimeoutError past it, and
    Aborted (dlsys.comm.mailbox) when the run is torn down. While it waits, the rank is
    BLOCKED on the status board with whom it waits for, so the launcher can name a
    deadlock. ``dlsys.comm.mailbox.Mailbox`` does all of this (see MailboxTransport).
    """

    @abstractmethod
    def post(self, dst: int, header: Header, array: np.ndarray, lend: bool = False) -> int | None:
        """Deliver (header, array) to rank dst's mailbox and return at once (sends are
        buffered); the caller may reuse ``array`` afterwards, so copy it, unless ``lend``
        and it is memory from ``alloc``: then the backend may hand dst that memory itself
        and returns a loan number, which ``wait_released`` waits on. Otherwise None."""

    def hand_over(self, dst: int, header: Header, array: np.ndarray, lend: bool = False) -> int | None:
        """``post`` of an array that neither its sender nor its receiver will ever write
        (``Communicator.shift(handover=True)``): a backend whose ranks share memory may
        pass it without a copy. Others copy, as ``post`` does."""
        return self.post(dst, header, array, lend)

    @abstractmethod
    def take(self, src: int, tag: int, deadline: float) -> tuple[Header, np.ndarray]:
        """The next message from src with this tag, in posting order; waits for it."""

    @abstractmethod
    def wait_any(self, tag: int, choose: Callable, deadline: float) -> int:
        """Wait until ``choose(head)`` returns a source and return it (recv_any).

        ``head(src, tag)`` is the header of the next message from src with this tag that
        ``take`` would return, or None. ``choose`` reads the status board too, which
        changes without a delivery: ask it again at every delivery and every few ms."""

    @abstractmethod
    def wait_released(self, loan: int, dst: int, deadline: float) -> None:
        """Wait until dst has dropped the array of loan ``loan`` (a lent isend completes)."""

    def silent(self, board: np.ndarray, src: int, me: int) -> bool:
        """Nothing more can come from src to me before I send again (recv_any's rule).
        Ranks that share the status board read it there (``board.silent``); a backend
        whose ranks share no memory answers it otherwise (the mpi backend asks along the
        chain of waits)."""
        return board_silent(board, src, me)

    def least_pending(self, board: np.ndarray) -> tuple[float, int, int] | None:
        """(arrival, dst, src) of the least pending message if every unfinished rank waits
        in a receive and nothing is in flight, (inf, -1, -1) if nothing is pending, else None
        (``board.least_pending``; the mpi backend gathers the rows it reads)."""
        return board_least_pending(board)

    def finished(self, board: np.ndarray, src: int) -> bool:
        """Rank src has finished its program (as far as this rank can know)."""
        return board[src, STATE] == DONE

    def alloc(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """Zeroed memory that ``post(lend=True)`` may lend (comm.alloc); plain by default."""
        return np.zeros(shape, dtype)


class MailboxTransport(Transport):
    """A transport whose messages land in this rank's ``Mailbox``: post delivers there
    (directly, or through a pipe a reader thread drains), the waits are the mailbox's."""

    def __init__(self, mailbox: Mailbox):
        self.mailbox = mailbox

    def take(self, src, tag, deadline):
        return self.mailbox.take(src, tag, deadline)

    def wait_any(self, tag, choose, deadline):
        return self.mailbox.wait_any(tag, choose, deadline)

    def wait_released(self, loan, dst, deadline):
        self.mailbox.wait_released(loan, dst, deadline)


class Backend(ABC):
    """A way to run a world: ``name`` (what ``launch(backend=...)`` and the CLI accept),
    ``max_ranks`` (launch refuses more) and ``run``."""

    name: str
    max_ranks: int

    def unavailable(self) -> str | None:
        """Why this backend cannot run here (what to install), or None."""
        return None

    @abstractmethod
    def run(self, spec: RunSpec) -> list[Outcome]:
        """Run spec.program on every rank (see the module docstring); one Outcome per rank."""
