"""Recursive halving and doubling (Thakur, Rabenseifner & Gropp 2005): lg p steps, each an
exchange with the partner whose rank differs in one bit.

They need a power of two. MPICH's fold makes one for the all-reduces: with p2 = 2^floor(lg p)
and extra = p - p2, the first 2*extra ranks pair up, the odd one hands its x to the even
one ("fold") and gets the result back at the end ("unfold"); the remaining p2 ranks run
the algorithm on virtual ranks 0..p2-1. The all-gather and reduce-scatter fall back to the
ring instead (the registry says so; dlsys.collectives dispatches).

Two step orders of Rabenseifner's all-reduce: ours halves the vector with the farthest
partner first (distance p/2, then p/4, ... 1); MPICH and Open MPI halve it with the nearest
first ("recursive vector halving and distance doubling": distance 1, 2, ... p/2; MPICH
v3.2 src/mpi/coll/allreduce.c lines 462-519, Open MPI coll_base_allreduce.c
ompi_coll_base_allreduce_intra_redscat_allgather). On a flat network the two cost the same;
on a tree of supernodes MPICH's order sends its big halves inside a supernode and only its
smallest pieces across.
"""

from __future__ import annotations

import numpy as np

from .blocks import cat, combine, recv_like, send, split_like


class Group:
    """The power-of-two group left after the fold: ``p2`` ranks; ``vrank`` is this rank's
    virtual rank in it, or None if it was folded out."""

    def __init__(self, comm):
        p, r = comm.size, comm.rank
        self.p2 = 1 << (p.bit_length() - 1)
        self.extra = p - self.p2
        if r < 2 * self.extra:
            self.vrank = None if r % 2 else r // 2
        else:
            self.vrank = r - self.extra

    def real(self, vrank: int) -> int:
        """The communicator rank of virtual rank ``vrank``."""
        return 2 * vrank if vrank < self.extra else vrank + self.extra


def reduce_scatter_halving(comm, group: Group, blocks: list, op: str) -> None:
    """Step k: send the half of the current block range the partner vrank ^ mask keeps,
    reduce the half we keep with the partner's copy of it; mask halves. Ends with block
    vrank reduced (in ``blocks``). lg p alpha + (p-1)/p n (beta + gamma)."""
    lo, hi, mask, v = 0, group.p2, group.p2 // 2, group.vrank
    while mask:
        mid, partner = lo + mask, group.real(v ^ mask)
        (lo, hi), give = ((mid, hi), (lo, mid)) if v & mask else ((lo, mid), (mid, hi))
        send(
            comm,
            cat(blocks[give[0] : give[1]], blocks[0].dtype),
            partner,
            "reduce-scatter",
            group.p2.bit_length() - 1 - mask.bit_length(),
        )
        kept = cat(blocks[lo:hi], blocks[0].dtype)
        blocks[lo:hi] = split_like(combine(comm, kept, recv_like(comm, partner, kept), op), blocks[lo:hi])
        mask //= 2


def allgather_doubling(comm, group: Group, blocks: list) -> None:
    """Step k: swap every block held (a range of 2^k) with vrank ^ 2^k; the range doubles.
    lg p alpha + (p-1)/p n beta."""
    v, mask = group.vrank, 1
    while mask < group.p2:
        mine, theirs, partner = v // mask * mask, (v // mask * mask) ^ mask, group.real(v ^ mask)
        send(comm, cat(blocks[mine : mine + mask], blocks[0].dtype), partner, "allgather", mask.bit_length() - 1)
        held = blocks[theirs : theirs + mask]
        blocks[theirs : theirs + mask] = split_like(recv_like(comm, partner, cat(held, blocks[0].dtype)), held)
        mask <<= 1


def reduce_scatter_distance_doubling(comm, group: Group, blocks: list, op: str) -> int:
    """MPICH's order: step k exchanges with vrank ^ 2^k (distance 1 first), keeping the lower
    half of the block range if bit k of vrank is 0. Ends with one block reduced (the one at
    vrank's bits reversed); returns its index. lg p alpha + (p-1)/p n (beta + gamma)."""
    lo, hi, mask, v = 0, group.p2, 1, group.vrank
    while mask < group.p2:
        mid, partner = (lo + hi) // 2, group.real(v ^ mask)
        (lo, hi), give = ((mid, hi), (lo, mid)) if v & mask else ((lo, mid), (mid, hi))
        send(comm, cat(blocks[give[0] : give[1]], blocks[0].dtype), partner, "reduce-scatter", mask.bit_length() - 1)
        kept = cat(blocks[lo:hi], blocks[0].dtype)
        blocks[lo:hi] = split_like(combine(comm, kept, recv_like(comm, partner, kept), op), blocks[lo:hi])
        mask <<= 1
    return lo


