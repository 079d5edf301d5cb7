"""Overlap and scheduling experiments: one policy on one model, its iteration time, throughput
and overlap; bandwidth sweeps; real training on digits under every policy.

    from dlsys.experiments import schedule as ex
    ex.simulate_schedule("p3", "resnet50", workers=4, link="10Gbps")   # an emulated big model
    ex.bandwidth_sweep("vgg19", ["1Gbps", "10Gbps", "100Gbps"])       # every policy per bandwidth
    ex.train_schedule("p3", TrainConfig(epochs=2))                    # real digits, same numbers

A model is a layer profile (``dlsys.machine.profiles``: payloads are logical, compute from FLOPs)
or "digits" (the digits MLP: real gradients; with ``config`` it really trains).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import replace

from .. import schedule
from ..checks import check_int
from ..comm import SIGNAL, launch
from ..machine import profiles
from ..machine.net import LinkModel, get_link, get_node
from ..machine.topology import flat, placed
from ..schedule.policy import slice_count
from ..train import TrainConfig, build_model
from ..units import format_bytes
from .budget import DEFAULT_MAX_MEMORY_BYTES

MODELS = ("digits", *profiles.PROFILES)
# What a run holds per message it carries (its trace record, spans, the clocks' bookkeeping),
# measured: ru_maxrss of p3 on alexnet, 2 workers, 3 iterations, threads, went from 61 MB to
# 195 MB as slices of 40,000 -> 5,000 parameters took it from 18,372 to 146,688 messages.
MESSAGE_BYTES = 1040


def parse_link(text) -> LinkModel:
    """The link ``text`` names: the one link grammar, ``dlsys.machine.net.get_link`` (a
    preset in any case, or a bandwidth like 10Gbps: tcp-10gbe's latency at that bandwidth)."""
    return get_link(text)


def layers(model: str, batch: int) -> tuple:
    """The model's layers for one worker's batch (forward order)."""
    if model == "digits":
        return schedule.layers_of(build_model(TrainConfig()), batch)
    if model not in MODELS:
        raise ValueError(f"model: unknown model {model!r}; valid: {', '.join(MODELS)}")
    out, offset = [], 0
    for layer in profiles.profile(model):
        out.append(schedule.Layer(layer.name, layer.params, offset, layer.fwd_flops * batch))
        offset += layer.params
    return tuple(out)


def simulate_schedule(
    policy: str = "wfbp",
    model: str = "resnet50",
    workers: int = 4,
    link="tcp-10gbe",
    node: str = "v100",
    scheme: str = "ps",
    servers: int = 1,
    batch: int = 32,
    iterations: int = 3,
    backend: str = "threads",
    options: dict | None = None,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    colocated: bool = False,
    server_slice_s: float = 0.0,
    sharing: bool | None = None,
) -> dict:
    """One policy on an emulated model: a tidy record with iteration_s (steady state: the
    last iteration), throughput (samples/s over all workers), compute_s, overlap (the share
    of worker 0's push time on the wire that its compute hides) and the LaunchResult.
    The ranks sit on their machines (``schedule.Job.machine_of``: a worker's threads on one);
    ``colocated``: server m on worker m's machine; ``sharing`` (default: ``colocated``): the
    times come from a replay in which the machine's streams share its links
    (``launch(sharing=True)``, no trace: ``shared_record``); off, each rank has its own
    links (the run's rule: an optimistic bound for co-located streams);
    ``server_slice_s``: a server's time per item besides the update
    (``schedule.MXNET_SERVER_SLICE_S``)."""
    job = make_job(
        policy,
        model,
        workers,
        scheme,
        servers,
        batch,
        iterations,
        options,
        colocated=colocated,
        server_slice_s=server_slice_s,
        max_memory_bytes=max_memory_bytes,
    )
    link = parse_link(link)
    network = placed(flat(link), job.machine_of)
    sharing = colocated if sharing is None else sharing
    extra = {"link": link.name, "node": get_node(node).name, "colocated": colocated, "sharing": sharing}
    if sharing:
        return shared_record(job, network, node, batch, backend) | extra
    result = launch(schedule.program, job.ranks, backend, topology=network, node=node, args=(job,), timeout_s=900)
    return summarize(job, result, batch, **extra)


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
    return {
        "policy": job.policy.name,
        "describe": job.policy.describe(),
        "scheme": job.scheme,
        "workers": job.workers,
        "iteration_s": iteration_s,
        "compute_s": compute_s,
        "overlap": None,
        "virtual_time_s": result.virtual_time_s,
        "throughput": job.workers * batch / iteration_s,
        "batch": batch,
        "messages": None,
        "result": result,
    }


def make_job(
    policy: str,
    model: str,
    workers: int,
    scheme: str = "ps",
    servers: int = 1,
    batch: int = 32,
    iterations: int = 3,
    options: dict | None = None,
    config: TrainConfig | None = None,
    colocated: bool = False,
    server_slice_s: float = 0.0,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
) -> schedule.Job:
    """A checked Job (bad inputs fail here, before any rank starts, a run over the memory
    budget included: ``check_memory``)."""
    check_int("workers", workers, 1, 256)
    check_int("servers", servers, 1, 64)
    check_int("batch", batch, 1, 2**16)
    check_int("iterations", iterations, 1, 10_000)
    if scheme not in schedule.SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(schedule.SCHEMES)}, got {scheme!r}")
    if scheme == "allreduce" and workers < 2:
        raise ValueError("workers: the allreduce scheme needs at least 2 workers")
    if scheme == "allreduce" and policy == "odsgd":
        raise ValueError("policy: OD-SGD is a parameter-server method (its global update comes from the servers)")
    if colocated and (scheme != "ps" or servers != workers):
        raise ValueError(
            f"colocated: servers on the workers' machines need the ps scheme and as many servers as "
            f"workers, got scheme {scheme!r}, {servers} servers, {workers} workers"
        )
    if not 0 <= server_slice_s < math.inf:
        raise ValueError(f"server_slice_s: expected seconds >= 0, got {server_slice_s!r}")
    job_layers, made = layers(model, batch), schedule.make(policy, **(options or {}))
    check_memory(made, job_layers, scheme, workers, iterations, max_memory_bytes)
    return schedule.Job(
        job_layers,
        made,
        scheme,
        workers,
        servers if scheme == "ps" else 0,
        iterations,
        config,
        colocated,
        server_slice_s,
    )


