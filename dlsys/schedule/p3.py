"""P3, priority-based parameter propagation (Jayarajan et al. 2019, "Priority-based
parameter propagation for distributed DNN training", SysML): every layer is cut into
slices of ``slice_params`` parameters (40,000 in the paper); a slice of a layer nearer the
input has higher priority, because the next forward needs it first; a slice is posted only
when its server's connection has room (below), so a newly ready high-priority slice
preempts the rest within a slice or two; and forward of layer l starts as soon as layer
l's update is back.

How P3's artifact paces (github.com/anandj91/p3 at c647954): a worker's pushes go into one
priority queue per process (ps-lite/include/ps/kv_app.h line 546, ``Van::Push``;
threadsafe_queue.h lines 45-52, ``Compare`` on ``meta.priority``), and one thread
(src/van.cc lines 153-163, ``Van::Sending``) pops the top and sends it on its server's ZMQ
socket, whose send high-water mark is 1 message (src/zmq_van.h lines 104-105): the send
blocks while that socket holds a message besides the one on its wire. So the pacing is per
connection (``socket_hwm = 1``), not one slice on the machine's egress. A server's reply
(kv_app.h lines 435-451, ``KVServer::Response``) is sent by ``Van::Send`` from the thread
that handled the request, in the order requests were handled, on the same kind of socket:
it blocks that thread likewise (``reply_pacer``). And the thread that
handles the requests takes them from a priority queue too: the receiving thread puts each
message it receives into the customer's ``recv_queue_`` (src/van.cc line 354,
``Customer::Accept``), the same ``ThreadsafeQueue`` ordered on ``meta.priority``, which the
wire carries (src/van.cc lines 369 and 409), so a slice near the input that arrives while
the handler is blocked on a reply goes before the pushes queued ahead of it
(``server_priority``, ``PriorityInbox``; stock ps-lite's queue, MXNet's, is first in first out).
In the allreduce scheme (no sockets) P3 paces on the egress: a credit of 0 bytes, one slice on
the wire (``bytescheduler.CreditWindow``)."""

from __future__ import annotations

import heapq

import numpy as np

from .bytescheduler import CreditWindow
from .policy import Inbox, Option, Pacer, Policy, check_positive_int, slices


class P3(Policy):
    name = "p3"
    paper = "Jayarajan et al. 2019, Priority-based parameter propagation (SysML)"
    colour = "#e45756"
    options = (
        Option(
            "slice_params", "integer", 1, 2**31, "parameters per slice (paper: 40000)", "P3 slice size (parameters)"
        ),
    )
    forward = "layer"
    credit_bytes = 0  # the allreduce scheme (no sockets): one slice on the egress
    socket_hwm: int | None = 1  # None: pace on the egress (credit_bytes) in the ps scheme too
    server_priority = True
    cut = "slice_params"

    def __init__(self, slice_params: int = 40_000):
        self.slice_params = check_positive_int("slice_params", slice_params)

    def items(self, layers):
        return slices(layers, self.slice_params)

    def pacer(self, comm, scheme):
        """One sending thread pops the released slice of smallest priority and blocks on its
        server's socket (``Sockets.post``: P3's src/van.cc lines 153-163, ``Van::Sending``)."""
        if scheme != "ps" or self.socket_hwm is None:
            return CreditWindow(comm, self.credit_bytes)
        return Sockets(comm, self.socket_hwm)

    def reply_pacer(self, comm):
        """KVServer::Response: Van::Send on the worker's socket, blocking the server's thread."""
        return Pacer() if self.socket_hwm is None else Sockets(comm, self.socket_hwm)

    def inbox(self, comm, tag, priority_of):
        return PriorityInbox(comm, tag, priority_of) if self.server_priority else Inbox(comm, tag)

    def describe(self):
        return f"p3 (slices of {self.slice_params:,} parameters)"


class Sockets(Pacer):
    """One rank's sockets, one per peer, as ps-lite's ZMQ sockets with ``ZMQ_SNDHWM = hwm``
    (P3's src/zmq_van.h lines 104-105): ``post(peer, item, send)`` blocks until the peer's
    socket holds at most the message on its wire and ``hwm`` queued behind it (posts not
    yet left the egress, on this run's clock), then sends. A wait is logged as
    ``comm.wait_left(k, time_s)`` ("until my post k has left"), which a replay with shared
    links resolves on its own flows; before each post it also waits for the latest post to
    that peer the run saw leave (a no-op here), so a connection in the replay never holds
    more than the run allowed. The sockets outlive an iteration."""

    def __init__(self, comm, hwm: int):
        self.comm, self.hwm = comm, hwm
        self.flight: dict[int, list] = {}  # peer -> [(post number, egress end)] not yet left
        self.waited: dict[int, int] = {}  # peer -> the latest post a wait was logged for

    def post(self, peer, item, send) -> None:
        comm, flight, gone = self.comm, self.flight.setdefault(peer, []), None
        while True:
            while flight and flight[0][1] <= comm.clock:
                gone = flight.pop(0)
            if len(flight) <= self.hwm:
                break
            comm.wait_left(*flight[0], "socket full: waiting for the link")
            self.waited[peer] = flight[0][0]
        if gone is not None and gone[0] > self.waited.get(peer, -1):
            comm.wait_left(*gone, "socket full: waiting for the link")  # a no-op here
            self.waited[peer] = gone[0]
        send()
        flight.append((comm.posted - 1, comm.egress_free_s))


class PriorityInbox(Inbox):
    """The next push P3's server handles: its receiving thread queues every message as it
    arrives and its handler thread pops the one of highest priority (P3's ps-lite:
    src/van.cc line 354, ``Customer::Accept``, pushes into ``recv_queue_``, a
    ``ThreadsafeQueue`` ordered on ``meta.priority``, include/ps/internal/threadsafe_queue.h
    lines 45-52, which the worker set from the slice's priority, kv_app.h line 537, and the
    wire carries, src/van.cc lines 369 and 409; customer.cc, ``Customer::Receiving``, pops
    it and runs the handler, whose reply blocks it). So every push in by now is taken in
    first (one recv each, in arrival order), and a newly arrived slice near the input
    overtakes the queued ones."""

    def __init__(self, comm, tag, priority_of):
        super().__init__(comm, tag)
        self.priority_of = priority_of
        self.queued: list[tuple[tuple, int, np.ndarray]] = []  # the pushes in, not yet handled: (priority, src, array)

    def holds(self) -> bool:
        return bool(self.queued)

    def take(self, owed: dict[int, int]) -> tuple[int, np.ndarray]:
        comm, queued = self.comm, self.queued
        while any(owed.values()):
            candidates = [sender for sender, n in owed.items() if n]
            src, arrive_s = comm.peek_any(candidates, self.tag)
            if queued and arrive_s > comm.clock:
                break
            arr = comm.recv(source=src, tag=self.tag)
            owed[src] -= 1
            heapq.heappush(queued, (self.priority_of(arr), src, arr))  # (priority, src): unique in a round
        _, src, arr = heapq.heappop(queued)
        return src, arr
