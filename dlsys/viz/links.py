"""Which links are hot, and when: a heatmap of ``dlsys.comm.replay.link_load``'s rows
(bytes per link per time bin), one panel per series (a run with and without sharing, two
algorithms, ...)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default
from .units import format_bytes, format_rate, time_unit


def link_load_figure(rows: list[dict], title: str = "Link load", links: list[str] | None = None) -> go.Figure:
    """A heatmap per series: links down, time bins across, each cell the link's mean rate in
    the bin (bytes / bin width), or, when every row carries ``capacity_Bps``, its share of
    the link's capacity (%). ``rows``: ``link_load``'s {"link", "start_s", "end_s", "nbytes"}
    with an optional "series" (one panel each, in order of appearance) and "capacity_Bps";
    ``links``: the link names to draw, top down (default: every link in the rows, in
    ``link_id`` order)."""
    if not rows:
        raise ValueError("rows: no link carried a byte (link_load of a run with messages, recorded)")
    series = list(dict.fromkeys(r.get("series", "") for r in rows))
    if links is None:
        links = list(dict.fromkeys(r["link"] for r in sorted(rows, key=lambda r: (r.get("link_id", 0), r["link"]))))
    share = all("capacity_Bps" in r for r in rows)
    div, unit = time_unit(max(r["end_s"] for r in rows))
    fig = make_subplots(rows=len(series), cols=1, subplot_titles=series if len(series) > 1 else None,
                        shared_xaxes=True, vertical_spacing=0.1)
    for i, name in enumerate(series, 1):
        mine = [r for r in rows if r.get("series", "") == name and r["link"] in links]
        if not mine:
            continue
        width_s = mine[0]["end_s"] - mine[0]["start_s"]
        bins = round(max(r["end_s"] for r in mine) / width_s)
        z = [[0.0] * bins for _ in links]
        hover = [[""] * bins for _ in links]
        row_of = {link: k for k, link in enumerate(links)}
        for r in mine:
            b = min(round(r["start_s"] / width_s), bins - 1)
            rate = r["nbytes"] / (r["end_s"] - r["start_s"])
            z[row_of[r["link"]]][b] = 100 * rate / r["capacity_Bps"] if share else rate / 1e9
            hover[row_of[r["link"]]][b] = f"{r['link']}: {format_bytes(r['nbytes'])}, {format_rate(rate)}"
        fig.add_trace(go.Heatmap(z=z, x=[(b + 0.5) * width_s / div for b in range(bins)], y=links,
                                 text=hover, hoverinfo="text", coloraxis="coloraxis"), row=i, col=1)
        fig.update_yaxes(autorange="reversed", row=i, col=1)
    fig.update_layout(title=title, height=max(320, 60 + len(series) * (40 + 18 * len(links))),
                      coloraxis=dict(colorscale="Reds", cmin=0, cmax=100 if share else None,
                                     colorbar=dict(title="% of capacity" if share else "GB/s")))
    fig.update_xaxes(title_text=f"virtual time ({unit})", row=len(series), col=1)
    return fig
