"""Networks as data: links with a capacity and a latency, and a route for every ordered pair.

Pure, like the rest of dlsys.machine. ``topology.py`` answers "which LinkModel joins r and
s" and charges every message as if it had its pair's link to itself; a Fabric says which
*physical* links a message crosses, so that messages which cross one link at the same
time can share it (dlsys.machine.flows, max-min fair sharing). Links are directional
(full duplex is two links), each with

    capacity_Bps    the bytes per second it carries, shared by the messages crossing it
    latency_s       the time it adds to a message's route

A route is the tuple of link ids from src to dst. A message's latency is the sum of its
route's link latencies; its bandwidth is whatever share max-min fairness leaves it on its
route (flows.py). Every builder puts the whole end-to-end latency of the LinkModel on the
two node links, half each, and none on switch links, so that every route of a fabric
costs exactly ``link.latency_s`` (``lat/2 + lat/2 == lat`` in binary floating point), as
a message does under DESIGN.md's rules; the upper levels only add capacity constraints.
(A SimGrid cross-check needs this too: its CM02 model weights a flow's share by the
inverse of its route latency, so equal route latencies make its sharing plain max-min;
docs/flows.md.)

Builders (ValueError names the argument and the accepted range):

    flat(link, nodes)           node i: an egress and an ingress link of ``link``'s bandwidth;
                                route (egress[s], ingress[d]). One message between idle
                                nodes costs latency + n/B, as in DESIGN.md, and an incast of
                                p messages shares the receiver's ingress: p n / B.
    two_level(link, supernode_size, upper_bandwidth_Bps=, oversubscription=, nodes=)
                                supernodes on a full crossbar (node links only), each with an
                                uplink and a downlink of ``upper_bandwidth_Bps`` to a
                                non-blocking upper level (= supernode_size B / oversubscription).
                                Across: (egress[s], up[S(s)], down[S(d)], ingress[d]).
    taihulight(nodes)           two_level with 256-node supernodes of sw26010 links (14 GB/s),
                                and an upper level of the real capacity: the 70 TB/s bisection
                                of 40,960 nodes (160 supernodes) is crossed by the uplinks of
                                the 80 supernodes of one half, so each uplink carries
                                70e12 / 80 = 875 GB/s = 256 x 14 GB/s / 4.096.
    fat_tree(k, oversubscription, link)
                                a k-ary fat tree (Al-Fares, Loukissas & Vahdat, SIGCOMM 2008):
                                k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 core
                                switches, k^3/4 hosts; switch-to-switch links carry
                                B / oversubscription (1: full bisection). Routing is
                                deterministic destination-mod-k (Zahavi et al.; Gomez et al.,
                                "Deterministic versus adaptive routing in fat-trees", IPDPS
                                2007): the up port at each level is picked by the destination.
    placed(fabric, machine_of)  several ranks per machine: rank r is machine machine_of[r] of
                                ``fabric``; ranks on one machine reach each other on no link
                                (the loopback), ranks on two share their machines' links.
    gpu_cluster(nodes)          islands of 8 GPUs on NVSwitch (NVLink 4: 900 GB/s per GPU in
                                both directions together, 450 GB/s each way), and one
                                InfiniBand NDR rail per GPU (ConnectX-7, 400 Gb/s = 50 GB/s each
                                way) into a non-blocking rail fabric: NVIDIA DGX H100 (NVIDIA
                                DGX H100 User Guide and datasheet, 2023).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Mapping, Sequence

from .net import LinkModel, get_link

__all__ = [
    "FabricLink",
    "Fabric",
    "explicit",
    "placed",
    "flat",
    "two_level",
    "taihulight",
    "fat_tree",
    "gpu_cluster",
    "FABRIC_PRESETS",
    "get_fabric",
    "TAIHULIGHT_UPLINK_Bps",
    "NVLINK4_Bps",
    "CONNECTX7_Bps",
    "GPU_ISLAND",
]

TAIHULIGHT_NODES = 40_960
TAIHULIGHT_SUPERNODE = 256
TAIHULIGHT_BISECTION_Bps = 70e12
# The bisection cuts the 160 supernodes in two halves of 80; the 80 uplinks of one half carry it.
TAIHULIGHT_UPLINK_Bps = TAIHULIGHT_BISECTION_Bps / (TAIHULIGHT_NODES // TAIHULIGHT_SUPERNODE // 2)
TAIHULIGHT_SOURCE = (
    "Fu et al., 'The Sunway TaihuLight supercomputer: system and applications', Sci. China Inf. "
    "Sci. 59 (2016): 40,960 SW26010 nodes, supernodes of 256 nodes on a full crossbar, a central "
    "network above them; Dongarra, 'Report on the Sunway TaihuLight System' (2016): 14 GB/s per "
    "node, 70 TB/s bisection. Each supernode's uplink: 70 TB/s / 80 = 875 GB/s."
)

GPU_ISLAND = 8
NVLINK4_Bps = 450e9  # NVLink 4 on H100 SXM: 18 links x 50 GB/s = 900 GB/s bidirectional, 450 GB/s each way
CONNECTX7_Bps = 50e9  # ConnectX-7 NDR InfiniBand: 400 Gb/s = 50 GB/s each way, one per GPU
GPU_CLUSTER_SOURCE = (
    "NVIDIA DGX H100 (DGX H100 User Guide; H100 and ConnectX-7 datasheets, 2023): 8 H100 SXM GPUs "
    "on 4 NVSwitch chips, NVLink 4 at 900 GB/s per GPU (bidirectional, 450 GB/s each way); "
    "8 single-port ConnectX-7 NICs at 400 Gb/s, one InfiniBand rail per GPU. Latencies are "
    "teaching defaults: 2 us inside an island (the nvlink preset), 3 us across (NIC, PCIe "
    "switch and two InfiniBand switch hops; NCCL's base latency for IB is a few microseconds)."
)


@dataclass(frozen=True)
class FabricLink:
    """One direction of one physical link: ``capacity_Bps`` shared by the messages on it,
    ``latency_s`` added to every route through it."""

    name: str
    capacity_Bps: float
    latency_s: float = 0.0

    def __post_init__(self):
        if not (
            isinstance(self.capacity_Bps, (int, float)) and self.capacity_Bps > 0 and math.isfinite(self.capacity_Bps)
        ):
            raise ValueError(f"link {self.name!r}: capacity_Bps must be a finite number > 0, got {self.capacity_Bps!r}")
        if not (isinstance(self.latency_s, (int, float)) and self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise ValueError(f"link {self.name!r}: latency_s must be a finite number >= 0, got {self.latency_s!r}")


@dataclass(frozen=True)
class Fabric:
    """``nodes`` nodes, ``links`` (a link's id is its index), and ``router(src, dst)``, the
    route as a tuple of link ids (empty for src == dst: a node reaches itself for free).

    Routes are data given by a rule, so a 40,960-node machine needs no table of 1.7e9
    pairs; ``explicit`` builds one from a table. ``route`` checks its arguments."""

    name: str
    nodes: int
    links: tuple[FabricLink, ...]
    router: Callable[[int, int], tuple[int, ...]] = field(repr=False)
    source: str = ""

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """The link ids a message from src to dst crosses, in order."""
        self.check_node(src, "src")
        self.check_node(dst, "dst")
        return () if src == dst else self.router(src, dst)

    def latency_s(self, src: int, dst: int) -> float:
        """The route's latency: the sum of its links' latencies, in route order."""
        total = 0.0
        for link in self.route(src, dst):
            total += self.links[link].latency_s
        return total

    def bandwidth_Bps(self, src: int, dst: int) -> float:
        """What a lone message from src to dst gets: its route's narrowest link."""
        route = self.route(src, dst)
        return min(self.links[link].capacity_Bps for link in route) if route else math.inf

    def check_node(self, node, name: str = "node") -> int:
        if not (isinstance(node, int) and not isinstance(node, bool) and 0 <= node < self.nodes):
            raise ValueError(
                f"{name} must be a node of the {self.name} fabric, an integer in 0..{self.nodes - 1}, got {node!r}"
            )
        return node

    def check_nodes(self, nodes, name: str = "nodes") -> int:
        """``nodes`` if this fabric holds that many ranks, else a ValueError naming ``name``."""
        if not (isinstance(nodes, int) and not isinstance(nodes, bool) and 1 <= nodes <= self.nodes):
            raise ValueError(
                f"{name} must be an integer in 1..{self.nodes} (the {self.name} fabric holds "
                f"{self.nodes} nodes), got {nodes!r}"
            )
        return nodes


def _check_int(value, name: str, low: int, high: int | None = None, why: str = "") -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)
    if not ok:
        accepted = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {accepted}{why}, got {value!r}")
    return value