def allgather_distance_halving(comm, group: Group, blocks: list, lo: int) -> None:
    """The reduce-scatter above undone: step k swaps the range held (``size`` blocks from
    ``lo``) with vrank ^ (p/2 >> k), who holds its sibling; the range doubles."""
    v, size, mask = group.vrank, 1, group.p2 // 2
    while mask:
        theirs, partner = lo ^ size, group.real(v ^ mask)
        send(
            comm,
            cat(blocks[lo : lo + size], blocks[0].dtype),
            partner,
            "allgather",
            group.p2.bit_length() - 1 - mask.bit_length(),
        )
        held = blocks[theirs : theirs + size]
        blocks[theirs : theirs + size] = split_like(recv_like(comm, partner, cat(held, blocks[0].dtype)), held)
        lo, size, mask = min(lo, theirs), 2 * size, mask // 2


def reduce_scatter_recursive_halving(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Rank r gets block r of op over all ranks (p a power of two)."""
    blocks = np.array_split(x.ravel(), comm.size)
    reduce_scatter_halving(comm, Group(comm), blocks, op)
    return blocks[comm.rank]


def allgather_recursive_doubling(comm, x: np.ndarray) -> np.ndarray:
    """Every rank gets every rank's x stacked, (p, *x.shape) (p a power of two)."""
    blocks = [x.ravel() if i == comm.rank else np.empty(x.size, x.dtype) for i in range(comm.size)]
    allgather_doubling(comm, Group(comm), blocks)
    return cat(blocks, x.dtype).reshape(comm.size, *x.shape)


def _fold(comm, group: Group, x: np.ndarray, op: str):
    """The odd rank of a folded pair hands x to the even one, which reduces (None: folded out)."""
    if comm.rank >= 2 * group.extra:
        return x
    if group.vrank is None:
        send(comm, x, comm.rank - 1, "fold", label="fold")
        return None
    return combine(comm, x, recv_like(comm, comm.rank + 1, x), op)


def _unfold(comm, group: Group, result, x: np.ndarray) -> np.ndarray:
    """The even rank of a folded pair hands the result back to the odd one."""
    if comm.rank >= 2 * group.extra:
        return result
    if group.vrank is None:
        return recv_like(comm, comm.rank - 1, x)
    send(comm, result, comm.rank + 1, "unfold", label="unfold")
    return result


def allreduce_recursive_doubling(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Step k: swap the whole partial result with vrank ^ 2^k and reduce. lg p (alpha + n beta
    + n gamma): the fewest steps, the most bytes; best for short messages."""
    group = Group(comm)
    acc = _fold(comm, group, x, op)
    if acc is not None:
        mask = 1
        while mask < group.p2:
            partner = group.real(group.vrank ^ mask)
            send(comm, acc, partner, "allreduce", mask.bit_length() - 1)
            acc = combine(comm, acc, recv_like(comm, partner, acc), op)
            mask <<= 1
    return _unfold(comm, group, acc, x)


def allreduce_rabenseifner(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Rabenseifner (2004): recursive-halving reduce-scatter, then recursive-doubling
    all-gather. 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma: the ring's bytes in
    lg p steps."""
    group = Group(comm)
    acc = _fold(comm, group, x, op)
    if acc is not None:
        blocks = np.array_split(acc.ravel(), group.p2)
        reduce_scatter_halving(comm, group, blocks, op)
        allgather_doubling(comm, group, blocks)
        acc = cat(blocks, x.dtype).reshape(x.shape)
    return _unfold(comm, group, acc, x)


def allreduce_rabenseifner_distance_doubling(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Rabenseifner in MPICH's and Open MPI's step order: the reduce-scatter halves the vector
    with partners at distance 1, 2, ..., p/2, the all-gather doubles it back from distance
    p/2 to 1. The same cost as ``allreduce_rabenseifner`` on a flat network."""
    group = Group(comm)
    acc = _fold(comm, group, x, op)
    if acc is not None:
        blocks = np.array_split(acc.ravel(), group.p2)
        lo = reduce_scatter_distance_doubling(comm, group, blocks, op)
        allgather_distance_halving(comm, group, blocks, lo)
        acc = cat(blocks, x.dtype).reshape(x.shape)
    return _unfold(comm, group, acc, x)
