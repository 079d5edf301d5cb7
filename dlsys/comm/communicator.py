"""The Communicator a rank program talks to, and the virtual-time rules it implements.

Rank r has a clock t_r (seconds); links follow DESIGN.md's contract:

* ``compute(seconds=s | flops=f)``: t_r += s * slowdown, or f / sustained FLOP/s.
* ``send(buf, dest)`` (buffered, never waits for the receiver): t_r += o_s(n); the message
  departs at d = max(t_r, egress_free_r) and occupies the egress for n / B.
* ``recv(source)``: it arrives at a = max(d + alpha + n / B, ingress_free_dst + n / B);
  ingress_free_dst = a; t_dst = max(t_dst, a) + o_r(n).

Everything here is backend-independent: a backend only moves (header, array) pairs
between mailboxes (``Transport.post`` / ``Transport.take``). So the same program gives the
same values and the same trace on threads and on processes.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from typing import NamedTuple

import numpy as np

from ..net import LinkModel, NodeModel
from .trace import Message, Span

# The status board: one row per rank, shared with the launcher (deadlock detection) and
# with the other ranks (recv_any). Columns FROM + s count messages delivered from rank s,
# columns FROM + size + d messages sent to rank d.
STATE, WAIT_SRC, WAIT_TAG, POSTED, PULLED, CLOCK = range(6)
BOARD_FIELDS = 6
FROM = BOARD_FIELDS
ANY_SOURCE = -1
RELEASE = -2  # WAIT_TAG of a rank waiting for a receiver to drop an array it lent
RUNNING, BLOCKED, DONE = 0.0, 1.0, 2.0
POLL_S = 0.05  # how often a blocked rank re-checks abort and its deadline
ANY_POLL_S = 0.002  # recv_any re-reads the other ranks' states this often
DEADLINE_GRACE_S = 2.0  # a rank's own deadline is a backstop: the launcher's fires first


def board_width(size: int) -> int:
    return BOARD_FIELDS + 2 * size


def board_row(board: np.ndarray, rank: int) -> memoryview:
    """Rank's row of the board as a memoryview: the same memory, but reading or writing one
    number costs a third of numpy's item access (it happens several times per message)."""
    return memoryview(board[rank])


MAX_LABEL = 200


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


class Mailbox:
    """One rank's inbox: messages wait here, by (src, tag), until the rank takes them.

    Marks the rank BLOCKED on the board while it waits and RUNNING as soon as a matching
    message is delivered, so "every live rank BLOCKED and nothing in flight" means deadlock.
    """

    def __init__(self, rank: int, board: np.ndarray, cond=None):
        self.rank, self.row = rank, board_row(board, rank)
        # The threads backend passes a BatonCondition (dlsys.comm.baton): ranks take turns.
        # deliver and take enter the bare lock (a C-level ``with``: they run once per message).
        self._lock = threading.Lock() if cond is None else cond.lock
        self._cond = threading.Condition(self._lock) if cond is None else cond
        self._stash: dict[tuple[int, int], deque] = defaultdict(deque)
        self._pulled, self._from = 0, defaultdict(int)  # mirrors of the board's counters
        self._released: set = set()  # loans (see Communicator.alloc) their receivers dropped
        self._awaited = None
        self.aborted = False

    def deliver(self, header: Header, payload) -> None:
        with self._lock:
            self._stash[(header.src, header.tag)].append((header, payload))
            row = self.row
            self._pulled += 1  # counted in Python, stored to the board: cheaper than numpy +=
            row[PULLED] = self._pulled
            self._from[header.src] += 1
            row[FROM + header.src] = self._from[header.src]
            if row[STATE] == BLOCKED:  # a rank that is not waiting needs no wake-up
                if row[WAIT_SRC] == header.src and row[WAIT_TAG] == header.tag:
                    row[STATE] = RUNNING
                self._cond.notify()

    def take(self, src: int, tag: int, deadline: float):
        with self._lock:
            queue, row = self._stash[(src, tag)], self.row
            while not queue:
                row[WAIT_SRC], row[WAIT_TAG], row[STATE] = src, tag, BLOCKED
                self._cond.wait(POLL_S)
                if self.aborted:
                    raise Aborted()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {self.rank}: no message from rank {src} (tag {tag}) before the deadline")
            row[STATE] = RUNNING
            return queue.popleft()

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
                if self.aborted:
                    raise Aborted()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {self.rank}: rank {dst} did not drop the array this rank lent it "
                                       "(isend of comm.alloc memory) before the deadline")
            self._released.remove(loan)
            self._awaited = None
            row[STATE] = RUNNING

    def head(self, src: int, tag: int) -> Header | None:
        """The header of the next message from src with this tag, if one is here."""
        queue = self._stash.get((src, tag))
        return queue[0][0] if queue else None

    def abort(self) -> None:
        with self._cond:
            self.aborted = True
            self._cond.notify_all()


