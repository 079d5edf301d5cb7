"""Figures of the network stack and IO (``dlsys.experiments.network_stack``): one message
animated through the stages of TCP and of RDMA on one clock, one message's time against
size per library with this machine's measurements on top, and a trainer waiting on its
data loader."""

from __future__ import annotations

import itertools
import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..units import format_seconds, time_unit
from . import controls, style  # noqa: F401 - style registers the "dlsys" template as plotly's default
from .style import CONCEPT_COLOURS, DASHES, log_axis

SIDE_COLOURS = {"sender": CONCEPT_COLOURS["send"], "wire": CONCEPT_COLOURS["wire"], "receiver": CONCEPT_COLOURS["recv"]}
LIBRARY_COLOURS = {
    "mpich": "#4c78a8",
    "openmpi": "#9ecae9",
    "taihulight-mpi": "#b279a2",
    "nccl-ring": "#54a24b",
    "nccl-tree": "#88d27a",
    "gloo": "#f58518",
    "baidu": "#e45756",
    "grpc-ps": "#b279a2",
    "zeromq-ps": "#9d755d",
}
MEASURED_SYMBOLS = {"pipe": "circle", "tcp-nodelay": "diamond", "tcp": "square", "shared-memory": "triangle-up"}
LANE_COLOURS = {"compute": CONCEPT_COLOURS["compute"], "io wait": "#e45756", "load": "#9d755d"}
ROW_PX = 34


def _short(stage: str) -> str:
    """A stage's name for a row label, its detail left to the hover: "latency: NICs, switches,
    propagation" -> "latency", "serialization at the link's bandwidth" -> "serialization", "copy user buffer -> kernel socket buffer" -> "copy user -> kernel"."""
    name = re.split(r":|,| \(| at ", stage)[0]
    return re.sub(r" (?:socket )?buffer\b", "", name).replace("->", "→")


def message_animation(rows: list[dict], frames: int = 60) -> go.Figure:
    """One panel per link: its stages top to bottom, each a bar from its start to its end,
    the row named by the stage and its time; a dot (the message) moves through them on one
    clock shared by the panels, so the faster link's message arrives (a green star) while the
    other is still on its way. The first panel's names stand at its left, the others' at their
    right, in the figure's margins, where they meet neither a bar nor another panel's names."""
    links = list(dict.fromkeys(r["link"] for r in rows))
    totals = {link: max(r["end_s"] for r in rows if r["link"] == link) for link in links}
    end_s = max(totals.values())
    times = np.linspace(0.0, end_s, frames + 1)
    fig = make_subplots(
        rows=1,
        cols=len(links),
        horizontal_spacing=0.12,
        subplot_titles=[f"<b>{link}</b><br>{format_seconds(totals[link])} in all" for link in links],
    )
    moving, frame_data, where = [], [[] for _ in times], [[] for _ in times]
    for col, link in enumerate(links, 1):
        mine = [r for r in rows if r["link"] == link]
        div, unit = time_unit(totals[link])
        # the time in the row's name, not beside its bar: a label after the last bars ran out of the panel
        names = [f"{i + 1}. {_short(r['stage'])}: {format_seconds(r['time_s'])}" for i, r in enumerate(mine)]
        for bar in _stage_bars(mine, names, div, legend=col == 1):
            fig.add_trace(bar, row=1, col=col)
        moving.append(len(fig.data))
        fig.add_trace(_dot(0.0, mine, names, div), row=1, col=col)
        for k, t in enumerate(times):
            frame_data[k].append(_dot(t, mine, names, div))
            stage = next((f"{i + 1}. {_short(r['stage'])}" for i, r in enumerate(mine) if t < r["end_s"]), None)
            where[k].append(f"{link}: {stage}" if stage else f"{link}: delivered")
        fig.update_yaxes(
            autorange="reversed",
            categoryorder="array",
            categoryarray=names,
            side="left" if col == 1 else "right",
            row=1,
            col=col,
        )
        fig.update_xaxes(title=f"time since<br>the send ({unit})", range=[0, totals[link] / div * 1.02], row=1, col=col)
    fig.frames = [go.Frame(name=str(k), data=data, traces=moving) for k, data in enumerate(frame_data)]
    # the app's player: its step keys stop where a message enters a stage, its toolbar says which
    fig.update_layout(
        meta=dict(
            stops=[k for k in range(len(times)) if k == 0 or where[k] != where[k - 1]],
            captions=[" · ".join(w) for w in where],
        )
    )
    div, unit = time_unit(end_s)
    fig.update_layout(
        barmode="overlay",
        height=160 + ROW_PX * max(sum(r["link"] == link for r in rows) for link in links),
        margin=dict(l=10, r=10, t=100, b=120),
        legend=dict(orientation="h", x=0, yref="container", y=1, yanchor="top"),  # above the panels' two-line titles
        updatemenus=[controls.buttons([controls.play_button(80)], x=0, y=-0.25)],
        sliders=[controls.time_slider(times, div, unit, "time since the send: ", x=0.2, len=0.8, y=-0.25)],
    )
    return fig


