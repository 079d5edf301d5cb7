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
it blocks that thread likewise (dlsys.schedule.engine ``_server``). And the thread that
handles the requests takes them from a priority queue too: the receiving thread puts each
message it receives into the customer's ``recv_queue_`` (src/van.cc line 354,
``Customer::Accept``), the same ``ThreadsafeQueue`` ordered on ``meta.priority``, which the
wire carries (src/van.cc lines 369 and 409), so a slice near the input that arrives while
the handler is blocked on a reply goes before the pushes queued ahead of it
(``server_priority``; stock ps-lite's queue, MXNet's, is first in first out)."""

from .policy import Option, Policy, check_positive_int, slices


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
    socket_hwm = 1
    server_priority = True
    cut = "slice_params"

    def __init__(self, slice_params: int = 40_000):
        self.slice_params = check_positive_int("slice_params", slice_params)

    def items(self, layers):
        return slices(layers, self.slice_params)

    def describe(self):
        return f"p3 (slices of {self.slice_params:,} parameters)"
