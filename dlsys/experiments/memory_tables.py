"""docs/memory.md's tables: (header, rows) that dlsys.course.docs writes between their
markers, the measured bytes (dlsys.experiments.memory) beside the papers' closed forms."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..learn.task import TrainConfig, build_model
from ..machine.memory import Transformer, activation_bytes, zero_figure1
from ..train.strategies import STRATEGIES
from ..train.zero import units_of
from .memory import (
    SHARDED,
    ZERO_CONFIG,
    ZERO_FIGURE1_PAPER_GB,
    compare,
    ddp_memory,
    step_bytes_sent,
    transformer_activations,
    transformer_states,
    zero_memory_rows,
)
from .training import train


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3f}"


def table_zero_figure1() -> tuple[list[str], list[list]]:
    formulas = {
        "stage 0": "(2 + 2 + K) Psi",
        "stage 1": "4 Psi + K Psi / N_d",
        "stage 2": "2 Psi + (2 + K) Psi / N_d",
        "stage 3": "(2 + 2 + K) Psi / N_d",
    }
    return (
        ["ZeRO", "bytes per device", "paper (GB)", "dlsys (GB)"],
        [
            [stage, formulas[stage], f"{ZERO_FIGURE1_PAPER_GB[stage]:g}", _gb(nbytes)]
            for stage, nbytes in zero_figure1().items()
        ],
    )


KORTHIKANTI_SHAPE = Transformer(layers=1, hidden=12288, heads=96, seq_len=2048, batch=1)  # GPT-3 175B's layer


def table_korthikanti() -> tuple[list[str], list[list]]:
    shape, t = KORTHIKANTI_SHAPE, 8
    s, b, h, a = shape.seq_len, shape.batch, shape.hidden, shape.heads
    rows = [
        ("no parallelism", "sbh (34 + 5as/h)", dict(tp=1), s * b * h * (34 + 5 * a * s / h)),
        (
            f"tensor parallel t={t}",
            "sbh (10 + 24/t + 5as/(ht))",
            dict(tp=t),
            s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
        ),
        (
            f"tensor + sequence parallel t={t}",
            "sbh (34/t + 5as/(ht))",
            dict(tp=t, sequence_parallel=True),
            s * b * h * (34 / t + 5 * a * s / (h * t)),
        ),
        (
            "tensor parallel + selective recomputation",
            "sbh (10 + 24/t)",
            dict(tp=t, recompute="selective"),
            s * b * h * (10 + 24 / t),
        ),
        (
            "tensor + sequence parallel + selective",
            "sbh 34/t",
            dict(tp=t, sequence_parallel=True, recompute="selective"),
            s * b * h * 34 / t,
        ),
        ("full recomputation", "2 sbh", dict(tp=t, recompute="full"), 2 * s * b * h),
    ]
    return (
        ["layout", "Table 2", "formula evaluated (GB)", "dlsys.machine.memory (GB)"],
        [
            [name, formula, _gb(direct), _gb(activation_bytes(shape, **options))]
            for name, formula, options, direct in rows
        ],
    )


def table_measured() -> tuple[list[str], list[list]]:
    rows = []
    for model in ("mlp", "cnn"):
        run = ddp_memory(model, ranks=4, steps=2)
        params = build_model(TrainConfig(model=model)).params.size
        for row in compare(run.values[0], params, 4)[:3]:
            rows.append(
                [
                    f"DDP {model} ({params:,} parameters), 4 ranks",
                    row["kind"],
                    f"{row['measured_bytes']:,}",
                    f"{row['model_bytes']:,.0f}",
                ]
            )
    params, ledger = transformer_states()
    for row in compare(ledger, params, 1, optimizer="adam")[:3]:
        rows.append(
            [
                f"transformer 2 x 32 ({params:,} parameters), Adam, 1 rank",
                row["kind"],
                f"{row['measured_bytes']:,}",
                f"{row['model_bytes']:,.0f}",
            ]
        )
    act = transformer_activations()
    rows.append(
        [
            "transformer 2 x 32, s=16, b=8",
            "activations in the blocks",
            f"{act['measured_blocks_bytes']:,}",
            f"{act['formula_bytes']:,} + {act['row_stats_bytes']:,} (layer-norm 1/std)",
        ]
    )
    return ["run", "kind", "measured numpy bytes (rank 0)", "closed form (bytes)"], rows


def table_zero_memory(ranks: int = 4) -> tuple[list[str], list[list]]:
    rows = [
        [r["label"], r["kind"], f"{r['measured_bytes']:,}", f"{r['model_bytes']:,.0f}"] for r in zero_memory_rows(ranks)
    ]
    return ["strategy", "kind", f"measured peak, rank 0 of {ranks} (bytes)", "Layout(...).bytes() (bytes)"], rows


def table_zero_volume(ranks: int = 4) -> tuple[list[str], list[list]]:
    """One step's bytes sent per rank (from the trace) against the closed forms, Psi padded."""
    model, rows = build_model(ZERO_CONFIG), []
    psi_nbytes = model.params.size * model.params.itemsize
    ddp = step_bytes_sent(train("allreduce", ZERO_CONFIG, ranks))
    rows.append(
        [
            "allreduce (DDP)",
            "2 (P-1)/P Psi",
            f"{psi_nbytes:,}",
            f"{ddp:,}",
            f"{2 * (ranks - 1) / ranks * psi_nbytes:,.0f}",
            f"{ddp / psi_nbytes:.3f}",
        ]
    )
    for name in SHARDED:
        fixed = STRATEGIES[name].fixed
        units = units_of(model, ranks, None if fixed["stage"] == 1 else fixed.get("unit_layers", 1))
        padded = sum(u.shard for u in units) * ranks * model.params.itemsize
        times = 3 if fixed["stage"] == 3 else 2
        sent = step_bytes_sent(train(name, ZERO_CONFIG, ranks))
        rows.append(
            [
                name,
                f"{times} (P-1)/P Psi",
                f"{padded:,}",
                f"{sent:,}",
                f"{times * (ranks - 1) / ranks * padded:,.0f}",
                f"{sent / psi_nbytes:.3f}",
            ]
        )
    return (
        [
            "strategy",
            "closed form",
            "Psi (bytes, padded)",
            f"sent per rank in one step, {ranks} ranks (bytes)",
            "closed form (bytes)",
            "x model bytes",
        ],
        rows,
    )


