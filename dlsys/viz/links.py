"""Link load over time: which links of a fabric are hot, and when (issue 24).

Input: the tidy rows of ``dlsys.comm.replay.link_load(result, bins)``, one per (link, time
bin) that carried bytes: {"link", "link_id", "bin", "start_s", "end_s", "nbytes"}, and
optionally "series" (one panel each: a run with and without sharing, two algorithms) and
"capacity_Bps". Output: a heatmap per series, links down the side, virtual time along the
bottom, the colour either the link's utilisation (bytes carried / (capacity x bin width),
0 to 1, when the capacities are known) or its rate in bytes per second.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..units import format_rate, format_seconds, time_unit
from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default

TOP_LINKS = 40  # more rows than this are unreadable on a projector: keep the busiest
ROW_PX = 22


def link_load_figure(
    rows: Sequence[Mapping],
    title: str = "Link load over time",
    capacities_Bps: Mapping[int, float] | None = None,
    top: int = TOP_LINKS,
    links: Sequence[str] | None = None,
) -> go.Figure:
    """A heatmap per series of ``link_load`` rows: one row per link, one column per time
    bin. ``links``: the link names to draw, top down (default: the ``top`` links that
    carried the most bytes, in link id order). With capacities (``capacities_Bps``, link id
    -> capacity, or a "capacity_Bps" in every row) the colour is utilisation = nbytes /
    (capacity x bin width), from 0 (idle) to 1 (full); without, the rate nbytes / bin width."""
    if not (isinstance(top, int) and not isinstance(top, bool) and top >= 1):
        raise ValueError(f"top must be an integer >= 1, got {top!r}")
    if not rows:
        fig = go.Figure()
        fig.add_annotation(text="no bytes crossed any link", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_layout(title=title, xaxis=dict(visible=False), yaxis=dict(visible=False), height=300)
        return fig
    if capacities_Bps is None and all("capacity_Bps" in r for r in rows):
        capacities_Bps = {r["link_id"]: r["capacity_Bps"] for r in rows}
    total: dict[str, float] = defaultdict(float)
    ids: dict[str, int] = {}
    for row in rows:
        total[row["link"]] += row["nbytes"]
        ids[row["link"]] = row["link_id"]
    shown = list(links) if links is not None else sorted(sorted(total, key=lambda l: -total[l])[:top], key=ids.get)
    index = {link: i for i, link in enumerate(shown)}
    series = list(dict.fromkeys(r.get("series", "") for r in rows))
    width_s = rows[0]["end_s"] - rows[0]["start_s"]
    bins = 1 + max(row["bin"] for row in rows)
    div, unit = time_unit(bins * width_s)
    x = [(b + 0.5) * width_s / div for b in range(bins)]
    fig = make_subplots(
        rows=len(series),
        cols=1,
        subplot_titles=series if len(series) > 1 else None,
        shared_xaxes=True,
        vertical_spacing=0.08,
    )
    for panel, name in enumerate(series, 1):
        z = [[0.0] * bins for _ in shown]
        for row in rows:
            if row.get("series", "") == name and row["link"] in index:
                rate_Bps = row["nbytes"] / width_s
                z[index[row["link"]]][row["bin"]] = (
                    rate_Bps / capacities_Bps[row["link_id"]] if capacities_Bps is not None else rate_Bps
                )
        if capacities_Bps is not None:
            colour = dict(
                zmin=0.0,
                zmax=1.0,
                colorscale="YlOrRd",
                colorbar=dict(title="utilisation"),
                hovertemplate="%{y}<br>t = %{x:.3g} " + unit + "<br>utilisation %{z:.0%}<extra></extra>",
            )
        else:
            colour = dict(
                zmin=0.0,
                colorscale="YlOrRd",
                colorbar=dict(title="B/s"),
                text=[[format_rate(v) for v in line] for line in z],
                hovertemplate="%{y}<br>t = %{x:.3g} " + unit + "<br>%{text}<extra></extra>",
            )
        fig.add_trace(go.Heatmap(z=z, x=x, y=shown, showscale=panel == 1, **colour), row=panel, col=1)
        fig.update_yaxes(autorange="reversed", type="category", row=panel, col=1)
    described = f"the {len(shown)} busiest of {len(total)} links" if len(shown) < len(total) else f"{len(shown)} links"
    fig.update_yaxes(title_text=described, row=1, col=1)
    fig.update_xaxes(title_text=f"virtual time ({unit}), bins of {format_seconds(width_s)}", row=len(series), col=1)
    fig.update_layout(title=title, height=120 + len(series) * (40 + ROW_PX * len(shown)))
    return fig
