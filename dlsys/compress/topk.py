"""Top-k sparsification (Aji & Heafield 2017; Lin et al. 2018): send the k = ceil(ratio * n)
entries of largest magnitude as (index, value) pairs; the rest decode to zero.
Biased: use with ``ResidualMemory``. Bytes: k * (4 + itemsize) (int32 index, value).
"""

import numpy as np

from .compressor import RATIO, Compressor, check_float, check_ratio, count, scatter


class TopKCompressor(Compressor):
    memory = "residual"  # biased: the paper keeps what was not sent
    options = (RATIO,)
    passes = (4, 1)  # |g|, then a selection (introselect) sweeps it about three times; decode: zero-fill
    ops = (5, 1)

    def __init__(self, ratio: float = 0.01):
        self.ratio = check_ratio(ratio)

    def encoded_nbytes(self, n, itemsize=4):
        return count(self.ratio, n) * (4 + itemsize)

    def compress(self, tensor, name):
        """The payload (indices, values) of the k = ``count(self.ratio, n)`` entries of largest
        |g|, in any order: flat indices as int32, values in the tensor's dtype; the ctx
        (shape, dtype). O(n), no full sort: ``np.argpartition``."""
        tensor = check_float(tensor)
        # BEGIN SOLUTION topk_error_feedback
        flat = tensor.ravel()
        k = count(self.ratio, flat.size)
        indices = np.argpartition(np.abs(flat), flat.size - k)[flat.size - k :].astype(np.int32)
        return (indices, flat[indices]), (tensor.shape, tensor.dtype)
        # END SOLUTION

    def kept(self, payload, n):
        return int(payload[1].size)

    def decompress(self, payload, ctx):
        indices, values = payload
        shape, dtype = ctx
        return scatter(indices, values, shape, dtype)
