"""1-bit SGD (Seide et al. 2014, "1-bit stochastic gradient descent ... data-parallel DNNs").

Each entry sends its sign bit b_i = [g_i >= 0]; it decodes to the mean of its group,
mu_+ = mean(g_i : g_i >= 0) or mu_- = mean(g_i : g_i < 0). The quantization error is
large, so use it with ``ResidualMemory`` (error feedback), as the paper does.
Bytes: ceil(n / 8) (np.packbits) + 2 * 4 (float32 mu_-, mu_+).
"""

import numpy as np

from .compressor import Compressor, check_float


class OneBitCompressor(Compressor):
    memory = "residual"  # biased: the paper keeps what was not sent
    passes = (2.03, 1.03)  # the two group means, then the signs packed 8 to a byte
    ops = (3, 1)

    def encoded_nbytes(self, n, itemsize=4):
        return -(-n // 8) + 2 * 4

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        flat = tensor.ravel()
        positive = flat >= 0
        means = [flat[~positive].mean() if (~positive).any() else 0.0, flat[positive].mean() if positive.any() else 0.0]
        return (np.packbits(positive), np.array(means, np.float32)), (tensor.shape, tensor.dtype)

    def decompress(self, payload, ctx):
        bits, means = payload
        shape, dtype = ctx
        n = int(np.prod(shape))
        return means[np.unpackbits(bits)[:n]].astype(dtype).reshape(shape)
