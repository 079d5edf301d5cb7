"""Deep Gradient Compression (Lin et al. 2018, "Deep gradient compression: reducing the
communication bandwidth for distributed training").

Compressor: Gradient Dropping's sampled threshold, then, if more than k = ceil(ratio * n)
entries pass, the k largest of them. Bytes: k' * (4 + itemsize), k' <= k.
Memory (``DGCMemory``): momentum correction and momentum factor masking,
    u <- m u + g;  v <- v + u;  send sparse(v);  u, v <- 0 where sent,
so what is sent is the accumulated *momentum*, and stale momentum of sent entries is
dropped. The paper's local gradient clipping and warm-up are training concerns, not here.
"""
import numpy as np

from .base import Memory, count
from .dropping import GradientDroppingCompressor


class DGCCompressor(GradientDroppingCompressor):
    def compress(self, tensor, name):
        (indices, values), ctx = super().compress(tensor, name)
        k = count(self.ratio, np.size(tensor))
        if indices.size > k:
            top = np.argpartition(np.abs(values), values.size - k)[values.size - k:]
            indices, values = indices[top], values[top]
        return (indices, values), ctx


class DGCMemory(Memory):
    def __init__(self, momentum: float = 0.9):
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum: expected a value in [0, 1), got {momentum!r}")
        self.momentum, self.velocities, self.accumulated = momentum, {}, {}

    def compensate(self, tensor, name):
        u = self.momentum * self.velocities[name] + tensor if name in self.velocities else tensor
        self.velocities[name] = u
        self.accumulated[name] = self.accumulated.get(name, 0) + u
        return self.accumulated[name]

    def update(self, tensor, name, compressor, payload, ctx):
        sent = payload[0]  # the indices (DGC's payload is indices, values)
        self.accumulated[name] = tensor.copy()
        self.accumulated[name].flat[sent] = 0
        self.velocities[name] = self.velocities[name].copy()
        self.velocities[name].flat[sent] = 0
