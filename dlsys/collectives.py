"""The MPI collectives, each a short function over a Communicator.

Call form: ``allreduce(comm, x, op="sum", algorithm="ring")``. As in MPI and
torch.distributed, every rank passes an array of the same shape and dtype (for broadcast
and scatter the non-roots' contents are ignored: it is the receive buffer's shape). Costs
(p ranks, n bytes, Thakur, Rabenseifner & Gropp 2005) are in ``dlsys.net.CLOSED_FORMS``;
the tests hold every algorithm here to them.

Blocks: a buffer of n elements is cut into p blocks by ``np.array_split`` (so any length
works, also 0 and fewer elements than ranks); rank r owns block r after a reduce-scatter.
Algorithms that need a power of two: recursive doubling and Rabenseifner all-reduce fold
the extra ranks in first (MPICH: the first 2r ranks pair up, odd into even); recursive
doubling all-gather and recursive halving reduce-scatter fall back to the ring.
"""

from __future__ import annotations

import numpy as np

from .comm import Communicator, as_payload, payload_nbytes

TAG = 1 << 20  # collectives use their own tag so they never match a program's own messages
OPS = ("sum", "mean", "max")
ALGORITHMS = {
    "barrier": ("dissemination",),
    "broadcast": ("binomial", "scatter_allgather"),
    "scatter": ("binomial",),
    "gather": ("binomial",),
    "allgather": ("ring", "recursive_doubling"),
    "reduce": ("binomial",),
    "reduce_scatter": ("ring", "recursive_halving"),
    "allreduce": ("ring", "recursive_doubling", "rabenseifner", "reduce_broadcast"),
}


def check_algorithm(collective: str, algorithm: str) -> None:
    """ValueError naming the valid choices (callable before any rank starts)."""
    if collective not in ALGORITHMS:
        raise ValueError(f"unknown collective {collective!r}; valid: {', '.join(ALGORITHMS)}")
    if algorithm not in ALGORITHMS[collective]:
        raise ValueError(f"unknown algorithm {algorithm!r} for {collective}; valid: {', '.join(ALGORITHMS[collective])}")


def check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; valid: {', '.join(OPS)}")


# --- small helpers --------------------------------------------------------------------

def _input(x, name="x") -> np.ndarray:
    return np.array(as_payload(x, name), copy=True, subok=True)


def _recv(comm: Communicator, src: int, like: np.ndarray, label: str, into=None) -> np.ndarray:
    """Receive from src and check it matches what this rank expects (shape and dtype).
    With ``into`` (an array like ``like``), copy it there and return ``into``."""
    got = comm.recv(src, TAG, label)
    if got.dtype != like.dtype or got.size != like.size:
        raise ValueError(f"x: rank {src} sent {got.size} elements of {got.dtype} where rank {comm.rank} "
                         f"expected {like.size} of {like.dtype}; every rank must pass the same shape and dtype")
    if into is None:
        return got if got.shape == like.shape else got.reshape(like.shape)
    into[...] = got if got.shape == into.shape else got.reshape(into.shape)
    return into


def _combine(comm: Communicator, mine: np.ndarray, other: np.ndarray, op: str, into=None) -> np.ndarray:
    """op(mine, other), as a new array or written into ``into``."""
    if comm.charge_reductions:
        comm.charge_reduction(payload_nbytes(other))
    return (np.maximum if op == "max" else np.add)(mine, other, out=into)


def _finish(result: np.ndarray, op: str, p: int) -> np.ndarray:
    return result / p if op == "mean" else result


def _cat(blocks, dtype) -> np.ndarray:
    return np.concatenate(blocks) if blocks else np.empty(0, dtype)


def _split_like(flat: np.ndarray, blocks) -> list:
    return np.split(flat, np.cumsum([b.size for b in blocks])[:-1])


# --- barrier, broadcast, scatter, gather, reduce (binomial trees) ---------------------

def barrier(comm: Communicator, algorithm: str = "dissemination") -> None:
    """Dissemination barrier (Hensgen et al. 1988): round k, notify r+2^k, hear from r-2^k."""
    check_algorithm("barrier", algorithm)
    token, k = np.empty(0, np.uint8), 1
    while k < comm.size:
        comm.send(token, (comm.rank + k) % comm.size, TAG, f"barrier round {k.bit_length() - 1}")
        comm.recv((comm.rank - k) % comm.size, TAG)
        k <<= 1


def _tree_parent(vrank: int, p: int) -> int:
    """Lowest set bit of the relative rank: the parent is vrank - mask (root: mask >= p)."""
    mask = 1
    while mask < p and not vrank & mask:
        mask <<= 1
    return mask


