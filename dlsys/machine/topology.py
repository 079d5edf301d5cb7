"""Which link joins two nodes: a flat network, or a two-level tree of supernodes.

Pure, like dlsys.machine.net: the virtual clock (dlsys.comm.clock) asks ``link_between(src, dst)``
for every pair it charges, a send by its destination and an arrival by its source.

A run has one network object, a Topology: ``get_network`` makes it, once, at the boundary
(``launch``, the CLI, the app, an experiment), from whatever names it: a link (every pair
on it), a topology preset or a Topology. It travels down to the clock as one field.

    flat                every pair on one LinkModel: today's model, every closed form holds
    two-level tree      nodes r and s share supernode r // size: inside, the supernode's
                        network (``link``); across, an upper level ``oversubscription``
                        times thinner per node (``uplink``: bandwidth / oversubscription)
    taihulight          the Sunway TaihuLight: 40,960 nodes in 160 supernodes of 256,
                        14 GB/s links, 70 TB/s bisection
    fat-tree            a k-ary fat tree (k = 16: 1,024 hosts) on ``link``; across edge
                        switches, the host link / oversubscription
    gpu-cluster         DGX H100 islands of 8 GPUs: NVLink 4 inside, one 400 Gb/s
                        InfiniBand rail per GPU across

Each Topology also carries its physical links, ``topology.fabric(nodes)`` (a
dlsys.machine.fabric.Fabric): the same machine for a replay in which messages share links
(dlsys.comm.replay); there the upper levels have their real capacity (the TaihuLight's
875 GB/s uplinks, from the bisection) instead of a static per-pair share.

Which of the two a run uses by default is the network's own (``sharing_of``, the one place
that decides): on a topology with links above its nodes (``shares_links``: the two-level
tree, the TaihuLight, the fat tree, the GPU cluster) a run whose ranks span more than one
supernode replays with shared links, the model that agrees with SimGrid; a flat network,
and a run inside one supernode, keep the per-pair clock, which is their closed forms
exactly (the replay's eager sends of one rank share its egress, so it is not: Rabenseifner,
6 ranks, 1 MiB on tcp-10gbe, 4.65 ms = closed form, 5.38 ms replayed). ``sharing=False``
across supernodes is the static share, kept under that explicit name for the lesson that
contrasts the two.

Several ranks per machine: ``placed(topology, machine_of)`` puts rank r on machine
``machine_of[r]`` of ``topology`` (a worker's threads and its co-located parameter server,
dlsys.schedule.job; later, a node's GPUs). Two ranks of one machine talk over the
loopback: no latency, no wire time, the machine link's CPU overheads (a TCP stack copies
through the kernel on localhost too); ranks of two machines take their machines' link,
and in the fabric they share their machine's egress and ingress (fabric.placed).

Oversubscription of the TaihuLight's upper level: when half of the 40,960 nodes send to
the other half at 14 GB/s each, they offer 20,480 x 14 GB/s = 286.7 TB/s to a 70 TB/s
bisection: 4.1 : 1 (Fu et al. 2016; Dongarra 2016). The model is static: a pair across
supernodes always gets its share 14 GB/s / 4.1 = 3.4 GB/s, as if every node of the
supernode were sending across at once, the worst case of a collective; a real network
gives a lone message the full link.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from . import fabric as fabrics
from .fabric import TAIHULIGHT_NODES, TAIHULIGHT_SOURCE, TAIHULIGHT_SUPERNODE, TAIHULIGHT_BISECTION_Bps
from .net import LINK_PRESETS, LinkModel, get_link

__all__ = [
    "Topology",
    "placed",
    "flat",
    "two_level",
    "taihulight",
    "fat_tree",
    "gpu_cluster",
    "TOPOLOGY_PRESETS",
    "get_network",
    "sharing_of",
    "DEFAULT_LINK",
]

DEFAULT_LINK = "tcp-10gbe"


@dataclass(frozen=True)
class Topology:
    """Links per pair of nodes: ``link`` inside a supernode of ``supernode_size`` nodes
    (None: one supernode holding everything, a flat network), ``uplink`` between
    supernodes; at most ``max_nodes`` nodes. Symmetric: the link from r to s is the link
    from s to r."""

    name: str
    link: LinkModel
    max_nodes: int
    supernode_size: int | None = None
    uplink: LinkModel | None = None
    source: str = ""
    fabric_of: Callable[[int], fabrics.Fabric] | None = field(default=None, compare=False, repr=False)
    machine_of: tuple[int, ...] | None = None  # rank -> machine (``placed``); None: rank r is machine r
    loopback: LinkModel | None = None  # between two ranks of one machine (``placed``)

    def fabric(self, nodes: int) -> fabrics.Fabric:
        """The physical links of nodes 0..nodes-1, where messages share links (module
        docstring); a topology without its own is flat on ``link``. Placed: ranks
        0..nodes-1 on their machines' links."""
        self.check_nodes(nodes)
        if self.machine_of is not None:
            machines = max(self.machine_of[:nodes]) + 1
            return fabrics.placed(
                replace(self, machine_of=None, max_nodes=machines).fabric(machines), self.machine_of[:nodes]
            )
        return fabrics.flat(self.link, nodes) if self.fabric_of is None else self.fabric_of(nodes)

    @property
    def is_flat(self) -> bool:
        return self.supernode_size is None

    @property
    def shares_links(self) -> bool:
        """Whether this network has links above its nodes, which messages share in its own
        model (module docstring) and the per-pair clock can only charge a static share of."""
        return self.supernode_size is not None

    def is_flat_for(self, size: int) -> bool:
        """Whether ranks 0..size-1 all share one link (one supernode holds them all)."""
        if self.supernode_size is None or self.machine_of is None:
            return self.supernode_size is None or size <= self.supernode_size
        return len(self.supernodes(size)) == 1

    def supernode(self, rank: int) -> int:
        machine = rank if self.machine_of is None else self.machine_of[rank]
        return 0 if self.supernode_size is None else machine // self.supernode_size

    @property
    def lookahead_s(self) -> float:
        """The least time from a rank's receive to the arrival of a message it sends in
        response, on any of this network's links: latency plus per-message overhead (the
        lookahead of conservative simulation; comm.board.least_pending needs it > 0)."""
        return min(
            link.latency_s + link.overhead_s for link in (self.link, self.uplink, self.loopback) if link is not None
        )

    def link_between(self, src: int, dst: int) -> LinkModel:
        """The link a message from src to dst crosses."""
        if self.machine_of is not None:
            src, dst = self.machine_of[src], self.machine_of[dst]
            if src == dst and self.loopback is not None:
                return self.loopback
        if self.uplink is None or src // self.supernode_size == dst // self.supernode_size:
            return self.link
        return self.uplink

    def supernodes(self, size: int) -> list[list[int]]:
        """The ranks 0..size-1 by supernode, in order (a flat network: one group)."""
        if self.machine_of is not None:
            groups: dict[int, list[int]] = {}
            for rank in range(size):
                groups.setdefault(self.supernode(rank), []).append(rank)
            return [groups[s] for s in sorted(groups)]
        step = size if self.supernode_size is None else self.supernode_size
        return [list(range(start, min(start + step, size))) for start in range(0, size, step)]

    def check_nodes(self, nodes: int, name: str = "nodes") -> int:
        """``nodes`` if this topology holds that many, else a ValueError naming ``name``."""
        if not (isinstance(nodes, int) and not isinstance(nodes, bool) and 1 <= nodes <= self.max_nodes):
            raise ValueError(
                f"{name} must be an integer in 1..{self.max_nodes} (the {self.name} topology holds "
                f"{self.max_nodes} nodes), got {nodes!r}"
            )
        return nodes


