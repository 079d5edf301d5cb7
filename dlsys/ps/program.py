"""The rank program that trains the digits task on a parameter server: the task's setup,
the servers' hooks and the workers' loop (pull, compute a gradient, push)."""

from __future__ import annotations

from ..compress.dgc import DGCMemory
from ..learn.task import (
    Compression,
    TrainConfig,
    accuracy,
    batch_indices,
    build_model,
    gradient,
    steps_per_epoch,
    task_of,
)
from .hooks import DENSE, Chain, Checkpoint, Compressed, ProgressBar, ReadLog
from .keys import KeyLayout
from .protocol import GATHER
from .server import KVServer
from .worker import KVWorker


def ps_program(
    comm,
    config: TrainConfig,
    servers: int = 1,
    consistency: str = "bsp",
    staleness: int = 0,
    fail: tuple[int, int] | None = None,
    checkpoint=None,
    resume=None,
    progress: bool = False,
    compression: Compression | None = None,
):
    """Rank program: ranks below `servers` serve, the others train. The budget is
    epochs * steps_per_epoch * W gradients, the work of `epochs` synchronous epochs.
    ``compression``: workers push compressed gradients (pulls stay dense), servers decode."""
    task, model = task_of(config), build_model(config)
    layout = KeyLayout([p.size for p in model.param_slices()], servers)
    workers = comm.size - servers
    budget = config.epochs * steps_per_epoch(len(task.y_train), workers, config.batch_size) * workers
    compressor, memory = (
        compression.build(config.seed, comm.rank, workers, config.momentum) if compression else (None, None)
    )
    if compression is not None and compressor is not None and compressor.same_draws_on_every_rank:
        raise ValueError(
            f"compression: {compression.method} cannot push to a parameter server: the server "
            "would need every worker's draw of indices; use it with allreduce"
        )
    codec = DENSE if compressor is None else Compressed(compressor, memory)
    if comm.rank >= servers:
        return _work(comm, config, task, model, layout, workers, fail, KVWorker(comm, layout, codec))
    log = ReadLog()
    hooks = Chain(Checkpoint(checkpoint, resume), log, *([ProgressBar()] if progress and comm.rank == 0 else []))
    momentum = 0.0 if isinstance(memory, DGCMemory) else None  # DGC's memory carries the momentum
    server = KVServer(
        comm,
        layout,
        config,
        workers,
        consistency,
        staleness,
        budget,
        model.params,
        momentum=momentum,
        codec=codec,
        hooks=hooks,
    )
    server.serve()
    if comm.rank > 0:
        comm.send(server.weights, 0, GATHER, label="gather weights for evaluation")
        return {}
    for s in range(servers):
        lo, hi = layout.bounds[s], layout.bounds[s + 1]
        model.params[lo:hi] = server.weights if s == 0 else comm.recv(source=s, tag=GATHER)
    return {
        "params": model.params.copy(),
        "test_accuracy": accuracy(model, task.X_test, task.y_test),
        "reads": log.reads,
        "failed": log.failed,
        "gradients_applied": server.pushes,
        "gradients_discarded": server.discarded,
    }


def _work(comm, config, task, model, layout, workers, fail, kv):
    """A worker: pull the weights, compute a gradient on this clock's batch, push it.
    ``fail=(worker, step)``: that worker leaves at that step instead."""
    worker, n = comm.rank - layout.servers, len(task.y_train)
    keys = range(len(layout.offsets) - 1)
    per_epoch = steps_per_epoch(n, workers, config.batch_size)
    losses, curve, steps = [], [], 0
    while True:
        if fail == (worker, steps):
            kv.leave()
            break
        pulled = kv.wait(kv.pull(keys))
        if pulled is None:
            break
        clock, weights = pulled
        model.params[...] = weights
        if worker == 0 and clock % per_epoch == 0 and clock:
            curve.append(
                {
                    "epoch": clock // per_epoch,
                    "time_s": comm.clock,
                    "test_accuracy": accuracy(model, task.X_test, task.y_test),
                }
            )
        idx = batch_indices(n, clock, worker, workers, config.batch_size, config.seed)
        loss = gradient(comm, model, task.X_train[idx], task.y_train[idx])
        losses.append({"rank": comm.rank, "step": clock, "time_s": comm.clock, "loss": loss})
        if isinstance(kv.codec, Compressed) and clock % per_epoch == 0:
            kv.codec.compressor.set_epoch(clock // per_epoch)
        kv.push(keys, model.grads)
        steps += 1
    record = {"losses": losses, "accuracy_curve": curve, "steps": steps}
    if isinstance(kv.codec, Compressed):
        record.update(
            encoded_nbytes_per_step=kv.codec.encoded_nbytes / max(steps, 1),
            dense_nbytes_per_step=model.grads.size * 4,
            kept_fraction=kv.codec.kept / max(kv.codec.entries, 1),
        )
    return record
