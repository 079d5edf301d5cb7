"""Decentralized data parallelism: every rank holds the whole model and reduces with peers.

The programming model is Horovod's (Sergeev & Del Balso 2018): write single-process
training code, then (1) broadcast the initial weights from rank 0, (2) wrap the optimizer
in a ``DistributedOptimizer`` that all-reduces the gradients, (3) checkpoint on rank 0 only.
Because ``model.grads`` is one contiguous buffer, one all-reduce syncs every layer.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from .. import collectives
from ..learn import optim
from ..collectives.compressed import encode, exchange
from ..compress import DGCMemory, NoneMemory, payload_nbytes
from ..machine.storage import IOModel
from ..learn.task import (Compression, TrainConfig, accuracy, build_model, build_optimizer, gradient, progress_bar,
                     steps_per_epoch, task_of, training_batches)


class DistributedOptimizer:
    """Horovod's ``hvd.DistributedOptimizer``: before each update, average the gradients of
    all P ranks with one all-reduce of the flat buffer, g <- (1/P) sum_r g_r, then apply the
    wrapped optimizer. Every rank applies the same update to the same weights, so the copies
    stay identical without ever sending weights.

    With ``compression`` (a ``dlsys.compress`` method; Horovod's ``compression=``, GRACE's
    ``grc``) each parameter tensor of ``named_parameters`` (``model.param_slices()``; default
    one tensor, the whole buffer) is compressed, sent and decoded on its own with
    ``memory``'s error feedback: g_t <- mean_r D(C(g_r + e_r)). Every rank decodes the same
    payloads, so the copies still stay identical."""

    def __init__(self, optimizer: optim.Optimizer, comm, algorithm: str = "ring", compression=None,
                 memory=None, named_parameters=None):
        collectives.check_algorithm("allreduce", algorithm)
        self.optimizer, self.comm, self.algorithm = optimizer, comm, algorithm
        self.compression, self.memory = compression, memory or NoneMemory()
        self.tensors = [(s.name, slice(s.offset, s.offset + s.size)) for s in named_parameters or []] \
            or [("grads", slice(None))]
        self.encoded_nbytes = 0  # this rank's payload bytes over every step so far

    def synchronize(self) -> None:
        """``optimizer.synchronize()``: average the gradients now (to inspect them before the update)."""
        grads = self.optimizer.grads
        if self.compression is None:
            grads[...] = collectives.allreduce(self.comm, grads, op="mean", algorithm=self.algorithm)
        else:
            for name, where in self.tensors:
                payload, ctx = encode(self.comm, grads[where], self.compression, self.memory, name, self.algorithm)
                self.encoded_nbytes += payload_nbytes(payload)
                grads[where] = exchange(self.comm, payload, ctx, self.compression, grads[where], name,
                                        self.algorithm)

    def step(self, synchronize: bool = True) -> None:
        if synchronize:
            self.synchronize()
        self.optimizer.step()


def broadcast_parameters(comm, params: np.ndarray, root: int = 0) -> None:
    """``hvd.broadcast_parameters``: every rank starts from the root's weights (in place)."""
    params[...] = collectives.broadcast(comm, params, root)


def save_checkpoint(path, params: np.ndarray, optimizer: optim.Optimizer, step: int) -> None:
    """Weights, optimizer state and the global step in one .npz, written atomically."""
    tmp = f"{path}.tmp.npz"
    state = optimizer.state_dict()
    np.savez(tmp, params=params, step=step, **{f"optimizer_{k}": v for k, v in state.items()})
    os.replace(tmp, path)


def restore_checkpoint(comm, path, params: np.ndarray, optimizer: optim.Optimizer) -> int:
    """Rank 0 reads the checkpoint and broadcasts weights, optimizer state and step
    (``hvd.broadcast_parameters`` + ``broadcast_optimizer_state``); returns the step."""
    if comm.rank == 0:
        with np.load(path) as ckpt:
            params[...] = ckpt["params"]
            optimizer.load_state_dict({k[len("optimizer_"):]: ckpt[k] for k in ckpt.files if k.startswith("optimizer_")})
            step = int(ckpt["step"])
    else:
        step = 0
    broadcast_parameters(comm, params)
    for name in optimizer.state_names:
        getattr(optimizer, name)[...] = collectives.broadcast(comm, getattr(optimizer, name))
    step, optimizer.steps = (int(v) for v in collectives.broadcast(comm, np.array([step, optimizer.steps])))
    return step