def placed(topology: Topology, machine_of) -> Topology:
    """``topology`` with rank r on machine ``machine_of[r]`` (module docstring): it holds
    len(machine_of) ranks; two ranks of one machine talk over the loopback."""
    machine_of = tuple(machine_of)
    if topology.machine_of is not None:
        raise ValueError(f"topology: {topology.name} already places its ranks; give an unplaced topology")
    if not machine_of or any(
        not (isinstance(m, int) and not isinstance(m, bool) and 0 <= m < topology.max_nodes) for m in machine_of
    ):
        raise ValueError(
            f"machine_of must be a non-empty sequence of machines of the {topology.name} topology, "
            f"integers in 0..{topology.max_nodes - 1}, got {machine_of!r}"
        )
    loopback = replace(
        topology.link,
        name=f"{topology.link.name} loopback",
        latency_s=0.0,
        bandwidth_Bps=math.inf,
        source=f"two ranks of one machine: no wire, {topology.link.name}'s CPU overheads",
    )
    return replace(
        topology, name=f"{topology.name}, placed", max_nodes=len(machine_of), machine_of=machine_of, loopback=loopback
    )


def flat(link=DEFAULT_LINK, max_nodes: int = 2**20) -> Topology:
    """Every pair on the same link (the default network of ``launch``)."""
    link = get_link(link)
    return Topology("flat", link, max_nodes, source=link.source)


