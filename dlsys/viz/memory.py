"""Figures of memory per rank: a stacked bar of a rank's bytes by kind for each parallel
layout against a device's memory, ZeRO's Figure 1 against the closed form, measured numpy
bytes against ``Layout.bytes()``, and the bytes a rank sends per step. Inputs are the rows
of ``dlsys.experiments.memory`` (``page_layouts``, ``zero_figure1_rows``, the tables)."""

from __future__ import annotations

import plotly.graph_objects as go

from ..machine.memory import KINDS
from ..units import format_bytes, linear_byte_ticks
from .style import log_axis

KIND_COLOURS = {
    "parameters": "#4c78a8",
    "gradients": "#f58518",
    "optimizer": "#54a24b",
    "activations": "#e45756",
    "buffers": "#b279a2",
}
HEIGHT = 460


def device_line(fig: go.Figure, device_bytes: float, name: str) -> None:
    """The device's memory as a dashed line across a bytes chart, labelled ``name`` and its size."""
    fig.add_hline(
        y=device_bytes,
        line_dash="dash",
        line_color="#333",
        annotation_text=f"{name} {format_bytes(device_bytes)}",
        annotation_position="top left",
    )


def memory_bars(
    rows: list[dict], device_bytes: float | None = None, title: str = "One rank's memory by kind"
) -> go.Figure:
    """A stacked bar per layout (parameters, gradients, optimizer state, activations,
    buffers) with a dashed line at the device's memory: a bar above it does not fit."""
    names = [row["layout"] for row in rows]
    fig = go.Figure()
    for kind in KINDS:
        fig.add_trace(
            go.Bar(
                name=kind,
                x=names,
                y=[row["bytes"][kind] for row in rows],
                marker_color=KIND_COLOURS[kind],
                hovertext=[f"{row['describe']}<br>{kind}: {format_bytes(row['bytes'][kind])}" for row in rows],
                hoverinfo="text",
            )
        )
    top = max([row["total_bytes"] for row in rows] + [device_bytes or 0])
    ticks, labels = linear_byte_ticks(top)
    if device_bytes:
        device_line(fig, device_bytes, "device")
    fig.update_layout(
        barmode="stack",
        title=title,
        height=HEIGHT,
        yaxis=dict(tickvals=ticks, ticktext=labels, title="bytes per rank"),
        xaxis_title="layout",
    )
    return fig


def zero_figure1(
    rows: list[dict], title: str = "ZeRO Figure 1: model states per device, 7.5B parameters, N_d = 64"
) -> go.Figure:
    """The paper's bars beside the closed form's, per stage (GB = 1e9 bytes, as the paper)."""
    stages = [row["stage"] for row in rows]
    fig = go.Figure(
        [
            go.Bar(
                name="paper",
                x=stages,
                y=[row["paper_GB"] for row in rows],
                marker_color="#bab0ac",
                text=[f"{row['paper_GB']:g}" for row in rows],
                textposition="outside",
            ),
            go.Bar(
                name="dlsys.machine.memory",
                x=stages,
                y=[row["model_bytes"] / 1e9 for row in rows],
                marker_color="#4c78a8",
                text=[f"{row['model_bytes'] / 1e9:.1f}" for row in rows],
                textposition="outside",
            ),
        ]
    )
    fig.update_layout(
        barmode="group",
        title=title,
        height=HEIGHT,
        xaxis_title="ZeRO stage",
        yaxis=log_axis([row["paper_GB"] for row in rows], title="GB per device"),
    )
    return fig


def measured_vs_model(rows: list[dict], title: str = "Measured numpy bytes against the closed form") -> go.Figure:
    """Rows {label, kind, measured_bytes, model_bytes}: paired bars per label and kind."""
    labels = [f"{row['label']}: {row['kind']}" for row in rows]
    fig = go.Figure(
        [
            go.Bar(
                name="measured (ledger peak)",
                y=labels,
                x=[row["measured_bytes"] for row in rows],
                orientation="h",
                marker_color="#4c78a8",
            ),
            go.Bar(
                name="Layout(...).bytes()",
                y=labels,
                x=[row["model_bytes"] for row in rows],
                orientation="h",
                marker_color="#bab0ac",
            ),
        ]
    )
    ticks, text = linear_byte_ticks(max(max(row["measured_bytes"], row["model_bytes"]) for row in rows))
    fig.update_layout(
        barmode="group",
        title=title,
        height=160 + 34 * len(rows),
        xaxis=dict(tickvals=ticks, ticktext=text, title="bytes, rank 0"),
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def sent_bars(rows: list[dict], title: str = "Bytes one rank sends per step") -> go.Figure:
    """A bar per layout: the closed form's bytes a rank sends in one step."""
    names = [row["layout"] for row in rows]
    ticks, labels = linear_byte_ticks(max(row["sent_bytes"] for row in rows))
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[row["sent_bytes"] for row in rows],
            marker_color="#4c78a8",
            text=[format_bytes(row["sent_bytes"]) for row in rows],
            textposition="outside",
            hovertext=[row["describe"] for row in rows],
            hoverinfo="text+y",
        )
    )
    fig.update_layout(
        title=title,
        height=HEIGHT,
        xaxis_title="layout",
        yaxis=dict(tickvals=ticks, ticktext=labels, title="bytes sent per rank"),
    )
    return fig
