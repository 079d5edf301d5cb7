"""Any size, any scale, within a budget: how long each rank's real arrays are.

A run stands for ``logical_count`` elements per rank on hundreds of ranks while its real
buffers stay under a memory budget: each real element stands for ``scale`` logical ones
(``dlsys.comm.logical``), and every message is charged at its logical size, so virtual
times and byte counts are those of the logical run. ``plan_buffers`` picks the real
length; the CLI, the app, the lessons and the benchmarks all size their buffers with it,
report the scale it chose, and refuse what cannot be represented exactly.

Exactness: a uniform scale keeps every block of an algorithm that cuts the buffer into
``unit`` blocks exact when ``unit`` divides the logical count (the real count is then a
multiple of ``unit``). When it does not, a ring (which only ever sends its blocks) runs
on one real element per block, each with its own scale (``per_block``): exact as well.
Anything else is refused with the nearest exact sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..comm.logical import LogicalArray, per_block
from ..units import format_bytes

DEFAULT_MAX_MEMORY_BYTES = 2**30  # real buffers of all ranks together: safe on a laptop
# A rank of the processes backend is a fresh interpreter with numpy: 35 MiB resident,
# measured (ru_maxrss), some of it shared libraries; counted against the budget.
PROCESS_RANK_BYTES = 32 * 2**20


@dataclass(frozen=True)
class BufferPlan:
    """How each rank holds a buffer of ``logical_count`` elements: ``real_count`` real ones,
    each standing for ``scales[0]`` logical ones (or, with one scale per block, element i
    for ``scales[i]``). ``memory_bytes`` estimates the real memory of all ranks."""

    logical_count: int
    real_count: int
    scales: tuple
    dtype: str
    memory_bytes: int

    @property
    def scale(self) -> float:
        """Logical elements per real element (the mean, if the blocks differ)."""
        return self.logical_count / self.real_count if self.real_count else 1.0

    @property
    def per_block(self) -> bool:
        return len(self.scales) > 1

    def wrap(self, real: np.ndarray) -> np.ndarray:
        """``real`` (``real_count`` elements) as the logical buffer it stands for."""
        if self.per_block:
            return per_block(real, self.scales)
        return real if self.scales[0] == 1 else LogicalArray(real, self.scales[0])

    def full(self, fill: float) -> np.ndarray:
        """The logical buffer, every real element ``fill``."""
        return self.wrap(np.full(self.real_count, fill, self.dtype))


def plan_buffers(
    logical_count: int,
    ranks: int,
    dtype="float32",
    *,
    unit: int = 1,
    copies: int = 3,
    split_per_block: bool = False,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    real: bool = False,
    overhead_bytes: int = 0,
) -> BufferPlan:
    """Real buffers for ``ranks`` ranks that each stand for ``logical_count`` elements,
    within ``max_memory_bytes`` for all ranks together, ``copies`` buffers per rank (the
    input, the result, the working copies of the algorithm).

    Real data when it fits. Otherwise a uniform scale s: real_count = unit * k with
    k the largest divisor of logical_count / unit that fits (``unit``: the blocks the
    algorithm cuts a buffer into, so every real block stands for exactly its logical
    block). If ``unit`` does not divide logical_count and ``split_per_block`` (a ring, that
    only ever sends its ``unit`` blocks), one real element per block with per-block
    scales. ``real=True`` forbids scaling. ``overhead_bytes``: memory the run needs besides
    its buffers (``PROCESS_RANK_BYTES`` per rank on the processes backend). Raises
    ValueError, naming the budget, for what cannot be represented exactly within it.
    """
    itemsize = np.dtype(dtype).itemsize
    if not (isinstance(logical_count, (int, np.integer)) and logical_count >= 0):
        raise ValueError(f"logical_count must be an integer >= 0, got {logical_count!r}")

    def memory(count: int) -> int:
        return overhead_bytes + ranks * copies * count * itemsize

    def plan(count: int, scales: tuple) -> BufferPlan:
        return BufferPlan(int(logical_count), count, scales, np.dtype(dtype).name, memory(count))

    budget = format_bytes(max_memory_bytes)
    if overhead_bytes >= max_memory_bytes:
        raise ValueError(
            f"the run needs {format_bytes(overhead_bytes)} besides its buffers ({ranks} ranks), "
            f"more than the memory budget {budget} (--max-memory): use fewer ranks or the threads backend"
        )
    if memory(logical_count) <= max_memory_bytes:
        return plan(logical_count, (1,))
    if real:
        raise ValueError(
            f"real buffers of {ranks} ranks x {format_bytes(logical_count * itemsize)} need about "
            f"{format_bytes(memory(logical_count))} ({copies} copies per rank), more than the memory "
            f"budget {budget} (--max-memory): raise it, or let each element stand for several (drop --real)"
        )
    if memory(unit) > max_memory_bytes:
        raise ValueError(
            f"even one real element per block ({ranks} ranks x {unit} blocks x {copies} copies) needs "
            f"{format_bytes(memory(unit))}, more than the memory budget {budget} (--max-memory)"
        )
    blocks, rest = divmod(logical_count, unit)
    if rest == 0:
        k = _largest_divisor_at_most(blocks, (max_memory_bytes - overhead_bytes) // (memory(unit) - overhead_bytes))
        return plan(unit * k, (blocks // k,))
    if split_per_block and blocks >= 1:
        return plan(unit, tuple(blocks + (i < rest) for i in range(unit)))
    low, high = blocks * unit, (blocks + 1) * unit
    raise ValueError(
        f"{logical_count} elements do not split into {unit} equal blocks, so they cannot be scaled "
        f"exactly within the memory budget {budget} (--max-memory): use a multiple of {unit} elements "
        f"(e.g. {low} or {high}) or raise the budget"
    )


def _largest_divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is <= limit (limit >= 1): the divisors come in pairs
    (d, n / d) with d <= sqrt(n), tried a million at a time (memory stays a few MB)."""
    if n <= limit:
        return n
    best, root, chunk = 1, math.isqrt(n), 2**20
    for start in range(1, root + 1, chunk):
        d = np.arange(start, min(start + chunk, root + 1), dtype=np.int64)
        d = d[n % d == 0]
        pairs = np.concatenate([d, n // d])
        fitting = pairs[pairs <= limit]
        if fitting.size:
            best = max(best, int(fitting.max()))
    return best
