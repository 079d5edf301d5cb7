"""Topology-aware all-reduce: reduce inside each supernode, all-reduce across, broadcast inside.

On a two-level tree (dlsys.machine.topology) only one rank per supernode, its leader, crosses the
thin upper level, and it sends n/k-sized ring blocks there instead of every rank sending
whole buffers. The groups come from the run's network (``comm.network``); on a flat
network there is one group and this is the binomial reduce + broadcast. Cost in the
registry (``hierarchical_cost``).
"""

from __future__ import annotations

import numpy as np

from ..comm.group import Group
from .ring import allreduce_ring
from .trees import broadcast_binomial, reduce_binomial


def allreduce_hierarchical(comm, x: np.ndarray, op: str) -> np.ndarray:
    """Hierarchical all-reduce (as MPICH's SMP-aware and NCCL's tree+ring collectives do):

    local   = my supernode's ranks; leaders = the first rank of every supernode
    y       = binomial reduce of x to my leader, inside my supernode
    leader: y = ring all-reduce of y among the leaders, across supernodes
    return binomial broadcast of y from my leader, inside my supernode
    """
    groups = comm.network.supernodes(comm.size)
    local = Group(comm, next(g for g in groups if comm.rank in g))
    y = reduce_binomial(local, x, op, 0)
    if local.rank == 0 and len(groups) > 1:
        y = allreduce_ring(Group(comm, [g[0] for g in groups]), y, op)
    return broadcast_binomial(local, x if y is None else y, 0)
