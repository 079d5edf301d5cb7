"""All-to-all (MPI_Alltoall): rank r's buffer is cut into p blocks; block d goes to rank d.
Afterwards rank r holds block r of every rank's buffer. The exchange mixture-of-experts
layers dispatch tokens with (dlsys.train.moe).

n = one rank's whole send buffer (p blocks of n/p, its own included), as the registry's
convention for the other collectives; every rank sends (p-1)/p of it.

    pairwise  p-1 steps; step k: send block (r+k) to rank r+k, receive from rank r-k.
              (p-1)(alpha + n/p beta). MPICH's MPIR_Alltoall_intra_pairwise
              (src/mpi/coll/alltoall/alltoall_intra_pairwise.c), which pairs rank ^ k at
              powers of two; the shift used here is its rule for every other p.
    bruck     ceil(lg p) steps; step k: send every block whose position has bit k set to
              rank r + 2^k (store and forward). sum_k (alpha + c_k n/p beta), c_k = how
              many j in 1..p-1 have bit k: lg p (alpha + n/2 beta) at powers of two.
              Bruck et al. 1997 (IEEE TPDS 8(11)); MPICH's MPIR_Alltoall_intra_brucks.

Both are exact for even blocks at every p. With uneven ones (np.array_split) a message's
sender may be ready before its receiver, so a step can cost less than its largest block:
the forms with the largest and the smallest block bound the time.

Bruck sends lg p / 2 times the bytes but p-1 / lg p times fewer messages: it wins for
small blocks. MPICH picks it when a block (sendcount * type size) is at most
MPIR_CVAR_ALLTOALL_SHORT_MSG_SIZE = 256 bytes and p >= 8 (dlsys.experiments.experts).
"""

from __future__ import annotations

import numpy as np

from .blocks import TAG, cat, check_like, recv_like, send


def stacked(blocks: list, dtype) -> np.ndarray:
    """p equal blocks as rows: shape (p, block size)."""
    return cat(blocks, dtype).reshape(len(blocks), -1)


def pairwise_exchange(comm, blocks: list) -> list:
    """``blocks[d]`` is this rank's block for rank d; returns ``got``, ``got[s]`` the block
    rank s sent here (``got[r]`` is our own). p-1 steps, (p-1)(alpha + n/p beta).

        got[r] = blocks[r]
        for k = 1 .. p-1:
            send blocks[(r + k) mod p] to rank (r + k) mod p   (phase "alltoall", step k-1, block r+k)
            got[(r - k) mod p] = receive from rank (r - k) mod p

    Sends are buffered, so every rank sends before it receives and no step deadlocks.
    """
    # BEGIN SOLUTION pairwise_alltoall
    p, r = comm.size, comm.rank
    got = list(blocks)
    for k in range(1, p):
        dest, source = (r + k) % p, (r - k) % p
        send(comm, blocks[dest], dest, "alltoall", k - 1, dest)
        got[source] = comm.recv(source=source, tag=TAG)
    return got
    # END SOLUTION


def alltoall_pairwise(comm, x: np.ndarray) -> np.ndarray:
    """Block d (np.array_split of x into p) to rank d; returns (p, size of block r): row s
    from rank s. (p-1)(alpha + n/p beta)."""
    blocks = np.array_split(x.ravel(), comm.size)
    got = pairwise_exchange(comm, blocks)  # every rank cuts the same length alike: check each block
    return stacked([check_like(comm, s, got[s], blocks[comm.rank]) for s in range(comm.size)], x.dtype)


def alltoall_bruck(comm, x: np.ndarray) -> np.ndarray:
    """Bruck's all-to-all: the same result as ``alltoall_pairwise`` in ceil(lg p) steps.

        held[j] = block (r + j) mod p             (rotate: position j is for rank r + j)
        for k = 1, 2, 4, ... < p:
            send held[j] for every j with j & k to rank r + k   (one message)
            receive the same positions from rank r - k, they replace ours
        rank s's block for us is now held[(r - s) mod p]

    A block at position j travels the set bits of j, so it ends j ranks on: at its
    destination. Blocks may differ in size (np.array_split); the receiver knows each one's
    size from where it is going: after step k, position j holds a block for rank
    r + (j with bits 0..k cleared).
    """
    p, r = comm.size, comm.rank
    blocks = np.array_split(x.ravel(), p)
    sizes = [b.size for b in blocks]
    held = [blocks[(r + j) % p] for j in range(p)]
    k, step = 1, 0
    while k < p:
        positions = [j for j in range(1, p) if j & k]
        send(comm, cat([held[j] for j in positions], x.dtype), (r + k) % p, "alltoall", step)
        want = [sizes[(r + (j & -2 * k)) % p] for j in positions]
        incoming = recv_like(comm, (r - k) % p, np.empty(sum(want), x.dtype))
        for j, piece in zip(positions, np.split(incoming, np.cumsum(want)[:-1])):
            held[j] = piece
        k, step = 2 * k, step + 1
    return stacked([held[(r - s) % p] for s in range(p)], x.dtype)


def bruck_counts(p: int) -> list[int]:
    """c_k: how many blocks Bruck's step k sends (positions 1..p-1 with bit k set)."""
    return [sum(1 for j in range(1, p) if j & (1 << k)) for k in range((p - 1).bit_length())]


def alltoallv_pairwise(comm, x: np.ndarray, send_counts: list, recv_counts: list) -> list:
    """Uneven all-to-all (MPI_Alltoallv): x's first ``send_counts[0]`` elements go to rank 0,
    the next ``send_counts[1]`` to rank 1, ...; ``recv_counts[s]`` elements come from rank s.
    Returns the p received arrays. The pairwise exchange: at most
    (p-1)(alpha + max block beta), exact when every block is that size."""
    pieces = np.split(x, np.cumsum(send_counts)[:-1])
    got = pairwise_exchange(comm, pieces)
    return [check_like(comm, s, got[s], np.empty(recv_counts[s], x.dtype)) for s in range(comm.size)]
