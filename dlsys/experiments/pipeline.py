"""Pipeline schedules on the emulator: each action's virtual span, the bubble measured from
the trace beside its closed form, and each stage's peak activation bytes.

``pipeline_schedule`` runs one schedule of ``dlsys.train.pipeline`` (the small transformer,
one step) and returns tidy rows; ``bubble_vs_microbatches`` sweeps m for the figure of the
bubble against the micro-batch count. The link is free (zero latency, infinite bandwidth)
unless one is named, so the measured bubble is the schedule's alone and equals its formula.
"""

from __future__ import annotations

import math

from ..machine.net import LinkModel
from ..train.pipeline import SCHEDULES, PipelineConfig, run

FREE_LINK = LinkModel("free", 0.0, math.inf, source="no communication cost: isolates the schedule's bubble")


def pipeline_schedule(
    schedule: str = "1f1b",
    stages: int = 4,
    micro_batches: int = 8,
    chunks: int = 1,
    link: str | LinkModel = FREE_LINK,
    backend: str = "threads",
    layers: int | None = None,
) -> dict:
    """One step of ``schedule``. Rows: ``actions`` (stage, action F/B/W, micro_batch, chunk,
    start_s, end_s), ``bubble`` per stage (step_s, busy_s, idle_s, measured = idle / step,
    formula, and the relative form idle / busy, Narayanan's (p - 1) / (v m) for interleaved),
    ``memory`` per stage (peak activation bytes, the schedule's in-flight count, bytes of one
    (micro-batch, chunk)). The transformer has ``layers`` layers, by default p max(v, 2), so
    1F1B on p stages and interleaving with v = 2 cut the same model. Bad input is refused by
    name before any rank starts."""
    config = PipelineConfig(schedule, stages, micro_batches, chunks, layers=layers or stages * max(chunks, 2))
    entry = config.check()
    result = run(config, backend, link=link)
    step_s = result.virtual_time_s
    actions = [
        {k: row[k] for k in ("stage", "action", "micro_batch", "chunk", "start_s", "end_s")}
        for value in result.values
        for row in value["actions"]
    ]
    bubble, memory = [], []
    for s, value in enumerate(result.values):
        busy_s = sum(row["end_s"] - row["start_s"] for row in value["actions"])
        bubble.append(
            {
                "schedule": schedule,
                "stage": s,
                "step_s": step_s,
                "busy_s": busy_s,
                "idle_s": step_s - busy_s,
                "measured": (step_s - busy_s) / step_s,
                "formula": entry.bubble(stages, micro_batches, chunks),
                "relative": (step_s - busy_s) / busy_s,
            }
        )
        held = entry.in_flight(s, stages, micro_batches, chunks)
        memory.append(
            {
                "schedule": schedule,
                "stage": s,
                "activation_peak_nbytes": value["activation_peak_nbytes"],
                "in_flight": held,
                "per_micro_batch_nbytes": value["activation_peak_nbytes"] / held,
            }
        )
    return {
        "schedule": schedule,
        "stages": stages,
        "micro_batches": micro_batches,
        "chunks": chunks,
        "layers": config.layers,
        "link": getattr(link, "name", link),
        "bubble_latex": entry.bubble_latex,
        "citation": entry.citation,
        "actions": actions,
        "bubble": bubble,
        "memory": memory,
    }


def bubble_vs_microbatches(
    stages: int = 4,
    micro_batches: tuple[int, ...] = (4, 8, 12, 16),
    schedules: tuple[str, ...] = tuple(SCHEDULES),
    chunks: int = 2,
) -> list[dict]:
    """Measured bubble (stage 0's idle over the step) and formula for each schedule and m
    (interleaved with ``chunks`` chunks a stage; the others with one)."""
    return bubble_rows(
        [
            pipeline_schedule(name, stages, m, chunks if SCHEDULES[name].chunked else 1)
            for name in schedules
            for m in micro_batches
        ]
    )


def bubble_rows(records: list[dict]) -> list[dict]:
    """Stage 0's measured bubble and formula of each ``pipeline_schedule`` record:
    ``bubble_vs_microbatches``'s rows (the app assembles them from records it has)."""
    return [
        {
            "schedule": r["schedule"],
            "stages": r["stages"],
            "micro_batches": r["micro_batches"],
            "chunks": r["chunks"],
            "measured": r["bubble"][0]["measured"],
            "formula": r["bubble"][0]["formula"],
        }
        for r in records
    ]
