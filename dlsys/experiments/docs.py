"""Tables in docs/ generated from the code, never typed (issue 24).

A generated table sits between two markers in a Markdown file of docs/:

    <!-- generated: large_batch.largest_good_batch -->
    | rule | ... |
    <!-- end generated -->

``TABLES`` maps each name to the function that writes it from the code: the large-batch
study's cache (``large_batch.require_study``: a stale cache is refused with what to run)
the reproduction suite at quick settings (``reproduce.run_claims``: seconds) and the
memory model against its papers and the measured bytes (``memory.TABLES``: seconds), tensor
parallelism against the unsplit model and the closed forms (``parallelism.TABLES``: seconds).

    python -m dlsys.experiments.docs          # rewrite every generated table in docs/
    dlsys reproduce --write-docs              # the same
    stale_tables()                            # [(file, name)] that differ from the code (the test)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from . import large_batch, memory, parallelism, reproduce

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


class Sources:
    """What the tables are made from, each computed once when first asked for;
    ``claims`` may be given (records of ``reproduce.run_claims(quick=True)``)."""

    def __init__(self, claims: list[dict] | None = None):
        if claims is not None:
            self.claims = claims

    @cached_property
    def study(self) -> dict:
        return large_batch.require_study()

    @cached_property
    def claims(self) -> list[dict]:
        return reproduce.run_claims(quick=True)


def markdown_table(header: list[str], rows: list[list]) -> str:
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [header, *rows]]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]]) + "\n"


def lb_accuracy(src: Sources) -> str:
    sweep = src.study["sweep"]
    batches = sorted({r["batch"] for r in sweep})
    accuracy = {(r["rule"], r["batch"]): r["test_accuracy"] for r in sweep}
    return markdown_table(["rule", *map(str, batches)],
                          [[rule, *(f"{accuracy[rule, b]:.1%}" for b in batches)] for rule in large_batch.RULES])


def lb_largest_good_batch(src: Sources) -> str:
    s = src.study["study"]
    rows = []
    for rule in large_batch.RULES:
        batch = large_batch.largest_good_batch(src.study["sweep"], rule, s["tolerance"])
        rows.append([rule, f"{batch:,}", f"{batch // s['base_batch']}x"])
    return markdown_table(["rule", f"largest batch within {s['tolerance']:g} (absolute accuracy) of batch {s['base_batch']}",
                           "times the base batch"], rows)


def lb_optimizers(src: Sources) -> str:
    return markdown_table(["optimizer", "global batch", "peak learning rate", "test accuracy"],
                          [[r["optimizer"], f"{r['batch']:,}", f"{r['lr']:g}", f"{r['test_accuracy']:.1%}"]
                           for r in src.study["optimizers"]])


def lb_sharpness(src: Sources) -> str:
    shape = src.study["landscape"]
    return markdown_table(["solution", "sharpness"], [[shape[w], f"{shape['sharpness'][w]:.3g}"] for w in ("small", "large")])


def lb_time_to_accuracy(src: Sources) -> str:
    target = src.study["study"]["target_accuracy"]
    return markdown_table(
        ["workers", "samples per worker", "global batch", f"virtual time to {target:.0%}", "final accuracy"],
        [[r["workers"], r["batch_per_worker"], f"{r['global_batch']:,}",
          "never" if r["time_to_target_s"] is None else f"{r['time_to_target_s'] * 1e3:.0f} ms",
          f"{r['test_accuracy']:.1%}"] for r in src.study["time_to_accuracy"]])


def reproductions(src: Sources) -> str:
    return markdown_table(["claim", "paper", "where", "paper's figure", "dlsys (quick settings)", "verdict", "why"],
                          [[f"`{r['claim']}`", r["paper"], r["where"], r["paper_value"], r["ours"], f"**{r['verdict']}**",
                            r["why"]] for r in src.claims])


def statements(src: Sources) -> str:
    return "".join(f"- `{r['claim']}` ({r['paper']}, {r['where']}): {r['statement']}\n" for r in src.claims)


TABLES: dict[str, Callable[[Sources], str]] = {
    "large_batch.accuracy": lb_accuracy, "large_batch.largest_good_batch": lb_largest_good_batch,
    "large_batch.optimizers": lb_optimizers, "large_batch.sharpness": lb_sharpness,
    "large_batch.time_to_accuracy": lb_time_to_accuracy, "reproductions": reproductions,
    "reproductions.statements": statements,
    **{name: lambda src, table=table: markdown_table(*table())
       for name, table in {**memory.TABLES, **parallelism.TABLES}.items()},
}


def render(text: str, src: Sources) -> str:
    """``text`` with every generated block rewritten; an unknown name is a ValueError."""
    def block(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise ValueError(f"generated table {name!r} is unknown; valid: {', '.join(TABLES)}")
        return match[1] + TABLES[name](src) + match[4]
    return BLOCK.sub(block, text)


def _documents(docs_dir: Path) -> list[Path]:
    return sorted(path for path in Path(docs_dir).glob("*.md") if BLOCK.search(path.read_text()))


def stale_tables(docs_dir: Path | str = DOCS_DIR, claims: list[dict] | None = None) -> list[tuple[str, str]]:
    """(file, table name) of every generated table in ``docs_dir`` that differs from what
    the code gives now."""
    src, stale = Sources(claims), []
    for path in _documents(Path(docs_dir)):
        for match in BLOCK.finditer(path.read_text()):
            if render(match[0], src) != match[0]:
                stale.append((path.name, match["name"]))
    return stale


def write_docs(docs_dir: Path | str = DOCS_DIR, claims: list[dict] | None = None) -> list[Path]:
    """Rewrite every generated table in ``docs_dir``; return the files that changed."""
    src, changed = Sources(claims), []
    for path in _documents(Path(docs_dir)):
        text = path.read_text()
        new = render(text, src)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


if __name__ == "__main__":
    for path in write_docs():
        print(f"rewrote {path}")