def check_oversubscription(value) -> float:
    """``value`` as a float if it is a valid oversubscription factor, else a ValueError."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 1):
        raise ValueError(
            f"oversubscription must be a finite number >= 1 (1: full bisection; 4: the upper level "
            f"carries a quarter of what the nodes below it can send), got {value!r}"
        )
    return float(value)


def _node_links(link: LinkModel, nodes: int, prefix: str = "") -> list[FabricLink]:
    """Each node's egress (id 2i) and ingress (id 2i+1), half the end-to-end latency each."""
    half = link.latency_s / 2
    out = []
    for i in range(nodes):
        out.append(FabricLink(f"{prefix}egress{i}", link.bandwidth_Bps, half))
        out.append(FabricLink(f"{prefix}ingress{i}", link.bandwidth_Bps, half))
    return out


def explicit(
    name: str,
    nodes: int,
    links: Sequence[FabricLink],
    routes: Mapping[tuple[int, int], Sequence[int]],
    source: str = "",
) -> Fabric:
    """A fabric from a table: ``routes[(src, dst)]`` for every ordered pair src != dst.
    A route must name existing links and cross none twice."""
    _check_int(nodes, "nodes", 1)
    links = tuple(links)
    table = {}
    for src in range(nodes):
        for dst in range(nodes):
            if src == dst:
                continue
            if (src, dst) not in routes:
                raise ValueError(f"routes must give every ordered pair of 0..{nodes - 1}; ({src}, {dst}) is missing")
            route = tuple(routes[(src, dst)])
            if any(not (isinstance(l, int) and 0 <= l < len(links)) for l in route) or len(set(route)) != len(route):
                raise ValueError(
                    f"route ({src}, {dst}) must be distinct link ids in 0..{len(links) - 1}, got {route!r}"
                )
            table[(src, dst)] = route
    return Fabric(name, nodes, links, lambda s, d: table[(s, d)], source)


