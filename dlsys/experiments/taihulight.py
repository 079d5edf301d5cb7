"""The Caffe-on-Sunway-TaihuLight case study (SPEC section 11): the paper's two designs on
emulated SW26010 nodes, and its ring against the library MPI_Allreduce (figs 7-8).

``run_design`` runs one iteration of a design (dlsys.train.caffe) and splits the time of rank 0
into compute (forward, backward), packing copies, update and communication (the rest: what
the compute does not hide). ``sweep`` does it for a list of node counts; ``ring_vs_mpi``
times the ring against an MPI library's choice of algorithm (a preset of
dlsys.machine.netstack.LIBRARIES: the paper's TaihuLight MPI, MPICH, Open MPI).
"""

from __future__ import annotations

import math

from .. import collectives
from ..train.caffe import DESIGNS, design_program, real_sizes
from ..checks import check_int
from ..comm import MAX_THREAD_RANKS, launch
from ..machine.net import get_node
from ..machine.netstack import LIBRARIES, MPI_LIBRARIES, Library
from ..machine.profiles import profile
from ..machine.topology import get_network
from .collectives import simulate_collective

MODELS = ("alexnet", "googlenet", "resnet50")
NODE = "sw26010"
LINK = "sw26010"           # the TaihuLight's link (dlsys.machine.net): a flat topology's, and inside a supernode
BATCH = 64                 # images per node and iteration (a teaching default; the paper tunes it per model)
SWEEP_NODES = tuple(2**k for k in range(1, 10))  # 2, 4, ..., 512: the paper's range
PAPER_MESSAGE_BYTES = 60_970_000  # the 60.97 MB message of the paper's figs 7-8 (AlexNet's gradient, about)
COPIES = 6                 # real buffers per rank: W, its diff, the packed copy, the ring's result and blocks
LIBRARY = "taihulight-mpi"  # the MPI the paper measured (dlsys.machine.netstack.LIBRARIES)
# The values are stand-ins (dlsys.train.caffe), so a small budget loses nothing and keeps a
# 512-node iteration to a few seconds: the real arrays are what numpy spends time on.
MAX_MEMORY_BYTES = 2**26


def check_library(library: str) -> Library:
    """The MPI library preset named ``library`` (dlsys.machine.netstack.LIBRARIES), else a ValueError."""
    if library not in MPI_LIBRARIES:
        raise ValueError(f"library: unknown MPI library {library!r}; valid: {', '.join(MPI_LIBRARIES)}")
    return LIBRARIES[library]


def check_case(model: str, design: str, nodes: int, topology) -> None:
    """ValueErrors naming the argument and the accepted values, before any rank starts."""
    if model not in MODELS:
        raise ValueError(f"model: unknown model {model!r}; valid: {', '.join(MODELS)}")
    if design not in DESIGNS:
        raise ValueError(f"design: unknown design {design!r}; valid: {', '.join(DESIGNS)}")
    get_network(topology, LINK, "topology").check_nodes(nodes)
    if nodes > MAX_THREAD_RANKS:
        raise ValueError(f"nodes must be an integer in 1..{MAX_THREAD_RANKS} (the ranks one machine emulates), "
                         f"got {nodes}")


def memory_scale(model: str, nodes: int, max_memory_bytes: int = MAX_MEMORY_BYTES) -> int:
    """Logical parameters per real one so that every rank's buffers (``COPIES`` of the
    model) and the pushes waiting in rank 0's mailbox (nodes x the largest layer) fit the budget."""
    layers = profile(model)
    params, largest = sum(layer.params for layer in layers), max(layer.params for layer in layers)
    return max(1, math.ceil((nodes * COPIES * params + nodes * largest) * 4 / max_memory_bytes))


