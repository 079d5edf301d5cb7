"""The TaihuLight paper's claims ("Caffe distributed extension on Sunway TaihuLight", SPEC
section 11): the ring against the library MPI_Allreduce, and the PS designs against the ring."""

from __future__ import annotations

from ...experiments import taihulight, taihulight_bounds
from .verdict import Claim, Plot, in_range

TAIHULIGHT_PAPER = '"Caffe distributed extension on Sunway TaihuLight" (SPEC section 11)'
TAIHULIGHT_PS_VS_RING = {m: p for m, p, _ in taihulight_bounds.PUBLISHED_RATIOS}  # the paper's node count of each ratio
TAIHULIGHT_TOLERANCE = 0.25  # relative: a PS ratio "reaches" the paper's within it


def run_taihulight_ring_vs_mpi(quick: bool) -> dict:
    """Figs 7-8: the paper's MPI_Allreduce (the ``taihulight-mpi`` preset: recursive doubling)
    over the ring for the 60.97 MB message on the TaihuLight with links shared (max-min,
    dlsys.comm.replay). Quick: the closed forms at 32 and 512 nodes (the ring's
    ``ring_shares_no_link`` form and ``recursive_doubling_form_s``, which tests hold the
    emulation to); full: the emulation (``taihulight.ring_vs_mpi(sharing=True)``) at 2..512."""
    if quick:
        nodes = (32, 512)
        unit = 4 << (max(nodes).bit_length() - 1)
        size = -(-taihulight.PAPER_MESSAGE_BYTES // unit) * unit
        rows = [
            {"library": who, "nodes": p, "virtual_time_s": form(p)}
            for p in nodes
            for who, form in (
                ("ring", lambda p: taihulight.collectives.closed_form("allreduce", "ring", p, size, taihulight.LINK)),
                ("MPI_Allreduce", lambda p: taihulight.recursive_doubling_form_s(p, size)),
            )
        ]
    else:
        nodes = taihulight.SWEEP_NODES
        rows = taihulight.ring_vs_mpi(nodes=nodes, sharing=True)
    time_of = {(r["library"], r["nodes"]): r["virtual_time_s"] for r in rows}
    ratio = time_of["MPI_Allreduce", 512] / time_of["ring", 512]
    flat = time_of["ring", 512] / time_of["ring", 32]
    return {
        "dlsys": {"512 nodes": ratio, "ring 512 / 32 nodes": flat},
        "ours": f"{ratio:.2f}x at 512 nodes (links shared); the ring's time 512 / 32 nodes: {flat:.2f}x",
        "rows": [{"series": r["library"], "x": r["nodes"], "y": r["virtual_time_s"]} for r in rows],
    }


def why_taihulight_ring_vs_mpi(measured: dict) -> str:
    """The reason our ratio leaves the paper's range, from ``taihulight.mpi_ratio_bounds``."""
    shared, flat = taihulight.mpi_ratio_bounds(), taihulight.mpi_ratio_bounds(topology="flat")
    low, high = taihulight.PAPER_MPI_RATIOS
    sizes = [shared["nbytes_for_ratio"][r] for r in taihulight.PAPER_MPI_RATIOS]
    return (
        f"ours {measured['dlsys']['512 nodes']:.2f}x: the paper's MPI modelled as recursive doubling (its own "
        "explanation: an algorithm for low latency), the links shared max-min. Recursive doubling's last step "
        "sends all 512 nodes across the 4:1 upper level at once (each at a quarter of its link), while the "
        "ring's two crossing messages a step get the whole link. In this model the ratio grows with the "
        f"message from {shared['latency_ratio']:.3g}x (latency) to {shared['bandwidth_ratio']:.3g}x "
        f"(bandwidth); the paper's {low:g}-{high:g}x are messages of {sizes[0] / 1e6:.1f} to {sizes[1] / 1e6:.1f} MB; "
        f"on a network without the upper level 60.97 MB gives {flat['ratio']:.2f}x (at most "
        f"{flat['bandwidth_ratio']:.2f}x, lg p p / 2(p-1))"
    )


def taihulight_ps_ratios(quick: bool, nodes_of: dict) -> dict:
    """Each PS design's communication per iteration over the ring's (batch 64, compute
    hiding what it can), at ``nodes_of[model]`` nodes. Quick: the designs' closed forms (exact:
    tests hold the emulation to them); full: the emulated iterations. A link per pair: the
    paper's node counts fit in one supernode, where links shared change only the order of
    a rank's eager sends (``taihulight`` module docstring), not what MPI's blocking ones do."""
    ratio = {}
    for model, nodes in nodes_of.items():
        comm = {
            d: (taihulight.design_closed_form_s(d, model, nodes) if quick else taihulight.run_design(model, d, nodes))[
                "communication_s"
            ]
            for d in (*taihulight_bounds.PS_DESIGNS, "ring")
        }
        ratio |= {(model, d): comm[d] / comm["ring"] for d in taihulight_bounds.PS_DESIGNS}
    return ratio


def run_taihulight_ps_vs_ring(quick: bool) -> dict:
    """Figs 9-11: each PS design's communication over the ring's at the paper's node count
    (``taihulight_ps_ratios``), and the paper's ratios against ``taihulight_bounds.ratio_bounds``."""
    ratio = taihulight_ps_ratios(quick, TAIHULIGHT_PS_VS_RING)
    verdicts = {
        v["model"]: v["verdict"]
        for v in taihulight_bounds.verdicts(taihulight_bounds.published_figures())
        if v["nodes"] == TAIHULIGHT_PS_VS_RING[v["model"]]
    }
    return {
        "dlsys": {f"{m} {d}": r for (m, d), r in ratio.items()},
        "bounds": verdicts,
        "ours": "; ".join(
            f"{m} at {TAIHULIGHT_PS_VS_RING[m]}: "
            + ", ".join(f"{d} {ratio[m, d]:.3g}x" for d in taihulight_bounds.PS_DESIGNS)
            for m in TAIHULIGHT_PS_VS_RING
        ),
        "rows": [{"series": d, "x": m, "y": r} for (m, d), r in ratio.items()],
    }


def judge_taihulight_ps_vs_ring(paper: dict, measured: dict) -> dict[str, tuple[str, str]]:
    """A line per model: "holds" if some PS design is within 25% of the paper's ratio, else
    "differs" with each design's ratio and what the arithmetic bounds allow."""
    lines = {}
    for m, r in paper.items():
        ours = ", ".join(f"{d} {measured['dlsys'][f'{m} {d}']:.3g}x" for d in taihulight_bounds.PS_DESIGNS)
        near = [
            d
            for d in taihulight_bounds.PS_DESIGNS
            if abs(measured["dlsys"][f"{m} {d}"] - r) <= TAIHULIGHT_TOLERANCE * r
        ]
        lines[m] = (
            ("holds", f"{', '.join(near)} within {TAIHULIGHT_TOLERANCE:.0%} of {r:g}x ({ours})")
            if near
            else (
                "differs",
                f"{r:g}x at {TAIHULIGHT_PS_VS_RING[m]}: ours {ours}; the bounds (compute free): "
                f"{measured['bounds'][m]}. A PS whose server takes every worker's gradient is at least about p/2 "
                "times the ring; one that reduces on the way at most lg p p/(p-1) times; a single-server design of "
                "L layers at most max((L+1)/2, p) times, on any link (docs/taihulight.md)",
            )
        )
    return lines


def run_taihulight_little_difference(quick: bool) -> dict:
    """Figs 9-11, small node counts: each PS design's communication over the ring's at the
    largest power of two below the paper's "little difference" bound
    (``taihulight_bounds.LITTLE_DIFFERENCE``), compute hiding what it can."""
    nodes_of = dict(taihulight_bounds.LITTLE_DIFFERENCE)
    ratio = taihulight_ps_ratios(quick, nodes_of)
    best = {m: min(taihulight_bounds.PS_DESIGNS, key=lambda d: ratio[m, d]) for m in nodes_of}
    return {
        "dlsys": {m: ratio[m, best[m]] for m in nodes_of},
        "best": best,
        "nodes": nodes_of,
        "ours": "; ".join(
            f"{m} at {nodes_of[m]}: " + ", ".join(f"{d} {ratio[m, d]:.3g}x" for d in taihulight_bounds.PS_DESIGNS)
            for m in nodes_of
        ),
        "rows": [{"series": d, "x": m, "y": r} for (m, d), r in ratio.items()],
    }


def judge_taihulight_little_difference(paper: dict, measured: dict) -> dict[str, tuple[str, str]]:
    """A line per model: "shape holds" if some PS design's ratio is at most
    ``taihulight_bounds.LITTLE_DIFFERENCE_RATIO`` (the paper gives no number), else "differs"."""
    limit, lines = taihulight_bounds.LITTLE_DIFFERENCE_RATIO, {}
    for m, r in measured["dlsys"].items():
        closest = f"{measured['best'][m]} {r:.3g}x at {measured['nodes'][m]} nodes"
        if r <= limit:
            lines[m] = ("shape holds", f"{closest}, within {limit:g}x of the ring")
            continue
        floor = min(
            taihulight_bounds.ratio_bounds(d, m, measured["nodes"][m])["lo"] for d in taihulight_bounds.PS_DESIGNS
        )
        lines[m] = (
            "differs",
            f"no design within {limit:g}x of the ring (closest: {closest}). Every PS that broadcasts W moves at "
            f"least about twice the ring's bytes through rank 0: with compute free the bounds allow no less than "
            f"{floor:.3g}x; only compute hiding the pushes brings it closer"
            + (
                ", and AlexNet's fully connected layers hold most of its bytes with little compute to hide them"
                if m == "alexnet"
                else ""
            ),
        )
    return lines


CLAIMS = [
    Claim(
        "taihulight-ring-vs-mpi",
        TAIHULIGHT_PAPER,
        "Figs 7-8",
        "On 512 nodes the ring all-reduce of a 60.97 MB message beats the library MPI_Allreduce 2.3-4.1x.",
        "{:g}-{:g}x".format(*taihulight.PAPER_MPI_RATIOS),
        run_taihulight_ring_vs_mpi,
        in_range(why_taihulight_ring_vs_mpi),
        Plot("line", "nodes", "time (s)", log_x=True, log_y=True),
        {"512 nodes": taihulight.PAPER_MPI_RATIOS},
    ),
    Claim(
        "taihulight-ps-vs-ring",
        TAIHULIGHT_PAPER,
        "Figs 9-11",
        "The PS's communication per iteration over the decentralized ring's: AlexNet 10x at 256 nodes, "
        "GoogLeNet 77x and ResNet 98x at 32.",
        "10x, 77x, 98x",
        run_taihulight_ps_vs_ring,
        judge_taihulight_ps_vs_ring,
        Plot("bar", "model", "PS / ring communication time", log_y=True),
        {m: r for m, _, r in taihulight_bounds.PUBLISHED_RATIOS},
    ),
    Claim(
        "taihulight-little-difference",
        TAIHULIGHT_PAPER,
        "Figs 9-11",
        "PS and ring differ little below 16 nodes for AlexNet and below 8 for GoogLeNet and ResNet.",
        f"little (read: <= {taihulight_bounds.LITTLE_DIFFERENCE_RATIO:g}x)",
        run_taihulight_little_difference,
        judge_taihulight_little_difference,
        Plot("bar", "model", "PS / ring communication time"),
    ),
]
