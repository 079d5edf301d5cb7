"""The MPI collectives over a Communicator, one file per family of algorithms (as MPICH's
src/mpi/coll/), picked by name from one registry.

Call form: ``allreduce(comm, x, op="sum", algorithm="ring")``. As in MPI and
torch.distributed, every rank passes an array of the same shape and dtype (for broadcast
and scatter the non-roots' contents are ignored: it is the receive buffer's shape).

    trees.py             barrier (dissemination), binomial broadcast/scatter/gather/reduce,
                         reduce + broadcast all-reduce
    ring.py              ring reduce-scatter, all-gather, all-reduce; scatter-allgather broadcast
    halving_doubling.py  recursive halving/doubling, Rabenseifner; MPICH's fold to a power of two
    exchange.py          pairwise exchange and Bruck's all-to-all; the pairwise all-to-all-v
    ring_fast.py         the ring all-reduce zero-copy into ``out=``, or lean (``fast=True``)
    registry.py          (collective, algorithm) -> rank function, closed form, LaTeX, citation, colour
    dispatch.py          the calls (allreduce, ...) and the closed forms, over the registry

What a student reads (trees, ring, halving_doubling) is plain sends, receives and numpy;
ring_fast sends the same messages from lent memory into the caller's buffer, and the tests
hold both to identical values and traces. A new algorithm: a rank function in one of these
files (or a new one) and one REGISTRY entry; its closed form, figures and tests follow.
The calls check arguments, turn "mean" into a sum and a division, and dispatch. They are
imported on first use (dlsys.lazy), so that importing one algorithm's file imports neither
the registry nor the Communicator.
"""

from ..lazy import lazy

__getattr__, __all__ = lazy(
    __name__,
    dispatch=[
        "barrier",
        "broadcast",
        "scatter",
        "gather",
        "reduce",
        "reduce_scatter",
        "allgather",
        "allgatherv",
        "allreduce",
        "alltoall",
        "alltoallv",
        "OPS",
        "check_algorithm",
        "check_op",
        "closed_form",
        "textbook_form",
    ],
    registry=["ALGORITHMS", "REGISTRY", "Algorithm"],
)
