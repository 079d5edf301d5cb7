"""Training experiments: run a real model under one distributed strategy, in virtual time,
and build its tidy record.

    from dlsys.experiments import train
    from dlsys.train import TrainConfig
    record = train("ps-ssp", TrainConfig(epochs=10), workers=4, staleness=2, straggler=(3, 4.0))
    record["test_accuracy"], record["virtual_time_s"], record["bytes_moved"]

The strategies are the registry ``dlsys.train.STRATEGIES`` (``allreduce``: Horovod-style
data parallel; ``local-sgd``: average the weights every ``period`` steps;
``model-parallel``: a GPipe pipeline of layer stages; ``ps-bsp`` / ``ps-ssp`` /
``ps-asp``: the parameter server of ``dlsys.ps``). This module only checks the arguments,
launches the strategy's rank program and summarizes what the ranks returned.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..checks import check_int
from ..comm.backends import MAX_THREAD_RANKS
from ..comm.launch import launch
from ..learn.task import INPUT_FEATURES
from ..machine.net import get_node
from ..machine.storage import MAX_LOADER_WORKERS, IOModel
from ..train import Compression, TrainConfig, load_task, steps_per_epoch
from ..train.strategies import OPTIONS, Strategy, given_in, strategy_named
from ..units import format_bytes
from . import records
from .budget import DEFAULT_MAX_MEMORY_BYTES


def train(
    strategy: str = "allreduce",
    config: TrainConfig = TrainConfig(),
    workers: int = 4,
    *,
    backend: str = "threads",
    link="tcp-10gbe",
    node="laptop-cpu",
    straggler: tuple[int, float] | None = None,
    progress: bool = False,
    timeout_s: float = 600.0,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    **options,
) -> dict:
    """Train ``config`` with ``strategy`` (a name in ``dlsys.train.STRATEGIES``) on
    ``workers`` workers and return a tidy record.

    ``straggler=(worker, factor)`` makes that worker's node ``factor`` times slower.
    ``options`` are the strategies' options, each declared once in
    ``dlsys.train.strategies.OPTIONS`` (its range, its default, what it does): they apply
    to the strategies whose registry entry lists them and are refused by name elsewhere,
    as are ``config``'s optimizer and warm-up (``CONFIG_OPTIONS``) away from allreduce.
    E.g. ``staleness`` (SSP's s), ``period`` (local SGD's k), ``micro_batches`` (GPipe's
    M), ``servers`` (extra ranks), ``fail=(worker, step)``, ``checkpoint`` / ``resume``,
    ``compression`` (``dlsys.train.Compression``), ``io`` (a real loader,
    ``dlsys.learn.task.training_batches``). ``progress`` shows a progress bar on a
    terminal. Every rank holds about 4 copies of the model (weights, gradients, momentum,
    a message); a model and world that need more than ``max_memory_bytes`` together are
    refused before any rank starts.
    The record has test_accuracy, virtual_time_s, bytes_moved, max_staleness,
    staleness_histogram (clocks -> reads), losses, accuracy_curve, params, and the
    LaunchResult under "result"; with compression also the method, bytes_per_step,
    compression_ratio (dense fp32 gradient / payload), kept_fraction (the entries the first
    worker sent with a value, of all it compressed) and compress_s / decompress_s (the first
    worker's virtual compute time in each); with ``io``, io_wait_s (the first worker's "io
    wait" in virtual time), io_wait_fraction (of the run's virtual time) and loader_step_s
    (the loader's own pace per batch, ``IOModel.steady_step_s(0)``).
    """
    unknown = sorted(options.keys() - OPTIONS.keys())
    if unknown:
        raise TypeError(f"train: unknown option {', '.join(unknown)}; the options: {', '.join(OPTIONS)}")
    entry = strategy_named(strategy)
    options = entry.settings({**options, **given_in(config)})
    check(entry, config, workers, options, straggler, max_memory_bytes)
    first_worker = entry.first_worker(options.get("servers"))
    nodes = [get_node(node)] * (first_worker + workers)
    if straggler is not None:
        worker, factor = straggler
        nodes[first_worker + worker] = nodes[first_worker + worker].slowed(factor)
    result = launch(
        entry.program,
        first_worker + workers,
        backend,
        link=link,
        node=nodes,
        seed=config.seed,
        args=(config,),
        kwargs={**entry.fixed, **options, "progress": progress},
        timeout_s=timeout_s,
    )
    return summarize(result, strategy, config, record_of(result, workers, first_worker, options))


def app_record(
    strategy: str,
    epochs: int,
    link: str,
    workers: int = 4,
    straggler_factor: float = 1.0,
    batch_size: int = 32,
    lr: float = 0.1,
    **options,
) -> dict:
    """``train`` of the digits MLP as the app shows it, on ``workers`` workers (threads), the
    last one ``straggler_factor`` times slower (none at 1), in plain data (JSON) that
    dlsys.course.precomputed can store: the record without the weights and the
    LaunchResult, the run's trace as ``Trace.to_rows`` under "trace", the staleness
    histogram as [clocks, reads] pairs. ``with_trace`` gives the figures' form back."""
    straggler = (workers - 1, straggler_factor) if straggler_factor > 1 else None
    record = train(
        strategy,
        TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr),
        workers,
        link=link,
        straggler=straggler,
        **options,
    )
    return {
        **{k: v for k, v in record.items() if k not in ("params", "result")},
        "staleness_histogram": sorted(record["staleness_histogram"].items()),
        "trace": record["result"].trace.to_rows(),
    }


def with_trace(record: dict) -> dict:
    """An ``app_record`` with its Trace and its staleness histogram {clocks: reads} back."""
    return {**records.with_trace(record), "staleness_histogram": dict(record["staleness_histogram"])}


def check(
    entry: Strategy,
    config: TrainConfig,
    workers: int,
    options: dict,
    straggler: tuple[int, float] | None,
    max_memory_bytes: int,
) -> None:
    """Every value ``entry`` runs with, in range, before any rank starts."""
    check_int("workers", workers, 1, MAX_THREAD_RANKS)
    # two ranges the world decides: the ranks fit, a micro-batch holds a sample
    limits = {"servers": MAX_THREAD_RANKS - workers, "micro_batches": workers * config.batch_size}
    for name, value in options.items():
        if OPTIONS[name].kind == "integer":
            OPTIONS[name]._replace(high=min(OPTIONS[name].high, limits.get(name, OPTIONS[name].high))).check(value)
    if straggler is not None:
        check_int("straggler worker", straggler[0], 0, workers - 1)
    ranks = entry.ranks(workers, options.get("servers"))
    model_nbytes = mlp_params(config) * np.dtype(config.dtype).itemsize if config.model == "mlp" else 0
    if 4 * model_nbytes * ranks > max_memory_bytes:
        raise ValueError(
            f"{ranks} ranks x 4 copies of a {format_bytes(model_nbytes)} model need "
            f"{format_bytes(4 * model_nbytes * ranks)}, more than the memory budget "
            f"{format_bytes(max_memory_bytes)}: use fewer or narrower hidden layers, or fewer workers"
        )
    if entry.check is not None:
        entry.check(config, workers, options)
    steps_per_epoch(
        len(load_task(config.dataset, config.model == "cnn", config.seed).y_train), workers, config.batch_size
    )
    io = options.get("io")
    if io is not None:
        if io.batch_size != config.batch_size:
            raise ValueError(f"io.batch_size must be the training batch size {config.batch_size}, got {io.batch_size}")
        check_int(
            f"loader workers per worker ({workers} workers share at most {MAX_LOADER_WORKERS} loader processes)",
            io.workers,
            0,
            MAX_LOADER_WORKERS // workers,
        )


def record_of(result, workers: int, first_worker: int, options: dict) -> dict:
    """What the ranks returned, as one record: rank 0's values, every rank's losses, the first
    worker's accuracy curve, the staleness of every read, and what compression and IO cost."""
    values = result.values
    record = {k: v for k, v in values[0].items() if k not in ("losses", "accuracy_curve", "reads")}
    record.setdefault("layers", [])
    record["workers"] = workers
    record["losses"] = [row for v in values for row in v.get("losses", [])]
    record["accuracy_curve"] = values[first_worker].get("accuracy_curve", values[0].get("accuracy_curve", []))
    reads = values[0].get("reads")
    if reads is not None:
        staleness_of = [r["staleness"] for r in reads]
    else:  # synchronous strategies read fresh weights; local SGD's miss up to period - 1 local steps
        staleness_of = [options.get("period", 1) - 1] * len(record["losses"])
    record["reads"] = reads or []
    record["max_staleness"] = max(staleness_of, default=0)
    record["staleness_histogram"] = dict(sorted(Counter(staleness_of).items()))
    compression, io = options.get("compression"), options.get("io")
    if compression is not None:
        record.update(compression_record(result, compression, values[first_worker], len(record["losses"]) / workers))
    if io is not None:
        record.update(io_record(result, io, first_worker))
    return record


def io_record(result, io: IOModel, worker: int) -> dict:
    """What the loader cost ``worker``: its "io wait" in virtual time, and the loader's own pace."""
    wait_s = sum(
        s.end_s - s.start_s
        for s in result.trace.spans
        if s.rank == worker and s.kind == "wait" and s.label == "io wait"
    )
    return {
        "storage": io.storage,
        "loader_workers": io.workers,
        "prefetch": io.prefetch,
        "io_wait_s": wait_s,
        "io_wait_fraction": wait_s / result.virtual_time_s if result.virtual_time_s else 0.0,
        "loader_step_s": io.steady_step_s(0.0),
    }


def compression_record(result, compression: Compression, worker: dict, steps: float) -> dict:
    """What compression did: the first worker's payload vs a dense fp32 gradient, bytes on
    the wire per step (every rank's messages; ``steps`` per worker) and the virtual compute
    time of compressing and of decoding, summed over every rank (servers decode pushes)."""
    spent = Counter()
    for span in result.trace.spans:
        if span.kind == "compute" and span.label.split(" ")[0] in ("compress", "decompress"):
            spent[span.label.split(" ")[0]] += span.end_s - span.start_s
    return {
        "compression": compression.method,
        "compression_options": dict(compression.options),
        "encoded_nbytes_per_step": worker["encoded_nbytes_per_step"],
        "kept_fraction": worker["kept_fraction"],
        "compression_ratio": worker["dense_nbytes_per_step"] / max(worker["encoded_nbytes_per_step"], 1),
        "bytes_per_step": sum(m.nbytes for m in result.trace.messages) / max(1.0, steps),
        "compress_s": spent["compress"],
        "decompress_s": spent["decompress"],
    }


def mlp_params(config: TrainConfig) -> int:
    """Parameters of the MLP ``config`` describes (``nn.mlp``: the data set's inputs, the
    hidden widths, 10 classes; weights and biases), counted without building it."""
    widths = [INPUT_FEATURES[config.dataset], *config.hidden, 10]
    return sum((a + 1) * b for a, b in zip(widths, widths[1:]))


def summarize(result, strategy: str, config: TrainConfig, record: dict) -> dict:
    """The tidy record every strategy returns: config, the program's record, and the
    run's virtual time and bytes (summed over every message in the trace)."""
    return {
        "strategy": strategy,
        **config.__dict__,
        **record,
        "virtual_time_s": result.virtual_time_s,
        "bytes_moved": int(sum(m.nbytes for m in result.trace.messages)),
        "messages": len(result.trace.messages),
        "wall_time_s": result.wall_time_s,
        "result": result,
    }
