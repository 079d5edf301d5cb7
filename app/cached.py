"""The experiments the pages run, cached per argument tuple (``max_entries`` bounds memory);
records are cached without the ranks' real arrays (``experiments.without_values``).

Sweeps go point by point (``points``): a point of a default view comes from
dlsys.course.precomputed's committed store, any other runs once per server (cached)
under a progress bar that counts the points and estimates the time left from the points
it has measured."""

import json
import time

import streamlit as st

from dlsys import experiments
from dlsys.course import precomputed
from dlsys.course import reproduce as ex_reproduce
from dlsys.experiments import compression as ex_compression
from dlsys.experiments import contention as ex_contention
from dlsys.experiments import emulation as ex_emulation
from dlsys.experiments import experts as ex_experts
from dlsys.experiments import memory as ex_memory
from dlsys.experiments import network_stack as ex_network_stack
from dlsys.experiments import pipeline as ex_pipeline
from dlsys.experiments import plan as ex_plan
from dlsys.experiments import records as ex_records
from dlsys.experiments import schedule as ex_schedule
from dlsys.experiments import taihulight as ex_taihulight
from dlsys.experiments import training as ex_training
from dlsys.experiments import wallclock
from dlsys.experiments.budget import PROCESS_RANK_BYTES
from dlsys.train.pipeline import SCHEDULES
from dlsys.units import format_seconds

# real buffers of all ranks together (experiments.plan_buffers): pages stay quick; larger
# sizes run on real elements that each stand for several, charged at the logical size
MAX_MEMORY_BYTES = precomputed.APP_MEMORY_BYTES
CACHE = dict(max_entries=64, show_spinner="running the ranks...")
TRAIN_WORKERS = 4
REAL_DATA_PATH_BYTES = 2 * 2**30  # real bytes, not scalable: the Measure tab's 4 processes x 64 MiB need 1.7 GiB


def collective(name: str, algorithm: str, ranks: int, nbytes: int, link: str, backend: str = "threads") -> dict:
    """experiments.simulate_collective within MAX_MEMORY_BYTES, without the returned arrays;
    a size that cannot be scaled exactly for this algorithm stops the page with the reason."""
    try:
        return _collective(name, algorithm, ranks, nbytes, link, backend)
    except ValueError as exc:
        st.error(f"{exc}. Pick another size or rank count.")
        st.stop()


@st.cache_data(**CACHE)
def _collective(name: str, algorithm: str, ranks: int, nbytes: int, link: str, backend: str) -> dict:
    # the budget keeps the buffers small; rank processes' interpreters come on top of it
    interpreters = 0 if backend == "threads" else ranks * PROCESS_RANK_BYTES
    return experiments.without_values(
        experiments.simulate_collective(
            name, algorithm, ranks, nbytes, link, backend=backend, max_memory_bytes=MAX_MEMORY_BYTES + interpreters
        )
    )


@st.cache_data(**CACHE)
def ring_steps(ranks: int, link: str) -> list:
    """experiments.ring_allreduce_steps: every rank's chunks after every ring step."""
    return experiments.ring_allreduce_steps(ranks, link)


@st.cache_data(**CACHE)
def contention(pattern: str, fabric: str, ranks: int, nbytes: int, link: str, oversubscription: float) -> list:
    """experiments.contention.sharing_pair: the pattern with sharing off, then on, without the returned arrays."""
    return [
        experiments.without_values(r)
        for r in ex_contention.sharing_pair(
            pattern, fabric, ranks, nbytes, link=link, oversubscription=oversubscription
        )
    ]


@st.cache_data(**CACHE)
def ps_vs_ring(workers: int, nbytes: int, link: str) -> dict:
    """experiments.ps_vs_ring within MAX_MEMORY_BYTES, without the returned arrays."""
    records = experiments.ps_vs_ring(workers, nbytes, link, max_memory_bytes=MAX_MEMORY_BYTES)
    return {name: experiments.without_values(r) for name, r in records.items()}


def ps_vs_ring_scaling(nbytes: int, link: str) -> list:
    """experiments.ps_vs_ring_scaling for 2 to 32 workers."""
    workers = [2, 4, 8, 16, 32]
    return points(
        "both schemes at every worker count",
        "ps_vs_ring:ps_vs_ring_scaling",
        [dict(workers=workers, size=nbytes, link=link, max_memory_bytes=MAX_MEMORY_BYTES)],
        [max(workers)],
    )


def emulated_allreduce_costs(link: str, ranks: int) -> list:
    """experiments.emulated_allreduce_costs: every all-reduce algorithm really run."""
    return points(
        "running every all-reduce algorithm",
        "costs:emulated_allreduce_costs",
        [dict(link=link, ranks=ranks, max_memory_bytes=MAX_MEMORY_BYTES)],
        [ranks],
    )


