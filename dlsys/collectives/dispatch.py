"""The collectives' calls, ``allreduce(comm, x, op="sum", algorithm="ring")`` and the others:
they check arguments, turn "mean" into a sum and a division, and dispatch to the registry;
and the closed forms of the registry's costs."""

from __future__ import annotations

import math

import numpy as np

from ..comm.communicator import Communicator
from ..comm.payload import as_payload
from ..machine.net import get_node
from ..machine.topology import get_network
from . import exchange, ring
from .registry import ALGORITHMS, REGISTRY, Algorithm, lg

OPS = ("sum", "mean", "max", "min", "prod")  # MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD; mean = sum / p


def check_algorithm(collective: str, algorithm: str) -> None:
    """ValueError naming the valid choices (callable before any rank starts)."""
    if collective not in ALGORITHMS:
        raise ValueError(f"unknown collective {collective!r}; valid: {', '.join(ALGORITHMS)}")
    if algorithm not in ALGORITHMS[collective]:
        raise ValueError(
            f"unknown algorithm {algorithm!r} for {collective}; valid: {', '.join(ALGORITHMS[collective])}"
        )


def check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; valid: {', '.join(OPS)}")


def _entry(collective: str, algorithm: str, p: int) -> Algorithm:
    """The registry entry that runs on p ranks: its power-of-two fallback if p is not one."""
    check_algorithm(collective, algorithm)
    entry = REGISTRY[(collective, algorithm)]
    return REGISTRY[(collective, entry.fallback)] if entry.fallback and p & (p - 1) else entry


def _base(op: str) -> str:
    """The op the algorithms run (blocks.UFUNCS): every op but "mean", which is a sum."""
    return "sum" if op == "mean" else op


def _mean(result, op: str, p: int):
    """The mean is the sum over p."""
    return result / p if op == "mean" and result is not None else result


# --- the collectives --------------------------------------------------------------------
# Algorithms never write their input; those that may hand it back get a copy.


def barrier(comm: Communicator, algorithm: str = "dissemination") -> None:
    """Return once every rank has entered the barrier."""
    _entry("barrier", algorithm, comm.size).run(comm)


def broadcast(comm: Communicator, x, root: int = 0, algorithm: str = "binomial") -> np.ndarray:
    """Root's x to every rank."""
    return _entry("broadcast", algorithm, comm.size).run(comm, as_payload(x).copy(), root)


def scatter(comm: Communicator, x, root: int = 0, algorithm: str = "binomial") -> np.ndarray:
    """Rank r gets block r (np.array_split of the flattened x into p) of root's x."""
    return _entry("scatter", algorithm, comm.size).run(comm, as_payload(x).copy(), root)


def gather(comm: Communicator, x, root: int = 0, algorithm: str = "binomial"):
    """Root gets every rank's x stacked, shape (p, *x.shape); the others None."""
    return _entry("gather", algorithm, comm.size).run(comm, as_payload(x).copy(), root)


def reduce(comm: Communicator, x, op: str = "sum", root: int = 0, algorithm: str = "binomial"):
    """Root gets op over every rank's x; the others None."""
    check_op(op)
    run = _entry("reduce", algorithm, comm.size).run
    return _mean(run(comm, as_payload(x).copy(), _base(op), root), op, comm.size)


def reduce_scatter(comm: Communicator, x, op: str = "sum", algorithm: str = "ring") -> np.ndarray:
    """Rank r gets block r (np.array_split of the flattened x into p) of op over all ranks."""
    check_op(op)
    run = _entry("reduce_scatter", algorithm, comm.size).run
    return _mean(run(comm, as_payload(x).copy(), _base(op)), op, comm.size)


def allgather(comm: Communicator, x, algorithm: str = "ring") -> np.ndarray:
    """Every rank gets every rank's x, stacked: shape (p, *x.shape)."""
    return _entry("allgather", algorithm, comm.size).run(comm, as_payload(x).copy())


def allgatherv(comm: Communicator, x, max_elements: int | None = None) -> list:
    """Every rank gets every rank's 1-D x, whose lengths may differ (MPI_Allgatherv): a list
    of p arrays. The lengths travel first (an all-gather of one int64 per rank) and are
    checked against ``max_elements`` before any block is sent; then the ring all-gather."""
    x = as_payload(x)
    if x.ndim != 1:
        raise ValueError(f"x: allgatherv takes a 1-D array, got shape {x.shape}")
    sizes = [int(k) for k in allgather(comm, np.array([x.size], np.int64)).ravel()]
    if max_elements is not None and max(sizes) > max_elements:
        raise ValueError(
            f"x: rank {sizes.index(max(sizes))} sends {max(sizes)} elements, more than max_elements = {max_elements}"
        )
    return ring.allgatherv_ring(comm, x.copy(), sizes)


def alltoall(comm: Communicator, x, algorithm: str = "pairwise") -> np.ndarray:
    """x cut into p blocks (np.array_split of the flattened x, as reduce_scatter); block d
    goes to rank d. Rank r gets block r of every rank's x, stacked: shape (p, size of block
    r), row s from rank s. With x of shape (p, k) that is MPI_Alltoall: row d to rank d."""
    return _entry("alltoall", algorithm, comm.size).run(comm, as_payload(x).copy())


