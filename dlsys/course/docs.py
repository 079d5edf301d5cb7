"""Tables in docs/ generated from the code, never typed (issue 24).

A generated table sits between two markers in a Markdown file of docs/:

    <!-- generated: large_batch.largest_good_batch -->
    | rule | ... |
    <!-- end generated -->

``TABLES`` maps each name to the function that writes it from the code: the large-batch
study's cache (``large_batch.require_study``: a stale cache is refused with what to run),
the reproduction suite at quick settings (``reproduce.run_claims``: seconds), the
training strategies (``training.train``: docs/training.md), the TaihuLight case study
(``taihulight``), the memory model against its papers and the measured bytes
(``memory.TABLES``: seconds) and tensor parallelism against the unsplit model and the closed
forms (``parallelism.TABLES``: seconds), the planner's presets and
layouts (``plan.TABLES``: a fraction of a second) and P3's bandwidth sweeps (``p3_sweeps``:
minutes). A block may hold a sentence as well as a table.
Adding one is one function and one entry. The names in ``SLOW`` take minutes between them on
two cores (each emulates hundreds of ranks); ``tests/test_docs.py`` checks the fast ones in
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

import json
import os
import platform
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from ..experiments import experts, large_batch, memory, parallelism, plan, schedule, taihulight, training
from ..experiments.collectives import simulate_collective
from ..machine.netstack import MPI_LIBRARIES
from ..outputs import write_atomic
from ..train.strategies import OPTIONS, STRATEGIES
from ..units import format_bytes, format_seconds
from . import reproduce

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
MEASURED = re.compile(r"(<!-- measured: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end measured -->)", re.S)


class Sources:
    """What the tables are made from, each computed once when first asked for;
    ``claims`` may be given (records of ``reproduce.run_claims(quick=True)``)."""

    def __init__(self, claims: list[dict] | None = None):
        self._designs: dict[tuple, dict] = {}
        if claims is not None:
            self.claims = claims

    @cached_property
    def study(self) -> dict:
        return large_batch.require_study()

    @cached_property
    def claims(self) -> list[dict]:
        return reproduce.run_claims(quick=True)

    def design(self, model: str, design: str, nodes: int, contiguous: bool = True) -> dict:
        """``taihulight.run_design`` (a link per pair), each case run once."""
        key = (model, design, nodes, contiguous)
        if key not in self._designs:
            self._designs[key] = taihulight.run_design(model, design, nodes, contiguous)
        return self._designs[key]

    @cached_property
    def strategies(self) -> dict[str, dict]:
        """Every strategy at ``TrainConfig()`` on 4 workers, 10 GbE (docs/training.md)."""
        return {name: training.train(name) for name in STRATEGIES}

    @cached_property
    def straggler(self) -> dict[str, dict]:
        """Worker 3 four times slower on RDMA, where compute matters (docs/training.md)."""
        return {
            name: training.train(name, link="rdma-edr", straggler=STRAGGLER)
            for name in STRATEGIES
            if name == "allreduce" or name.startswith("ps-")
        }


def markdown_table(header: list[str], rows: list[list]) -> str:
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [header, *rows]]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]]) + "\n"


def lb_accuracy(src: Sources) -> str:
    sweep = src.study["sweep"]
    batches = sorted({r["batch"] for r in sweep})
    accuracy = {(r["rule"], r["batch"]): r["test_accuracy"] for r in sweep}
    return markdown_table(
        ["rule", *map(str, batches)],
        [[rule, *(f"{accuracy[rule, b]:.1%}" for b in batches)] for rule in large_batch.RULES],
    )


def lb_largest_good_batch(src: Sources) -> str:
    s = src.study["study"]
    rows = []
    for rule in large_batch.RULES:
        batch = large_batch.largest_good_batch(src.study["sweep"], rule, s["tolerance"])
        rows.append([rule, f"{batch:,}", f"{batch // s['base_batch']}x"])
    return markdown_table(
        [
            "rule",
            f"largest batch within {s['tolerance']:g} (absolute accuracy) of batch {s['base_batch']}",
            "times the base batch",
        ],
        rows,
    )


def lb_optimizers(src: Sources) -> str:
    return markdown_table(
        ["optimizer", "global batch", "peak learning rate", "test accuracy"],
        [
            [r["optimizer"], f"{r['batch']:,}", f"{r['lr']:g}", f"{r['test_accuracy']:.1%}"]
            for r in src.study["optimizers"]
        ],
    )


def lb_sharpness(src: Sources) -> str:
    shape = src.study["landscape"]
    return markdown_table(
        ["solution", "sharpness"], [[shape[w], f"{shape['sharpness'][w]:.3g}"] for w in ("small", "large")]
    )


def lb_time_to_accuracy(src: Sources) -> str:
    target = src.study["study"]["target_accuracy"]
    return markdown_table(
        ["workers", "samples per worker", "global batch", f"virtual time to {target:.0%}", "final accuracy"],
        [
            [
                r["workers"],
                r["batch_per_worker"],
                f"{r['global_batch']:,}",
                "never" if r["time_to_target_s"] is None else f"{r['time_to_target_s'] * 1e3:.0f} ms",
                f"{r['test_accuracy']:.1%}",
            ]
            for r in src.study["time_to_accuracy"]
        ],
    )


def reproductions(src: Sources) -> str:
    return markdown_table(
        ["claim", "paper", "where", "paper's figure", "dlsys (quick settings)", "verdict", "why"],
        [
            [f"`{r['claim']}`", r["paper"], r["where"], r["paper_value"], r["ours"], f"**{r['verdict']}**", r["why"]]
            for r in src.claims
        ],
    )


def statements(src: Sources) -> str:
    return "".join(f"- `{r['claim']}` ({r['paper']}, {r['where']}): {r['statement']}\n" for r in src.claims)


STRAGGLER = (3, 4.0)  # (worker, slowdown)


def strategy_title(name: str) -> str:
    """The strategy's name with the option that shapes it: "ps-ssp (s = 2)"."""
    option = {"local-sgd": ("K", "period"), "model-parallel": ("M", "micro_batches"), "ps-ssp": ("s", "staleness")}
    return f"{name} ({option[name][0]} = {OPTIONS[option[name][1]].default})" if name in option else name


