"""Where the ranks stand in an animation: in the shape of the algorithm that runs (a ring,
a star, a binomial tree, a hypercube, supernodes), each registry algorithm's ``shape``."""

from __future__ import annotations

import math

import numpy as np

from ..collectives.registry import REGISTRY

LAYOUTS = ("circle", "star", "tree", "hypercube", "two-level")
# hypercube: dimension d moves a rank along HYPERCUBE_AXES[d] (a square, then a cube drawn in
# perspective, then two cubes side by side...): partners of a step lie on parallel lines
HYPERCUBE_AXES = [(1.0, 0.0), (0.0, 1.0), (0.45, 0.3), (2.0, 0.0), (0.0, 2.0), (4.2, 0.0)]


def rank_positions(ranks: int, layout: str = "circle", groups: list | None = None) -> np.ndarray:
    """(ranks, 2) coordinates within [-1, 1] of the ranks, drawn in the shape of an algorithm
    (each registry algorithm's ``shape``):
    - "circle": rank 0 at the top, the others clockwise (a ring);
    - "star": rank 0 (a server) in the centre, the others on the circle;
    - "tree": MPICH's binomial tree under rank 0 (v's parent is v minus its lowest set bit),
      rank 0 at the top, a level per hop;
    - "hypercube": rank v at the sum of HYPERCUBE_AXES[d] over its set bits d, so recursive
      doubling's partners (v and v XOR 2^d) are joined by parallel lines per step;
    - "two-level": ``groups`` (the supernodes, lists of ranks, leaders first) side by side,
      each a binomial tree under its leader, the leaders on an arc above them.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "tree":
        return _fit(_tree(list(range(ranks))), ranks)
    if layout == "hypercube":
        dims = max((ranks - 1).bit_length(), 1)
        if dims > len(HYPERCUBE_AXES):  # past 64 ranks no drawing of a hypercube is legible: a ring
            return rank_positions(ranks)
        axes = np.array(HYPERCUBE_AXES[:dims])
        return _fit(np.array([[(v >> d) & 1 for d in range(dims)] for v in range(ranks)], dtype=float) @ axes, ranks)
    if layout == "two-level":
        groups = groups or [list(range(ranks))]
        if sorted(r for g in groups for r in g) != list(range(ranks)):
            raise ValueError(f"groups must hold every rank 0..{ranks - 1} once, got {groups}")
        xy = np.zeros((ranks, 2))
        for g, members in enumerate(groups):
            tree = _tree(members)  # the supernode's own binomial tree, within [0, 1] x [-depth, 0]
            tree[:, 0] = ((tree[:, 0] - 0.5) * 0.8 + g + 0.5) / len(groups)  # its own band, a gap between
            lift = 1.2 + 0.5 * math.sin(math.pi * (g + 0.5) / len(groups))  # the leaders' arc
            xy[members] = tree + [0.0, lift]
        return _fit(xy, ranks)
    on_circle = ranks - 1 if layout == "star" else ranks
    angles = math.pi / 2 - 2 * math.pi * np.arange(on_circle) / max(on_circle, 1)
    ring = np.column_stack([np.cos(angles), np.sin(angles)])
    return np.vstack([[0.0, 0.0], ring]) if layout == "star" else ring


def _tree(members: list[int]) -> np.ndarray:
    """(len(members), 2) coordinates of MPICH's binomial tree over ``members`` (relative
    rank v = its index; parent v - lowest bit of v): y = -depth (the number of set bits),
    x in [0, 1] with each subtree over its own span, so no two edges cross."""
    p = len(members)
    # children of v: v + k for the powers of two k below v's lowest bit (the root: below p)
    kids = [
        [v + k for k in (1 << b for b in range(p.bit_length())) if v + k < p and (v == 0 or k < v & -v)]
        for v in range(p)
    ]
    leaves = sum(not k for k in kids)
    slots = iter(np.linspace(0.0, 1.0, leaves) if leaves > 1 else [0.5])
    xy = np.zeros((p, 2))

    def place(v: int) -> float:  # leaves left to right, smallest subtree first; a parent over its children
        xy[v] = (float(np.mean([place(c) for c in kids[v]])) if kids[v] else next(slots), -bin(v).count("1"))
        return xy[v, 0]

    place(0)
    return xy


def _fit(xy: np.ndarray, ranks: int) -> np.ndarray:
    """``xy`` scaled into [-1, 1] on both axes (y up: the first rank at the top)."""
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    out = 2 * (xy - lo) / span - 1
    out[:, hi - lo == 0] = 0.0
    return out.reshape(ranks, 2)


def algorithm_positions(collective: str, algorithm: str, ranks: int, groups: list | None = None) -> np.ndarray:
    """The ranks drawn in the shape of the algorithm that runs (its registry ``shape``; where
    p is not a power of two and it has a ``fallback``, the fallback's): a binomial tree,
    a hypercube, supernodes (``groups``, as the run's network cut them) or a ring."""
    entry = REGISTRY[collective, algorithm]
    if entry.fallback and ranks & (ranks - 1):
        entry = REGISTRY[collective, entry.fallback]
    return rank_positions(ranks, entry.shape, groups)
