"""Tables in docs/ generated from the code, never typed (issue 24).

A generated table sits between two markers in a Markdown file of docs/:

    <!-- generated: large_batch.largest_good_batch -->
    | rule | ... |
    <!-- end generated -->

``TABLES`` maps each name to the function that writes it from the code (``tables``, one
module per document): the large-batch
study's cache (``large_batch.require_study``: a stale cache is refused with what to run),
the reproduction suite at quick settings (``reproduce.run_claims``: seconds), the
training strategies (``training.train``: docs/training.md), the TaihuLight case study
(``taihulight``), the memory model against its papers and the measured bytes
(``memory_tables.TABLES``: seconds) and tensor parallelism against the unsplit model and the closed
forms (``parallelism.TABLES``: seconds), the planner's presets and
layouts (``plan.TABLES``: a fraction of a second) and P3's bandwidth sweeps (``p3_sweeps``:
minutes). A block may hold a sentence as well as a table.
Adding one is one function and one entry. The names in ``SLOW`` take minutes between them on
two cores (each emulates hundreds of ranks); ``tests/course/test_docs.py`` checks the fast ones in
every run and the slow ones under ``-m slow``,
those in ``SAMPLED`` by one row each (``SAMPLES``).

    python -m dlsys.course.docs          # rewrite every generated table in docs/
    dlsys reproduce --write-docs              # the same
    stale_tables(slow=False)                  # [(file, name)] that differ from the code (the test)

Wall-clock measurements cannot be held to the code by a test: they move with the machine
and its load. A benchmark writes its table between ``<!-- measured: NAME -->`` and
``<!-- end measured -->`` with ``write_measured``, stamped with the machine, its load, the
date and the command: ``--write-docs`` of ``benchmarks/run_all.py``, ``simulate_scale.py``,
``sharing_scale.py`` and ``mpi_scale.py`` rewrite docs/performance.md's. Nothing checks them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..experiments import experts, memory_tables, parallelism, plan
from ..outputs import write_atomic
from .tables import Sources, large_batch, markdown_table, reproductions, scheduling, taihulight, training

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
MEASURED = re.compile(r"(<!-- measured: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end measured -->)", re.S)


TABLES: dict[str, Callable[[Sources], str]] = {
    "large_batch.accuracy": large_batch.lb_accuracy,
    "large_batch.largest_good_batch": large_batch.lb_largest_good_batch,
    "large_batch.optimizers": large_batch.lb_optimizers,
    "large_batch.sharpness": large_batch.lb_sharpness,
    "large_batch.time_to_accuracy": large_batch.lb_time_to_accuracy,
    "reproductions": reproductions.reproductions,
    "reproductions.statements": reproductions.statements,
    "taihulight.ring_vs_libraries": taihulight.tl_ring_vs_libraries,
    "taihulight.ring_vs_mpi_sharing": taihulight.tl_ring_vs_mpi_sharing,
    "taihulight.designs": taihulight.tl_designs,
    "taihulight.designs_sharing": taihulight.tl_designs_sharing,
    "taihulight.figures": taihulight.tl_figures,
    "taihulight.sweep": taihulight.tl_sweep,
    "taihulight.models": taihulight.tl_models,
    "taihulight.packing": taihulight.tl_packing,
    "taihulight.hierarchical": taihulight.tl_hierarchical,
    "training.strategies": training.training_strategies,
    "training.straggler": training.training_straggler,
    "training.failure": training.training_failure,
    "scheduling.p3_sweeps": scheduling.p3_sweeps,
    "scheduling.p3_anatomy": scheduling.p3_anatomy,
    **{
        name: lambda src, table=table: markdown_table(*table())
        for name, table in {**memory_tables.TABLES, **parallelism.TABLES, **plan.TABLES, **experts.TABLES}.items()
    },
}
# Each emulates hundreds of ranks (two of them with links shared): minutes together on two cores.
# P3's sweeps replay every slice on shared links: minutes a model.
SLOW = frozenset(
    {
        "taihulight.ring_vs_libraries",
        "taihulight.ring_vs_mpi_sharing",
        "taihulight.designs_sharing",
        "taihulight.hierarchical",
        "scheduling.p3_sweeps",
        "scheduling.p3_anatomy",
    }
)
# Of those, the ones the test suite cannot afford whole (P3's two blocks: tens of minutes on
# two cores, twenty shared replays of thousands of slices): it re-runs one row of each
# (``SAMPLES``: its function's rows at one setting) and finds them in the document; the
# generator still writes them whole.
SAMPLED = frozenset({"scheduling.p3_sweeps", "scheduling.p3_anatomy"})
SAMPLES: dict[str, Callable[[], list[list[str]]]] = {
    "scheduling.p3_sweeps": lambda: scheduling.p3_sweep_rows("resnet50", ("10Gbps",))[0],
    "scheduling.p3_anatomy": lambda: scheduling.p3_anatomy_rows("20Gbps")[0],
}


# Tables of rounding differences (tensor parallelism against the unsplit model, ZeRO and FSDP
# against DDP): a zero or "bitwise" cell says two summation orders are the same, on every CPU;
# a nonzero cell is the size of the roundoff, whose digits follow the CPU's BLAS kernel (another
# kernel sums a matmul in another order: a factor 2 between numpy's OpenBLAS kernels for x86).
# Those cells are held to their decade, a factor 10 either way; a change of precision or of
# summation order moves them by orders of magnitude.
ROUNDOFF = frozenset({"parallelism.equality", "memory.zero_weights"})
SCIENTIFIC = re.compile(r"\d+(?:\.\d+)?e[+-]\d+")


def same_roundoff(old: str, new: str) -> bool:
    """The same text, every number in scientific notation zero in both or within a factor 10."""
    if SCIENTIFIC.sub("#", old) != SCIENTIFIC.sub("#", new):
        return False
    pairs = [(float(a), float(b)) for a, b in zip(SCIENTIFIC.findall(old), SCIENTIFIC.findall(new))]
    return all(a == b == 0 or (a != 0 and b != 0 and 0.1 <= a / b <= 10) for a, b in pairs)


def render(text: str, src: Sources, slow: bool = True, skip: frozenset = frozenset()) -> str:
    """``text`` with every generated block rewritten (those in ``SLOW`` only if ``slow``,
    none named in ``skip``); an unknown name is a ValueError."""

    def block(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise ValueError(f"generated table {name!r} is unknown; valid: {', '.join(TABLES)}")
        return match[0] if (name in SLOW and not slow) or name in skip else match[1] + TABLES[name](src) + match[4]

    return BLOCK.sub(block, text)


def sampled_rows_missing(docs_dir: Path | str = DOCS_DIR) -> list[tuple[str, str, str]]:
    """(file, table name, row) of every row ``SAMPLES`` gives now that its block in
    ``docs_dir`` does not hold: the suite's check of the ``SAMPLED`` blocks."""
    missing = []
    for path in _documents(Path(docs_dir)):
        for match in BLOCK.finditer(path.read_text()):
            if match["name"] not in SAMPLES:
                continue
            rows = SAMPLES[match["name"]]()
            lines = markdown_table(["-"] * len(rows[0]), rows).splitlines()[2:]  # the rows, without the header
            missing += [(path.name, match["name"], line) for line in lines if line not in match[0]]
    return missing


