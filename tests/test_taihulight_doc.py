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


TABLES = {"ring-vs-libraries": ring_vs_libraries, "designs": designs, "figures": figures}


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
