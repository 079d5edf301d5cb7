"""Topology and contention (issue 24, lesson 13): one communication pattern on a fabric,
with links that messages share (max-min fair sharing, dlsys.comm.replay) and without
(every message has its pair's link to itself, DESIGN.md), and which links were hot when.

Patterns, on ``ranks`` ranks with a buffer of ``size`` bytes per rank:

    incast               ranks 1..p-1 each push their buffer to rank 0 (a parameter server's
                         gradient pushes): (p-1) n bytes through rank 0's ingress
    ring                 ring all-reduce (dlsys.collectives, Thakur et al. 2005 section 4)
    recursive_doubling   recursive-doubling all-reduce (Thakur et al. 2005)
    hierarchical         reduce inside each supernode, ring across leaders, broadcast inside
    alltoall             every rank sends block j of its buffer (n / p bytes) to rank j, to
                         (r+1), (r+2), ... in turn, then receives: MPICH's isend/irecv
                         all-to-all (src/mpi/coll/alltoall/alltoall_intra_scattered.c)

Fabrics (``contention_network``): "flat" (a non-blocking switch), "two-level" (supernodes
of ``supernode_size`` under an upper level ``oversubscription`` times thinner per node)
and "fat-tree" (the smallest k-ary fat tree that holds the ranks, Al-Fares et al. 2008,
switch links at B / ``oversubscription``).

The record's ``link_bound_s`` is the busiest link's bytes over its capacity: no schedule
of these messages can finish sooner (each link carries at most its capacity). For the
incast it is (p-1) n / B at rank 0's ingress; for the all-to-all on an oversubscribed fat
tree, the bytes crossing the thinnest cut over that cut's capacity (the bisection bound).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..checks import check_int
from ..comm.backends import MAX_THREAD_RANKS
from ..comm.launch import launch
from ..comm.replay import link_load
from ..machine.net import parse_size
from ..machine.topology import Topology, fat_tree, flat, two_level
from .budget import plan_buffers
from .collectives import collective_plan, collective_program

PATTERNS = ("incast", "ring", "recursive_doubling", "hierarchical", "alltoall")
FABRICS = ("flat", "two-level", "fat-tree")
ALLREDUCES = ("ring", "recursive_doubling", "hierarchical")
MEMORY_BYTES = 2**24  # real buffers of all ranks together: each real element stands for many (lesson 07)
ITEMSIZE = 4  # float32


def contention_network(
    fabric: str, ranks: int, link="rdma-edr", oversubscription: float = 4.0, supernode_size: int = 4
) -> Topology:
    """The network of a contention run: "flat" on ``link``; "two-level", supernodes of
    ``supernode_size`` with uplinks of supernode_size B / oversubscription; "fat-tree",
    the smallest even k with k^3/4 >= ranks, switch links at B / oversubscription."""
    if fabric == "flat":
        return flat(link)
    if fabric == "two-level":
        return two_level(link, supernode_size, oversubscription)
    if fabric == "fat-tree":
        k = 2
        while k**3 // 4 < ranks:
            k += 2
        return fat_tree(k, oversubscription, link)
    raise ValueError(f"fabric must be one of {', '.join(FABRICS)}, got {fabric!r}")


def pattern_program(comm, pattern: str, block, seed: int):
    """Rank program of one pattern (module docstring); ``block`` is a BufferPlan of the
    buffer (an all-reduce), of the pushed buffer (incast) or of one block (all-to-all)."""
    x = block.wrap(np.random.default_rng([seed, comm.rank]).standard_normal(block.real_count).astype(np.float32))
    p, r = comm.size, comm.rank
    if pattern == "incast":
        if r == 0:
            return sum(np.asarray(comm.recv(source=src, label="push")).sum(dtype=np.float64) for src in range(1, p))
        comm.send(x, 0, label="push")
        return None
    if pattern == "alltoall":
        for i in range(1, p):
            comm.send(x, (r + i) % p, label="alltoall")
        return [comm.recv(source=(r - i) % p, label="alltoall") for i in range(1, p)]
    return collective_program(comm, "allreduce", pattern, block.real_count, "float32", "sum", seed, block)


def run_pattern(
    pattern: str = "ring",
    fabric: str = "two-level",
    ranks: int = 8,
    size="16MiB",
    sharing: bool = True,
    link="rdma-edr",
    oversubscription: float = 4.0,
    supernode_size: int = 4,
    bins: int = 40,
    seed: int = 0,
) -> dict:
    """Run ``pattern`` (PATTERNS) on ``ranks`` ranks of ``fabric`` (FABRICS) with a buffer of
    ``size`` bytes per rank, sharing on or off, and return a tidy record: the virtual time,
    the link-load rows (``dlsys.comm.replay.link_load`` in ``bins`` time bins), every
    link's capacity, the busiest link and its bound, and the messages and bytes that
    crossed a switch link (a route longer than the sender's egress and receiver's ingress).
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {pattern!r}")
    check_int("ranks", ranks, 2, MAX_THREAD_RANKS)
    check_int("bins", bins, 1)
    if not isinstance(sharing, bool):
        raise ValueError(f"sharing must be True or False, got {sharing!r}")
    network = contention_network(fabric, ranks, link, oversubscription, supernode_size)
    network.check_nodes(ranks, "ranks")
    nbytes = parse_size(size)
    parts = ranks if pattern == "alltoall" else 1
    if nbytes <= 0 or nbytes % (parts * ITEMSIZE):
        raise ValueError(
            f"size must be a positive multiple of {parts * ITEMSIZE} bytes (float32 elements"
            + (f", cut into {ranks} equal blocks" if parts > 1 else "")
            + f"), got {nbytes}"
        )
    count = nbytes // (parts * ITEMSIZE)
    if pattern in ALLREDUCES:
        plan = collective_plan("allreduce", pattern, ranks, count, "float32", MEMORY_BYTES, network=network)
    else:
        plan = plan_buffers(count, ranks, "float32", copies=ranks + 1, max_memory_bytes=MEMORY_BYTES)
    result = launch(
        pattern_program, ranks, "threads", topology=network, sharing=sharing, seed=seed, args=(pattern, plan, seed)
    )
    routes = network.fabric(ranks)
    fabric_links = routes.links
    rows = link_load(result, bins)
    carried: dict[int, float] = defaultdict(float)
    for row in rows:
        carried[row["link_id"]] += row["nbytes"]
    hottest = max(carried, key=lambda link: carried[link] / fabric_links[link].capacity_Bps)
    across = [m for m in result.trace.messages if m.src != m.dst and len(routes.route(m.src, m.dst)) > 2]
    return {
        "pattern": pattern,
        "fabric": fabric,
        "topology": network.name,
        "ranks": ranks,
        "nbytes": nbytes,
        "sharing": sharing,
        "link": network.link.name,
        "oversubscription": oversubscription,
        "virtual_time_s": result.virtual_time_s,
        "latency_s": network.link.latency_s,
        "bins": bins,
        "rows": rows,
        "capacities_Bps": {link: fabric_links[link].capacity_Bps for link in carried},
        "hottest_link": fabric_links[hottest].name,
        "hottest_nbytes": carried[hottest],
        "link_bound_s": carried[hottest] / fabric_links[hottest].capacity_Bps,
        "messages": len(result.trace.messages),
        "switch_messages": len(across),
        "switch_nbytes": sum(m.nbytes for m in across),
        "result": result,
    }


def sharing_pair(
    pattern: str = "ring", fabric: str = "two-level", ranks: int = 8, size="16MiB", **options
) -> list[dict]:
    """``run_pattern`` with sharing off, then on (the same messages: what sharing changes is when they arrive)."""
    return [run_pattern(pattern, fabric, ranks, size, sharing, **options) for sharing in (False, True)]
