"""The two interfaces of gradient compression, after GRACE (Xu et al. 2021, sands-lab/grace).

A ``Compressor`` turns a gradient into a *payload* (the numpy arrays that travel) and a
*ctx* (what the sender keeps locally to decode: (shape, dtype), and for random-k the
indices every rank draws alike). A receiver that did not compress decodes with
(shape, dtype) of its own. A ``Memory`` wraps
it for error feedback: ``compensate`` before compressing, ``update`` after.

    g = memory.compensate(grad, name)
    payload, ctx = compressor.compress(g, name)
    memory.update(g, name, compressor, payload, ctx)
    # send payload; the receiver calls compressor.decompress(payload, ctx)

Bytes on the wire are ``payload_nbytes(payload)``; each method documents its formula and
gives it as ``encoded_nbytes(n, itemsize)``. How the payloads travel is the method's
``communication``: "allreduce" where summing payloads is meaningful (dense values at the
same positions on every rank), "allgather" for other fixed-size codes, "allgatherv" where
the size varies by rank (dlsys.collectives.compressed does the three).

Compute: compressing and decompressing n entries cost ``passes`` sweeps over the dense
gradient in memory (each reads or writes n * itemsize bytes) and ``ops`` operations per
entry, one (compress, decompress) pair per method, counted from the numpy calls of its
code. ``cost(n, itemsize)`` turns them into (flops, nbytes) for the node model's roofline
(``comm.compute(flops=..., nbytes=...)``); ``benchmarks/compress_cost.py`` measures them
against a memcpy on this machine.
"""

from abc import ABC, abstractmethod

import numpy as np

from ..options import Option

# the options several methods share, declared once (each method lists its own in ``options``)
RATIO = Option("ratio", "number", 0, 1, "fraction of entries kept, in (0, 1]", low_open=True)
SAMPLE = Option("sample", "number", 0, 1, "fraction sampled for the threshold", low_open=True)


def payload_nbytes(payload) -> int:
    """Encoded bytes: the sum of the payload arrays' ``nbytes`` (nothing else travels)."""
    return int(sum(a.nbytes for a in payload))


def check_float(tensor) -> np.ndarray:
    """The gradient as an array; a ValueError unless its dtype is a float."""
    tensor = np.asarray(tensor)
    if not np.issubdtype(tensor.dtype, np.floating):
        raise ValueError(f"tensor: expected a float array (float16, float32 or float64), got dtype {tensor.dtype}")
    return tensor


def check_ratio(ratio, argument="ratio") -> float:
    if not 0 < ratio <= 1:
        raise ValueError(f"{argument}: expected a fraction in (0, 1], got {ratio!r}")
    return float(ratio)


def count(ratio: float, n: int) -> int:
    """How many of n entries a ratio keeps: ceil(ratio * n), at least one (none of none)."""
    return min(n, max(1, int(np.ceil(ratio * n))))


def scatter(indices, values, shape, dtype) -> np.ndarray:
    """A dense array of ``shape``: ``values`` at the flat ``indices``, zero elsewhere."""
    dense = np.zeros(int(np.prod(shape)), dtype)
    dense[indices] = values
    return dense.reshape(shape)


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned codes below 2**bits, ``bits`` bits each, into ceil(n * bits / 8) bytes."""
    planes = (codes.astype(np.uint8)[:, None] >> np.arange(bits, dtype=np.uint8)) & 1
    return np.packbits(planes.ravel())


def unpack_bits(packed: np.ndarray, bits: int, n: int) -> np.ndarray:
    """The inverse of ``pack_bits``: n codes as uint8."""
    planes = np.unpackbits(packed)[: n * bits].reshape(n, bits)
    return (planes << np.arange(bits, dtype=np.uint8)).sum(axis=1, dtype=np.uint8)


def pack_payload(payload) -> np.ndarray:
    """The payload's arrays end to end as one uint8 buffer (one message; same bytes)."""
    return np.concatenate(
        [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in payload] or [np.empty(0, np.uint8)]
    )


def unpack_payload(buffer: np.ndarray, like, part_nbytes=None) -> tuple:
    """The inverse of ``pack_payload``: parts with the dtypes of ``like`` (this rank's own
    payload: every rank runs the same method) and the sizes ``part_nbytes`` (default:
    like's, for fixed-size codes)."""
    sizes = [a.nbytes for a in like] if part_nbytes is None else [int(k) for k in part_nbytes]
    if sum(sizes) != buffer.nbytes:
        raise ValueError(f"payload: {buffer.nbytes} bytes arrived, the parts add up to {sum(sizes)}")
    parts = np.split(buffer, np.cumsum(sizes)[:-1]) if sizes else []
    return tuple(part.view(a.dtype) for part, a in zip(parts, like))


