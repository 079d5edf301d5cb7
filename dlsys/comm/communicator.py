"""The Communicator a rank program talks to: mpi4py's calls on a virtual clock.

The virtual-time rules live in ``dlsys.comm.clock.VirtualClock`` (one screen, next to
DESIGN.md's); the Communicator checks arguments, charges every call to its clock, records
the trace and hands (header, array) pairs to its transport (``dlsys.comm.backends``), the
only part that differs between backends. So the same program gives the same values and the
same trace on every backend.

The point-to-point calls take mpi4py's lowercase signatures, names and defaults
(mpi4py/MPI/Comm.pyx): ``send(obj, dest, tag=0)``, ``ssend``, ``isend``, ``recv(buf=None,
source=ANY_SOURCE, tag=ANY_TAG, status=None)``, ``irecv(buf=None, source=ANY_SOURCE,
tag=ANY_TAG)`` and ``sendrecv(sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
recvtag=ANY_TAG, status=None)``, so a student's mpi4py program means the same here. Two
choices differ in how, not in what:

* ``source=ANY_SOURCE`` takes the message ``recv_any`` would: the earliest in *virtual*
  time, ties to the lowest rank (MPI takes whichever arrives first in real time), so a run
  is reproducible; ``status`` (a ``Status``) then tells the source and the tag. The rule
  is conservative: it decides once every other rank has a message here, has finished or
  waits on this rank (a server's ANY_SOURCE among workers that wait on it), or, when every
  rank waits (a token ring of ``comm.recv()``), once its message is the least pending one
  in virtual time (``board.least_pending``); ranks that all receive first, with nothing
  sent, are a deadlock the launcher reports;
* ``buf`` and ``recvbuf`` are accepted and ignored, as the value is always returned: in
  mpi4py they are scratch memory for the pickled message, not where the value goes. An int
  there is refused (``comm.recv(3)`` is mpi4py's buf=3, not source 3).

Our own arguments (``label``, ``phase``, ``step``, ``block``) are keyword-only.

This is the reading path: ``send`` is a check, the clock's send rule, the board's counters
and the transport. The collectives' per-message fast path (``shift``: the same rules
inlined, for 1024-rank emulations) lives beside it in ``dlsys.comm.fast``, held to the
same traces by the tests.
"""

from __future__ import annotations

import numpy as np

from ..machine.ledger import MemoryLedger
from ..machine.net import NodeModel
from ..machine.topology import Topology
from .board import ANY_SOURCE, ANY_TAG, EARLIEST, EARLIEST_SRC, FROM, POSTED, PULLED, SEEN, SYNC_ACK, board_row
from .clock import VirtualClock
from .mailbox import Header
from .oplog import OpLog
from .trace import Message

MAX_LABEL = 200
SIGNAL = "signal"  # the phase of a same-node hand-off (Communicator.signal)
DEADLINE_GRACE_S = 2.0  # a rank's own deadline is a backstop: the launcher's fires first
NOTHING = np.empty(0, np.uint8)  # the payload of a synchronous send's acknowledgement
NOTHING_PENDING = (float("inf"), ANY_SOURCE)  # a recv_any's published candidate when it has none


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


class Status:
    """mpi4py's ``MPI.Status`` for a receive: pass one as ``status=`` and read who sent the
    message and with which tag (what ANY_SOURCE and ANY_TAG leave open)."""

    def __init__(self):
        self.source, self.tag, self.nbytes = ANY_SOURCE, ANY_TAG, 0

    def Get_source(self) -> int:
        return self.source

    def Get_tag(self) -> int:
        return self.tag

    def __repr__(self):
        return f"<Status source={self.source} tag={self.tag} nbytes={self.nbytes}>"


def check_buffer(buf, name: str, call: str) -> None:
    """mpi4py's ``buf``/``recvbuf`` of a receive: None or memory (ignored here); anything
    else, an int above all, is a source or tag in the wrong place."""
    if buf is None or isinstance(buf, (np.ndarray, bytearray, memoryview)):
        return
    hint = (
        f"; to receive from rank {buf}, name it: comm.{call}(source={buf})"
        if isinstance(buf, (int, np.integer)) and not isinstance(buf, bool)
        else ""
    )
    raise TypeError(f"{call}: {name} (mpi4py's receive buffer) must be None or an array, got {buf!r}{hint}")


