"""P3 as its paper ran it (Jayarajan et al. 2019, SysML; docs/scheduling.md): ``p3_reproduction``
sweeps P3 against MXNet's KVStore, servers co-located with the workers, and ``p3_anatomy``
takes one iteration of each apart (where the first layer's update waits).

    from dlsys.experiments import p3_paper
    p3_paper.p3_reproduction("resnet50", ["1Gbps", "10Gbps"])
"""

from __future__ import annotations

from .. import schedule
from ..comm.launch import launch
from ..comm.node_threads import SIGNAL
from ..machine.net import get_node
from ..machine.topology import flat, placed
from .schedule import layers, make_job, parse_link, simulate_schedule

# P3's abstract (Jayarajan et al. 2019, SysML): "P3 can improve the training throughput of
# ResNet-50, Sockeye and VGG-19 by as much as 25%, 38% and 66% respectively on clusters with
# realistic network bandwidth" -- the largest gain over MXNet in its bandwidth sweeps, which
# ran 4 machines with a worker and a server each (its artifact, github.com/anandj91/p3,
# run_exp.sh and tools/launch.py) and rise, peak and fall with bandwidth. Sockeye has no
# profile here.
P3_PAPER_MAX_GAIN = {"resnet50": 0.25, "vgg19": 0.66}


def p3_reproduction(
    model: str, links, workers: int = 4, node: str = "v100", iterations: int = 3, sharing: bool = True
) -> list[dict]:
    """P3 as its paper ran it: ``p3`` against MXNet's KVStore (``mxnet``), servers
    co-located with the workers, MXNet's per-slice server cost; one row per link with both
    iteration times, P3's ``gain`` (MXNet's time over P3's, less 1; the throughput gain)
    and ``bound_s``, the time one machine's link needs for its bytes in one direction
    (the worker's pushes and the server's replies, 2 (W - 1) / W of the model when its own
    server's share stays on the machine): no schedule beats it, so where it dominates the
    compute, the gain of any schedule tends to 0."""
    rows = []
    params = sum(layer.params for layer in layers(model, 1))
    for link in links:
        times = {
            policy: simulate_schedule(
                policy,
                model,
                workers,
                link,
                node,
                "ps",
                workers,
                iterations=iterations,
                colocated=True,
                server_slice_s=schedule.MXNET_SERVER_SLICE_S,
                sharing=sharing,
            )
            for policy in ("mxnet", "p3")
        }
        bandwidth_Bps = parse_link(link).bandwidth_Bps
        bound_s = 2 * (workers - 1) / workers * 4 * params / bandwidth_Bps
        rows.append(
            {
                "model": model,
                "link": times["p3"]["link"],
                "bandwidth_Bps": bandwidth_Bps,
                "sharing": sharing,
                "mxnet_s": times["mxnet"]["iteration_s"],
                "p3_s": times["p3"]["iteration_s"],
                "compute_s": times["p3"]["compute_s"],
                "gain": times["mxnet"]["iteration_s"] / times["p3"]["iteration_s"] - 1,
                "bound_s": bound_s,
                "ceiling_gain": times["mxnet"]["iteration_s"] / max(times["p3"]["compute_s"], bound_s) - 1,
                "paper_max_gain": P3_PAPER_MAX_GAIN.get(model),
            }
        )
    return rows


