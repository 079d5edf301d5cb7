"""Deep Gradient Compression (Lin et al. 2018, "Deep gradient compression: reducing the
communication bandwidth for distributed training").

Compressor: Gradient Dropping's sampled threshold, then, if more than k = ceil(ratio * n)
entries pass, the k largest of them.
Sparsity warm-up: in the first ``warmup_epochs`` epochs the sparsity rises exponentially,
1 - 0.25**(e + 1) in epoch e (75%, 93.75%, 98.4375%, 99.6%), then stays at 1 - ratio
(99.9% by default); the training loop calls ``set_epoch(e)``.
Memory (``DGCMemory``): local gradient clipping, then momentum correction and momentum
factor masking,
    g <- g * min(1, (C / sqrt(N)) / ||g||)   (C the global clip norm, N workers)
    u <- m u + g;  v <- v + u;  send sparse(v);  u, v <- 0 where sent,
so what is sent is the accumulated *momentum* (the optimizer then runs without its own),
and stale momentum of sent entries is dropped.

Bytes, as the paper counts them. Which tensors: the authors' code compresses only
parameter tensors of two or more dimensions and all-reduces the rest (biases, batch-norm
scales and shifts) dense in fp32 (synxlin/deep-gradient-compression, train.py:136-140,
``param.dim() > 1``; dgc/compression.py:173-177 sends an uncompressed tensor as it is);
``compresses(ndim)`` states the rule for whoever assigns tensors to the compressor.
Each compressed tensor sends k entries at 6 bytes each: its value (the tensor's dtype,
4 bytes) and a 16-bit index. This encoding is fitted, not sourced: the paper does not spell
out its encoding, neither it nor the released code uses this one, and we chose it because
it gives the paper's published sizes (Table 3), as no other count we tried does: with 1-D
tensors dense in fp32 and ceil(0.001 n) entries of 6 bytes per other tensor, ResNet-50's
25,557,032 parameters (54,120 of them in 1-D tensors) give 102.2 MB / 369 kB = 277x, the paper's 97.49 MB ->
0.35 MB (277x); its AlexNet (60.97M, 10,568 in biases) 597x, its 2-layer LSTM (51.03M,
34,000 in biases) 462x, the paper's 597x and 462x. (The released code's own default, fp32
values and int64 indices, 12 bytes an entry, would give ResNet-50 196x; its
``fp16_values`` and ``int32_indices`` options, dgc/compression.py:168-176, give 6 bytes an
entry but send the dense tensors in fp16 too: 391x.) A 16-bit index is a *gap*, as in
Deep Compression (Han et al. 2016, same group): the indices in increasing order, each
coded as its distance from the previous one (the first from -1), so every code is >= 1;
a gap longer than 65535 is preceded by escape codes 0, each worth 65535 positions and
carrying no value. Bytes: 2 * (k' + escapes) + itemsize * k', k' <= k; at 0.1% density the
mean gap is 1000 and escapes are rare.
"""

import numpy as np

from ..options import Option
from .compressor import Memory, count, scatter
from .dropping import GradientDroppingCompressor

GAP_MAX = 65535  # the longest gap a uint16 code holds; an escape code 0 skips this many positions


def warmup_sparsity(epoch: int, warmup_epochs: int, final_sparsity: float) -> float:
    """DGC's exponential warm-up: 1 - 0.25**(epoch + 1) while epoch < warmup_epochs, never
    above the final sparsity; the final sparsity after."""
    return min(1 - 0.25 ** (epoch + 1), final_sparsity) if epoch < warmup_epochs else final_sparsity


class DGCCompressor(GradientDroppingCompressor):
    communication = "allgatherv"
    memory = "dgc"
    options = (
        *GradientDroppingCompressor.options,
        Option(
            "warmup_epochs", "integer", 0, 10_000, "epochs of sparsity warm-up (paper: 4)", flags="--sparsity-warmup"
        ),
    )
    passes = (2.1, 1)  # the threshold sweep of Gradient Dropping; the top-k and the sort run on what passed

    def __init__(self, rng: np.random.Generator, ratio: float = 0.001, sample: float = 0.01, warmup_epochs: int = 4):
        super().__init__(rng, ratio, sample)
        if not (isinstance(warmup_epochs, int) and warmup_epochs >= 0):
            raise ValueError(f"warmup_epochs: expected a whole number >= 0, got {warmup_epochs!r}")
        self.final_ratio, self.warmup_epochs = self.ratio, warmup_epochs

    def set_epoch(self, epoch: int) -> None:
        sparsity = warmup_sparsity(epoch, self.warmup_epochs, 1 - self.final_ratio)
        self.ratio = self.final_ratio if sparsity == 1 - self.final_ratio else 1 - sparsity  # no 1 - (1 - r) rounding

    @staticmethod
    def compresses(ndim: int) -> bool:
        """The authors' rule: tensors of two or more dimensions; 1-D ones go dense."""
        return ndim > 1

    def encoded_nbytes(self, n, itemsize=4):
        """At the target ratio, without escapes: k 16-bit gaps and k values (the fitted count:
        module docstring)."""
        return count(self.ratio, n) * (2 + itemsize)

    def compress(self, tensor, name):
        (indices, values), ctx = super().compress(tensor, name)
        k = count(self.ratio, np.size(tensor))
        if indices.size > k:
            indices = indices[np.argpartition(np.abs(values), values.size - k)[values.size - k :]]
        indices = np.sort(indices)
        return (encode_gaps(indices), np.ravel(tensor)[indices]), ctx

    def indices(self, payload) -> np.ndarray:
        """The flat indices of the entries the payload carries, in increasing order."""
        return decode_gaps(payload[0])

    def decompress(self, payload, ctx):
        shape, dtype = ctx
        return scatter(self.indices(payload), payload[1], shape, dtype)


def encode_gaps(indices: np.ndarray) -> np.ndarray:
    """Increasing flat indices as uint16 gaps (the first from -1), each gap longer than
    GAP_MAX preceded by escape codes 0 worth GAP_MAX positions each."""
    gaps = np.diff(indices.astype(np.int64), prepend=-1)
    escapes = (gaps - 1) // GAP_MAX
    codes = np.zeros(gaps.size + int(escapes.sum()), np.uint16)
    codes[np.arange(gaps.size) + np.cumsum(escapes)] = gaps - GAP_MAX * escapes
    return codes


def decode_gaps(codes: np.ndarray) -> np.ndarray:
    """The inverse of ``encode_gaps``: the flat indices, as int64."""
    steps = np.where(codes == 0, GAP_MAX, codes.astype(np.int64))
    return (np.cumsum(steps) - 1)[codes != 0]


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
        if compressor.kept(payload, tensor.size) == tensor.size:
            # sent whole (a tensor DGC leaves dense): nothing was delayed, so no momentum is
            # stale and none is masked; this is momentum SGD, as the authors' optimizer runs it
            self.accumulated[name] = np.zeros_like(tensor)
            return
        sent = compressor.indices(payload) if hasattr(compressor, "indices") else payload[0]  # else (index, value)
        self.accumulated[name] = tensor.copy()
        self.accumulated[name].flat[sent] = 0
        self.velocities[name] = self.velocities[name].copy()
        self.velocities[name].flat[sent] = 0
