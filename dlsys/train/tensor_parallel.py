"""Tensor parallelism as Megatron-LM splits a transformer, and sequence parallelism on top:
a rank's part of the model, the configuration, the rank program and its launch.

The split layers and Megatron's f and g are in ``tensor_parallel_layers`` (Shoeybi et al.
2019; Korthikanti et al. 2022 for sequence parallelism), the closed-form costs in
``tensor_parallel_costs``. Here ``TensorParallelTransformer`` hands each split layer this
rank's part of the unsplit model's weights (``SPLIT`` says how each tensor is cut): per block
the attention's Q, K, V by heads (column-parallel) and its output projection by rows, the
MLP's first matrix by columns and its second by rows.

Under sequence parallelism the layer norms and the row-parallel biases see only their shard,
so their gradients are partial sums, all-reduced over the TP group after backward (Megatron:
finalize_model_grads, _allreduce_layernorm_grads).

What we do not split: the embedding, the final layer norm and the output layer stay
replicated (Megatron splits the vocabulary; VocabParallelEmbedding and the parallel cross
entropy are another lesson), and ``learn.transformer`` has no dropout, so there is no dropout
to place on the shards. Layouts: DP x TP on ``dlsys.comm.Grid`` (TP fastest-varying),
each TP group holding one replica, gradients averaged over the DP group after backward.
"""

from __future__ import annotations

import copy
from dataclasses import KW_ONLY, dataclass
from typing import cast

import numpy as np

from ..collectives.dispatch import allreduce
from ..comm.group import Grid
from ..comm.launch import launch
from ..learn import nn
from ..learn.transformer import GELU, LayerNorm, MultiHeadAttention, Residual
from ..machine.memory import Transformer
from .tensor_parallel_layers import (
    ColumnParallelLinear,
    GatherSequence,
    HeadsAttention,
    Region,
    RowParallelLinear,
    ScatterSequence,
    SequenceRegion,
)
from .transformer_config import TransformerConfig, loss_and_grad


def check_layout(
    world_size: int, tp: int, heads: int, d_model: int, d_ff: int, seq_len: int, sequence_parallel: bool = False
) -> Grid:
    """The DP x TP grid of ``world_size`` ranks, or a ValueError listing the accepted TP
    degrees: tp must divide the world size, the heads, d_model and d_ff (and, with
    sequence parallelism, the sequence length)."""
    sizes = {"world size": world_size, "heads": heads, "d_model": d_model, "d_ff": d_ff}
    if sequence_parallel:
        sizes["seq_len"] = seq_len
    accepted = [k for k in range(1, world_size + 1) if all(n % k == 0 for n in sizes.values())]
    if isinstance(tp, bool) or not isinstance(tp, int) or tp not in accepted:
        what = ", ".join(f"{name} = {n}" for name, n in sizes.items())
        raise ValueError(f"tp must divide {what}: one of {accepted}, got {tp!r}")
    return Grid.of(world_size, tp)


def allreduce_in_place(group, arrays: list[np.ndarray], op: str = "sum") -> None:
    """All-reduce ``arrays`` over ``group`` as one flat buffer (one collective, not one per
    tensor) and write each result back into its array."""
    flat = allreduce(group, np.concatenate([a.ravel() for a in arrays]), op=op)
    for a, part in zip(arrays, np.split(flat, np.cumsum([a.size for a in arrays])[:-1])):
        a[...] = part.reshape(a.shape)


# --- a rank's part of the model --------------------------------------------------------

# How each tensor of learn.transformer's model is split (by its name in the layer): "columns", "rows",
# "qkv" (the columns of this rank's heads in each of Q, K and V); anything else is replicated.
SPLIT = {
    ("MultiHeadAttention", "Wqkv"): "qkv",
    ("MultiHeadAttention", "bqkv"): "qkv",
    ("MultiHeadAttention", "Wo"): "rows",
    ("mlp_in", "W"): "columns",
    ("mlp_in", "b"): "columns",
    ("mlp_out", "W"): "rows",
}


def shard_of(full: np.ndarray, how: str | None, i: int, t: int) -> np.ndarray:
    """Rank i's part (a copy) of a tensor of the unsplit model."""
    if how == "columns":
        return np.split(full, t, axis=-1)[i].copy()
    if how == "rows":
        return np.split(full, t, axis=0)[i].copy()
    if how == "qkv":
        return np.concatenate([np.split(part, t, axis=-1)[i] for part in np.split(full, 3, axis=-1)], axis=-1)
    return full.copy()


def unshard(parts: list[np.ndarray], how: str | None) -> np.ndarray:
    """The unsplit tensor from every TP rank's part, in rank order (``shard_of`` undone)."""
    if how == "columns":
        return np.concatenate(parts, axis=-1)
    if how == "rows":
        return np.concatenate(parts, axis=0)
    if how == "qkv":
        return np.concatenate(
            [np.concatenate([np.split(p, 3, axis=-1)[k] for p in parts], axis=-1) for k in range(3)], axis=-1
        )
    return parts[0]


