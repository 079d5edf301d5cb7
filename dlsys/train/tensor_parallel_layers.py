"""Megatron-LM's tensor-parallel layers: the column- and row-parallel matrices and the
operators that enter and leave the split region between them.

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

Sequence parallelism (Korthikanti et al. 2022, section 4.2.2, Figure 5), ``SequenceRegion``:
outside the split region (layer norms, dropout, residuals) each rank keeps only s / t of the
sequence. Then f becomes g = all-gather along the sequence (backward: reduce-scatter) and g
becomes g-bar = reduce-scatter (backward: all-gather): the same bytes as the all-reduce they
replace (a ring all-reduce is a reduce-scatter and an all-gather). As in Megatron
(LinearWithGradAccumulationAndAsyncCommunication in layers.py) the column-parallel layer
keeps only its input's sequence shard and all-gathers it again in backward for its weight
gradient: activations / t, one more all-gather per column-parallel layer in backward.

Every matrix product charges the rank's clock through ``matmul``, before the collective that
needs it, so virtual time is compute plus what of the communication is exposed.
"""

from __future__ import annotations

from math import sqrt

import numpy as np

from ..collectives.dispatch import allgather, allreduce, reduce_scatter
from ..learn import nn


def matmul_flops(*pairs: tuple[np.ndarray, np.ndarray]) -> int:
    """2 m k n FLOPs for each product a @ b (a: (..., m, k), b: (..., k, n), batched over a's
    leading axes). Only the products are charged: they are the FLOPs that matter (Narayanan
    et al. 2021, section 5.1, count a transformer's matmuls alone)."""
    return sum(2 * a.size * b.shape[-1] for a, b in pairs)


