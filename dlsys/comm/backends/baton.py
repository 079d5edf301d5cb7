"""Run the threads backend's ranks one at a time, passing a baton.

Why: with the GIL only one rank thread computes at a time anyway, but if every rank that
a message wakes becomes runnable at once, the OS and the GIL choose who runs next. Each
of the ~523,000 messages of a 512-rank ring all-reduce then costs a thread switch, a GIL
hand-off and a wasted wake-up, which dominates the wall time of a big emulation. Here a
rank runs until it must wait; then it hands the baton to the rank that became ready
first (FIFO) and sleeps until it is woken and handed the baton back. A ring then runs
as long pipelined stretches: a few thousand hand-offs instead of hundreds of thousands,
and the order of execution is deterministic.

Nothing else changes: values and virtual times come from the same Communicator code.
A rank waits only inside its mailbox, through ``BatonCondition``, which has the interface
of the ``threading.Condition`` that ``Mailbox`` uses:

* a rank waiting for one message (``Mailbox.take``) sleeps until a matching delivery or
  an abort wakes it: no polling;
* ``recv_any`` (``Mailbox.wait_any``) re-reads the other ranks' states, which change
  without notifying it, so its wait ends after its poll interval (or at a delivery) and
  it queues for the baton. It also gets the baton at once when nobody else is ready and
  something happened since it last looked (a delivery, a rank that blocked or finished):
  then it decides without waiting out its poll interval in real time, and pollers that
  have seen everything do not wake each other (no spinning).

Ranks must synchronize only through the communicator (as on every backend): a rank that
blocks on something else holds the baton until the run's deadline.
"""

from __future__ import annotations

import threading
from collections import deque

from ..board import ANY_SOURCE, WAIT_SRC
from ..mailbox import WaitCondition

WAITING, READY, RUNNING, DONE = range(4)


class Baton:
    """FIFO hand-off of the right to run among ``size`` rank threads."""

    def __init__(self, size: int):
        self._lock = threading.Lock()
        self._ready: deque[int] = deque(range(size))  # every rank starts ready, in rank order
        self._state = [READY] * size
        # go[r] is released exactly when rank r is handed the baton (a binary semaphore)
        self._go = [threading.Lock() for _ in range(size)]
        for go in self._go:
            go.acquire()
        self._holder: int | None = None
        self._closed = False
        # events that may let a recv_any decide: deliveries, ranks blocking or finishing;
        # a polling rank remembers the count it last looked at
        self._events = 0
        self._looked: dict[int, int] = {}

    def start(self) -> None:
        """Hand the baton to the first ready rank (after every rank thread has started)."""
        with self._lock:
            self._pass()

    def enter(self, rank: int) -> None:
        """Called first by a rank thread: wait for the baton."""
        self._go[rank].acquire()

    def leave(self, rank: int) -> None:
        """Called last by a rank thread: it is done; pass the baton on."""
        with self._lock:
            self._state[rank] = DONE
            self._events += 1
            if self._holder == rank:
                self._pass()

    def wake(self, rank: int) -> None:
        """``rank`` may proceed (a message came, or the run is aborted): queue it."""
        with self._lock:
            self._events += 1
            if self._state[rank] == WAITING:
                self._make_ready(rank)

    def suspend(self, rank: int, poll_s: float | None) -> None:
        """The running ``rank`` waits: pass the baton on, return once it is ours again.

        With ``poll_s``, the rank also queues for the baton after that long even if
        nobody woke it. After ``close`` it returns at once, baton or not.
        """
        with self._lock:
            if self._closed:
                return
            self._state[rank] = WAITING
            if poll_s is None:
                self._events += 1
            else:
                self._looked[rank] = self._events
            self._pass()
        while not self._go[rank].acquire(timeout=-1 if poll_s is None else poll_s):
            with self._lock:
                if self._state[rank] == WAITING:
                    self._make_ready(rank)
            poll_s = None  # queued (or already handed the baton): now wait for it

    def close(self) -> None:
        """The run is over or torn down: release every waiting rank, run freely from now on."""
        with self._lock:
            self._closed = True
            for rank, state in enumerate(self._state):
                if state in (WAITING, READY):
                    self._state[rank] = RUNNING
                    self._go[rank].release()

    def _make_ready(self, rank: int) -> None:
        self._looked.pop(rank, None)
        if self._holder is None and not self._closed:
            self._grant(rank)
        else:
            self._state[rank] = READY
            self._ready.append(rank)

    def _pass(self) -> None:
        self._holder = None
        if self._closed:
            return
        if not self._ready:  # idle: a poller that has not seen the latest events looks now
            stale = [r for r, seen in self._looked.items() if seen < self._events and self._state[r] == WAITING]
            if stale:
                self._make_ready(min(stale))
                return
        if self._ready:
            self._grant(self._ready.popleft())

    def _grant(self, rank: int) -> None:
        self._holder = rank
        self._state[rank] = RUNNING
        self._go[rank].release()


class BatonCondition(WaitCondition):
    """A mailbox's condition variable when ranks take turns (see the module docstring)."""

    def __init__(self, baton: Baton, rank: int, row):
        super().__init__()  # the lock is still needed against the launcher thread (abort)
        self._baton, self._rank, self._row = baton, rank, row

    def pause(self, timeout: float | None) -> None:
        polls = self._row[WAIT_SRC] == ANY_SOURCE  # recv_any: re-check after `timeout`
        self._baton.suspend(self._rank, timeout if polls else None)

    def notify(self, n: int = 1) -> None:
        self._baton.wake(self._rank)  # only the mailbox's own rank ever waits on it