def two_level(
    link, supernode_size: int, oversubscription: float, supernodes: int = 2**20 // 256, name: str = "two-level"
) -> Topology:
    """A two-level tree: supernodes of ``supernode_size`` nodes on ``link``, joined by an
    upper level ``oversubscription`` times thinner per node (same latency and overheads)."""
    link = get_link(link)
    if not (isinstance(supernode_size, int) and supernode_size >= 1):
        raise ValueError(f"supernode_size must be an integer >= 1, got {supernode_size!r}")
    oversubscription = fabrics.check_oversubscription(oversubscription)
    uplink = replace(
        link, name=f"{link.name}/{oversubscription:g}", bandwidth_Bps=link.bandwidth_Bps / oversubscription
    )
    return Topology(
        name,
        link,
        supernode_size * supernodes,
        supernode_size,
        uplink,
        f"supernodes of {supernode_size} on {link.name}, upper level oversubscribed {oversubscription:g}:1",
        partial(_two_level_fabric, link, supernode_size, oversubscription, name),
    )


def _two_level_fabric(
    link: LinkModel, supernode_size: int, oversubscription: float, name: str, nodes: int
) -> fabrics.Fabric:
    return fabrics.two_level(link, supernode_size, oversubscription=oversubscription, nodes=nodes, name=name)


def taihulight() -> Topology:
    """The Sunway TaihuLight (module docstring): 160 supernodes of 256 sw26010 nodes."""
    link = get_link("sw26010")
    oversubscription = TAIHULIGHT_NODES / 2 * link.bandwidth_Bps / TAIHULIGHT_BISECTION_Bps
    topology = two_level(
        link, TAIHULIGHT_SUPERNODE, oversubscription, TAIHULIGHT_NODES // TAIHULIGHT_SUPERNODE, "taihulight"
    )
    return replace(topology, source=TAIHULIGHT_SOURCE, fabric_of=fabrics.taihulight)