def p3_anatomy(
    model: str, link, workers: int = 4, node: str = "v100", iterations: int = 3, sharing: bool = True
) -> list[dict]:
    """Where an iteration of MXNet and of P3 (as ``p3_reproduction`` runs them) goes, from
    a recorded run or shared replay: one row per policy with worker 0's ``iteration_s``
    (from the end of one backward to the end of the next), ``compute_s``, ``first_wait_s``
    (from that end to its next forward, which waits for the first layer's weights),
    ``posted_s`` (when the last worker posts its push of the first layer: a sender posts
    in the run's order, in the shared replay too), ``pushes_in_s`` (when the last of the first layer's pushes has reached its server),
    ``reply_s`` (when that server's first reply of it leaves), ``held_s`` (the two's
    difference: the server's queue before that item), ``kept_wait_s`` (the part of it the
    server waits for another push it must take first: in the shared replay, one the run
    saw arrive first, whose order the replay keeps, docs/scheduling.md) and
    ``egress_busy`` (the share of the iteration machine 0's egress carries bytes; with
    ``sharing`` only)."""
    link = parse_link(link)
    rows = []
    for policy in ("mxnet", "p3"):
        job = make_job(
            policy,
            model,
            workers,
            "ps",
            workers,
            32,
            iterations,
            colocated=True,
            server_slice_s=schedule.MXNET_SERVER_SLICE_S,
        )
        network = placed(flat(link), job.machine_of)
        result = launch(
            schedule.program,
            job.ranks,
            "threads",
            topology=network,
            node=node,
            args=(job,),
            timeout_s=900,
            sharing=sharing,
        )
        ends, first_forward = _backward_ends(job, result)
        since, until = ends[-2], ends[-1]
        # the iteration whose replies the forward after ``since`` waits for
        posted, pushes_in, reply, kept = _first_item(job, result, len(ends) - 2)
        busy = None
        if result.segments is not None:
            egress = network.fabric(job.ranks).route(job.rank_of("sender", 0), 1)[0]  # to server 1's machine
            busy = sum(
                rate * max(0.0, min(b, until) - max(a, since))
                for route, a, b, rate in result.segments
                if egress in route
            ) / (link.bandwidth_Bps * (until - since))
        rows.append(
            {
                "model": model,
                "link": link.name,
                "policy": policy,
                "sharing": sharing,
                "iteration_s": until - since,
                "compute_s": sum(3 * get_node(node).compute_s(layer.flops) for layer in job.layers),
                "first_wait_s": first_forward - since,
                "posted_s": posted - since,
                "pushes_in_s": pushes_in - since,
                "reply_s": reply - since,
                "held_s": reply - pushes_in,
                "kept_wait_s": kept,
                "egress_busy": busy,
            }
        )
    return rows


def _backward_ends(job: schedule.Job, result) -> tuple[list[float], float]:
    """Worker 0's backward ends, one an iteration, and the start of its first forward after
    the last but one."""
    compute = job.rank_of("compute", 0)
    spans = [s for s in result.trace.spans if s.rank == compute]
    ends = [
        s.end_s
        for s, after in zip(spans, spans[1:] + [None])
        if s.kind == "compute"
        and s.label.startswith("backward")
        and (after is None or not after.label.startswith("backward"))
    ]
    return ends, min(s.start_s for s in spans if s.kind == "compute" and s.start_s >= ends[-2])


def _first_item(job: schedule.Job, result, it: int) -> tuple[float, float, float, float]:
    """The first layer's first item in iteration ``it``: when its last push departs, when
    the last reaches its server, when the server's first reply leaves, and how long the
    server waits in between for a push it takes first."""
    first = min(
        item.index for item in job.items if item.layers == (min(i for i, l in enumerate(job.layers) if l.params),)
    )
    server, tag = job.server_of[first], f"[item {first}]"
    sent: dict[tuple[int, int], list] = {}  # (src, dst) -> that item's messages, one an iteration
    for m in sorted(result.trace.messages, key=lambda m: m.depart_s):
        if tag in m.label and m.phase != SIGNAL:
            sent.setdefault((m.src, m.dst), []).append(m)
    posted = max(m[it].depart_s for (src, dst), m in sent.items() if dst == server)
    pushes_in = max(m[it].arrive_s for (src, dst), m in sent.items() if dst == server)
    reply = min(m[it].depart_s for (src, dst), m in sent.items() if src == server)
    # the server's waits, while that item's pushes are in, for a push it takes first:
    # in the shared replay, one the run saw arrive first (its recv_any order, kept)
    kept = sum(
        min(span.end_s, reply) - max(span.start_s, pushes_in)
        for span in result.trace.spans
        if span.rank == server
        and span.kind == "wait"
        and span.label.startswith("push")
        and span.end_s > pushes_in
        and span.start_s < reply
    )
    return posted, pushes_in, reply, kept