def _stage_bars(mine: list[dict], names: list[str], div: float, legend: bool) -> list[go.Bar]:
    """One link's stages as bars from start to end, a trace per side (sender, wire, receiver)."""
    bars = []
    for side, colour in SIDE_COLOURS.items():
        part = [(n, r) for n, r in zip(names, mine) if r["side"] == side]
        bars.append(
            go.Bar(
                y=[n for n, _ in part],
                x=[r["time_s"] / div for _, r in part],
                base=[r["start_s"] / div for _, r in part],
                orientation="h",
                marker_color=colour,
                name=side,
                legendgroup=side,
                showlegend=legend,
                hovertext=[f"{r['stage']}: {format_seconds(r['time_s'])}<br>{r['source']}" for _, r in part],
                hoverinfo="text",
            )
        )
    return bars


def _dot(t: float, mine: list[dict], names: list[str], div: float) -> go.Scatter:
    """The message at ``t`` on its link's clock: a black dot in the stage it is in, a green
    star once delivered (it stays there while the other link's message is on its way)."""
    total = max(r["end_s"] for r in mine)
    t = min(t, total)
    at = next((i for i, r in enumerate(mine) if t < r["end_s"]), len(mine) - 1)
    delivered = t >= total
    return go.Scatter(
        x=[t / div],
        y=[names[at]],
        mode="markers",
        showlegend=False,
        hoverinfo="skip",
        marker=dict(
            size=20 if delivered else 16,
            color="#2ca02c" if delivered else "#222",
            symbol="star" if delivered else "circle",
            line=dict(color="white", width=1),
        ),
    )


def library_times(rows: list[dict], measured: list[dict] | None = None) -> go.Figure:
    """One message's time against its size per library (lines), and the one-way times
    measured on this machine through local transports (markers, ``bench.stack_bench``)."""
    fig = go.Figure()
    # libraries on one link draw one line (their alpha and beta agree): a dash each keeps every one in sight
    for lib, dash in zip(dict.fromkeys(r["library"] for r in rows), itertools.cycle(DASHES)):
        mine = [r for r in rows if r["library"] == lib]
        fig.add_trace(
            go.Scatter(
                x=[r["nbytes"] for r in mine],
                y=[r["time_s"] for r in mine],
                mode="lines",
                name=f"{lib} ({mine[0]['link']})",
                line=dict(color=LIBRARY_COLOURS.get(lib), width=3, dash=dash),
            )
        )
    for transport in dict.fromkeys(r["transport"] for r in measured or []):
        mine = [r for r in measured or [] if r["transport"] == transport]
        fig.add_trace(
            go.Scatter(
                x=[r["nbytes"] for r in mine],
                y=[r["one_way_s"] for r in mine],
                mode="markers",
                name=f"measured here: {transport}",
                marker=dict(size=13, color="#222", symbol=MEASURED_SYMBOLS.get(transport, "x")),
            )
        )
    times = [r["time_s"] for r in rows] + [r["one_way_s"] for r in measured or []]
    sizes = [r["nbytes"] for r in rows]
    fig.update_xaxes(title="message size", **log_axis(sizes, "bytes"))
    fig.update_yaxes(title="one message, one way", **log_axis(times, "seconds"))
    fig.update_layout(height=520, title="Time of one message: the library presets (lines) and this machine (markers)")
    return fig


def loader_gantt(record: dict) -> go.Figure:
    """The trainer's lane (compute, and the IO waits in red) above one lane per loader
    worker (the batches it loads; with 0 workers the trainer loads them itself)."""
    rows = record["rows"]
    div, unit = time_unit(record["run_s"])
    lanes = ["trainer"] + [f"loader worker {k}" for k in range(record["workers"])]
    bars = {"compute": [], "io wait": [], "load": []}
    for r in rows:
        bars["compute"].append(("trainer", r["taken_s"], r["compute_end_s"], f"step {r['step']}: compute"))
        if r["io_wait_s"] > 0:
            bars["io wait"].append(
                (
                    "trainer",
                    r["taken_s"] - r["io_wait_s"],
                    r["taken_s"],
                    f"step {r['step']}: waits {format_seconds(r['io_wait_s'])} for its batch",
                )
            )
        if r["worker"] >= 0:
            bars["load"].append(
                (f"loader worker {r['worker']}", r["load_start_s"], r["ready_s"], f"batch {r['step']}: loading")
            )
    fig = go.Figure()
    for kind, items in bars.items():
        if items:
            fig.add_trace(
                go.Bar(
                    y=[lane for lane, *_ in items],
                    x=[(end - start) / div for _, start, end, _ in items],
                    base=[start / div for _, start, _, _ in items],
                    orientation="h",
                    name=kind,
                    marker=dict(color=LANE_COLOURS[kind], line=dict(color="white", width=1)),
                    hovertext=[text for *_, text in items],
                    hoverinfo="text",
                )
            )
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=lanes)
    fig.update_xaxes(title=f"virtual time ({unit})")
    fig.update_layout(
        barmode="overlay",
        height=170 + ROW_PX * len(lanes),
        title=f"{record['model']} on {record['node']}, data on {record['storage']}: "
        f"{record['workers']} loader worker(s), a queue of {record['prefetch']}",
    )
    return fig