def check_memory(
    policy: schedule.Policy, job_layers, scheme: str, workers: int, iterations: int, max_memory_bytes: int
) -> None:
    """A ValueError if the run would hold more than ``max_memory_bytes``: items x messages per
    item (ps: a push and a pull per worker; allreduce: a ring's 2(p-1) per worker) x iterations
    x ``MESSAGE_BYTES``. It names what fits: the smallest item size (``policy.cut``), the most
    iterations."""
    per_item = 2 * workers if scheme == "ps" else 2 * (workers - 1) * workers
    items = policy.item_count(list(job_layers))
    if items * per_item * iterations * MESSAGE_BYTES <= max_memory_bytes:
        return
    most_messages = max_memory_bytes // MESSAGE_BYTES
    fits = []
    if policy.cut:
        low, high = getattr(policy, policy.cut), max(layer.params for layer in job_layers)
        if slice_count(job_layers, high) * per_item * iterations <= most_messages:
            while low < high:  # the item count falls as the item size grows: bisect for the smallest that fits
                mid = (low + high) // 2
                low, high = (
                    (low, mid)
                    if slice_count(job_layers, mid) * per_item * iterations <= most_messages
                    else (mid + 1, high)
                )
            fits.append(f"{policy.cut} >= {low:,}")
    if most_messages // (items * per_item) >= 1:
        fits.append(f"iterations <= {most_messages // (items * per_item):,}")
    raise ValueError(
        f"{policy.describe()}: {items:,} items x {per_item:,} messages x {iterations:,} iterations "
        f"= {items * per_item * iterations:,} messages, about "
        f"{format_bytes(items * per_item * iterations * MESSAGE_BYTES)} at {MESSAGE_BYTES:,} bytes "
        f"each, over the {format_bytes(max_memory_bytes)} memory budget; "
        f"{' or '.join(fits) or 'fewer workers'} fits"
    )


