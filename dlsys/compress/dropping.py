"""Gradient Dropping (Aji & Heafield 2017, "Sparse communication for distributed
gradient descent").

Drop the entries of smallest magnitude, keeping about a fraction ``ratio``: the threshold
t is the (1 - ratio) quantile of |g| estimated on a random sample of ceil(sample * n)
entries (cheaper than sorting), and every entry with |g_i| >= t is sent as (index, value).
Biased: use with ``ResidualMemory``. Bytes: k' * (4 + itemsize), k' = entries sent
(about ratio * n; it varies with the sample).
"""
import numpy as np

from .compressor import Compressor, check_float, check_ratio, count, scatter


def sampled_threshold(magnitudes, ratio, sample, rng):
    """The (1 - ratio) quantile of a random sample of the magnitudes; the sample's largest
    magnitude is never above it, so at least one entry passes (none of an empty tensor)."""
    if magnitudes.size == 0:
        return np.inf
    picked = magnitudes[rng.integers(0, magnitudes.size, count(sample, magnitudes.size))]
    return np.quantile(picked, 1 - ratio, method="inverted_cdf")


class GradientDroppingCompressor(Compressor):
    memory = "residual"  # biased: the paper keeps what was not sent
    communication = "allgatherv"  # each rank sends however many entries passed its threshold
    passes: tuple[float, float] = (2, 1)  # compare |g| with the threshold, then gather what passed; decode: zero-fill
    ops = (3, 1)

    def encoded_nbytes(self, n, itemsize=4):
        """At the target ratio (the number sent varies with the sample)."""
        return count(self.ratio, n) * (4 + itemsize)

    def __init__(self, rng: np.random.Generator, ratio: float = 0.01, sample: float = 0.01):
        self.rng, self.ratio, self.sample = rng, check_ratio(ratio), check_ratio(sample, "sample")

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        flat = tensor.ravel()
        magnitudes = np.abs(flat)
        indices = np.flatnonzero(magnitudes >= sampled_threshold(magnitudes, self.ratio, self.sample, self.rng))
        indices = indices.astype(np.int32)
        return (indices, flat[indices]), (tensor.shape, tensor.dtype)

    def decompress(self, payload, ctx):
        indices, values = payload
        shape, dtype = ctx
        return scatter(indices, values, shape, dtype)
