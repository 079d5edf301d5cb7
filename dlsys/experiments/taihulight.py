"""The Caffe-on-Sunway-TaihuLight case study (SPEC section 11): the paper's two designs on
emulated SW26010 nodes, and its ring against the library MPI_Allreduce (figs 7-8).

``run_design`` runs one iteration of a design (dlsys.train.caffe) and splits the time of rank 0
into compute (forward, backward), packing copies, update and communication (the rest: what
the compute does not hide). ``sweep`` does it for a list of node counts; ``ring_vs_mpi``
times the ring against an MPI library's choice of algorithm (a preset of
dlsys.machine.netstack.LIBRARIES: the paper's TaihuLight MPI, MPICH, Open MPI).

``sharing`` (all three): the times come from a replay in which concurrent messages share the
links of the topology's fabric max-min fairly (dlsys.comm.replay, docs/flows.md). On the
TaihuLight that is the faithful model: a message across supernodes gets what the 875 GB/s
uplink has left, not the static quarter of its link that the per-pair rules charge every
crossing message. Its one departure here: the replay's sends are eager (a rank's next send
starts while its last is still on the wire, and the two share the egress), where MPI's
blocking MPI_Send and MPI_Sendrecv of a long message hold the next one back.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .. import collectives
from ..checks import check_int
from ..comm.backends import MAX_THREAD_RANKS
from ..comm.launch import launch
from ..comm.replay import link_load
from ..machine.net import get_node
from ..machine.netstack import LIBRARIES, MPI_LIBRARIES, Library
from ..machine.profiles import profile
from ..machine.topology import get_network, sharing_of
from ..train.caffe import DESIGNS, MPI_DESIGNS, design_program, real_sizes
from .collectives import simulate_collective
from .taihulight_forms import ps_mpi_rank0_s, ps_rank0_s

MODELS = ("alexnet", "googlenet", "resnet50")
NODE = "sw26010"
LINK = "sw26010"  # the TaihuLight's link (dlsys.machine.net): a flat topology's, and inside a supernode
BATCH = 64  # images per node and iteration (a teaching default; the paper tunes it per model)
SWEEP_NODES = tuple(2**k for k in range(1, 10))  # 2, 4, ..., 512: the paper's range
DEFAULT_LARGEST_NODES = 64  # the app's sweeps run up to this by default
PAPER_MESSAGE_BYTES = 60_970_000  # the 60.97 MB message of the paper's figs 7-8 (AlexNet's gradient, about)
COPIES = 6  # real buffers per rank: W, its diff, the packed copy, the ring's result and blocks
LIBRARY = "taihulight-mpi"  # the MPI the paper measured (dlsys.machine.netstack.LIBRARIES)
# The values are stand-ins (dlsys.train.caffe), so a small budget loses nothing and keeps a
# 512-node iteration to a few seconds: the real arrays are what numpy spends time on.
MAX_MEMORY_BYTES = 2**26


def check_library(library: str) -> Library:
    """The MPI library preset named ``library`` (dlsys.machine.netstack.LIBRARIES), else a ValueError."""
    if library not in MPI_LIBRARIES:
        raise ValueError(f"library: unknown MPI library {library!r}; valid: {', '.join(MPI_LIBRARIES)}")
    return LIBRARIES[library]


def check_sharing(sharing) -> bool:
    """``sharing`` if it is True or False, else a ValueError."""
    if not isinstance(sharing, bool):
        raise ValueError(f"sharing must be True or False, got {sharing!r}")
    return sharing


def check_case(
    model: str, design: str, nodes: int, topology, library: str = LIBRARY, sharing: bool | None = None
) -> None:
    """ValueErrors naming the argument and the accepted values, before any rank starts."""
    sharing_of(get_network(topology, LINK, "topology"), sharing)
    if model not in MODELS:
        raise ValueError(f"model: unknown model {model!r}; valid: {', '.join(MODELS)}")
    if design not in DESIGNS:
        raise ValueError(f"design: unknown design {design!r}; valid: {', '.join(DESIGNS)}")
    lib = check_library(library)
    if design in MPI_DESIGNS:
        for collective in ("broadcast", "reduce", "gather"):
            lib.rooted_algorithm(collective)
    get_network(topology, LINK, "topology").check_nodes(nodes)
    if nodes > MAX_THREAD_RANKS:
        raise ValueError(
            f"nodes must be an integer in 1..{MAX_THREAD_RANKS} (the ranks one machine emulates), got {nodes}"
        )


def memory_scale(model: str, nodes: int, max_memory_bytes: int = MAX_MEMORY_BYTES) -> int:
    """Logical parameters per real one so that every rank's buffers (``COPIES`` of the
    model) and the pushes waiting in rank 0's mailbox (nodes x the largest layer) fit the budget."""
    layers = profile(model)
    params, largest = sum(layer.params for layer in layers), max(layer.params for layer in layers)
    return max(1, math.ceil((nodes * COPIES * params + nodes * largest) * 4 / max_memory_bytes))


