"""The ``mpi`` backend's transport: one rank's end of an MPI job (dlsys.comm.backends.mpi).

How a rank talks (``MPITransport``). A message is two MPI messages on the run's own
communicator: a small pickled header (tag HEADER), then the payload as a buffer-protocol
``Isend`` of a copy of the numpy array (tag BODY: arrays are never pickled; the copy
because the Communicator's sends are buffered, so the caller may reuse its array at once).
A rank has one thread. It polls MPI (Iprobe) only while it waits, through ``_Progress``,
which stands in for its mailbox's condition variable, and, after its program, until every
rank has finished. What arrives goes into the rank's ``Mailbox``, so takes, recv_any's
choice, deadlines and every virtual-time charge are the code the other backends run:
values and traces equal theirs bit for bit.

recv_any with no shared memory. The conservative rule needs to know when a source is
*silent*: nothing more can come from it before this rank sends again. Threads and
processes read that from the status board (``board.silent``); here the question travels
along the chain of waits as control messages, Chandy, Misra and Haas's edge-chasing
probes (ACM TOCS 1(2), 1983). docs/architecture.md gives the rule and why it is exact.
The same question, asked by a rank that has waited a while for one source, detects a
deadlock, and the probe's path says who waits for whom. When every rank waits on
ANY_SOURCE (a token ring of ``comm.recv()``), no probe can say yes; the rank then gathers
every rank's row twice (``least_pending``) and applies the board's rule for a world that
waits, ``board.least_pending``, to them.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..board import (
    BLOCKED,
    DONE,
    EPOCH,
    FROM,
    POSTED,
    PULLED,
    RELEASE,
    STATE,
    WAIT_SRC,
    WAIT_TAG,
    board_row,
    deadlock_report,
    least_pending,
    new_board,
    waits_text,
)
from ..logical import as_logical
from ..mailbox import Header, Mailbox, WaitCondition
from ..supervise import DeadlockError
from .transport import MailboxTransport

HEADER, BODY, CONTROL = 1, 2, 3  # MPI tags on the run's own communicator
CONFIRM_S = 0.25  # a rank that has waited this long for one source asks whether it ever can come
RETRY_S = 0.002  # a source that was not silent is asked again after this long
MAX_RETRY_S = 0.02  # a snapshot that found nothing for this rank is taken again after RETRY_S, doubling up to this
SPIN_S = 0.001  # a waiting rank polls without sleeping this long first
MAX_SLEEP_S = 0.002  # then at least this often, unless ranks outnumber cores:
MAX_SLEEP_CROWDED_S = 0.01  # then up to this (64 ranks on 2 cores: a 64-rank ring 3x faster than at 2 ms)
FINISHED = -1  # a probe path's last entry for a rank that has finished its program


@dataclass
class _Question:
    """This rank asked whether ``src`` is silent; valid while ``key`` (what this rank has
    posted, what it has received from src) is unchanged."""

    key: tuple
    seq: int
    answer: bool | None = None
    path: tuple = ()
    retry_at: float = 0.0


@dataclass
class _Snapshot:
    """This rank gathers every rank's row twice (``least_pending``): the rows of the round
    under way (``round`` 1 or 2), the first round's board, and once both are in, the
    answer. Valid while ``key`` (this rank's wait, and what it has received) is unchanged."""

    key: tuple
    seq: int
    backoff_s: float
    round: int = 1
    rows: dict = field(default_factory=dict)
    first: np.ndarray | None = None
    done: bool = False
    answer: tuple | None = None
    retry_at: float = 0.0


class MPITransport(MailboxTransport):
    """One rank's end of an MPI job (see the module docstring)."""

    def __init__(self, comm, board: np.ndarray):
        from mpi4py import MPI

        self.MPI, self.comm, self.rank, self.size = MPI, comm, comm.Get_rank(), comm.Get_size()
        self.row, self.sent_column = board_row(board, self.rank), FROM + self.size
        self.status = MPI.Status()
        self.sends: deque = deque()  # (request, buffer) until MPI has completed the send
        self.questions: dict[int, _Question] = {}
        self.finished_ranks: set[int] = set()
        self.seq = 0
        self.asked_round: list[bool] = []  # what silent() answered during one recv_any choice
        self.snapshot: _Snapshot | None = None
        # (what this rank waits for, with its post and delivery counts; since when): a new
        # wait, or anything sent or delivered, starts the clock again
        self.idle: tuple = (None, 0.0)
        self.max_sleep_s = _max_sleep_s(self.size)
        super().__init__(Mailbox(self.rank, board, _Progress(self)))

    # --- messages ---

    def post(self, dst, header, array, lend=False):
        frame = (*header[:5], header.dtype.str, header.shape, None, header.meta, header.sync)
        self.sends.append((self.comm.isend(frame, dst, HEADER), None))
        if array.nbytes:
            body = np.array(array, order="C", subok=False)  # a copy: the sender may reuse its array
            self.sends.append((self.comm.Isend([body, self.MPI.BYTE], dst, BODY), body))
        return None  # nothing is lent

    def take(self, src, tag, deadline):
        header, array = self.mailbox.take(src, tag, deadline)
        if array is None:
            array = np.zeros(header.shape, header.dtype)
        return header, as_logical(array, header.nbytes)

    def poll(self) -> bool:
        """Take in what has arrived: messages into the mailbox, control messages answered."""
        comm, status, got = self.comm, self.status, False
        while comm.Iprobe(self.MPI.ANY_SOURCE, self.MPI.ANY_TAG, status):
            src, tag, got = status.Get_source(), status.Get_tag(), True
            if tag == HEADER:
                frame = comm.recv(source=src, tag=HEADER)
                array = None
                if math.prod(frame[6]) * np.dtype(frame[5]).itemsize:
                    # MPI keeps a source's messages in order: its body is the next BODY from it
                    array = np.empty(frame[6], frame[5])
                    comm.Recv([array, self.MPI.BYTE], src, BODY)
                self.mailbox.deliver(Header(*frame), array)
            elif tag == CONTROL:
                self._control(src, comm.recv(source=src, tag=CONTROL))
            else:
                raise RuntimeError(f"rank {self.rank}: unexpected MPI message (tag {tag}) from rank {src}")
        while self.sends and self.sends[0][0].Test():
            self.sends.popleft()
        return got

    def progress(self) -> None:
        """One round of a wait: poll; if nothing came, check for a deadlock, then yield the
        CPU for the first SPIN_S of the wait (a reply is often that close) and afterwards
        sleep a quarter of the time waited so far, up to ``max_sleep_s`` (ranks may share
        few cores: polling takes the CPU from the ranks that have work)."""
        row = self.row
        key = (row[WAIT_SRC], row[WAIT_TAG], row[POSTED], row[PULLED])
        if self.poll():
            return
        now = time.monotonic()
        if key != self.idle[0]:
            self.idle = (key, now)
        idle_s = now - self.idle[1]
        self._check_deadlock(idle_s)
        time.sleep(0.0 if idle_s < SPIN_S else min(self.max_sleep_s, idle_s / 4))

    def finish(self, deadline: float) -> None:
        """After the program: serve (take in stray messages, answer probes as a finished
        rank) until every send has completed and every rank has finished."""
        while self.sends:
            self._serve(deadline, "its messages were not received")
        barrier = self.comm.Ibarrier()
        while not barrier.Test():
            self._serve(deadline, "not every rank finished")

    def _serve(self, deadline: float, what: str) -> None:
        if not self.poll():
            time.sleep(self.max_sleep_s)
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {self.rank} finished its program, but {what} before the deadline")

    # --- the conservative rule without shared memory: edge-chasing probes ---

    def silent(self, board, src, me):
        """Whether src is silent towards this rank (see docs/architecture.md). Asks src
        by a probe the first time; the answer holds as long as this rank posts nothing
        and receives nothing more from src."""
        key = (self.row[POSTED], self.row[FROM + src])
        question = self.questions.get(src)
        if (
            question is None
            or question.key != key
            or (question.answer is False and time.monotonic() >= question.retry_at)
        ):
            self.seq += 1
            self.questions[src] = _Question(key, self.seq)
            self._send_control(src, ("probe", self.rank, self.seq, int(key[1]), ()))
            answer = False
        else:
            answer = bool(question.answer)
        self.asked_round.append(answer)
        return answer

    def finished(self, board, src):
        return src in self.finished_ranks

    def _control(self, hop: int, message: tuple) -> None:
        if message[0] == "answer":
            _, seq, src, answer, path = message
            self._answered(src, seq, answer, path)
            return
        if message[0] == "snap":  # a rank gathers the rows: this one, as it is now
            self._send_control(hop, ("row", *message[1:], self.row.tobytes()))
            return
        if message[0] == "row":
            self._row_arrived(hop, *message[1:])
            return
        _, origin, seq, count, path = message  # a probe, from the previous rank of the chain
        row, me = self.row, self.rank
        if row[self.sent_column + hop] != count:  # hop has not received all I sent it
            self._answer(origin, seq, path, False)
        elif me == origin:  # the chain came back: everyone on it waits, and last on me
            self._answered(path[0][0], seq, True, path)
        elif any(entry[0] == me for entry in path):  # ranks that wait on each other for good
            self._answer(origin, seq, path, True)
        elif row[STATE] == DONE:
            self._answer(origin, seq, (*path, (me, FINISHED, 0)), True)
        elif row[STATE] == BLOCKED and row[WAIT_SRC] >= 0 and row[WAIT_TAG] != RELEASE:
            waits_for = int(row[WAIT_SRC])
            self._send_control(
                waits_for,
                ("probe", origin, seq, int(row[FROM + waits_for]), (*path, (me, waits_for, int(row[WAIT_TAG])))),
            )
        else:  # running, or in recv_any: it may still send
            self._answer(origin, seq, path, False)

    def _answer(self, origin: int, seq: int, path: tuple, answer: bool) -> None:
        src = path[0][0] if path else self.rank
        if origin == self.rank:
            self._answered(src, seq, answer, path)
        else:
            self._send_control(origin, ("answer", seq, src, answer, path))

    def _answered(self, src: int, seq: int, answer: bool, path: tuple) -> None:
        if answer and path and path[0] == (src, FINISHED, 0):
            self.finished_ranks.add(src)
        question = self.questions.get(src)
        if question is not None and question.seq == seq:
            question.answer, question.path, question.retry_at = answer, path, time.monotonic() + RETRY_S

    def _send_control(self, dst: int, message: tuple) -> None:
        self.sends.append((self.comm.isend(message, dst, CONTROL), None))

    # --- every rank waits: the least pending message, from two gatherings of the rows ---

    def least_pending(self, board):
        """``board.least_pending`` of the rows every rank sent, gathered twice: the second
        round starts once the first is in, so each rank's row, equal in both, held at the
        moment between them (each rank reads its own row at once: one thread writes it).
        Taken again when this rank's wait or deliveries change, else after a backoff. A
        world that waits with nothing pending is a deadlock: raised here, where no launcher
        watches a shared board."""
        row, now = self.row, time.monotonic()
        key = (row[EPOCH], row[PULLED])
        snap = self.snapshot
        if snap is None or snap.key != key or (snap.done and now >= snap.retry_at):
            backoff_s = min(MAX_RETRY_S, 2 * snap.backoff_s) if snap is not None and snap.key == key else RETRY_S
            self.seq += 1
            self.snapshot = _Snapshot(key, self.seq, backoff_s)
            self._gather()
            return None
        if snap.answer is not None and snap.answer[1] < 0:
            raise DeadlockError(f"deadlock: no rank can make progress: {deadlock_report(snap.first)}")
        return snap.answer

    def _gather(self) -> None:
        snap = self.snapshot
        snap.rows = {self.rank: self.row.tobytes()}
        for r in range(self.size):
            if r != self.rank:
                self._send_control(r, ("snap", snap.seq, snap.round))
        self._row_arrived(self.rank, snap.seq, snap.round, snap.rows[self.rank])

    def _row_arrived(self, src: int, seq: int, round_: int, row: bytes) -> None:
        snap = self.snapshot
        if snap is None or snap.seq != seq or snap.round != round_ or snap.done:
            return  # an answer to a gathering this rank has given up
        snap.rows[src] = row
        if len(snap.rows) < self.size:
            return
        board = new_board(self.size, bytearray(b"".join(snap.rows[r] for r in range(self.size))))
        if snap.round == 1:
            snap.first, snap.round = board, 2
            self._gather()
            return
        snap.done, snap.retry_at = True, time.monotonic() + snap.backoff_s
        snap.answer = least_pending(board) if np.array_equal(board, snap.first) else None

    # --- deadlock: the same question, asked by a rank that has waited a while ---

    def wait_any(self, tag, choose, deadline):
        def watched(head):
            self.asked_round = []
            chosen = choose(head)
            if chosen is None and self.asked_round and all(self.asked_round):
                # every source is silent and none has a message here: nothing can ever come
                raise DeadlockError(
                    "deadlock: no rank can make progress: "
                    + "; ".join(
                        [f"rank {self.rank} waits for any rank (tag {tag})"]
                        + [_chain_text(q.path) for q in self.questions.values() if q.answer]
                    )
                )
            return chosen

        return self.mailbox.wait_any(tag, watched, deadline)

    def _check_deadlock(self, idle_s: float) -> None:
        """After CONFIRM_S waiting for one source, with nothing posted or delivered since:
        is that source silent? Then nothing can ever come."""
        row = self.row
        if idle_s < CONFIRM_S or row[STATE] != BLOCKED or row[WAIT_SRC] < 0 or row[WAIT_TAG] == RELEASE:
            return
        src, tag = int(row[WAIT_SRC]), int(row[WAIT_TAG])
        if self.silent(None, src, self.rank):
            raise DeadlockError(
                f"deadlock: no rank can make progress: {waits_text(self.rank, src, tag)}; "
                f"{_chain_text(self.questions[src].path)}"
            )


def _max_sleep_s(size: int) -> float:
    """The longest sleep between polls: polling ranks take the CPU from the ranks that have
    work when they outnumber the cores (they do on a laptop with --oversubscribe)."""
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", os.environ.get("MPI_LOCALNRANKS", ""))
    per_core = (int(local) if local.isdigit() else size) / (os.cpu_count() or 1)
    return min(MAX_SLEEP_CROWDED_S, MAX_SLEEP_S * max(1.0, per_core / 4))


def _chain_text(path: tuple) -> str:
    return "; ".join(
        f"rank {rank} has finished" if waits_for == FINISHED else waits_text(rank, waits_for, tag)
        for rank, waits_for, tag in path
    )


class _Progress(WaitCondition):
    """The mailbox's condition variable on the mpi backend. Only the rank's own thread
    delivers (while it waits), so a wait is one round of ``MPITransport.progress``."""

    def __init__(self, transport: MPITransport):
        super().__init__()
        self.transport = transport

    def pause(self, timeout: float | None) -> None:
        self.transport.progress()
