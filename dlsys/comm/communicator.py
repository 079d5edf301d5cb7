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

This is the reading path: ``send`` is a check, the clock's send rule, the books and the
transport. Beside it, one concern each: ``bookkeeping.py`` the books (the board's counters,
the op log a replay reads, the trace's messages), ``request.py`` Status and Request,
``anysource.py`` the rule of ANY_SOURCE, ``node_threads.py`` the calls of ranks that stand
for threads of one node (signals, credit waits). The collectives' per-message fast path
(``shift``: the same rules inlined, for 1024-rank emulations) lives in ``dlsys.comm.fast``,
held to the same traces by the tests.
"""

from __future__ import annotations

import numpy as np

from ..machine.ledger import MemoryLedger
from ..machine.net import NodeModel
from ..machine.topology import Topology
from .anysource import earliest_source
from .board import ANY_SOURCE, ANY_TAG, SYNC_ACK
from .bookkeeping import Bookkeeping
from .clock import VirtualClock
from .mailbox import Header
from .node_threads import NodeThreads
from .payload import NOTHING, as_payload, check_buffer, message_label, payload_nbytes
from .request import SENT, Request, Status

DEADLINE_GRACE_S = 2.0  # a rank's own deadline is a backstop: the launcher's fires first


class Communicator(NodeThreads):
    """Rank-side API with mpi4py's signatures (the module's docstring), on a virtual clock.

    ``transport`` is this rank's end of a backend (dlsys.comm.backends.Transport);
    ``board`` the run's status board (dlsys.comm.board), where this rank counts its sends.
    ``network``: the link between every pair of ranks (dlsys.machine.topology.get_network).
    ``eager_limit_bytes``: sends of more bytes are synchronous (launch's option; None: none).
    ``log_ops``: keep ``ops``, this rank's operations in program order, for a replay of the
    run with links that messages share (dlsys.comm.replay, which lists the records and
    keeps them compact); ``log_labels``: with the labels of sends (a replay that records a
    trace reads them).
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
        self._transport, self._board = transport, board
        self._deadline = deadline + DEADLINE_GRACE_S
        self.bytes_sent = 0  # logical bytes this rank has sent (what its messages cost on the wire)
        self._clock = VirtualClock(rank, network, node, record)
        self._books = Bookkeeping(rank, size, board, record, log_ops, log_labels)
        self.spans, self.messages, self.ops = self._clock.spans, self._books.messages, self._books.ops
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
        self._books.did("compute", seconds, flops, label, nbytes)

    def charge_reduction(self, nbytes: int, label: str = "reduce") -> None:
        """Charge nbytes * gamma for a reduction, if the run switched reductions on."""
        if self.charge_reductions and nbytes:
            self._clock.reduction(nbytes, label)
            self._books.did("reduce", nbytes, label)

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
        (VirtualClock.send), hand the message to the transport; returns the transport's
        loan number (a lent payload) or None, and the Header (its ``sync``: ``sync`` or
        larger than the eager limit)."""
        dst, tag, arr = self._check_peer(dest, "dest"), self._check_tag(tag), as_payload(buf)
        nbytes = payload_nbytes(arr)
        sync = sync or (self.eager_limit_bytes is not None and nbytes > self.eager_limit_bytes)
        if sync and self.ops is not None:
            raise ValueError(
                "a synchronous send (ssend, or a send above eager_limit_bytes) cannot run with shared links "
                "(sharing=True, the default on a topology with links above its nodes): the replay does not "
                "model it; launch with sharing=False for the per-pair clock"
            )
        label = message_label(label, phase, step, block)
        depart = self._clock.send(nbytes, label, dst)
        self.bytes_sent += nbytes
        meta = (phase, step, block) if phase else None
        self._books.sent(dst, tag, nbytes, label, meta)
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
        self._books.count_sent(src)
        self._transport.post(
            src, Header(self.rank, SYNC_ACK, posted_s, 0, "", NOTHING.dtype, NOTHING.shape), NOTHING, False
        )

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
        self, src: int, tag: int, label: str | None, posted_s: float, status: Status | None, sources=None
    ) -> np.ndarray:
        """A checked receive posted at ``posted_s`` (irecv's clock, or recv's): ANY_SOURCE
        resolved as recv_any resolves it (among ``sources``, default every other rank), then
        taken, charged and recorded."""
        if src == ANY_SOURCE:
            others = [r for r in range(self.size) if r != self.rank] if sources is None else sources
            src, _ = earliest_source(self, others, tag)
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
        self._books.received(src, header, arrive, label)
        return header, arr

    def recv_any(self, sources=None, tag: int = 0, label: str | None = None) -> tuple[int, np.ndarray]:
        """Receive the message with the earliest virtual arrival from any of ``sources``
        (default: every other rank); returns (src, array). Deterministic in virtual time
        (dlsys.comm.anysource); ``tag`` may be ANY_TAG. ``recv(source=ANY_SOURCE)`` is this
        over every other rank."""
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
        return earliest_source(self, sources, self._check_tag(tag, any_tag=True))

    def isend(
        self, obj, dest: int, tag: int = 0, *, label: str = "", phase: str = "", step: int = -1, block: int = -1
    ) -> Request:
        """Non-blocking send (mpi4py's ``comm.isend``). Complete at once (the payload is
        copied), unless obj is memory from ``alloc`` on a backend that lends it: then
        ``wait()`` returns once the receiver has dropped the array, and obj must not be
        written before that (MPI's rule)."""
        loan, header = self._post(obj, dest, tag, label, True, phase, step, block)
        if loan is None and not header.sync:
            return SENT
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
