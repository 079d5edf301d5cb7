"""8-bit linear quantization: q = round((g - min) / scale), scale = (max - min) / 255.

Decoded as min + q * scale, so the error per entry is at most scale / 2.
Bytes: n (uint8 codes) + 2 * 4 (float32 min and scale).
"""

import numpy as np

from .compressor import Compressor, check_float


class Int8Compressor(Compressor):
    passes = (2.25, 1.25)  # a min/max sweep, then read and write a byte per entry; decode: the reverse
    ops = (4, 2)

    def encoded_nbytes(self, n, itemsize=4):
        return n + 2 * 4

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        lo, hi = (tensor.min(), tensor.max()) if tensor.size else (0.0, 0.0)
        scale = np.float32((hi - lo) / 255 if hi > lo else 1.0)  # a constant tensor: any scale decodes it
        q = np.round((tensor.ravel() - lo) / scale).astype(np.uint8)
        return (q, np.array([lo, scale], np.float32)), (tensor.shape, tensor.dtype)

    def decompress(self, payload, ctx):
        q, (lo, scale) = payload
        shape, dtype = ctx
        return (lo + q * scale).astype(dtype).reshape(shape)
