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
from itertools import chain
from typing import Sequence

from .fabric import Fabric
from .flow_events import Calendar, Dues

__all__ = ["Flow", "max_min_rates", "simulate_flows", "FlowTimes", "FlowNetwork"]

# A flow whose remaining bytes fall below this fraction of its size when another event
# happens has finished within rounding of that event (a few ulps of its byte count).
_RESIDUE = 2.0**-40
_SOLVED_KEPT = 1 << 14  # multisets of routes whose rates FlowNetwork remembers (then it forgets them all)


@dataclass(frozen=True)
class Flow:
    """One message: ``nbytes`` from node ``src`` to node ``dst``, its first byte free to
    leave at ``ready_s`` (seconds)."""

    src: int
    dst: int
    nbytes: float
    ready_s: float = 0.0


def max_min_rates(
    routes: Sequence[Sequence[int]], capacities_Bps: Sequence[float], weights: Sequence[float] | None = None
) -> list[float]:
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
    heap = sorted((lv, link) for link, lv in level.items())  # stale entries are skipped below
    while heap:
        lowest, link = heapq.heappop(heap)
        if unfixed[link] == 0 or level[link] != lowest:
            continue
        bottlenecks = [link]  # every link at exactly this level fills now
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


class FlowNetwork:
    """The flow model as an object one can feed, for a replay whose ranks send as they go
    (dlsys.comm.replay): ``inject`` a flow ready at ``ready_s`` (never before ``now_s``:
    the simulation's past is settled), ``advance()`` to the next event and learn which
    flows finished then. ``simulate_flows`` is this loop with every flow known up front.

    Only what an event can change is re-solved: the flows connected to the started or
    completed ones through shared links (the max-min allocation of one connected
    component does not depend on the others; SimGrid's selective update). A flow keeps
    its bytes-left, the time they were counted and its rate; its completion,
    ``counted_at + left / rate``, is recomputed only when its rate changes (SimGrid's lazy
    update), so a flow whose rate never changes completes at exactly start + n / rate.
    A finished flow's state is dropped (a 1024-rank ring makes 2 M flows).

    ``record_rates``: keep every (route, from_s, to_s, rate_Bps) a flow moved at, in
    ``segments`` (per-link load over time, dlsys.comm.replay.link_load).

    ``connections``: the flows from one src to one dst are one connection (one TCP stream:
    ps-lite opens one ZMQ socket per peer node, ps-lite/src/zmq_van.h ``Connect``), first
    in first out: a flow injected while an earlier one of its connection has not finished
    starts when that one finishes (its bytes follow the earlier ones' on the stream, so it
    pays no second latency: clock.py's egress order), or at its own ready + latency if
    later. A flow alone on its connection is unchanged."""

    def __init__(self, fabric: Fabric, weighted: bool = False, record_rates: bool = False, connections: bool = False):
        self.fabric, self.weighted = fabric, weighted
        self.capacities = [link.capacity_Bps for link in fabric.links]
        self.now_s, self.events, self.flows = 0.0, 0, 0
        self.routes: dict[int, tuple[int, ...]] = {}  # the flows not yet finished
        self.state: dict[int, list] = {}  # active: [size, left, counted_at, rate, version, weight, its due's batch]
        self.starts = Calendar()  # start -> (flow, nbytes, weight, narrowest capacity)
        self.on_link: dict[int, set[int]] = {}
        self.due = Dues(self.state)  # completion -> (flow, version)
        self.paths: dict[tuple[int, int], tuple[tuple[int, ...], float, float]] = {}  # route, latency, narrowest
        self.segments: list[tuple[tuple[int, ...], float, float, float]] | None = [] if record_rates else None
        self.last: dict[tuple[int, int], int] | None = {} if connections else None  # a connection's latest flow
        self.behind: dict[int, tuple[float, tuple]] = {}  # a flow -> (start, item) of the next on its connection
        self.solved: dict[tuple, dict] = {}  # a multiset of routes -> each route's rate (_unweighted)

    def route(self, flow: int) -> tuple[int, ...]:
        return self.routes[flow]

    def inject(self, src: int, dst: int, nbytes: float, ready_s: float, weight: float = 1.0) -> int:
        """Add a flow of ``nbytes`` from src to dst whose first byte may leave at ready_s;
        it starts at ready_s + its route's latency, which must be >= now_s (the past is
        settled; a flow in its latency shares nothing yet). A flow with no link (a node to
        itself) may be late: it starts now. Returns its id."""
        path = self.paths.get((src, dst))
        if path is None:
            route = self.fabric.route(src, dst)
            path = self.paths[(src, dst)] = (
                route,
                self.fabric.latency_s(src, dst),
                min((self.capacities[link] for link in route), default=math.inf),
            )
        start = ready_s + path[1]
        if not start >= self.now_s:
            if path[0] or not ready_s > -math.inf:
                raise ValueError(
                    f"ready_s + the route's latency must be >= the network's time {self.now_s!r} "
                    f"(its past is settled), got {ready_s!r} + {path[1]!r}"
                )
            start = self.now_s
        flow, self.flows = self.flows, self.flows + 1
        self.routes[flow] = path[0]
        item = (flow, float(nbytes), weight, path[2])
        if self.last is not None:
            ahead = self.last.get((src, dst))
            self.last[(src, dst)] = flow
            if ahead is not None and ahead in self.routes:  # not finished: queue behind it
                self.behind[ahead] = (start, item)
                return flow
        batch = self.starts.at.get(start)
        if batch is None:  # self.starts.add, inline: a million of them
            self.starts.add(start, item)
        else:
            batch.append(item)
        return flow

    def next_event_s(self) -> float:
        """When the next flow starts or finishes (math.inf: nothing left)."""
        return min(self.starts.first_s(), self.due.first_s())

    def _leave(self, flow: int, t: float, done: list[int]) -> None:
        size, left, counted_at, rate, _, _, batch = self.state.pop(flow)
        if batch is not None:
            batch[2] -= 1
        if self.segments is not None and rate and t > counted_at:
            self.segments.append((self.routes[flow], counted_at, t, rate))
        for link in self.routes[flow]:
            self.on_link[link].discard(flow)
        done.append(flow)

    def advance(self) -> tuple[float, list[int]]:
        """Move to the next event t; return t and the flows that finished at t, in id order
        ((math.inf, []) once nothing is left)."""
        t = self.next_event_s()
        if t == math.inf:
            return t, []
        self.now_s = t
        state, routes, on_link, done = self.state, self.routes, self.on_link, []
        touched: set[int] = set()  # links whose set of flows changed
        if self.due.first_s() == t:
            segments = self.segments
            for i, version in sorted(self.due.pop_at(t)):  # in flow id order
                s = state.get(i)
                if s is not None and s[4] == version:  # not rescheduled since
                    del state[i]  # _leave, inline: a million of them
                    s[6][2] -= 1  # its batch: one live entry fewer
                    if segments is not None and s[3] and t > s[2]:
                        segments.append((routes[i], s[2], t, s[3]))
                    for link in routes[i]:
                        users = on_link[link]
                        users.discard(i)
                        if users:  # its other flows may speed up
                            touched.add(link)
                    done.append(i)
        finished, started, alone = len(done), [], None
        if self.starts.first_s() == t:
            for i, nbytes, weight, narrowest in self.starts.pop_first():  # in flow id order
                if nbytes == 0 or not routes[i]:
                    done.append(i)  # nothing to move, or a node to itself
                    continue
                state[i] = [nbytes, nbytes, t, 0.0, 0, weight, None]
                for link in routes[i]:
                    users = on_link.get(link)
                    if users is None:
                        on_link[link] = {i}
                    else:
                        users.add(i)
                started.append((i, narrowest))
        for i, narrowest in started:
            for link in routes[i]:
                if len(on_link[link]) > 1:
                    touched.update(routes[i])
                    break
            else:  # alone on its links: its narrowest link,
                s = state[i]  # what _solve would give it
                s[3], s[4] = narrowest, 1
                if alone is None:
                    alone = self.due.batch()
                alone[0].append((t + s[1] / narrowest, i, 1))
                s[6] = alone
        if alone is not None:
            self.due.add(alone)
        if touched:
            self._solve(t, touched, done)
        if finished or started:
            self.events += 1
        for i in done:
            del routes[i]
            if self.behind:
                queued = self.behind.pop(i, None)
                if queued is not None:  # the next on its connection: now (an event at t) or later
                    self.starts.add(max(queued[0], t), queued[1])
        return t, sorted(done)

    def _solve(self, t: float, touched: set[int], done: list[int]) -> None:
        """Re-solve each connected component of the touched links, over the flows now in
        the network (a flow alone in its component gets its route's narrowest link: what
        progressive filling gives it, without the solver)."""
        state, routes, on_link, capacities = self.state, self.routes, self.on_link, self.capacities
        segments = self.segments
        seen: set[int] = set()
        for first in sorted(touched):
            if first in seen or not on_link.get(first):
                continue  # solved with another link, or empty now
            component: set[int] = set()
            frontier = {first}
            seen.add(first)
            while frontier:  # breadth first, a level at a time, in set operations:
                new = set().union(*map(on_link.__getitem__, frontier))  # an incast's hundred flows at C speed
                new -= component
                component |= new
                frontier = set(chain.from_iterable(map(routes.__getitem__, new)))
                frontier -= seen
                seen |= frontier
            members = sorted(component)
            rows = [state[i] for i in members]  # bytes left now; a rounding residue means done
            residue = [s[3] and s[1] - s[3] * (t - s[2]) <= s[0] * _RESIDUE for s in rows]
            if any(residue):
                for i, gone in zip(members, residue):
                    if gone:
                        self._leave(i, t, done)
                members = [i for i, gone in zip(members, residue) if not gone]
                rows = [state[i] for i in members]
            if not members:
                continue
            if len(members) == 1:
                solved = [min(capacities[link] for link in routes[members[0]])]
            elif self.weighted:
                solved = max_min_rates([routes[i] for i in members], capacities, [state[i][5] for i in members])
            else:
                solved = self._unweighted([routes[i] for i in members])
            batch = self.due.batch()
            rescheduled = batch[0]
            for i, s, new in zip(members, rows, solved):
                if new != s[3]:
                    if segments is not None and s[3] and t > s[2]:
                        segments.append((routes[i], s[2], t, s[3]))
                    s[1] -= s[3] * (t - s[2])
                    s[2], s[3] = t, new
                    s[4] += 1
                    if s[6] is not None:  # its old completion is stale now
                        s[6][2] -= 1
                    s[6] = batch
                    rescheduled.append((t + s[1] / new, i, s[4]))
            if rescheduled:
                self.due.add(batch)

    def _unweighted(self, member_routes: list[tuple[int, ...]]) -> list[float]:
        """``max_min_rates(member_routes, capacities)``, remembered per multiset of routes.
        Unweighted, a flow's max-min rate depends only on its route and the multiset of
        routes beside it (equal routes fill together, a link's level is an fsum and a count:
        no order enters), and a few machines' connections come back to the same few
        multisets again and again (P3's slices: one slice ends, the next on its connection
        starts), so most events find their rates here, the same floats the solver gives."""
        key = tuple(sorted(member_routes))
        rate_of = self.solved.get(key)
        if rate_of is None:
            if len(self.solved) >= _SOLVED_KEPT:
                self.solved.clear()
            rate_of = self.solved[key] = dict(zip(member_routes, max_min_rates(member_routes, self.capacities)))
        return [rate_of[route] for route in member_routes]