def alltoallv(comm: Communicator, x, send_counts, recv_counts=None) -> list:
    """Uneven all-to-all (MPI_Alltoallv): the first ``send_counts[0]`` elements of the 1-D x
    go to rank 0, the next ``send_counts[1]`` to rank 1, ...; returns the p arrays received,
    from rank 0, 1, .... Unless the caller knows ``recv_counts`` (as MPI_Alltoallv's caller
    must), the counts travel first (an all-to-all of one int64 per destination, as MPI
    programs exchange them), then the blocks pairwise: at most (p-1)(alpha + 8 beta)
    + (p-1)(alpha + largest block beta)."""
    x = as_payload(x)
    counts = np.asarray(send_counts)
    if x.ndim != 1:
        raise ValueError(f"x: alltoallv takes a 1-D array, got shape {x.shape}")
    if counts.shape != (comm.size,) or counts.dtype.kind not in "iu" or (counts < 0).any() or counts.sum() != x.size:
        raise ValueError(
            f"send_counts: {comm.size} non-negative ints summing to x.size = {x.size}, got {send_counts!r}"
        )
    if recv_counts is None:
        recv_counts = alltoall(comm, counts.astype(np.int64)).ravel()
    return exchange.alltoallv_pairwise(comm, x.copy(), counts.tolist(), [int(c) for c in recv_counts])


def allreduce(
    comm: Communicator, x, op: str = "sum", algorithm: str = "ring", out=None, fast: bool = False
) -> np.ndarray:
    """Every rank gets op over every rank's x (same shape as x).

    ``out`` (optional): the result buffer, like MPI_Allreduce's recvbuf (C-contiguous, x's
    shape and dtype; x itself for an in-place all-reduce). An algorithm with a fast path
    (the ring: ring_fast.py) writes every sum straight into it, so a caller that reuses it
    allocates nothing per call; the others copy their result into it.
    ``fast=True`` (without ``out``): an algorithm's lean path, where it has one (the ring):
    the same messages and trace in fewer Python calls per message, for big emulations.
    """
    check_op(op)
    entry, x, p = _entry("allreduce", algorithm, comm.size), as_payload(x), comm.size
    _check_out(out, x, op)
    base_op = _base(op)
    if p == 1:
        result = x.copy()
    elif out is not None and entry.fast is not None:
        entry.fast(comm, x, base_op, out)
        return np.divide(out, p, out=out) if op == "mean" else out
    else:
        result = (entry.lean if fast and entry.lean is not None else entry.run)(comm, x, base_op)
    result = _mean(result, op, p)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _check_out(out, x: np.ndarray, op: str) -> None:
    if out is None:
        return
    if not (
        isinstance(out, np.ndarray)
        and out.shape == x.shape
        and out.dtype == x.dtype
        and out.flags.c_contiguous
        and out.flags.writeable
    ):
        raise ValueError(
            f"out must be a writeable C-contiguous array of shape {x.shape} and dtype {x.dtype}, "
            f"got {type(out).__name__} {getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}"
        )
    if op == "mean" and x.dtype.kind in "biu":
        raise ValueError(f"out: the mean of {x.dtype} values is a float; pass out=None")


# --- closed forms -----------------------------------------------------------------------


def _form(collective, algorithm, p, nbytes, block_nbytes, link, node, reduce, topology=None) -> float:
    if not (isinstance(p, (int, np.integer)) and p >= 1):
        raise ValueError(f"p must be an int >= 1, got {p!r}")
    p = int(p)
    entry = _entry(collective, algorithm, p)
    if p == 1:
        return 0.0
    gamma = get_node(node).gamma_s_per_byte if (reduce and node is not None) else 0.0
    network = get_network(topology, link, "topology")
    if not network.is_flat_for(p):
        if entry.tiered is None:
            raise ValueError(
                f"{collective}/{algorithm} has no closed form on the {network.name} topology; "
                f"valid there: {', '.join(a.name for a in REGISTRY.values() if a.tiered)}"
            )
        inside, up, s = network.link, network.uplink or network.link, min(network.supernode_size, p)
        return entry.tiered(
            p, nbytes, block_nbytes, s, inside.alpha_s, inside.beta_s_per_byte, up.alpha_s, up.beta_s_per_byte, gamma
        )
    link = network.link
    return entry.cost(
        p, nbytes, block_nbytes, link.alpha_s, link.beta_s_per_byte, gamma, lg(p), link.send_overhead_s, link.wire_s
    )


def closed_form(
    collective: str,
    algorithm: str,
    p: int,
    nbytes: float,
    link,
    node=None,
    reduce: bool = False,
    itemsize: int = 1,
    topology=None,
) -> float:
    """Time in seconds of ``collective`` by ``algorithm`` on p ranks over ``nbytes`` (the
    whole buffer; for gather and allgather the whole result) of ``itemsize``-byte elements.

    The registry's cost with the block sizes the algorithm really sends: np.array_split
    cuts nbytes / itemsize elements into p blocks, the largest ceil(n / p) elements. Exact
    for the emulation where the entry says (``exact``), at every size; an upper bound at
    uneven sizes where ``uneven == "bound"``. ``reduce=True`` adds the gamma term (node
    memory bandwidth) of reductions. The network is ``link`` (a preset, a LinkModel or a
    Topology) or ``topology`` (``dlsys.machine.topology.get_network``): within one supernode
    its link; across supernodes only the algorithms with a ``tiered`` form have one.
    Thakur, Rabenseifner & Gropp 2005.
    """
    count = round(nbytes / itemsize)
    return _form(
        collective, algorithm, p, nbytes, lambda k: math.ceil(count / k) * itemsize, link, node, reduce, topology
    )


def textbook_form(
    collective: str, algorithm: str, p: int, nbytes: float, link, node=None, reduce: bool = False, topology=None
) -> float:
    """The textbook closed form: every block n/p bytes (Thakur, Rabenseifner & Gropp 2005).
    Equals ``closed_form`` when the blocks are even; for figures and for comparison."""
    return _form(collective, algorithm, p, nbytes, lambda k: nbytes / k, link, node, reduce, topology)