def _documents(docs_dir: Path) -> list[Path]:
    return sorted(path for path in Path(docs_dir).glob("*.md") if BLOCK.search(path.read_text()))


def stale_tables(
    docs_dir: Path | str = DOCS_DIR, claims: list[dict] | None = None, slow: bool = True, skip: frozenset = frozenset()
) -> list[tuple[str, str]]:
    """(file, table name) of every generated table in ``docs_dir`` that differs from what
    the code gives now (those in ``ROUNDOFF`` beyond ``same_roundoff``); ``slow=False``
    leaves out the tables named in ``SLOW``, ``skip`` those it names."""
    src, stale = Sources(claims), []
    for path in _documents(Path(docs_dir)):
        for match in BLOCK.finditer(path.read_text()):
            now = render(match[0], src, slow, skip)
            if now != match[0] and not (match["name"] in ROUNDOFF and same_roundoff(match[0], now)):
                stale.append((path.name, match["name"]))
    return stale


def write_docs(docs_dir: Path | str = DOCS_DIR, claims: list[dict] | None = None, slow: bool = True) -> list[Path]:
    """Rewrite every generated table in ``docs_dir`` (those in ``SLOW`` only if ``slow``);
    return the files that changed."""
    src, changed = Sources(claims), []
    for path in _documents(Path(docs_dir)):
        text = path.read_text()
        new = render(text, src, slow)
        if new != text:
            write_atomic(path, new)
            changed.append(path)
    return changed


def machine_stamp(command: str) -> str:
    """Where and how a measurement was taken: the line above each measured table."""
    return (
        f"Measured {time.strftime('%Y-%m-%d')} by `{command}` on {platform.machine()} {platform.system()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} when written, "
        f"Python {platform.python_version()}.\n\n"
    )


def benchmark_parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's command line: its docstring as help, ``--json`` (one JSON line) and
    ``--write-docs [FILE]`` (its measured block in FILE, default docs/performance.md)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--write-docs",
        metavar="FILE",
        nargs="?",
        const=str(DOCS_DIR / "performance.md"),
        help="write the result into FILE's measured block (default docs/performance.md)",
    )
    return parser


def report_benchmark(record: dict, sentence, block: str, script: str, args, argv=None) -> None:
    """Print a one-sentence benchmark's ``record`` (JSON with ``--json``) and, with
    ``--write-docs``, write ``sentence(record)`` into the measured block ``block``, stamped
    with the command that ran it (``python benchmarks/<script> <its arguments>``)."""
    print(json.dumps(record) if args.json else sentence(record))
    if args.write_docs:
        command = " ".join([f"python benchmarks/{script}", *(sys.argv[1:] if argv is None else argv)])
        write_measured({block: sentence(record) + "\n"}, command, args.write_docs)


def write_measured(tables: dict[str, str], command: str, path: Path | str = DOCS_DIR / "performance.md") -> None:
    """Replace the measured blocks of ``path`` named in ``tables`` (name -> Markdown), each
    stamped by ``machine_stamp(command)``; a name without a block is a ValueError."""
    path = Path(path)
    text = path.read_text()
    missing = set(tables) - {m["name"] for m in MEASURED.finditer(text)}
    if missing:
        raise ValueError(f"{path.name} has no measured block {', '.join(sorted(missing))}")
    stamp = machine_stamp(command)
    write_atomic(
        path, MEASURED.sub(lambda m: m[1] + stamp + tables[m["name"]] + m[4] if m["name"] in tables else m[0], text)
    )


if __name__ == "__main__":
    for path in write_docs():
        print(f"rewrote {path}")
