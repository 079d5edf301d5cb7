"""Figures of the large-batch study (``dlsys.experiments.large_batch``): accuracy against
batch per learning-rate rule, the schedules, per-layer ||w||/||g|| and trust ratios, the
1-D loss landscape between a small- and a large-batch solution, time to accuracy."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..units import time_unit
from .style import log_axis

HEIGHT = 440
COLOURS = {
    "fixed": "#9c9c9c",
    "sqrt": "#f58518",
    "linear": "#e45756",
    "linear + warm-up": "#4c78a8",
    "sgd + warm-up": "#4c78a8",
    "lars": "#54a24b",
    "lamb": "#b279a2",
}


def accuracy_vs_batch(
    sweep: list[dict], tolerance: float, title: str = "Test accuracy against global batch"
) -> go.Figure:
    """One line per learning-rate rule over the batch sweep, and the band within
    ``tolerance`` of the smallest batch's accuracy (the runs the rule "kept")."""
    fig = go.Figure()
    rules = list(dict.fromkeys(r["rule"] for r in sweep))
    batches = sorted({r["batch"] for r in sweep})
    base = next(r["test_accuracy"] for r in sweep if r["batch"] == batches[0])
    fig.add_hrect(
        y0=base - tolerance,
        y1=base,
        fillcolor="#4c78a8",
        opacity=0.12,
        line_width=0,
        annotation_text=f"within {tolerance:.0%} of batch {batches[0]}",
        annotation_position="bottom left",
    )
    for rule in rules:
        rows = sorted((r for r in sweep if r["rule"] == rule), key=lambda r: r["batch"])
        fig.add_trace(
            go.Scatter(
                x=[r["batch"] for r in rows],
                y=[r["test_accuracy"] for r in rows],
                name=rule,
                mode="lines+markers",
                line=dict(color=COLOURS.get(rule)),
                customdata=[r["lr"] for r in rows],
                hovertemplate="batch %{x}<br>lr %{customdata:.4g}<br>accuracy %{y:.2%}",
            )
        )
    fig.update_xaxes(**log_axis(batches, "count", title="global batch (samples per step, all workers)"))
    fig.update_layout(title=title, yaxis_title="test accuracy", yaxis_tickformat=".0%", height=HEIGHT)
    return fig


def lr_schedules(rows: list[dict], batch: int, title: str | None = None) -> go.Figure:
    """The learning rate each rule and optimizer applies, step by step, against epochs
    (log scale: the rules differ by factors, LARS's rate is per layer times its trust ratio)."""
    fig = go.Figure()
    for rule in dict.fromkeys(r["rule"] for r in rows):
        mine = [r for r in rows if r["rule"] == rule]
        fig.add_trace(
            go.Scatter(
                x=[r["epoch"] for r in mine],
                y=[r["lr"] for r in mine],
                name=rule,
                mode="lines",
                line=dict(color=COLOURS.get(rule), dash="dot" if rule in ("lars", "lamb") else None),
            )
        )
    fig.update_yaxes(**log_axis([r["lr"] for r in rows], title="learning rate (global)"))
    fig.update_layout(title=title or f"Learning-rate schedules at batch {batch}", xaxis_title="epoch", height=HEIGHT)
    return fig


def layer_ratio_heatmap(
    layers: list[dict], optimizer: str, value: str = "ratio", title: str | None = None
) -> go.Figure:
    """Rows: parameter tensors (input layer on top); columns: steps. ``value="ratio"``
    colours log10 ||w|| / ||g||; ``"trust"`` colours log10 of the trust ratio the optimizer
    applied. Zero-norm tensors (biases at initialisation) are blank."""
    rows = [r for r in layers if r["optimizer"] == optimizer]
    tensors = list(dict.fromkeys(r["tensor"] for r in rows))
    steps = sorted({r["step"] for r in rows})
    z = np.full((len(tensors), len(steps)), np.nan)
    for r in rows:
        v = r["w_norm"] / r["g_norm"] if value == "ratio" and r["g_norm"] > 0 else r["trust_ratio"]
        if value == "ratio" and r["g_norm"] == 0:
            v = np.nan
        z[tensors.index(r["tensor"]), steps.index(r["step"])] = np.log10(v) if v and v > 0 else np.nan
    label = "log10 ||w|| / ||g||" if value == "ratio" else "log10 trust ratio"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=steps,
            y=tensors,
            colorscale="Viridis",
            colorbar=dict(title=label),
            hovertemplate="%{y}, step %{x}<br>" + label + " = %{z:.2f}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    what = "||w|| / ||g|| per tensor" if value == "ratio" else "trust ratio per tensor"
    fig.update_layout(title=title or f"{optimizer}: {what}", xaxis_title="step", height=HEIGHT)
    return fig