def broadcast(comm: Communicator, x, root: int = 0, algorithm: str = "binomial") -> np.ndarray:
    """Root's x to every rank. binomial: lg p (alpha + n beta). scatter_allgather
    (van de Geijn): scatter the blocks, then ring all-gather them."""
    check_algorithm("broadcast", algorithm)
    x, p = _input(x), comm.size
    if algorithm == "scatter_allgather":
        blocks = np.array_split(x.ravel(), p)
        blocks[comm.rank] = scatter(comm, x, root)
        return _cat(_allgather_ring(comm, blocks), x.dtype).reshape(x.shape)
    # BEGIN SOLUTION binomial_broadcast
    vrank = (comm.rank - root) % p
    mask = _tree_parent(vrank, p)
    if vrank:
        x = _recv(comm, (comm.rank - mask) % p, x, "broadcast")
    mask >>= 1
    while mask:  # largest subtree first
        if vrank + mask < p:
            comm.send(x, (comm.rank + mask) % p, TAG, f"broadcast step {mask.bit_length() - 1}")
        mask >>= 1
    return x
    # END SOLUTION


def scatter(comm: Communicator, x, root: int = 0, algorithm: str = "binomial") -> np.ndarray:
    """Rank r gets block r of root's x, down a binomial tree: lg p alpha + (p-1)/p n beta."""
    check_algorithm("scatter", algorithm)
    x, p = _input(x), comm.size
    vrank = (comm.rank - root) % p
    blocks = np.array_split(x.ravel(), p)
    rel = [blocks[(v + root) % p] for v in range(p)]  # blocks in relative-rank order
    mask = _tree_parent(vrank, p)
    held = rel[vrank:min(vrank + mask, p)]  # this rank's subtree
    if vrank:
        held = _split_like(_recv(comm, (comm.rank - mask) % p, _cat(held, x.dtype), "scatter"), held)
    mask >>= 1
    while mask:
        if vrank + mask < p:
            comm.send(_cat(held[mask:2 * mask], x.dtype), (comm.rank + mask) % p, TAG,
                      f"scatter step {mask.bit_length() - 1}")
        mask >>= 1
    return held[0]


def gather(comm: Communicator, x, root: int = 0, algorithm: str = "binomial"):
    """Root gets every rank's x stacked (p, *shape); others None. Binomial tree, as scatter."""
    check_algorithm("gather", algorithm)
    x, p = _input(x), comm.size
    vrank = (comm.rank - root) % p
    held, mask = [x.ravel()], 1
    while mask < p:
        if vrank & mask:
            comm.send(_cat(held, x.dtype), (comm.rank - mask) % p, TAG, f"gather step {mask.bit_length() - 1}")
            return None
        if vrank + mask < p:
            like = np.empty((min(mask, p - vrank - mask), x.size), x.dtype)
            held.append(_recv(comm, (comm.rank + mask) % p, like, "gather").ravel())
        mask <<= 1
    return np.roll(_cat(held, x.dtype).reshape(p, *x.shape), root, axis=0)


def reduce(comm: Communicator, x, op: str = "sum", root: int = 0, algorithm: str = "binomial"):
    """Root gets op over every rank's x; others None. Binomial tree: lg p (alpha + n beta + n gamma)."""
    check_algorithm("reduce", algorithm), check_op(op)
    acc, p = _input(x), comm.size
    vrank, mask = (comm.rank - root) % p, 1
    while mask < p:
        if vrank & mask:
            comm.send(acc, (comm.rank - mask) % p, TAG, f"reduce step {mask.bit_length() - 1}")
            return None
        if vrank + mask < p:
            acc = _combine(comm, acc, _recv(comm, (comm.rank + mask) % p, acc, "reduce"), op)
        mask <<= 1
    return _finish(acc, op, p)


# --- rings: reduce-scatter and all-gather on blocks -----------------------------------

