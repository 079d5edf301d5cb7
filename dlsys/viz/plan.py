"""Figures of the planner (``dlsys.experiments.plan``): the fastest layouts' step time
stacked by component, and one layout's memory per rank by kind against the device."""

from __future__ import annotations

import plotly.graph_objects as go

from ..machine.memory import KINDS
from ..planner import COMPONENTS
from ..units import format_bytes, linear_byte_ticks
from .memory import HEIGHT, KIND_COLOURS, device_line
from .style import CONCEPT_COLOURS

# compute and the bubble as everywhere (style.CONCEPT_COLOURS); the communications in shades of the wire's
COMPONENT_COLOURS = {
    "compute": CONCEPT_COLOURS["compute"],
    "tp": "#7b4173",
    "pp": CONCEPT_COLOURS["wire"],
    "dp": "#dbb6d2",
    "ep": "#a55194",
    "bubble": CONCEPT_COLOURS["idle"],
    "optimizer": "#9c9ede",
}
COMPONENT_NAMES = {
    "compute": "compute",
    "tp": "TP (exposed)",
    "pp": "PP send/receive",
    "dp": "DP (exposed)",
    "ep": "EP all-to-all",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
}


def layout_label(row: dict) -> str:
    """'#1 tp4 pp16 dp16 Z1 b1': a ranked row's short name."""
    ep = f" ep{row['ep']}" if row.get("ep", 1) > 1 else ""
    return f"#{row['rank']} tp{row['tp']} pp{row['pp']} dp{row['dp']}{ep} Z{row['zero']} b{row['micro_batch']}"


def step_bars(rows: list[dict], title: str = "The fastest layouts: one step by component") -> go.Figure:
    """Rows of ``experiments.plan.ranked``: a stacked bar per layout, seconds by component."""
    names = [layout_label(row) for row in rows]
    fig = go.Figure()
    for c in COMPONENTS:
        fig.add_trace(
            go.Bar(
                name=COMPONENT_NAMES[c],
                x=names,
                y=[row[f"{c}_s"] for row in rows],
                marker_color=COMPONENT_COLOURS[c],
                hoverinfo="text",
                hovertext=[
                    f"{layout_label(row)}, recompute {row['recompute']}, m = {row['microbatches']}, "
                    f"v = {row['virtual_stages']}, SP {'on' if row['sequence_parallel'] else 'off'}, "
                    f"TP overlap {'on' if row['tp_overlap'] else 'off'}; {row['tflops']:.0f} TFLOP/s a GPU, "
                    f"MFU {row['mfu']:.0%}"
                    f"<br>{COMPONENT_NAMES[c]}: {row[f'{c}_s']:.3f} s of {row['step_s']:.3f} s"
                    for row in rows
                ],
            )
        )
    fig.update_layout(
        barmode="stack",
        title=title,
        height=HEIGHT,
        xaxis_title="layout (ranked by step time)",
        yaxis_title="seconds per step",
    )
    return fig


def memory_bar(record: dict, title: str | None = None) -> go.Figure:
    """One layout's (``experiments.plan.layout_record``) bytes per rank by kind, stacked,
    with a dashed line at the device's memory."""
    name = f"tp{record['tp']} pp{record['pp']} dp{record['dp']} ZeRO {record['zero']}"
    fig = go.Figure(
        [
            go.Bar(
                name=kind,
                x=[name],
                y=[record["bytes"][kind]],
                marker_color=KIND_COLOURS[kind],
                hovertext=[f"{kind}: {format_bytes(record['bytes'][kind])}"],
                hoverinfo="text",
            )
            for kind in KINDS
        ]
    )
    ticks, labels = linear_byte_ticks(max(record["memory_bytes"], record["device_bytes"]))
    device_line(fig, record["device_bytes"], record["device"])
    fig.update_layout(
        barmode="stack",
        height=HEIGHT,
        yaxis=dict(tickvals=ticks, ticktext=labels, title="bytes per GPU (pipeline stage 0)"),
        title=title or f"{record['model']}: one GPU's memory by kind",
    )
    return fig
