"""The concept map: what dlsys teaches, and where to see each concept."""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go

WHERE_COLORS = {"app": "#4c78a8", "lesson": "#f58518", "planned": "#d9d9d9"}


def concept_map(concepts: list[tuple[str, str, str]], title: str = "") -> go.Figure:
    """Treemap of (section, concept, where) rows: a box per section, a tile per concept,
    coloured by where to see it ("app", "lesson" or "planned")."""
    sections = list(dict.fromkeys(s for s, _, _ in concepts))
    ids = ["dlsys"] + sections + [f"{s}/{c}" for s, c, _ in concepts]
    # plotly shrinks a label until it fits its tile and never wraps it: long labels on one
    # line came out too small to read, so they are wrapped here
    labels = ["dlsys"] + sections + ["<br>".join(textwrap.wrap(c, 16)) for _, c, _ in concepts]
    parents = [""] + ["dlsys"] * len(sections) + [s for s, _, _ in concepts]
    colors = ["white"] + ["#f4f4f4"] * len(sections) + [WHERE_COLORS[w] for _, _, w in concepts]
    hover = [""] + sections + [f"{c}: {w}" for _, c, w in concepts]
    fig = go.Figure(go.Treemap(ids=ids, labels=labels, parents=parents, marker=dict(colors=colors),
                               hovertext=hover, hoverinfo="text", maxdepth=3, tiling=dict(pad=3),
                               textfont=dict(size=18), pathbar=dict(visible=False)))
    for where, color in WHERE_COLORS.items():  # a legend for the tile colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=where,
                                 marker=dict(size=12, color=color, symbol="square")))
    fig.update_layout(title=title, height=680, margin=dict(l=0, r=0, t=30, b=0),
                      xaxis=dict(visible=False), yaxis=dict(visible=False), plot_bgcolor="white")
    return fig