def table_zero_weights() -> tuple[list[str], list[list]]:
    """Each sharded strategy's weights after one epoch against DDP's: bitwise, or the largest
    difference relative to the largest weight."""
    rows = []
    for ranks in (1, 2, 3, 4):
        want = train("allreduce", ZERO_CONFIG, ranks)["params"]
        cells = []
        for name in SHARDED:
            diff = np.abs(train(name, ZERO_CONFIG, ranks)["params"] - want).max()
            cells.append("bitwise" if diff == 0 else f"{diff / np.abs(want).max():.1e}")
        rows.append([ranks, *cells])
    return ["ranks", *SHARDED], rows


def table_zero_time(ranks: int = 4, hidden: tuple[int, ...] = (256, 256, 256)) -> tuple[list[str], list[list]]:
    """One epoch of a wider MLP on ``ranks`` ranks (tcp-10gbe, laptop-cpu): virtual time and bytes moved."""
    config, rows = replace(ZERO_CONFIG, hidden=hidden), []
    for name in ["allreduce", *SHARDED]:
        record = train(name, config, ranks)
        rows.append(
            [
                name,
                f"{record['virtual_time_s'] * 1e3:.2f}",
                f"{record['bytes_moved'] / 1e6:.2f}",
                f"{record['test_accuracy']:.1%}",
            ]
        )
    return ["strategy", "virtual time (ms)", "bytes moved (MB)", "test accuracy"], rows


TABLES = {
    "memory.zero_figure1": table_zero_figure1,
    "memory.korthikanti": table_korthikanti,
    "memory.measured": table_measured,
    "memory.zero_memory": table_zero_memory,
    "memory.zero_volume": table_zero_volume,
    "memory.zero_weights": table_zero_weights,
    "memory.zero_time": table_zero_time,
}
