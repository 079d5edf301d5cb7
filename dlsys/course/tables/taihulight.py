"""docs/taihulight.md's tables: the case study's ring, MPI and PS designs."""

from __future__ import annotations

from ...experiments import taihulight, taihulight_bounds
from ...experiments.collectives import simulate_collective
from ...machine.netstack import MPI_LIBRARIES
from ...units import format_bytes, format_seconds
from . import Sources, markdown_table

TAIHULIGHT_NODES = (2, 8, 32, 128, 256, 512)


def tl_ring_vs_libraries(src: Sources) -> str:
    """The ring against each MPI preset's MPI_Allreduce, 60.97 MB, TaihuLight topology."""
    runs = {
        lib: taihulight.ring_vs_mpi((taihulight.PAPER_MESSAGE_BYTES,), TAIHULIGHT_NODES, library=lib)
        for lib in MPI_LIBRARIES
    }
    ring = runs[taihulight.LIBRARY][::2]
    lines = [
        "| nodes | ring | " + " | ".join(f"{lib} (algorithm) | {lib} / ring" for lib in runs) + " |",
        "|---:|---:|" + "---|---:|" * len(runs),
    ]
    for i, r in enumerate(ring):
        cells = [
            f"{format_seconds(rows[2 * i + 1]['virtual_time_s'])} ({rows[2 * i + 1]['algorithm']}) | "
            f"{rows[2 * i + 1]['virtual_time_s'] / rows[2 * i]['virtual_time_s']:.2f}x"
            for rows in runs.values()
        ]
        lines.append(f"| {r['nodes']} | {format_seconds(r['virtual_time_s'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def tl_designs(src: Sources) -> str:
    """Communication per iteration (what compute does not hide), every design, batch 64."""
    lines = [
        "| model | nodes | " + " | ".join(taihulight.DESIGNS) + " | ps-reduce / ring |",
        "|---|---:|" + "---:|" * (len(taihulight.DESIGNS) + 1),
    ]
    for model, nodes in [(m, p) for m in taihulight.MODELS for p in (8, 32)] + [("alexnet", 256)]:
        comm = {d: src.design(model, d, nodes)["communication_s"] for d in taihulight.DESIGNS}
        lines.append(
            f"| {model} | {nodes} | "
            + " | ".join(format_seconds(comm[d]) for d in taihulight.DESIGNS)
            + f" | {comm['ps-reduce'] / comm['ring']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def tl_figures(src: Sources) -> str:
    """The paper's PS/ring figures against the arithmetic bounds and the emulation (compute free)."""
    rows = taihulight_bounds.published_figures(emulate=True)
    lines = [
        "| figure | design | bound on the sw26010 link | emulated | bound on any link | reachable here |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['figure']} | {r['design']} | {r['lo']:.3g}x to {r['hi']:.3g}x | "
            f"{r['emulated']:.3g}x | {r['any_lo']:.3g}x to {r['any_hi']:.3g}x | "
            f"{'yes' if r['here'] else 'no'} |"
        )
    lines += ["", "| figure | verdict |", "|---|---|"]
    lines += [f"| {v['figure']} | {v['verdict']} |" for v in taihulight_bounds.verdicts(rows)]
    return "\n".join(lines) + "\n"


def tl_ring_vs_mpi_sharing(src: Sources) -> str:
    """The ring against the paper's MPI (taihulight-mpi), 60.97 MB, a link per pair and links shared."""
    runs = {
        sharing: taihulight.ring_vs_mpi((taihulight.PAPER_MESSAGE_BYTES,), TAIHULIGHT_NODES, sharing=sharing)
        for sharing in (False, True)
    }
    lines = [
        "| nodes | ring, a link per pair | ring, links shared | MPI_Allreduce, a link per pair | "
        "MPI_Allreduce, links shared | MPI / ring, per pair | MPI / ring, shared |",
        "|---:|" + "---:|" * 6,
    ]
    for i, p in enumerate(TAIHULIGHT_NODES):
        ring = {sharing: rows[2 * i]["virtual_time_s"] for sharing, rows in runs.items()}
        mpi = {sharing: rows[2 * i + 1]["virtual_time_s"] for sharing, rows in runs.items()}
        lines.append(
            f"| {p} | {format_seconds(ring[False])} | {format_seconds(ring[True])} | "
            f"{format_seconds(mpi[False])} | {format_seconds(mpi[True])} | {mpi[False] / ring[False]:.2f}x | "
            f"{mpi[True] / ring[True]:.2f}x |"
        )
    shared = {r["nodes"]: r["virtual_time_s"] for r in runs[True] if r["library"] == "ring"}
    bound = taihulight.mpi_ratio_bounds()
    low, high = (bound["nbytes_for_ratio"][r] / 1e6 for r in taihulight.PAPER_MPI_RATIOS)
    lines += [
        "",
        f"With links shared the ring takes {shared[512] / shared[32]:.2f}x at 512 nodes what it takes at "
        f"32. The paper's MPI over the ring at 512 nodes, from the closed forms, rises with the message from "
        f"{bound['latency_ratio']:.3g}x to {bound['bandwidth_ratio']:.3g}x; the paper's "
        "{:g}-{:g}x".format(*taihulight.PAPER_MPI_RATIOS)
        + f" are messages of {low:.1f} to {high:.1f} MB; without "
        f"the upper level (flat) 60.97 MB gives {taihulight.mpi_ratio_bounds(topology='flat')['ratio']:.2f}x.",
    ]
    return "\n".join(lines) + "\n"


def tl_sweep(src: Sources) -> str:
    """AlexNet's communication per iteration, PS and ring, against each design's closed form."""

    def closed(r: dict) -> str:
        return "none" if r["closed_communication_s"] is None else format_seconds(r["closed_communication_s"])

    rows = []
    for p in (2, 8, 64, 256, 512):
        ps, ring = src.design("alexnet", "ps", p), src.design("alexnet", "ring", p)
        rows.append(
            [
                p,
                format_seconds(ps["communication_s"]),
                closed(ps),
                format_seconds(ring["communication_s"]),
                closed(ring),
            ]
        )
    return markdown_table(["nodes", "AlexNet PS comm", "(closed)", "AlexNet ring comm", "(closed)"], rows)


def tl_models(src: Sources) -> str:
    """Compute per iteration and communication at 256 nodes, every model; at 2 nodes, ResNet-50."""
    at = {m: {d: src.design(m, d, 256) for d in ("ps", "ring")} for m in taihulight.MODELS}
    two = {d: src.design("resnet50", d, 2) for d in ("ps", "ring")}
    rows = [
        [
            m,
            format_seconds(at[m]["ring"]["compute_s"]),
            format_seconds(at[m]["ps"]["communication_s"]),
            format_seconds(at[m]["ring"]["communication_s"]),
        ]
        for m in taihulight.MODELS
    ]
    return (
        markdown_table(
            [
                f"model (batch {taihulight.BATCH})",
                "compute per iteration",
                "PS comm, 256 nodes",
                "ring comm, 256 nodes",
            ],
            rows,
        )
        + f"\nAt 2 nodes backward hides part of the PS's pushes: resnet50's "
        f"{format_bytes(two['ps']['gradient_nbytes'])} cost it {format_seconds(two['ps']['communication_s'])} "
        f"of exposed communication, the ring {format_seconds(two['ring']['communication_s'])}.\n"
    )


def tl_packing(src: Sources) -> str:
    """What the packing copies of scattered blobs cost (``contiguous=False``)."""
    rows = []
    for model, design, nodes in (
        ("alexnet", "ring", 64),
        ("googlenet", "ring", 8),
        ("resnet50", "ring", 8),
        ("alexnet", "ps", 8),
    ):
        packed, plain = src.design(model, design, nodes, False), src.design(model, design, nodes)
        rows.append(
            [
                model,
                design,
                nodes,
                format_seconds(packed["pack_s"]),
                format_seconds(packed["iteration_s"], 4),
                format_seconds(plain["iteration_s"], 4),
                f"{packed['iteration_s'] / plain['iteration_s'] - 1:.1%}",
            ]
        )
    return markdown_table(
        [
            "model",
            "design",
            "nodes",
            "packing per iteration",
            "iteration, scattered",
            "iteration, contiguous",
            "longer by",
        ],
        rows,
    )


def tl_hierarchical(src: Sources) -> str:
    """The hierarchical all-reduce and the ring of the paper's message on 512 TaihuLight nodes."""
    run = {
        a: simulate_collective(  # the static shares: the text explains their closed form
            "allreduce", a, 512, taihulight.PAPER_MESSAGE_BYTES, topology="taihulight", record=False, sharing=False
        )
        for a in ("hierarchical", "ring")
    }
    tree = run["hierarchical"]
    return (
        f"The hierarchical all-reduce takes {format_seconds(tree['virtual_time_s'], 4)}, its closed form "
        f"2 lg 256 (alpha + n beta) + 2 (alpha_up + n/2 beta_up) {format_seconds(tree['closed_form_s'], 4)}; "
        f"the ring on the same network takes {format_seconds(run['ring']['virtual_time_s'])} (no closed form "
        "there: every step waits for its slowest hop).\n"
    )


SHARED_NODES = (8, 32, 512)
DIRECT_PS_NODES = 32  # the direct-send PS with links shared: p-1 pushes per layer into one link, re-solved per event


def tl_designs_sharing(src: Sources) -> str:
    """Communication per iteration with links shared, every design (the direct PS to 32 nodes)."""
    lines = [
        "| model | nodes | " + " | ".join(taihulight.DESIGNS) + " | ps-reduce / ring | ps-gather / ring |",
        "|---|---:|" + "---:|" * (len(taihulight.DESIGNS) + 2),
    ]
    for model in taihulight.MODELS:
        for nodes in SHARED_NODES:
            comm = {
                d: taihulight.run_design(model, d, nodes, sharing=True)["communication_s"]
                for d in taihulight.DESIGNS
                if d != "ps" or nodes <= DIRECT_PS_NODES
            }
            lines.append(
                f"| {model} | {nodes} | "
                + " | ".join(format_seconds(comm[d]) if d in comm else "-" for d in taihulight.DESIGNS)
                + f" | {comm['ps-reduce'] / comm['ring']:.1f}x | {comm['ps-gather'] / comm['ring']:.1f}x |"
            )
    return "\n".join(lines) + "\n"
