"""The replay, the reading path: every rank's logged operations (the list in
dlsys.comm.replay) on VirtualClocks, messages either on their pair's link (sharing off: the
run's times bit for bit) or as flows that share the fabric's links (sharing on)."""

from __future__ import annotations

import gc
import math
from collections import defaultdict, deque
from typing import NamedTuple, Sequence

from ...machine.fabric import Fabric
from ...machine.flows import FlowNetwork
from ...machine.net import NodeModel
from ...machine.topology import Topology
from ..clock import VirtualClock
from ..trace import Message, Trace
from .credits import Credits
from .fast_path import replay_clocks
from .oplog import OpLog

SIGNAL = "signal"  # Communicator.signal's phase
CREDIT_WAITS = ("wait_sent", "wait_left")  # the ops whose rank's posts the replay follows


class Replayed(NamedTuple):
    """A replay's trace and final clocks; under sharing, ``segments``: (route, from_s,
    to_s, rate_Bps) for every stretch a message moved at one rate (link_load reads them)."""

    trace: Trace
    clocks_s: list[float]
    segments: list | None
    flow_events: int


def replay(
    ops: Sequence[Sequence[tuple]],
    network: Topology,
    nodes: Sequence[NodeModel],
    fabric: Fabric | None = None,
    record: bool = True,
    fast: bool = False,
) -> Replayed:
    """Replay every rank's ``ops`` (dlsys.comm.replay's list; an OpLog or a list of tuples
    per rank): o_s, o_r and the per-pair links of ``network``; with a ``fabric``
    (``network.fabric(len(ops))``), messages share its links (sharing on), else each has
    its pair's link (sharing off: the run's times). ``fast``: with a fabric and no trace
    (``record=False``), the same clocks from the fast path (fast.py)."""
    paused = gc.isenabled()
    gc.disable()  # it makes no cycles: the collector would only walk the millions of logged ops again and again
    try:
        if fast and fabric is not None and not record:
            flows = FlowNetwork(fabric, connections=True)
            return Replayed(Trace([], [], len(ops)), replay_clocks(ops, network, nodes, flows), None, flows.events)
        return _replay(ops, network, nodes, fabric, record)
    finally:
        if paused:
            gc.enable()


def _replay(ops, network, nodes, fabric, record) -> Replayed:
    """Ranks run until they block on a message; then the flow network advances to its next
    event and the ranks whose flows finished run on (dlsys.comm.replay's event order)."""
    world = _World(ops, network, nodes, fabric, record)
    size, flows = len(ops), world.flows
    while True:
        while world.runnable:
            world.run(world.runnable.popleft())
        if len(world.ended) == size:
            break
        t, done = (math.inf, []) if flows is None else flows.advance()
        if t == math.inf:
            stuck = [r for r in range(size) if world.pc[r] < len(ops[r])]
            raise RuntimeError(f"replay: ranks {stuck} wait for messages nobody sends (not the log of a finished run)")
        world.wake(t, done)
    world.messages.sort(key=lambda m: (m.arrive_s, m.dst, m.src))
    trace = Trace([s for c in world.clocks for s in c.spans], world.messages, size)
    return Replayed(trace, [c.t for c in world.clocks], flows.segments if flows else None, flows.events if flows else 0)