def ring_shares_no_link(network, nodes: int) -> bool:
    """Whether a ring's messages r -> r+1 on ``network.fabric(nodes)`` each have every link
    of their route to themselves, at no less than the pair's link bandwidth: then, with
    sharing, every step is alpha + n/(pB) and the ring is its flat closed form at any node
    count. The TaihuLight: one message per node link, and each supernode's 875 GB/s uplink
    carries one (its last node's, to the next supernode) at 14 GB/s."""
    fabric = network.fabric(nodes)
    routes = [fabric.route(r, (r + 1) % nodes) for r in range(nodes) if nodes > 1]
    used = [link for route in routes for link in route]
    return len(used) == len(set(used)) and all(
        fabric.links[link].capacity_Bps >= network.link.bandwidth_Bps for link in used
    )


def design_closed_form_s(
    design: str,
    model: str,
    nodes: int,
    contiguous: bool = True,
    batch: int = BATCH,
    topology="taihulight",
    scale: int = 1,
    node=NODE,
    sharing: bool | None = None,
) -> dict:
    """The design's time from the alpha-beta model, split as ``run_design`` splits it.

    ring: compute + packing copies (scattered: 2 x 2n / memory bandwidth) + the ring's
    closed form 2(p-1)(alpha + n/p beta) + update (3n / memory bandwidth): every rank
    computes the same, so all enter the all-reduce at once.
    ps: ``ps_rank0_s`` minus rank 0's compute, packing copy and update; ps-gather and
    ps-reduce: ``ps_mpi_rank0_s`` likewise.
    Both exact; communication None beyond one supernode (no closed form on the upper level).
    With ``sharing``: the ring's closed form wherever ``ring_shares_no_link`` (the TaihuLight:
    at every node count), exact for equal blocks; the PS designs have none (their messages
    overlap on rank 0's links, in the replay's eager order)."""
    node, network = get_node(node), get_network(topology, LINK, "topology")
    layers = profile(model)
    sizes = [size * scale * 4 for size in real_sizes(layers, scale)]
    n = sum(sizes)
    forward_s = [node.compute_s(batch * layer.fwd_flops) for layer in layers]
    backward_s = [node.compute_s(2 * batch * layer.fwd_flops) for layer in layers]
    compute, update = sum(forward_s) + sum(backward_s), node.kernel_s(0, 3 * n)
    copy = 0.0 if contiguous else node.kernel_s(0, 2 * n)
    packing = 2 * copy if design == "ring" else copy  # a PS: rank 0 packs W; its workers unpack it
    if sharing_of(network, sharing, nodes):
        comm = (
            collectives.closed_form("allreduce", "ring", nodes, n, network.link, itemsize=4 * scale)
            if design == "ring" and ring_shares_no_link(network, nodes)
            else None
        )
    elif not network.is_flat_for(nodes):  # messages cross the upper level: no closed form
        comm = None
    elif design == "ring":
        comm = collectives.closed_form("allreduce", "ring", nodes, n, network.link, itemsize=4 * scale)
    elif design == "ps":
        comm = ps_rank0_s(nodes, sizes, forward_s, backward_s, network.link, copy, update) - compute - packing - update
    else:
        comm = (
            ps_mpi_rank0_s(nodes, sizes, forward_s, backward_s, network.link, copy, update, design.removeprefix("ps-"))
            - compute
            - packing
            - update
        )
    return {"compute_s": compute, "pack_s": packing, "update_s": update, "communication_s": comm}


