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

Every advance of t is a trace span: compute, send (overhead), wait, recv (overhead).
These rules give a ring all-reduce exactly 2(p-1)(alpha + n/(pB)) and a parameter
server's incast exactly p * n / B at the server.
"""

from __future__ import annotations

from ..net import LinkModel, NodeModel
from .trace import Span


class VirtualClock:
    """One rank's clock, egress and ingress, and the spans that advanced the clock."""

    def __init__(self, rank: int, link: LinkModel, node: NodeModel, record: bool = True):
        self.rank, self.link, self.node, self.record = rank, link, node, record
        self.t = self.egress_free = self.ingress_free = 0.0
        self.spans: list[Span] = []
        # (o_s, n / B, o_r) by n: a ring sends one size over and over, so a send reads
        # ``self._costs.get(n) or self._link_costs(n)``: a dict lookup, not three calls.
        self._costs: dict[int, tuple[float, float, float]] = {}

    def advance(self, seconds: float, kind: str, label: str) -> None:
        start = self.t
        self.t = end = start + seconds
        if self.record and end > start:
            self.spans.append(Span(self.rank, start, end, kind, label))

    def compute(self, seconds: float | None = None, flops: float | None = None, label: str = "compute",
                nbytes: float | None = None) -> None:
        dt = seconds * self.node.slowdown if seconds is not None else self.node.kernel_s(flops or 0, nbytes or 0)
        self.advance(float(dt), "compute", label)

    def reduction(self, nbytes: int, label: str = "reduce") -> None:
        self.advance(nbytes * self.node.gamma_s_per_byte, "compute", label)

    def send(self, nbytes: int, label: str = "") -> float:
        """Charge the send overhead; return the departure time d."""
        send_s, wire_s, _ = self._costs.get(nbytes) or self._link_costs(nbytes)
        self.advance(send_s, "send", label)
        depart = max(self.t, self.egress_free)
        self.egress_free = depart + wire_s
        return depart

    def arrival(self, depart_s: float, nbytes: int) -> float:
        """When a message that departed at depart_s would arrive here now (no state change)."""
        wire_s = (self._costs.get(nbytes) or self._link_costs(nbytes))[1]
        return max(depart_s + self.link.latency_s + wire_s, self.ingress_free + wire_s)

    def receive(self, depart_s: float, nbytes: int, label: str = "") -> float:
        """Take a message in: occupy the ingress, wait for it, charge the receive overhead;
        return its arrival time a."""
        _, wire_s, recv_s = self._costs.get(nbytes) or self._link_costs(nbytes)
        # arrival(depart_s, nbytes), inlined: this runs once per message
        arrive = self.ingress_free = max(depart_s + self.link.latency_s + wire_s, self.ingress_free + wire_s)
        if arrive > self.t:
            self.advance(arrive - self.t, "wait", label)
        self.advance(recv_s, "recv", label)
        return arrive

    def _link_costs(self, nbytes: int) -> tuple[float, float, float]:
        link = self.link
        costs = self._costs[nbytes] = (link.send_overhead_s(nbytes), link.wire_s(nbytes), link.recv_overhead_s(nbytes))
        return costs
