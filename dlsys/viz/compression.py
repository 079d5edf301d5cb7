"""Figures of gradient compression: a gradient before and after, the residual over steps,
accuracy against bytes (the Pareto front), the iteration split per link, bytes per layer.
Inputs are the rows of ``dlsys.experiments.compression``."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ..units import format_bytes, format_seconds, time_unit
from .style import log_axis

HEIGHT = 420
PARTS = (
    ("compute_s", "compute", "#4c78a8"),
    ("compression_s", "compression", "#f58518"),
    ("communication_s", "communication", "#54a24b"),
)


def histogram(once: dict, bins: int = 80) -> go.Figure:
    """The gradient's entries and what the receiver decodes, on one value axis (log counts:
    the many zeros of a sparse method and the few large entries both show)."""
    grad, decoded = once["gradient"], once["decoded"]
    edges = np.linspace(min(grad.min(), decoded.min()), max(grad.max(), decoded.max()), bins + 1)
    fig = go.Figure()
    for name, values, colour in (("gradient", grad, "#4c78a8"), ("decoded", decoded, "#e45756")):
        counts, _ = np.histogram(values, edges)
        fig.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, name=name, marker_color=colour, opacity=0.6))
    fig.update_layout(
        barmode="overlay",
        height=HEIGHT,
        bargap=0,
        title=f"{once['method']}: {format_bytes(once['dense_nbytes'])} -> "
        f"{format_bytes(once['encoded_nbytes'])} "
        f"({once['dense_nbytes'] / max(once['encoded_nbytes'], 1):.1f}x)",
    )
    fig.update_xaxes(title="entry value")
    counts = [c for t in fig.data for c in t.y if c > 0]
    fig.update_yaxes(**log_axis(counts, title="entries"))
    return fig


def residual(rows: list[dict], method: str) -> go.Figure:
    """Norms per step: the gradient, what was sent, and what was not (carried over as the
    residual with error feedback, lost without)."""
    fig = go.Figure()
    steps, carried = [r["step"] for r in rows], rows[0]["carried"]
    for key, name, colour in (
        ("gradient_norm", "gradient ||g||", "#4c78a8"),
        ("sent_norm", "sent ||D(C(g + e))||", "#54a24b"),
        ("error_norm", "residual ||e||" if carried else "not sent (lost)", "#e45756"),
    ):
        fig.add_trace(go.Scatter(x=steps, y=[r[key] for r in rows], name=name, mode="lines", line_color=colour))
    title = (
        "what one step does not send, the next one adds"
        if carried
        else "unbiased: no memory, what is not sent is noise that averages out"
    )
    fig.update_layout(title=f"{method}: {title}", height=HEIGHT)
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="L2 norm")
    return fig


def pareto(rows: list[dict]) -> go.Figure:
    """Test accuracy against bytes on the wire per step, one marker per method; the front
    joins the methods no other beats on both."""
    rows = sorted(rows, key=lambda r: r["bytes_per_step"])
    front, best = [], -1.0
    for r in rows:
        if r["test_accuracy"] > best:
            front.append(r)
            best = r["test_accuracy"]
    fig = go.Figure(
        go.Scatter(
            x=[r["bytes_per_step"] for r in front],
            y=[r["test_accuracy"] for r in front],
            mode="lines",
            line=dict(color="#bab0ac", dash="dot"),
            name="Pareto front",
        )
    )
    # methods at one point share one label (fp16 and int8 send as many bytes, reach the same
    # accuracy); neighbours' labels alternate above and below, so they do not run into each other
    labels = {}
    for r in rows:
        labels.setdefault((round(math.log2(r["bytes_per_step"]), 1), r["test_accuracy"]), []).append(r["method"])
    text = [" / ".join(labels[round(math.log2(r["bytes_per_step"]), 1), r["test_accuracy"]]) for r in rows]
    text = [t if i == 0 or t != text[i - 1] else "" for i, t in enumerate(text)]
    fig.add_trace(
        go.Scatter(
            x=[r["bytes_per_step"] for r in rows],
            y=[r["test_accuracy"] for r in rows],
            mode="markers+text",
            text=text,
            textposition=["top center" if i % 2 else "bottom center" for i in range(len(rows))],
            marker=dict(size=12, color="#4c78a8"),
            name="method",
            customdata=[[format_bytes(r["bytes_per_step"]), r["compression_ratio"]] for r in rows],
            hovertext=[r["method"] for r in rows],
            hovertemplate="%{hovertext}: %{y:.1%} accuracy, %{customdata[0]} per step, %{customdata[1]:.1f}x<extra></extra>",
        )
    )
    fig.update_layout(title="Accuracy against bytes on the wire (every rank, per step)", height=HEIGHT)
    fig.update_xaxes(title="bytes per step", **log_axis([r["bytes_per_step"] for r in rows], "bytes"))
    # the methods differ by a few points of accuracy: the axis shows that band (and says so),
    # with room above and below the points for their labels
    low, high = min(r["test_accuracy"] for r in rows), max(r["test_accuracy"] for r in rows)
    pad = max(high - low, 0.01) * 0.3
    fig.update_yaxes(title="test accuracy (zoomed)", tickformat=".1%", range=[low - pad, high + pad])
    return fig


def iteration_split(rows: list[dict]) -> go.Figure:
    """One iteration's virtual time as compute + compression + communication, per link and
    method (stacked): compression pays where the network is slow, and can lose where it is fast."""
    labels = [f"{r['link']}<br>{r['method']}" for r in rows]
    div, unit = time_unit(max(r["iteration_s"] for r in rows))
    fig = go.Figure()
    for key, name, colour in PARTS:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[r[key] / div for r in rows],
                name=name,
                marker_color=colour,
                hovertext=[format_seconds(r[key]) for r in rows],
            )
        )
    fig.update_layout(barmode="stack", height=HEIGHT, title="Where one iteration's time goes (worker 0)")
    fig.update_yaxes(title=f"virtual time per iteration ({unit})")
    return fig


def layer_bytes(table: dict) -> go.Figure:
    """Dense and encoded bytes of each layer's gradient (log scale)."""
    names = [r["layer"] for r in table["layers"]]
    fig = go.Figure()
    for key, name, colour in (
        ("dense_nbytes", "dense fp32", "#bab0ac"),
        ("encoded_nbytes", table["method"], "#4c78a8"),
    ):
        fig.add_trace(go.Bar(x=names, y=[r[key] for r in table["layers"]], name=name, marker_color=colour))
    values = [r[k] for r in table["layers"] for k in ("dense_nbytes", "encoded_nbytes")]
    fig.update_layout(
        barmode="group",
        height=HEIGHT,
        title=f"{table['model']}: {format_bytes(table['dense_nbytes'])} -> "
        f"{format_bytes(table['encoded_nbytes'])} per iteration ({table['ratio']:.1f}x)",
    )
    fig.update_yaxes(title="bytes", **log_axis(values, "bytes"))
    return fig
