"""Link load over time: which links of a fabric are hot, and when (issue 24).

Input: the tidy rows of ``dlsys.comm.replay.link_load(result, bins)``, one per (link, time
bin) that carried bytes: {"link", "link_id", "bin", "start_s", "end_s", "nbytes"}. Output:
a heatmap, links down the side, virtual time along the bottom, and the colour either the
link's utilisation (bytes carried / (capacity x bin width), 0 to 1, when the capacities
are given) or its rate in bytes per second.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import plotly.graph_objects as go

from .units import format_rate, format_seconds, time_unit
from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default

TOP_LINKS = 40  # more rows than this are unreadable on a projector: keep the busiest
ROW_PX = 22


def link_load_figure(rows: Sequence[Mapping], title: str = "Link load over time",
                     capacities_Bps: Mapping[int, float] | None = None, top: int = TOP_LINKS) -> go.Figure:
    """A heatmap of ``link_load`` rows: one row per link (the ``top`` links that carried
    the most bytes, in link id order), one column per time bin. With ``capacities_Bps``
    (link id -> capacity, e.g. ``{i: l.capacity_Bps for i, l in enumerate(fabric.links)}``)
    the colour is utilisation = nbytes / (capacity x bin width), from 0 (idle) to 1 (full);
    without, it is the rate nbytes / bin width."""
    if not (isinstance(top, int) and not isinstance(top, bool) and top >= 1):
        raise ValueError(f"top must be an integer >= 1, got {top!r}")
    fig = go.Figure()
    if not rows:
        fig.add_annotation(text="no bytes crossed any link", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        fig.update_layout(title=title, xaxis=dict(visible=False), yaxis=dict(visible=False), height=300)
        return fig
    width_s = rows[0]["end_s"] - rows[0]["start_s"]
    bins = 1 + max(row["bin"] for row in rows)
    total: dict[int, float] = defaultdict(float)
    names: dict[int, str] = {}
    for row in rows:
        total[row["link_id"]] += row["nbytes"]
        names[row["link_id"]] = row["link"]
    shown = sorted(sorted(total, key=lambda link: -total[link])[:top])
    index = {link: i for i, link in enumerate(shown)}
    z = [[0.0] * bins for _ in shown]
    for row in rows:
        if row["link_id"] in index:
            rate_Bps = row["nbytes"] / width_s
            z[index[row["link_id"]]][row["bin"]] = (rate_Bps / capacities_Bps[row["link_id"]]
                                                    if capacities_Bps is not None else rate_Bps)
    div, unit = time_unit(bins * width_s)
    x = [(b + 0.5) * width_s / div for b in range(bins)]
    if capacities_Bps is not None:
        colour = dict(zmin=0.0, zmax=1.0, colorscale="YlOrRd", colorbar=dict(title="utilisation"),
                      hovertemplate="%{y}<br>t = %{x:.3g} " + unit + "<br>utilisation %{z:.0%}<extra></extra>")
        text = None
    else:
        colour = dict(zmin=0.0, colorscale="YlOrRd", colorbar=dict(title="B/s"),
                      hovertemplate="%{y}<br>t = %{x:.3g} " + unit + "<br>%{text}<extra></extra>")
        text = [[format_rate(v) for v in line] for line in z]
    fig.add_trace(go.Heatmap(z=z, x=x, y=[names[link] for link in shown], text=text, **colour))
    links = f"the {len(shown)} busiest of {len(total)} links" if len(shown) < len(total) else f"{len(total)} links"
    fig.update_layout(title=title, height=160 + ROW_PX * len(shown),
                      xaxis_title=f"virtual time ({unit}), bins of {format_seconds(width_s)}",
                      yaxis=dict(title=links, autorange="reversed", type="category"))
    return fig