def summarize(job: schedule.Job, result, batch: int, **extra) -> dict:
    compute_rank = job.rank_of("compute", 0)
    ends = result.values[compute_rank]["backward_ends_s"]
    iteration_s = ends[-1] - ends[-2] if len(ends) > 1 else ends[-1]
    node = result.nodes[compute_rank]
    compute_s = sum(3 * node.compute_s(layer.flops) for layer in job.layers)
    return {
        "policy": job.policy.name,
        "describe": job.policy.describe(),
        "scheme": job.scheme,
        "workers": job.workers,
        "iteration_s": iteration_s,
        "compute_s": compute_s,
        "overlap": overlap(job, result),
        "virtual_time_s": result.virtual_time_s,
        "throughput": job.workers * batch / iteration_s,
        "batch": batch,
        "messages": sum(m.phase != SIGNAL for m in result.trace.messages),
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


def bandwidth_sweep(
    model: str,
    links,
    policies=None,
    workers: int = 4,
    node: str = "v100",
    scheme: str = "ps",
    servers: int | None = None,
    options: dict | None = None,
    colocated: bool = False,
    server_slice_s: float = 0.0,
) -> list[dict]:
    """Iteration time of every policy at every link (preset or bandwidth); ``servers``
    defaults to one per worker; ``options`` maps a policy to its options."""
    rows = []
    policies = policies or [p for p in schedule.POLICIES if scheme == "ps" or p != "odsgd"]
    for link in links:
        for policy in policies:
            record = simulate_schedule(
                policy,
                model,
                workers,
                link,
                node,
                scheme,
                servers or workers,
                options=(options or {}).get(policy),
                colocated=colocated,
                server_slice_s=server_slice_s,
            )
            rows.append(
                {k: v for k, v in record.items() if k != "result"} | {"bandwidth_Bps": parse_link(link).bandwidth_Bps}
            )
    return rows


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
        compute = job.rank_of("compute", 0)
        spans = [s for s in result.trace.spans if s.rank == compute]
        ends = [
            s.end_s
            for s, after in zip(spans, spans[1:] + [None])
            if s.kind == "compute"
            and s.label.startswith("backward")
            and (after is None or not after.label.startswith("backward"))
        ]
        since, until = ends[-2], ends[-1]
        first_forward = min(s.start_s for s in spans if s.kind == "compute" and s.start_s >= since)
        first = min(
            item.index for item in job.items if item.layers == (min(i for i, l in enumerate(job.layers) if l.params),)
        )
        server, tag = job.server_of[first], f"[item {first}]"
        sent: dict[tuple[int, int], list] = {}  # (src, dst) -> that item's messages, one an iteration
        for m in sorted(result.trace.messages, key=lambda m: m.depart_s):
            if tag in m.label and m.phase != SIGNAL:
                sent.setdefault((m.src, m.dst), []).append(m)
        it = len(ends) - 2  # the iteration whose replies the forward after ``since`` waits for
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


def train_schedule(
    policy: str,
    config: TrainConfig = TrainConfig(epochs=1),
    workers: int = 2,
    scheme: str = "ps",
    link="tcp-10gbe",
    node: str = "laptop-cpu",
    backend: str = "threads",
    options: dict | None = None,
) -> dict:
    """Real digits training under a policy: the numbers are the unscheduled run's (the
    parameter server's BSP rounds), only the time changes."""
    job = make_job(
        policy, "digits", workers, scheme, 1, config.batch_size, schedule.steps_of(config, workers), options, config
    )
    link = parse_link(link)
    result = launch(
        schedule.program, job.ranks, backend, link=link, node=node, seed=config.seed, args=(job,), timeout_s=900
    )
    record = summarize(job, result, config.batch_size, link=link.name)
    worker0 = result.values[job.rank_of("compute", 0)]
    record.update(
        params=worker0["params"],
        test_accuracy=worker0["test_accuracy"],
        losses=[loss for v in result.values for loss in v.get("losses", [])],
    )
    return record


# --- what the app page and lesson 10 draw -------------------------------------------------

# The app's page (app/views/schedule.py) and its precomputed default views (precomputed.py):
# the policies shown at first, the bandwidths of its sweep and each trade-off's values
# (the option's own unit)
SHOWN_POLICIES = ("fifo", "wfbp", "p3", "bytescheduler", "fusion")
BANDWIDTHS = ("1Gbps", "3Gbps", "10Gbps", "25Gbps", "100Gbps")
WORKER_COUNTS = range(1, 9)  # the app's workers slider
SWEEPS = {
    "slice_params": (20_000, 40_000, 100_000, 250_000, 1_000_000, 4_000_000, 25_000_000),
    "credit_bytes": (4e6, 8e6, 16e6, 32e6, 64e6, 256e6),
    "bucket_mb": (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0),
}
# the option each trade-off sweeps -> the policy it belongs to (the policies' swept Options)
KNOBS = {name: policy for name, (policy, option) in schedule.OPTIONS.items() if option.swept}


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


def compare_policies(
    policies,
    model: str = "resnet50",
    workers: int = 2,
    link="10Gbps",
    node: str = "v100",
    servers: int | None = None,
    batch: int = 32,
    iterations: int = 3,
    options: dict | None = None,
) -> list[dict]:
    """Every policy on the same model and cluster (parameter server, ``servers`` defaulting
    to one per worker): each record without its LaunchResult, plus worker 0's ``lanes``,
    the ``layers``' names (forward order), ``items`` per iteration and ``end_s`` (the run's
    virtual time). ``options`` maps a policy to its options."""
    records = []
    for policy in policies:
        opts = (options or {}).get(policy)
        job = make_job(policy, model, workers, "ps", servers or workers, batch, iterations, opts)
        record = simulate_schedule(
            policy, model, workers, link, node, "ps", servers or workers, batch, iterations, options=opts
        )
        result = record.pop("result")
        records.append(
            record
            | {
                "model": model,
                "iterations": iterations,
                "lanes": lanes(job, result),
                "end_s": result.virtual_time_s,
                "layers": [layer.name for layer in job.layers],
                "items": len(job.items),
            }
        )
    return records


def option_sweep(
    option: str,
    values,
    model: str = "resnet50",
    workers: int = 2,
    link="10Gbps",
    node: str = "v100",
    servers: int | None = None,
    batch: int = 32,
    iterations: int = 3,
    options: dict | None = None,
) -> list[dict]:
    """The trade-off of one option (``KNOBS``: slice size, partition size, credit, bucket
    size) of its policy: iteration time, overlap and items per iteration at each value,
    the policy's other options from ``options``. Smaller items preempt sooner and overlap
    more, but each pays the per-message latency and overheads."""
    if option not in KNOBS:
        raise ValueError(f"option: expected one of {', '.join(KNOBS)}, got {option!r}")
    policy, rows = KNOBS[option], []
    for value in values:
        opts = (options or {}) | {option: value}
        job = make_job(policy, model, workers, "ps", servers or workers, batch, iterations, opts)
        record = simulate_schedule(
            policy, model, workers, link, node, "ps", servers or workers, batch, iterations, options=opts
        )
        rows.append(
            {k: v for k, v in record.items() if k != "result"}
            | {"option": option, "value": value, "model": model, "items": len(job.items)}
        )
    return rows


def widest_gap(rows: list[dict]) -> dict:
    """Of ``bandwidth_sweep`` rows, the bandwidth where the policies differ most (slowest
    over fastest iteration time): {"bandwidth_Bps", "fastest", "slowest"} (the two rows)."""
    by_link = {}
    for row in rows:
        by_link.setdefault(row["bandwidth_Bps"], []).append(row)
    mine = max(by_link.values(), key=lambda rs: max(r["iteration_s"] for r in rs) / min(r["iteration_s"] for r in rs))
    return {
        "bandwidth_Bps": mine[0]["bandwidth_Bps"],
        "fastest": min(mine, key=lambda r: r["iteration_s"]),
        "slowest": max(mine, key=lambda r: r["iteration_s"]),
    }