def frame(payload) -> np.ndarray:
    """A self-describing message: the number of parts and one (nbytes, dtype code) pair per
    part as int64, then the packed parts: 8 + 16 * parts bytes more than the payload (a
    point-to-point push has no collective to exchange the lengths first)."""
    header = np.array([(a.nbytes, ord(a.dtype.char)) for a in payload], np.int64).reshape(-1)
    return np.concatenate(
        [np.array([len(payload)], np.int64).view(np.uint8), header.view(np.uint8), pack_payload(payload)]
    )


def unframe(buffer: np.ndarray) -> tuple:
    """The payload of a ``frame``."""
    parts = int(buffer[:8].view(np.int64)[0])
    header = buffer[8 : 8 + 16 * parts].view(np.int64).reshape(parts, 2)
    like = [np.empty(0, np.dtype(chr(code))) for code in header[:, 1]]
    return unpack_payload(buffer[8 + 16 * parts :], like, header[:, 0])


class Compressor(ABC):
    """compress(tensor, name) -> (payload, ctx); decompress(payload, ctx) -> dense array."""

    communication = "allgather"
    shares_scale = False  # True: compress takes ``scale``, the max of every rank's local_scale
    same_draws_on_every_rank = False  # True: every rank's Generator has the same seed (random-k)
    memory = "none"  # the memory its paper pairs it with (``MEMORIES``)
    passes: tuple[float, float] = (1, 1)  # sweeps over the dense gradient: (compress, decompress)
    ops: tuple[float, float] = (1, 1)  # operations per entry: (compress, decompress)
    options: tuple[Option, ...] = ()  # one per constructor keyword (but the Generator)

    @abstractmethod
    def compress(self, tensor, name):
        """The payload (tuple of arrays that travel) and the ctx needed to decode it."""

    @abstractmethod
    def decompress(self, payload, ctx):
        """A dense array of the original shape and dtype."""

    def aggregate(self, tensors):
        """Combine the ranks' decompressed gradients: their mean."""
        return sum(tensors) / len(tensors)

    def local_scale(self, tensor) -> float:
        """A ``shares_scale`` method's scale of this rank's ``tensor``: the communication
        step passes the max over every rank to ``compress`` (TernGrad's max norm)."""
        raise NotImplementedError(f"{type(self).__name__} does not share a scale")

    def set_epoch(self, epoch: int) -> None:
        """Called by the training loop at each epoch (DGC's sparsity warm-up uses it)."""

    @staticmethod
    def compresses(ndim: int) -> bool:
        """Whether the method's paper compresses a parameter tensor of ``ndim`` dimensions;
        the caller sends the others dense (DGC leaves 1-D tensors, biases and batch-norm
        scales, uncompressed). Flat slices of a gradient buffer carry no shape: callers that
        hand those over compress them all."""
        return True

    def kept(self, payload, n: int) -> int:
        """How many of the n entries the payload carries a value for (all, unless it
        sparsifies)."""
        return n

    @abstractmethod
    def encoded_nbytes(self, n: int, itemsize: int = 4) -> int:
        """Bytes of the payload of n entries (threshold methods: at their target ratio)."""

    def cost(self, n: int, itemsize: int = 4) -> tuple[tuple[float, float], tuple[float, float]]:
        """((flops, nbytes) of compress, (flops, nbytes) of decompress) for n entries."""
        (c_ops, d_ops), (c_passes, d_passes) = self.ops, self.passes
        return (c_ops * n, c_passes * n * itemsize), (d_ops * n, d_passes * n * itemsize)


class Memory(ABC):
    passes = 0  # sweeps over the dense gradient per step (compensate + update), charged with compress

    @abstractmethod
    def compensate(self, tensor, name):
        """The gradient to compress (with whatever this memory carries over)."""

    def update(self, tensor, name, compressor, payload, ctx):
        """Remember what compression lost (nothing by default)."""


class NoneMemory(Memory):
    """No error feedback: what compression drops is lost."""

    def compensate(self, tensor, name):
        return tensor


class ResidualMemory(Memory):
    """Error feedback (Seide et al. 2014; Karimireddy et al. 2019): e <- g + e - D(C(g + e)).

    What one step fails to send is added to the next step's gradient, so over T steps
    sum(transmitted) + e_T = sum(gradients) exactly, and nothing is lost for good.
    """

    passes = 6  # g + e, then e <- g - decoded: each reads two sweeps and writes one

    def __init__(self):
        self.residuals = {}

    def compensate(self, tensor, name):
        """The gradient plus the residual ``update`` kept for this name (none at first)."""
        # BEGIN SOLUTION topk_error_feedback
        return tensor + self.residuals[name] if name in self.residuals else tensor
        # END SOLUTION

    def update(self, tensor, name, compressor, payload, ctx):
        """Keep in ``self.residuals[name]`` what compressing ``tensor`` (the compensated
        gradient) did not transmit: what the receivers decode is ``compressor.decompress``."""
        # BEGIN SOLUTION topk_error_feedback
        self.residuals[name] = tensor - compressor.decompress(payload, ctx)
        # END SOLUTION
