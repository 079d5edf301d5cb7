"""How long a GPU takes to run one micro-batch through a transformer layer, from first
principles and a published kernel measurement; and the FLOPs a step counts.

Every kernel is charged as a roofline: the larger of its FLOPs at the rate the tensor
cores sustain and its bytes at the HBM bandwidth (Williams, Waterman & Patterson 2009,
"Roofline"). Nothing here is fitted to a training run.

    GEMM (m x k) @ (k x n), ``batch`` of them:
        FLOPs 2 m n k, bytes e (m k + k n + m n) (each operand read once, the result written)
        rate  device.matmul_flops (the measured ceiling of a large BF16 GEMM, ``devices``)
              x wave efficiency: the output is cut into tiles of 256 x 128 (cuBLAS's largest
              Ampere/Hopper tile), one per SM at a time, so ceil(tiles / SMs) waves run and
              the last one may be partly idle: tiles / (waves x SMs) (NVIDIA, "Matrix
              Multiplication Background User's Guide", tile and wave quantization)
    memory-bound kernels (norms, softmax, dropout, activation, residual adds, cross-entropy):
        their bytes at device.hbm_Bps, FLOPs free. Per layer forward, with X = b s h
        elements (X / t under sequence parallelism), S = b (a/t) s^2 the attention scores,
        F = b s ffn / t, e = 2 bytes (Megatron-LM's fused kernels, Narayanan et al. 2021
        section 4.2: bias+GeLU, bias+dropout+add, scale+mask+softmax):
            2 norms            read X, write X each                   4 X e
            softmax            read S, write S                        2 S e
            attention dropout  read S, write S and a 1-byte mask      S (2 e + 1)
            activation         GeLU: read F, write F; SwiGLU: read 2F  2 F e or 3 F e
            2 bias+dropout+add read 2 X, write X (and a mask)         2 X (3 e + 1)
        backward: twice the forward's bytes and twice its GEMMs (the input's and the
        weights' gradients: two GEMMs of the forward's size)
    a layer on one TP rank of ``tp``, a micro-batch of b sequences of s tokens (T = b s):
        QKV (T x h) @ (h x (h + 2 kv d)/t), O (T x h/t) @ (h/t x h),
        the MLP (T x h) @ (h x ffn/t) once (GPT) or twice (SwiGLU's gate and up), and
        (T x ffn/t) @ (ffn/t x h) (T top_k tokens through the experts of a mixture),
        the attention core: b a/t products (s x d) @ (d x s) and (s x s) @ (s x d), the
        scores through HBM (no FlashAttention: Megatron-LM 2021's kernels)
    the head (last stage): (T x h) @ (h x V/t) and a vocabulary-parallel cross-entropy
        reading and writing the FP32 logits; the embedding (first stage): a gather of X

Recomputation reruns the forward of every layer (full) or the attention core only
(selective, Korthikanti et al. 2022 section 5).

FLOPs, as Megatron-LM counts them (Narayanan et al. 2021, section 5.1, equation 3: only the
matrix products; 2 a multiply-add): a sequence's forward is
L (2 s P_matmul + 4 s^2 h) + 2 s h V; a step runs 3 forwards' worth (forward, and backward
= 2 forwards), plus, with full recomputation, every layer's forward again. For GPT
(P_matmul = 12 h^2) with full recomputation that is equation 3,
96 B s L h^2 (1 + s/(6 h) + V/(16 L h)); without it, 72 B s L h^2 (1 + s/(6 h) + V/(12 L h)),
the model FLOPs of MFU (Chowdhery et al. 2022, PaLM, appendix B; Korthikanti section 6).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from .devices import Device
from .models import Model

TILE = (256, 128)  # output rows x columns a thread block computes
E = 2  # bytes an element: BF16/FP16 activations and weights in the kernels
LOGIT_E = 4  # the cross-entropy reads FP32 logits


def gemm_s(device: Device, m: int, n: int, k: int, batch: int = 1) -> float:
    """Seconds of ``batch`` GEMMs (m x k) @ (k x n): the roofline of their FLOPs at the
    wave-quantized matmul rate and their bytes at HBM bandwidth (module docstring)."""
    tiles = batch * min(
        math.ceil(m / TILE[0]) * math.ceil(n / TILE[1]), math.ceil(m / TILE[1]) * math.ceil(n / TILE[0])
    )
    waves = math.ceil(tiles / device.sms)
    rate = device.gemm_flops * tiles / (waves * device.sms)
    return max(2 * m * n * k * batch / rate, E * (m * k + k * n + m * n) * batch / device.hbm_Bps)


class LayerTimes(NamedTuple):
    """One micro-batch's forward seconds on one TP rank: a layer's GEMMs, its attention core
    (score products, softmax, dropout: what selective recomputation reruns), its other
    memory-bound kernels; the head's (last stage) and the embedding's (first stage)."""

    gemm: float
    core: float
    other: float
    head: float
    embedding: float

    @property
    def forward(self) -> float:
        return self.gemm + self.core + self.other


@lru_cache(maxsize=4096)
def layer_times(
    model: Model, device: Device, tp: int, micro_batch: int, sequence_parallel: bool, dropout: bool
) -> LayerTimes:
    """A layer's forward on one rank of ``tp`` for a micro-batch (module docstring)."""
    b, s, h, t = micro_batch, model.seq_len, model.hidden, tp
    d = h // model.heads
    tokens = b * s
    expert_tokens = tokens * (model.top_k if model.experts else 1)
    qkv = (model.heads + 2 * model.kv_heads) * d // t
    up = (2 if model.gated else 1) * model.ffn // t
    gemm = (
        gemm_s(device, tokens, qkv, h)
        + gemm_s(device, tokens, h, h // t)
        + gemm_s(device, expert_tokens, up, h)
        + gemm_s(device, expert_tokens, h, model.ffn // t)
    )
    heads = b * model.heads // t
    scores = heads * s * s
    x = tokens * h / (t if sequence_parallel else 1)
    f = expert_tokens * model.ffn / t
    mask = 1 if dropout else 0
    core = (
        gemm_s(device, s, s, d, heads)
        + gemm_s(device, s, d, s, heads)
        + (2 * E * scores + (scores * (2 * E + 1) if dropout else 0)) / device.hbm_Bps
    )
    other = (4 * x * E + (3 if model.gated else 2) * f * E + 2 * x * (3 * E + mask)) / device.hbm_Bps
    logits = tokens * model.vocab / t
    head = gemm_s(device, tokens, model.vocab // t, h) + 2 * logits * LOGIT_E / device.hbm_Bps
    return LayerTimes(gemm, core, other, head, tokens * h * E / device.hbm_Bps)


def backward_s(times: LayerTimes, recompute: str) -> float:
    """A layer's backward: twice its forward's GEMMs and bytes, plus what recomputation reruns."""
    rerun = {"full": times.forward, "selective": times.core}.get(recompute, 0.0)
    return 2 * times.forward + rerun


def forward_flops(model: Model, sequences: float) -> tuple[float, float, float]:
    """One forward's FLOPs for ``sequences``: (a layer's matrix products, a layer's
    attention scores, the head), Megatron's count (module docstring)."""
    s, h = model.seq_len, model.hidden
    return 2 * s * model.matmul_params() * sequences, 4 * s * s * h * sequences, 2 * s * h * model.vocab * sequences


def model_flops(model: Model, sequences: float) -> float:
    """A step's model FLOPs, no recomputation: 3 (L (matmuls + scores) + head)."""
    layer, scores, head = forward_flops(model, sequences)
    return 3 * (model.layers * (layer + scores) + head)


def executed_flops(model: Model, sequences: float, recompute: str) -> float:
    """The FLOPs a step runs: the model's and what recomputation reruns (every layer's
    forward with ``full``, the attention scores with ``selective``): equation 3 for GPT
    with full recomputation."""
    layer, scores, _ = forward_flops(model, sequences)
    rerun = {"full": layer + scores, "selective": scores}.get(recompute, 0.0)
    return model_flops(model, sequences) + model.layers * rerun