class TensorParallelTransformer:
    """This rank's part of ``learn.transformer``'s ``model`` (same weights): attention split by
    heads and the MLP column-then-row over the TP ``group``, the rest replicated.

    ``layers`` run in order as in ``nn.Sequential``; ``tensors`` maps every tensor of the
    unsplit model (``model.param_slices()`` names) to (layer, name, how it is split)."""

    def __init__(self, model: nn.Sequential, group, sequence_parallel: bool = False):
        region = SequenceRegion(group) if sequence_parallel else Region(group)
        i, t = group.rank, group.size
        self.tensors: dict[str, tuple[nn.Layer, str, str | None]] = {}

        def take(layer: nn.Layer, full: nn.Layer, prefix: str, kind: str, names: dict | None = None) -> nn.Layer:
            """Give ``layer`` this rank's part of ``full``'s tensors (``names``: theirs -> its)."""
            for name, local in (names or {name: name for name in full.params}).items():
                how = SPLIT.get((kind, name))
                layer.params[local] = shard_of(full.params[name], how, i, t)
                layer.grads[local] = np.zeros_like(layer.params[local])
                self.tensors[f"{prefix}.{name}"] = (layer, local, how)
            return layer

        def replicate(full: nn.Layer, prefix: str) -> nn.Layer:
            """A layer of the unsplit model with its own copy of the tensors."""
            layer = copy.copy(full)
            layer.params, layer.grads = {}, {}
            return take(layer, full, prefix, type(full).__name__)

        names = dict(zip(model.layers, model.names))
        self.layers: list[nn.Layer] = [replicate(model.layers[0], names[model.layers[0]])]
        if isinstance(region, SequenceRegion):
            self.layers.append(ScatterSequence(region))
        for block in cast(list[Residual], model.layers[1:-2]):
            norm, *inner = block.layers
            prefix = names[block]
            split: list[nn.Layer] = [replicate(norm, f"{prefix}.0")]
            if isinstance(inner[0], MultiHeadAttention):
                attn = inner[0]
                kind = "MultiHeadAttention"
                qkv = take(ColumnParallelLinear(region), attn, f"{prefix}.1", kind, {"Wqkv": "W", "bqkv": "b"})
                out = take(RowParallelLinear(region), attn, f"{prefix}.1", kind, {"Wo": "W", "bo": "b"})
                split += [qkv, HeadsAttention(attn.heads // t, region), out]
            else:
                fc1, _, fc2 = inner  # Linear, GELU, Linear
                split += [
                    take(ColumnParallelLinear(region), fc1, f"{prefix}.1", "mlp_in"),
                    GELU(),
                    take(RowParallelLinear(region), fc2, f"{prefix}.3", "mlp_out"),
                ]
            self.layers.append(Residual(*split))
        final_norm, head = model.layers[-2:]
        self.layers.append(replicate(final_norm, names[final_norm]))
        if isinstance(region, SequenceRegion):
            self.layers.append(GatherSequence(region))
        self.layers.append(replicate(head, names[head]))
        self.group, self.sequence_parallel = group, sequence_parallel

    def forward(self, tokens: np.ndarray) -> np.ndarray:
        x = tokens
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, dlogits: np.ndarray) -> None:
        dy = dlogits
        for layer in reversed(self.layers):
            dy = layer.backward(dy)
        if self.sequence_parallel:  # layer norms and row-parallel biases saw only their shard
            allreduce_in_place(self.group, self.partial_grads())

    def partial_grads(self) -> list[np.ndarray]:
        """Under sequence parallelism, the gradients each rank holds only a part of: every
        layer norm's inside the blocks and after them, every row-parallel bias."""
        return [
            layer.grads[name]
            for layer, name, how in self.tensors.values()
            if how is None and isinstance(layer, (LayerNorm, RowParallelLinear))
        ]

    def params(self) -> dict[str, np.ndarray]:
        return {key: layer.params[name] for key, (layer, name, _) in self.tensors.items()}

    def grads(self) -> dict[str, np.ndarray]:
        return {key: layer.grads[name] for key, (layer, name, _) in self.tensors.items()}

    def activation_nbytes(self, blocks_only: bool = False) -> int:
        """Bytes the last forward kept for backward (of the blocks only: Korthikanti's count)."""
        layers = [layer for layer in self.layers if isinstance(layer, Residual)] if blocks_only else self.layers
        return sum(a.nbytes for layer in layers for a in layer.saved().values())


@dataclass(frozen=True)
class TPConfig(TransformerConfig):
    """The transformer (``TransformerConfig``, 2 layers, d_ff 64) trained for ``steps`` SGD
    steps on a fixed random batch of ``batch`` sequences, over dp x tp ranks."""

    tp: int = 2
    dp: int = 1
    sequence_parallel: bool = False
    batch: int = 4
    _: KW_ONLY
    layers: int = 2
    d_ff: int | None = 64

    def check(self) -> Grid:
        """The grid, or a ValueError naming the argument and its accepted values."""
        self.check_model(("dp", "batch"))
        if self.batch % self.dp:
            raise ValueError(
                f"dp must divide the batch {self.batch}: one of "
                f"{[k for k in range(1, self.batch + 1) if self.batch % k == 0]}, got {self.dp}"
            )
        return check_layout(
            self.dp * self.tp, self.tp, self.heads, self.d_model, self.ffn, self.seq_len, self.sequence_parallel
        )

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, next tokens to predict), both (batch, seq_len)."""
        rng = np.random.default_rng(self.seed)
        tokens = rng.integers(0, self.vocab, (self.batch, self.seq_len + 1))
        return tokens[:, :-1].astype(self.dtype), tokens[:, 1:]

    def shape(self) -> Transformer:
        """Korthikanti's shapes for one rank's micro-batch (batch / dp sequences)."""
        return Transformer(self.layers, self.d_model, self.heads, self.seq_len, self.batch // self.dp)


def unsplit_run(config: TPConfig) -> dict:
    """The reference: the whole model on one rank, the whole batch. Returns the first
    step's logits, loss and gradients (by tensor name) and the weights after ``steps``."""
    model, (tokens, targets) = config.model(), config.data()
    names = [s.name for s in model.param_slices()]
    result: dict = {}
    for step in range(config.steps):
        logits = model.forward(tokens)
        loss, dlogits = loss_and_grad(logits, targets)
        model.backward(dlogits)
        if step == 0:
            grads = [g.copy() for layer in model.layers for g in layer.grads.values()]
            result = {"logits": logits.copy(), "loss": loss, "grads": dict(zip(names, grads))}
        model.params -= config.lr * model.grads
    params = [p.copy() for layer in model.layers for p in layer.params.values()]
    return {**result, "params": dict(zip(names, params))}


