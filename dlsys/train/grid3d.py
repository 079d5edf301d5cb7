"""DP x TP x PP: the three layouts of one run combined on ``comm.Grid`` (issue 27).

``Grid(dp, tp, pp)`` places rank r at stage s, data-parallel copy d and tensor-parallel
index t (Megatron's order: tp fastest, then dp, then pp). Each rank holds its TP part
(``tensor_parallel.TensorParallelTransformer``, Megatron's split) of the chunks of its
stage (``pipeline.chunk_layers``, virtual stage c pp + s on stage s) and runs the
pipeline schedule's actions (``pipeline.SCHEDULES``) on micro-batches of its copy's data:

    for each action (F i, or B i) of stage s's list:
        F: receive activations from the same (d, t) of the previous stage (or embed the tokens);
           forward through the chunk (TP all-reduces inside); send on (or compute the loss)
        B: receive their gradient from the next stage (or the loss's); backward through the
           chunk (TP all-reduces inside); keep the chunk's gradients of micro-batch i; send back
    sum the gradients over micro-batches 0..m-1, all-reduce them over the DP group, SGD

The batch is dp m micro-batches: copy d takes micro-batches d m .. d m + m - 1, and every
micro-batch's loss is divided by dp m, so the DP sum is the whole batch's mean gradient,
as on one rank (``pipeline.single_rank_run`` of ``config.reference()``). Gradients then
differ from one rank's only in the order sums are taken (TP's partial sums, DP's ring):
the tests hold the weights within float64 rounding.

Memory: each rank's ``comm.memory`` ledger holds its parameters and gradients and, per
(micro-batch, chunk) in flight, the activations its layers keep for backward; the peak is
what ``planner.memory`` predicts for the layout (tests/train/test_grid3d.py). Zero bubble's
split backward is not offered: the split layers compute their weight gradient with their
input gradient (Megatron's ``ColumnParallelLinear`` does too).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields

import numpy as np

from ..collectives.dispatch import allreduce
from ..comm.group import Grid
from ..comm.launch import launch
from .pipeline import (
    SCHEDULES,
    PipelineConfig,
    Schedule,
    check_schedule,
    chunk_layers,
    keep_activations,
    label,
    span,
    tag,
)
from .tensor_parallel import TensorParallelTransformer, check_layout, unshard
from .transformer_config import TransformerConfig, loss_and_grad

UNSPLIT = tuple(name for name, entry in SCHEDULES.items() if not entry.split_backward)


@dataclass(frozen=True)
class GridConfig(TransformerConfig):
    """The transformer (``TransformerConfig``) over dp x tp x pp ranks: ``micro_batches``
    micro-batches of ``micro_batch_size`` sequences per data-parallel copy a step, ``steps``
    SGD steps."""

    dp: int = 2
    tp: int = 2
    pp: int = 2
    schedule: str = "1f1b"
    micro_batches: int = 4
    chunks: int = 1
    micro_batch_size: int = 2

    def reference(self) -> PipelineConfig:
        """The same model, batch and step on one pipeline of dp m micro-batches: its
        ``single_rank_run`` is what this run must equal."""
        shared = {f.name: getattr(self, f.name) for f in fields(PipelineConfig) if hasattr(self, f.name)}
        return PipelineConfig(**{**shared, "stages": self.pp, "micro_batches": self.dp * self.micro_batches})

    def check(self) -> tuple[Grid, Schedule]:
        """The grid and the schedule, or a ValueError naming the argument and its accepted
        range, before any rank starts."""
        self.check_model(("dp", "tp", "pp", "micro_batch_size"))
        if self.schedule in SCHEDULES and self.schedule not in UNSPLIT:
            raise ValueError(
                f"schedule must be one of {', '.join(UNSPLIT)} for a DP x TP x PP run (the split "
                f"layers compute weight and input gradients together), got {self.schedule!r}"
            )
        entry = check_schedule(self.schedule, self.pp, self.micro_batches, self.chunks, self.layers)
        check_layout(self.dp * self.tp * self.pp, self.tp, self.heads, self.d_model, self.ffn, self.seq_len)
        return Grid(self.dp, self.tp, self.pp), entry


def stage_tensors(
    model: TensorParallelTransformer, ranges: list[tuple[int, int]], stages: int, stage: int, chunks: int
):
    """Chunk c -> the names of the tensors of its layers (virtual stage c p + s), and every
    such tensor of the stage -> (layer, name, how it is split), ``model.tensors``' entries."""
    index = {}  # each tensor's layer in model.layers (the unsplit model's without sequence parallelism)
    for key, (layer, _, _) in model.tensors.items():
        index[key] = next(
            i for i, top in enumerate(model.layers) if layer is top or layer in getattr(top, "layers", ())
        )
    keys = {
        c: [key for key in model.tensors if ranges[c * stages + stage][0] <= index[key] < ranges[c * stages + stage][1]]
        for c in range(chunks)
    }
    return keys, {key: model.tensors[key] for c in range(chunks) for key in keys[c]}


