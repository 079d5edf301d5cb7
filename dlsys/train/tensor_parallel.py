"""Tensor parallelism as Megatron-LM splits a transformer, and sequence parallelism on top.

Shoeybi et al. 2019 ("Megatron-LM", section 3, Figure 3): in each block the first weight
matrix is split by columns and the second by rows, so the part between them needs no
communication. MLP: Y = GELU(X A) with A = [A_1 .. A_t] by columns, rank i computes
Y_i = GELU(X A_i); then Z = Y B with B split by rows, Z = sum_i Y_i B_i: one all-reduce.
Attention is split by heads: rank i holds the Q, K, V columns of its a / t heads
(column-parallel) and the rows of the output projection that read them (row-parallel).
Two conjugate operators bracket each split region:

    f: forward identity,   backward all-reduce   (before the column-parallel matrix)
    g: forward all-reduce, backward identity     (after the row-parallel matrix)

so a block costs 2 all-reduces forward and 2 backward, each of the activations s b h.
Megatron: megatron/core/tensor_parallel/mappings.py (copy_to_tensor_model_parallel_region
= f, reduce_from_tensor_model_parallel_region = g), layers.py (ColumnParallelLinear,
RowParallelLinear: the row-parallel bias is added once, after the reduction).

Sequence parallelism (Korthikanti et al. 2022, section 4.2.2, Figure 5): outside the split
region (layer norms, dropout, residuals) each rank keeps only s / t of the sequence. Then f
becomes g = all-gather along the sequence (backward: reduce-scatter) and g becomes
g-bar = reduce-scatter (backward: all-gather): the same bytes as the all-reduce they
replace (a ring all-reduce is a reduce-scatter and an all-gather). As in Megatron
(LinearWithGradAccumulationAndAsyncCommunication in layers.py) the column-parallel layer
keeps only its input's sequence shard and all-gathers it again in backward for its weight
gradient: activations / t, one more all-gather per column-parallel layer in backward.
Layer norms and the row-parallel biases then see only their shard, so their gradients
are partial sums, all-reduced over the TP group after backward (Megatron:
finalize_model_grads, _allreduce_layernorm_grads).

What we do not split: the embedding, the final layer norm and the output layer stay
replicated (Megatron splits the vocabulary; VocabParallelEmbedding and the parallel cross
entropy are another lesson), and ``nn.transformer`` has no dropout, so there is no dropout
to place on the shards. Layouts: DP x TP on ``dlsys.comm.Grid`` (TP fastest-varying),
each TP group holding one replica, gradients averaged over the DP group after backward.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from math import sqrt
from types import SimpleNamespace

import numpy as np

from ..collectives import allgather, allreduce, closed_form, reduce_scatter
from ..comm import Grid, launch
from ..learn import nn
from ..machine.memory import Transformer, activation_bytes
from ..machine.topology import get_topology

# --- the layout ---------------------------------------------------------------------


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


# --- entering and leaving the split region: f and g (Shoeybi), or g and g-bar (Korthikanti)


class Region:
    """The four operators around a tensor-parallel region, on the TP ``group``.

    Tensors are (N, S, D); with sequence parallelism the ones outside the region are
    (N, S / t, D), rank i holding positions i S/t .. (i + 1) S/t - 1."""

    def __init__(self, group, sequence_parallel: bool = False):
        self.group, self.sequence_parallel = group, sequence_parallel

    def enter(self, x):
        """Into a column-parallel layer. f: identity; SP's g: all-gather the sequence."""
        if self.sequence_parallel:
            return self.gather(x)
        # BEGIN SOLUTION tensor_parallel_mlp
        return x
        # END SOLUTION

    def enter_backward(self, dx):
        """f backward: all-reduce (sum) the partial input gradients over the group; SP: reduce-scatter them."""
        if self.sequence_parallel:
            return self.reduce_scatter(dx)
        # BEGIN SOLUTION tensor_parallel_mlp
        return allreduce(self.group, dx)
        # END SOLUTION

    def leave(self, y):
        """Out of a row-parallel layer. g: all-reduce (sum) the partial sums over the group; SP's g-bar: reduce-scatter."""
        if self.sequence_parallel:
            return self.reduce_scatter(y)
        # BEGIN SOLUTION tensor_parallel_mlp
        return allreduce(self.group, y)
        # END SOLUTION

    def leave_backward(self, dy):
        """g backward: identity (every rank holds the whole dy); SP: all-gather the sequence."""
        if self.sequence_parallel:
            return self.gather(dy)
        # BEGIN SOLUTION tensor_parallel_mlp
        return dy
        # END SOLUTION

    def gather(self, x):
        """(N, S/t, D) -> (N, S, D): every rank's shard, in rank order along the sequence."""
        return np.concatenate(list(allgather(self.group, x)), axis=1)

    def reduce_scatter(self, x):
        """(N, S, D) partial sums -> (N, S/t, D): this rank's shard of the sum over the group.
        The ring cuts a flat buffer into t blocks; lay the sequence shards out as the blocks."""
        n, s, d = x.shape
        t = self.group.size
        blocks = np.ascontiguousarray(x.reshape(n, t, s // t, d).transpose(1, 0, 2, 3))
        return reduce_scatter(self.group, blocks).reshape(n, s // t, d)

    def compute(self, *products: tuple[np.ndarray, np.ndarray], label: str) -> None:
        """Charge the rank's clock for the matrix products ``a @ b`` it just computed:
        2 m k n FLOPs each (a: (..., m, k), b: (..., k, n), batched over a's leading axes),
        before the collective that needs them, so virtual time is compute plus what of the
        communication is exposed. Only the products are charged: they are the FLOPs that
        matter (Narayanan et al. 2021, section 5.1, count a transformer's matmuls alone)."""
        flops = sum(2 * a.size * b.shape[-1] for a, b in products)
        self.group.compute(flops=flops, label=label)

    def shard(self, x):
        """This rank's sequence shard of a replicated (N, S, D)."""
        s = x.shape[1] // self.group.size
        return x[:, self.group.rank * s : (self.group.rank + 1) * s]


# --- the split layers ----------------------------------------------------------------


class ColumnParallelLinear(nn.Layer):
    """Y_i = X A_i + b_i: this rank's columns of A (in, out / t) and of b.
    Forward enters the region; backward: dA_i = X^T dY_i, db_i = sums of dY_i,
    dX = leave region of (dY_i A_i^T) summed over ranks (f's all-reduce or a reduce-scatter)."""

    def __init__(self, region: Region):
        super().__init__()
        self.region = region  # its W and b: TensorParallelTransformer hands it this rank's part

    def forward(self, x):
        """Keep x for backward (with sequence parallelism only the shard: Korthikanti 4.2.2);
        return region.enter(x) A_i + b_i. (The given lines between the solution regions charge
        the products' FLOPs: leave the entered input in ``x`` and the output in ``y``; in
        backward, the weight in ``W`` and dX in ``dx``; in the row-parallel layer, ``partial``
        = Y_i B_i and ``dy``.)"""
        # BEGIN SOLUTION tensor_parallel_mlp
        self.x = x
        x = self.region.enter(x)
        y = x @ self.params["W"] + self.params["b"]
        # END SOLUTION
        self.region.compute((x, self.params["W"]), label="column-parallel forward")
        return y

    def backward(self, dy):
        """X = region.enter(self.x) again (sequence parallel: all-gathers the input); dA_i and
        db_i into ``self.grads`` (over every row of the flattened leading axes); return
        region.enter_backward(dY_i A_i^T)."""
        # BEGIN SOLUTION tensor_parallel_mlp
        x = self.region.enter(self.x)
        W = self.params["W"]
        self.grads["W"][...] = x.reshape(-1, W.shape[0]).T @ dy.reshape(-1, W.shape[1])
        self.grads["b"][...] = dy.reshape(-1, W.shape[1]).sum(axis=0)
        dx = dy @ W.T
        # END SOLUTION
        self.region.compute((dy, W.T), (dy, W.T), label="column-parallel backward")  # dX and dW: same FLOPs
        # BEGIN SOLUTION tensor_parallel_mlp
        return self.region.enter_backward(dx)
        # END SOLUTION

    def saved(self):
        return {"x": self.x}


class RowParallelLinear(nn.Layer):
    """Z = sum_i Y_i B_i + b: this rank's rows of B (in / t, out); b whole, added once after
    the reduction. dB_i = Y_i^T dZ, db = sums of dZ, dY_i = dZ B_i^T (no communication
    but g's backward: none, or the all-gather of dZ's shards)."""

    def __init__(self, region: Region):
        super().__init__()
        self.region = region  # its W and b: TensorParallelTransformer hands it this rank's part

    def forward(self, y):
        """Keep Y_i for backward; return region.leave(Y_i B_i) + b."""
        # BEGIN SOLUTION tensor_parallel_mlp
        self.x = y
        partial = y @ self.params["W"]
        # END SOLUTION
        self.region.compute((y, self.params["W"]), label="row-parallel forward")
        # BEGIN SOLUTION tensor_parallel_mlp
        return self.region.leave(partial) + self.params["b"]
        # END SOLUTION

    def backward(self, dz):
        """db from dZ as it comes (sequence parallel: a partial sum, all-reduced later); then
        dZ = region.leave_backward(dZ), dB_i into ``self.grads``; return dZ B_i^T."""
        # BEGIN SOLUTION tensor_parallel_mlp
        W = self.params["W"]
        self.grads["b"][...] = dz.reshape(-1, W.shape[1]).sum(axis=0)
        dz = self.region.leave_backward(dz)
        self.grads["W"][...] = self.x.reshape(-1, W.shape[0]).T @ dz.reshape(-1, W.shape[1])
        dy = dz @ W.T
        # END SOLUTION
        self.region.compute((dz, W.T), (dz, W.T), label="row-parallel backward")  # dY and dW: same FLOPs
        return dy

    def saved(self):
        return {"x": self.x}


class HeadsAttention(nn.Layer):
    """Causal attention of this rank's heads on its [Q_i K_i V_i] (N, S, 3 D/t): per head
    A = softmax(Q K^T / sqrt(d) + M), C = A V (nn.MultiHeadAttention's core, same backward)."""

    def __init__(self, heads: int, region: Region):
        super().__init__()
        self.heads, self.region = heads, region

    def _split(self, t):
        n, s, _ = t.shape
        return t.reshape(n, s, self.heads, -1).transpose(0, 2, 1, 3)

    def _merge(self, t):
        n, a, s, d = t.shape
        return t.transpose(0, 2, 1, 3).reshape(n, s, a * d)

    def forward(self, qkv):
        s = qkv.shape[1]
        self.q, self.k, self.v = (self._split(t) for t in np.split(qkv, 3, axis=-1))
        self.scale = 1.0 / sqrt(self.q.shape[-1])
        scores = self.q @ self.k.transpose(0, 1, 3, 2) * self.scale
        scores = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        self.attn = scores / scores.sum(axis=-1, keepdims=True)
        context = self.attn @ self.v
        self.region.compute((self.q, self.k.transpose(0, 1, 3, 2)), (self.attn, self.v), label="attention forward")
        return self._merge(context)

    def backward(self, dctx):
        dctx = self._split(dctx)
        dattn = dctx @ self.v.transpose(0, 1, 3, 2)
        dv = self.attn.transpose(0, 1, 3, 2) @ dctx
        dscores = self.attn * (dattn - (dattn * self.attn).sum(axis=-1, keepdims=True)) * self.scale
        dq, dk = dscores @ self.k, dscores.transpose(0, 1, 3, 2) @ self.q
        self.region.compute(
            (dctx, self.v.transpose(0, 1, 3, 2)),
            (self.attn.transpose(0, 1, 3, 2), dctx),
            (dscores, self.k),
            (dscores.transpose(0, 1, 3, 2), self.q),
            label="attention backward",
        )
        return np.concatenate([self._merge(t) for t in (dq, dk, dv)], axis=-1)

    def saved(self):
        return {"q": self.q, "k": self.k, "v": self.v, "attn": self.attn}


class ScatterSequence(nn.Layer):
    """Into the sequence-parallel part: forward keeps this rank's shard, backward all-gathers
    (Megatron: scatter_to_sequence_parallel_region)."""

    def __init__(self, region: Region):
        super().__init__()
        self.region = region

    def forward(self, x):
        return self.region.shard(x)

    def backward(self, dy):
        return self.region.gather(dy)


class GatherSequence(nn.Layer):
    """Out of the sequence-parallel part into the replicated output layer: forward all-gathers,
    backward keeps this rank's shard, as every rank holds the same whole gradient (Megatron:
    gather_from_sequence_parallel_region with tensor_parallel_output_grad=False)."""

    def __init__(self, region: Region):
        super().__init__()
        self.region = region

    def forward(self, x):
        return self.region.gather(x)

    def backward(self, dy):
        return self.region.shard(dy)


# --- a rank's part of the model --------------------------------------------------------

# How each tensor of nn.transformer is split (by its name in the layer): "columns", "rows",
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
    """This rank's part of ``nn.transformer``'s ``model`` (same weights): attention split by
    heads and the MLP column-then-row over the TP ``group``, the rest replicated.

    ``layers`` run in order as in ``nn.Sequential``; ``tensors`` maps every tensor of the
    unsplit model (``model.param_slices()`` names) to (layer, name, how it is split)."""

    def __init__(self, model: nn.Sequential, group, sequence_parallel: bool = False):
        region = Region(group, sequence_parallel)
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
        if sequence_parallel:
            self.layers.append(ScatterSequence(region))
        for block in model.layers[1:-2]:
            norm, *inner = block.layers
            prefix = names[block]
            split: list[nn.Layer] = [replicate(norm, f"{prefix}.0")]
            if isinstance(inner[0], nn.MultiHeadAttention):
                attn = inner[0]
                kind = "MultiHeadAttention"
                qkv = take(ColumnParallelLinear(region), attn, f"{prefix}.1", kind, {"Wqkv": "W", "bqkv": "b"})
                out = take(RowParallelLinear(region), attn, f"{prefix}.1", kind, {"Wo": "W", "bo": "b"})
                split += [qkv, HeadsAttention(attn.heads // t, region), out]
            else:
                fc1, _, fc2 = inner  # Linear, GELU, Linear
                split += [
                    take(ColumnParallelLinear(region), fc1, f"{prefix}.1", "mlp_in"),
                    nn.GELU(),
                    take(RowParallelLinear(region), fc2, f"{prefix}.3", "mlp_out"),
                ]
            self.layers.append(nn.Residual(*split))
        final_norm, head = model.layers[-2:]
        self.layers.append(replicate(final_norm, names[final_norm]))
        if sequence_parallel:
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
            partial = self.partial_grads()
            summed = allreduce(self.group, np.concatenate([g.ravel() for g in partial]))
            for g, part in zip(partial, np.split(summed, np.cumsum([g.size for g in partial])[:-1])):
                g[...] = part.reshape(g.shape)

    def partial_grads(self) -> list[np.ndarray]:
        """Under sequence parallelism, the gradients each rank holds only a part of: every
        layer norm's inside the blocks and after them, every row-parallel bias."""
        return [
            layer.grads[name]
            for layer, name, how in self.tensors.values()
            if how is None and isinstance(layer, (nn.LayerNorm, RowParallelLinear))
        ]

    def params(self) -> dict[str, np.ndarray]:
        return {key: layer.params[name] for key, (layer, name, _) in self.tensors.items()}

    def grads(self) -> dict[str, np.ndarray]:
        return {key: layer.grads[name] for key, (layer, name, _) in self.tensors.items()}

    def activation_nbytes(self, blocks_only: bool = False) -> int:
        """Bytes the last forward kept for backward (of the blocks only: Korthikanti's count)."""
        layers = [layer for layer in self.layers if isinstance(layer, nn.Residual)] if blocks_only else self.layers
        return sum(a.nbytes for layer in layers for a in layer.saved().values())


# --- what each group's collectives cost on a machine -------------------------------------


def group_costs(grid: Grid, nbytes: float, topology="gpu-cluster", algorithm: str = "ring") -> dict[str, dict]:
    """For the TP and the DP groups of ``grid`` placed on ``topology`` (rank r on node r):
    the link the group's ring crosses (its slowest, by bandwidth then latency), whether every
    hop is on that one link, and the closed-form all-reduce time of ``nbytes`` on it
    (``collectives.closed_form``, Patarasuk & Yuan's 2 (p-1) (alpha + n/p beta) for the
    ring). With every hop on one link the form is the emulation's time exactly; a ring that
    mixes links is charged as if every hop were the slowest."""
    network = get_topology(topology)
    network.check_nodes(grid.world_size, "the world size")
    costs = {}
    for axis, members in (("tp", grid.tp_members(0)), ("dp", grid.dp_members(0))):
        ring = list(zip(members, members[1:] + members[:1])) if len(members) > 1 else []
        hops = [network.link_between(a, b) for a, b in ring]
        link = max(hops, key=lambda h: (h.beta_s_per_byte, h.alpha_s), default=network.link)
        costs[axis] = {
            "ranks": len(members),
            "link": link.name,
            "one_link": len(set(hops)) <= 1,
            "allreduce_s": closed_form("allreduce", algorithm, len(members), nbytes, link),
        }
    return costs


# --- the rank program and the unsplit reference ------------------------------------------


@dataclass(frozen=True)
class TPConfig:
    """A small causal transformer (``nn.transformer``) trained for ``steps`` SGD steps on a
    fixed random batch of ``batch`` sequences, over dp x tp ranks."""

    tp: int = 2
    dp: int = 1
    sequence_parallel: bool = False
    vocab: int = 11
    seq_len: int = 8
    d_model: int = 16
    heads: int = 4
    layers: int = 2
    d_ff: int = 64
    batch: int = 4
    steps: int = 1
    lr: float = 0.1
    seed: int = 0
    dtype: str = "float64"

    def check(self) -> Grid:
        """The grid, or a ValueError naming the argument and its accepted values."""
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype!r}")
        for name in ("dp", "vocab", "seq_len", "d_model", "heads", "layers", "d_ff", "batch", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)}")
        if self.d_model % self.heads:
            raise ValueError(f"heads must divide d_model = {self.d_model}, got heads = {self.heads}")
        if self.batch % self.dp:
            raise ValueError(
                f"dp must divide the batch {self.batch}: one of "
                f"{[k for k in range(1, self.batch + 1) if self.batch % k == 0]}, got {self.dp}"
            )
        return check_layout(
            self.dp * self.tp, self.tp, self.heads, self.d_model, self.d_ff, self.seq_len, self.sequence_parallel
        )

    def model(self) -> nn.Sequential:
        return nn.transformer(
            self.vocab,
            self.seq_len,
            self.d_model,
            self.heads,
            self.layers,
            self.d_ff,
            seed=self.seed,
            dtype=np.dtype(self.dtype),
        )

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, next tokens to predict), both (batch, seq_len)."""
        rng = np.random.default_rng(self.seed)
        tokens = rng.integers(0, self.vocab, (self.batch, self.seq_len + 1))
        return tokens[:, :-1].astype(self.dtype), tokens[:, 1:]

    def shape(self) -> Transformer:
        """Korthikanti's shapes for one rank's micro-batch (batch / dp sequences)."""
        return Transformer(self.layers, self.d_model, self.heads, self.seq_len, self.batch // self.dp)


def loss_and_grad(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy over every position, and dloss/dlogits in the logits' shape."""
    loss, dlogits = nn.softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.ravel())
    return loss, dlogits.reshape(logits.shape)


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
            flat = allreduce(dp_group, np.concatenate([g.ravel() for g in grads.values()]), op="mean")
            for g, part in zip(grads.values(), np.split(flat, np.cumsum([g.size for g in grads.values()])[:-1])):
                g[...] = part.reshape(g.shape)
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


def activation_model(config: TPConfig) -> int:
    """Korthikanti's count for one rank's blocks without dropout, plus the layer norms' 1/std
    per row that ours keep (2 s b elements a layer; / t with sequence parallelism)."""
    e = np.dtype(config.dtype).itemsize
    shape = config.shape()
    rstd = config.layers * 2 * shape.seq_len * shape.batch * e // (config.tp if config.sequence_parallel else 1)
    return activation_bytes(shape, config.tp, config.sequence_parallel, element_nbytes=e, dropout=False) + rstd


def collectives_per_step(config: TPConfig) -> dict[str, int]:
    """How many collectives one rank of a TP group runs in one step, by direction and kind.

    Tensor parallelism: 2 all-reduces a layer forward (g after attention and after the MLP)
    and 2 backward (f before them). Sequence parallelism: forward 2 all-gathers and 2
    reduce-scatters a layer; backward the 2 all-gathers of g-bar's backward, 2 more that
    gather the column-parallel inputs again, and 2 reduce-scatters; outside the layers one
    all-gather into the output layer, one in the embedding's backward, and one all-reduce of
    the layer norms' and row-parallel biases' partial gradients. tp = 1: none."""
    L = config.layers
    if config.tp == 1:
        return {}
    if not config.sequence_parallel:
        return {"forward allreduce": 2 * L, "backward allreduce": 2 * L}
    return {
        "forward allgather": 2 * L + 1,
        "forward reduce_scatter": 2 * L,
        "backward allgather": 4 * L + 1,
        "backward reduce_scatter": 2 * L,
        "backward allreduce": 1,
    }


def bytes_per_step(config: TPConfig) -> dict[str, int]:
    """Bytes on the wire in one step, summed over every rank, by group: ring collectives of
    n bytes over p ranks move 2 (p - 1) n (all-reduce) and (p - 1) n (reduce-scatter of n,
    all-gather into n) in all. The TP collectives carry the activations n = (b/dp) s h e
    (all-gather and reduce-scatter: the whole sequence), the SP all-reduce the partial
    gradients; the DP all-reduce every rank's gradients (its 1/t of the split tensors)."""
    grid, e = config.check(), np.dtype(config.dtype).itemsize
    t, d, h = config.tp, config.dp, config.d_model
    n = config.batch // d * config.seq_len * h * e
    partial = (config.layers * (2 * 2 * h + 2 * h) + 2 * h) * e  # SP: 2 layer norms, 2 biases a layer; 1 norm
    tp_bytes = 0
    for what, count in collectives_per_step(config).items():
        kind = what.split()[1]
        size = partial if config.sequence_parallel and what == "backward allreduce" else n
        tp_bytes += count * (2 if kind == "allreduce" else 1) * (t - 1) * size
    rank_params = sum(p.size for p in _rank_shapes(config)) * e
    return {"tp": d * tp_bytes, "dp": grid.tp * 2 * (d - 1) * rank_params}


def _rank_shapes(config: TPConfig) -> list[np.ndarray]:
    """One TP rank's tensors (rank 0's: every rank's parts are the same size). Splitting
    needs only the group's rank and size; no collective runs, so a stand-in group will do."""
    return list(TensorParallelTransformer(config.model(), SimpleNamespace(rank=0, size=config.tp)).params().values())