class Transport:
    """What a backend provides: move a message to dst's mailbox, take one from ours.

    ``post(..., lend=True)`` may lend the array instead of copying it (only memory from
    the transport's own ``alloc``); it then returns a loan number, and the mailbox hears
    ``released(loan)`` once the receiver has dropped the array. Otherwise it returns None."""

    def post(self, dst: int, header: Header, array: np.ndarray, lend: bool = False) -> int | None:
        raise NotImplementedError

    def take(self, src: int, tag: int, deadline: float) -> tuple[Header, np.ndarray]:
        raise NotImplementedError


def as_payload(x, name: str = "x") -> np.ndarray:
    """The array a message carries; rejects what cannot travel as numbers."""
    if type(x) is np.ndarray or hasattr(type(x), "logical_nbytes"):
        arr = x  # a LogicalArray (dlsys.comm.logical) must stay one: its logical size is what we charge
    else:
        arr = np.asarray(x)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be a numeric array (bool, int, float or complex); got dtype {arr.dtype}")
    return arr


def payload_nbytes(arr: np.ndarray) -> int:
    """Bytes a payload stands for on the wire: a LogicalArray's elements each stand for
    ``scale`` (a class attribute: no Python call, and this runs once per message)."""
    return arr.nbytes * getattr(arr, "scale", 1)


class Request:
    """A non-blocking operation; ``wait()`` completes it and returns the received array
    (None for a send). A send request of lent memory completes when the receiver has
    dropped the array; wait() then charges no virtual time (the link model's sender never
    waits for its receiver): it is real-time synchronization only."""

    def __init__(self, comm: "Communicator", src: int | None = None, tag: int = 0, label=None,
                 loan: int | None = None, dst: int | None = None):
        self._comm, self._src, self._tag, self._label, self._loan, self._dst = comm, src, tag, label, loan, dst
        self._done, self._value = src is None and loan is None, None

    def wait(self):
        if not self._done:
            if self._loan is not None:
                self._comm._transport.mailbox.wait_released(self._loan, self._dst, self._comm._deadline)
            else:
                self._value = self._comm.recv(self._src, self._tag, self._label)
            self._done = True
        return self._value


_SENT = Request(None)  # what isend returns when the payload was copied: already complete