def simulate_flows(fabric: Fabric, flows: Sequence[Flow], weights: Sequence[float] | None = None) -> FlowTimes:
    """Run ``flows`` over ``fabric`` (module docstring): each pays its route's latency,
    then shares bandwidth max-min fairly with every flow in the network on any link of
    its route, rates re-solved at every start and completion (FlowNetwork). Returns each
    flow's start and completion times, in the order given. ``weights`` (one per flow)
    make the sharing weighted (max_min_rates)."""
    for i, flow in enumerate(flows):
        if not isinstance(flow, Flow):
            raise ValueError(f"flows[{i}] must be a Flow(src, dst, nbytes, ready_s), got {flow!r}")
        fabric.check_node(flow.src, f"flows[{i}].src")
        fabric.check_node(flow.dst, f"flows[{i}].dst")
        if not (flow.nbytes >= 0 and math.isfinite(flow.nbytes)):
            raise ValueError(f"flows[{i}].nbytes must be a finite number >= 0, got {flow.nbytes!r}")
        if not (flow.ready_s >= 0 and math.isfinite(flow.ready_s)):
            raise ValueError(f"flows[{i}].ready_s must be a finite number >= 0, got {flow.ready_s!r}")
    if weights is not None and len(weights) != len(flows):
        raise ValueError(f"weights must give one number per flow ({len(flows)}), got {len(weights)}")
    network = FlowNetwork(fabric, weighted=weights is not None)
    for i, flow in enumerate(flows):
        network.inject(flow.src, flow.dst, flow.nbytes, flow.ready_s, 1.0 if weights is None else weights[i])
    starts = tuple(flow.ready_s + network.paths[(flow.src, flow.dst)][1] for flow in flows)
    finish = [math.nan] * len(flows)
    while True:
        t, done = network.advance()
        if t == math.inf:
            return FlowTimes(starts, tuple(finish), network.events)
        for i in done:
            finish[i] = t
