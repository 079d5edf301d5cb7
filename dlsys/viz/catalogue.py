"""The concept map: what dlsys teaches, and where to see each concept."""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go
from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default

WHERE_COLORS = {"app": "#4c78a8", "lesson": "#f58518", "planned": "#d9d9d9"}


def _wrap(text: str, width: int) -> str:
    return "<br>".join(textwrap.wrap(text, width, break_long_words=False))


def concept_map(concepts: list[tuple[str, str, str]], title: str = "") -> go.Figure:
    """Treemap of (section, concept, where) rows: a box per section, a tile per concept,
    coloured by where to see it ("app", "lesson" or "planned")."""
    sections = list(dict.fromkeys(s for s, _, _ in concepts))
    ids = ["dlsys"] + sections + [f"{s}/{c}" for s, c, _ in concepts]
    # plotly shrinks a label until it fits its tile and never wraps it: long labels on one
    # line came out too small to read, so they are wrapped here
    labels = ["dlsys"] + [_wrap(s, 18) for s in sections] + [_wrap(c, 12) for _, c, _ in concepts]
    parents = [""] + ["dlsys"] * len(sections) + [s for s, _, _ in concepts]
    colors = ["white"] + ["#f4f4f4"] * len(sections) + [WHERE_COLORS[w] for _, _, w in concepts]
    hover = [""] + sections + [f"{c}: {w}" for _, c, w in concepts]
    fig = go.Figure(go.Treemap(ids=ids, labels=labels, parents=parents, marker=dict(colors=colors, pad=dict(t=44, l=4, r=4, b=4)),
                               hovertext=hover, hoverinfo="text", maxdepth=3, tiling=dict(pad=3),
                               root=dict(color="white"),
                               textfont=dict(size=18), pathbar=dict(visible=False)))
    for where, color in WHERE_COLORS.items():  # a legend for the tile colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=where,
                                 marker=dict(size=12, color=color, symbol="square")))
    # uniformtext: no tile's text shrinks below 15 px (plotly would shrink narrow tiles' text to
    # fit); section headers get two lines (pad t); the legend goes below, to leave the tiles
    # the full width
    fig.update_layout(title=title, height=680, margin=dict(l=0, r=0, t=24 if not title else 60, b=40),
                      uniformtext=dict(minsize=15, mode="show"),
                      legend=dict(orientation="h", x=0, xanchor="left", y=0, yanchor="top"),
                      xaxis=dict(visible=False), yaxis=dict(visible=False), plot_bgcolor="white")
    return fig