def _reduce_scatter_ring(comm: Communicator, blocks: list, op: str, into: list | None = None) -> np.ndarray:
    """p-1 steps; in step s rank r sends block r-s-1 right, adds block r-s-2 from the left.
    Afterwards rank r holds the full reduction of block r. (p-1)(alpha + n/p (beta + gamma)).
    ``into`` (optional, all-reduce's result blocks): write the sum of block i into into[i]
    (pass it to ``_combine``) instead of a new array."""
    # BEGIN SOLUTION ring_reduce_scatter
    p, r = comm.size, comm.rank
    for step in range(p - 1):
        send_i, recv_i = (r - step - 1) % p, (r - step - 2) % p
        sent = comm.isend(blocks[send_i], (r + 1) % p, TAG, f"reduce-scatter step {step} block {send_i}")
        incoming = _recv(comm, (r - 1) % p, blocks[recv_i], "")
        blocks[recv_i] = _combine(comm, blocks[recv_i], incoming, op, None if into is None else into[recv_i])
        del incoming  # drop the left neighbour's block (it may be its own memory, lent) ...
        sent.wait()  # ... and wait until the right neighbour dropped ours
    return blocks[r]
    # END SOLUTION


def _allgather_ring(comm: Communicator, blocks: list, into: list | None = None) -> list:
    """p-1 steps; in step s rank r forwards block r-s right and gets block r-s-1 from the
    left. (p-1)(alpha + n/p beta). ``into`` (optional, all-reduce's result blocks): copy
    block i into into[i] (pass it to ``_recv``)."""
    # BEGIN SOLUTION ring_allgather
    p, r = comm.size, comm.rank
    for step in range(p - 1):
        send_i, recv_i = (r - step) % p, (r - step - 1) % p
        sent = comm.isend(blocks[send_i], (r + 1) % p, TAG, f"allgather step {step} block {send_i}")
        blocks[recv_i] = _recv(comm, (r - 1) % p, blocks[recv_i], "", None if into is None else into[recv_i])
        sent.wait()
    return blocks
    # END SOLUTION


# --- recursive halving / doubling inside a power-of-two group ---------------------------

class _Group:
    """The power-of-two group of MPICH's fold: p2 = 2^floor(lg p) ranks remain after the
    first 2*extra ranks pair up (odd rank -> even rank). ``vrank`` is None if folded out."""

    def __init__(self, comm: Communicator):
        p, r = comm.size, comm.rank
        self.p2 = 1 << (p.bit_length() - 1)
        self.extra = p - self.p2
        if r < 2 * self.extra:
            self.vrank = None if r % 2 else r // 2
        else:
            self.vrank = r - self.extra

    def real(self, vrank: int) -> int:
        return 2 * vrank if vrank < self.extra else vrank + self.extra


def _reduce_scatter_halving(comm, group: _Group, blocks: list, op: str) -> None:
    """lg p steps: exchange half of the current range with vrank ^ mask, keep and reduce the
    other half; ends with block vrank reduced. lg p alpha + (p-1)/p n (beta + gamma)."""
    lo, hi, mask, v = 0, group.p2, group.p2 // 2, group.vrank
    while mask:
        mid = lo + mask
        keep, give = ((mid, hi), (lo, mid)) if v & mask else ((lo, mid), (mid, hi))
        comm.send(_cat(blocks[give[0]:give[1]], blocks[0].dtype), group.real(v ^ mask), TAG,
                  f"reduce-scatter step {group.p2.bit_length() - 1 - mask.bit_length()}")
        kept = blocks[keep[0]:keep[1]]
        incoming = _recv(comm, group.real(v ^ mask), _cat(kept, blocks[0].dtype), "")
        blocks[keep[0]:keep[1]] = _split_like(_combine(comm, _cat(kept, blocks[0].dtype), incoming, op), kept)
        (lo, hi), mask = keep, mask // 2


def _allgather_doubling(comm, group: _Group, blocks: list) -> None:
    """lg p steps: swap everything held with vrank ^ mask. lg p alpha + (p-1)/p n beta."""
    v, mask = group.vrank, 1
    while mask < group.p2:
        lo = v // mask * mask
        plo = lo ^ mask
        comm.send(_cat(blocks[lo:lo + mask], blocks[0].dtype), group.real(v ^ mask), TAG,
                  f"allgather step {mask.bit_length() - 1}")
        theirs = blocks[plo:plo + mask]
        blocks[plo:plo + mask] = _split_like(_recv(comm, group.real(v ^ mask), _cat(theirs, blocks[0].dtype), ""), theirs)
        mask <<= 1


def _fold_in(comm, group: _Group, x, op):
    """Odd ranks among the first 2*extra hand x to their even neighbour, which reduces."""
    if comm.rank >= 2 * group.extra:
        return x
    if group.vrank is None:
        comm.send(x, comm.rank - 1, TAG, "fold")
        return None
    return _combine(comm, x, _recv(comm, comm.rank + 1, x, "fold"), op)


def _fold_out(comm, group: _Group, result, like):
    if comm.rank >= 2 * group.extra:
        return result
    if group.vrank is None:
        return _recv(comm, comm.rank - 1, like, "unfold")
    comm.send(result, comm.rank + 1, TAG, "unfold")
    return result