def ps_rank0_s(p: int, sizes: list, forward_s: list, backward_s: list, link, copy_s: float, update_s: float) -> float:
    """Rank 0's clock at the end of a PS iteration (dlsys.train.caffe.ps_iteration): DESIGN.md's
    virtual-time rules applied in the order the rank code posts and takes messages, with
    layers j of n_j bytes, forward f_j and backward b_j seconds, N = sum n_j, w(n) = n / B:

        rank 0 sends W to k = 1..p-1:  d_k = max(k o_s(N) + c, d_{k-1} + w(N)),  a_k = d_k + L + w(N)
        worker k, layer j (last first): t_k += b_j + o_s(n_j);  D_kj = max(t_k, D_k,j+1 + w(n_j))
                                        (t_k starts at a_k + o_r(N) + c + sum f)
        rank 0 takes layer j from k = 1..p-1 in order: A = max(D_kj + L + w(n_j), A_prev + w(n_j)),
                                        t_0 = max(t_0, A) + o_r(n_j)   (after its own b_j)
        then the update.

    c is a packing copy (0 if contiguous). Exact: the recurrence is the emulator's own
    order of events, the way lesson 10 writes WFBP's; the server's link makes it grow
    about as (p-1)(N + sum n_j) / B once the compute can no longer hide it."""
    total = sum(sizes)
    t0, egress, departs = copy_s, 0.0, {}
    for worker in range(1, p):
        t0 += link.send_overhead_s(total)
        depart = max(t0, egress)
        egress = depart + link.wire_s(total)
        t = depart + link.latency_s + link.wire_s(total) + link.recv_overhead_s(total) + copy_s + sum(forward_s)
        worker_egress = 0.0
        for j in reversed(range(len(sizes))):
            t += backward_s[j] + link.send_overhead_s(sizes[j])
            departs[worker, j] = max(t, worker_egress)
            worker_egress = departs[worker, j] + link.wire_s(sizes[j])
    t0 += sum(forward_s)
    ingress = 0.0
    for j in reversed(range(len(sizes))):
        t0 += backward_s[j]
        for worker in range(1, p):
            ingress = max(departs[worker, j] + link.latency_s + link.wire_s(sizes[j]), ingress + link.wire_s(sizes[j]))
            t0 = max(t0, ingress) + link.recv_overhead_s(sizes[j])
    return t0 + update_s


def design_closed_form_s(design: str, model: str, nodes: int, contiguous: bool = True, batch: int = BATCH,
                         topology="taihulight", scale: int = 1) -> dict:
    """The design's time from the alpha-beta model, split as ``run_design`` splits it.

    ring: compute + packing copies (scattered: 2 x 2n / memory bandwidth) + the ring's
    closed form 2(p-1)(alpha + n/p beta) + update (3n / memory bandwidth): every rank
    computes the same, so all enter the all-reduce at once.
    ps: ``ps_rank0_s`` minus rank 0's compute, packing copy and update.
    Both exact; communication None beyond one supernode (no closed form on the upper level)."""
    node, network = get_node(NODE), get_network(topology, LINK, "topology")
    layers = profile(model)
    sizes = [size * scale * 4 for size in real_sizes(layers, scale)]
    n = sum(sizes)
    forward_s = [node.compute_s(batch * layer.fwd_flops) for layer in layers]
    backward_s = [node.compute_s(2 * batch * layer.fwd_flops) for layer in layers]
    compute, update = sum(forward_s) + sum(backward_s), node.kernel_s(0, 3 * n)
    copy = 0.0 if contiguous else node.kernel_s(0, 2 * n)
    packing = 2 * copy if design == "ring" else copy  # ps: rank 0 packs W; its workers unpack it
    if not network.is_flat_for(nodes):  # messages cross the upper level: no closed form
        comm = None
    elif design == "ring":
        comm = collectives.closed_form("allreduce", "ring", nodes, n, network.link, itemsize=4 * scale)
    else:
        comm = (ps_rank0_s(nodes, sizes, forward_s, backward_s, network.link, copy, update)
                - compute - packing - update)
    return {"compute_s": compute, "pack_s": packing, "update_s": update, "communication_s": comm}


