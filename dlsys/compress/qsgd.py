"""QSGD (Alistarh et al. 2017, "QSGD: communication-efficient SGD via gradient quantization").

The gradient is cut into buckets of d entries; in a bucket v with norm ||v||_2 and s levels,
    Q(v_i) = ||v|| * sign(v_i) * l_i / s,
where l_i = floor(r) + Bernoulli(r - floor(r)) and r = s |v_i| / ||v||. Unbiased:
E[l_i] = r, so E[Q(v_i)] = v_i. With ``bits`` b in {2, 4, 8}, s = 2**(b-1) - 1 and the
signed level sign * l + s in [0, 2 s] is packed at b bits.
Bytes: ceil(n * b / 8) + 4 * ceil(n / d) (one float32 norm per bucket).
"""

import numpy as np

from ..options import Option
from .compressor import Compressor, check_float, pack_bits, unpack_bits

BITS = (2, 4, 8)


class QSGDCompressor(Compressor):
    options = (
        Option("bits", "integer", 2, 8, "bits per entry: 2, 4 or 8"),
        Option("bucket", "integer", 1, 2**24, "bucket size (entries per norm)"),
    )
    passes = (2.25, 1.25)  # the bucket norms, then the stochastic levels at b bits (b = 8)
    ops = (14, 2)

    def __init__(self, rng: np.random.Generator, bits: int = 8, bucket: int = 512):
        if bits not in BITS:
            raise ValueError(f"bits: expected one of {BITS}, got {bits!r}")
        if not (isinstance(bucket, int) and bucket >= 1):
            raise ValueError(f"bucket: expected a whole number >= 1, got {bucket!r}")
        self.rng, self.bits, self.bucket = rng, bits, bucket
        self.levels = 2 ** (bits - 1) - 1

    def compress(self, tensor, name):
        tensor = check_float(tensor)
        flat = tensor.ravel().astype(np.float64)
        buckets = -(-flat.size // self.bucket)
        padded = np.zeros(buckets * self.bucket)  # zeros quantize to level 0 and are dropped on decode
        padded[: flat.size] = flat
        v = padded.reshape(buckets, self.bucket)
        norms = np.linalg.norm(v, axis=1).astype(np.float32)
        safe = np.where(norms > 0, norms, 1.0)[:, None]  # an all-zero bucket has r = 0
        r = self.levels * np.abs(v) / safe
        level = np.floor(r) + (self.rng.random(r.shape) < r - np.floor(r))
        codes = (np.sign(v) * level + self.levels).ravel()[: flat.size]
        return (pack_bits(codes, self.bits), norms), (tensor.shape, tensor.dtype)

    def decompress(self, payload, ctx):
        packed, norms = payload
        shape, dtype = ctx
        n = int(np.prod(shape))
        signed = unpack_bits(packed, self.bits, n).astype(np.float64) - self.levels
        scale = np.repeat(norms.astype(np.float64), self.bucket)[:n] / self.levels
        return (signed * scale).astype(dtype).reshape(shape)

    def encoded_nbytes(self, n, itemsize=4):
        return -(-n * self.bits // 8) + 4 * -(-n // self.bucket)