def run_design(
    model: str = "alexnet",
    design: str = "ring",
    nodes: int = 8,
    contiguous: bool = True,
    topology="taihulight",
    batch: int = BATCH,
    seed: int = 0,
    record: bool = False,
    max_memory_bytes: int = MAX_MEMORY_BYTES,
    library: str = LIBRARY,
    node=NODE,
    sharing: bool | None = None,
) -> dict:
    """One iteration of ``design`` on ``nodes`` nodes (``node``: a preset or NodeModel, the
    SW26010 by default) of ``topology`` (any network ``get_network`` takes); the MPI designs
    use ``library``'s collectives; ``sharing``: messages share the fabric's links (module
    docstring).

    Record: compute_s, pack_s, update_s, communication_s (iteration_s minus the others:
    the communication the compute does not hide), iteration_s (the emulated makespan), and
    the closed form of each part; gradient_nbytes (logical), scale (logical parameters
    per real one), the rank weights (``weights``: rank 0's after the update) and, under
    "result", the LaunchResult (a trace if ``record``)."""
    network = get_network(topology, LINK, "topology")
    check_case(model, design, nodes, network, library, sharing)
    sharing = sharing_of(network, sharing, nodes)
    check_int("batch", batch, 1)
    scale = memory_scale(model, nodes, max_memory_bytes)
    layers = profile(model)
    result = launch(
        design_program,
        nodes,
        "threads",
        node=node,
        topology=network,
        seed=seed,
        record=record,
        args=(design, layers, scale, contiguous, batch, seed, library),
        sharing=sharing,
    )
    account = result.values[0]
    iteration = result.virtual_time_s
    parts = {k: account[k] for k in ("compute_s", "pack_s", "update_s")}
    closed = design_closed_form_s(design, model, nodes, contiguous, batch, network, scale, node, sharing)
    closed_total = None if closed["communication_s"] is None else sum(closed.values())
    return {
        "model": model,
        "design": design,
        "nodes": nodes,
        "layout": "contiguous" if contiguous else "scattered",
        "topology": network.name,
        "sharing": sharing,
        "batch": batch,
        "library": library if design in MPI_DESIGNS else None,
        **parts,
        "communication_s": iteration - sum(parts.values()),
        "iteration_s": iteration,
        "closed_communication_s": closed["communication_s"],
        "closed_iteration_s": closed_total,
        "gradient_nbytes": sum(real_sizes(layers, scale)) * scale * 4,
        "layers": len(layers),
        "scale": scale,
        "weights": account["weights"],
        "wall_time_s": result.wall_time_s,
        "result": result,
    }


def sweep(
    model: str = "alexnet",
    design: str = "ring",
    nodes=SWEEP_NODES,
    contiguous: bool = True,
    topology="taihulight",
    batch: int = BATCH,
    library: str = LIBRARY,
    node=NODE,
    sharing: bool | None = None,
) -> list[dict]:
    """``run_design`` for every node count, without traces or weights (one row each)."""
    network = get_network(topology, LINK, "topology")
    for n in nodes:
        check_case(model, design, n, network, library, sharing)
    return [
        {
            k: v
            for k, v in run_design(
                model, design, n, contiguous, network, batch, library=library, node=node, sharing=sharing
            ).items()
            if k not in ("result", "weights")
        }
        for n in nodes
    ]


