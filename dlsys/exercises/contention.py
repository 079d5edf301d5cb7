"""Exercise ``contention_step`` (lesson 13): one communication step on links that messages share.

A step: every flow (one message: a route of link ids and a size in bytes) is ready at time
0. Each pays the route's latency ``latency_s`` and then moves at its max-min fair share of
its links (Bertsekas & Gallager, *Data Networks*, section 6.5.2): no link carries more
than its capacity, and no flow's rate can grow without shrinking a rate that is no larger.
When a flow finishes, the others share what it leaves. The graded tests hold your answer
to the emulator's replay (``launch(..., sharing=True)``, dlsys/comm/replay/), flow for
flow, on a flat switch, a two-level tree and a fat tree.
"""

from __future__ import annotations

import math
from typing import Sequence

DONE = 1e-12  # a flow with less than this fraction of its bytes left has finished (rounding)


def check_step(
    routes: Sequence[Sequence[int]],
    capacities_Bps: Sequence[float],
    nbytes: Sequence[float] | None = None,
    latency_s: float = 0.0,
) -> None:
    """ValueError naming the argument, for a step that cannot be simulated."""
    if not all(isinstance(c, (int, float)) and math.isfinite(c) and c > 0 for c in capacities_Bps):
        raise ValueError(f"capacities_Bps must be finite numbers > 0, got {list(capacities_Bps)!r}")
    for route in routes:
        if not route or any(not (isinstance(l, int) and 0 <= l < len(capacities_Bps)) for l in route):
            raise ValueError(
                f"routes must be non-empty lists of link ids in 0..{len(capacities_Bps) - 1}, got {route!r}"
            )
    if nbytes is not None:
        if len(nbytes) != len(routes):
            raise ValueError(f"nbytes must give one size per route ({len(routes)}), got {len(nbytes)}")
        if not all(isinstance(n, (int, float)) and math.isfinite(n) and n >= 0 for n in nbytes):
            raise ValueError(f"nbytes must be finite numbers >= 0, got {list(nbytes)!r}")
    if not (isinstance(latency_s, (int, float)) and math.isfinite(latency_s) and latency_s >= 0):
        raise ValueError(f"latency_s must be a finite number >= 0, got {latency_s!r}")


def max_min_rates(routes: Sequence[Sequence[int]], capacities_Bps: Sequence[float]) -> list[float]:
    """Each flow's max-min fair rate in bytes per second, by progressive filling: raise every
    unfixed rate together until a link is full (the least level (capacity left) / (unfixed
    flows on it)); fix that link's unfixed flows at that level; repeat with what is left."""
    check_step(routes, capacities_Bps)
    # BEGIN SOLUTION contention_step
    rates = [0.0] * len(routes)
    left = [float(c) for c in capacities_Bps]  # capacity not yet given to a fixed flow
    unfixed = set(range(len(routes)))
    while unfixed:
        count = [0] * len(left)
        for i in unfixed:
            for link in routes[i]:
                count[link] += 1
        level, full = min((left[link] / count[link], link) for link in range(len(left)) if count[link])
        for i in [i for i in unfixed if full in routes[i]]:
            rates[i] = level
            unfixed.discard(i)
            for link in routes[i]:
                left[link] -= level
    return rates
    # END SOLUTION


def flow_finish_s(
    routes: Sequence[Sequence[int]], nbytes: Sequence[float], capacities_Bps: Sequence[float], latency_s: float
) -> list[float]:
    """When each flow of the step has arrived: ``latency_s``, then its bytes at max-min
    rates, re-solved among the flows still moving whenever one finishes."""
    check_step(routes, capacities_Bps, nbytes, latency_s)
    # BEGIN SOLUTION contention_step
    left = [float(n) for n in nbytes]
    finish = [latency_s] * len(routes)
    moving = [i for i in range(len(routes)) if left[i] > 0]
    t = latency_s  # every flow pays its route's latency first, then shares the links
    while moving:
        rates = max_min_rates([routes[i] for i in moving], capacities_Bps)
        dt = min(left[i] / rate for i, rate in zip(moving, rates))
        t += dt
        for i, rate in zip(moving, rates):
            left[i] -= rate * dt
            if left[i] <= DONE * nbytes[i]:
                finish[i] = t
        moving = [i for i in moving if left[i] > DONE * nbytes[i]]
    return finish
    # END SOLUTION


def step_time_s(
    routes: Sequence[Sequence[int]], nbytes: Sequence[float], capacities_Bps: Sequence[float], latency_s: float
) -> float:
    """The step ends when its last flow arrives (0 for a step without flows)."""
    return max(flow_finish_s(routes, nbytes, capacities_Bps, latency_s), default=0.0)
