"""Gradient Dropping (Aji & Heafield 2017, "Sparse communication for distributed
gradient descent", section 3).

Drop the entries of smallest magnitude, keeping about a fraction ``ratio``: the threshold
t is the (1 - ratio) quantile of |g| estimated on a random sample (the paper samples
instead of sorting: selecting the exact threshold costs a sweep of the whole tensor), and
every entry with |g_i| >= t is sent as (index, value). Biased: use with ``ResidualMemory``.
Bytes: k' * (4 + itemsize), k' = entries sent; ``kept(payload)`` says how many.

How large a sample. If the sample has s entries and t is its (1 - ratio) quantile, about
ratio * s sampled entries lie above t, and the fraction of the tensor above t is off from
ratio by a relative standard deviation of sqrt((1 - ratio) / (ratio * s)). A fixed
fraction of the tensor is not enough at small sizes: ceil(1% of 640) = 7 samples put the
threshold at the largest of seven, and 13.5% of a 640-entry tensor passed instead of 1%.
So the sample has at least ``PER_KEPT / ratio`` entries (``sample_size``): about 1600
sampled entries above t, a relative standard deviation of 1/sqrt(1600) = 2.5%, so the kept
fraction is within 10% of ratio at four standard deviations, at every tensor size. A
tensor no larger than that is its own sample: the threshold is then exact, the k-th
largest |g_i| (``np.partition``, O(n)), and exactly k = ceil(ratio * n) entries pass, plus
any tied with the k-th. Above that size the sample costs O(PER_KEPT / ratio), a shrinking
share of the tensor (1.6e5 of 1e6 entries at 1%), as the paper intends.
"""

import numpy as np

from ..options import Option
from .compressor import RATIO, SAMPLE, Compressor, check_float, check_ratio, count, scatter

PER_KEPT = 1600  # expected sampled entries above the threshold: 1/sqrt(1600) = 2.5% relative spread


def sample_size(n: int, ratio: float, sample: float) -> int:
    """Entries sampled for the threshold of n: the larger of ceil(sample * n) and
    ceil(PER_KEPT / ratio), never more than n (then the threshold is exact)."""
    return min(n, max(count(sample, n), int(np.ceil(PER_KEPT / ratio))))


def sampled_threshold(magnitudes, ratio, sample, rng):
    """The (1 - ratio) quantile of ``sample_size`` magnitudes drawn at random; all of them,
    and then the exact k-th largest, if the sample would be the whole tensor. The sample's
    largest magnitude is never above it, so at least one entry passes (none of an empty
    tensor)."""
    n = magnitudes.size
    if n == 0:
        return np.inf
    s = sample_size(n, ratio, sample)
    picked = magnitudes if s == n else magnitudes[rng.integers(0, n, s)]
    k = count(ratio, s)
    return np.partition(picked, s - k)[s - k]


class GradientDroppingCompressor(Compressor):
    memory = "residual"  # biased: the paper keeps what was not sent
    communication = "allgatherv"  # each rank sends however many entries passed its threshold
    options: tuple[Option, ...] = (RATIO, SAMPLE)
    passes: tuple[float, float] = (2, 1)  # compare |g| with the threshold, then gather what passed; decode: zero-fill
    ops = (3, 1)

    def __init__(self, rng: np.random.Generator, ratio: float = 0.01, sample: float = 0.01):
        self.rng, self.ratio, self.sample = rng, check_ratio(ratio), check_ratio(sample, "sample")

    def encoded_nbytes(self, n, itemsize=4):
        """At the target ratio (the number sent is within 10% of it, see the module)."""
        return count(self.ratio, n) * (4 + itemsize)

    def cost(self, n, itemsize=4):
        """The sweeps over the tensor (``passes``), plus drawing the sample and selecting
        its quantile (about four sweeps and five operations per sampled entry)."""
        (c_flops, c_bytes), decompress = super().cost(n, itemsize)
        s = sample_size(n, self.ratio, self.sample) if n else 0
        return (c_flops + 5 * s, c_bytes + 4 * s * itemsize), decompress

    def kept(self, payload, n):
        """Entries the payload carries (the number that passed the threshold)."""
        return int(payload[1].size)

    def indices(self, payload) -> np.ndarray:
        """The flat indices of the entries the payload carries."""
        return payload[0]

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
