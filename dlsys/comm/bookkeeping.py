"""What a Communicator keeps beside its clock, hooked behind the virtual-time rules so that
``send`` and ``recv`` read as those rules: the status board's counters of this rank's
messages (deadlock detection reads them, dlsys.comm.board), the op log (a replay with
shared links reads it, dlsys.comm.replay) and the trace's messages."""

from __future__ import annotations

import numpy as np

from .board import FROM, POSTED, board_row
from .mailbox import Header
from .replay.oplog import OpLog
from .trace import Message


class Bookkeeping:
    """One rank's books. ``log_ops``: keep ``ops``, its operations in program order
    (``log_labels``: with the labels of sends, which a replay that records a trace reads);
    ``record``: keep ``messages``, the trace's messages this rank received."""

    def __init__(self, rank: int, size: int, board: np.ndarray, record: bool, log_ops: bool, log_labels: bool):
        self.rank, self.record = rank, record
        self.row, self.sent_from = board_row(board, rank), FROM + size  # first column of the sent-to counters
        self.messages: list[Message] = []
        self.ops: OpLog | None = OpLog(log_labels) if log_ops else None

    def count_sent(self, dst: int) -> None:
        """The board's counters of this rank's messages (a control message counts too)."""
        self.row[POSTED] += 1
        self.row[self.sent_from + dst] += 1

    def sent(self, dst: int, tag: int, nbytes: int, label: str, meta) -> None:
        """A message this rank posted to ``dst``."""
        self.count_sent(dst)
        if self.ops is not None:
            labelled = self.ops.labels
            self.ops.append_shared(("send", dst, tag, nbytes, label if labelled else "", meta if labelled else None))

    def received(self, src: int, header: Header, arrive: float, label: str | None) -> None:
        """A message from ``src`` taken at ``arrive`` (``label``: the receiver's, or None)."""
        if self.ops is not None:
            self.ops.append_shared(("recv", src, header.tag, label))
        if self.record:
            meta = header.meta or ("", -1, -1)
            self.messages.append(
                Message(src, self.rank, header.nbytes, header.depart_s, arrive, header.tag, header.label, *meta)
            )

    def did(self, *op) -> None:
        """Any other operation (a compute, a reduction, a wait, a signal), as the replay lists it."""
        if self.ops is not None:
            self.ops.append(op)
