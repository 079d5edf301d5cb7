"""Half precision: g -> float16(g) (Micikevicius et al. 2018, mixed precision). Bytes: 2 n.

Relative error at most 2**-11 for |g| in float16's normal range (6.1e-5 .. 65504).
"""

import numpy as np

from .compressor import Compressor, check_float


class FP16Compressor(Compressor):
    communication = "allreduce"  # float16 values add up (Horovod's fp16 all-reduce)
    passes = (1.5, 1.5)  # read 4 bytes, write 2 per entry (float32), and back

    def encoded_nbytes(self, n, itemsize=4):
        return 2 * n

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        return (tensor.astype(np.float16),), (tensor.shape, tensor.dtype)

    def decompress(self, payload, ctx):
        shape, dtype = ctx
        return payload[0].astype(dtype).reshape(shape)
