"""Replay a run with links that messages share (issue 24): the run decides, the replay times.

A run charges every message as if it had its pair's link to itself (clock.py). Messages
that cross one link at the same time share it (dlsys.machine.flows, max-min fair sharing),
and *when* a message finishes then depends on every other message in the network, which
no rank knows while it runs. So a run with ``sharing`` logs each rank's operations in
program order (``Communicator.ops``, a compact dlsys.comm.oplog.OpLog that reads as a
sequence of these tuples), and this module replays them, a deterministic discrete-event
simulation, single-threaded, after the ranks have finished:

    ("compute", seconds, flops, label, nbytes)   VirtualClock.compute
    ("reduce", nbytes, label)                    VirtualClock.reduction
    ("send", dst, tag, nbytes, label, meta)      t += o_s(n); the message is a flow ready at t
    ("recv", src, tag, label)                    the next message from src with this tag (MPI's
                                                 non-overtaking order): wait until its flow has
                                                 arrived, t = max(t, arrive) + o_r(n)
    ("signal", dst, tag, label)                  a same-node hand-off at t (no link)
    ("wait_signal", src, tag, label)             t = max(t, the signal's t)
    ("wait", time_s, label)                      t = max(t, time_s)
    ("wait_sent", k, time_s, label)              t = max(t, when this rank's posts 0..k have left
                                                 its egress): time_s, the run's, without sharing;
                                                 with sharing, on the replay's flows (below)
    ("wait_left", k, time_s, label)              the same for post k alone (and so its
                                                 connection's earlier posts): one socket's pacing

With ``sharing=False`` a send and a receive are clock.py's own rules, the same
``VirtualClock`` methods on the same numbers, so the replay gives the run's trace bit for
bit (tests/test_replay.py: every collective algorithm, every golden trace). That is the
oracle that the replay replays the run. With ``sharing=True`` the messages are flows on
``network.fabric(size)``: o_s and o_r stay DESIGN.md's, a flow pays its route's latency
and then its max-min fair share, re-solved whenever a flow starts or ends. A rank's
messages to one peer are one connection, first in first out (FlowNetwork's
``connections``: one TCP stream per peer, as ps-lite's one ZMQ socket per node, and as
clock.py's egress order): they do not share with each other, they queue.

A credit wait (``Communicator.wait_sent``: a scheduler posts its next item once its
earlier ones have left the egress) is resolved on the replay's own flows: a post has left
when its flow's last byte is on the wire, the flow's completion minus its route's latency.
In the flow model a flow pays its latency first and then moves its bytes, so a lone
flow's last byte leaves at ``ready + L + n / B - L = ready + n / B``: clock.py's
``egress_free``, and a sender that posts the next item then has it on the wire right
after the last one, as the run's egress does (the completion would add a gap of L per
item, 25 us on 10 GbE, a fifth of a P3 slice). Its flow is known to be done only at
its completion, so such a sender runs up to L behind the network; its next flow to
another machine pays a latency L again and starts no earlier than now, and a loopback
message (no link, no latency) starts now (FlowNetwork.inject).

What the replay keeps from the run (documented departures): every other choice that
depended on time. ``recv_any`` receives from the source the run chose (the earliest
arrival under the run's times); a scheduler's ``wait_until(time_s)`` keeps that time, and
which item a credit wait is followed by is the run's choice. The program's messages, sizes
and order are the run's.

Event order: ranks run until they block on a message; then the flow network advances to
its next event (a flow starts or finishes), and the ranks whose flows finished run on.
A running rank's clock is never behind the network's (it woke at an event, or has not
blocked yet; a credit wait's sender by at most its flow's latency, above), so flows only
start in the future; the order in which ranks run
between events changes nothing (max-min ties are exact, dlsys/machine/flows.py).

This loop is the reading path. ``replay(..., fast=True)`` without a trace runs the same
loop in dlsys/comm/replay_fast.py (decoded once per distinct operation, clocks as
floats), held to the same clocks bit for bit by tests/test_replay.py.
"""

from __future__ import annotations

import gc
import math
from collections import defaultdict, deque
from typing import NamedTuple, Sequence

