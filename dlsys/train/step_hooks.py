"""The optional parts of a training step, as hooks the loop calls at fixed places.

The data-parallel loop (``data_parallel.allreduce_program``) reads like nanoGPT's
train.py: one loop, top to bottom, and whatever is optional (a progress bar, the
compressor's epoch, per-layer norms, evaluation, checkpoints) is a hook here, called at one
of three fixed places of every step. A hook sends nothing and charges no compute.
"""

from __future__ import annotations

import os

import numpy as np

from .. import collectives
from ..learn import optim
from ..learn.task import accuracy, progress_bar


class Hook:
    """One optional part of a training step. The loop calls ``begin(step)`` before the
    step's gradient, ``synchronized(step)`` once the gradient is averaged (before the
    update) and ``stepped(step)`` after the update; ``finish(record)`` adds to the rank's
    record at the end. Each does nothing unless overridden."""

    def begin(self, step: int) -> None:
        pass

    def synchronized(self, step: int) -> None:
        pass

    def stepped(self, step: int) -> None:
        pass

    def finish(self, record: dict) -> None:
        pass


class Hooks(Hook):
    """Several hooks, called in the order given at every place; a None (an option not
    taken) is left out."""

    def __init__(self, *hooks: Hook | None):
        self.hooks = [hook for hook in hooks if hook is not None]

    def begin(self, step: int) -> None:
        for hook in self.hooks:
            hook.begin(step)

    def synchronized(self, step: int) -> None:
        for hook in self.hooks:
            hook.synchronized(step)

    def stepped(self, step: int) -> None:
        for hook in self.hooks:
            hook.stepped(step)

    def finish(self, record: dict) -> None:
        for hook in self.hooks:
            hook.finish(record)


class ProgressBar(Hook):
    """A bar on a terminal, one tick per step (``progress_bar``: off unless ``enabled``)."""

    def __init__(self, total: int, enabled: bool, desc: str):
        self.bar = progress_bar(total, enabled, desc)

    def begin(self, step: int) -> None:
        self.bar.update()

    def finish(self, record: dict) -> None:
        self.bar.close()


class CompressorEpochs(Hook):
    """Tells the compressor each new epoch (DGC's sparsity warm-up reads it), and records
    the payload bytes per step ``opt`` sent against the dense fp32 gradient's."""

    def __init__(self, compressor, opt, per_epoch: int, steps: int, dense_nbytes: int):
        self.compressor, self.opt, self.per_epoch = compressor, opt, per_epoch
        self.steps, self.dense_nbytes = steps, dense_nbytes

    def begin(self, step: int) -> None:
        if step % self.per_epoch == 0:
            self.compressor.set_epoch(step // self.per_epoch)

    def finish(self, record: dict) -> None:
        record.update(
            encoded_nbytes_per_step=self.opt.encoded_nbytes / self.steps,
            dense_nbytes_per_step=self.dense_nbytes,
            kept_fraction=self.opt.kept / max(self.opt.entries, 1),
        )


class LayerNorms(Hook):
    """Every step, each parameter tensor's ||w|| and averaged ||g|| before the update, and
    the trust ratio LARS/LAMB applied (NaN for SGD): ``layers`` in the record."""

    def __init__(self, model, optimizer: optim.Optimizer):
        self.model, self.optimizer, self.slices = model, optimizer, model.param_slices()
        self.rows: list[dict] = []

    def synchronized(self, step: int) -> None:
        self.w_norm, self.g_norm = (layer_norms(x, self.slices) for x in (self.model.params, self.model.grads))

    def stepped(self, step: int) -> None:
        ratios = self.optimizer.trust_ratios
        if ratios is None:
            ratios = np.full(len(self.slices), np.nan)
        self.rows += [
            {"step": step, "tensor": s.name, "w_norm": w, "g_norm": g, "trust_ratio": float(t)}
            for s, w, g, t in zip(self.slices, self.w_norm, self.g_norm, ratios)
        ]

    def finish(self, record: dict) -> None:
        record["layers"] = self.rows


def layer_norms(x: np.ndarray, slices) -> list[float]:
    """||x restricted to each slice||_2."""
    return [float(np.linalg.norm(x[s.offset : s.offset + s.size])) for s in slices]


class Evaluation(Hook):
    """Test accuracy ``evals_per_epoch`` times an epoch (none if 0), after the step closest
    to each fraction of it: ``curve`` holds (epoch, virtual time, accuracy) rows."""

    def __init__(self, comm, model, task, epochs: int, per_epoch: int, evals_per_epoch: int):
        self.comm, self.model, self.task, self.per_epoch = comm, model, task, per_epoch
        self.after_steps = {
            round(per_epoch * (e + i / evals_per_epoch)) for e in range(epochs) for i in range(1, evals_per_epoch + 1)
        }
        self.curve: list[tuple[float, float, float]] = []

    def stepped(self, step: int) -> None:
        if step + 1 in self.after_steps:
            self.curve.append(
                ((step + 1) / self.per_epoch, self.comm.clock, accuracy(self.model, self.task.X_test, self.task.y_test))
            )


class Checkpoints(Hook):
    """After every epoch, the weights, optimizer state and step to ``path`` (``save_checkpoint``)."""

    def __init__(self, path, model, optimizer: optim.Optimizer, per_epoch: int):
        self.path, self.model, self.optimizer, self.per_epoch = path, model, optimizer, per_epoch

    def stepped(self, step: int) -> None:
        if (step + 1) % self.per_epoch == 0:
            save_checkpoint(self.path, self.model.params, self.optimizer, step + 1)


def save_checkpoint(path, params: np.ndarray, optimizer: optim.Optimizer, step: int) -> None:
    """Weights, optimizer state and the global step in one .npz, written atomically."""
    tmp = f"{path}.tmp.npz"
    state = optimizer.state_dict()
    np.savez(tmp, params=params, step=step, **{f"optimizer_{k}": v for k, v in state.items()})
    os.replace(tmp, path)


def restore_checkpoint(comm, path, params: np.ndarray, optimizer: optim.Optimizer) -> int:
    """Rank 0 reads a ``save_checkpoint`` file and broadcasts weights, optimizer state and
    step (``hvd.broadcast_parameters`` + ``broadcast_optimizer_state``); returns the step."""
    if comm.rank == 0:
        with np.load(path) as ckpt:
            params[...] = ckpt["params"]
            optimizer.load_state_dict(
                {k[len("optimizer_") :]: ckpt[k] for k in ckpt.files if k.startswith("optimizer_")}
            )
            step = int(ckpt["step"])
    else:
        step = 0
    params[...] = collectives.broadcast(comm, params)
    for name in optimizer.state_names:
        getattr(optimizer, name)[...] = collectives.broadcast(comm, getattr(optimizer, name))
    step, optimizer.steps = (int(v) for v in collectives.broadcast(comm, np.array([step, optimizer.steps])))
    return step