@st.cache_data(max_entries=48, show_spinner="training on real ranks...")
def training(
    strategy: str,
    epochs: int,
    link: str,
    straggler_factor: float = 1.0,
    batch_size: int = 32,
    lr: float = 0.1,
    **options,
) -> dict:
    """experiments.training.app_record of the digits MLP on TRAIN_WORKERS workers (threads),
    the last one ``straggler_factor`` times slower, its trace under "trace": the default
    views' runs from the precomputed store, others run (cached here, not per point: a record
    carries its whole trace)."""
    kwargs = dict(
        strategy=strategy,
        epochs=epochs,
        link=link,
        workers=TRAIN_WORKERS,
        straggler_factor=straggler_factor,
        batch_size=batch_size,
        lr=lr,
        **options,
    )
    found = precomputed.stored(ex_training.app_record, **kwargs)
    return ex_training.with_trace(precomputed.call_by_name("training:app_record", kwargs) if found is None else found)


@st.cache_data(max_entries=1, show_spinner="reading the large-batch study...")
def large_batch_study() -> dict | None:
    """The default large-batch study from its cache (results/large_batch.json), None if
    missing or stale: real training takes minutes, so the page never starts it."""
    return experiments.load_study()


def reproductions() -> list[dict]:
    """course.reproduce.run_claims at quick settings: every claim, paper vs dlsys.
    A stale large-batch cache raises ValueError saying what to run."""
    return points(
        "running every claim at quick settings",
        "reproduce:run_claims",
        [dict(names=[name], quick=True) for name in ex_reproduce.CLAIMS],
    )


@st.cache_data(max_entries=16)
def lr_schedules(batch: int, train_samples: int) -> list:
    """experiments.lr_schedules of the default study at global ``batch`` (its record's ``train_samples``)."""
    return experiments.lr_schedules(experiments.Study(), batch, train_samples)


@st.cache_data(max_entries=32, show_spinner="running real rank processes...")
def real_allreduce(ranks: int, nbytes: int, buffers: str) -> dict:
    """wallclock.allreduce_bench: a real all-reduce between processes, vs memcpy (wall clock)."""
    return wallclock.allreduce_bench(
        ranks, nbytes, "ring", repeats=5, warmup=1, buffers=buffers, max_memory_bytes=REAL_DATA_PATH_BYTES
    )


@st.cache_data(max_entries=16, show_spinner="emulating...")
def emulation(ranks: int) -> dict:
    """experiments.emulation.emulate: a ring all-reduce of AlexNet's gradient on ``ranks`` threads."""
    return ex_emulation.emulate("ring", ranks)


def taihulight_sweep(
    nodes: tuple, contiguous: bool, topology: str, ps_design: str = "ps", sharing: bool = True
) -> list:
    """experiments.taihulight.sweep of ``ps_design`` (a PS design) and the ring for every model of the paper."""
    calls = [
        dict(model=model, design=design, nodes=[n], contiguous=contiguous, topology=topology, sharing=sharing)
        for model in ex_taihulight.MODELS
        for design in (ps_design, "ring")
        for n in nodes
    ]
    return points("running the designs at every node count", "taihulight:sweep", calls, [c["nodes"][0] for c in calls])


def taihulight_versus_mpi(model: str, nodes: tuple, topology: str, library: str, sharing: bool = True) -> list:
    """experiments.taihulight.ring_vs_mpi for the paper's 60.97 MB and ``model``'s gradient,
    against ``library``'s MPI_Allreduce."""
    sizes = [ex_taihulight.PAPER_MESSAGE_BYTES, ex_taihulight.model_gradient_nbytes(model)]
    return points(
        "the ring and MPI_Allreduce at every node count",
        "taihulight:ring_vs_mpi",
        [dict(nbytes=sizes, nodes=list(nodes), topology=topology, library=library, sharing=sharing)],
        [max(nodes)],
    )


@st.cache_data(**CACHE)
def taihulight_iteration(
    model: str, nodes: int, contiguous: bool, topology: str, batch: int, sharing: bool = True
) -> dict:
    """One traced iteration of each design: {design: record}, without the ranks' arrays."""
    return {
        design: {
            k: v
            for k, v in experiments.without_values(
                ex_taihulight.run_design(
                    model, design, nodes, contiguous, topology, batch, record=True, sharing=sharing
                )
            ).items()
            if k != "weights"
        }
        for design in ("ps", "ring")
    }


