"""A small transformer (Vaswani et al. 2017; pre-norm GPT-2 blocks, Radford et al. 2019).

A sample is a sequence: tokens (S,) in, vectors (S, D) inside. Every layer's ``saved()``
lists what it keeps for backward, the tensors Korthikanti et al. 2022 (section 4.1) count:
dlsys.machine.memory.activation_bytes holds the formula, tests/learn/test_transformer.py the match.
The layers split backward in two, as zero-bubble pipelines need: ``backward_input(dy) -> dx``
now, ``backward_weights()`` (the weight gradients) later. They live in ``nn``'s flat buffers
like every other layer (``nn.Sequential``).
"""

from __future__ import annotations

from math import prod, sqrt

import numpy as np

from .nn import Layer, Linear, Sequential, SplitLayer


class Embedding(SplitLayer):
    """y[s] = E[x[s]] + P[s]: a learned token table E (vocab, D) plus learned positions P.

    Tokens come in as floats (Sequential casts its input) and are read back as integers.
    dE[v] = sum of dy over the positions holding token v, dP = sum of dy over the batch;
    tokens have no gradient, so backward returns zeros."""

    def __init__(self, vocab: int, d_model: int, max_len: int):
        super().__init__()
        self.vocab, self.d_model, self.max_len = vocab, d_model, max_len

    def param_shapes(self):
        return {"E": (self.vocab, self.d_model), "P": (self.max_len, self.d_model)}

    def output_shape(self, in_shape):
        if len(in_shape) != 1 or not 1 <= in_shape[0] <= self.max_len:
            raise ValueError(f"Embedding: input must be (S,) tokens with S in 1..{self.max_len}, got {in_shape}")
        return (in_shape[0], self.d_model)

    def init_params(self, rng):
        self.params["E"][...] = 0.02 * rng.standard_normal(self.params["E"].shape)  # GPT-2's N(0, 0.02^2)
        self.params["P"][...] = 0.01 * rng.standard_normal(self.params["P"].shape)

    def forward(self, x):
        self.idx = x.astype(np.int64)
        if self.idx.size and (self.idx.min() < 0 or self.idx.max() >= self.vocab or np.any(self.idx != x)):
            raise ValueError(f"Embedding: tokens must be integers in 0..{self.vocab - 1}")
        return self.params["E"][self.idx] + self.params["P"][: x.shape[1]]

    def backward_input(self, dy):
        self.dy = dy
        return np.zeros(self.idx.shape, dy.dtype)

    def backward_weights(self):
        self.grads["E"][...] = 0.0
        np.add.at(self.grads["E"], self.idx, self.dy)
        self.grads["P"][...] = 0.0
        self.grads["P"][: self.dy.shape[1]] = self.dy.sum(axis=0)

    def saved(self):
        return {"idx": self.idx}


