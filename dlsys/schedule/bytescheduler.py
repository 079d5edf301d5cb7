"""ByteScheduler (Peng et al. 2019, "A generic communication scheduler for distributed DNN
training acceleration", SOSP; bytedance/byteps, bytescheduler/common/bytecore.py): tensors
are partitioned into pieces of ``partition_params``; a priority queue (layer index: input
first) holds the pieces, and ByteCore's loop posts the highest-priority piece while the
bytes in flight stay within the ``credit_bytes``. Credit above one partition keeps the link
busy between posts (less idle, less preemption): the trade-off the paper auto-tunes.

The credit window (``CreditWindow``): at its clock t the sender looks at the items released by
t and picks the smallest priority; it posts it if the bytes posted and not yet on the wire
(their egress ends after t) plus the item fit the credit, or nothing is in flight; otherwise
it waits until the first in-flight item leaves the egress and decides again. So a
lower-priority item never departs while a higher-priority one is released and unposted at
that sender (the trace tests check it). A smaller credit preempts more often (at item
boundaries) and idles more between posts; 0: only onto an idle link.

Under ``sharing`` (dlsys.comm.replay) the replay times the program on links the machine's
streams share, so the sender's waits are logged as ``comm.wait_sent(k, time_s)``: "until my
posts 0..k have left the egress", at ``time_s`` in the run, on the replay's own flows in the
replay. Before each post it also waits for the latest item the run saw leave (a no-op in the
run), so the items in flight in the replay are among those the run allowed."""

from __future__ import annotations

import math

from .policy import Item, Option, Pacer, Policy, check_positive_int, slices


class ByteScheduler(Policy):
    name = "bytescheduler"
    paper = "Peng et al. 2019, ByteScheduler (SOSP)"
    colour = "#f58518"
    options = (
        Option(
            "partition_params",
            "integer",
            1,
            2**31,
            "parameters per partition",
            "ByteScheduler partition size (parameters)",
        ),
        Option(
            "credit_bytes",
            "size",
            1,
            2**40,
            "bytes in flight, e.g. 16MB",
            "ByteScheduler credit (MB in flight)",
            axis_factor=1e-6,
        ),
    )
    forward = "layer"
    cut = "partition_params"

    def __init__(self, partition_params: int = 1_000_000, credit_bytes: float = 16e6):
        self.partition_params = check_positive_int("partition_params", partition_params)
        if not (credit_bytes >= 4 * partition_params and credit_bytes < math.inf):
            raise ValueError(
                f"credit_bytes: expected at least one partition ({4 * partition_params} bytes of "
                f"float32), got {credit_bytes!r}"
            )
        self.credit_bytes = credit_bytes

    def items(self, layers):
        return slices(layers, self.partition_params)

    def pacer(self, comm, scheme):
        return CreditWindow(comm, self.credit_bytes)

    def describe(self):
        return f"bytescheduler (partitions of {self.partition_params:,}, credit {self.credit_bytes / 1e6:g} MB)"


class CreditWindow(Pacer):
    """ByteCore's credit (module docstring), counted over one iteration's posts."""

    def __init__(self, comm, credit_bytes: float):
        self.comm, self.credit_bytes = comm, credit_bytes
        self.start()

    def start(self) -> None:
        self.flight: list[tuple[int, float, int]] = []  # (post number, egress end, bytes) not yet left
        self.gone: tuple[int, float] | None = None  # (post number, egress end) of the latest known to have left
        self.logged: tuple[int, float] | None = None  # the latest a no-op wait was logged for

    def may_post(self, item: Item) -> bool:
        t = self.comm.clock
        left = [entry for entry in self.flight if entry[1] <= t]
        if left:  # the latest item that has left the egress: every post up to its last has left
            self.gone = left[-1][:2]
            self.flight = [entry for entry in self.flight if entry[1] > t]
        if self.flight and sum(n for _, _, n in self.flight) + 4 * item.size > self.credit_bytes:
            self.comm.wait_sent(*self.flight[0][:2], "credit: waiting for the link")
            return False
        return True

    def post(self, peer, item, send) -> None:
        if self.gone is not None and self.gone != self.logged:
            self.comm.wait_sent(
                *self.gone, "credit: waiting for the link"
            )  # a no-op here; a replay's egress may be slower
            self.logged = self.gone
        send()
        self.flight.append((self.comm.posted - 1, self.comm.egress_free_s, 4 * item.size))
