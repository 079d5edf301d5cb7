"""Figures of one run's traffic: each rank's timeline with its messages, the bytes of every
link, the bytes through each rank. Inputs are ``dlsys.comm.Trace`` objects. The same run
animated: ``animation``; the ring all-reduce step by step: ``ring_steps``."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..units import format_bytes, format_seconds, linear_byte_ticks, time_unit
from .style import CONCEPT_COLOURS, KIND_COLORS  # importing style registers the "dlsys" template as plotly's default


def timeline(trace, title: str = "Timeline") -> go.Figure:
    """Gantt chart: each rank's compute, send (CPU overhead), wait and recv spans over
    virtual time, with every message drawn from (departure, sender) to (arrival, receiver)."""
    div, unit = time_unit(trace.makespan_s)
    fig = go.Figure()
    for kind, color in KIND_COLORS.items():
        spans = [s for s in trace.spans if s.kind == kind]
        fig.add_trace(
            go.Bar(
                name=kind,
                orientation="h",
                marker_color=color,
                y=[f"rank {s.rank}" for s in spans],
                base=[s.start_s / div for s in spans],
                x=[(s.end_s - s.start_s) / div for s in spans],
                hovertext=[f"rank {s.rank} {kind}: {s.label}<br>{format_seconds(s.end_s - s.start_s)}" for s in spans],
                hoverinfo="text",
            )
        )
    xs, ys = [], []
    for m in trace.messages:
        xs += [m.depart_s / div, m.arrive_s / div, None]
        ys += [f"rank {m.src}", f"rank {m.dst}", None]
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, mode="lines", name="message", hoverinfo="skip", line=dict(color="rgba(80,80,80,0.35)", width=1)
        )
    )
    fig.update_layout(
        barmode="overlay",
        title=title,
        height=120 + 28 * trace.world_size,
        xaxis_title=f"virtual time ({unit})",
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        margin=dict(l=10, r=10, t=60, b=40),
    )
    fig.update_yaxes(
        categoryorder="array", categoryarray=[f"rank {r}" for r in range(trace.world_size)], autorange="reversed"
    )
    return fig


def link_bytes(trace, title: str = "Bytes per link") -> go.Figure:
    """Heatmap of the bytes each directed link carried (row: sender, column: receiver)."""
    p = trace.world_size
    z = np.zeros((p, p))
    for (src, dst), n in trace.bytes_per_link().items():
        z[src, dst] = n
    text = [[format_bytes(v) if v else "" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z / 2**20,
            x=list(range(p)),
            y=list(range(p)),
            colorscale="Blues",
            text=text,
            texttemplate="%{text}" if p <= 16 else None,
            hovertemplate="rank %{y} → rank %{x}: %{text}<extra></extra>",
            colorbar=dict(title="MiB"),
        )
    )
    # cells of about 40 px hold a label like "112 MiB" at a readable size (plotly shrinks the text to fit)
    fig.update_layout(title=title, height=200 + (40 if p <= 16 else 22) * p, margin=dict(l=10, r=10, t=50, b=40))
    # Square cells without widening the axes past the ranks (a wide page stretched them to -7..22):
    # the plot area shrinks instead of the range growing.
    fig.update_xaxes(title="receiver rank", dtick=1, range=[-0.5, p - 0.5], constrain="domain")
    fig.update_yaxes(title="sender rank", dtick=1, autorange="reversed", scaleanchor="x", constrain="domain")
    return fig


def traffic_per_rank(
    panels: dict, names: dict | None = None, title: str = "Bytes through each rank's link"
) -> go.Figure:
    """Bytes each rank sent and received, one panel per trace: a server's link stands out.
    ``names`` maps a panel title to the rank names (default "rank r")."""
    names = names or {}
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), shared_yaxes=True)
    for col, (panel, trace) in enumerate(panels.items(), 1):
        x = names.get(panel, [f"rank {r}" for r in range(trace.world_size)])
        for label, values, color in (
            ("sent", trace.bytes_sent_per_rank(), CONCEPT_COLOURS["send"]),
            ("received", trace.bytes_received_per_rank(), CONCEPT_COLOURS["recv"]),
        ):
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=list(values),
                    name=label,
                    marker_color=color,
                    showlegend=col == 1,
                    hovertext=[format_bytes(v) for v in values],
                    hoverinfo="x+text",
                ),
                row=1,
                col=col,
            )
    fig.update_layout(barmode="stack", title=title, height=380, margin=dict(l=10, r=10, t=70, b=40))
    # ticks in one binary unit at any size (MiB numbers read "35k" past 10 GiB)
    top = max(max(np.add(t.bytes_sent_per_rank(), t.bytes_received_per_rank())) for t in panels.values())
    tickvals, ticktext = linear_byte_ticks(top)
    fig.update_yaxes(
        title_text="bytes sent + received", tickmode="array", tickvals=tickvals, ticktext=ticktext, row=1, col=1
    )
    return fig
