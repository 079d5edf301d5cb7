"""The concept map: what dlsys teaches, and where to see each concept."""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go

from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default

WHERE_COLORS = {"app": "#4c78a8", "lesson": "#f58518", "planned": "#d9d9d9"}
COLUMNS = 3
WRAP_CHARS = 30  # a concept's line: at 15 px (21 px in presenter mode), within a third of a 1280 px screen's column
LINE_PX = 24  # one line of text; presenter mode grows the figure's height with its fonts
FONT_PX = 15


def _columns(sections: dict[str, list[tuple[str, str]]]) -> list[list[str]]:
    """The sections, in order, cut into COLUMNS runs of about equal lines (a header, a
    line per concept line, a blank line between sections)."""
    lines = {
        s: 2 + sum(len(textwrap.wrap(c, WRAP_CHARS, break_long_words=False, break_on_hyphens=False)) for c, _ in cs)
        for s, cs in sections.items()
    }
    per_column = sum(lines.values()) / COLUMNS
    columns: list[list[str]] = [[]]
    used = 0.0
    for section, n in lines.items():
        # a new column once this one holds its share, unless it is the last
        if columns[-1] and used + n / 2 > per_column * len(columns) and len(columns) < COLUMNS:
            columns.append([])
        columns[-1].append(section)
        used += n
    return columns


def concept_map(concepts: list[tuple[str, str, str]], title: str = "") -> go.Figure:
    """A grid of (section, concept, where) rows: the sections in COLUMNS columns, each a bold
    header over its concepts, each concept a square coloured by where to see it ("app",
    "lesson" or "planned") and its name, wrapped onto lines of its own: every name is
    written whole and meets no other, at any width of a 1280 px screen's column and up
    (a treemap's tiles were too small for their names)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for section, concept, where in concepts:
        sections.setdefault(section, []).append((concept, where))
    headers: dict = {"x": [], "y": [], "text": []}
    tiles = {where: {"x": [], "y": [], "text": [], "hovertext": []} for where in WHERE_COLORS}
    depth = 0
    for col, names in enumerate(_columns(sections)):
        line = 0
        for section in names:
            headers["x"].append(col), headers["y"].append(line), headers["text"].append(f"<b>{section}</b>")
            line += 1
            for concept, where in sections[section]:
                wrapped = textwrap.wrap(concept, WRAP_CHARS, break_long_words=False, break_on_hyphens=False)
                tile = tiles[where]
                tile["x"].append(col + 0.03)
                tile["y"].append(line + (len(wrapped) - 1) / 2)  # the square beside the middle of the name
                tile["text"].append("<br>".join(wrapped))
                tile["hovertext"].append(f"{section}: {concept} ({where})")
                line += len(wrapped)
            line += 1
        depth = max(depth, line - 1)
    fig = go.Figure(
        go.Scatter(
            **headers,
            mode="text",
            textposition="middle right",
            hoverinfo="skip",
            showlegend=False,
            textfont=dict(size=FONT_PX + 1, color="#222"),
        )
    )
    for where, tile in ((w, t) for w, t in tiles.items() if t["x"]):
        fig.add_trace(
            go.Scatter(
                x=tile["x"],
                y=tile["y"],
                text=tile["text"],
                hovertext=tile["hovertext"],
                hoverinfo="text",
                mode="markers+text",
                textposition="middle right",
                name=where,
                textfont=dict(size=FONT_PX, color="#222"),
                cliponaxis=False,
                marker=dict(size=14, color=WHERE_COLORS[where], symbol="square"),
            )
        )
    # the legend goes below, to leave the columns the full width
    fig.update_layout(
        title=title,
        height=LINE_PX * (depth + 1) + (60 if title else 24) + 40,
        margin=dict(l=0, r=0, t=24 if not title else 60, b=40),
        legend=dict(orientation="h", x=0, xanchor="left", y=0, yanchor="top"),
        xaxis=dict(visible=False, range=[0, COLUMNS], fixedrange=True),
        yaxis=dict(visible=False, range=[depth + 0.5, -0.5], fixedrange=True),
        plot_bgcolor="white",
    )
    return fig
