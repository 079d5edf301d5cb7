"""Random-k sparsification (Stich et al. 2018, "Sparsified SGD with memory"): send k = ceil(ratio * n)
entries chosen uniformly without replacement, scaled by n / k so the estimate is unbiased:
E[g~_i] = (k / n) * (n / k) g_i = g_i.

Only the values travel. Every rank builds the compressor with an identically seeded
Generator, so each draws the same indices at the same step; ctx holds them locally.
Bytes: k * itemsize.
"""

import numpy as np

from .compressor import RATIO, Compressor, check_float, check_ratio, count, scatter


class RandomKCompressor(Compressor):
    communication = "allreduce"  # same indices on every rank, so the values add up
    same_draws_on_every_rank = True
    options = (RATIO,)
    passes = (0, 1)  # only the k values are read; decode: zero-fill
    ops = (0, 1)

    def encoded_nbytes(self, n, itemsize=4):
        return count(self.ratio, n) * itemsize

    def __init__(self, rng: np.random.Generator, ratio: float = 0.01):
        self.rng, self.ratio = rng, check_ratio(ratio)

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        flat = tensor.ravel()
        k = count(self.ratio, flat.size)
        indices = self.rng.choice(flat.size, size=k, replace=False)
        return (flat[indices] * (flat.size / max(k, 1)),), (tensor.shape, tensor.dtype, indices)

    def kept(self, payload, n):
        return int(payload[0].size)

    def decompress(self, payload, ctx):
        shape, dtype, indices = ctx
        return scatter(indices, payload[0], shape, dtype)
