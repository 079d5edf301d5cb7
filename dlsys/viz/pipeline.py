"""Pipeline schedules: a Gantt chart of one step (a row per stage; forward, backward or
input gradient, weight gradient and idle time coloured) and the bubble against the number
of micro-batches, measured beside the closed form. Data from ``dlsys.experiments.pipeline``."""

from __future__ import annotations

import plotly.graph_objects as go

from . import style  # noqa: F401  (registers the dlsys template)
from .messages import LABEL_COLORS
from .style import CONCEPT_COLOURS

ACTION_COLOURS = {
    "F": CONCEPT_COLOURS["forward"],
    "B": CONCEPT_COLOURS["backward"],
    "W": CONCEPT_COLOURS["weight gradient"],
    "idle": CONCEPT_COLOURS["idle"],
}
ACTION_NAMES = {
    "F": "forward",
    "B": "backward (input gradient when W is split off)",
    "W": "weight gradient",
    "idle": "idle (bubble)",
}


def gantt(record: dict, title: str | None = None) -> go.Figure:
    """One bar per action, stage 0 on top; the idle time of the step behind them in grey.
    A bar is labelled with its micro-batch (and chunk, when there are several)."""
    stages, step_s = record["stages"], max(row["end_s"] for row in record["actions"])
    names = [f"stage {s}" for s in range(stages)]
    fig = go.Figure(
        go.Bar(
            name=ACTION_NAMES["idle"],
            y=names,
            x=[step_s * 1e6] * stages,
            base=[0] * stages,
            orientation="h",
            marker_color=ACTION_COLOURS["idle"],
            hoverinfo="skip",
        )
    )
    for kind in "FBW":
        rows = [row for row in record["actions"] if row["action"] == kind]
        if not rows:
            continue
        text = [f"{row['micro_batch']}" + (f".{row['chunk']}" if record["chunks"] > 1 else "") for row in rows]
        fig.add_trace(
            go.Bar(
                name=ACTION_NAMES[kind],
                y=[f"stage {row['stage']}" for row in rows],
                orientation="h",
                x=[(row["end_s"] - row["start_s"]) * 1e6 for row in rows],
                base=[row["start_s"] * 1e6 for row in rows],
                marker=dict(color=ACTION_COLOURS[kind], line=dict(color="white", width=1)),
                text=text,
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate=f"{kind} micro-batch %{{text}}<br>%{{base:.3f}} µs + %{{x:.3f}} µs<extra></extra>",
            )
        )
    bubble = record["bubble"][0]
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        title=title
        or (
            f"{record['schedule']}: p = {stages}, m = {record['micro_batches']}"
            + (f", v = {record['chunks']}" if record["chunks"] > 1 else "")
            + f"; bubble {bubble['measured']:.1%} of the step (formula {bubble['formula']:.1%})"
        ),
    )
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=names)
    fig.update_xaxes(title="virtual time (µs)")
    return fig


def bubble_vs_microbatches(
    rows: list[dict], title: str = "Pipeline bubble against the number of micro-batches"
) -> go.Figure:
    """Measured bubble (markers) on the closed form (lines), one colour per schedule."""
    fig = go.Figure()
    # GPipe's and 1F1B's formulas are one formula: different dashes keep both lines in sight
    for colour, dash, name in zip(
        LABEL_COLORS, ("dash", "dot", "dashdot", "longdash") * 3, dict.fromkeys(row["schedule"] for row in rows)
    ):
        mine = [row for row in rows if row["schedule"] == name]
        label = name + (f" (v = {mine[0]['chunks']})" if mine[0]["chunks"] > 1 else "")
        m = [row["micro_batches"] for row in mine]
        fig.add_trace(
            go.Scatter(
                x=m,
                y=[row["formula"] for row in mine],
                mode="lines",
                name=f"{label}, formula",
                line=dict(color=colour, dash=dash, width=3),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=m,
                y=[row["measured"] for row in mine],
                mode="markers",
                name=f"{label}, measured",
                marker=dict(color=colour, size=10),
            )
        )
    fig.update_layout(title=title)
    fig.update_xaxes(title="micro-batches m")
    fig.update_yaxes(title="idle time / step time", tickformat=".0%", rangemode="tozero")
    return fig


def stage_memory(records: list[dict], title: str = "Peak activations each stage holds") -> go.Figure:
    """One group of bars per stage, one bar per schedule: the stage's peak activation bytes
    (the memory ledger's), labelled with how many micro-batches that is."""
    fig = go.Figure()
    for colour, record in zip(LABEL_COLORS, records):
        rows = record["memory"]
        label = record["schedule"] + (f" (v = {record['chunks']})" if record["chunks"] > 1 else "")
        fig.add_trace(
            go.Bar(
                name=label,
                x=[f"stage {row['stage']}" for row in rows],
                y=[row["activation_peak_nbytes"] / 2**10 for row in rows],
                marker_color=colour,
                text=[f"{row['in_flight']}" for row in rows],
                textposition="outside",
                hovertemplate=f"{label}<br>%{{x}}: %{{y:,.1f}} KiB, %{{text}} in flight<extra></extra>",
            )
        )
    fig.update_layout(title=title, barmode="group")
    fig.update_yaxes(title="peak activation memory (KiB)", rangemode="tozero")
    return fig