def taihulight_link_load(nodes: int, sharing: bool) -> list:
    """experiments.taihulight.link_load_rows of the ring and recursive doubling (the paper's
    MPI_Allreduce), 60.97 MB, kept to the links ``boundary_links`` names."""
    keep = ex_taihulight.boundary_links(nodes)
    return points(
        f"replaying {nodes} ranks' messages on the TaihuLight's links",
        "taihulight:link_load_rows",
        [
            dict(algorithm=algorithm, nodes=nodes, sharing=sharing, links=keep)
            for algorithm in ("ring", "recursive_doubling")
        ],
        [nodes, nodes],
    )


@st.cache_data(max_entries=32, show_spinner="compressing...")
def compression(method: str, options: tuple) -> dict:
    """The compression page's quick experiments for one method: one gradient before and
    after, the residual over steps, one compressed all-reduce (its trace), bytes per layer."""
    opts = dict(options)
    exchange = ex_compression.one_exchange(method, opts, TRAIN_WORKERS)
    return {
        "once": ex_compression.compress_once(method, opts),
        "residual": ex_compression.residual_history(method, opts),
        "trace": exchange.trace,
    }


def compression_split(method: str, options: tuple) -> list:
    """experiments.compression.iteration_split: an epoch with and without ``method`` on each link."""
    return points(
        "training with and without compression on both links",
        "compression:iteration_split",
        [dict(method=method, options=dict(options), workers=TRAIN_WORKERS)],
    )


@st.cache_data(max_entries=64)
def compression_model(model: str, method: str, options: tuple) -> dict:
    return ex_compression.model_bytes(model, method, dict(options))


@st.cache_data(max_entries=4, show_spinner="training the digits MLP with every method (about 20 s)...")
def compression_pareto(fresh: bool) -> list:
    """The Pareto rows: the cached file, or (``fresh``) a new run of every method."""
    return ex_compression.pareto(workers=TRAIN_WORKERS) if fresh else ex_compression.cached_pareto()


# Scheduling: ``options`` is a tuple of (policy, ((option, value), ...)) pairs, hashable for the cache.
def schedule_policies(policies: tuple, model: str, workers: int, link: str, options: tuple) -> list:
    """experiments.schedule.compare_policies: worker 0's lanes under each policy."""
    opts = {p: dict(o) for p, o in options}
    return points(
        "scheduling every policy",
        "schedule:compare_policies",
        [dict(policies=[p], model=model, workers=workers, link=link, options=opts) for p in policies],
    )


def schedule_bandwidths(policies: tuple, model: str, workers: int, options: tuple) -> list:
    """experiments.schedule.bandwidth_sweep over experiments.schedule.BANDWIDTHS."""
    opts = {p: dict(o) for p, o in options}
    return points(
        "every policy at every bandwidth",
        "schedule:bandwidth_sweep",
        [
            dict(model=model, links=[link], policies=[p], workers=workers, options=opts)
            for link in ex_schedule.BANDWIDTHS
            for p in policies
        ],
    )


def schedule_option(option: str, values: tuple, model: str, workers: int, link: str, options: tuple) -> list:
    """experiments.schedule.option_sweep of one option, the policy's other options as chosen."""
    others = {k: v for k, v in dict(options).get(ex_schedule.KNOBS[option], ()) if k != option}
    return points(
        "sweeping the option",
        "schedule:option_sweep",
        [dict(option=option, values=[v], model=model, workers=workers, link=link, options=others) for v in values],
    )


# one-way times measured here at these sizes through these transports (a few seconds at most)
STACK_SIZES = (8, 1024, 64 * 2**10, 2**20)
STACK_TRANSPORTS = ("pipe", "tcp-nodelay", "tcp")


@st.cache_data(max_entries=1, show_spinner="measuring one message through a pipe and TCP on this machine...")
def measured_stack() -> dict:
    return wallclock.stack_bench(STACK_SIZES, STACK_TRANSPORTS)


@st.cache_data(max_entries=64)
def loader_timeline(storage: str, workers: int, prefetch: int) -> dict:
    return ex_network_stack.loader_timeline(storage, workers, prefetch)


def zero_memory(ranks: int) -> list:
    """experiments.memory.zero_memory_rows: rank 0's measured peaks against the closed form."""
    return points(
        "training the digits MLP under every ZeRO stage and FSDP", "memory:zero_memory_rows", [dict(ranks=ranks)]
    )


@st.cache_data(max_entries=12, show_spinner="training the digits MLP...")
def memory_step(strategy: str, ranks: int) -> dict:
    """experiments.memory.app_step, its trace a Trace: the default from the precomputed store."""
    found = precomputed.stored(ex_memory.app_step, strategy=strategy, ranks=ranks)
    return ex_records.with_trace(
        precomputed.call_by_name("memory:app_step", dict(strategy=strategy, ranks=ranks)) if found is None else found
    )