def fat_tree(k: int = 16, oversubscription: float = 1.0, link="rdma-edr") -> Topology:
    """A k-ary fat tree of k^3/4 hosts on ``link`` (dlsys.machine.fabric.fat_tree: Al-Fares
    et al. 2008, switch links at B / oversubscription). A link per pair: hosts under one
    edge switch (k/2 of them) on ``link``, every other pair on ``link`` / oversubscription
    (the static worst case of a two-level tree; the fabric shares the switch links)."""
    link = get_link(link)
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 2 and k % 2 == 0):
        raise ValueError(f"k must be an even integer >= 2 (switches of k ports), got {k!r}")
    over = fabrics.check_oversubscription(oversubscription)
    topology = two_level(link, k // 2, over, k * k // 2, "fat-tree")
    return replace(
        topology,
        source=f"k-ary fat tree, k = {k} ({k**3 // 4} hosts; Al-Fares et al., SIGCOMM "
        f"2008) on {link.name}, switch links oversubscribed {over:g}:1",
        fabric_of=partial(_fat_tree_fabric, k, over, link),
    )


def _fat_tree_fabric(k: int, oversubscription: float, link: LinkModel, nodes: int) -> fabrics.Fabric:
    return fabrics.fat_tree(k, oversubscription, link)


def gpu_cluster(nvlink_latency_s: float = 2e-6, ib_latency_s: float = 3e-6, max_nodes: int = 2**16) -> Topology:
    """GPUs in islands of 8 (NVIDIA DGX H100; dlsys.machine.fabric.gpu_cluster): NVLink 4
    at 450 GB/s each way inside an island, a 400 Gb/s InfiniBand rail per GPU across."""
    nvlink = LinkModel("nvlink4", nvlink_latency_s, fabrics.NVLINK4_Bps, source=fabrics.GPU_CLUSTER_SOURCE)
    ib = LinkModel("connectx7-ndr", ib_latency_s, fabrics.CONNECTX7_Bps, source=fabrics.GPU_CLUSTER_SOURCE)
    return Topology(
        "gpu-cluster",
        nvlink,
        max_nodes,
        fabrics.GPU_ISLAND,
        ib,
        fabrics.GPU_CLUSTER_SOURCE,
        partial(fabrics.gpu_cluster, nvlink_latency_s=nvlink_latency_s, ib_latency_s=ib_latency_s),
    )


TOPOLOGY_PRESETS = ("flat", "two-level", "taihulight", "fat-tree", "gpu-cluster")
TWO_LEVEL_SUPERNODE, TWO_LEVEL_OVERSUBSCRIPTION = 32, 4.0  # the "two-level" preset: a teaching default


def get_network(network=None, link=DEFAULT_LINK, argument: str = "network") -> Topology:
    """The one resolver of a run's network, from any of the ways to name one (names in any case):

        None or "flat"              every pair on ``link`` (``net.get_link``: a preset, a
                                    bandwidth like 10Gbps, or a LinkModel)
        a link preset, a bandwidth  every pair on that link
        or a LinkModel
        "two-level"                 supernodes of 32 on ``link``, upper level 4:1
        "fat-tree"                  k = 16, full bisection, hosts on ``link``
        "taihulight", "gpu-cluster" on their own links
        a Topology                  itself

    A bad value is a ValueError naming ``argument`` (``link`` where ``link`` was used) and
    the accepted names."""
    if network is None or (isinstance(network, str) and network.strip().lower() == "flat"):
        network, argument = link, "link"
    if isinstance(network, Topology):
        return network
    name = network.strip().lower() if isinstance(network, str) else network
    if name == "two-level":
        return two_level(link, TWO_LEVEL_SUPERNODE, TWO_LEVEL_OVERSUBSCRIPTION)
    if name == "fat-tree":
        return fat_tree(16, 1.0, link)
    if name == "taihulight":
        return taihulight()
    if name == "gpu-cluster":
        return gpu_cluster()
    if isinstance(network, LinkModel) or (isinstance(network, str) and network.strip()[:1].isdigit()):
        return flat(get_link(network, argument))  # a bandwidth: its own error names the spellings
    if isinstance(network, str) and name in LINK_PRESETS:
        return flat(get_link(name))
    what = "link preset" if argument == "link" else argument
    raise ValueError(
        f"{argument}: unknown {what} {network!r}; valid: "
        f"{', '.join(LINK_PRESETS)} (links), {', '.join(TOPOLOGY_PRESETS)} (topologies), "
        "a bandwidth like 10Gbps, a LinkModel or a Topology"
    )


def sharing_of(network: Topology, sharing: bool | None = None, size: int | None = None) -> bool:
    """Whether a run of ``size`` ranks on ``network`` replays with shared links: ``sharing``
    if True or False (False across supernodes: the static per-pair shares, by that explicit
    name only); None (the default everywhere) the network's own model (module docstring):
    shared where its ranks span links above the nodes (``size`` None: any size),
    the per-pair clock on a flat network or inside one supernode. Else a ValueError."""
    if sharing is None:
        return network.shares_links and (size is None or not network.is_flat_for(size))
    if not isinstance(sharing, bool):
        raise ValueError(
            f"sharing must be None (the network's own model: shared links above the nodes), True or False, "
            f"got {sharing!r}"
        )
    return sharing
