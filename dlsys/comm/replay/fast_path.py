"""The replay's fast path, beside its reading path (plain.py), as minitorch
keeps ``fast_ops`` beside ``tensor_ops``.

``replay(ops, network, nodes, fabric, record=False, fast=True)`` runs this loop: sharing
on, no trace, only the clocks (what ``dlsys simulate`` prints). It is plain.py's loop
with the same operations, the same order of ranks, the same FlowNetwork calls and the same
float operations in the same order, so the clocks are the same bit for bit
(tests/comm/test_replay.py holds them equal). A 1024-rank ring replays 2.1 M messages, and every
Python call costs about 0.1 us, so here

* each rank's table of distinct operations (oplog.py) is decoded once: a send's
  o_s(n) and its receiver's o_r(n) (the links between the two ranks), a compute's
  seconds and a reduction's n * gamma are computed per table row, not per operation;
* channels, (src, dst, tag), are numbered: lists, not dicts of tuples;
* a rank's clock is a float in a list: no VirtualClock, no spans;
* a receive that waits for its flow is completed where the flow finishes (t = max(t,
  arrive) + o_r), and the rank runs on from its next operation.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Sequence

from ...machine.flows import FlowNetwork
from ...machine.net import NodeModel
from ...machine.topology import Topology
from .credits import Credits
from .oplog import OpLog

SEND, RECV, SIGNAL, ADVANCE, WAIT, WAIT_SENT, WAIT_LEFT = range(7)  # a decoded operation's kind


def _decode(op: tuple, rank: int, network: Topology, node: NodeModel, channel, flows: FlowNetwork) -> tuple:
    """One logged operation (the list in dlsys.comm.replay) as (kind, numbers the loop needs)."""
    kind = op[0]
    if kind == "send":  # (SEND, dst, channel, n, o_s(n), the receiver's o_r(n), the route's latency)
        dst, n = op[1], op[3]
        return (
            SEND,
            dst,
            channel(rank, dst, op[2]),
            n,
            network.link_between(rank, dst).send_overhead_s(n),
            network.link_between(dst, rank).recv_overhead_s(n),
            flows.fabric.latency_s(rank, dst),
        )
    if kind == "wait_sent":  # (WAIT_SENT, k)
        return WAIT_SENT, op[1]
    if kind == "wait_left":  # (WAIT_LEFT, k)
        return WAIT_LEFT, op[1]
    if kind == "recv" or kind == "wait_signal":  # either takes the channel's next message or signal
        return RECV, channel(op[1], rank, op[2])
    if kind == "signal":
        return SIGNAL, channel(rank, op[1], op[2])
    if kind == "compute":  # VirtualClock.compute's seconds
        seconds, flops, _, nbytes = op[1:]
        return ADVANCE, float(
            seconds * node.slowdown if seconds is not None else node.kernel_s(flops or 0, nbytes or 0)
        )
    if kind == "reduce":  # VirtualClock.reduction's
        return ADVANCE, op[1] * node.gamma_s_per_byte
    return WAIT, op[1]


def replay_clocks(ops: Sequence, network: Topology, nodes: Sequence[NodeModel], flows: FlowNetwork) -> list[float]:
    """Every rank's final clock after replaying ``ops`` (OpLogs, or sequences of plain.py's
    tuples) with messages as flows of ``flows``."""
    replay = _FastReplay(ops, network, nodes, flows)
    size, runnable, ended = len(ops), replay.runnable, 0
    while True:
        while runnable:
            ended += replay.run(runnable.popleft())
        if ended == size:
            return replay.clocks
        t, done = flows.advance()
        if t == math.inf:
            stuck = [r for r in range(size) if replay.pc[r] < len(replay.programs[r][1])]
            raise RuntimeError(f"replay: ranks {stuck} wait for messages nobody sends (not the log of a finished run)")
        replay.wake(t, done)


class _FastReplay:
    """The replay's state, as plain.py's, with channels numbered and clocks as floats."""

    def __init__(self, ops: Sequence, network: Topology, nodes: Sequence[NodeModel], flows: FlowNetwork):
        size = len(ops)
        channels: dict[tuple[int, int, int], int] = {}

        def channel(src: int, dst: int, tag: int) -> int:
            return channels.setdefault((src, dst, tag), len(channels))

        self.programs = []
        for r, log in enumerate(ops):
            table, codes = (log.table, log.codes) if isinstance(log, OpLog) else (list(log), range(len(log)))
            self.programs.append(([_decode(op, r, network, nodes[r], channel, flows) for op in table], codes))
        # credit waits (credits.py): the ranks that make them follow their posts' flows
        self.credits = Credits(
            [any(op[0] == WAIT_SENT or op[0] == WAIT_LEFT for op in program) for program, _ in self.programs]
        )
        self.posted: list[deque] = [
            deque() for _ in channels
        ]  # a channel's messages not yet taken: (flow, o_r) or (-1, t)
        self.waiting_post: dict[int, int] = {}  # a channel -> the rank blocked on it
        self.waiting_flow: dict[int, int] = {}  # a flow -> the rank blocked on it
        self.arrived: dict[int, float] = {}  # flows finished, not yet taken
        self.blocked_on: list[deque | None] = [None] * size  # the channel whose message a waiting rank takes next
        self.clocks, self.pc = [0.0] * size, [0] * size
        self.runnable = deque(range(size))
        self.inject = flows.inject

    def run(self, r: int) -> bool:
        """Rank r's operations from pc[r] on, until it blocks or ends (True: it ended)."""
        program, codes = self.programs[r]
        posted, inject, runnable, credits = self.posted, self.inject, self.runnable, self.credits
        waiting_post, arrived, posts, latency_of = self.waiting_post, self.arrived, credits.posts, credits.latency_of
        t, i, end, track = self.clocks[r], self.pc[r], len(codes), credits.waits[r]
        while i < end:
            op = program[codes[i]]
            kind = op[0]
            if kind == SEND or kind == SIGNAL:
                if kind == SEND:
                    t = t + op[4]
                    flow = inject(r, op[1], op[3], t)
                    posted[op[2]].append((flow, op[5]))
                    if track:
                        posts[r].append(flow)
                        latency_of[flow] = op[6]
                else:
                    posted[op[1]].append((-1, t))
                    if track:
                        posts[r].append(-1)
                if waiting_post:
                    woken = waiting_post.pop(op[2] if kind == SEND else op[1], None)
                    if woken is not None:
                        runnable.append(woken)
            elif kind == RECV:
                channel = posted[op[1]]
                if not channel:
                    waiting_post[op[1]] = r
                    break
                flow, value = channel[0]
                if flow < 0:  # a signal, there at its sender's t
                    if value > t:
                        t = t + (value - t)
                else:
                    arrive = arrived.pop(flow, None)
                    if arrive is None:  # wake() takes it in
                        self.waiting_flow[flow] = r
                        self.blocked_on[r] = channel
                        break
                    if arrive > t:
                        t = t + (arrive - t)
                    t = t + value
                channel.popleft()
            elif kind == ADVANCE:
                t = t + op[1]
            elif kind == WAIT_SENT or kind == WAIT_LEFT:
                left = credits.left(r, kind == WAIT_LEFT, op[1])
                if left is None:
                    break
                if left > t:
                    t = t + (left - t)
            elif op[1] > t:  # WAIT
                t = t + (op[1] - t)
            i += 1
        self.clocks[r], self.pc[r] = t, i
        return i == end

    def wake(self, t: float, done: list[int]) -> None:
        """Flows ``done`` finished at ``t``: a receive waiting for one is completed here
        (t = max(t, arrive) + o_r) and its rank runs on from its next operation."""
        clocks, pc, runnable = self.clocks, self.pc, self.runnable
        for flow in done:
            if self.credits.latency_of:
                r = self.credits.finished(flow, t)
                if r is not None:
                    runnable.append(r)
            r = self.waiting_flow.pop(flow, None)
            if r is None:
                self.arrived[flow] = t
                continue
            _, o_r = self.blocked_on[r].popleft()  # the receive r blocked on, taken in here
            now = clocks[r]
            if t > now:
                now = now + (t - now)
            clocks[r], pc[r] = now + o_r, pc[r] + 1
            runnable.append(r)
