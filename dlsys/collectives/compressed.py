"""A compressed all-reduce: GRACE's communication step (Xu et al. 2021, sands-lab/grace,
grace_dl/dist/communicator), for any ``dlsys.compress`` method and memory.

encode:
    g = memory.compensate(grad, name)                       error feedback in
    payload, ctx = compressor.compress(g, name)              charged on the node's roofline
    memory.update(g, name, compressor, payload, ctx)         error feedback out
exchange, by compressor.communication:
      "allreduce"   every part summed over the ranks (dense values at the same positions:
                    none, fp16, random-k), decompressed once, divided by p
      "allgather"   the packed payloads all-gathered (fixed size: one length for all),
                    each decompressed, then aggregated (their mean)
      "allgatherv"  the same, but the part lengths travel first and are checked
                    (sparse payloads differ in length between ranks)

The payload messages carry the encoded bytes (``payload_nbytes``) and nothing else; besides
them only the all-gatherv's part lengths (8 bytes per part per rank) travel, and TernGrad's
scaler: its ranks first agree on one (the max of their ``local_scale``, a 4-byte all-reduce).
"""

from __future__ import annotations

import numpy as np

from ..compress.compressor import Compressor, Memory, NoneMemory, pack_payload, unpack_payload
from . import ring
from .dispatch import allgather, allreduce


def encode(
    comm,
    grad: np.ndarray,
    compressor: Compressor,
    memory: Memory,
    name: str = "grad",
    algorithm: str = "ring",
    share_scale: bool = True,
) -> tuple:
    """This rank's (payload, ctx) for ``grad``, with ``memory``'s error feedback; charges
    the compression (and the memory's sweeps) on the node's roofline. ``share_scale=False``
    (a parameter server's worker, which has no peers to agree with) keeps a local scaler."""
    g = memory.compensate(grad, name)
    options = {}
    if compressor.shares_scale and share_scale:
        local = np.array([compressor.local_scale(g)], np.float32)
        options["scale"] = float(allreduce(comm, local, op="max", algorithm=algorithm)[0])
    payload, ctx = compressor.compress(g, name, **options)
    flops, nbytes = compressor.cost(grad.size, grad.dtype.itemsize)[0]
    comm.compute(flops=flops, nbytes=nbytes + memory.passes * grad.nbytes, label=f"compress {name}")
    memory.update(g, name, compressor, payload, ctx)
    return payload, ctx


def decode(comm, payload, ctx, compressor: Compressor, grad: np.ndarray, name: str = "grad") -> np.ndarray:
    """One payload back to a dense gradient like ``grad``; charges the decompression."""
    flops, nbytes = compressor.cost(grad.size, grad.dtype.itemsize)[1]
    comm.compute(flops=flops, nbytes=nbytes, label=f"decompress {name}")
    return compressor.decompress(payload, ctx)


def exchange(
    comm, payload, ctx, compressor: Compressor, grad: np.ndarray, name: str = "grad", algorithm: str = "ring"
) -> np.ndarray:
    """Every rank's payload to every rank, decoded and aggregated: the mean gradient."""
    if compressor.communication == "allreduce":
        summed = tuple(allreduce(comm, part, op="sum", algorithm=algorithm) for part in payload)
        return decode(comm, summed, ctx, compressor, grad, name) / comm.size
    packed = pack_payload(payload)
    if compressor.communication == "allgather":
        payloads = [unpack_payload(row, payload) for row in allgather(comm, packed)]
    else:
        counts = allgather(comm, np.array([a.size for a in payload], np.int64))
        if counts.min() < 0 or counts.max() > grad.size:
            raise ValueError(f"payload: part lengths {counts.tolist()} do not fit {grad.size} entries")
        part_nbytes = counts * np.array([a.itemsize for a in payload])
        blocks = ring.allgatherv_ring(comm, packed, part_nbytes.sum(axis=1).tolist())
        payloads = [unpack_payload(block, payload, sizes) for block, sizes in zip(blocks, part_nbytes)]
    return compressor.aggregate([decode(comm, each, ctx, compressor, grad, name) for each in payloads])


def compressed_allreduce(
    comm,
    grad: np.ndarray,
    compressor: Compressor,
    memory: Memory | None = None,
    name: str = "grad",
    algorithm: str = "ring",
) -> np.ndarray:
    """The mean over the ranks of what each rank's compressed ``grad`` decodes to (the same
    array on every rank), with ``memory``'s error feedback (default: none)."""
    payload, ctx = encode(comm, grad, compressor, memory or NoneMemory(), name, algorithm)
    return exchange(comm, payload, ctx, compressor, grad, name, algorithm)