def pipeline_schedules(stages: int, micro_batches: tuple, chunks: int, schedules: tuple = tuple(SCHEDULES)) -> list:
    """experiments.pipeline.pipeline_schedule on a free link of each of ``schedules`` at each
    of ``micro_batches`` (``chunks`` for the chunked ones), schedule by schedule: one step's
    actions, bubble and memory each. Every record is a point of its own, so the figures of
    one page share the runs."""
    calls = [
        dict(schedule=name, stages=stages, micro_batches=m, chunks=chunks if SCHEDULES[name].chunked else 1)
        for name in schedules
        for m in micro_batches
    ]
    return points(
        "running the pipeline's stages",
        "pipeline:pipeline_schedule",
        calls,
        [c["micro_batches"] for c in calls],
        each=True,
    )


def pipeline_bubbles(stages: int, micro_batches: tuple, chunks: int) -> list:
    """experiments.pipeline.bubble_vs_microbatches: measured bubble and formula for each schedule and m."""
    return ex_pipeline.bubble_rows(pipeline_schedules(stages, micro_batches, chunks))


@st.cache_data(max_entries=16, show_spinner="costing every layout...")
def plan_ranked(model: str, gpus: int, global_batch: int, device_gib: int, device: str = "h100") -> list:
    """experiments.plan.ranked: every layout that fits, fastest first."""
    return ex_plan.ranked(model, gpus, global_batch, device, device_bytes=device_gib * 2**30)


@st.cache_data(**CACHE)
def alltoall(algorithm: str, ranks: int, block_nbytes: int, link: str) -> dict:
    """experiments.experts.app_alltoall within MAX_MEMORY_BYTES, its trace a Trace: the
    default from the precomputed store."""
    kwargs = dict(
        algorithm=algorithm, ranks=ranks, block_nbytes=block_nbytes, link=link, max_memory_bytes=MAX_MEMORY_BYTES
    )
    found = precomputed.stored(ex_experts.app_alltoall, **kwargs)
    return ex_records.with_trace(precomputed.call_by_name("experts:app_alltoall", kwargs) if found is None else found)


def alltoall_costs(ranks: int, link: str) -> list:
    """experiments.experts.alltoall_costs: each algorithm's emulated time and closed form against the block."""
    return points(
        "running the all-to-alls at every block size", "experts:alltoall_costs", [dict(ranks=ranks, link=link)], [ranks]
    )


def expert_load(ep: int, experts: int) -> list:
    """experiments.experts.expert_load: tokens per expert and drops for each top-k and capacity factor."""
    return points("routing tokens to the experts", "experts:expert_load", [dict(ep=ep, experts=experts)])


# --- sweeps, point by point ----------------------------------------------------------------

_RUN: set[str] = set()  # the points this server has run (st.cache_data keeps them, within max_entries)


@st.cache_data(max_entries=1024, show_spinner=False)
def _point(name: str, kwargs: str):
    return precomputed.call_by_name(name, json.loads(kwargs))


def points(what: str, name: str, calls: list[dict], sizes: list | None = None, each: bool = False):
    """The rows of ``precomputed.call_by_name(name, kwargs)`` for every kwargs of ``calls``,
    concatenated (``each``: the list of the calls' results as they are): stored points at once, the others
    run (cached) under a progress bar with the points left and ``precomputed.time_left_s``
    from the ones measured so far (``sizes``: each point's size for that fit, nodes for the
    TaihuLight's; equal by default)."""
    sizes = sizes or [1] * len(calls)
    function = precomputed.function_of(name)
    results = [precomputed.stored(function, **kwargs) for kwargs in calls]
    keys = [json.dumps(kwargs, sort_keys=True) for kwargs in calls]
    todo = [i for i, r in enumerate(results) if r is None and keys[i] not in _RUN]
    bar = st.progress(0.0, text=f"{what}: {len(todo)} of {len(calls)} points to run") if todo else None
    measured: list[tuple[float, float]] = []
    for i, r in enumerate(results):
        if r is not None:
            continue
        start = time.perf_counter()
        results[i] = _point(name, keys[i])
        if i in todo:
            _RUN.add(keys[i])
            measured.append((sizes[i], time.perf_counter() - start))
            left = precomputed.time_left_s(measured, [sizes[j] for j in todo[len(measured) :]])
            if bar is not None and len(measured) < len(todo):
                estimate = "" if left is None else f", about {format_seconds(left)} left"
                bar.progress(
                    len(measured) / len(todo), text=f"{what}: {len(measured)} of {len(todo)} points run{estimate}"
                )
    if bar is not None:
        bar.empty()
    return results if each else [row for r in results for row in r]
