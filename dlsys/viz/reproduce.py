"""The reproduction suite's figures (``dlsys.course.reproduce``): one per claim, the
paper's figure beside dlsys's, drawn from the record's rows and its claim's ``Plot``."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go

from .style import DASHES, log_axis

PAPER_COLOUR = "#9c9c9c"
SYMBOLS = ("circle", "square", "diamond", "x", "triangle-up")
HEIGHT = 380


def claim_figure(record: dict) -> go.Figure:
    """Lines or grouped bars, one trace per series of ``record["rows"]``; a bar claim whose
    paper numbers are constants labelled like its bars gets the paper's bars first, grey."""
    plot, rows = record["plot"], record["rows"]
    fig = go.Figure()
    series = list(dict.fromkeys(r["series"] for r in rows))
    if plot["kind"] == "bar":
        paper = {k: v for k, v in record["published"].items() if isinstance(v, (int, float))}
        if paper and set(paper) <= {r["x"] for r in rows}:
            fig.add_trace(go.Bar(x=list(paper), y=list(paper.values()), name="paper", marker_color=PAPER_COLOUR))
        for name in series:
            points = [r for r in rows if r["series"] == name]
            fig.add_trace(go.Bar(x=[r["x"] for r in points], y=[r["y"] for r in points], name=name))
        fig.update_layout(barmode="group")
    else:
        # a dash and a marker each: the paper's series and dlsys's can lie on each other (a closed form and the run that meets it)
        for name, dash, symbol in zip(series, itertools.cycle(DASHES), itertools.cycle(SYMBOLS)):
            points = sorted((r for r in rows if r["series"] == name), key=lambda r: r["x"])
            fig.add_trace(
                go.Scatter(
                    x=[r["x"] for r in points],
                    y=[r["y"] for r in points],
                    name=name,
                    mode="lines+markers",
                    line=dict(dash=dash),
                    marker=dict(symbol=symbol, size=10),
                )
            )
    for update, key, title, log in (
        (fig.update_xaxes, "x", plot["x_title"], plot["log_x"]),
        (fig.update_yaxes, "y", plot["y_title"], plot["log_y"]),
    ):
        # a title with its unit in brackets gets decades; a count (ranks, batch) powers of two
        values = [r[key] for r in rows if isinstance(r[key], (int, float))]
        update(
            **log_axis(values, None if "(" in title else "count", title=title) if log and values else dict(title=title)
        )
    fig.update_layout(title=claim_title(record), height=HEIGHT)
    return fig


def claim_title(record: dict) -> str:
    """The claim and its verdict; a claim of several lines names the lines that set it (the
    worst ones), so the title never shows a summary that hides a line."""
    worst = [line["line"] for line in record.get("lines", []) if line["verdict"] == record["verdict"]]
    lines = f" ({', '.join(worst)})" if worst and len(worst) < len(record["lines"]) else ""
    return f"{record['claim']}: {record['verdict']}{lines}"
