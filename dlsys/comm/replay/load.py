"""Bytes per link over time, from a run's trace or a replay's segments (the figures of
docs/flows.md and the TaihuLight case study)."""

from __future__ import annotations

from collections import defaultdict


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