def ring_vs_mpi(
    nbytes=(PAPER_MESSAGE_BYTES,),
    nodes=SWEEP_NODES,
    topology="taihulight",
    library: str = LIBRARY,
    sharing: bool | None = None,
) -> list[dict]:
    """The paper's figs 7-8: the ring all-reduce against MPI_Allreduce as ``library`` runs
    it (``Library.algorithm``: its choice by message size and node count) for each message
    size and node count, emulated on ``topology`` (any network ``get_network`` takes), with
    messages sharing its fabric's links if ``sharing``.

    Each size is rounded up to a whole number of float32 blocks for the largest power of
    two of ``nodes`` (60.97 MB becomes 60,971,008 bytes at 512 nodes): Rabenseifner's
    halves then scale exactly (dlsys.experiments.budget). Rows carry the bytes used, the
    library and its algorithm, and each time's closed form (None across supernodes)."""
    lib, network = check_library(library), get_network(topology, LINK, "topology")
    for p in nodes:
        check_case(MODELS[0], "ring", p, network, sharing=sharing)
    unit = 4 << (max(nodes).bit_length() - 1)
    rows = []
    for size in nbytes:
        size = -(-size // unit) * unit
        for p in nodes:
            for who, algorithm in (("ring", "ring"), ("MPI_Allreduce", lib.algorithm(size, p))):
                rec = simulate_collective(
                    "allreduce",
                    algorithm,
                    p,
                    size,
                    record=False,
                    topology=network,
                    max_memory_bytes=MAX_MEMORY_BYTES,
                    sharing=sharing,
                )
                closed = rec["closed_form_s"]
                if closed is None and rec["sharing"] and algorithm == "ring" and ring_shares_no_link(network, p):
                    closed = collectives.closed_form("allreduce", "ring", p, size, network.link, itemsize=4)
                elif closed is None and rec["sharing"] and algorithm == "recursive_doubling" and p & (p - 1) == 0:
                    closed = recursive_doubling_form_s(p, size, network)
                rows.append(
                    {
                        "library": who,
                        "preset": library,
                        "algorithm": algorithm,
                        "nodes": p,
                        "nbytes": size,
                        "topology": network.name,
                        "sharing": rec["sharing"],
                        "virtual_time_s": rec["virtual_time_s"],
                        "closed_form_s": closed,
                        "wall_time_s": rec["wall_time_s"],
                    }
                )
    return rows


PAPER_MPI_RATIOS = (2.3, 4.1)  # figs 7-8: MPI_Allreduce's time over the ring's at 512 nodes (SPEC section 11)


def recursive_doubling_form_s(nodes: int, nbytes: float, topology="taihulight", sharing: bool = True) -> float:
    """Recursive doubling's all-reduce of ``nbytes`` on ``nodes`` = 2^k nodes of ``topology``,
    step by step: the step at distance d swaps the whole vector between r and r ^ d, all at
    once, so it costs alpha + n / rate (the registry's p = 2 form on the pair's link at that
    rate), rate the slowest message's: with ``sharing``, min over its route of capacity /
    messages on the link (max-min, exact here: every message of a step is alike); without,
    the pair's link (the static quarter share across supernodes). On the TaihuLight at 512
    nodes: 8 (alpha + n beta) inside the supernodes, then every node crosses, 256 messages
    on each 875 GB/s uplink: alpha + n / 3.42 GB/s."""
    network = get_network(topology, LINK, "topology")
    if not (isinstance(nodes, int) and nodes >= 2 and nodes & (nodes - 1) == 0):
        raise ValueError(f"nodes must be a power of two >= 2, got {nodes!r}")
    network.check_nodes(nodes)
    fabric = network.fabric(nodes) if check_sharing(sharing) else None
    total, distance = 0.0, 1
    while distance < nodes:
        routes = {r: fabric.route(r, r ^ distance) for r in range(nodes)} if sharing else {}
        load: dict = {}
        for route in routes.values():
            for link in route:
                load[link] = load.get(link, 0) + 1
        step = 0.0
        for r in range(nodes):
            link = network.link_between(r, r ^ distance)
            if sharing:
                link = replace(link, bandwidth_Bps=min(fabric.links[k].capacity_Bps / load[k] for k in routes[r]))
            step = max(step, collectives.closed_form("allreduce", "recursive_doubling", 2, nbytes, link, itemsize=4))
        total += step
        distance *= 2
    return total


def mpi_ratio_bounds(
    nodes: int = 512, topology="taihulight", sharing: bool = True, nbytes: float = PAPER_MESSAGE_BYTES
) -> dict:
    """The paper's MPI (recursive doubling) over the ring, from the closed forms, with links
    shared (``sharing``; the ring's form holds where ``ring_shares_no_link``, the TaihuLight
    at every node count) or not (then one supernode only). Both times are affine in the
    message (up to the ring's blocks of whole float32): T_rd = c0 + c1 n, T_ring = d0 + d1 n, so the ratio moves monotonically from
    c0 / d0 (latency: lg p against 2(p-1) alphas) to c1 / d1 (bandwidth) as n grows, and
    equals r at n = (r d0 - c0) / (c1 - r d1). Returns the ratio at ``nbytes``, both limits
    and, for each of the paper's ``PAPER_MPI_RATIOS``, the message that gives it (None if
    no message does)."""
    network = get_network(topology, LINK, "topology")
    if not (sharing and ring_shares_no_link(network, nodes)) and not network.is_flat_for(nodes):
        raise ValueError(
            f"nodes: the ring has no closed form on {nodes} nodes of {network.name} without sharing; "
            f"at most {network.supernode_size}"
        )

    def ring(n: float) -> float:
        return collectives.closed_form("allreduce", "ring", nodes, n, network.link)

    def rd(n: float) -> float:
        return recursive_doubling_form_s(nodes, n, network, sharing)

    unit = 2.0**30  # the affine coefficients from two sizes (the forms are exact in n)
    c0, d0 = rd(0.0), ring(0.0)
    c1, d1 = (rd(unit) - c0) / unit, (ring(unit) - d0) / unit
    sizes = {
        r: ((r * d0 - c0) / (c1 - r * d1) if min(c0 / d0, c1 / d1) <= r <= max(c0 / d0, c1 / d1) else None)
        for r in PAPER_MPI_RATIOS
    }
    return {
        "nodes": nodes,
        "topology": network.name,
        "sharing": sharing,
        "nbytes": nbytes,
        "ratio": rd(nbytes) / ring(nbytes),
        "latency_ratio": c0 / d0,
        "bandwidth_ratio": c1 / d1,
        "nbytes_for_ratio": sizes,
    }


def link_load_rows(
    algorithm: str = "ring",
    nodes: int = 512,
    sharing: bool = True,
    nbytes=PAPER_MESSAGE_BYTES,
    topology="taihulight",
    bins: int = 40,
    links=None,
) -> list[dict]:
    """Bytes per link per time bin of one all-reduce (``dlsys.comm.replay.link_load``) on
    ``topology``'s fabric, each row with the link's ``capacity_Bps`` and a "series" naming
    the algorithm and whether messages shared the links (for dlsys.viz.links); only the
    links named in ``links`` if given (``boundary_links``)."""
    network = get_network(topology, LINK, "topology")
    check_case(MODELS[0], "ring", nodes, network, sharing=sharing)
    rec = simulate_collective(
        "allreduce", algorithm, nodes, nbytes, topology=network, sharing=sharing, max_memory_bytes=MAX_MEMORY_BYTES
    )
    fabric_links = network.fabric(nodes).links
    series = f"{algorithm}, {'links shared' if sharing else 'a link per pair'}"
    kept = None if links is None else set(links)
    return [
        r | {"series": series, "capacity_Bps": fabric_links[r["link_id"]].capacity_Bps}
        for r in link_load(rec["result"], bins)
        if kept is None or r["link"] in kept
    ]


def boundary_links(nodes: int, topology="taihulight") -> list[str]:
    """The links worth watching on a two-level fabric: per supernode, its first and last
    node's egress and ingress and its uplink and downlink (every link of a flat one's
    first and last node)."""
    network = get_network(topology, LINK, "topology")
    size = network.supernode_size or nodes
    names = []
    for s in range(-(-nodes // size)):
        first, last = s * size, min(nodes, (s + 1) * size) - 1
        names += [f"egress{first}", f"ingress{first}", f"egress{last}", f"ingress{last}"]
        names += [f"up{s}", f"down{s}"] if network.supernode_size and nodes > size else []
    return names


def model_gradient_nbytes(model: str) -> int:
    """A model's float32 gradient in bytes (dlsys.machine.profiles)."""
    if model not in MODELS:
        raise ValueError(f"model: unknown model {model!r}; valid: {', '.join(MODELS)}")
    return 4 * sum(layer.params for layer in profile(model))