def sgd_step(dp_group, params: dict, kept: dict, keys: dict, micro_batches: int, lr: float) -> None:
    """Sum each tensor's gradient over micro-batches 0..m-1 (whatever the schedule's order),
    all-reduce the sums over the DP group, and take an SGD step of rate ``lr``."""
    summed = {}
    for c, names in keys.items():
        for key in names:
            summed[key] = sum((kept[c, i][key] for i in range(1, micro_batches)), kept[c, 0][key].copy())
    flat = np.concatenate([g.ravel() for g in summed.values()])
    if dp_group.size > 1:
        flat = allreduce(dp_group, flat)
    for (key, g), part in zip(summed.items(), np.split(flat, np.cumsum([g.size for g in summed.values()])[:-1])):
        params[key] -= lr * part.reshape(g.shape)


def grid_program(comm, config: GridConfig) -> dict:
    """One rank of the DP x TP x PP run (module docstring). Returns its stage and
    coordinates, its chunks' weights after the last step (by tensor name, its TP part, and
    how each is split), the loss of each step (last stage: its copy's share), its action
    spans and its ledger's peaks by kind."""
    grid, entry = config.check()
    s, (d, _) = grid.stage(comm.rank), grid.coords(comm.rank)
    p, v, m = config.pp, config.chunks, config.micro_batches
    pipe, (dp_group, tp_group) = grid.pp_members(comm.rank), grid.groups(comm)
    reference = config.reference()
    full = reference.model()
    model = TensorParallelTransformer(full, tp_group)
    ranges, last = chunk_layers(full, p * v), p * v - 1
    keys, tensors = stage_tensors(model, ranges, p, s, v)
    params = {key: layer.params[name] for key, (layer, name, _) in tensors.items()}
    grads = {key: layer.grads[name] for key, (layer, name, _) in tensors.items()}
    # each (chunk, micro-batch) keeps its own activations: a copy of the chunk's layers
    # sharing the weights, the gradients and the TP group (the memo), not what forward caches
    shared = {id(a): a for a in (*params.values(), *grads.values())}
    shared[id(tp_group)] = tp_group
    replicas = {
        (c, i): copy.deepcopy(model.layers[slice(*ranges[c * p + s])], dict(shared)) for c in range(v) for i in range(m)
    }
    ledger = comm.memory
    ledger.alloc("parameters", sum(a.nbytes for a in params.values()), "parameters")
    ledger.alloc("gradients", sum(a.nbytes for a in grads.values()), "gradients")
    actions, losses, records = entry.actions(s, p, m, v), [], []
    for step in range(config.steps):
        kept, dlogits, loss = {}, {}, 0.0
        for action in actions:
            kind, i, c = action
            k, layers, name = c * p + s, replicas[c, i], label(action, v)
            begin = comm.clock
            if kind == "F":
                tokens, targets = reference.batch(step, d * m + i)
                x = tokens if k == 0 else comm.recv(source=pipe[(k - 1) % p], tag=tag(i, k - 1, p * v, False))
                for layer in layers:
                    x = layer.forward(x)
                keep_activations(ledger, layers, i, c)
                if k == last:
                    part, dlogits[i] = loss_and_grad(x, targets, reference.micro_batches)
                    loss += part
                else:
                    comm.send(x, pipe[(k + 1) % p], tag(i, k, p * v, False), label=f"activations {name}")
            else:
                dy = (
                    dlogits.pop(i) if k == last else comm.recv(source=pipe[(k + 1) % p], tag=tag(i, k + 1, p * v, True))
                )
                for layer in reversed(layers):
                    dy = layer.backward(dy)
                kept[c, i] = {key: grads[key].copy() for key in keys[c]}
                ledger.free(f"micro-batch {i} chunk {c}")
                if k > 0:
                    comm.send(dy, pipe[(k - 1) % p], tag(i, k, p * v, True), label=f"activation gradients {name}")
            records.append({"step": step, "rank": comm.rank, **span(s, action, begin, comm.clock)})
        sgd_step(dp_group, params, kept, keys, m, config.lr)
        if s == p - 1:
            losses.append(loss)
    return {
        "stage": s,
        "coords": grid.coords(comm.rank),
        "losses": losses,
        "actions": records,
        "params": {key: a.copy() for key, a in params.items()},
        "how": {key: how for key, (_, _, how) in tensors.items()},
        "peak_by_kind": dict(ledger.peak_by_kind),
    }


def run(config: GridConfig, backend: str = "threads", world_size: int | None = None, **launch_options):
    """Check the configuration (before any rank starts), then run ``grid_program`` on
    dp x tp x pp ranks; a ``world_size`` given must be that product."""
    grid, _ = config.check()
    if world_size is not None and world_size != grid.world_size:
        raise ValueError(
            f"world_size must be dp x tp x pp = {grid.dp} x {grid.tp} x {grid.pp} = {grid.world_size}, got {world_size}"
        )
    return launch(grid_program, grid.world_size, backend, args=(config,), **launch_options)


def gather_params(values: list[dict], config: GridConfig) -> np.ndarray:
    """The flat weights of the unsplit transformer (``nn.Sequential.params`` order) from
    data-parallel copy 0's ranks: each tensor from its stage's TP parts."""
    grid, full = Grid(config.dp, config.tp, config.pp), config.reference().model()
    tensors: dict[str, np.ndarray] = {}
    for s in range(config.pp):
        parts = [values[grid.rank_of(0, t, s)] for t in range(config.tp)]
        for key, how in parts[0]["how"].items():
            tensors[key] = unshard([part["params"][key] for part in parts], how)
    return np.concatenate([tensors[sl.name].ravel() for sl in full.param_slices()])