def steps_per_worker(record: dict) -> dict[int, int]:
    """Steps (gradients pushed) of each training rank, from the record's losses."""
    return dict(sorted(Counter(row["rank"] for row in record["losses"]).items()))


def gradients_per_worker(record: dict) -> str:
    counts = list(steps_per_worker(record).values())
    return f"{counts[0]} each" if len(set(counts)) == 1 else ", ".join(map(str, counts))


def training_strategies(src: Sources) -> str:
    def staleness(name: str, r: dict) -> str:
        return f"{OPTIONS['period'].default - 1} local steps" if name == "local-sgd" else str(r["max_staleness"])

    return markdown_table(
        ["strategy", "test accuracy", "virtual time", "bytes moved", "max staleness"],
        [
            [
                strategy_title(name),
                f"{r['test_accuracy']:.2%}",
                f"{r['virtual_time_s'] * 1e3:.2f} ms",
                f"{r['bytes_moved'] / 1e6:.2f} MB",
                staleness(name, r),
            ]
            for name, r in src.strategies.items()
        ],
    )


def training_straggler(src: Sources) -> str:
    runs = src.straggler
    rows = [
        [
            strategy_title(name),
            f"{r['test_accuracy']:.2%}",
            f"{r['virtual_time_s'] * 1e3:.2f} ms",
            gradients_per_worker(r) + (f" (max staleness {r['max_staleness']} clocks)" if name == "ps-asp" else ""),
        ]
        for name, r in runs.items()
    ]
    asp, bsp = runs["ps-asp"], runs["ps-bsp"]
    return (
        markdown_table(["strategy", "test accuracy", "virtual time", "gradients per worker"], rows)
        + f"\nASP finishes {bsp['virtual_time_s'] / asp['virtual_time_s']:.1f}x earlier than BSP, with reads up "
        f"to {asp['max_staleness']} clocks stale.\n"
    )