def message_label(label, phase: str = "", step: int = -1, block: int = -1) -> str:
    """A message's label: ``label``, or "<phase> step <s> block <i>" from its fields; at
    most MAX_LABEL characters."""
    if not label and phase:
        label = f"{phase} step {step}" + (f" block {block}" if block >= 0 else "")
    return label if type(label) is str and len(label) <= MAX_LABEL else str(label)[:MAX_LABEL]


class Request:
    """A non-blocking operation; ``wait()`` completes it and returns the received array
    (None for a send). A send request of lent memory completes when the receiver has
    dropped the array; wait() then charges no virtual time (the link model's sender never
    waits for its receiver): it is real-time synchronization only. A synchronous send's
    (``matched``: its Header) completes when the receiver has matched it (VirtualClock.matched).
    A receive is posted at the clock of ``irecv`` (``posted_s``), charged at ``wait()``
    (``src`` may be ANY_SOURCE, ``tag`` ANY_TAG: decided then, as ``recv`` decides them)."""

    def __init__(
        self,
        comm: Communicator,
        src: int | None = None,
        tag: int = 0,
        label=None,
        loan: int | None = None,
        dst: int | None = None,
        matched: Header | None = None,
        posted_s: float = 0.0,
    ):
        self._comm, self._src, self._tag, self._label, self._loan, self._dst = comm, src, tag, label, loan, dst
        self._matched, self._posted_s = matched, posted_s
        self._done, self._value = src is None and loan is None and matched is None, None

    def wait(self, status: Status | None = None):
        """Complete the operation; for a receive, return the array (and fill ``status``)."""
        if not self._done:
            if self._loan is not None:
                self._comm._transport.wait_released(self._loan, self._dst, self._comm._deadline)
            if self._matched is not None:
                self._comm._wait_matched(self._dst, self._matched)
            elif self._src is not None:
                self._value = self._comm._match(self._src, self._tag, self._label, self._posted_s, status)
            self._done = True
        return self._value


_SENT = Request(None)  # what isend returns when the payload was copied: already complete