def placed(fabric: Fabric, machine_of: Sequence[int]) -> Fabric:
    """``fabric``'s machines holding several ranks: rank r is machine ``machine_of[r]``.
    Two ranks of one machine exchange on the loopback (an empty route: no link, no
    latency); across machines a rank's message takes its machine's route, so every rank of
    a machine shares that machine's egress and ingress (a worker and a parameter server
    on one host, P3's runs; several GPUs' ranks on one node)."""
    machine_of = tuple(machine_of)
    if not machine_of or any(
        not (isinstance(m, int) and not isinstance(m, bool) and 0 <= m < fabric.nodes) for m in machine_of
    ):
        raise ValueError(
            f"machine_of must be a non-empty sequence of machines of the {fabric.name} fabric, "
            f"integers in 0..{fabric.nodes - 1}, got {machine_of!r}"
        )
    machines = len(set(machine_of))
    return Fabric(
        f"{fabric.name}, {len(machine_of)} ranks on {machines} machines",
        len(machine_of),
        fabric.links,
        partial(_placed_route, fabric.router, machine_of),
        fabric.source,
    )


def _placed_route(
    router: Callable[[int, int], tuple[int, ...]], machine_of: tuple[int, ...], src: int, dst: int
) -> tuple[int, ...]:
    a, b = machine_of[src], machine_of[dst]
    return () if a == b else router(a, b)


def flat(link="tcp-10gbe", nodes: int = 2**20) -> Fabric:
    """Every node has its own egress and ingress link of ``link``'s bandwidth and nothing in
    between (a non-blocking switch): route (egress[s], ingress[d]), latency ``link.latency_s``.

    DESIGN.md's rules are its special case: a lone message costs latency + n / B, a
    sender's messages share its egress, an incast of p messages of n bytes arrives at the
    receiver at p n / B, and a ring step, one message per link, costs alpha + n / B."""
    link = get_link(link)
    _check_int(nodes, "nodes", 1)
    links = _node_links(link, nodes)
    return Fabric("flat", nodes, tuple(links), lambda s, d: (2 * s, 2 * d + 1), link.source)


