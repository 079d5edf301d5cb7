"""The key space: every parameter tensor is a key, and the keys' values lie in one flat
space cut into one contiguous range per server (a large tensor is sliced across servers,
as ps-lite slices big arrays)."""

from __future__ import annotations

import numpy as np


class KeyLayout:
    """Keys 0..K-1 of sizes `sizes` in one flat space; server s owns [bounds[s], bounds[s+1])."""

    def __init__(self, sizes, servers: int):
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = int(self.offsets[-1])
        if not 1 <= servers <= total:
            raise ValueError(f"servers must be in 1..{total} (the number of parameters), got {servers}")
        self.bounds = [int(b[0]) for b in np.array_split(np.arange(total), servers)] + [total]
        self.servers = servers
        self._parts: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}

    def parts(self, keys: tuple) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each server: (positions in the concatenated values of `keys`, the same
        elements as offsets into that server's range)."""
        if keys not in self._parts:
            if not all(0 <= k < len(self.offsets) - 1 for k in keys):
                raise ValueError(f"keys must be in 0..{len(self.offsets) - 2}, got {keys}")
            elements = np.concatenate([np.arange(self.offsets[k], self.offsets[k + 1]) for k in keys])
            self._parts[keys] = [
                (np.flatnonzero((elements >= lo) & (elements < hi)), elements[(elements >= lo) & (elements < hi)] - lo)
                for lo, hi in zip(self.bounds, self.bounds[1:])
            ]
        return self._parts[keys]
