"""Decentralized data parallelism: every rank holds the whole model and reduces with peers.

The programming model is Horovod's (Sergeev & Del Balso 2018): write single-process
training code, then (1) broadcast the initial weights from rank 0, (2) wrap the optimizer
in a ``DistributedOptimizer`` that all-reduces the gradients, (3) checkpoint on rank 0 only.
Because ``model.grads`` is one contiguous buffer, one all-reduce syncs every layer.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import collectives
from ..collectives.compressed import encode, exchange
from ..compress.compressor import NoneMemory, payload_nbytes
from ..compress.dgc import DGCMemory
from ..compress.none import NoneCompressor
from ..learn import optim
from ..learn.task import (
    Compression,
    TrainConfig,
    accuracy,
    build_model,
    build_optimizer,
    gradient,
    progress_bar,
    steps_per_epoch,
    task_of,
    training_batches,
)
from ..machine.storage import IOModel
from .step_hooks import Checkpoints, CompressorEpochs, Evaluation, Hooks, LayerNorms, ProgressBar, restore_checkpoint


class DistributedOptimizer:
    """Horovod's ``hvd.DistributedOptimizer``: before each update, average the gradients of
    all P ranks with one all-reduce of the flat buffer, g <- (1/P) sum_r g_r, then apply the
    wrapped optimizer. Every rank applies the same update to the same weights, so the copies
    stay identical without ever sending weights.

    With ``compression`` (a ``dlsys.compress`` method; Horovod's ``compression=``, GRACE's
    ``grc``) each parameter tensor of ``named_parameters`` (``model.param_slices()``; default
    one tensor, the whole buffer) is compressed, sent and decoded on its own with
    ``memory``'s error feedback: g_t <- mean_r D(C(g_r + e_r)). Every rank decodes the same
    payloads, so the copies still stay identical. A tensor the method's paper leaves
    uncompressed (``compresses(ndim)``: DGC's biases) goes dense through the same memory."""

    def __init__(
        self,
        optimizer: optim.Optimizer,
        comm,
        algorithm: str = "ring",
        compression=None,
        memory=None,
        named_parameters=None,
    ):
        collectives.check_algorithm("allreduce", algorithm)
        self.optimizer, self.comm, self.algorithm = optimizer, comm, algorithm
        self.compression, self.memory = compression, memory or NoneMemory()
        self.tensors = [(s.name, slice(s.offset, s.offset + s.size), s.ndim) for s in named_parameters or []] or [
            ("grads", slice(None), 1)
        ]
        self.dense = NoneCompressor()
        self.encoded_nbytes = 0  # this rank's payload bytes over every step so far
        self.kept, self.entries = 0, 0  # entries sent with a value, and entries, over every step so far

    def synchronize(self) -> None:
        """``optimizer.synchronize()``: average the gradients now (to inspect them before the update)."""
        grads = self.optimizer.grads
        if self.compression is None:
            grads[...] = collectives.allreduce(self.comm, grads, op="mean", algorithm=self.algorithm)
        else:
            for name, where, ndim in self.tensors:
                method = self.compression if self.compression.compresses(ndim) else self.dense
                payload, ctx = encode(self.comm, grads[where], method, self.memory, name, self.algorithm)
                self.encoded_nbytes += payload_nbytes(payload)
                self.kept += method.kept(payload, grads[where].size)
                self.entries += grads[where].size
                grads[where] = exchange(self.comm, payload, ctx, method, grads[where], name, self.algorithm)

    def step(self, synchronize: bool = True) -> None:
        if synchronize:
            self.synchronize()
        self.optimizer.step()


def broadcast_parameters(comm, params: np.ndarray, root: int = 0) -> None:
    """``hvd.broadcast_parameters``: every rank starts from the root's weights (in place)."""
    params[...] = collectives.broadcast(comm, params, root)


def allreduce_program(
    comm,
    config: TrainConfig,
    algorithm: str = "ring",
    checkpoint=None,
    resume=None,
    progress: bool = False,
    evals_per_epoch: int = 1,
    record_layers: bool = False,
    compression: Compression | None = None,
    io: IOModel | None = None,
):
    """Synchronous data-parallel training: W(t+1) = W(t) - update((1/P) sum_r grad_r(t)) by
    ``config.optimizer`` (SGD: update = lr * g, with momentum).

    Rank 0 measures test accuracy ``evals_per_epoch`` times per epoch; with
    ``record_layers`` it also records, every step, each parameter tensor's ||w||, the
    averaged ||g|| and the trust ratio LARS/LAMB applied (``layers`` in the record).
    Checkpoints (if ``checkpoint`` is a path) after every epoch on rank 0 only; ``resume``
    restarts from such a file and continues bit-identically. ``compression``: each
    parameter tensor's gradient is compressed (see ``DistributedOptimizer``). ``io``: the
    batches come through a real loader, and wait on the IO model (``training_batches``).
    All but the compression itself are hooks (``dlsys.train.step_hooks``) at fixed places."""
    task, model = task_of(config), build_model(config)
    compressor, memory = (
        compression.build(config.seed, comm.rank, comm.size, config.momentum) if compression else (None, None)
    )
    if isinstance(memory, DGCMemory):  # DGC's memory carries the momentum
        config = replace(config, momentum=0.0)
    per_epoch = steps_per_epoch(len(task.y_train), comm.size, config.batch_size)
    optimizer = build_optimizer(config, model, per_epoch)
    opt = DistributedOptimizer(optimizer, comm, algorithm, compressor, memory, model.param_slices())
    start = restore_checkpoint(comm, resume, model.params, optimizer) if resume else 0
    if not resume:
        broadcast_parameters(comm, model.params)

    lead, steps = comm.rank == 0, config.epochs * per_epoch - start  # rank 0 alone evaluates, records, saves
    evaluation = Evaluation(comm, model, task, config.epochs, per_epoch, evals_per_epoch if lead else 0)
    hooks = Hooks(
        ProgressBar(steps, progress and lead, "allreduce"),
        CompressorEpochs(compressor, opt, per_epoch, max(1, steps), model.grads.size * 4) if compressor else None,
        LayerNorms(model, optimizer) if record_layers and lead else None,
        evaluation,
        Checkpoints(checkpoint, model, optimizer, per_epoch) if checkpoint and lead else None,
    )
    losses = []
    for step, X_b, y_b in training_batches(comm, config, task, per_epoch, start, io):  # io: through a loader
        hooks.begin(step)
        losses.append((step, comm.clock, gradient(comm, model, X_b, y_b)))
        opt.synchronize()
        hooks.synchronized(step)
        opt.step(synchronize=False)
        hooks.stepped(step)
    record = _rank_record(comm, model, task, losses, evaluation.curve)
    hooks.finish(record)
    return record


def local_sgd_program(comm, config: TrainConfig, period: int = 4, progress: bool = False, io: IOModel | None = None):
    """Local SGD / periodic model averaging (Zinkevich et al. 2010; Stich 2019; Lin et al.
    2020): every worker takes ``period`` SGD steps on its own batches, then all average
    their weights, w <- (1/P) sum_r w_r: one all-reduce every ``period`` steps instead of
    every step. With period 1 (and any momentum) it is synchronous SGD again. ``io`` as in
    ``allreduce_program``."""
    task, model = task_of(config), build_model(config)
    sgd = optim.SGD(model.params, model.grads, config.lr, config.momentum)
    broadcast_parameters(comm, model.params)
    n = len(task.y_train)
    per_epoch = steps_per_epoch(n, comm.size, config.batch_size)
    total, losses, curve = config.epochs * per_epoch, [], []
    bar = progress_bar(total, progress and comm.rank == 0, f"local SGD (period {period})")
    for step, X_b, y_b in training_batches(comm, config, task, per_epoch, io=io):
        bar.update()
        losses.append((step, comm.clock, gradient(comm, model, X_b, y_b)))
        sgd.step()
        if (step + 1) % period == 0 or step + 1 == total:
            model.params[...] = collectives.allreduce(comm, model.params, op="mean")
        if comm.rank == 0 and (step + 1) % per_epoch == 0:
            curve.append(((step + 1) // per_epoch, comm.clock, accuracy(model, task.X_test, task.y_test)))
    bar.close()
    return _rank_record(comm, model, task, losses, curve)


def _rank_record(comm, model, task, losses, curve) -> dict:
    """Every rank reports its losses; rank 0 also the weights and test accuracy."""
    record: dict = {"losses": [{"rank": comm.rank, "step": s, "time_s": t, "loss": loss} for s, t, loss in losses]}
    if comm.rank == 0:
        record.update(
            params=model.params.copy(),
            test_accuracy=accuracy(model, task.X_test, task.y_test),
            accuracy_curve=[{"epoch": e, "time_s": t, "test_accuracy": a} for e, t, a in curve],
        )
    return record