def two_level(
    link,
    supernode_size: int,
    upper_bandwidth_Bps: float | None = None,
    oversubscription: float | None = None,
    nodes: int | None = None,
    name: str = "two-level",
    source: str = "",
) -> Fabric:
    """Supernodes of ``supernode_size`` consecutive nodes on a full crossbar (node links
    only), each joined to a non-blocking upper level by an uplink and a downlink of
    ``upper_bandwidth_Bps``; give that, or ``oversubscription`` (upper = supernode_size x
    B / oversubscription). ``nodes`` defaults to two supernodes.

    Unlike topology.two_level, which charges every crossing message a static 1/oversubscription
    of its link, a lone message across gets min(B, upper) and k at once share the upper link."""
    link = get_link(link)
    _check_int(supernode_size, "supernode_size", 1)
    nodes = 2 * supernode_size if nodes is None else _check_int(nodes, "nodes", 1)
    if (upper_bandwidth_Bps is None) == (oversubscription is None):
        raise ValueError(
            "give exactly one of upper_bandwidth_Bps (B/s per supernode uplink, > 0) and oversubscription (>= 1)"
        )
    if oversubscription is not None:
        upper_bandwidth_Bps = supernode_size * link.bandwidth_Bps / check_oversubscription(oversubscription)
    elif not (
        isinstance(upper_bandwidth_Bps, (int, float)) and math.isfinite(upper_bandwidth_Bps) and upper_bandwidth_Bps > 0
    ):
        raise ValueError(
            f"upper_bandwidth_Bps must be a finite number > 0 (B/s of each supernode's uplink), "
            f"got {upper_bandwidth_Bps!r}"
        )
    supernodes = -(-nodes // supernode_size)
    links = _node_links(link, nodes)
    base = len(links)
    for s in range(supernodes):
        links.append(FabricLink(f"up{s}", upper_bandwidth_Bps))
        links.append(FabricLink(f"down{s}", upper_bandwidth_Bps))

    def router(src: int, dst: int) -> tuple[int, ...]:
        a, b = src // supernode_size, dst // supernode_size
        if a == b:
            return (2 * src, 2 * dst + 1)
        return (2 * src, base + 2 * a, base + 2 * b + 1, 2 * dst + 1)

    return Fabric(
        name,
        nodes,
        tuple(links),
        router,
        source or f"supernodes of {supernode_size} on {link.name}, uplinks of {upper_bandwidth_Bps:.4g} B/s",
    )


def taihulight(nodes: int = TAIHULIGHT_NODES) -> Fabric:
    """The Sunway TaihuLight's first ``nodes`` nodes (module docstring): supernodes of 256
    sw26010 nodes at 14 GB/s, each with an 875 GB/s uplink (the 70 TB/s bisection)."""
    _check_int(nodes, "nodes", 1, TAIHULIGHT_NODES, " (the TaihuLight has 40,960 nodes)")
    return two_level(
        "sw26010",
        TAIHULIGHT_SUPERNODE,
        upper_bandwidth_Bps=TAIHULIGHT_UPLINK_Bps,
        nodes=nodes,
        name="taihulight",
        source=TAIHULIGHT_SOURCE,
    )


def fat_tree(k: int, oversubscription: float = 1.0, link="rdma-edr") -> Fabric:
    """A k-ary fat tree of k^3/4 hosts (module docstring), host links of ``link``,
    switch-to-switch links of B / oversubscription, destination-mod-k routing.

    Host h sits in pod h // (k^2/4) under edge switch (h mod k^2/4) // (k/2). A route
    climbs only as high as it must: the same edge switch (2 links), the same pod
    (4: edge up to aggregation a = d mod k/2 and down), or across pods (6: up to core
    switch (a, c), c = (d div k/2) mod k/2, and down into the destination's pod)."""
    _check_int(k, "k", 2)
    if k % 2:
        raise ValueError(f"k must be an even integer >= 2 (k-ary fat tree: k-port switches), got {k!r}")
    over = check_oversubscription(oversubscription)
    link = get_link(link)
    half = k // 2
    hosts, per_pod = k**3 // 4, half * half
    links = _node_links(link, hosts)
    upper = link.bandwidth_Bps / over
    index: dict[tuple, int] = {}

    def add(key: tuple, name: str) -> None:
        index[key] = len(links)
        links.append(FabricLink(name, upper))

    for pod in range(k):
        for edge in range(half):
            for agg in range(half):
                add(("edge-up", pod, edge, agg), f"pod{pod}/edge{edge}->agg{agg}")
                add(("agg-down", pod, agg, edge), f"pod{pod}/agg{agg}->edge{edge}")
        for agg in range(half):
            for core in range(half):
                add(("agg-up", pod, agg, core), f"pod{pod}/agg{agg}->core{agg * half + core}")
                add(("core-down", pod, agg, core), f"core{agg * half + core}->pod{pod}/agg{agg}")

    def router(src: int, dst: int) -> tuple[int, ...]:
        pod_s, pod_d = src // per_pod, dst // per_pod
        edge_s, edge_d = src % per_pod // half, dst % per_pod // half
        if (pod_s, edge_s) == (pod_d, edge_d):
            return (2 * src, 2 * dst + 1)
        agg, core = dst % half, dst // half % half
        if pod_s == pod_d:
            return (
                2 * src,
                index[("edge-up", pod_s, edge_s, agg)],
                index[("agg-down", pod_d, agg, edge_d)],
                2 * dst + 1,
            )
        return (
            2 * src,
            index[("edge-up", pod_s, edge_s, agg)],
            index[("agg-up", pod_s, agg, core)],
            index[("core-down", pod_d, agg, core)],
            index[("agg-down", pod_d, agg, edge_d)],
            2 * dst + 1,
        )

    return Fabric(
        f"fat-tree(k={k}, {over:g}:1)",
        hosts,
        tuple(links),
        router,
        f"k-ary fat tree (Al-Fares et al. 2008), {hosts} hosts on {link.name}, switch links "
        f"oversubscribed {over:g}:1, destination-mod-k routing",
    )


def gpu_cluster(nodes: int = 16, nvlink_latency_s: float = 2e-6, ib_latency_s: float = 3e-6) -> Fabric:
    """``nodes`` GPUs in islands of 8 (DGX H100, module docstring). Inside an island:
    (nvlink-egress[s], nvlink-ingress[d]) at 450 GB/s; across islands: (ib-egress[s],
    ib-ingress[d]) at 50 GB/s, through a non-blocking rail-optimised fabric, so a message
    across is limited by its NICs and shares them with the GPU's other messages across."""
    _check_int(nodes, "nodes", 1)
    nvlink = LinkModel("nvlink4", nvlink_latency_s, NVLINK4_Bps)
    ib = LinkModel("connectx7-ndr", ib_latency_s, CONNECTX7_Bps)
    links = _node_links(nvlink, nodes, "nvlink-") + _node_links(ib, nodes, "ib-")
    base = 2 * nodes

    def router(src: int, dst: int) -> tuple[int, ...]:
        if src // GPU_ISLAND == dst // GPU_ISLAND:
            return (2 * src, 2 * dst + 1)
        return (base + 2 * src, base + 2 * dst + 1)

    return Fabric("gpu-cluster", nodes, tuple(links), router, GPU_CLUSTER_SOURCE)


FABRIC_PRESETS = ("flat", "taihulight", "fat-tree", "gpu-cluster")


def get_fabric(fabric, nodes: int | None = None, link="tcp-10gbe") -> Fabric:
    """A Fabric, or a preset by name with at least ``nodes`` nodes: "flat" (on ``link``),
    "taihulight", "fat-tree" (full bisection, the smallest even k that holds ``nodes``),
    "gpu-cluster" (DGX H100 islands). ValueError lists the valid names."""
    if isinstance(fabric, Fabric):
        if nodes is not None:
            fabric.check_nodes(nodes)
        return fabric
    if fabric not in FABRIC_PRESETS:
        raise ValueError(f"unknown fabric {fabric!r}; valid: {', '.join(FABRIC_PRESETS)}")
    if nodes is not None:
        _check_int(nodes, "nodes", 1)
    if fabric == "flat":
        return flat(link, nodes or 2)
    if fabric == "taihulight":
        return taihulight(nodes or TAIHULIGHT_NODES)
    if fabric == "fat-tree":
        k = 2
        while k**3 // 4 < (nodes or 1):
            k += 2
        return fat_tree(k)
    return gpu_cluster(nodes or 2 * GPU_ISLAND)
