"""Figures only the lessons use, and ``show``: inline in a notebook, an HTML file otherwise.

Run as a script (``python lessons/03_ring_allreduce.py``), a lesson writes each figure to
``$DLSYS_LESSON_OUT`` (default ``out/lessons``) as ``<name>.html``, with plotly.js once
beside them, so the files open offline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import log_axis

OUT_DIR_ENV = "DLSYS_LESSON_OUT"


def show(fig: go.Figure, name: str) -> Path | None:
    """Display ``fig`` in a Jupyter kernel; else write ``<out dir>/<name>.html`` and print its path."""
    if "ipykernel" in sys.modules:
        fig.show()
        return None
    out = Path(os.environ.get(OUT_DIR_ENV, "out/lessons"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.html"
    fig.write_html(path, include_plotlyjs="directory")
    print(f"[figure] {path}")
    return path


def lines(
    rows: list[dict],
    x: str,
    y: str,
    by: str,
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool = False,
    log_y: bool = False,
    markers: bool = True,
    x_unit: str | None = None,
    y_unit: str | None = None,
) -> go.Figure:
    """One line per value of ``rows[i][by]``, through (``x``, ``y``); rows are tidy dicts.
    A log axis gets ``style.log_axis`` ticks in its unit ("bytes", "seconds", "count", or
    None for plain decades)."""
    fig = go.Figure()
    for name in dict.fromkeys(r[by] for r in rows):
        mine = sorted((r for r in rows if r[by] == name), key=lambda r: r[x])
        fig.add_trace(
            go.Scatter(
                x=[r[x] for r in mine],
                y=[r[y] for r in mine],
                name=str(name),
                mode="lines+markers" if markers else "lines",
            )
        )
    fig.update_layout(title=title, height=460)
    fig.update_xaxes(**log_axis([r[x] for r in rows], x_unit) if log_x else {}, title=x_title)
    fig.update_yaxes(**log_axis([r[y] for r in rows], y_unit) if log_y else {}, title=y_title)
    return fig


def strong_scaling(rows: list[dict], title: str = "") -> go.Figure:
    """Left: one iteration's compute and communication time (ms) stacked, per worker count
    and link. Right: speedup t(1) / t(p) against the ideal p. Rows: ``link``, ``ranks``,
    ``compute_s``, ``communication_s``, ``speedup``."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time of one iteration", "speedup"))
    links = list(dict.fromkeys(r["link"] for r in rows))
    for i, link in enumerate(links):
        mine = sorted((r for r in rows if r["link"] == link), key=lambda r: r["ranks"])
        p = [f"{r['ranks']}" for r in mine]
        group = dict(offsetgroup=str(i), legendgroup=link)
        fig.add_trace(
            go.Bar(
                x=p,
                y=[r["compute_s"] * 1e3 for r in mine],
                name=f"{link}: compute",
                marker_color="#4c78a8",
                opacity=1 - 0.35 * i,
                **group,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=p,
                y=[r["communication_s"] * 1e3 for r in mine],
                name=f"{link}: communication",
                marker_color="#f58518",
                opacity=1 - 0.35 * i,
                base=[r["compute_s"] * 1e3 for r in mine],
                **group,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[r["ranks"] for r in mine],
                y=[r["speedup"] for r in mine],
                name=f"{link}: speedup",
                mode="lines+markers",
                legendgroup=link,
            ),
            row=1,
            col=2,
        )
    ideal = sorted({r["ranks"] for r in rows})
    fig.add_trace(
        go.Scatter(x=ideal, y=ideal, name="ideal (speedup = p)", mode="lines", line=dict(dash="dot", color="gray")),
        row=1,
        col=2,
    )
    fig.update_layout(title=title, height=460, barmode="group")
    fig.update_xaxes(title_text="workers p", type="category", row=1, col=1)
    fig.update_xaxes(**log_axis(ideal, "count", title_text="workers p"), row=1, col=2)
    fig.update_yaxes(title_text="ms", row=1, col=1)
    fig.update_yaxes(
        **log_axis(ideal + [r["speedup"] for r in rows], "count", title_text="speedup t(1) / t(p)"), row=1, col=2
    )
    return fig
