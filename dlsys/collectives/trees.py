"""Rounds and binomial trees: barrier, broadcast, scatter, gather, reduce.

Costs (p ranks, n bytes, L = ceil(lg p), Thakur, Rabenseifner & Gropp 2005) are in the
registry (dlsys.collectives.registry). A binomial tree rooted at ``root`` works on
relative ranks v = (rank - root) mod p: rank v's parent is v minus its lowest set bit,
and its children are v + 2^k for every 2^k below that bit. Helpers: base.py (``send``,
``recv_like``, ``combine``; see ring.py).
"""

from __future__ import annotations

import numpy as np

from .blocks import TAG, cat, combine, recv_like, send, split_like


def barrier_dissemination(comm) -> None:
    """Dissemination barrier (Hensgen, Finkel & Manber 1988): in round k every rank notifies
    rank + 2^k and hears from rank - 2^k; after ceil(lg p) rounds everyone has heard from
    everyone, indirectly. L alpha."""
    token, k = np.empty(0, np.uint8), 1
    while k < comm.size:
        send(
            comm,
            token,
            (comm.rank + k) % comm.size,
            "barrier",
            k.bit_length() - 1,
            label=f"barrier round {k.bit_length() - 1}",
        )
        comm.recv(source=(comm.rank - k) % comm.size, tag=TAG)
        k <<= 1


def lowest_bit(v: int, p: int) -> int:
    """The lowest set bit of relative rank v (p or more for the root, which has no parent)."""
    mask = 1
    while mask < p and not v & mask:
        mask <<= 1
    return mask


def broadcast_binomial(comm, x: np.ndarray, root: int) -> np.ndarray:
    """Root's x to every rank down a binomial tree: receive from the parent, then send to
    the children, largest subtree first. lg p (alpha + n beta) at powers of two.

        v = (rank - root) mod p;  m = lowest set bit of v
        if v != 0: x = receive from v - m
        for k = m/2, m/4, ..., 1: if v + k < p: send x to v + k   (phase "broadcast", step lg k)

    Ranks here are relative: v's real rank is (v + root) mod p.
    """
    # BEGIN SOLUTION binomial_broadcast
    p = comm.size
    v = (comm.rank - root) % p
    mask = lowest_bit(v, p)
    if v:
        x = recv_like(comm, (comm.rank - mask) % p, x, "broadcast")
    mask >>= 1
    while mask:
        if v + mask < p:
            send(comm, x, (comm.rank + mask) % p, "broadcast", mask.bit_length() - 1)
        mask >>= 1
    return x
    # END SOLUTION


def scatter_binomial(comm, x: np.ndarray, root: int) -> np.ndarray:
    """Rank r gets block r of root's x, down a binomial tree: each rank receives the blocks
    of its whole subtree and passes the upper half on. lg p alpha + (p-1)/p n beta."""
    p = comm.size
    v = (comm.rank - root) % p
    blocks = np.array_split(x.ravel(), p)
    by_v = [blocks[(u + root) % p] for u in range(p)]  # blocks in relative-rank order
    mask = lowest_bit(v, p)
    held = by_v[v : min(v + mask, p)]  # this rank's subtree
    if v:
        held = split_like(recv_like(comm, (comm.rank - mask) % p, cat(held, x.dtype), "scatter"), held)
    mask >>= 1
    while mask:
        if v + mask < p:
            send(comm, cat(held[mask : 2 * mask], x.dtype), (comm.rank + mask) % p, "scatter", mask.bit_length() - 1)
        mask >>= 1
    return held[0]


def gather_binomial(comm, x: np.ndarray, root: int):
    """Root gets every rank's x stacked (p, *shape), others None: up a binomial tree, each
    rank collects its subtree and hands it to its parent. lg p alpha + (p-1)/p n beta
    (n: the whole result)."""
    p = comm.size
    v, mask, held = (comm.rank - root) % p, 1, [x.ravel()]
    while mask < p:
        if v & mask:
            send(comm, cat(held, x.dtype), (comm.rank - mask) % p, "gather", mask.bit_length() - 1)
            return None
        if v + mask < p:
            subtree = np.empty((min(mask, p - v - mask), x.size), x.dtype)
            held.append(recv_like(comm, (comm.rank + mask) % p, subtree, "gather").ravel())
        mask <<= 1
    return np.roll(cat(held, x.dtype).reshape(p, *x.shape), root, axis=0)


def reduce_binomial(comm, x: np.ndarray, op: str, root: int):
    """Root gets op over every rank's x, others None: up a binomial tree, each rank reduces
    its children's partial results into its own. lg p (alpha + n beta + n gamma)."""
    p = comm.size
    v, mask, acc = (comm.rank - root) % p, 1, x
    while mask < p:
        if v & mask:
            send(comm, acc, (comm.rank - mask) % p, "reduce", mask.bit_length() - 1)
            return None
        if v + mask < p:
            acc = combine(comm, acc, recv_like(comm, (comm.rank + mask) % p, acc, "reduce"), op)
        mask <<= 1
    return acc


def allreduce_reduce_broadcast(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Binomial reduce to rank 0, then binomial broadcast from it. 2 lg p (alpha + n beta)
    + lg p n gamma: simple, and twice the latency and p/2 times the bytes of the best."""
    reduced = reduce_binomial(comm, x, op, 0)
    return broadcast_binomial(comm, x if reduced is None else reduced, 0)