class Communicator:
    """Rank-side API with mpi4py's signatures (the module's docstring), on a virtual clock.

    ``transport`` is this rank's end of a backend (dlsys.comm.backends.Transport);
    ``board`` the run's status board (dlsys.comm.board), where this rank counts its sends.
    ``network``: the link between every pair of ranks (dlsys.machine.topology.get_network).
    ``eager_limit_bytes``: sends of more bytes are synchronous (launch's option; None: none).
    ``log_ops``: keep ``ops``, this rank's operations in program order, for a replay of the
    run with links that messages share (dlsys.comm.replay, which lists the records;
    dlsys.comm.oplog keeps them compact); ``log_labels``: with the labels of sends (a
    replay that records a trace reads them).
    """

    def __init__(
        self,
        rank: int,
        size: int,
        transport,
        network: Topology,
        node: NodeModel,
        seed: int,
        deadline: float,
        board: np.ndarray,
        charge_reductions: bool = False,
        record: bool = True,
        log_ops: bool = False,
        log_labels: bool = True,
        eager_limit_bytes: int | None = None,
    ):
        self.rank, self.size, self.network, self.node = rank, size, network, node
        self.eager_limit_bytes = eager_limit_bytes
        self.rng = np.random.default_rng([seed, rank])
        self.charge_reductions = charge_reductions
        self._transport, self._board, self._row = transport, board, board_row(board, rank)
        self._deadline = deadline + DEADLINE_GRACE_S
        self._sent = FROM + size  # first column of this rank's sent-to counters
        self.bytes_sent = 0  # logical bytes this rank has sent (what its messages cost on the wire)
        self._clock = VirtualClock(rank, network, node, record)
        self._record = record
        self.spans = self._clock.spans
        self.messages: list[Message] = []
        self.ops: OpLog | None = OpLog(log_labels) if log_ops else None
        self._memory: MemoryLedger | None = None

    ANY_SOURCE, ANY_TAG = ANY_SOURCE, ANY_TAG  # mpi4py's MPI.ANY_SOURCE, MPI.ANY_TAG, at hand in a program

    def __repr__(self):
        return f"<Communicator rank {self.rank} of {self.size}, t={self.clock:.6g} s>"

    @property
    def clock(self) -> float:
        """This rank's virtual time in seconds."""
        return self._clock.t

    @property
    def memory(self) -> MemoryLedger:
        """This rank's memory ledger on its virtual clock (made when first asked for, so an
        emulation of thousands of ranks that never accounts pays nothing): the program
        records its allocations there and returns it to hand the timeline to the launcher."""
        if self._memory is None:
            self._memory = MemoryLedger(self.rank, lambda: self._clock.t)
        return self._memory

    @property
    def used_memory(self) -> MemoryLedger | None:
        """The ledger if the program asked for ``memory``, else None (what the launcher gets)."""
        return self._memory

    def compute(
        self,
        seconds: float | None = None,
        flops: float | None = None,
        label: str = "compute",
        nbytes: float | None = None,
    ) -> None:
        """Advance this rank's clock by compute time: ``seconds``, or a kernel on its node
        model, ``flops`` operations and/or ``nbytes`` of memory traffic (the roofline)."""
        if (seconds is None) == (flops is None and nbytes is None):
            raise ValueError("compute: give seconds=, or flops= and/or nbytes=")
        for name, value in (("seconds", seconds), ("flops", flops), ("nbytes", nbytes)):
            if value is not None and not (isinstance(value, (int, float, np.number)) and 0 <= value < float("inf")):
                raise ValueError(f"compute: {name} must be a finite number >= 0, got {value!r}")
        self._clock.compute(seconds, flops, label, nbytes)
        if self.ops is not None:
            self.ops.append(("compute", seconds, flops, label, nbytes))

    def charge_reduction(self, nbytes: int, label: str = "reduce") -> None:
        """Charge nbytes * gamma for a reduction, if the run switched reductions on."""
        if self.charge_reductions and nbytes:
            self._clock.reduction(nbytes, label)
            if self.ops is not None:
                self.ops.append(("reduce", nbytes, label))

    def _check_peer(self, peer, name: str, any_source: bool = False) -> int:
        if any_source and isinstance(peer, (int, np.integer)) and peer == ANY_SOURCE:
            return ANY_SOURCE
        if (
            not isinstance(peer, (int, np.integer))
            or isinstance(peer, bool)
            or not 0 <= peer < self.size
            or peer == self.rank
        ):
            either = " or ANY_SOURCE (-1)" if any_source else ""
            raise ValueError(
                f"{name} must be another rank in 0..{self.size - 1}{either} (this is rank {self.rank}), got {peer!r}"
            )
        return int(peer)

    @staticmethod
    def _check_tag(tag, name: str = "tag", any_tag: bool = False) -> int:
        if not isinstance(tag, (int, np.integer)) or isinstance(tag, bool) or tag < (ANY_TAG if any_tag else 0):
            either = " or ANY_TAG (-1)" if any_tag else ""
            raise ValueError(f"{name} must be an int >= 0{either}, got {tag!r}")
        return int(tag)

    def alloc(self, shape, dtype="float32") -> np.ndarray:
        """A zeroed array that ``isend`` may lend to the receiver instead of copying it.

        Like MPI_Alloc_mem or NCCL's registered buffers. On the processes backend it lives in
        shared memory, and ``isend`` of (a contiguous part of) it is zero-copy: the receiver's
        array *is* this memory, so the request completes only when the receiver has dropped
        that array, and, as in MPI, the sender must not write the buffer before ``wait()``.
        ``send`` still copies, and so do small payloads (a copy is cheaper than the
        receiver's "released" round trip). Backends that cannot lend (threads) return plain
        memory. The memory lives until the run ends: allocate buffers once and reuse them.
        """
        dtype = np.dtype(dtype)
        if dtype.kind not in "biufc":
            raise TypeError(f"alloc: dtype must be numeric (bool, int, float or complex), got {dtype}")
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError(f"alloc: shape must be an int >= 0 or a tuple of them, got {shape!r}")
        return self._transport.alloc(tuple(int(d) for d in shape), dtype)

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def send(
        self, obj, dest: int, tag: int = 0, *, label: str = "", phase: str = "", step: int = -1, block: int = -1
    ) -> None:
        """Send array ``obj`` to rank ``dest`` (mpi4py's ``comm.send``). Buffered (returns
        without waiting for the receiver), unless it is larger than the run's
        ``eager_limit_bytes`` (launch): then synchronous, as ``ssend``. ``phase``, ``step``
        and ``block`` describe a collective's message for figures (trace.Message); the label
        defaults to them."""
        _, header = self._post(obj, dest, tag, label, False, phase, step, block)
        if header.sync:
            self._wait_matched(int(dest), header)

    def ssend(self, obj, dest: int, tag: int = 0, *, label: str = "") -> None:
        """Synchronous send (MPI_Ssend, mpi4py's ``comm.ssend``): returns only once ``dest``
        has posted the matching receive, so two ranks that ssend to each other first wait
        for ever (the launcher reports the deadlock). As MPICH's eager synchronous send
        (src/mpid/ch3/src/ch3u_eager.c, MPIDI_CH3_EagerSyncAck): the data goes at once with
        a flag, the receiver's match sends an acknowledgement back; the time of that is
        VirtualClock.matched."""
        _, header = self._post(obj, dest, tag, label, False, "", -1, -1, sync=True)
        self._wait_matched(int(dest), header)

    def _post(
        self, buf, dest, tag, label, lend: bool, phase: str, step: int, block: int, sync: bool = False
    ) -> tuple[int | None, Header]:
        """send, ssend and isend: charge the send overhead and take the egress
        (VirtualClock.send), count the message on the board, hand it to the transport;
        returns the transport's loan number (a lent payload) or None, and the Header (its
        ``sync``: ``sync`` or larger than the eager limit)."""
        dst, tag, arr = self._check_peer(dest, "dest"), self._check_tag(tag), as_payload(buf)
        nbytes = payload_nbytes(arr)
        sync = sync or (self.eager_limit_bytes is not None and nbytes > self.eager_limit_bytes)
        if sync and self.ops is not None:
            raise ValueError(
                "a synchronous send (ssend, or a send above eager_limit_bytes) cannot run with "
                "sharing=True: the replay with shared links does not model it"
            )
        label = message_label(label, phase, step, block)
        depart = self._clock.send(nbytes, label, dst)
        self.bytes_sent += nbytes
        self._count_sent(dst)
        meta = (phase, step, block) if phase else None
        if self.ops is not None:
            op = ("send", dst, tag, nbytes, label, meta) if self.ops.labels else ("send", dst, tag, nbytes, "", None)
            self.ops.append_shared(op)
        header = Header(self.rank, tag, depart, nbytes, label, arr.dtype, arr.shape, None, meta, sync)
        return self._transport.post(dst, header, arr, lend), header

    def _wait_matched(self, dst: int, header: Header) -> None:
        """Wait for ``dst``'s acknowledgement of a synchronous send (it carries the time
        the matching receive was posted) and advance the clock to the match (VirtualClock.matched)."""
        ack, _ = self._transport.take(dst, SYNC_ACK, self._deadline)
        self._clock.matched(header.depart_s, ack.depart_s, header.label, dst)

    def _acknowledge(self, src: int, posted_s: float) -> None:
        """Tell ``src`` that this rank matched its synchronous send with a receive posted at
        ``posted_s`` (a control message: no clock charge, no trace record)."""
        self._count_sent(src)
        self._transport.post(
            src, Header(self.rank, SYNC_ACK, posted_s, 0, "", NOTHING.dtype, NOTHING.shape), NOTHING, False
        )

    def _count_sent(self, dst: int) -> None:
        """The board's counters of this rank's messages (deadlock detection reads them)."""
        self._row[POSTED] += 1
        self._row[self._sent + dst] += 1

    def recv(
        self,
        buf=None,
        source: int = ANY_SOURCE,
        tag: int = ANY_TAG,
        status: Status | None = None,
        *,
        label: str | None = None,
    ) -> np.ndarray:
        """Receive the next array rank ``source`` sent with this tag (mpi4py's ``comm.recv``;
        blocks; deadlock-checked; VirtualClock.receive). ANY_SOURCE: the earliest in virtual
        time (``recv_any``); ANY_TAG: the source's oldest message. ``buf`` is ignored (the
        module's docstring); ``status``, a Status, gets the source and tag. The message
        keeps its sender's label; ``label`` names this rank's wait/recv spans (default: the
        sender's label)."""
        src, tag = self._check_receive(buf, source, tag, status, "recv")
        return self._match(src, tag, label, self._clock.t, status)

    def _check_receive(self, buf, source, tag, status, call: str, names=("buf", "source", "tag")) -> tuple[int, int]:
        check_buffer(buf, names[0], call)
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"{call}: status must be None or a dlsys.comm.Status, got {status!r}")
        return self._check_peer(source, names[1], any_source=True), self._check_tag(tag, names[2], any_tag=True)

    def _match(
        self,
        src: int,
        tag: int,
        label: str | None,
        posted_s: float,
        status: Status | None,
        sources: list[int] | None = None,
    ) -> np.ndarray:
        """A checked receive posted at ``posted_s`` (irecv's clock, or recv's): ANY_SOURCE
        resolved as recv_any resolves it (among ``sources``, default every other rank), then
        taken, charged and recorded."""
        if src == ANY_SOURCE:
            src, _ = self._earliest_source(
                [r for r in range(self.size) if r != self.rank] if sources is None else sources, tag
            )
        header, arr = self._receive(src, tag, label, posted_s)
        if status is not None:
            status.source, status.tag, status.nbytes = src, header.tag, header.nbytes
        return arr

    def _receive(self, src: int, tag: int, label: str | None, posted_s: float):
        """Take the next message from ``src`` with ``tag`` (or ANY_TAG) posted at
        ``posted_s``; returns (header, array)."""
        header, arr = self._transport.take(src, tag, self._deadline)
        if header.sync:
            self._acknowledge(src, posted_s)
        arrive = self._clock.receive(header.depart_s, header.nbytes, label or header.label, src)
        if self.ops is not None:
            self.ops.append_shared(("recv", src, header.tag, label))
        if self._record:
            self.messages.append(
                Message(
                    src,
                    self.rank,
                    header.nbytes,
                    header.depart_s,
                    arrive,
                    header.tag,
                    header.label,
                    *(header.meta or ("", -1, -1)),
                )
            )
        return header, arr

    def recv_any(self, sources=None, tag: int = 0, label: str | None = None) -> tuple[int, np.ndarray]:
        """Receive the message with the earliest virtual arrival from any of ``sources``.

        Returns (src, array). Deterministic in virtual time (conservative, as in parallel
        discrete-event simulation): it decides only once every source has a message here,
        has finished, or is blocked on this rank (``Transport.silent``: the status board's
        ``board.silent`` where ranks share memory), or once every rank waits and its message
        is the least pending one (``Transport.least_pending``); ties go to the lowest rank.
        ``tag`` may be ANY_TAG. ``recv(source=ANY_SOURCE)`` is this over every other rank.
        """
        src, _ = self.peek_any(sources, tag)
        return src, self._receive(src, self._check_tag(tag, any_tag=True), label, self._clock.t)[1]

    def peek_any(self, sources=None, tag: int = 0) -> tuple[int, float]:
        """The source ``recv_any`` would take and when its message arrives here, taking
        nothing (a program that queues what has arrived by now, as a receiving thread
        does, asks whether the next message is already in)."""
        sources = [
            self._check_peer(s, "sources")
            for s in (sources if sources is not None else [r for r in range(self.size) if r != self.rank])
        ]
        return self._earliest_source(sources, self._check_tag(tag, any_tag=True))

    def _earliest_source(self, sources: list[int], tag: int) -> tuple[int, float]:
        """Which of ``sources`` recv_any takes its next message with ``tag`` from, and when
        that message arrives here (waits). By ``silent`` if it can; otherwise this rank
        publishes its earliest pending candidate on the board, and takes it once it is
        the least pending message of a world where every rank waits (``least_pending``)."""
        board, clock, transport, row = self._board, self._clock, self._transport, self._row
        chosen: dict[int, float] = {}
        decides = self.network.lookahead_s > 0  # else a reply could arrive with the least: a tie

        def earliest(head):
            heads = {s: head(s, tag) for s in sources}
            ready = [(clock.arrival(h.depart_s, h.nbytes, s), s) for s, h in heads.items() if h is not None]
            first = min(ready) if ready else NOTHING_PENDING
            if all(h is not None or transport.silent(board, s, self.rank) for s, h in heads.items()):
                if ready:
                    chosen[first[1]] = first[0]
                    return first[1]
                if all(transport.finished(board, s) for s in sources):
                    raise RuntimeError(f"recv_any: every source in {sources} has finished; nothing can arrive")
                return None
            # under the mailbox's lock: nothing is delivered while this candidate is published
            # (none without a lookahead: least_pending then finds a deadlock, as it is here)
            row[EARLIEST], row[EARLIEST_SRC], row[SEEN] = (*(first if decides else NOTHING_PENDING), row[PULLED])
            least = transport.least_pending(board)
            if least is not None and least[1:] == (self.rank, first[1]):
                chosen[first[1]] = first[0]
                return first[1]
            return None

        src = self._transport.wait_any(tag, earliest, self._deadline)
        return src, chosen[src]

    # --- one node's threads: a framework's compute thread and its communication threads ---

    @property
    def egress_free_s(self) -> float:
        """When this rank's egress finishes the bytes already posted (a scheduler posts
        its next message then, to keep the choice of what goes next until the last moment)."""
        return self._clock.egress_free

    @property
    def posted(self) -> int:
        """How many messages and signals this rank has posted (the board's count): the
        n-th post is number n - 1 for ``wait_sent``."""
        return int(self._row[POSTED])

    def wait_sent(self, k: int, time_s: float, label: str = "credit") -> None:
        """Idle until this rank's posts number 0..k have left its egress, which this run's
        clock says is at ``time_s`` (``egress_free_s`` after post k). A replay with shared
        links resolves it on its own flows (dlsys.comm.replay), not at ``time_s``."""
        if time_s > self._clock.t:
            self._clock.advance(time_s - self._clock.t, "wait", label)
        if self.ops is not None:
            self.ops.append(("wait_sent", k, time_s, label))

    def wait_left(self, k: int, time_s: float, label: str = "socket full") -> None:
        """Idle until this rank's post number k has left its egress (and so every earlier
        post to the same peer: one connection sends in order), which this run's clock says
        is at ``time_s``. ``wait_sent`` waits for posts 0..k to every peer; this one paces
        a single connection (a ZMQ socket's high-water mark, dlsys.schedule.p3). A
        replay with shared links resolves it on its own flows (dlsys.comm.replay)."""
        if time_s > self._clock.t:
            self._clock.advance(time_s - self._clock.t, "wait", label)
        if self.ops is not None:
            self.ops.append(("wait_left", k, time_s, label))

    def wait_until(self, time_s: float, label: str = "wait") -> None:
        """Idle until virtual time ``time_s`` (nothing if it has passed): a "wait" span."""
        if time_s > self._clock.t:
            self._clock.advance(time_s - self._clock.t, "wait", label)
        if self.ops is not None:
            self.ops.append(("wait", time_s, label))

    def signal(self, buf, dest: int, tag: int = 0, label: str = "") -> None:
        """Hand ``buf`` to ``dest``, a rank standing for another thread of this node (a
        framework's compute thread and its communication thread share memory): no link,
        no overhead, no wire bytes; it is there at this rank's current virtual time.
        ``dest`` takes it with ``wait_signal``. The trace records it with 0 bytes and
        phase "signal"."""
        dst, tag, arr = self._check_peer(dest, "dest"), self._check_tag(tag), as_payload(buf)
        # the header carries the payload's size (a transport restores logical sizes from it);
        # no clock charges it and the trace records 0 wire bytes
        header = Header(
            self.rank,
            tag,
            self._clock.t,
            payload_nbytes(arr),
            str(label)[:MAX_LABEL],
            arr.dtype,
            arr.shape,
            None,
            (SIGNAL, -1, -1),
        )
        self._count_sent(dst)
        if self.ops is not None:
            self.ops.append(("signal", dst, tag, header.label))
        self._transport.post(dst, header, arr, False)

    def wait_signal(self, source: int, tag: int = 0, label: str | None = None) -> np.ndarray:
        """The next ``signal`` from ``source`` with this tag: waits, in virtual time, until
        the moment it was signalled."""
        src, tag = self._check_peer(source, "source"), self._check_tag(tag)
        header, arr = self._transport.take(src, tag, self._deadline)
        if header.meta != (SIGNAL, -1, -1):
            raise ValueError(f"wait_signal: rank {src} sent a message, not a signal, on tag {tag}; use recv")
        if header.depart_s > self._clock.t:
            self._clock.advance(header.depart_s - self._clock.t, "wait", label or header.label)
        if self.ops is not None:
            self.ops.append(("wait_signal", src, tag, label))
        if self._record:
            self.messages.append(
                Message(src, self.rank, 0, header.depart_s, header.depart_s, tag, header.label, SIGNAL)
            )
        return arr

    def isend(
        self, obj, dest: int, tag: int = 0, *, label: str = "", phase: str = "", step: int = -1, block: int = -1
    ) -> Request:
        """Non-blocking send (mpi4py's ``comm.isend``). Complete at once (the payload is
        copied), unless obj is memory from ``alloc`` on a backend that lends it: then
        ``wait()`` returns once the receiver has dropped the array, and obj must not be
        written before that (MPI's rule)."""
        loan, header = self._post(obj, dest, tag, label, True, phase, step, block)
        if loan is None and not header.sync:
            return _SENT
        return Request(self, loan=loan, dst=int(dest), matched=header if header.sync else None)

    def irecv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG, *, label: str | None = None) -> Request:
        """Non-blocking receive (mpi4py's ``comm.irecv``), posted now (what a synchronous
        sender waits for); the message is matched and charged when the request is waited
        on (``wait(status)``), as ``recv`` matches it."""
        src, tag = self._check_receive(buf, source, tag, None, "irecv")
        return Request(self, src, tag, label, posted_s=self._clock.t)

    @staticmethod
    def wait(request: Request):
        return request.wait()

    @staticmethod
    def waitall(requests) -> list:
        return [r.wait() for r in requests]

    def sendrecv(
        self,
        sendobj,
        dest: int,
        sendtag: int = 0,
        recvbuf=None,
        source: int = ANY_SOURCE,
        recvtag: int = ANY_TAG,
        status: Status | None = None,
        *,
        label: str = "",
        phase: str = "",
        step: int = -1,
        block: int = -1,
    ) -> np.ndarray:
        """Send ``sendobj`` to ``dest`` and receive from ``source`` (mpi4py's
        ``comm.sendrecv``: ``comm.sendrecv(x, dest=right, source=left)``; note that
        ``comm.sendrecv(x, right, left)`` means sendtag=left, as in mpi4py). No deadlock,
        also when the send is synchronous (MPI_Sendrecv completes both; the receive is
        posted before this rank waits for the match). The receive is ``recv``'s (its
        ANY_SOURCE, ANY_TAG, ignored ``recvbuf`` and ``status``); ``phase``, ``step`` and
        ``block`` describe the sent message, as in ``send``."""
        self._check_tag(sendtag, "sendtag")
        src, recvtag = self._check_receive(
            recvbuf, source, recvtag, status, "sendrecv", ("recvbuf", "source", "recvtag")
        )
        _, header = self._post(sendobj, dest, sendtag, label, False, phase, step, block)
        got = self._match(src, recvtag, None, self._clock.t, status)
        if header.sync:
            self._wait_matched(int(dest), header)
        return got