class LayerNorm(SplitLayer):
    """y = g * xhat + b over the last axis, xhat = (x - mean) / sqrt(var + eps) (Ba et al. 2016).

    dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with dxhat = g dy, rstd = 1/sqrt(var + eps)."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model, self.eps = d_model, eps

    def param_shapes(self):
        return {"g": (self.d_model,), "b": (self.d_model,)}

    def output_shape(self, in_shape):
        if in_shape[-1:] != (self.d_model,):
            raise ValueError(f"LayerNorm({self.d_model}): last axis must be {self.d_model}, got {in_shape}")
        return in_shape

    def init_params(self, rng):
        self.params["g"][...], self.params["b"][...] = 1.0, 0.0

    def forward(self, x):
        centred = x - x.mean(axis=-1, keepdims=True)
        self.rstd = 1.0 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + self.eps)
        self.xhat = centred * self.rstd
        return self.xhat * self.params["g"] + self.params["b"]

    def backward_input(self, dy):
        self.dy = dy
        dxhat = dy * self.params["g"]
        return self.rstd * (
            dxhat - dxhat.mean(axis=-1, keepdims=True) - self.xhat * (dxhat * self.xhat).mean(axis=-1, keepdims=True)
        )

    def backward_weights(self):
        axes = tuple(range(self.dy.ndim - 1))
        self.grads["g"][...] = (self.dy * self.xhat).sum(axis=axes)
        self.grads["b"][...] = self.dy.sum(axis=axes)

    def flops(self, batch):
        """7 per element: mean 1, centre 1, square and sum 2, normalise 1, scale and shift 2."""
        return 7 * batch * prod(self.out_shape)

    def saved(self):
        return {"xhat": self.xhat, "rstd": self.rstd}


_GELU_C = sqrt(2.0 / np.pi)


class GELU(Layer):
    """y = x Phi(x), in GPT-2's tanh form (Hendrycks & Gimpel 2016):
    y = x/2 (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi);
    dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 * 0.044715 x^2)."""

    def forward(self, x):
        self.x = x
        return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x * x * x)))

    def backward(self, dy):
        x = self.x
        t = np.tanh(_GELU_C * (x + 0.044715 * x * x * x))  # x * x * x: float32 ** is 20x slower
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_C * (1 + 3 * 0.044715 * x * x))

    def flops(self, batch):
        """8 per element: the cube 2, the polynomial 2, tanh 1, then 1 + t, times x, times 1/2."""
        return 8 * batch * prod(self.out_shape)

    def saved(self):
        return {"x": self.x}


class MultiHeadAttention(SplitLayer):
    """Causal multi-head self-attention (Vaswani et al. 2017, section 3.2), heads a, D = a d:

    [Q K V] = x Wqkv + bqkv;  per head  A = softmax(Q K^T / sqrt(d) + M),  C = A V;
    y = concat_heads(C) Wo + bo, with M = -inf above the diagonal (position s sees 0..s).
    Backward: dA = dC V^T, dV = A^T dC, dScores = A (dA - rowsum(dA A)) / sqrt(d),
    dQ = dScores K, dK = dScores^T Q, then the two linear maps as in Linear."""

    def __init__(self, d_model: int, heads: int, causal: bool = True):
        super().__init__()
        if heads < 1 or d_model % heads:
            raise ValueError(f"MultiHeadAttention: heads must divide d_model={d_model}, got heads={heads}")
        self.d_model, self.heads, self.causal = d_model, heads, causal

    def param_shapes(self):
        d = self.d_model
        return {"Wqkv": (d, 3 * d), "bqkv": (3 * d,), "Wo": (d, d), "bo": (d,)}

    def output_shape(self, in_shape):
        if len(in_shape) != 2 or in_shape[1] != self.d_model:
            raise ValueError(f"MultiHeadAttention: input must be (S, {self.d_model}) per sample, got {in_shape}")
        return in_shape

    def init_params(self, rng):
        d = self.d_model
        self.params["Wqkv"][...] = rng.standard_normal((d, 3 * d)) / sqrt(d)
        self.params["Wo"][...] = rng.standard_normal((d, d)) / sqrt(d)
        self.params["bqkv"][...], self.params["bo"][...] = 0.0, 0.0

    def _split(self, t):
        """(N, S, D) -> (N, a, S, d)."""
        n, s, _ = t.shape
        return t.reshape(n, s, self.heads, -1).transpose(0, 2, 1, 3)

    def forward(self, x):
        n, s, d = x.shape
        qkv = x @ self.params["Wqkv"] + self.params["bqkv"]
        self.x = x
        self.q, self.k, self.v = (self._split(t) for t in np.split(qkv, 3, axis=-1))
        scores = self.q @ self.k.transpose(0, 1, 3, 2) / sqrt(d // self.heads)
        if self.causal:
            scores = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        self.attn = scores / scores.sum(axis=-1, keepdims=True)
        self.ctx = (self.attn @ self.v).transpose(0, 2, 1, 3).reshape(n, s, d)
        return self.ctx @ self.params["Wo"] + self.params["bo"]

    def backward_input(self, dy):
        n, s, d = dy.shape
        self.dy = dy
        dctx = self._split(dy @ self.params["Wo"].T)
        dattn = dctx @ self.v.transpose(0, 1, 3, 2)
        dv = self.attn.transpose(0, 1, 3, 2) @ dctx
        dscores = self.attn * (dattn - (dattn * self.attn).sum(axis=-1, keepdims=True)) / sqrt(d // self.heads)
        dq, dk = dscores @ self.k, dscores.transpose(0, 1, 3, 2) @ self.q
        self.dqkv = np.concatenate([t.transpose(0, 2, 1, 3).reshape(n, s, d) for t in (dq, dk, dv)], axis=-1)
        return self.dqkv @ self.params["Wqkv"].T

    def backward_weights(self):
        d = self.d_model
        self.grads["Wo"][...] = self.ctx.reshape(-1, d).T @ self.dy.reshape(-1, d)
        self.grads["bo"][...] = self.dy.reshape(-1, d).sum(axis=0)
        self.grads["Wqkv"][...] = self.x.reshape(-1, d).T @ self.dqkv.reshape(-1, 3 * d)
        self.grads["bqkv"][...] = self.dqkv.reshape(-1, 3 * d).sum(axis=0)

    def flops(self, batch):
        """Per sample: QKV and output maps S (2D+1)(3D + D), scores and A V 2 * 2 S^2 D,
        softmax 5 a S^2 (max, subtract, exp, sum, divide; the masked half counted too)."""
        s, d = self.in_shape
        return batch * (s * (2 * d + 1) * 4 * d + 4 * s * s * d + 5 * self.heads * s * s)

    def saved(self):
        return {"x": self.x, "q": self.q, "k": self.k, "v": self.v, "attn": self.attn, "ctx": self.ctx}


class Residual(SplitLayer):
    """y = x + f(x), f = the given layers in order (a transformer's sub-block);
    dx = dy + df^T dy. Its parameters are its layers', named "<i>.<name>"."""

    def __init__(self, *layers: Layer):
        super().__init__()
        self.layers = list(layers)

    def param_shapes(self):
        return {f"{i}.{name}": s for i, layer in enumerate(self.layers) for name, s in layer.param_shapes().items()}

    def output_shape(self, in_shape):
        shape = in_shape
        for layer in self.layers:
            shape = layer.build(shape)
        if shape != in_shape:
            raise ValueError(f"Residual: its layers must keep the shape {in_shape}, got {shape}")
        return in_shape

    def init_params(self, rng):
        """Hand each layer its views of the flat buffers (Sequential has filled ours), then init it."""
        for key in self.params:
            i, _, name = key.partition(".")
            self.layers[int(i)].params[name] = self.params[key]
            self.layers[int(i)].grads[name] = self.grads[key]
        for layer in self.layers:
            layer.init_params(rng)

    def forward(self, x):
        y = x
        for layer in self.layers:
            y = layer.forward(y)
        return x + y

    def backward_input(self, dy):
        dx = dy
        for layer in reversed(self.layers):
            dx = layer.backward_input(dx)
        return dy + dx

    def backward_weights(self):
        for layer in self.layers:
            layer.backward_weights()

    def replica(self):
        twin = super().replica()
        twin.layers = [layer.replica() for layer in self.layers]
        return twin

    def flops(self, batch):
        return sum(layer.flops(batch) for layer in self.layers) + batch * prod(self.out_shape)

    def saved(self):
        return {f"{i}.{name}": a for i, layer in enumerate(self.layers) for name, a in layer.saved().items()}


def transformer(
    vocab: int,
    seq_len: int,
    d_model: int = 32,
    heads: int = 4,
    layers: int = 2,
    d_ff: int | None = None,
    seed: int = 0,
    dtype=np.float32,
) -> Sequential:
    """A causal GPT-style model: tokens (S,) -> logits (S, vocab).

    Embedding, then `layers` pre-norm blocks x + Attn(LN(x)), x + MLP(LN(x)) with
    MLP = Linear(D, d_ff) - GELU - Linear(d_ff, D) (d_ff = 4 D by default), then LN and a
    Linear to the vocabulary."""
    d_ff = d_ff or 4 * d_model
    if min(vocab, seq_len, d_model, heads, layers, d_ff) < 1:
        raise ValueError("vocab, seq_len, d_model, heads, layers and d_ff must be positive integers")
    blocks: list[Layer] = [Embedding(vocab, d_model, seq_len)]
    for _ in range(layers):
        blocks += [
            Residual(LayerNorm(d_model), MultiHeadAttention(d_model, heads)),
            Residual(LayerNorm(d_model), Linear(d_model, d_ff), GELU(), Linear(d_ff, d_model)),
        ]
    blocks += [LayerNorm(d_model), Linear(d_model, vocab)]
    return Sequential(blocks, (seq_len,), seed=seed, dtype=dtype)