def allreduce_program(comm, config: TrainConfig, algorithm: str = "ring", checkpoint=None, resume=None,
                      progress: bool = False, evals_per_epoch: int = 1, record_layers: bool = False,
                      compression: Compression | None = None, io: IOModel | None = None):
    """Synchronous data-parallel training: W(t+1) = W(t) - update((1/P) sum_r grad_r(t)) by
    ``config.optimizer`` (SGD: update = lr * g, with momentum).

    Rank 0 measures test accuracy ``evals_per_epoch`` times per epoch; with
    ``record_layers`` it also records, every step, each parameter tensor's ||w||, the
    averaged ||g|| and the trust ratio LARS/LAMB applied (``layers`` in the record).
    Checkpoints (if ``checkpoint`` is a path) after every epoch on rank 0 only; ``resume``
    restarts from such a file and continues bit-identically. ``compression``: each
    parameter tensor's gradient is compressed (see ``DistributedOptimizer``). ``io``: the
    batches come through a real loader, and wait on the IO model (``training_batches``)."""
    task, model = task_of(config), build_model(config)
    compressor, memory = (compression.build(config.seed, comm.rank, comm.size, config.momentum)
                          if compression else (None, None))
    if isinstance(memory, DGCMemory):  # DGC's memory carries the momentum
        config = replace(config, momentum=0.0)
    n = len(task.y_train)
    per_epoch = steps_per_epoch(n, comm.size, config.batch_size)
    optimizer = build_optimizer(config, model, per_epoch)
    opt = DistributedOptimizer(optimizer, comm, algorithm, compressor, memory, model.param_slices())
    start = restore_checkpoint(comm, resume, model.params, optimizer) if resume else 0
    if not resume:
        broadcast_parameters(comm, model.params)
    eval_steps = {round(per_epoch * (e + i / evals_per_epoch)) for e in range(config.epochs)
                  for i in range(1, evals_per_epoch + 1)}
    slices, losses, curve, layers = model.param_slices(), [], [], []
    bar = progress_bar(config.epochs * per_epoch - start, progress and comm.rank == 0, "allreduce")
    for step, X_b, y_b in training_batches(comm, config, task, per_epoch, start, io):
        bar.update()
        if compressor and step % per_epoch == 0:
            compressor.set_epoch(step // per_epoch)
        losses.append((step, comm.clock, gradient(comm, model, X_b, y_b)))
        opt.synchronize()
        if record_layers and comm.rank == 0:
            w_norm, g_norm = (layer_norms(x, slices) for x in (model.params, model.grads))
        opt.step(synchronize=False)
        if record_layers and comm.rank == 0:
            ratios = optimizer.trust_ratios if optimizer.trust_ratios is not None else np.full(len(slices), np.nan)
            layers += [{"step": step, "tensor": s.name, "w_norm": w, "g_norm": g, "trust_ratio": float(t)}
                       for s, w, g, t in zip(slices, w_norm, g_norm, ratios)]
        if comm.rank == 0 and step + 1 in eval_steps:
            curve.append(((step + 1) / per_epoch, comm.clock, accuracy(model, task.X_test, task.y_test)))
        if comm.rank == 0 and checkpoint and (step + 1) % per_epoch == 0:
            save_checkpoint(checkpoint, model.params, optimizer, step + 1)
    bar.close()
    record = _rank_record(comm, model, task, losses, curve)
    if compressor:
        steps = max(1, config.epochs * per_epoch - start)
        record.update(encoded_nbytes_per_step=opt.encoded_nbytes / steps, dense_nbytes_per_step=model.grads.size * 4)
    if comm.rank == 0 and record_layers:
        record["layers"] = layers
    return record


def layer_norms(x: np.ndarray, slices) -> list[float]:
    """||x restricted to each slice||_2."""
    return [float(np.linalg.norm(x[s.offset:s.offset + s.size])) for s in slices]


def local_sgd_program(comm, config: TrainConfig, period: int = 4, progress: bool = False,
                      io: IOModel | None = None):
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
    record = {"losses": [{"rank": comm.rank, "step": s, "time_s": t, "loss": loss} for s, t, loss in losses]}
    if comm.rank == 0:
        record.update(params=model.params.copy(), test_accuracy=accuracy(model, task.X_test, task.y_test),
                      accuracy_curve=[{"epoch": e, "time_s": t, "test_accuracy": a} for e, t, a in curve])
    return record
