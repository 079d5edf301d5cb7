"""docs/large_batch.md's tables: the committed large-batch study."""

from __future__ import annotations

from ...experiments import large_batch
from . import Sources, markdown_table


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
