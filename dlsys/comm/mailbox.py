"""A rank's mailbox: messages wait here, by (src, tag), until the rank takes them.

Each waits with its number among the messages delivered from its source, so a receive of
any tag (ANY_TAG) takes the source's oldest, as MPI's non-overtaking rule says.

Every wait marks the rank BLOCKED on the status board (dlsys.comm.board) with whom it
waits for, and every delivery marks it RUNNING again when it matches, so the launcher
can tell a deadlock from a slow rank. Every wait has a deadline and ends at an abort
(another rank failed), so nothing hangs.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .board import (
    ANY_SOURCE,
    ANY_TAG,
    BLOCKED,
    EPOCH,
    FROM,
    PULLED,
    RELEASE,
    RUNNING,
    SEEN,
    STATE,
    WAIT_SRC,
    WAIT_TAG,
    board_row,
)

POLL_S = 0.05  # how often a blocked rank re-checks abort and its deadline
ANY_POLL_S = 0.002  # wait_any re-asks this often: the other ranks' states change without a notify


class Aborted(Exception):
    """Raised inside a rank when the run is being torn down because another rank failed."""


class Header(NamedTuple):
    src: int
    tag: int
    depart_s: float
    nbytes: int
    label: str
    dtype: np.dtype  # its string on the processes backend (cheaper to pickle)
    shape: tuple
    handle: object = None  # transport-specific (the shared-memory name on processes)
    meta: tuple | None = None  # (phase, step, block) of a collective's message, for figures
    sync: bool = False  # a synchronous send's: the receiver acknowledges the match (Communicator.ssend)


class WaitCondition:
    """What a Mailbox needs of a condition variable, for a backend whose ranks wait their
    own way (the threads backend's baton, the mpi backend's polling): ``lock``, ``with``,
    ``notify``, and ``wait``, which releases the lock around ``pause(timeout)``. A wait may
    end early: the mailbox checks again."""

    def __init__(self):
        self.lock = threading.Lock()

    def __enter__(self):
        self.lock.acquire()
        return self

    def __exit__(self, *exc_info):
        self.lock.release()

    def wait(self, timeout: float | None = None) -> None:
        self.lock.release()
        try:
            self.pause(timeout)
        finally:
            self.lock.acquire()

    def pause(self, timeout: float | None) -> None:
        raise NotImplementedError

    def notify(self, n: int = 1) -> None:
        """Nothing to wake by default: the waiting thread is the one that delivers."""

    def notify_all(self) -> None:
        self.notify()


class Mailbox:
    """One rank's inbox. ``cond``: the threads backend passes a BatonCondition
    (dlsys.comm.backends.baton), so that ranks take turns; otherwise a threading.Condition."""

    def __init__(self, rank: int, board: np.ndarray, cond=None):
        self.rank, self.row = rank, board_row(board, rank)
        # deliver and take enter the bare lock (a C-level ``with``: they run once per message)
        self._lock = threading.Lock() if cond is None else cond.lock
        self._cond = threading.Condition(self._lock) if cond is None else cond
        self._stash: dict[tuple[int, int], deque] = defaultdict(deque)
        self._pulled, self._from = 0, [0] * ((len(self.row) - FROM) // 2)  # mirrors of the board's counters
        self._released: set = set()  # loans (see Communicator.alloc) their receivers dropped
        self._awaited = None
        self.aborted = False

    def deliver(self, header: Header, payload) -> None:
        # acquire/release, not ``with``, and header[i], not header.src: this runs once per
        # message, and each costs a lock call's argument parsing or a descriptor more
        src, tag = header[0], header[1]
        lock = self._lock
        lock.acquire()
        try:
            # counted in Python, stored to the board below: cheaper than numpy +=
            self._from[src] = delivered = self._from[src] + 1
            self._stash[src, tag].append((header, payload, delivered))
            row = self.row
            blocked = row[STATE] == BLOCKED
            # RUNNING before the counters: another process reads STATE first, then the
            # counters (board.silent); the other order let it see this rank BLOCKED with the
            # waking message counted as delivered, and call it silent while it was waking
            if blocked and row[WAIT_SRC] == src and (row[WAIT_TAG] == tag or (row[WAIT_TAG] == ANY_TAG and tag >= 0)):
                row[STATE] = RUNNING
            self._pulled = pulled = self._pulled + 1
            row[PULLED] = pulled
            row[FROM + src] = delivered
            if blocked:  # a rank that is not waiting needs no wake-up
                self._cond.notify()
        finally:
            lock.release()

    def take(self, src: int, tag: int, deadline: float):
        """The next (header, payload) from src with this tag (ANY_TAG: of any program tag,
        the oldest); waits for it."""
        queue = self._stash.get((src, tag))
        if queue:  # the usual case, without the lock: only this rank takes, deliveries only append
            header, payload, _ = queue.popleft()
            return header, payload
        lock = self._lock
        lock.acquire()
        try:
            row = self.row
            if not (queue := self._queue(src, tag)):
                row[EPOCH] += 1  # a new wait, before BLOCKED (board.least_pending reads it first)
            while not queue:
                row[WAIT_SRC], row[WAIT_TAG], row[STATE] = src, tag, BLOCKED
                self._cond.wait(POLL_S)
                what = "any tag" if tag == ANY_TAG else f"tag {tag}"
                self._check(deadline, f"no message from rank {src} ({what})")
                queue = self._queue(src, tag)
            row[STATE] = RUNNING
            header, payload, _ = queue.popleft()
            return header, payload
        finally:
            lock.release()

    def _queue(self, src: int, tag: int) -> deque:
        """The queue ``take(src, tag)`` takes from (under the lock): for ANY_TAG, the
        non-empty queue of a program tag (>= 0) whose head src sent first, or an empty one."""
        if tag != ANY_TAG:
            return self._stash[src, tag]
        heads = [(queue[0][2], queue) for (s, t), queue in self._stash.items() if s == src and t >= 0 and queue]
        return min(heads, key=lambda head: head[0])[1] if heads else deque()

    def wait_any(self, tag: int, choose: Callable, deadline: float):
        """Wait until ``choose(head)`` returns a source, and return it.

        ``head(src, tag)`` is the header of the next message from src with this tag, or
        None; ``choose`` runs under the mailbox's lock, so no delivery changes the heads
        while it looks, and it is asked again at every delivery and every ANY_POLL_S.
        """
        with self._lock:
            row = self.row
            # a new wait, marked before ``choose`` looks: it publishes this rank's candidate
            # (SEEN) and may find every rank waiting, this one included (board.least_pending)
            row[SEEN] = -1.0
            row[EPOCH] += 1
            row[WAIT_SRC], row[WAIT_TAG], row[STATE] = ANY_SOURCE, tag, BLOCKED
            while (chosen := choose(self.head)) is None:
                self._cond.wait(ANY_POLL_S)
                self._check(deadline, f"recv_any (tag {tag}) could not choose a message")
            row[STATE] = RUNNING
            return chosen

    def head(self, src: int, tag: int) -> Header | None:
        """The header ``take(src, tag)`` would return now, or None (under the lock)."""
        queue = self._stash.get((src, tag)) if tag != ANY_TAG else self._queue(src, tag)
        return queue[0][0] if queue else None

    def released(self, loan: int) -> None:
        """The receiver of loan ``loan`` dropped the array: the sender may reuse the memory."""
        with self._lock:
            self._released.add(loan)
            if self._awaited == loan:
                self.row[STATE] = RUNNING
                self._cond.notify()

    def wait_released(self, loan: int, dst: int, deadline: float) -> None:
        with self._lock:
            row, self._awaited = self.row, loan
            while loan not in self._released:
                row[WAIT_SRC], row[WAIT_TAG], row[STATE] = dst, RELEASE, BLOCKED
                self._cond.wait(POLL_S)
                self._check(
                    deadline, f"rank {dst} did not drop the array this rank lent it (isend of comm.alloc memory)"
                )
            self._released.remove(loan)
            self._awaited = None
            row[STATE] = RUNNING

    def abort(self) -> None:
        with self._cond:
            self.aborted = True
            self._cond.notify_all()

    def _check(self, deadline: float, what: str) -> None:
        if self.aborted:
            raise Aborted()
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {self.rank}: {what} before the deadline")
