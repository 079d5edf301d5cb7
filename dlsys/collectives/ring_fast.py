"""The ring all-reduce on two fast paths: the messages of ``ring.allreduce_ring``, zero-copy
(``allreduce_ring_into``) or in fewer Python calls (``allreduce_ring_lean``).

``allreduce(comm, x, algorithm="ring", out=buf)`` runs the zero-copy one (dlsys bench
allreduce does, with ``comm.alloc`` buffers). It differs from the reading path only in
where bytes live:
* every sum and every received block is written straight into ``out`` (MPI_Allreduce's
  recvbuf), so a caller that reuses ``out`` allocates nothing per call;
* sends are ``isend``: of ``comm.alloc`` memory on the processes backend they are lent,
  not copied (the receiver reads our memory), so each step ends with ``wait()`` until the
  right neighbour has dropped our block, and drops the left neighbour's block at once.
``allreduce(comm, x, algorithm="ring", fast=True)`` runs the lean one (dlsys simulate
does): a big emulation's wall time is Python per message (2.1 M messages in a 1024-rank
ring), so each step is one call of ``dlsys.comm.fast.shift`` (sendrecv inlined) and the
sums add plain views (numpy calls a LogicalArray's Python hook on every addition).
Virtual time is charged by the same sends and receives in the same order, so values and
traces equal the reading path's (tests/collectives/test_collectives.py holds them equal).
"""

from __future__ import annotations

import numpy as np

from ..comm import fast
from ..comm.payload import payload_nbytes
from .blocks import TAG, UFUNCS, check_like, combine, recv_like


def allreduce_ring_into(comm, x: np.ndarray, op: str, out: np.ndarray) -> np.ndarray:
    """op over every rank's x, written into ``out`` (C-contiguous, x's shape and dtype; may
    be x itself). 2(p-1)(alpha + n/p beta) + (p-1) n/p gamma, as ``ring.allreduce_ring``."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    blocks, into = np.array_split(x.ravel(), p), np.array_split(out.reshape(-1), p)
    if p == 1:
        np.copyto(out, x)
    # labels spelled out as in base.send (the Communicator names a send's span before it
    # derives the default label from phase, step and block)
    for step in range(p - 1):  # reduce-scatter: sums land in out's blocks
        send_i, recv_i = (r - step - 1) % p, (r - step - 2) % p
        sent = comm.isend(
            blocks[send_i],
            right,
            TAG,
            label=f"reduce-scatter step {step} block {send_i}",
            phase="reduce-scatter",
            step=step,
            block=send_i,
        )
        incoming = recv_like(comm, left, blocks[recv_i])
        comm.charge_reduction(payload_nbytes(incoming))
        blocks[recv_i] = UFUNCS[op](blocks[recv_i], incoming, out=into[recv_i])
        del incoming  # the left neighbour's memory, lent: let it go before we wait on ours
        sent.wait()
    for step in range(p - 1):  # all-gather: received blocks are copied into out's blocks
        send_i, recv_i = (r - step) % p, (r - step - 1) % p
        sent = comm.isend(
            blocks[send_i],
            right,
            TAG,
            label=f"allgather step {step} block {send_i}",
            phase="allgather",
            step=step,
            block=send_i,
        )
        into[recv_i][...] = recv_like(comm, left, blocks[recv_i])
        blocks[recv_i] = into[recv_i]
        sent.wait()
    return out


def allreduce_ring_lean(comm, x: np.ndarray, op: str) -> np.ndarray:
    """op over every rank's x as a new array of x's shape, as ``ring.allreduce_ring``: its
    messages, one ``fast.shift`` call per step. Blocks are 1-D, so a received block of our
    block's type, dtype object and size (the usual case) needs none of ``recv_like``'s
    checks, and it is added as plain arrays."""
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    blocks = np.array_split(x.ravel(), p)
    add, plain = UFUNCS[op], np.ndarray
    # handover: no array is written after it is sent or received (every sum is a new array,
    # and x's own block, the first one sent, goes as a copy: the caller may write x after)
    shift, charged = fast.shift(comm, right, left, TAG, handover=True), comm.charge_reductions
    for step in range(p - 1):
        send_i, recv_i = (r - step - 1) % p, (r - step - 2) % p
        got = shift(blocks[send_i] if step else blocks[send_i].copy(), "reduce-scatter", step, send_i)
        mine = blocks[recv_i]
        if type(got) is type(mine) and got.dtype is mine.dtype and got.size == mine.size and not charged:
            blocks[recv_i] = add(mine.view(plain), got.view(plain)).view(type(mine))  # mine + got, hook-free
        else:
            blocks[recv_i] = combine(comm, mine, check_like(comm, left, got, mine), op)
    for step in range(p - 1):
        send_i, recv_i = (r - step) % p, (r - step - 1) % p
        got = shift(blocks[send_i], "allgather", step, send_i)
        mine = blocks[recv_i]
        if not (type(got) is type(mine) and got.dtype is mine.dtype and got.size == mine.size):
            got = check_like(comm, left, got, mine)
        blocks[recv_i] = got
    return np.concatenate(blocks).reshape(x.shape)
