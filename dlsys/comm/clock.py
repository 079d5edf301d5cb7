"""DESIGN.md's virtual-time rules for one rank: pure arithmetic, no I/O, no waiting.

A rank has a clock t (seconds), and its node's egress and ingress are busy until
egress_free and ingress_free (links are full duplex: the two are independent).
With o_s(n), o_r(n) the CPU overheads of the link model (per message, plus n / copy_bw
per kernel copy on TCP-like links), alpha its latency and B its bandwidth:

    compute(s)        t += s * slowdown            (or a kernel of f flops and m bytes of memory
                                                    traffic: max(f / sustained FLOP/s, m / bandwidth))
    reduction(n)      t += n * gamma               (the run's charge_reductions switch)
    send(n)           t += o_s(n)                  sends are buffered: no waiting for dst
                      d  = max(t, egress_free)     departs once the egress is free
                      egress_free = d + n / B      and occupies it for n / B
    arrival(d, n)     a  = max(d + alpha + n / B, ingress_free + n / B)
    receive(d, n)     ingress_free = a = arrival(d, n)
                      t  = max(t, a) + o_r(n)      idle ("wait") until a, then the overhead
    matched(d, r)     m  = max(r, d + alpha)       a synchronous send (ssend) is matched once the
                                                   receive is posted (at r, the receiver's clock)
                                                   and the envelope has arrived (d + alpha)
                      t  = max(t, m + alpha)       the sender idles ("wait") until the receiver's
                                                   acknowledgement is back (MPICH's eager sync ack)

The network (a dlsys.machine.topology.Topology) gives alpha, B and the overheads of the link
between each pair: a send is charged by its destination, an arrival by its source. Flat
(the default): one link for every pair.

Every advance of t is a trace span: compute, send (overhead), wait, recv (overhead).
These rules give a ring all-reduce exactly 2(p-1)(alpha + n/(pB)) and a parameter
server's incast exactly p * n / B at the server.
"""

from __future__ import annotations

from ..machine.net import LinkModel, NodeModel
from ..machine.topology import Topology
from .trace import Span


class VirtualClock:
    """One rank's clock, egress and ingress, and the spans that advanced the clock, on
    ``network`` (a Topology: the link between every pair of ranks)."""

    def __init__(self, rank: int, network: Topology, node: NodeModel, record: bool = True):
        self.rank, self.network, self.node, self.record = rank, network, node, record
        self.t = self.egress_free = self.ingress_free = 0.0
        self.spans: list[Span] = []

    def link_to(self, peer: int | None) -> LinkModel:
        """The link between this rank and ``peer`` (None: the link inside its supernode)."""
        return self.network.link if peer is None else self.network.link_between(self.rank, peer)

    def advance(self, seconds: float, kind: str, label: str) -> None:
        start = self.t
        self.t = end = start + seconds
        if self.record and end > start:
            self.spans.append(Span(self.rank, start, end, kind, label))

    def compute(
        self,
        seconds: float | None = None,
        flops: float | None = None,
        label: str = "compute",
        nbytes: float | None = None,
    ) -> None:
        dt = seconds * self.node.slowdown if seconds is not None else self.node.kernel_s(flops or 0, nbytes or 0)
        self.advance(float(dt), "compute", label)

    def reduction(self, nbytes: int, label: str = "reduce") -> None:
        self.advance(nbytes * self.node.gamma_s_per_byte, "compute", label)

    def send(self, nbytes: int, label: str = "", dst: int | None = None) -> float:
        """Charge the send overhead (of the link to ``dst``); return the departure time d."""
        link = self.link_to(dst)
        self.advance(link.send_overhead_s(nbytes), "send", label)
        depart = max(self.t, self.egress_free)
        self.egress_free = depart + link.wire_s(nbytes)
        return depart

    def arrival(self, depart_s: float, nbytes: int, src: int | None = None) -> float:
        """When a message from ``src`` that departed at depart_s would arrive here now
        (no state change)."""
        link = self.link_to(src)
        wire_s = link.wire_s(nbytes)
        return max(depart_s + link.latency_s + wire_s, self.ingress_free + wire_s)

    def receive(self, depart_s: float, nbytes: int, label: str = "", src: int | None = None) -> float:
        """Take a message from ``src`` in: occupy the ingress, wait for it, charge the
        receive overhead; return its arrival time a."""
        arrive = self.ingress_free = self.arrival(depart_s, nbytes, src)
        self.take_in(arrive, nbytes, label, src)
        return arrive

    def matched(self, depart_s: float, posted_s: float, label: str = "", dst: int | None = None) -> None:
        """A synchronous send to ``dst`` that departed at depart_s, matched by a receive
        posted at posted_s: wait for the acknowledgement (no overhead: it is a few bytes)."""
        latency_s = self.link_to(dst).latency_s
        back_s = max(posted_s, depart_s + latency_s) + latency_s
        if back_s > self.t:
            self.advance(back_s - self.t, "wait", label)

    def take_in(self, arrive_s: float, nbytes: int, label: str = "", src: int | None = None) -> None:
        """Wait for a message from ``src`` that arrives at arrive_s, then charge the receive
        overhead (a replay with shared links knows arrive_s from its flows)."""
        if arrive_s > self.t:
            self.advance(arrive_s - self.t, "wait", label)
        self.advance(self.link_to(src).recv_overhead_s(nbytes), "recv", label)
