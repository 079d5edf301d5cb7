"""Overlap and scheduling experiments: one policy on one model, its iteration time, throughput
and overlap; bandwidth sweeps; real training on digits under every policy.

    from dlsys.experiments import schedule as ex
    ex.simulate_schedule("p3", "resnet50", workers=4, link="10Gbps")   # an emulated big model
    ex.bandwidth_sweep("vgg19", ["1Gbps", "10Gbps", "100Gbps"])       # every policy per bandwidth
    ex.train_schedule("p3", TrainConfig(epochs=2))                    # real digits, same numbers

A model is a layer profile (``dlsys.machine.profiles``: payloads are logical, compute from FLOPs)
or "digits" (the digits MLP: real gradients; with ``config`` it really trains). A run's record
(its overlap, the shared-link replay's times, the lanes drawn) is ``schedule_record``; P3 as
its paper ran it, ``p3_paper``.
"""

from __future__ import annotations

import math

from .. import schedule
from ..checks import check_int
from ..comm.launch import launch
from ..machine import profiles
from ..machine.net import LinkModel, get_link, get_node
from ..machine.topology import flat, placed
from ..schedule.policy import slice_count
from ..train import TrainConfig, build_model
from ..units import format_bytes
from .budget import DEFAULT_MAX_MEMORY_BYTES
from .schedule_record import lanes, shared_record, summarize

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