def matmuls(group, label: str, *pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """The products a @ b of ``pairs``, their FLOPs charged to this rank's clock as one span."""
    group.compute(flops=matmul_flops(*pairs), label=label)
    return [a @ b for a, b in pairs]


def matmul(group, a: np.ndarray, b: np.ndarray, label: str) -> np.ndarray:
    """a @ b, its 2 m k n FLOPs charged to this rank's clock."""
    return matmuls(group, label, (a, b))[0]


class Region:
    """Megatron's f and g on the TP ``group``, around a split region: tensors (N, S, D)."""

    def __init__(self, group):
        self.group = group

    def enter(self, x):
        """Into a column-parallel layer. f: identity."""
        # BEGIN SOLUTION tensor_parallel_mlp
        return x
        # END SOLUTION

    def enter_backward(self, dx):
        """f backward: all-reduce (sum) the partial input gradients over the group."""
        # BEGIN SOLUTION tensor_parallel_mlp
        return allreduce(self.group, dx)
        # END SOLUTION

    def leave(self, y):
        """Out of a row-parallel layer. g: all-reduce (sum) the partial sums over the group."""
        # BEGIN SOLUTION tensor_parallel_mlp
        return allreduce(self.group, y)
        # END SOLUTION

    def leave_backward(self, dy):
        """g backward: identity (every rank holds the whole dy)."""
        # BEGIN SOLUTION tensor_parallel_mlp
        return dy
        # END SOLUTION


class SequenceRegion(Region):
    """Korthikanti's g and g-bar: outside the region tensors are (N, S / t, D), rank i
    holding positions i S/t .. (i + 1) S/t - 1."""

    def enter(self, x):
        """g: all-gather the sequence."""
        return self.gather(x)

    def enter_backward(self, dx):
        """g backward: reduce-scatter the partial input gradients."""
        return self.reduce_scatter(dx)

    def leave(self, y):
        """g-bar: reduce-scatter the partial sums."""
        return self.reduce_scatter(y)

    def leave_backward(self, dy):
        """g-bar backward: all-gather the sequence."""
        return self.gather(dy)

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

    def shard(self, x):
        """This rank's sequence shard of a replicated (N, S, D)."""
        s = x.shape[1] // self.group.size
        return x[:, self.group.rank * s : (self.group.rank + 1) * s]


class ColumnParallelLinear(nn.Layer):
    """Y_i = X A_i + b_i: this rank's columns of A (in, out / t) and of b.
    Forward enters the region; backward: dA_i = X^T dY_i, db_i = sums of dY_i,
    dX = leave region of (dY_i A_i^T) summed over ranks (f's all-reduce or a reduce-scatter)."""

    def __init__(self, region: Region):
        super().__init__()
        self.region = region  # its W and b: TensorParallelTransformer hands it this rank's part

    def forward(self, x):
        """Keep x for backward (with sequence parallelism only the shard: Korthikanti 4.2.2);
        return region.enter(x) A_i + b_i, the product through ``matmul`` (labelled
        "column-parallel forward")."""
        # BEGIN SOLUTION tensor_parallel_mlp
        self.x = x
        x = self.region.enter(x)
        return matmul(self.region.group, x, self.params["W"], "column-parallel forward") + self.params["b"]
        # END SOLUTION

    def backward(self, dy):
        """X = region.enter(self.x) again (sequence parallel: all-gathers the input); dA_i and
        db_i into ``self.grads`` (over every row of the flattened leading axes), dA_i and
        dY_i A_i^T through one ``matmuls`` (labelled "column-parallel backward"); return
        region.enter_backward(dY_i A_i^T)."""
        # BEGIN SOLUTION tensor_parallel_mlp
        x = self.region.enter(self.x)
        W = self.params["W"]
        rows_x, rows_dy = x.reshape(-1, W.shape[0]), dy.reshape(-1, W.shape[1])
        dW, dx = matmuls(self.region.group, "column-parallel backward", (rows_x.T, rows_dy), (dy, W.T))
        self.grads["W"][...] = dW
        self.grads["b"][...] = rows_dy.sum(axis=0)
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
        """Keep Y_i for backward; return region.leave(Y_i B_i) + b, the product through
        ``matmul`` (labelled "row-parallel forward")."""
        # BEGIN SOLUTION tensor_parallel_mlp
        self.x = y
        partial = matmul(self.region.group, y, self.params["W"], "row-parallel forward")
        return self.region.leave(partial) + self.params["b"]
        # END SOLUTION

    def backward(self, dz):
        """db from dZ as it comes (sequence parallel: a partial sum, all-reduced later); then
        dZ = region.leave_backward(dZ); dB_i into ``self.grads`` and dZ B_i^T through one
        ``matmuls`` (labelled "row-parallel backward"); return dZ B_i^T."""
        # BEGIN SOLUTION tensor_parallel_mlp
        W = self.params["W"]
        self.grads["b"][...] = dz.reshape(-1, W.shape[1]).sum(axis=0)
        dz = self.region.leave_backward(dz)
        rows_y, rows_dz = self.x.reshape(-1, W.shape[0]), dz.reshape(-1, W.shape[1])
        dW, dy = matmuls(self.region.group, "row-parallel backward", (rows_y.T, rows_dz), (dz, W.T))
        self.grads["W"][...] = dW
        return dy
        # END SOLUTION

    def saved(self):
        return {"x": self.x}


class HeadsAttention(nn.Layer):
    """Causal attention of this rank's heads on its [Q_i K_i V_i] (N, S, 3 D/t): per head
    A = softmax(Q K^T / sqrt(d) + M), C = A V (transformer.MultiHeadAttention's core, same backward)."""

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
        flops = matmul_flops((self.q, self.k.transpose(0, 1, 3, 2)), (self.attn, self.v))
        self.region.group.compute(flops=flops, label="attention forward")
        return self._merge(context)

    def backward(self, dctx):
        dctx = self._split(dctx)
        dattn = dctx @ self.v.transpose(0, 1, 3, 2)
        dv = self.attn.transpose(0, 1, 3, 2) @ dctx
        dscores = self.attn * (dattn - (dattn * self.attn).sum(axis=-1, keepdims=True)) * self.scale
        dq, dk = dscores @ self.k, dscores.transpose(0, 1, 3, 2) @ self.q
        flops = matmul_flops(
            (dctx, self.v.transpose(0, 1, 3, 2)),
            (self.attn.transpose(0, 1, 3, 2), dctx),
            (dscores, self.k),
            (dscores.transpose(0, 1, 3, 2), self.q),
        )
        self.region.group.compute(flops=flops, label="attention backward")
        return np.concatenate([self._merge(t) for t in (dq, dk, dv)], axis=-1)

    def saved(self):
        return {"q": self.q, "k": self.k, "v": self.v, "attn": self.attn}


class ScatterSequence(nn.Layer):
    """Into the sequence-parallel part: forward keeps this rank's shard, backward all-gathers
    (Megatron: scatter_to_sequence_parallel_region)."""

    def __init__(self, region: SequenceRegion):
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

    def __init__(self, region: SequenceRegion):
        super().__init__()
        self.region = region

    def forward(self, x):
        return self.region.gather(x)

    def backward(self, dy):
        return self.region.shard(dy)
