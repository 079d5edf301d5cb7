"""A scheduling run's record: ``summarize`` reads a recorded run (iteration time, throughput,
overlap), ``shared_record`` times the same job in replays with shared links (no trace), and
``lanes`` turns worker 0's trace into the bars the app and lesson 10 draw.
"""

from __future__ import annotations

import bisect
from dataclasses import replace

from .. import schedule
from ..comm.launch import launch
from ..comm.node_threads import SIGNAL
from ..machine.net import get_node


def shared_record(job: schedule.Job, network, node: str, batch: int, backend: str = "threads") -> dict:
    """``summarize``'s numbers from replays with shared links (dlsys.comm.replay). A rank's
    return values are the run's times, not the replay's, and the fast replay keeps no
    trace, so the steady iteration is the difference of worker 0's final clock (its last
    layer's update back) after ``job.iterations`` and after one iteration fewer; no overlap
    (it needs a trace). ``result`` is the longer run's LaunchResult."""
    ends, result = [], None
    for iterations in sorted({max(job.iterations - 1, 1), job.iterations}):
        result = launch(
            schedule.program,
            job.ranks,
            backend,
            topology=network,
            node=node,
            args=(replace(job, iterations=iterations),),
            timeout_s=900,
            sharing=True,
            record=False,
        )
        ends.append(result.clocks_s[job.rank_of("compute", 0)])
    iteration_s = ends[-1] - ends[0] if len(ends) > 1 else ends[-1]
    compute_s = sum(3 * get_node(node).compute_s(layer.flops) for layer in job.layers)
    return _record(job, result, batch, iteration_s, compute_s, None, None)


def summarize(job: schedule.Job, result, batch: int, **extra) -> dict:
    """A recorded run's record: worker 0's steady iteration (the last backward end less the
    one before), compute alone, overlap (``overlap``), messages, throughput."""
    compute_rank = job.rank_of("compute", 0)
    ends = result.values[compute_rank]["backward_ends_s"]
    iteration_s = ends[-1] - ends[-2] if len(ends) > 1 else ends[-1]
    node = result.nodes[compute_rank]
    compute_s = sum(3 * node.compute_s(layer.flops) for layer in job.layers)
    messages = sum(m.phase != SIGNAL for m in result.trace.messages)
    return _record(job, result, batch, iteration_s, compute_s, overlap(job, result), messages, **extra)


def _record(job: schedule.Job, result, batch: int, iteration_s: float, compute_s: float, overlap, messages, **extra):
    return {
        "policy": job.policy.name,
        "describe": job.policy.describe(),
        "scheme": job.scheme,
        "workers": job.workers,
        "iteration_s": iteration_s,
        "compute_s": compute_s,
        "overlap": overlap,
        "virtual_time_s": result.virtual_time_s,
        "throughput": job.workers * batch / iteration_s,
        "batch": batch,
        "messages": messages,
        "result": result,
        **extra,
    }


def overlap(job: schedule.Job, result) -> float:
    """The share of the time worker 0's egress is busy in its last iteration (each message
    from departure to departure + n / B, merged where they touch) during which its compute
    thread computes."""
    sender = job.rank_of("sender" if job.scheme == "ps" else "comm", 0)
    compute = job.rank_of("compute", 0)
    ends = result.values[compute]["backward_ends_s"]
    since = ends[-2] if len(ends) > 1 else 0.0
    busy: list[list[float]] = []
    wire_s = result.network.link_between
    for start, end in sorted(
        (m.depart_s, m.depart_s + wire_s(m.src, m.dst).wire_s(m.nbytes))
        for m in result.trace.messages
        if m.src == sender and m.phase != SIGNAL and m.depart_s >= since
    ):
        if busy and start <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], end)
        else:
            busy.append([start, end])
    computing = [(s.start_s, s.end_s) for s in result.trace.spans if s.rank == compute and s.kind == "compute"]
    total = sum(b - a for a, b in busy)
    if not total:
        return 0.0
    return _overlap_s(busy, computing) / total


def _overlap_s(busy: list, computing: list) -> float:
    """The sum over every busy (a, b) and computing (c, d) of max(0, min(b, d) - max(a, c)).
    One thread's computing spans are in time order and disjoint: then each busy interval
    meets a run of them, found by bisection, in the same order (the pairs skipped add 0.0:
    the same float); otherwise every pair."""
    starts, ends = [c for c, _ in computing], [d for _, d in computing]
    if any(ends[i] > starts[i + 1] for i in range(len(computing) - 1)):
        return sum(max(0.0, min(b, d) - max(a, c)) for a, b in busy for c, d in computing)
    return sum(
        max(0.0, min(b, d) - max(a, c))
        for a, b in busy
        for c, d in computing[bisect.bisect_left(ends, a) : bisect.bisect_right(starts, b)]
    )


def lanes(job: schedule.Job, result, worker: int = 0) -> list[dict]:
    """Worker ``worker``'s three lanes of the trace, as bars (start_s, end_s, layer, label):
    "compute" (its forward and backward per layer, and its waits for a layer's update),
    "push" (its items on the wire: depart .. depart + n / B, the egress's busy time;
    allreduce: its communication thread's messages) and "pull" (the servers' replies to it
    arriving: arrive - n / B .. arrive). ``layer`` is the bar's first layer in forward order, -1 if it has none (a
    collective's message carries no layer)."""
    index = {layer.name: i for i, layer in enumerate(job.layers)}
    items = job.items
    compute = job.rank_of("compute", worker)
    bars = []
    for s in result.trace.spans:
        if s.rank == compute and (s.kind == "compute" or s.label.startswith("wait for ")):
            bars.append(
                {
                    "lane": "compute",
                    "start_s": s.start_s,
                    "end_s": s.end_s,
                    "kind": s.label.split()[0],
                    "layer": index[s.label.rsplit(" ", 1)[1]],
                    "label": s.label,
                }
            )
    sender = job.rank_of("sender" if job.scheme == "ps" else "comm", worker)
    receiver = job.rank_of("receiver", worker) if job.scheme == "ps" else None
    for m in result.trace.messages:
        if m.phase == SIGNAL or (m.src != sender and m.dst != receiver):
            continue
        item = m.label.rpartition("[item ")[2].rstrip("]")  # "push conv3 slice 2 of 5 [item 17]"
        layer = min(items[int(item)].layers) if item.isdigit() else -1
        wire_s = result.network.link_between(m.src, m.dst).wire_s(m.nbytes)
        start_s, lane = (m.depart_s, "push") if m.src == sender else (m.arrive_s - wire_s, "pull")
        bars.append(
            {
                "lane": lane,
                "start_s": start_s,
                "end_s": start_s + wire_s,
                "kind": lane,
                "layer": layer,
                "label": m.label,
            }
        )
    return bars