class Communicator:
    """Rank-side API in the style of mpi4py / torch.distributed, on a virtual clock."""

    def __init__(self, rank: int, size: int, transport: Transport, link: LinkModel,
                 node: NodeModel, seed: int, deadline: float, board: np.ndarray,
                 charge_reductions: bool = False, record: bool = True):
        self.rank, self.size, self.link, self.node = rank, size, link, node
        self.rng = np.random.default_rng([seed, rank])
        self.charge_reductions = charge_reductions
        self._transport, self._board, self._row = transport, board, board_row(board, rank)
        self._deadline = deadline + DEADLINE_GRACE_S
        self._sent = FROM + size  # first column of this rank's sent-to counters
        self._posted, self._sent_to = 0, [0] * size  # mirrors of the board's counters
        self._t = self._egress_free = self._ingress_free = 0.0
        self._costs: dict[int, tuple[float, float, float]] = {}  # see _link_costs
        self._record = record
        self.spans: list[Span] = []
        self.messages: list[Message] = []

    def __repr__(self):
        return f"<Communicator rank {self.rank} of {self.size}, t={self._t:.6g} s>"

    @property
    def clock(self) -> float:
        """This rank's virtual time in seconds."""
        return self._t

    def _advance(self, seconds: float, kind: str, label: str) -> None:
        start = self._t
        self._t = end = start + seconds
        self._row[CLOCK] = end
        if self._record and end > start:
            self.spans.append(Span(self.rank, start, end, kind, label))

    def compute(self, seconds: float | None = None, flops: float | None = None,
                label: str = "compute") -> None:
        """Advance this rank's clock by compute time (seconds, or flops on its node model)."""
        if (seconds is None) == (flops is None):
            raise ValueError("compute: give exactly one of seconds= or flops=")
        value, name = (seconds, "seconds") if seconds is not None else (flops, "flops")
        if not (isinstance(value, (int, float, np.number)) and 0 <= value < float("inf")):
            raise ValueError(f"compute: {name} must be a finite number >= 0, got {value!r}")
        dt = seconds * self.node.slowdown if seconds is not None else self.node.compute_s(flops)
        self._advance(float(dt), "compute", label)

    def charge_reduction(self, nbytes: int, label: str = "reduce") -> None:
        """Charge nbytes * gamma for a reduction, if the run switched reductions on."""
        if self.charge_reductions and nbytes:
            self._advance(nbytes * self.node.gamma_s_per_byte, "compute", label)

    def _check_peer(self, peer, name: str) -> int:
        if not isinstance(peer, (int, np.integer)) or isinstance(peer, bool) or not 0 <= peer < self.size or peer == self.rank:
            raise ValueError(f"{name} must be another rank in 0..{self.size - 1} (this is rank {self.rank}), got {peer!r}")
        return int(peer)

    @staticmethod
    def _check_tag(tag) -> int:
        if not isinstance(tag, (int, np.integer)) or tag < 0:
            raise ValueError(f"tag must be an int >= 0, got {tag!r}")
        return int(tag)

    def alloc(self, shape, dtype="float32") -> np.ndarray:
        """A zeroed array that ``isend`` may lend to the receiver instead of copying it.

        Like MPI_Alloc_mem or NCCL's registered buffers. On the processes backend it lives in
        shared memory, and ``isend`` of (a contiguous part of) it is zero-copy: the receiver's
        array *is* this memory, so the request completes only when the receiver has dropped
        that array, and, as in MPI, the sender must not write the buffer before ``wait()``.
        ``send`` still copies, and so do payloads under 1 MiB (a copy is cheaper than the
        receiver's "released" round trip). Backends that cannot lend (threads) return plain
        memory. The memory lives until the run ends: allocate buffers once and reuse them.
        """
        dtype = np.dtype(dtype)
        if dtype.kind not in "biufc":
            raise TypeError(f"alloc: dtype must be numeric (bool, int, float or complex), got {dtype}")
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError(f"alloc: shape must be an int >= 0 or a tuple of them, got {shape!r}")
        alloc = getattr(self._transport, "alloc", None)
        return np.zeros(shape, dtype) if alloc is None else alloc(shape, dtype)

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def send(self, buf, dest: int, tag: int = 0, label: str = "", *, phase: str = "", step: int = -1,
             block: int = -1) -> None:
        """Buffered send of array ``buf`` to rank ``dest`` (returns without waiting for the
        receiver). mpi4py's order and names. ``phase``, ``step`` and ``block`` describe a
        collective's message for figures (trace.Message); the label defaults to them."""
        self._post(dest, buf, tag, label, False, phase, step, block)

    def _link_costs(self, nbytes: int) -> tuple[float, float, float]:
        """(send overhead, wire time, receive overhead) of an nbytes message, from the link
        model; cached, as a ring sends one size over and over (read as
        ``self._costs.get(n) or self._link_costs(n)``: a dict lookup, not three calls)."""
        link = self.link
        costs = self._costs[nbytes] = (link.send_overhead_s(nbytes), link.wire_s(nbytes), link.recv_overhead_s(nbytes))
        return costs

    def _post(self, dst, x, tag, label, lend: bool, phase="", step=-1, block=-1) -> int | None:
        """A send under the rules of the module docstring; returns the transport's loan number
        (a lent payload) or None. The argument checks are inlined for valid arguments: this
        runs once per message, 523k times in a 512-rank ring, and a call costs."""
        if not (type(dst) is int and 0 <= dst < self.size and dst != self.rank):
            dst = self._check_peer(dst, "dest")
        if not (type(tag) is int and tag >= 0):
            tag = self._check_tag(tag)
        arr = as_payload(x)
        n = payload_nbytes(arr)
        send_s, wire_s, _ = self._costs.get(n) or self._link_costs(n)
        self._advance(send_s, "send", label)
        depart = max(self._t, self._egress_free)
        self._egress_free = depart + wire_s
        meta = None
        if phase:
            meta = (phase, step, block)
            if not label and self._record:
                label = f"{phase} step {step}" + (f" block {block}" if block >= 0 else "")
        header = Header(self.rank, tag, depart, n, str(label)[:MAX_LABEL], arr.dtype, arr.shape, None, meta)
        self._posted += 1
        self._row[POSTED] = self._posted
        self._sent_to[dst] += 1
        self._row[self._sent + dst] = self._sent_to[dst]
        return self._transport.post(dst, header, arr, lend)

    def recv(self, source: int, tag: int = 0, label: str | None = None) -> np.ndarray:
        """Receive the next array rank ``source`` sent with this tag (blocks; deadlock-checked).

        The message keeps its sender's label; ``label`` names this rank's wait/recv spans
        (default: the sender's label)."""
        src = source
        if not (type(src) is int and 0 <= src < self.size and src != self.rank):  # inlined, as in _post
            src = self._check_peer(src, "source")
        if not (type(tag) is int and tag >= 0):
            tag = self._check_tag(tag)
        header, arr = self._transport.take(src, tag, self._deadline)
        n = header.nbytes
        _, wire_s, recv_s = self._costs.get(n) or self._link_costs(n)
        arrive = self._arrival_s(header, wire_s)
        self._ingress_free = arrive
        if self._record:
            self.messages.append(Message(src, self.rank, n, header.depart_s, arrive, tag, header.label,
                                         *(header.meta or ("", -1, -1))))
        label = label or header.label
        if arrive > self._t:
            self._advance(arrive - self._t, "wait", label)
        self._advance(recv_s, "recv", label)
        return arr

    def _arrival_s(self, header: Header, wire_s: float) -> float:
        return max(header.depart_s + self.link.latency_s + wire_s, self._ingress_free + wire_s)

    def _silent(self, src: int) -> bool:
        """Nothing more can come from src before we send again: everything it sent us is
        here, and it finished or waits on us with everything we sent it.
        (State is read before the counters: a rank bumps its counters before it blocks.)"""
        row = self._board[src]
        finished = row[STATE] == DONE
        waits_on_us = (row[STATE] == BLOCKED and row[WAIT_SRC] == self.rank
                       and row[FROM + self.rank] == self._row[self._sent + src])
        return (finished or waits_on_us) and row[self._sent + self.rank] == self._row[FROM + src]

    def recv_any(self, sources=None, tag: int = 0, label: str | None = None) -> tuple[int, np.ndarray]:
        """Receive the message with the earliest virtual arrival from any of ``sources``.

        Returns (src, array). Deterministic in virtual time (conservative, as in parallel
        discrete-event simulation): it decides only once every source has a message here,
        has finished, or is blocked on this rank; ties go to the lowest rank.
        """
        sources = [self._check_peer(s, "sources") for s in (sources if sources is not None else
                                                             [r for r in range(self.size) if r != self.rank])]
        tag = self._check_tag(tag)
        box, row = self._transport.mailbox, self._row
        while True:
            with box._cond:
                heads = {s: box.head(s, tag) for s in sources}
                if all(h is not None or self._silent(s) for s, h in heads.items()):
                    ready = [(self._arrival_s(h, self.link.wire_s(h.nbytes)), s) for s, h in heads.items() if h is not None]
                    if ready:
                        row[STATE] = RUNNING
                        break
                    if all(self._board[s][STATE] == DONE for s in sources):
                        raise RuntimeError(f"recv_any: every source in {sources} has finished; nothing can arrive")
                row[WAIT_SRC], row[WAIT_TAG], row[STATE] = ANY_SOURCE, tag, BLOCKED
                box._cond.wait(ANY_POLL_S)
                if box.aborted:
                    raise Aborted()
                if time.monotonic() > self._deadline:
                    raise TimeoutError(f"rank {self.rank}: recv_any from {sources} passed the deadline")
        src = min(ready)[1]
        return src, self.recv(src, tag, label)

    def isend(self, buf, dest: int, tag: int = 0, label: str = "", *, phase: str = "", step: int = -1,
              block: int = -1) -> Request:
        """Non-blocking send. Complete at once (the payload is copied), unless buf is memory
        from ``alloc`` on a backend that lends it: then ``wait()`` returns once the receiver
        has dropped the array, and buf must not be written before that (MPI's rule)."""
        loan = self._post(dest, buf, tag, label, True, phase, step, block)
        return _SENT if loan is None else Request(self, loan=loan, dst=dest)

    def irecv(self, source: int, tag: int = 0, label: str | None = None) -> Request:
        """Non-blocking receive; the message is charged when the request is waited on."""
        self._check_peer(source, "source"), self._check_tag(tag)
        return Request(self, source, tag, label)

    @staticmethod
    def wait(request: Request):
        return request.wait()

    @staticmethod
    def waitall(requests) -> list:
        return [r.wait() for r in requests]

    def sendrecv(self, sendbuf, dest: int, source: int, sendtag: int = 0, recvtag: int | None = None,
                 label: str = "") -> np.ndarray:
        """Send ``sendbuf`` to ``dest`` and receive from ``source`` (no deadlock: sends are buffered)."""
        self.send(sendbuf, dest, sendtag, label)
        return self.recv(source, sendtag if recvtag is None else recvtag)