def training_failure(src: Sources) -> str:
    worker, step = FAILURE
    r = training.train("ps-asp", fail=FAILURE)
    pushed = [n for rank, n in steps_per_worker(r).items() if rank != OPTIONS["servers"].default + worker]
    return (
        f"`dlsys train --strategy ps-asp --fail {worker}:{step}`: the other three push "
        f"{', '.join(map(str, pushed))} gradients, {r['test_accuracy']:.2%} test accuracy.\n"
    )


FAILURE = (1, 5)  # (worker, gradients before it crashes)
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
    rows = taihulight.published_figures(emulate=True)
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
    lines += [f"| {v['figure']} | {v['verdict']} |" for v in taihulight.verdicts(rows)]
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


def p3_sweep_rows(model: str, bandwidths) -> tuple[list[list[str]], list[dict], list[dict]]:
    """The rows of ``p3_sweeps`` for one model at ``bandwidths``, with the records behind them
    (links shared, then not shared)."""
    sweep = schedule.p3_reproduction(model, bandwidths)
    apart = schedule.p3_reproduction(model, bandwidths, sharing=False)
    rows = [
        [
            model,
            r["link"],
            format_seconds(r["mxnet_s"]),
            format_seconds(r["p3_s"]),
            f"{r['gain']:+.0%}",
            f"{a['gain']:+.0%}",
            f"{r['ceiling_gain']:+.0%}",
            format_seconds(r["bound_s"]),
            format_seconds(r["compute_s"]),
            f"{r['paper_max_gain']:+.0%}",
        ]
        for r, a in zip(sweep, apart)
    ]
    return rows, sweep, apart


def p3_sweeps(src: Sources) -> str:
    """P3 against MXNet as P3's paper ran them (``schedule.p3_reproduction``: co-located
    servers, links shared), ResNet-50 and VGG-19 at ``reproduce.P3_BANDWIDTHS``, beside
    the gain with each rank's links its own (``sharing=False``), the largest gain the
    link's bound leaves over MXNet's time (``ceiling_gain``) and the paper's largest gain."""
    rows, best, best_apart = [], {}, {}
    for model in ("resnet50", "vgg19"):
        model_rows, sweep, apart = p3_sweep_rows(model, reproduce.P3_BANDWIDTHS)
        best[model] = max(sweep, key=lambda r: r["gain"])
        best_apart[model] = max(apart, key=lambda r: r["gain"])
        rows += model_rows
    verdict = "; ".join(
        f"{m} {r['gain']:+.0%} at {r['link']} ({best_apart[m]['gain']:+.0%} at "
        f"{best_apart[m]['link']} with links not shared; the paper: up to {r['paper_max_gain']:+.0%})"
        for m, r in best.items()
    )
    return markdown_table(P3_SWEEP_COLUMNS, rows) + f"\nThe largest gain in this model: {verdict}.\n"


P3_SWEEP_COLUMNS = [
    "model",
    "link",
    "MXNet",
    "P3",
    "P3's gain",
    "P3's gain, links not shared",
    "the bound's ceiling",
    "the link's bound",
    "compute",
    "the paper's largest gain",
]


