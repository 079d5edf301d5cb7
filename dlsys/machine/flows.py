"""Messages that share links: max-min fair rates and a flow-level event simulation.

Pure, like the rest of dlsys.machine. A *flow* is one message on a Fabric (fabric.py):
``Flow(src, dst, nbytes, ready_s)``, where ``ready_s`` is when its first byte may leave
(after the sender's CPU overhead; DESIGN.md's o_s and o_r stay with whoever charges the
ranks' clocks). Its completion time is when its last byte arrives.

**The model** (SimGrid's flow-level model CM02 with its corrections off: Casanova &
Marchal, "A network model for simulation of grid application", LIP RR-2002-40; Velho,
Schnorr, Casanova & Legrand, "On the validity of flow-level TCP network models for grid
and cloud simulations", ACM TOMACS 23(4), 2013):

1. A flow first pays its route's latency, L = sum of its links' latencies: it joins the
   network at ``start = ready_s + L`` (a zero-byte flow completes then).
2. From then on it moves its bytes at a rate x_i that is the max-min fair share of the
   links on its route among all flows in the network at that moment:
       for every link l:  sum of x_i over the flows crossing l  <=  C_l
       and no x_i can grow without shrinking some x_j <= x_i  (max-min fairness;
       Bertsekas & Gallager, "Data Networks", 2nd ed. 1992, section 6.5.2).
3. Rates are recomputed whenever a flow joins or completes (SimGrid's LMM re-solves its
   system at every such event), so between events every rate is constant and a flow's
   completion is ``t + remaining / x_i``.

A lone flow thus costs ``ready + L + n / B``, bit for bit DESIGN.md's
``depart + latency + n / B``; k flows on one link get C/k each; an incast of p flows
of n bytes ends at p n / B at the receiver's ingress.

**The solver** is progressive filling (Bertsekas & Gallager 6.5.2; SimGrid's
``lmm::System::solve`` in src/kernel/lmm/maxmin.cpp is the same algorithm): raise every
unfixed flow's rate together; the first links to fill (least ``remaining capacity /
unfixed flows``) are saturated, their flows are fixed at that level; repeat. With
weights w_i (SimGrid's "sharing penalty" is 1/w_i) the level of a link is
``remaining / sum of unfixed w_i`` and a flow fixed at level lambda gets ``w_i lambda``.

Determinism and exactness: links and flows are visited in index order; equal levels are
compared exactly, so links that fill together saturate in one round and no tie depends on
order; a link's remaining capacity is ``C_l - fsum(fixed rates)``, correctly rounded
(math.fsum); flows whose computed completion times are equal complete in one event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .fabric import Fabric

__all__ = ["Flow", "max_min_rates", "simulate_flows", "FlowTimes"]

# A flow whose remaining bytes fall below this fraction of its size when another event
# happens has finished within rounding of that event (a few ulps of its byte count).
_RESIDUE = 2.0 ** -40


@dataclass(frozen=True)
class Flow:
    """One message: ``nbytes`` from node ``src`` to node ``dst``, its first byte free to
    leave at ``ready_s`` (seconds)."""

    src: int
    dst: int
    nbytes: float
    ready_s: float = 0.0


def max_min_rates(routes: Sequence[Sequence[int]], capacities_Bps: Sequence[float],
                  weights: Sequence[float] | None = None) -> list[float]:
    """The max-min fair rates (B/s) of flows crossing ``routes`` (link ids) of links of
    ``capacities_Bps``, by progressive filling (module docstring). A flow with an empty
    route is not limited by any link: its rate is ``math.inf``. ``weights`` (default all
    1) give weighted max-min fairness: on a saturated link, rates are proportional to them.

    Round by round: level_l = (C_l - fsum(rates fixed on l)) / (sum of unfixed weights on
    l); lambda = min over links of level_l; every unfixed flow crossing a link whose level
    equals lambda is fixed at w_i lambda."""
    n = len(routes)
    w = [1.0] * n if weights is None else [float(x) for x in weights]
    if len(w) != n or any(not (x > 0 and math.isfinite(x)) for x in w):
        raise ValueError("weights must be one finite number > 0 per route")
    rates = [math.inf] * n
    users: dict[int, list[int]] = {}
    for i, route in enumerate(routes):
        for link in route:
            users.setdefault(link, []).append(i)
    fixed = [not route for route in routes]
    fixed_on: dict[int, list[float]] = {link: [] for link in users}
    unfixed_weight = {link: math.fsum(w[i] for i in flows) for link, flows in users.items()}
    live = sorted(users)                              # links with unfixed flows, in id order
    while live:
        levels = {}
        for link in live:
            remaining = math.fsum([capacities_Bps[link], *(-r for r in fixed_on[link])])
            levels[link] = max(remaining, 0.0) / unfixed_weight[link]
        level = min(levels.values())
        newly = sorted({i for link in live if levels[link] == level for i in users[link] if not fixed[i]})
        touched = set()
        for i in newly:
            fixed[i] = True
            rates[i] = w[i] * level if weights is not None else level
            for link in routes[i]:
                fixed_on[link].append(rates[i])
                touched.add(link)
        for link in touched:
            unfixed_weight[link] = math.fsum(w[i] for i in users[link] if not fixed[i])
        live = [link for link in live if not all(fixed[i] for i in users[link])]
    return rates


@dataclass(frozen=True)
class FlowTimes:
    """Per flow: when it joined the network (``start_s`` = ready + route latency) and when
    its last byte arrived (``finish_s``); ``events`` is how many times rates were solved."""

    start_s: tuple[float, ...]
    finish_s: tuple[float, ...]
    events: int


def simulate_flows(fabric: Fabric, flows: Sequence[Flow], weights: Sequence[float] | None = None) -> FlowTimes:
    """Run ``flows`` over ``fabric`` (module docstring): each pays its route's latency,
    then shares bandwidth max-min fairly with every flow in the network on any link of
    its route, rates re-solved at every start and completion. Returns each flow's start
    and completion times, in the order given. ``weights`` (one per flow) make the
    sharing weighted (max_min_rates)."""
    routes, starts, sizes = [], [], []
    for i, flow in enumerate(flows):
        if not isinstance(flow, Flow):
            raise ValueError(f"flows[{i}] must be a Flow(src, dst, nbytes, ready_s), got {flow!r}")
        routes.append(fabric.route(fabric.check_node(flow.src, f"flows[{i}].src"),
                                   fabric.check_node(flow.dst, f"flows[{i}].dst")))
        if not (flow.nbytes >= 0 and math.isfinite(flow.nbytes)):
            raise ValueError(f"flows[{i}].nbytes must be a finite number >= 0, got {flow.nbytes!r}")
        if not (flow.ready_s >= 0 and math.isfinite(flow.ready_s)):
            raise ValueError(f"flows[{i}].ready_s must be a finite number >= 0, got {flow.ready_s!r}")
        starts.append(flow.ready_s + fabric.latency_s(flow.src, flow.dst))
        sizes.append(float(flow.nbytes))
    if weights is not None and len(weights) != len(routes):
        raise ValueError(f"weights must give one number per flow ({len(routes)}), got {len(weights)}")
    capacities = [link.capacity_Bps for link in fabric.links]

    finish = [math.nan] * len(routes)
    pending = sorted(range(len(routes)), key=lambda i: (starts[i], i))
    remaining: dict[int, float] = {}                  # active flow -> bytes left
    rates: dict[int, float] = {}
    now, next_pending, events = 0.0, 0, 0
    while next_pending < len(pending) or remaining:
        # The next event: a start, or the earliest completion at the current rates.
        t_start = starts[pending[next_pending]] if next_pending < len(pending) else math.inf
        due = {i: now + remaining[i] / rates[i] for i in remaining}
        t_finish = min(due.values(), default=math.inf)
        t = min(t_start, t_finish)
        for i in list(remaining):
            if due[i] == t:
                finish[i] = t
                del remaining[i]
            else:
                left = remaining[i] - rates[i] * (t - now)
                if left <= sizes[i] * _RESIDUE:
                    finish[i] = t
                    del remaining[i]
                else:
                    remaining[i] = left
        now = t
        while next_pending < len(pending) and starts[pending[next_pending]] == t:
            i = pending[next_pending]
            next_pending += 1
            if sizes[i] == 0 or not routes[i]:
                finish[i] = t                         # nothing to move, or a node to itself
            else:
                remaining[i] = sizes[i]
        active = sorted(remaining)
        solved = max_min_rates([routes[i] for i in active], capacities,
                               None if weights is None else [weights[i] for i in active])
        rates = dict(zip(active, solved))
        events += 1
    return FlowTimes(tuple(starts), tuple(finish), events)