from ..machine.fabric import Fabric
from ..machine.flows import FlowNetwork
from ..machine.net import NodeModel
from ..machine.topology import Topology
from .clock import VirtualClock
from .oplog import OpLog
from .replay_fast import replay_clocks
from .trace import Message, Trace

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
    """Replay every rank's ``ops`` (module docstring; an OpLog or a list of tuples per
    rank): o_s, o_r and the per-pair links of ``network``; with a ``fabric``
    (``network.fabric(len(ops))``), messages share its links (sharing on), else each has
    its pair's link (sharing off: the run's times). ``fast``: with a fabric and no trace
    (``record=False``), the same clocks from the fast path (dlsys.comm.replay_fast)."""
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
    size = len(ops)
    clocks = [VirtualClock(r, network, nodes[r], record) for r in range(size)]
    sharing = fabric is not None
    flows = FlowNetwork(fabric, record_rates=record, connections=True) if sharing else None
    posted: dict[tuple[int, int, int], deque] = defaultdict(deque)  # (src, dst, tag) -> messages not yet taken
    waiting_post: dict[tuple[int, int, int], int] = {}  # a channel -> the rank blocked on it
    waiting_flow: dict[int, int] = {}  # a flow -> the rank blocked on it
    arrived: dict[int, float] = {}  # flows finished, not yet taken
    messages: list[Message] = []
    pc = [0] * size
    ended: list[int] = []
    runnable = deque(range(size))
    inject = flows.inject if flows else None
    # credit waits: the ranks that make them, their posts' flows (-1: a signal), how many
    # of their posts are known to have left and when the last of those left
    waits = [any(op[0] in CREDIT_WAITS for op in (log.table if isinstance(log, OpLog) else log)) for log in ops]
    posts: list[list[int]] = [[] for _ in range(size)]
    checked, left_s = [0] * size, [0.0] * size
    latency_of: dict[int, float] = {}  # a flow of such a rank -> its route's latency
    left_at: dict[int, float] = {}  # such a flow, finished -> when its last byte left
    # (wait_sent takes a flow's entry once; wait_left keeps it: a rank makes one kind or the other)
    waiting_left: dict[int, int] = {}  # such a flow -> the rank whose credit waits for it

    def run(r: int) -> None:
        """Rank r's operations from pc[r] on, until it blocks or ends."""
        clock, mine, i, end = clocks[r], ops[r], pc[r], len(ops[r])
        while i < end:
            op = mine[i]
            kind = op[0]
            if kind == "send" or kind == "signal":
                dst, tag = op[1], op[2]
                if kind == "signal":
                    item = (SIGNAL, clock.t, op[3], None, None)
                    if waits[r]:
                        posts[r].append(-1)
                elif sharing:
                    clock.advance(clock.link_to(dst).send_overhead_s(op[3]), "send", op[4])
                    item = (op[3], clock.t, op[4], op[5], inject(r, dst, op[3], clock.t))
                    if waits[r]:
                        posts[r].append(item[4])
                        latency_of[item[4]] = fabric.latency_s(r, dst)
                else:
                    item = (op[3], clock.send(op[3], op[4], dst), op[4], op[5], None)
                posted[(r, dst, tag)].append(item)
                if waiting_post:
                    woken = waiting_post.pop((r, dst, tag), None)
                    if woken is not None:
                        runnable.append(woken)
            elif kind == "recv" or kind == "wait_signal":  # the channel's next message
                src, tag = op[1], op[2]
                channel = posted.get((src, r, tag))
                if not channel:
                    waiting_post[(src, r, tag)] = r
                    break
                nbytes, depart, label, meta, flow = channel[0]
                if nbytes == SIGNAL:
                    arrive = depart
                    if arrive > clock.t:
                        clock.advance(arrive - clock.t, "wait", op[3] or label)
                    meta, nbytes = (SIGNAL, -1, -1), 0
                elif sharing:
                    if flow not in arrived:
                        waiting_flow[flow] = r
                        break
                    arrive = arrived.pop(flow)
                    clock.take_in(arrive, nbytes, op[3] or label, src)
                else:
                    arrive = clock.receive(depart, nbytes, op[3] or label, src)
                channel.popleft()
                if record:
                    messages.append(Message(src, r, nbytes, depart, arrive, tag, label, *(meta or ("", -1, -1))))
            elif kind == "compute":
                clock.compute(op[1], op[2], op[3], op[4])
            elif kind == "reduce":
                clock.reduction(op[1], op[2])
            elif kind == "wait_sent" and sharing:  # posts 0..k have left: each flow's last byte
                mine_posts, k = posts[r], op[1]
                while checked[r] <= k:
                    flow = mine_posts[checked[r]]
                    if flow >= 0:
                        if flow not in left_at:
                            waiting_left[flow] = r
                            break
                        left_s[r] = max(left_s[r], left_at.pop(flow))
                    checked[r] += 1
                else:
                    if left_s[r] > clock.t:
                        clock.advance(left_s[r] - clock.t, "wait", op[3])
                    i += 1
                    continue
                break
            elif kind == "wait_left" and sharing:  # post k has left: its flow's last byte
                flow = posts[r][op[1]]
                if flow >= 0:
                    left = left_at.get(flow)
                    if left is None:
                        waiting_left[flow] = r
                        break
                    if left > clock.t:
                        clock.advance(left - clock.t, "wait", op[3])
            elif kind == "wait_sent" or kind == "wait_left":  # the run's time
                if op[2] > clock.t:
                    clock.advance(op[2] - clock.t, "wait", op[3])
            else:  # wait
                if op[1] > clock.t:
                    clock.advance(op[1] - clock.t, "wait", op[2])
            i += 1
        pc[r] = i
        if i == end:
            ended.append(r)

    while True:
        while runnable:
            run(runnable.popleft())
        if len(ended) == size:
            break
        t, done = (math.inf, []) if flows is None else flows.advance()
        if t == math.inf:
            stuck = [r for r in range(size) if pc[r] < len(ops[r])]
            raise RuntimeError(f"replay: ranks {stuck} wait for messages nobody sends (not the log of a finished run)")
        for flow in done:
            if latency_of:
                latency_s = latency_of.pop(flow, None)
                if latency_s is not None:
                    left_at[flow] = t - latency_s
                    woken = waiting_left.pop(flow, None)
                    if woken is not None:
                        runnable.append(woken)
            arrived[flow] = t
            woken = waiting_flow.pop(flow, None)
            if woken is not None:
                runnable.append(woken)
    messages.sort(key=lambda m: (m.arrive_s, m.dst, m.src))
    trace = Trace([s for c in clocks for s in c.spans], messages, size)
    return Replayed(trace, [c.t for c in clocks], flows.segments if flows else None, flows.events if flows else 0)