def p3_anatomy_rows(link: str) -> tuple[list[list[str]], dict]:
    """The rows of ``p3_anatomy`` at one link, with the records behind them by (policy, sharing)."""
    rows, of = [], {}
    for sharing in (True, False):
        for r in schedule.p3_anatomy("resnet50", link, sharing=sharing):
            of[r["policy"], sharing] = r
            rows.append(
                [
                    r["link"],
                    "shared" if sharing else "not shared",
                    r["policy"],
                    format_seconds(r["iteration_s"]),
                    format_seconds(r["first_wait_s"]),
                    format_seconds(r["posted_s"]),
                    format_seconds(r["pushes_in_s"]),
                    format_seconds(r["reply_s"]),
                    format_seconds(r["held_s"]),
                    format_seconds(r["kept_wait_s"]),
                    "-" if r["egress_busy"] is None else f"{r['egress_busy']:.0%}",
                ]
            )
    return rows, of


def p3_anatomy(src: Sources) -> str:
    """Where ResNet-50's iteration goes under MXNet and P3 (``schedule.p3_anatomy``) at
    ``reproduce.P3_ANATOMY_BANDWIDTHS``, links shared and not."""
    rows, said = [], []
    for link in reproduce.P3_ANATOMY_BANDWIDTHS:
        link_rows, of = p3_anatomy_rows(link)
        rows += link_rows
        shared, apart = of["p3", True], of["p3", False]
        said.append(
            f"at {link}, P3's last push of conv1 leaves {format_seconds(shared['posted_s'])} after the "
            f"backward's end with links shared ({format_seconds(apart['posted_s'])} not shared) and its "
            f"server holds its update {format_seconds(shared['held_s'])} "
            f"({format_seconds(shared['kept_wait_s'])} of it waiting for pushes the run took first; not "
            f"shared {format_seconds(apart['held_s'])}, where MXNet's holds it "
            f"{format_seconds(of['mxnet', False]['held_s'])})"
        )
    return markdown_table(P3_ANATOMY_COLUMNS, rows) + "\nSo " + "; ".join(said) + ".\n"


P3_ANATOMY_COLUMNS = [
    "link",
    "links",
    "policy",
    "iteration",
    "next forward waits",
    "conv1's last push leaves",
    "conv1's pushes in",
    "its reply leaves",
    "held at the server",
    "of which waiting for another push",
    "egress busy",
]


TABLES: dict[str, Callable[[Sources], str]] = {
    "large_batch.accuracy": lb_accuracy,
    "large_batch.largest_good_batch": lb_largest_good_batch,
    "large_batch.optimizers": lb_optimizers,
    "large_batch.sharpness": lb_sharpness,
    "large_batch.time_to_accuracy": lb_time_to_accuracy,
    "reproductions": reproductions,
    "reproductions.statements": statements,
    "taihulight.ring_vs_libraries": tl_ring_vs_libraries,
    "taihulight.ring_vs_mpi_sharing": tl_ring_vs_mpi_sharing,
    "taihulight.designs": tl_designs,
    "taihulight.designs_sharing": tl_designs_sharing,
    "taihulight.figures": tl_figures,
    "taihulight.sweep": tl_sweep,
    "taihulight.models": tl_models,
    "taihulight.packing": tl_packing,
    "taihulight.hierarchical": tl_hierarchical,
    "training.strategies": training_strategies,
    "training.straggler": training_straggler,
    "training.failure": training_failure,
    "scheduling.p3_sweeps": p3_sweeps,
    "scheduling.p3_anatomy": p3_anatomy,
    **{
        name: lambda src, table=table: markdown_table(*table())
        for name, table in {**memory.TABLES, **parallelism.TABLES, **plan.TABLES, **experts.TABLES}.items()
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
    "scheduling.p3_sweeps": lambda: p3_sweep_rows("resnet50", ("10Gbps",))[0],
    "scheduling.p3_anatomy": lambda: p3_anatomy_rows("20Gbps")[0],
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


def add_write_docs(parser) -> None:
    """A benchmark's ``--write-docs [FILE]`` option (default docs/performance.md)."""
    parser.add_argument(
        "--write-docs",
        metavar="FILE",
        nargs="?",
        const=str(DOCS_DIR / "performance.md"),
        help="write the result into FILE's measured block (default docs/performance.md)",
    )


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
