"""Model parallelism: the layers are split across ranks, micro-batches flow through a pipeline.

The contrast to data parallelism: nobody holds the whole model, and what travels are
activations (forward) and their gradients (backward), not weights or weight gradients.
The schedule is GPipe's (Huang et al. 2019), the action list ``pipeline.gpipe``: cut each
batch into M micro-batches, run all M forwards through the S stages, then all M backwards
in reverse, summing each stage's weight gradients; every stage then updates its own layers.
Stage s idles while the pipe fills and drains: the bubble is ``pipeline.fill_drain_bubble``,
(S - 1) / (M + S - 1) of the step. ``pipeline.py`` runs the other schedules, on a transformer.
"""

from __future__ import annotations

import copy

import numpy as np

from ..learn import nn, optim
from ..learn.task import TrainConfig, accuracy, batch_indices, build_model, progress_bar, steps_per_epoch, task_of
from .pipeline import fill_drain_bubble, gpipe

FORWARD, BACKWARD, GATHER = 11, 12, 13


def split_stages(model: nn.Sequential, stages: int) -> list[tuple[int, int]]:
    """Contiguous layer ranges [start, stop) with about equal forward FLOPs: stage s ends at
    the layer where the cumulative FLOPs first reach (s + 1) / S of the total."""
    layers = len(model.layers)
    if not 1 <= stages <= layers:
        raise ValueError(
            f"model parallelism needs 1 <= stages <= layers ({layers}), got {stages} stages; "
            f"use fewer workers or a deeper model (more hidden layers)"
        )
    cumulative = np.cumsum(model.flops(1))
    bounds = [0]
    for s in range(1, stages):
        cut = int(np.searchsorted(cumulative, cumulative[-1] * s / stages)) + 1
        bounds.append(min(max(cut, bounds[-1] + 1), layers - (stages - s)))
    return list(zip(bounds, bounds[1:] + [layers]))


def pipeline_program(comm, config: TrainConfig, micro_batches: int = 4, progress: bool = False):
    """One pipeline stage per rank. Rank 0 finally gathers every stage's weights to report
    the test accuracy (that last gather is the only time weights travel)."""
    task, model = task_of(config), build_model(config)
    s, last = comm.rank, comm.size - 1
    start, stop = split_stages(model, comm.size)[s]
    mine = [p for p in model.param_slices() if start <= p.layer < stop]
    lo, hi = (mine[0].offset, mine[-1].offset + mine[-1].size) if mine else (0, 0)
    sgd = optim.SGD(model.params[lo:hi], model.grads[lo:hi], config.lr, config.momentum)
    summed = np.zeros(hi - lo, model.params.dtype)

    def flops(batch: int) -> int:  # this stage's share of the forward FLOPs
        return sum(model.flops(batch)[start:stop])

    n, global_batch = len(task.y_train), comm.size * config.batch_size
    losses, total = [], config.epochs * steps_per_epoch(n, 1, global_batch)
    bar = progress_bar(total, progress and s == 0, f"pipeline ({micro_batches} micro-batches)")
    for step in range(total):
        bar.update()
        idx = batch_indices(n, step, 0, 1, global_batch, config.seed)
        micro = np.array_split(idx, micro_batches)
        # each in-flight micro-batch keeps its own activations: a shallow copy of the
        # stage's layers shares the parameter views but not the cached inputs
        replicas = [[copy.copy(layer) for layer in model.layers[start:stop]] for _ in micro]
        douts, loss = {}, 0.0
        summed[...] = 0
        for kind, m, _ in gpipe(s, comm.size, micro_batches):
            if kind == "F":
                part = micro[m]
                x = task.X_train[part].astype(model.params.dtype) if s == 0 else comm.recv(source=s - 1, tag=FORWARD)
                for layer in replicas[m]:
                    x = layer.forward(x)
                comm.compute(flops=flops(len(part)), label=f"forward micro-batch {m}")
                if s == last:  # d(mean loss over the batch) = sum over micro-batches of (n_m / N) d(mean over m)
                    part_loss, dlogits = nn.softmax_cross_entropy(x, task.y_train[part])
                    loss += part_loss * len(part) / len(idx)
                    douts[m] = dlogits * (len(part) / len(idx))
                else:
                    comm.send(x, s + 1, FORWARD, label=f"activations micro-batch {m}")
                continue
            dy = douts[m] if s == last else comm.recv(source=s + 1, tag=BACKWARD)
            for layer in reversed(replicas[m]):
                dy = layer.backward(dy)
            comm.compute(flops=2 * flops(len(micro[m])), label=f"backward micro-batch {m}")
            summed += model.grads[lo:hi]
            if s > 0:
                comm.send(dy, s - 1, BACKWARD, label=f"activation gradients micro-batch {m}")
        model.grads[lo:hi] = summed
        sgd.step()
        if s == last:
            losses.append({"rank": s, "step": step, "time_s": comm.clock, "loss": loss})
    bar.close()
    if s > 0:
        comm.send(model.params[lo:hi], 0, GATHER, label="gather weights for evaluation")
        return {"losses": losses, "layers": (start, stop)}
    for r in range(1, comm.size):
        params = comm.recv(source=r, tag=GATHER)
        model.params[hi : hi + params.size] = params
        hi += params.size
    return {
        "losses": losses,
        "layers": (start, stop),
        "params": model.params.copy(),
        "test_accuracy": accuracy(model, task.X_test, task.y_test),
        "bubble_fraction": fill_drain_bubble(comm.size, micro_batches),
    }