class _World:
    """A replay's state: every rank's clock and place in its log, the messages posted and
    not yet taken, who waits for what, and the flows."""

    def __init__(self, ops, network: Topology, nodes, fabric: Fabric | None, record: bool):
        size = len(ops)
        self.ops, self.fabric, self.record, self.sharing = ops, fabric, record, fabric is not None
        self.clocks = [VirtualClock(r, network, nodes[r], record) for r in range(size)]
        self.flows = FlowNetwork(fabric, record_rates=record, connections=True) if fabric is not None else None
        self.posted: dict[tuple[int, int, int], deque] = defaultdict(deque)  # (src, dst, tag) -> messages not taken
        self.waiting_post: dict[tuple[int, int, int], int] = {}  # a channel -> the rank blocked on it
        self.waiting_flow: dict[int, int] = {}  # a flow -> the rank blocked on it
        self.arrived: dict[int, float] = {}  # flows finished, not yet taken
        self.messages: list[Message] = []
        self.pc = [0] * size
        self.ended: list[int] = []
        self.runnable = deque(range(size))
        # credit waits: the ranks that make them follow their posts' flows
        self.credits = Credits(
            [any(op[0] in CREDIT_WAITS for op in (log.table if isinstance(log, OpLog) else log)) for log in ops]
        )

    def run(self, r: int) -> None:
        """Rank r's operations from pc[r] on, until it blocks or ends."""
        clock, mine, i, end = self.clocks[r], self.ops[r], self.pc[r], len(self.ops[r])
        while i < end:
            op = mine[i]
            kind = op[0]
            if kind == "send" or kind == "signal":
                self.post(r, clock, op)
            elif kind == "recv" or kind == "wait_signal":  # the channel's next message
                if not self.take(r, clock, op):
                    break
            elif kind == "compute":
                clock.compute(op[1], op[2], op[3], op[4])
            elif kind == "reduce":
                clock.reduction(op[1], op[2])
            elif kind in CREDIT_WAITS and self.sharing:  # resolved on the flows
                left = self.credits.left(r, kind == "wait_left", op[1])
                if left is None:
                    break
                if left > clock.t:
                    clock.advance(left - clock.t, "wait", op[3])
            elif kind in CREDIT_WAITS:  # the run's time
                if op[2] > clock.t:
                    clock.advance(op[2] - clock.t, "wait", op[3])
            elif op[1] > clock.t:  # wait
                clock.advance(op[1] - clock.t, "wait", op[2])
            i += 1
        self.pc[r] = i
        if i == end:
            self.ended.append(r)

    def post(self, r: int, clock: VirtualClock, op: tuple) -> None:
        """A send (the clock's send rule, or o_s and a flow ready then) or a signal (at t)."""
        kind, dst, tag = op[0], op[1], op[2]
        if kind == "signal":
            item = (SIGNAL, clock.t, op[3], None, None)
            if self.credits.waits[r]:
                self.credits.posts[r].append(-1)
        elif self.sharing:
            clock.advance(clock.link_to(dst).send_overhead_s(op[3]), "send", op[4])
            item = (op[3], clock.t, op[4], op[5], self.flows.inject(r, dst, op[3], clock.t))
            if self.credits.waits[r]:
                self.credits.posts[r].append(item[4])
                self.credits.latency_of[item[4]] = self.fabric.latency_s(r, dst)
        else:
            item = (op[3], clock.send(op[3], op[4], dst), op[4], op[5], None)
        self.posted[(r, dst, tag)].append(item)
        if self.waiting_post:
            woken = self.waiting_post.pop((r, dst, tag), None)
            if woken is not None:
                self.runnable.append(woken)

    def take(self, r: int, clock: VirtualClock, op: tuple) -> bool:
        """A receive (or wait_signal) of the channel's next message; False: r waits for it."""
        src, tag = op[1], op[2]
        channel = self.posted.get((src, r, tag))
        if not channel:
            self.waiting_post[(src, r, tag)] = r
            return False
        nbytes, depart, label, meta, flow = channel[0]
        if nbytes == SIGNAL:
            arrive = depart
            if arrive > clock.t:
                clock.advance(arrive - clock.t, "wait", op[3] or label)
            meta, nbytes = (SIGNAL, -1, -1), 0
        elif self.sharing:
            if flow not in self.arrived:
                self.waiting_flow[flow] = r
                return False
            arrive = self.arrived.pop(flow)
            clock.take_in(arrive, nbytes, op[3] or label, src)
        else:
            arrive = clock.receive(depart, nbytes, op[3] or label, src)
        channel.popleft()
        if self.record:
            self.messages.append(Message(src, r, nbytes, depart, arrive, tag, label, *(meta or ("", -1, -1))))
        return True

    def wake(self, t: float, done: list[int]) -> None:
        """Flows ``done`` finished at ``t``: the ranks waiting for them run on."""
        for flow in done:
            if self.credits.latency_of:
                woken = self.credits.finished(flow, t)
                if woken is not None:
                    self.runnable.append(woken)
            self.arrived[flow] = t
            woken = self.waiting_flow.pop(flow, None)
            if woken is not None:
                self.runnable.append(woken)
