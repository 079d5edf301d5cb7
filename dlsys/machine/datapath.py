"""How many bytes the real data path moves through memory, and what that allows.

On one machine an all-reduce between processes is not limited by a network but by memory
bandwidth: every byte is read or written by some core. Count the passes of the ring
all-reduce of ``dlsys.collectives`` over an n-byte buffer on p ranks (per rank; each
step handles one block of n/p bytes):

* reduce-scatter, p-1 steps: read my block, read the peer's block, write the sum: 3 n/p;
* all-gather, p-1 steps: read the peer's block, write it into my result: 2 n/p;
* buffered sends (``send``, or ``isend`` of ordinary memory) also copy every sent block
  into shared memory first, 2(p-1) sends of (read n/p + write n/p): 4 n/p per step pair.
  Lent sends (``isend`` of ``comm.alloc`` memory) let the receiver read the sender's own
  buffer, so that copy disappears.

Add the passes up for the bytes a rank moves (copied and lent), against 2 n for one memcpy
of n bytes. If the p ranks together stream s times one core's memory bandwidth BW (s ~ 1.35
for the two cores of the machine in docs/performance.md), the all-reduce takes at least all
ranks' bytes / (s BW) and the memcpy 2 n / BW; with the nccl-tests bus bandwidth
busbw = (n / t) 2(p-1)/p that bounds busbw / memcpy from above (lesson 07 derives it).
Caches help a little, wake-ups and page faults cost a little; ``dlsys bench allreduce``
measures it (docs/performance.md).
"""

from __future__ import annotations


def _check(p: int, low: int, nbytes: float = 0.0, speedup: float = 1.0) -> None:
    if not isinstance(p, int) or isinstance(p, bool) or p < low:
        raise ValueError(f"p must be an integer >= {low} (ranks), got {p!r}")
    if not nbytes >= 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
    if not speedup > 0:
        raise ValueError(f"speedup must be > 0 (all cores' memory bandwidth over one core's), got {speedup!r}")


def ring_allreduce_traffic_bytes(p: int, nbytes: float, lent: bool) -> float:
    """Bytes one rank reads plus writes in a ring all-reduce of an nbytes buffer on p ranks."""
    _check(p, 1, nbytes)
    # BEGIN SOLUTION ring_memory_traffic
    per_step_pair = 5 if lent else 9  # 3 (reduce) + 2 (gather), + 2 x 2 to copy each sent block
    return per_step_pair * (p - 1) * nbytes / p
    # END SOLUTION


def memcpy_ratio_bound(p: int, lent: bool, speedup: float = 1.35) -> float:
    """Upper bound on busbw / memcpy bandwidth when p >= 2 ranks share ``speedup`` x one
    core's memory bandwidth (see the module docstring)."""
    _check(p, 2, speedup=speedup)
    # BEGIN SOLUTION ring_memory_traffic
    n = 1.0
    allreduce_s = p * ring_allreduce_traffic_bytes(p, n, lent) / speedup  # in units of 1 / BW
    memcpy_s = 2 * n
    busbw = n / allreduce_s * 2 * (p - 1) / p
    return busbw / (n / memcpy_s)
    # END SOLUTION