def run_design(model: str = "alexnet", design: str = "ring", nodes: int = 8, contiguous: bool = True,
               topology="taihulight", batch: int = BATCH, seed: int = 0, record: bool = False,
               max_memory_bytes: int = MAX_MEMORY_BYTES) -> dict:
    """One iteration of ``design`` on ``nodes`` SW26010 nodes of ``topology``.

    Record: compute_s, pack_s, update_s, communication_s (iteration_s minus the others:
    the communication the compute does not hide), iteration_s (the emulated makespan), and
    the closed form of each part; gradient_nbytes (logical), scale (logical parameters
    per real one), the rank weights (``weights``: rank 0's after the update) and, under
    "result", the LaunchResult (a trace if ``record``)."""
    network = get_network(topology, LINK, "topology")
    check_case(model, design, nodes, network)
    check_int("batch", batch, 1)
    scale = memory_scale(model, nodes, max_memory_bytes)
    layers = profile(model)
    result = launch(design_program, nodes, "threads", node=NODE, topology=network,
                    seed=seed, record=record, args=(design, layers, scale, contiguous, batch, seed))
    account = result.values[0]
    iteration = result.virtual_time_s
    parts = {k: account[k] for k in ("compute_s", "pack_s", "update_s")}
    closed = design_closed_form_s(design, model, nodes, contiguous, batch, network, scale)
    closed_total = None if closed["communication_s"] is None else sum(closed.values())
    return {"model": model, "design": design, "nodes": nodes, "layout": "contiguous" if contiguous else "scattered",
            "topology": network.name, "batch": batch, **parts,
            "communication_s": iteration - sum(parts.values()), "iteration_s": iteration,
            "closed_communication_s": closed["communication_s"], "closed_iteration_s": closed_total,
            "gradient_nbytes": sum(real_sizes(layers, scale)) * scale * 4,
            "layers": len(layers), "scale": scale, "weights": account["weights"],
            "wall_time_s": result.wall_time_s, "result": result}


def sweep(model: str = "alexnet", design: str = "ring", nodes=SWEEP_NODES, contiguous: bool = True,
          topology="taihulight", batch: int = BATCH) -> list[dict]:
    """``run_design`` for every node count, without traces or weights (one row each)."""
    network = get_network(topology, LINK, "topology")
    for n in nodes:
        check_case(model, design, n, network)
    return [{k: v for k, v in run_design(model, design, n, contiguous, network, batch).items()
             if k not in ("result", "weights")} for n in nodes]


def ring_vs_mpi(nbytes=(PAPER_MESSAGE_BYTES,), nodes=SWEEP_NODES, topology="taihulight",
                library: str = LIBRARY) -> list[dict]:
    """The paper's figs 7-8: the ring all-reduce against MPI_Allreduce as ``library`` runs
    it (``Library.algorithm``: its choice by message size and node count) for each message
    size and node count, emulated on ``topology`` (any network ``get_network`` takes).

    Each size is rounded up to a whole number of float32 blocks for the largest power of
    two of ``nodes`` (60.97 MB becomes 60,971,008 bytes at 512 nodes): Rabenseifner's
    halves then scale exactly (dlsys.experiments.budget). Rows carry the bytes used, the
    library and its algorithm, and each time's closed form (None across supernodes)."""
    lib, network = check_library(library), get_network(topology, LINK, "topology")
    for p in nodes:
        check_case(MODELS[0], "ring", p, network)
    unit = 4 << (max(nodes).bit_length() - 1)
    rows = []
    for size in nbytes:
        size = -(-size // unit) * unit
        for p in nodes:
            for who, algorithm in (("ring", "ring"), ("MPI_Allreduce", lib.algorithm(size, p))):
                rec = simulate_collective("allreduce", algorithm, p, size, record=False, topology=network,
                                          max_memory_bytes=MAX_MEMORY_BYTES)
                rows.append({"library": who, "preset": library, "algorithm": algorithm, "nodes": p, "nbytes": size,
                             "topology": network.name, "virtual_time_s": rec["virtual_time_s"],
                             "closed_form_s": rec["closed_form_s"], "wall_time_s": rec["wall_time_s"]})
    return rows


def model_gradient_nbytes(model: str) -> int:
    """A model's float32 gradient in bytes (dlsys.machine.profiles)."""
    if model not in MODELS:
        raise ValueError(f"model: unknown model {model!r}; valid: {', '.join(MODELS)}")
    return 4 * sum(layer.params for layer in profile(model))
