"""One node's threads: a framework's compute thread and its communication threads, each a
rank of the emulation that shares the node's memory (dlsys.schedule's engines). The
Communicator's calls for them: same-node hand-offs (``signal``, ``wait_signal``: no link,
no wire bytes) and waits for time or for this rank's egress (a scheduler's credit)."""

from __future__ import annotations

import numpy as np

from .board import POSTED
from .mailbox import Header
from .payload import MAX_LABEL, as_payload, payload_nbytes
from .trace import Message

SIGNAL = "signal"  # the phase of a same-node hand-off (Communicator.signal)


class NodeThreads:
    """The Communicator's calls for ranks that stand for threads of one node (a mixin: it
    uses the Communicator's clock, books, checks and transport)."""

    @property
    def egress_free_s(self) -> float:
        """When this rank's egress finishes the bytes already posted (a scheduler posts
        its next message then, to keep the choice of what goes next until the last moment)."""
        return self._clock.egress_free

    @property
    def posted(self) -> int:
        """How many messages and signals this rank has posted (the board's count): the
        n-th post is number n - 1 for ``wait_sent``."""
        return int(self._books.row[POSTED])

    def wait_sent(self, k: int, time_s: float, label: str = "credit") -> None:
        """Idle until this rank's posts number 0..k have left its egress, which this run's
        clock says is at ``time_s`` (``egress_free_s`` after post k). A replay with shared
        links resolves it on its own flows (dlsys.comm.replay), not at ``time_s``."""
        self._idle_until(time_s, label)
        self._books.did("wait_sent", k, time_s, label)

    def wait_left(self, k: int, time_s: float, label: str = "socket full") -> None:
        """Idle until this rank's post number k has left its egress (and so every earlier
        post to the same peer: one connection sends in order), which this run's clock says
        is at ``time_s``. ``wait_sent`` waits for posts 0..k to every peer; this one paces
        a single connection (a ZMQ socket's high-water mark, dlsys.schedule.p3). A
        replay with shared links resolves it on its own flows (dlsys.comm.replay)."""
        self._idle_until(time_s, label)
        self._books.did("wait_left", k, time_s, label)

    def wait_until(self, time_s: float, label: str = "wait") -> None:
        """Idle until virtual time ``time_s`` (nothing if it has passed): a "wait" span."""
        self._idle_until(time_s, label)
        self._books.did("wait", time_s, label)

    def _idle_until(self, time_s: float, label: str) -> None:
        if time_s > self._clock.t:
            self._clock.advance(time_s - self._clock.t, "wait", label)

    def signal(self, buf, dest: int, tag: int = 0, label: str = "") -> None:
        """Hand ``buf`` to ``dest``, a rank standing for another thread of this node (a
        framework's compute thread and its communication thread share memory): no link,
        no overhead, no wire bytes; it is there at this rank's current virtual time.
        ``dest`` takes it with ``wait_signal``. The trace records it with 0 bytes and
        phase "signal"."""
        dst, tag, arr = self._check_peer(dest, "dest"), self._check_tag(tag), as_payload(buf)
        # the header carries the payload's size (a transport restores logical sizes from it);
        # no clock charges it and the trace records 0 wire bytes
        label = str(label)[:MAX_LABEL]
        header = Header(
            self.rank, tag, self._clock.t, payload_nbytes(arr), label, arr.dtype, arr.shape, None, (SIGNAL, -1, -1)
        )
        self._books.count_sent(dst)
        self._books.did("signal", dst, tag, label)
        self._transport.post(dst, header, arr, False)

    def wait_signal(self, source: int, tag: int = 0, label: str | None = None) -> np.ndarray:
        """The next ``signal`` from ``source`` with this tag: waits, in virtual time, until
        the moment it was signalled."""
        src, tag = self._check_peer(source, "source"), self._check_tag(tag)
        header, arr = self._transport.take(src, tag, self._deadline)
        if header.meta != (SIGNAL, -1, -1):
            raise ValueError(f"wait_signal: rank {src} sent a message, not a signal, on tag {tag}; use recv")
        self._idle_until(header.depart_s, label or header.label)
        self._books.did("wait_signal", src, tag, label)
        if self._books.record:
            self._books.messages.append(
                Message(src, self.rank, 0, header.depart_s, header.depart_s, tag, header.label, SIGNAL)
            )
        return arr