def link_load(result, bins: int = 50) -> list[dict]:
    """Bytes each link of the run's fabric (``result.network.fabric(world_size)``) carried
    in each of ``bins`` equal time bins from 0 to the last byte: one row per (link, bin)
    that carried bytes, {"link", "link_id", "bin", "start_s", "end_s", "nbytes"}.

    With sharing (``launch(sharing=True)``) a message moved at its max-min rate on every
    link of its route, stretch by stretch (``LaunchResult.segments``). Without, it held its
    pair's link for n / B before it arrived (DESIGN.md), so its bytes cross every link of
    its route at n / (n / B) during [arrive - n / B, arrive]. Needs a recorded trace."""
    if not (isinstance(bins, int) and not isinstance(bins, bool) and bins >= 1):
        raise ValueError(f"bins must be an integer >= 1, got {bins!r}")
    fabric = result.network.fabric(result.world_size)
    segments = result.segments
    if segments is None:
        segments = []
        for m in result.trace.messages:
            wire_s = result.network.link_between(m.src, m.dst).wire_s(m.nbytes)
            if m.nbytes and m.src != m.dst:
                segments.append((fabric.route(m.src, m.dst), m.arrive_s - wire_s, m.arrive_s, m.nbytes / wire_s))
    end_s = max((seg[2] for seg in segments), default=0.0)
    if end_s <= 0:
        return []
    width_s = end_s / bins
    load: dict[tuple[int, int], float] = defaultdict(float)
    for route, from_s, to_s, rate_Bps in segments:
        for b in range(int(from_s / width_s), min(int(to_s / width_s), bins - 1) + 1):
            overlap_s = min(to_s, (b + 1) * width_s) - max(from_s, b * width_s)
            if overlap_s > 0:
                for link in route:
                    load[(link, b)] += rate_Bps * overlap_s
    return [
        {
            "link": fabric.links[link].name,
            "link_id": link,
            "bin": b,
            "start_s": b * width_s,
            "end_s": (b + 1) * width_s,
            "nbytes": nbytes,
        }
        for (link, b), nbytes in sorted(load.items())
    ]