def tensor_parallel_program(comm, config: TPConfig) -> dict:
    """One rank of a DP x TP run: its TP group holds one replica split Megatron's way, its
    DP group the same part of every replica. Per step: forward, loss, backward (the TP
    collectives inside), all-reduce the gradients over DP (mean), SGD.

    Returns the first step's logits, loss and this rank's gradients, its weights after the
    last step (by unsplit tensor name) and its measured bytes."""
    grid = config.check()
    dp_group, tp_group = grid.groups(comm)
    model = TensorParallelTransformer(config.model(), tp_group, config.sequence_parallel)
    tokens, targets = config.data()
    rows = slice(dp_group.rank * config.batch // grid.dp, (dp_group.rank + 1) * config.batch // grid.dp)
    tokens, targets = tokens[rows], targets[rows]
    params, grads = model.params(), model.grads()
    ledger = comm.memory
    ledger.alloc("parameters", sum(p.nbytes for p in params.values()), "params")
    ledger.alloc("gradients", sum(g.nbytes for g in grads.values()), "grads")
    result: dict = {}
    for step in range(config.steps):
        logits = model.forward(tokens)
        activations = model.activation_nbytes()
        ledger.alloc("activations", activations, f"forward {step}")
        loss, dlogits = loss_and_grad(logits, targets)
        model.backward(dlogits)
        ledger.free(f"forward {step}")
        if grid.dp > 1:
            allreduce_in_place(dp_group, list(grads.values()), op="mean")
        if step == 0:
            result = {
                "logits": logits.copy(),
                "loss": loss,
                "grads": {k: g.copy() for k, g in grads.items()},
                "activation_nbytes": activations,
                "block_activation_nbytes": model.activation_nbytes(True),
                "bytes_sent": comm.bytes_sent,
            }
        for key in params:
            params[key] -= config.lr * grads[key]
    how = {key: how for key, (_, _, how) in model.tensors.items()}
    return {
        **result,
        "params": {k: p.copy() for k, p in params.items()},
        "how": how,
        "parameter_nbytes": ledger.peak_by_kind["parameters"],
        "coords": grid.coords(comm.rank),
    }


def run(config: TPConfig, backend: str = "threads", world_size: int | None = None, **launch_options):
    """Check the layout (before any rank starts), then run ``tensor_parallel_program`` on
    dp x tp ranks; a ``world_size`` given must be that product."""
    grid = config.check()
    if world_size is not None and world_size != grid.world_size:
        raise ValueError(f"world_size must be dp x tp = {grid.dp} x {grid.tp} = {grid.world_size}, got {world_size}")
    return launch(tensor_parallel_program, grid.world_size, backend, args=(config,), **launch_options)


def gather_tensors(values: list[dict], grid: Grid, key: str) -> dict[str, np.ndarray]:
    """The unsplit tensors (``key`` = "grads" or "params") of DP replica 0 from its TP ranks' results."""
    parts = [values[grid.rank_of(0, t)] for t in range(grid.tp)]
    return {name: unshard([p[key][name] for p in parts], how) for name, how in parts[0]["how"].items()}
