"""The ring (Patarasuk & Yuan 2009; Baidu 2017): reduce-scatter, all-gather, all-reduce.

The ranks form a ring, each sending only to its right neighbour (rank + 1) mod p and
receiving only from its left one. The buffer is cut into p blocks; in every step each
rank passes one block on, so every link carries one block per step and no link idles.
All-reduce = reduce-scatter (rank r ends with the full reduction of block r) + all-gather
(every rank ends with every reduced block): 2(p-1)(alpha + n/p beta) + (p-1) n/p gamma,
which for large n stops depending on p. This is the reading path, plain sends and
receives; ``ring_fast`` runs the same messages zero-copy into a caller's buffer.

The helpers (base.py): ``send(comm, buf, dest, phase, step, block)``,
``recv_like(comm, source, like)`` (checks the size and dtype) and
``combine(comm, mine, other, op)`` (a new array; charges the reduction).
"""

from __future__ import annotations

import numpy as np

from .blocks import cat, combine, recv_like, send
from .trees import scatter_binomial


def reduce_scatter_blocks(comm, blocks: list, op: str) -> np.ndarray:
    """Reduce p blocks around the ring; rank r returns the reduction of block r over all
    ranks (an op of blocks.UFUNCS). (p-1)(alpha + n/p (beta + gamma)).

        for step = 0 .. p-2:
            send block (r - step - 1) mod p to the right   (phase "reduce-scatter", step, block)
            receive block (r - step - 2) mod p from the left, combine it with ours

    Put new arrays into ``blocks`` (``combine`` returns one); never write into a block, it
    may be a view of the caller's buffer.
    """
    # BEGIN SOLUTION ring_reduce_scatter
    p, r = comm.size, comm.rank
    for step in range(p - 1):
        send_i, recv_i = (r - step - 1) % p, (r - step - 2) % p
        send(comm, blocks[send_i], (r + 1) % p, "reduce-scatter", step, send_i)
        incoming = recv_like(comm, (r - 1) % p, blocks[recv_i])
        blocks[recv_i] = combine(comm, blocks[recv_i], incoming, op)
    return blocks[r]
    # END SOLUTION


def allgather_blocks(comm, blocks: list) -> list:
    """Rank r holds block r; afterwards every rank holds every block (returns ``blocks``,
    filled in). (p-1)(alpha + n/p beta).

        for step = 0 .. p-2:
            send block (r - step) mod p to the right        (phase "allgather", step, block)
            receive block (r - step - 1) mod p from the left, it replaces ours
    """
    # BEGIN SOLUTION ring_allgather
    p, r = comm.size, comm.rank
    for step in range(p - 1):
        send_i, recv_i = (r - step) % p, (r - step - 1) % p
        send(comm, blocks[send_i], (r + 1) % p, "allgather", step, send_i)
        blocks[recv_i] = recv_like(comm, (r - 1) % p, blocks[recv_i])
    return blocks
    # END SOLUTION


def allreduce_ring(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Every rank gets op (one of blocks.UFUNCS) over every rank's x, as a new array of x's shape:
    ``reduce_scatter_blocks`` then ``allgather_blocks`` on the p blocks of x
    (np.array_split). 2(p-1)(alpha + n/p beta) + (p-1) n/p gamma."""
    # BEGIN SOLUTION ring_allreduce
    blocks = np.array_split(x.ravel(), comm.size)
    reduce_scatter_blocks(comm, blocks, op)
    allgather_blocks(comm, blocks)
    return np.concatenate(blocks).reshape(x.shape)
    # END SOLUTION


def reduce_scatter_ring(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Rank r gets block r (np.array_split of x into p) reduced over all ranks."""
    return reduce_scatter_blocks(comm, np.array_split(x.ravel(), comm.size), op)


def allgather_ring(comm, x: np.ndarray) -> np.ndarray:
    """Every rank gets every rank's x, stacked (p, *x.shape): x is block r of the result.
    (p-1)(alpha + n/p beta), n the whole result."""
    blocks = [x.ravel() if i == comm.rank else np.empty(x.size, x.dtype) for i in range(comm.size)]
    return cat(allgather_blocks(comm, blocks), x.dtype).reshape(comm.size, *x.shape)


def allgatherv_ring(comm, x: np.ndarray, sizes: list) -> list:
    """Every rank gets every rank's 1-D x, however long (MPI_Allgatherv): a list of p arrays,
    rank i's of ``sizes[i]`` elements (exchanged before, so every receive knows its length;
    an empty block travels as an empty message). Each step every link carries one rank's
    block, so it takes at most (p-1)(alpha + max(sizes) beta)."""
    blocks = [x if i == comm.rank else np.empty(sizes[i], x.dtype) for i in range(comm.size)]
    return allgather_blocks(comm, blocks)


def broadcast_scatter_allgather(comm, x: np.ndarray, root: int) -> np.ndarray:
    """Broadcast for long messages (van de Geijn; Barnett et al. 1994): scatter root's
    blocks down a binomial tree, then ring all-gather them. (L + p - 1) alpha
    + 2 (p-1)/p n beta: about 2 n beta where a binomial tree pays lg p n beta."""
    blocks = np.array_split(x.ravel(), comm.size)
    blocks[comm.rank] = scatter_binomial(comm, x, root)
    return cat(allgather_blocks(comm, blocks), x.dtype).reshape(x.shape)
