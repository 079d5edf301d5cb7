"""TernGrad (Wen et al. 2017, "TernGrad: ternary gradients to reduce communication").

g~_i = s * sign(g_i) * b_i, with s = max_i |g_i| and b_i ~ Bernoulli(|g_i| / s).
Unbiased: E[g~_i] = s * sign(g_i) * |g_i| / s = g_i; Var[g~_i] = |g_i| (s - |g_i|).
Codes sign * b + 1 in {0, 1, 2} are packed 2 bits each, 4 per byte.
Bytes: ceil(n / 4) + 4 (float32 s).
"""
import numpy as np

from .base import Compressor, check_float, pack_bits, unpack_bits


class TernGradCompressor(Compressor):
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        flat = tensor.ravel()
        s = np.abs(flat).max() if flat.size else 0.0
        keep = self.rng.random(flat.size) < np.abs(flat) / s if s > 0 else np.zeros(flat.size, bool)
        codes = (np.sign(flat) * keep + 1).astype(np.uint8)
        return (pack_bits(codes, 2), np.array([s], np.float32)), (tensor.shape, tensor.dtype)

    def decompress(self, payload, ctx):
        packed, s = payload
        shape, dtype = ctx
        codes = unpack_bits(packed, 2, int(np.prod(shape))).astype(np.int8) - 1
        return (s[0] * codes).astype(dtype).reshape(shape)
