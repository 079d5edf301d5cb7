"""One rank's operations in program order, for a replay with links that messages share
(dlsys.comm.replay lists the operations; the Communicator logs them through dlsys.comm.bookkeeping).

A 1024-rank ring all-reduce makes 2.1 M sends and 2.1 M receives, and each rank repeats
the same few over and over: "send n bytes to my right neighbour with tag 0", "receive from
my left neighbour with tag 0". So the log keeps each distinct operation once, in
``table``, and the program as positions in that table, in ``codes`` (4 bytes an
operation): the ring's 4.2 M operations are a few table rows and 17 MB of codes, where
a list of tuples took 650 MB. The log reads as the sequence of operations:
``log[i]`` is the i-th operation, a tuple as dlsys.comm.replay lists them.

Only sends and receives share rows (``append_shared``): their fields are
ints and strings that the Communicator has checked, so two equal ones are the same
operation. A compute or wait carries the caller's numbers (an np.float32 equals a float
of the same value but computes differently), so each is kept as given (``append``).

``labels=False`` (a replay that records no trace) logs sends without their label and
phase fields: they are what makes each send distinct, and only a trace reads them.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence


class OpLog(Sequence):
    """One rank's operations: ``table`` (distinct operations), ``codes`` (the program,
    positions in the table). ``labels``: keep the labels of sends (a replay that records
    a trace needs them)."""

    def __init__(self, labels: bool = True):
        self.labels = labels
        self.table: list[tuple] = []
        self.codes = array("i")
        self._index: dict[tuple, int] = {}

    def append(self, op: tuple) -> None:
        """Log ``op`` as its own table row."""
        self.codes.append(len(self.table))
        self.table.append(op)

    def append_shared(self, op: tuple) -> None:
        """Log ``op`` (a send or a receive) as the table row of an equal one, if any."""
        self.codes.append(self.intern(op))

    def intern(self, op: tuple) -> int:
        """The table position of ``op`` (a send or a receive), added if new; the caller
        appends it to ``codes`` (the fast path keeps it and logs it again and again)."""
        try:
            code = self._index.get(op)
        except TypeError:  # a receive labelled with something unhashable
            self.table.append(op)
            return len(self.table) - 1
        if code is None:
            code = self._index[op] = len(self.table)
            self.table.append(op)
        return code

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):  # a Sequence of tuples: log[i], iteration, len
        return self.table[self.codes[i]]

    def __getstate__(self):  # a process backend sends the log back to the launcher: the index stays here
        return self.labels, self.table, self.codes

    def __setstate__(self, state) -> None:
        self.labels, self.table, self.codes = state
        self._index = {}
