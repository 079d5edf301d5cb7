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

import heapq
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
    unfixed = {link: len(flows) for link, flows in users.items()}

    def level_of(link: int) -> float:
        remaining = math.fsum([capacities_Bps[link], *(-r for r in fixed_on[link])])
        weight = unfixed[link] if weights is None else math.fsum(w[i] for i in users[link] if not fixed[i])
        return max(remaining, 0.0) / weight

    level = {link: level_of(link) for link in users}
    heap = sorted((lv, link) for link, lv in level.items())   # stale entries are skipped below
    while heap:
        lowest, link = heapq.heappop(heap)
        if unfixed[link] == 0 or level[link] != lowest:
            continue
        bottlenecks = [link]                          # every link at exactly this level fills now
        while heap and heap[0][0] == lowest:
            _, other = heapq.heappop(heap)
            if unfixed[other] and level[other] == lowest:
                bottlenecks.append(other)
        newly = sorted({i for b in bottlenecks for i in users[b] if not fixed[i]})
        touched = set()
        for i in newly:
            fixed[i] = True
            rates[i] = lowest if weights is None else w[i] * lowest
            for other in routes[i]:
                fixed_on[other].append(rates[i])
                unfixed[other] -= 1
                touched.add(other)
        for other in sorted(touched):
            if unfixed[other]:
                level[other] = level_of(other)
                heapq.heappush(heap, (level[other], other))
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
    sharing weighted (max_min_rates).

    Only what an event can change is re-solved: the flows connected to the started or
    completed ones through shared links (the max-min allocation of one connected
    component does not depend on the others; SimGrid's selective update). A flow keeps
    its bytes-left, the time they were counted and its rate; its completion,
    ``counted_at + left / rate``, is recomputed only when its rate changes (SimGrid's lazy
    update), so a flow whose rate never changes completes at exactly start + n / rate."""
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

    n = len(routes)
    finish = [math.nan] * n
    left = [0.0] * n                # bytes left at counted_at[i]
    counted_at = [0.0] * n
    rate = [0.0] * n
    version = [0] * n               # a completion in the heap is stale once the flow's rate changed
    active: set[int] = set()
    on_link: dict[int, set[int]] = {}
    heap: list[tuple[float, int, int]] = []
    pending = sorted(range(n), key=lambda i: (starts[i], i))
    next_pending, events = 0, 0

    def leave(i: int, t: float) -> None:
        finish[i] = t
        active.discard(i)
        for link in routes[i]:
            on_link[link].discard(i)

    while next_pending < n or heap:
        while heap and (heap[0][2] != version[heap[0][1]] or heap[0][1] not in active):
            heapq.heappop(heap)                       # stale
        t_start = starts[pending[next_pending]] if next_pending < n else math.inf
        t_due = heap[0][0] if heap else math.inf
        if t_start == math.inf and t_due == math.inf:
            break
        t = min(t_start, t_due)
        touched: set[int] = set()                     # links whose set of flows changed
        while heap and heap[0][0] == t:
            _, i, v = heapq.heappop(heap)
            if v == version[i] and i in active:
                leave(i, t)
                touched.update(routes[i])
        while next_pending < n and starts[pending[next_pending]] == t:
            i = pending[next_pending]
            next_pending += 1
            if sizes[i] == 0 or not routes[i]:
                finish[i] = t                         # nothing to move, or a node to itself
                continue
            active.add(i)
            left[i], counted_at[i], rate[i] = sizes[i], t, 0.0
            for link in routes[i]:
                on_link.setdefault(link, set()).add(i)
            touched.update(routes[i])
        if not touched:
            continue
        # The connected component of the touched links, over the flows now in the network.
        component, frontier, seen = set(), list(touched), set(touched)
        while frontier:
            for i in on_link.get(frontier.pop(), ()):
                if i not in component:
                    component.add(i)
                    for link in routes[i]:
                        if link not in seen:
                            seen.add(link)
                            frontier.append(link)
        for i in sorted(component):                   # bytes left now; a rounding residue means done
            if rate[i] and left[i] - rate[i] * (t - counted_at[i]) <= sizes[i] * _RESIDUE:
                leave(i, t)
        members = sorted(i for i in component if i in active)
        solved = max_min_rates([routes[i] for i in members], capacities,
                               None if weights is None else [weights[i] for i in members])
        events += 1
        for i, new in zip(members, solved):
            if new != rate[i]:
                left[i] -= rate[i] * (t - counted_at[i])
                counted_at[i], rate[i] = t, new
                version[i] += 1
                heapq.heappush(heap, (t + left[i] / new, i, version[i]))
    return FlowTimes(tuple(starts), tuple(finish), events)
