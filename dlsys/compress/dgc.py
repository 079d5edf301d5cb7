"""Deep Gradient Compression (Lin et al. 2018, "Deep gradient compression: reducing the
communication bandwidth for distributed training").

Compressor: Gradient Dropping's sampled threshold, then, if more than k = ceil(ratio * n)
entries pass, the k largest of them. Bytes: k' * (4 + itemsize), k' <= k.
Sparsity warm-up: in the first ``warmup_epochs`` epochs the sparsity rises exponentially,
1 - 0.25**(e + 1) in epoch e (75%, 93.75%, 98.4375%, 99.6%), then stays at 1 - ratio
(99.9% by default); the training loop calls ``set_epoch(e)``.
Memory (``DGCMemory``): local gradient clipping, then momentum correction and momentum
factor masking,
    g <- g * min(1, (C / sqrt(N)) / ||g||)   (C the global clip norm, N workers)
    u <- m u + g;  v <- v + u;  send sparse(v);  u, v <- 0 where sent,
so what is sent is the accumulated *momentum* (the optimizer then runs without its own),
and stale momentum of sent entries is dropped.
"""
import numpy as np

from .compressor import Memory, count
from .dropping import GradientDroppingCompressor


def warmup_sparsity(epoch: int, warmup_epochs: int, final_sparsity: float) -> float:
    """DGC's exponential warm-up: 1 - 0.25**(epoch + 1) while epoch < warmup_epochs, never
    above the final sparsity; the final sparsity after."""
    return min(1 - 0.25 ** (epoch + 1), final_sparsity) if epoch < warmup_epochs else final_sparsity


class DGCCompressor(GradientDroppingCompressor):
    communication = "allgatherv"
    memory = "dgc"
    passes = (2.1, 1)  # the threshold sweep of Gradient Dropping; the top-k runs on what passed

    def __init__(self, rng: np.random.Generator, ratio: float = 0.001, sample: float = 0.01, warmup_epochs: int = 4):
        super().__init__(rng, ratio, sample)
        if not (isinstance(warmup_epochs, int) and warmup_epochs >= 0):
            raise ValueError(f"warmup_epochs: expected a whole number >= 0, got {warmup_epochs!r}")
        self.final_ratio, self.warmup_epochs = self.ratio, warmup_epochs

    def set_epoch(self, epoch: int) -> None:
        self.ratio = 1 - warmup_sparsity(epoch, self.warmup_epochs, 1 - self.final_ratio)

    def compress(self, tensor, name):
        (indices, values), ctx = super().compress(tensor, name)
        k = count(self.ratio, np.size(tensor))
        if indices.size > k:
            top = np.argpartition(np.abs(values), values.size - k)[values.size - k:]
            indices, values = indices[top], values[top]
        return (indices, values), ctx


class DGCMemory(Memory):
    passes = 8  # clip norm, u <- m u + g, v <- v + u (read two, write one each), the masking

    def __init__(self, momentum: float = 0.9, clip_norm: float | None = None, workers: int = 1):
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum: expected a value in [0, 1), got {momentum!r}")
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm: expected a norm > 0, got {clip_norm!r}")
        self.momentum = momentum
        self.velocities: dict[str, np.ndarray] = {}
        self.accumulated: dict[str, np.ndarray] = {}
        self.local_clip = clip_norm / np.sqrt(workers) if clip_norm else None

    def compensate(self, tensor, name):
        if self.local_clip:
            norm = float(np.linalg.norm(tensor))
            tensor = tensor * (self.local_clip / norm) if norm > self.local_clip else tensor
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