# --- public reduce-scatter, all-gather, all-reduce ---------------------------------------

def reduce_scatter(comm: Communicator, x, op: str = "sum", algorithm: str = "ring") -> np.ndarray:
    """Rank r gets block r (np.array_split of the flattened x into p) of op over all ranks."""
    check_algorithm("reduce_scatter", algorithm), check_op(op)
    x = _input(x)
    blocks = np.array_split(x.ravel(), comm.size)
    group = _Group(comm)
    if algorithm == "recursive_halving" and group.extra == 0:
        _reduce_scatter_halving(comm, group, blocks, op)
        return _finish(blocks[comm.rank], op, comm.size)
    return _finish(_reduce_scatter_ring(comm, blocks, op), op, comm.size)


def allgather(comm: Communicator, x, algorithm: str = "ring") -> np.ndarray:
    """Every rank gets every rank's x, stacked: shape (p, *x.shape)."""
    check_algorithm("allgather", algorithm)
    x = _input(x)
    blocks = [x.ravel() if i == comm.rank else np.empty(x.size, x.dtype) for i in range(comm.size)]
    group = _Group(comm)
    if algorithm == "recursive_doubling" and group.extra == 0:
        _allgather_doubling(comm, group, blocks)
    else:
        _allgather_ring(comm, blocks)
    return _cat(blocks, x.dtype).reshape(comm.size, *x.shape)


def allreduce(comm: Communicator, x, op: str = "sum", algorithm: str = "ring", out=None) -> np.ndarray:
    """Every rank gets op over every rank's x (same shape as x).

    ``out`` (optional): the result buffer, like MPI_Allreduce's recvbuf (C-contiguous, x's
    shape and dtype; x itself for an in-place all-reduce). The ring writes every sum straight
    into it, so a caller that reuses it allocates nothing per call.

    ring (Baidu 2017): reduce-scatter + all-gather around the ring, 2(p-1)(alpha + n/p beta)
    + (p-1) n/p gamma: for large p the time stops depending on p.
    recursive_doubling: lg p (alpha + n beta + n gamma). rabenseifner: recursive-halving
    reduce-scatter + recursive-doubling all-gather. reduce_broadcast: binomial reduce to
    rank 0, then binomial broadcast.
    """
    check_algorithm("allreduce", algorithm), check_op(op)
    x, p = as_payload(x), comm.size  # only read: every algorithm below builds new arrays
    _check_out(out, x, op)
    if p == 1:
        result = _input(x)
    elif algorithm == "ring":
        # BEGIN SOLUTION ring_allreduce
        result = np.empty_like(x, order="C") if out is None else out  # every sum lands here
        blocks, into = np.array_split(x.ravel(), p), np.array_split(result.ravel(), p)
        _reduce_scatter_ring(comm, blocks, op, into)
        _allgather_ring(comm, blocks, into)
        # END SOLUTION
    elif algorithm == "reduce_broadcast":
        summed = reduce(comm, x, "max" if op == "max" else "sum", 0)
        result = broadcast(comm, x if summed is None else summed, 0)
    else:
        group = _Group(comm)
        acc = _fold_in(comm, group, x, op)
        if acc is not None and algorithm == "recursive_doubling":
            mask = 1
            while mask < group.p2:
                partner = group.real(group.vrank ^ mask)
                comm.send(acc, partner, TAG, f"allreduce step {mask.bit_length() - 1}")
                acc = _combine(comm, acc, _recv(comm, partner, acc, ""), op)
                mask <<= 1
        elif acc is not None:  # rabenseifner
            blocks = np.array_split(acc.ravel(), group.p2)
            _reduce_scatter_halving(comm, group, blocks, op)
            _allgather_doubling(comm, group, blocks)
            acc = _cat(blocks, x.dtype).reshape(x.shape)
        result = _fold_out(comm, group, acc, x)
    result = _finish(result, op, p)
    if out is None or result is out:
        return result
    np.copyto(out, result)
    return out


def _check_out(out, x: np.ndarray, op: str) -> None:
    if out is None:
        return
    if not (isinstance(out, np.ndarray) and out.shape == x.shape and out.dtype == x.dtype
            and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out must be a writeable C-contiguous array of shape {x.shape} and dtype {x.dtype}, "
                         f"got {type(out).__name__} {getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}")
    if op == "mean" and x.dtype.kind in "biu":
        raise ValueError(f"out: the mean of {x.dtype} values is a float; pass out=None")
