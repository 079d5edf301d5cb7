"""mpi4py's ``Status`` and ``Request`` for the Communicator's receives and non-blocking calls."""

from __future__ import annotations

from .board import ANY_SOURCE, ANY_TAG
from .mailbox import Header


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
        comm,  # the Communicator (None: a request complete from the start)
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


SENT = Request(None)  # what isend returns when the payload was copied: already complete
