"""Figures of all-to-all and mixture-of-experts (records of dlsys.experiments.experts):
who sends which block at each step, time against block size with the closed forms,
tokens per expert with the capacity line, dropped tokens against the capacity factor."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..collectives.registry import REGISTRY
from .style import log_axis, rank_name

TOP_K_COLORS = {1: "#1F77B4", 2: "#FF7F0E"}  # Switch (k = 1), GShard (k = 2)


def alltoall_steps_figure(rows: list[dict], algorithm: str = "pairwise") -> go.Figure:
    """One panel per step: a cell (sender, receiver) lit where a message goes, its text the
    blocks it carries as "source→destination" (rows of ``experts.alltoall_steps``)."""
    steps = sorted({r["step"] for r in rows})
    ranks = 1 + max(max(r["src"], r["dst"]) for r in rows)
    fig = make_subplots(1, len(steps), subplot_titles=[f"step {s}" for s in steps], horizontal_spacing=0.03)
    names = [rank_name(r) for r in range(ranks)]
    for col, step in enumerate(steps, start=1):
        z = [[None] * ranks for _ in range(ranks)]
        text = [[""] * ranks for _ in range(ranks)]
        for r in rows:
            if r["step"] == step:
                z[r["src"]][r["dst"]] = len(r["blocks"])
                text[r["src"]][r["dst"]] = "<br>".join(f"{s}→{d}" for s, d in r["blocks"])
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=names,
                y=names,
                text=text,
                texttemplate="%{text}",
                showscale=False,
                colorscale=[[0, "#C6DBEF"], [1, REGISTRY["alltoall", algorithm].color]],
                zmin=0,
                hovertemplate="%{y} sends to %{x}: blocks %{text}<extra></extra>",
            ),
            1,
            col,
        )
        fig.update_xaxes(title_text="receiver", row=1, col=col)
    fig.update_yaxes(title_text="sender", autorange="reversed", row=1, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_yaxes(showticklabels=True, row=1, col=1)
    fig.update_layout(title=f"All-to-all, {algorithm}: blocks (source→destination) sent at each step")
    return fig


def alltoall_cost_figure(rows: list[dict]) -> go.Figure:
    """Emulated time (markers) and closed form (line) against the block size, per algorithm
    (rows of ``experts.alltoall_costs``)."""
    fig = go.Figure()
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        mine = [r for r in rows if r["algorithm"] == algorithm]
        color = REGISTRY["alltoall", algorithm].color
        x = [r["block_nbytes"] for r in mine]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[r["closed_form_s"] for r in mine],
                mode="lines",
                line=dict(color=color),
                name=f"{algorithm}, closed form",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[r["time_s"] for r in mine],
                mode="markers",
                marker=dict(color=color, size=9),
                name=f"{algorithm}, emulated",
            )
        )
    ranks = rows[0]["ranks"]
    fig.update_layout(
        title=f"All-to-all on {ranks} ranks: time against the block each rank sends each other rank",
        xaxis=log_axis([r["block_nbytes"] for r in rows], "bytes", title="block (bytes)"),
        yaxis=log_axis([r["time_s"] for r in rows], "seconds", title="time"),
    )
    return fig


def expert_load_figure(rows: list[dict], top_k: int = 1, capacity_factor: float = 1.0) -> go.Figure:
    """Tokens routed to each expert (kept and dropped) with the capacity line (rows of
    ``experts.expert_load``)."""
    mine = [r for r in rows if r["top_k"] == top_k and r["capacity_factor"] == capacity_factor]
    experts = [f"expert {r['expert']}" for r in mine]
    fig = go.Figure(
        [
            go.Bar(
                x=experts, y=[r["kept"] for r in mine], name="kept", marker_color=TOP_K_COLORS.get(top_k, "#1F77B4")
            ),
            go.Bar(x=experts, y=[r["wanted"] - r["kept"] for r in mine], name="dropped", marker_color="#D62728"),
        ]
    )
    capacity = mine[0]["capacity"]
    fig.add_hline(
        y=capacity,
        line_dash="dash",
        line_color="#444",
        annotation_text=f"capacity {capacity} (all ranks)",
        annotation_position="top left",
    )
    dropped = mine[0]["dropped"] / mine[0]["choices"]
    fig.update_layout(
        barmode="stack",
        yaxis_title="tokens",
        title=f"Tokens per expert, top-{top_k}, capacity factor {capacity_factor}: {dropped:.1%} of choices dropped",
    )
    return fig


def dropped_figure(rows: list[dict]) -> go.Figure:
    """Fraction of choices dropped against the capacity factor, per top-k (rows of
    ``experts.dropped_fraction``)."""
    fig = go.Figure()
    for k in sorted({r["top_k"] for r in rows}):
        mine = sorted((r for r in rows if r["top_k"] == k), key=lambda r: r["capacity_factor"])
        fig.add_trace(
            go.Scatter(
                x=[r["capacity_factor"] for r in mine],
                y=[r["dropped_fraction"] for r in mine],
                mode="lines+markers",
                name=f"top-{k}",
                line=dict(color=TOP_K_COLORS.get(k)),
            )
        )
    fig.update_layout(
        title="Dropped tokens against the capacity factor",
        xaxis_title="capacity factor",
        yaxis=dict(title="choices dropped", tickformat=".0%"),
    )
    return fig
