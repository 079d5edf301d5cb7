"""TernGrad (Wen et al. 2017, "TernGrad: ternary gradients to reduce communication").

g~_i = s * sign(g_i) * b_i, with b_i ~ Bernoulli(|g_i| / s) and the scaler s = max_i |g_i|.
Unbiased: E[g~_i] = s * sign(g_i) * |g_i| / s = g_i; Var[g~_i] = |g_i| (s - |g_i|).
``clip=2.5`` is the paper's gradient clipping: g is first clipped to [-c sigma, c sigma]
(sigma the standard deviation of g), so s = min(max |g|, c sigma) and the variance shrinks
(biased: the clipped tail is lost). Scaler sharing: the paper's workers agree on one s per
layer, the max over workers, so every rank decodes every rank's codes with the same s; the
communication step passes ``scale`` = that max of ``local_scale`` (dlsys.collectives.compressed).
Codes sign * b + 1 in {0, 1, 2} are packed 2 bits each, 4 per byte.
Bytes: ceil(n / 4) + 4 (float32 s).
"""

import numpy as np

from ..options import Option
from .compressor import Compressor, check_float, pack_bits, unpack_bits


class TernGradCompressor(Compressor):
    options = (Option("clip", "number", 0, help="clip at CLIP standard deviations (paper: 2.5)", low_open=True),)
    shares_scale = True
    passes = (2.06, 1.06)  # the max (or sigma) sweep, then Bernoulli draws and 2-bit codes
    ops = (12, 2)  # a uniform draw is about ten operations

    def __init__(self, rng: np.random.Generator, clip: float | None = None):
        if clip is not None and not clip > 0:
            raise ValueError(f"clip: expected a number of standard deviations > 0 (the paper uses 2.5), got {clip!r}")
        self.rng, self.clip = rng, clip

    def local_scale(self, tensor) -> float:
        """s of this rank's gradient alone: max |g|, or min(max |g|, clip * sigma)."""
        flat = check_float(tensor).ravel()
        if not flat.size:
            return 0.0
        s = float(np.abs(flat).max())
        return min(s, self.clip * float(flat.std())) if self.clip else s

    def compress(self, tensor, name, scale: float | None = None):
        """The payload (2-bit codes packed 4 per byte by ``pack_bits``, then s as one float32)
        and the ctx (shape, dtype). Entry g_i (clipped to [-s, s]) becomes s * sign(g_i) with
        probability |g_i| / s, else 0, drawn with ``self.rng``; its code is sign * kept + 1,
        in {0, 1, 2}. s = 0 (an all-zero gradient) keeps nothing."""
        tensor = check_float(tensor)
        s = self.local_scale(tensor) if scale is None else scale
        # BEGIN SOLUTION terngrad_quantizer
        flat = np.clip(tensor.ravel(), -s, s)
        keep = self.rng.random(flat.size) < np.abs(flat) / s if s > 0 else np.zeros(flat.size, bool)
        codes = (np.sign(flat) * keep + 1).astype(np.uint8)
        return (pack_bits(codes, 2), np.array([s], np.float32)), (tensor.shape, tensor.dtype)
        # END SOLUTION

    def decompress(self, payload, ctx):
        """The dense array of shape and dtype ``ctx``: s * (code - 1) per entry (``unpack_bits``)."""
        # BEGIN SOLUTION terngrad_quantizer
        packed, s = payload
        shape, dtype = ctx
        codes = unpack_bits(packed, 2, int(np.prod(shape))).astype(np.int8) - 1
        return (s[0] * codes).astype(dtype).reshape(shape)
        # END SOLUTION

    def encoded_nbytes(self, n, itemsize=4):
        return -(-n // 4) + 4
