"""The ``threads`` backend: every rank a thread of this process.

Fast to start and light (hundreds of ranks for emulation). A send copies the array into
the receiver's mailbox (the sender may reuse its buffer at once, as on every backend);
nothing is lent. Ranks take turns holding a baton (baton.py: with the GIL only one runs
anyway, and taking turns makes a big emulation several times faster and its execution
order deterministic).
"""

from __future__ import annotations

import gc
import threading
import traceback
from contextlib import contextmanager

from ..board import DONE, STATE, board_row, new_board
from ..communicator import Communicator
from ..mailbox import Aborted, Mailbox
from ..supervise import Outcome, RankFailed, RunSpec, supervise
from .transport import Backend, MailboxTransport
from .baton import Baton, BatonCondition

MAX_THREAD_RANKS = 4096


_gc_lock = threading.Lock()
_gc_runs = 0  # runs under way in this process that paused the cyclic collector
_gc_was_enabled = False


@contextmanager
def cyclic_gc_paused():
    """Pause Python's cyclic garbage collector while ranks run (reference counting still
    frees everything that is not in a cycle); collect once afterwards.

    Why: every LogicalArray is a GC-tracked object, and a 1024-rank ring holds a million
    blocks while it makes millions of short-lived arrays and headers; the collector's
    passes over them took 10-15 % of the run. A rank program's cycles (an exception and
    its traceback) wait until the run ends. Nested and concurrent runs count: the last to
    finish restores the collector as the first found it."""
    global _gc_runs, _gc_was_enabled
    with _gc_lock:
        if _gc_runs == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_runs += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_runs -= 1
            restore = _gc_runs == 0 and _gc_was_enabled
            if restore:
                gc.enable()
        if restore:
            gc.collect()


class ThreadTransport(MailboxTransport):
    def __init__(self, boxes: list[Mailbox], rank: int):
        super().__init__(boxes[rank])
        self.boxes = boxes
        self.take = self.mailbox.take  # bound once: one call less per receive

    def post(self, dst, header, array, lend=False):
        self.boxes[dst].deliver(header, array.copy())  # nothing is lent: post returns no loan

    def hand_over(self, dst, header, array, lend=False):
        # no copy: nobody writes it (a 1024-rank ring's 2.1 M copies were 5 % of its run)
        self.boxes[dst].deliver(header, array)


class ThreadsBackend(Backend):
    name = "threads"
    max_ranks = MAX_THREAD_RANKS

    def run(self, spec: RunSpec) -> list[Outcome]:
        board = new_board(spec.size)
        baton = Baton(spec.size)
        boxes = [Mailbox(r, board, BatonCondition(baton, r, board_row(board, r))) for r in range(spec.size)]
        outcomes: list = [None] * spec.size
        failures: dict = {}
        changed = threading.Event()

        def body(rank):
            baton.enter(rank)
            comm = Communicator(rank, spec.size, ThreadTransport(boxes, rank), spec.network,
                                spec.nodes[rank], spec.seed, spec.deadline, board,
                                spec.charge_reductions, spec.record, spec.log_ops,
                                spec.log_labels)
            try:
                value = spec.program(comm, *spec.args, **spec.kwargs)
                outcomes[rank] = Outcome(value, comm.spans, comm.messages, comm.clock, comm.ops)
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
        with cyclic_gc_paused():
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
