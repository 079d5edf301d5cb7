"""docs/taihulight.md's generated tables are the code's numbers: each table between
``<!-- BEGIN name -->`` and ``<!-- END name -->`` is rendered here and must match.
Rewrite them with ``python tests/test_taihulight_doc.py --write``."""

import pathlib
import re
import sys

import pytest

from dlsys.experiments import taihulight as study
from dlsys.machine.netstack import MPI_LIBRARIES
from dlsys.viz.units import format_seconds

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "taihulight.md"
NODES = (2, 8, 32, 128, 256, 512)


def ring_vs_libraries() -> str:
    """The ring against each MPI preset's MPI_Allreduce, 60.97 MB, TaihuLight topology."""
    runs = {lib: study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), NODES, library=lib) for lib in MPI_LIBRARIES}
    ring = runs[study.LIBRARY][::2]
    lines = ["| nodes | ring | " + " | ".join(f"{lib} (algorithm) | {lib} / ring" for lib in runs) + " |",
             "|---:|---:|" + "---|---:|" * len(runs)]
    for i, r in enumerate(ring):
        cells = [f"{format_seconds(rows[2 * i + 1]['virtual_time_s'])} ({rows[2 * i + 1]['algorithm']}) | "
                 f"{rows[2 * i + 1]['virtual_time_s'] / rows[2 * i]['virtual_time_s']:.2f}x" for rows in runs.values()]
        lines.append(f"| {r['nodes']} | {format_seconds(r['virtual_time_s'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def designs() -> str:
    """Communication per iteration (what compute does not hide), every design, batch 64."""
    lines = ["| model | nodes | " + " | ".join(study.DESIGNS) + " | ps-reduce / ring |",
             "|---|---:|" + "---:|" * (len(study.DESIGNS) + 1)]
    for model, nodes in [(m, p) for m in study.MODELS for p in (8, 32)] + [("alexnet", 256)]:
        comm = {d: study.run_design(model, d, nodes)["communication_s"] for d in study.DESIGNS}
        lines.append(f"| {model} | {nodes} | " + " | ".join(format_seconds(comm[d]) for d in study.DESIGNS)
                     + f" | {comm['ps-reduce'] / comm['ring']:.1f}x |")
    return "\n".join(lines)


def figures() -> str:
    """The paper's PS/ring figures against the arithmetic bounds and the emulation (compute free)."""
    rows = study.published_figures(emulate=True)
    lines = ["| figure | design | bound on the sw26010 link | emulated | bound on any link | reachable here |",
             "|---|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['figure']} | {r['design']} | {r['lo']:.3g}x to {r['hi']:.3g}x | "
                     f"{r['emulated']:.3g}x | {r['any_lo']:.3g}x to {r['any_hi']:.3g}x | "
                     f"{'yes' if r['here'] else 'no'} |")
    lines += ["", "| figure | verdict |", "|---|---|"]
    lines += [f"| {v['figure']} | {v['verdict']} |" for v in study.verdicts(rows)]
    return "\n".join(lines)


def ring_vs_mpi_sharing() -> str:
    """The ring against the paper's MPI (taihulight-mpi), 60.97 MB, a link per pair and links shared."""
    runs = {sharing: study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), NODES, sharing=sharing) for sharing in (False, True)}
    lines = ["| nodes | ring, a link per pair | ring, links shared | MPI_Allreduce, a link per pair | "
             "MPI_Allreduce, links shared | MPI / ring, per pair | MPI / ring, shared |", "|---:|" + "---:|" * 6]
    for i, p in enumerate(NODES):
        ring = {sharing: rows[2 * i]["virtual_time_s"] for sharing, rows in runs.items()}
        mpi = {sharing: rows[2 * i + 1]["virtual_time_s"] for sharing, rows in runs.items()}
        lines.append(f"| {p} | {format_seconds(ring[False])} | {format_seconds(ring[True])} | "
                     f"{format_seconds(mpi[False])} | {format_seconds(mpi[True])} | {mpi[False] / ring[False]:.2f}x | "
                     f"{mpi[True] / ring[True]:.2f}x |")
    shared = {r["nodes"]: r["virtual_time_s"] for r in runs[True] if r["library"] == "ring"}
    bound = study.mpi_ratio_bounds()
    low, high = (bound["nbytes_for_ratio"][r] / 1e6 for r in study.PAPER_MPI_RATIOS)
    lines += ["", f"With links shared the ring takes {shared[512] / shared[32]:.2f}x at 512 nodes what it takes at "
              f"32. The paper's MPI over the ring at 512 nodes, from the closed forms, rises with the message from "
              f"{bound['latency_ratio']:.3g}x to {bound['bandwidth_ratio']:.3g}x; the paper's "
              "{:g}-{:g}x".format(*study.PAPER_MPI_RATIOS) + f" are messages of {low:.1f} to {high:.1f} MB; without "
              f"the upper level (flat) 60.97 MB gives {study.mpi_ratio_bounds(topology='flat')['ratio']:.2f}x."]
    return "\n".join(lines)


SHARED_NODES = (8, 32, 512)
DIRECT_PS_NODES = 32  # the direct-send PS with links shared: p-1 pushes per layer into one link, re-solved per event


def designs_sharing() -> str:
    """Communication per iteration with links shared, every design (the direct PS to 32 nodes)."""
    lines = ["| model | nodes | " + " | ".join(study.DESIGNS) + " | ps-reduce / ring | ps-gather / ring |",
             "|---|---:|" + "---:|" * (len(study.DESIGNS) + 2)]
    for model in study.MODELS:
        for nodes in SHARED_NODES:
            comm = {d: study.run_design(model, d, nodes, sharing=True)["communication_s"]
                    for d in study.DESIGNS if d != "ps" or nodes <= DIRECT_PS_NODES}
            lines.append(f"| {model} | {nodes} | " + " | ".join(format_seconds(comm[d]) if d in comm else "-"
                                                                for d in study.DESIGNS)
                         + f" | {comm['ps-reduce'] / comm['ring']:.1f}x | {comm['ps-gather'] / comm['ring']:.1f}x |")
    return "\n".join(lines)


TABLES = {"ring-vs-libraries": ring_vs_libraries, "ring-vs-mpi-sharing": ring_vs_mpi_sharing, "designs": designs,
          "designs-sharing": designs_sharing, "figures": figures}


def marked(text: str, name: str) -> re.Match:
    match = re.search(rf"<!-- BEGIN {name} -->\n(.*?)\n<!-- END {name} -->", text, re.S)
    assert match, f"docs/taihulight.md has no table marked {name}"
    return match


@pytest.mark.parametrize("name", TABLES)
def test_the_doc_s_table_is_the_code_s(name):
    assert marked(DOC.read_text(), name).group(1) == TABLES[name](), \
        f"docs/taihulight.md's {name} table differs from the code: python tests/test_taihulight_doc.py --write"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = DOC.read_text()
    for name, render in TABLES.items():
        span = marked(text, name).span(1)
        text = text[:span[0]] + render() + text[span[1]:]
    DOC.write_text(text)
