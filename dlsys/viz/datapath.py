"""Figures of the real data path and of the emulation's scale: bytes moved through memory
by the ring all-reduce (copied vs lent sends), measured bandwidth against its bound, and
emulation wall time against ranks. Records come from ``dlsys.experiments.wallclock``; the traffic model
from ``dlsys.machine.datapath``."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from ..machine.datapath import memcpy_ratio_bound, ring_allreduce_traffic_bytes
from ..units import format_bytes, format_seconds, linear_byte_ticks
from .style import log_axis

BUFFER_NAMES = {"plain": "copied sends (plain memory)", "alloc": "lent sends (comm.alloc)"}
BUFFER_COLORS = {"plain": qualitative.D3[1], "alloc": qualitative.D3[0]}


def traffic_bars(p: int, nbytes: int) -> go.Figure:
    """Bytes one rank reads and writes in a ring all-reduce of nbytes on p ranks, by what
    they are for, copied vs lent sends, next to one memcpy of the same buffer."""
    steps, block = p - 1, nbytes / p
    parts = {  # (copied, lent, memcpy) per component, bytes
        "reduce-scatter: read mine + peer's, write sum": (3 * steps * block, 3 * steps * block, 0),
        "all-gather: read peer's block, write mine": (2 * steps * block, 2 * steps * block, 0),
        "copy every sent block into shared memory": (4 * steps * block, 0, 0),
        "memcpy: read n, write n": (0, 0, 2 * nbytes),
    }
    # the columns' names on two lines: beside the legend, one line each met its neighbour at 1280 px
    columns = [
        BUFFER_NAMES["plain"].replace(" (", "<br>("),
        BUFFER_NAMES["alloc"].replace(" (", "<br>("),
        "one memcpy<br>of the buffer",
    ]
    fig = go.Figure()
    for (name, values), color in zip(parts.items(), qualitative.Pastel):
        fig.add_trace(
            go.Bar(
                x=columns,
                y=list(values),
                name=name,
                marker_color=color,
                hovertext=[format_bytes(v) for v in values],
                hovertemplate="%{x}<br>" + name + ": %{hovertext}<extra></extra>",
            )
        )
    for column, lent in ((columns[0], False), (columns[1], True)):
        total = ring_allreduce_traffic_bytes(p, nbytes, lent)
        fig.add_annotation(x=column, y=total, text=format_bytes(total), showarrow=False, yshift=10)
    # ticks in one binary unit at any size, like the totals above the bars (MiB numbers read "35k" at 4 GiB)
    tickvals, ticktext = linear_byte_ticks(max(ring_allreduce_traffic_bytes(p, nbytes, False), 2 * nbytes))
    fig.update_yaxes(tickmode="array", tickvals=tickvals, ticktext=ticktext)
    fig.update_layout(
        barmode="stack",
        yaxis_title="read + written per rank",
        height=460,
        title=f"Memory traffic of a ring all-reduce of {format_bytes(nbytes)} on {p} ranks",
    )
    return fig


def ratio_bars(records: list[dict], speedup: float = 1.35) -> go.Figure:
    """Measured busbw / memcpy (``dlsys.experiments.wallclock.allreduce_bench`` records) for copied and lent
    sends at each size, with the memory-traffic bound of each as a dashed line."""
    fig = go.Figure()
    sizes = sorted({r["nbytes"] for r in records})
    labels = [format_bytes(n) for n in sizes]
    for buffers in ("plain", "alloc"):
        mine = {r["nbytes"]: r for r in records if r.get("buffers") == buffers}
        if not mine:
            continue
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[mine[n]["ratio_to_memcpy"] if n in mine else None for n in sizes],
                name=BUFFER_NAMES[buffers],
                marker_color=BUFFER_COLORS[buffers],
                customdata=[format_seconds(mine[n]["wall_time_s"]) if n in mine else "" for n in sizes],
                hovertemplate="%{x}: busbw/memcpy %{y:.2f} (all-reduce %{customdata})<extra>" + buffers + "</extra>",
            )
        )
        p = next(iter(mine.values()))["ranks"]
        if p >= 2:
            bound = memcpy_ratio_bound(p, buffers == "alloc", speedup)
            fig.add_hline(
                y=bound,
                line=dict(dash="dash", color=BUFFER_COLORS[buffers]),
                annotation_text=f"bound {bound:.2f} ({buffers})",
                annotation_position="top left",
            )
    fig.update_layout(
        barmode="group",
        xaxis_title="buffer size per rank",
        height=460,
        yaxis_title="busbw / memcpy bandwidth",
        title="Real all-reduce between processes vs memcpy",
    )
    return fig


def emulation_scaling(curve: list[dict]) -> go.Figure:
    """Emulation wall time against ranks (``dlsys.experiments.wallclock.emulate`` records), log-log, with
    the messages 2p(p-1) a ring all-reduce sends in the hover."""
    curve = sorted(curve, key=lambda r: r["ranks"])
    ranks = [r["ranks"] for r in curve]
    fig = go.Figure(
        go.Scatter(
            x=ranks,
            y=[r["wall_time_s"] for r in curve],
            mode="lines+markers",
            name="wall time",
            customdata=[[f"{r['messages']:,}", format_seconds(r["wall_time_s"] / r["messages"])] for r in curve],
            hovertemplate="%{x} ranks: %{y:.3g} s<br>%{customdata[0]} messages, %{customdata[1]} each<extra></extra>",
        )
    )
    fig.update_layout(title="Emulated ring all-reduce: wall time here vs ranks", height=460)
    fig.update_xaxes(**log_axis(ranks, "count", title="ranks"))
    fig.update_yaxes(**log_axis([r["wall_time_s"] for r in curve], "seconds", title="wall time"))
    return fig
