"""The ``threads`` backend: every rank a thread of this process.

Fast to start and light (hundreds of ranks for emulation). A send copies the array into
the receiver's mailbox (the sender may reuse its buffer at once, as on every backend);
nothing is lent. Ranks take turns holding a baton (baton.py: with the GIL only one runs
anyway, and taking turns makes a big emulation several times faster and its execution
order deterministic).

Ranks share this process, so ending them is cooperative: a torn-down run aborts every
waiting rank, and a rank still computing gets ``Aborted`` raised inside it at its next
Python bytecode (PyThreadState_SetAsyncExc). A rank inside a call that never returns to
Python (a long C loop) cannot be stopped: the run's error names it, and this process
refuses further threads runs while it lives, rather than letting it slow them (it holds
the GIL between its bytecodes). If it holds the GIL without a break, nothing of Python
runs, not even the deadline or Ctrl-C: use the processes backend for such code.
``os._exit`` in a rank is an error naming the rank (it would end the launcher's process).
What a rank forks is this process's child: it is killed when the run ends (a fork that
detaches twice, a daemon, escapes: only processes and mpi ranks are child subreapers).
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
import traceback
from contextlib import contextmanager

from ..board import DONE, STATE, board_row, new_board
from ..mailbox import Aborted, Mailbox
from ..supervise import Outcome, RankFailed, RunSpec, RunTimeout, supervise
from .baton import Baton, BatonCondition
from .reaper import end_descendants, now_ticks
from .transport import Backend, MailboxTransport, rank_communicator

MAX_THREAD_RANKS = 4096
JOIN_S = 0.5  # how long a torn-down rank has to end, before and after Aborted is raised in it


_gc_lock = threading.Lock()
_gc_runs = 0  # runs under way in this process that paused the cyclic collector
_gc_was_enabled = False


@contextmanager
def cyclic_gc_paused():
    """Pause Python's cyclic garbage collector while ranks run (reference counting still
    frees everything that is not in a cycle); collect the youngest generation once
    afterwards.

    Why: every LogicalArray is a GC-tracked object, and a 1024-rank ring holds a million
    blocks while it makes millions of short-lived arrays and headers; the collector's
    passes over them took 10-15 % of the run. A rank program's cycles (an exception and
    its traceback) wait until the run ends. While the collector is off nothing is promoted,
    so what the run allocated is all in generation 0: collecting that one frees the run's
    cycles without walking the rest of the process's heap (a full collection took 0.15 s in
    the app's server, whose heap holds Streamlit and plotly, three times per page of runs).
    Nested and concurrent runs count: the last to finish restores the collector as the first
    found it."""
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
            gc.collect(0)


_abandoned: list[threading.Thread] = []  # ranks of earlier runs that could not be stopped
_real_exit = os._exit
_rank_threads: set[int] = set()  # idents of the rank threads of the runs under way
_exit_lock = threading.Lock()


class RankExit(SystemExit):
    """os._exit called by a rank thread: it would end the launcher's process."""


def _exit_from_rank(code: int) -> None:
    if threading.get_ident() in _rank_threads:
        raise RankExit(
            f"os._exit({code}) in a rank: on the threads backend a rank is a thread of the "
            "launcher's process, which must not end; return from the program instead"
        )
    _real_exit(code)


@contextmanager
def _rank_exits_fail():
    """os._exit in a rank thread raises RankExit while runs are under way (os._exit is
    restored when the last one ends)."""
    with _exit_lock:
        os._exit = _exit_from_rank
    try:
        yield
    finally:
        with _exit_lock:
            if not _rank_threads:
                os._exit = _real_exit


def _still_abandoned() -> str | None:
    _abandoned[:] = [t for t in _abandoned if t.is_alive()]
    return _names(_abandoned) or None


def _names(threads: list[threading.Thread]) -> str:
    return ", ".join(t.name.replace("dlsys-rank-", "rank ") for t in threads)


def _stop(threads: list[threading.Thread]) -> list[threading.Thread]:
    """Give the ranks of a torn-down run JOIN_S to end, then raise Aborted in those still
    running (at their next bytecode) and give them JOIN_S more; return those that remain."""
    for t in threads:
        t.join(timeout=JOIN_S)
    running = [t for t in threads if t.is_alive()]
    for t in running:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(Aborted))
    for t in running:
        t.join(timeout=JOIN_S)
    stuck = [t for t in running if t.is_alive()]
    _abandoned.extend(stuck)
    return stuck


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
        if (stuck := _still_abandoned()) is not None:
            raise RuntimeError(
                f"ranks of an earlier threads run could not be stopped and still run in this "
                f"process ({stuck}), inside a call that never returned to Python; they would "
                "slow every later run: restart the process, or use backend='processes'"
            )
        started = now_ticks()
        board = new_board(spec.size)
        baton = Baton(spec.size)
        boxes = [Mailbox(r, board, BatonCondition(baton, r, board_row(board, r))) for r in range(spec.size)]
        outcomes: list = [None] * spec.size
        failures: dict = {}
        changed = threading.Event()

        def body(rank):
            _rank_threads.add(threading.get_ident())
            baton.enter(rank)
            comm = rank_communicator(spec, rank, ThreadTransport(boxes, rank), board)
            try:
                value = spec.program(comm, *spec.args, **spec.kwargs)
                outcomes[rank] = Outcome(value, comm.spans, comm.messages, comm.clock, comm.ops, comm.used_memory)
            except Aborted:
                pass
            except BaseException as exc:  # noqa: BLE001 - any rank failure fails the run
                failures[rank] = (exc, traceback.format_exc())
            finally:
                _rank_threads.discard(threading.get_ident())
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

        threads = [
            threading.Thread(target=body, args=(r,), name=f"dlsys-rank-{r}", daemon=True) for r in range(spec.size)
        ]
        with cyclic_gc_paused(), _rank_exits_fail():
            try:
                for t in threads:
                    t.start()
                baton.start()
                supervise(board, finished, wait, spec.deadline)
            except BaseException as exc:
                stuck = _teardown(boxes, baton, threads)
                end_descendants(since_ticks=started)
                if stuck and isinstance(exc, RunTimeout):
                    raise RunTimeout(
                        f"{exc.ranks}; {_names(stuck)} could not be stopped "
                        "(inside a call that never returns to Python) and keep running in this "
                        "process, which refuses further threads runs"
                    ) from None
                raise
            _teardown(boxes, baton, threads)
        end_descendants(since_ticks=started)
        return outcomes


def _teardown(boxes: list[Mailbox], baton: Baton, threads: list[threading.Thread]) -> list[threading.Thread]:
    for box in boxes:
        box.abort()
    baton.close()
    return _stop(threads)