def loss_landscape(landscape: dict, title: str = "Loss along the line between the two solutions") -> go.Figure:
    """Training and test loss at w(alpha) = (1 - alpha) w_small + alpha w_large; the two
    solutions are marked at alpha = 0 and 1, their sharpness in the legend."""
    fig = go.Figure()
    alpha = landscape["alpha"]
    for key, dash in (("train_loss", None), ("test_loss", "dash")):
        fig.add_trace(
            go.Scatter(
                x=alpha,
                y=landscape[key],
                name=key.replace("_", " "),
                mode="lines",
                line=dict(color="#4c78a8", dash=dash),
            )
        )
    for which, at, colour in (("small", 0.0, "#54a24b"), ("large", 1.0, "#e45756")):
        loss = np.interp(at, alpha, landscape["train_loss"])
        fig.add_trace(
            go.Scatter(
                x=[at],
                y=[loss],
                mode="markers",
                marker=dict(size=14, color=colour),
                name=f"{landscape[which]} (sharpness {landscape['sharpness'][which]:.3g})",
            )
        )
    fig.update_yaxes(**log_axis(landscape["train_loss"] + landscape["test_loss"], title="cross-entropy loss"))
    fig.update_layout(
        title=title, xaxis_title="alpha  (0: small-batch solution, 1: large-batch solution)", height=HEIGHT
    )
    return fig


def time_to_accuracy(rows: list[dict], target: float, title: str | None = None) -> go.Figure:
    """Virtual time to ``target`` test accuracy against workers, one line per batch per
    worker; runs that never reach it are marked with an x at the end of their run."""
    reached = [r["time_to_target_s"] for r in rows if r["time_to_target_s"] is not None]
    div, unit = time_unit(max(reached + [r["virtual_time_s"] for r in rows]))
    fig = go.Figure()
    for i, batch in enumerate(sorted({r["batch_per_worker"] for r in rows})):
        mine = sorted((r for r in rows if r["batch_per_worker"] == batch), key=lambda r: r["workers"])
        colour = ["#4c78a8", "#f58518", "#54a24b", "#b279a2"][i % 4]
        ok = [r for r in mine if r["time_to_target_s"] is not None]
        fig.add_trace(
            go.Scatter(
                x=[r["workers"] for r in ok],
                y=[r["time_to_target_s"] / div for r in ok],
                mode="lines+markers",
                name=f"batch {batch} per worker",
                line=dict(color=colour),
                customdata=[r["global_batch"] for r in ok],
                hovertemplate="%{x} workers (global batch %{customdata})<br>%{y:.3g} " + unit,
            )
        )
        never = [r for r in mine if r["time_to_target_s"] is None]
        if never:
            fig.add_trace(
                go.Scatter(
                    x=[r["workers"] for r in never],
                    y=[r["virtual_time_s"] / div for r in never],
                    mode="markers",
                    marker=dict(symbol="x", size=14, color=colour),
                    name=f"batch {batch} per worker: never reached",
                    customdata=[r["test_accuracy"] for r in never],
                    hovertemplate="%{x} workers: ended at %{customdata:.1%}",
                )
            )
    fig.update_xaxes(**log_axis([r["workers"] for r in rows], "count", title="workers"))
    fig.update_yaxes(
        **log_axis(
            [v / div for v in reached + [r["virtual_time_s"] for r in rows]],
            title=f"virtual time to {target:.0%} test accuracy ({unit})",
        )
    )
    fig.update_layout(title=title or f"Time to {target:.0%} test accuracy", height=HEIGHT)
    return fig


def accuracy_curves(rows: list[dict], name_key: str, title: str = "Test accuracy during training") -> go.Figure:
    """Test accuracy against epochs for each row of the study (``name_key``: "rule" or
    "optimizer"); the largest batch solid, smaller ones dotted."""
    fig = make_subplots()
    largest = max(r["batch"] for r in rows)
    for r in rows:
        name = f"{r[name_key]}, batch {r['batch']}"
        fig.add_trace(
            go.Scatter(
                x=[c["epoch"] for c in r["curve"]],
                y=[c["test_accuracy"] for c in r["curve"]],
                name=name,
                mode="lines+markers",
                line=dict(color=COLOURS.get(r[name_key]), dash=None if r["batch"] == largest else "dot"),
            )
        )
    fig.update_layout(
        title=title, xaxis_title="epoch", yaxis_title="test accuracy", yaxis_tickformat=".0%", height=HEIGHT
    )
    return fig
