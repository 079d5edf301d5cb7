"""Figures of one run: messages travelling between ranks, the timeline, bytes per link,
and the ring all-reduce step by step. Inputs are ``dlsys.comm.Trace`` objects and the
states of ``dlsys.experiments.ring_allreduce_steps``."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .units import format_bytes, format_seconds, time_unit

KIND_COLORS = {"compute": "#4c78a8", "send": "#f58518", "wait": "#d9d9d9", "recv": "#54a24b"}
STEP_COLORSCALE = "Turbo"
ARC_BOW = 0.12  # how far a message's path bows to its right (fraction of the chord)


def rank_positions(ranks: int, layout: str = "circle") -> np.ndarray:
    """(ranks, 2) coordinates: rank 0 at the top, the others clockwise on the unit circle;
    ``layout="star"`` puts rank 0 (a server) in the centre instead."""
    if layout not in ("circle", "star"):
        raise ValueError(f"layout must be 'circle' or 'star', got {layout!r}")
    on_circle = ranks - 1 if layout == "star" else ranks
    angles = math.pi / 2 - 2 * math.pi * np.arange(on_circle) / max(on_circle, 1)
    ring = np.column_stack([np.cos(angles), np.sin(angles)])
    return np.vstack([[0.0, 0.0], ring]) if layout == "star" else ring


def _arc_point(a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Points at fractions ``f`` along the arc from a to b, bowed to the right of travel,
    so the two directions of a full-duplex link are drawn apart."""
    chord = b - a
    right = np.array([chord[1], -chord[0]])
    f = np.asarray(f)[:, None]
    return a + f * chord + ARC_BOW * np.sin(np.pi * f) * right


def step_index(messages) -> tuple[list[int], int]:
    """Each message's step number and the number of steps; colours messages by step. A
    step is a collective's (phase, step) (trace.Message's fields; the blocks of one step
    share it), else the message's label; steps are numbered by first departure."""
    keys = [(m.phase, m.step) if m.phase else m.label for m in messages]
    order = {}
    for key, m in sorted(zip(keys, messages), key=lambda km: km[1].depart_s):
        order.setdefault(key, len(order))
    return [order[k] for k in keys], len(order)


def _in_flight(trace, pos, steps, n_steps, t, div, unit) -> dict:
    """The moving trace at time t: one marker per message in flight, coloured by step."""
    live = [(m, s) for m, s in zip(trace.messages, steps) if m.depart_s <= t <= m.arrive_s]
    xy = np.array([_arc_point(pos[m.src], pos[m.dst], [(t - m.depart_s) / max(m.arrive_s - m.depart_s, 1e-30)])[0]
                   for m, _ in live]).reshape(-1, 2)
    hover = [f"rank {m.src} → rank {m.dst}<br>{m.label or 'message'}<br>{format_bytes(m.nbytes)}<br>"
             f"{m.depart_s / div:.4g} → {m.arrive_s / div:.4g} {unit}" for m, _ in live]
    return dict(type="scatter", x=xy[:, 0].tolist(), y=xy[:, 1].tolist(), mode="markers", hovertext=hover,
                hoverinfo="text", showlegend=False,
                marker=dict(size=13, color=[s / max(n_steps - 1, 1) for _, s in live], coloraxis="coloraxis",
                            line=dict(width=1, color="black")))


def message_animation(panels: dict, layouts: dict | None = None, frames: int | None = None,
                      frame_ms: int = 80, height: int = 520) -> go.Figure:
    """Ranks as nodes, every message a marker travelling from sender to receiver over
    virtual time (departure to arrival), coloured by step; play/pause and a time slider.

    ``panels`` maps a title to a Trace; several panels share one clock (side by side).
    ``layouts`` maps a title to "circle" (default) or "star" (rank 0 in the centre).
    Static traces (links, ranks) are drawn once; each frame holds only the moving traces.
    ``frames`` defaults to 4 per step of the busiest panel, within 60..120.
    """
    layouts = layouts or {}
    if frames is None:
        frames = min(120, max(60, 4 * max(step_index(t.messages)[1] for t in panels.values())))
    end_s = max(t.makespan_s for t in panels.values()) or 1e-9
    div, unit = time_unit(end_s)
    times = np.linspace(0.0, end_s, frames + 1)
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), horizontal_spacing=0.03)
    moving, frame_data = [], [[] for _ in times]
    for col, (title, trace) in enumerate(panels.items(), 1):
        pos = rank_positions(trace.world_size, layouts.get(title, "circle"))
        steps, n_steps = step_index(trace.messages)
        arc_x, arc_y = [], []  # plain lists: plotly.js animation drops base64-encoded (numpy) static traces
        for a, b in sorted(trace.bytes_per_link()):
            arc = _arc_point(pos[a], pos[b], np.linspace(0, 1, 16))
            arc_x += arc[:, 0].tolist() + [None]
            arc_y += arc[:, 1].tolist() + [None]
        fig.add_trace(go.Scatter(x=arc_x, y=arc_y, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="#c8c8c8", width=1)), row=1, col=col)
        fig.add_trace(go.Scatter(x=pos[:, 0].tolist(), y=pos[:, 1].tolist(), mode="markers+text",
                                 text=[str(r) for r in range(len(pos))],
                                 hovertext=[f"rank {r}" for r in range(len(pos))], hoverinfo="text", showlegend=False,
                                 marker=dict(size=30, color="white", line=dict(width=2, color="#444"))),
                      row=1, col=col)
        moving.append(len(fig.data))
        for k, t in enumerate(times):
            frame_data[k].append(_in_flight(trace, pos, steps, n_steps, t, div, unit))
        fig.add_trace(go.Scatter(frame_data[0][-1]), row=1, col=col)
        axis = "" if col == 1 else col
        fig.update_xaxes(visible=False, range=[-1.35, 1.35], row=1, col=col)
        fig.update_yaxes(visible=False, range=[-1.35, 1.35], scaleanchor=f"x{axis}", row=1, col=col)
    fig.frames = [go.Frame(name=str(k), data=data, traces=moving) for k, data in enumerate(frame_data)]
    # redraw=True: Streamlit's plotly.js (4.2) drops the traces a frame does not name when redraw=False
    play = dict(frame=dict(duration=frame_ms, redraw=True), fromcurrent=True, transition=dict(duration=0))
    pause = dict(frame=dict(duration=0, redraw=True), mode="immediate", transition=dict(duration=0))
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white",
        coloraxis=dict(colorscale=STEP_COLORSCALE, cmin=0, cmax=1,
                       colorbar=dict(title="step", tickvals=[0, 1], ticktext=["first", "last"], len=0.6)),
        updatemenus=[dict(type="buttons", direction="left", x=0, y=0, xanchor="left", yanchor="top",
                          pad=dict(t=40), showactive=False,
                          buttons=[dict(label="▶ Play", method="animate", args=[None, play]),
                                   dict(label="❚❚ Pause", method="animate", args=[[None], pause])])],
        sliders=[dict(active=0, x=0.2, len=0.8, y=0, yanchor="top", pad=dict(t=30),
                      currentvalue=dict(prefix="virtual time: ", suffix=f" {unit}"),
                      steps=[dict(label=f"{t / div:.3g}", method="animate", args=[[str(k)], pause])
                             for k, t in enumerate(times)])])
    return fig


def timeline(trace, title: str = "Timeline") -> go.Figure:
    """Gantt chart: each rank's compute, send (CPU overhead), wait and recv spans over
    virtual time, with every message drawn from (departure, sender) to (arrival, receiver)."""
    div, unit = time_unit(trace.makespan_s)
    fig = go.Figure()
    for kind, color in KIND_COLORS.items():
        spans = [s for s in trace.spans if s.kind == kind]
        fig.add_trace(go.Bar(
            name=kind, orientation="h", marker_color=color, y=[f"rank {s.rank}" for s in spans],
            base=[s.start_s / div for s in spans], x=[(s.end_s - s.start_s) / div for s in spans],
            hovertext=[f"rank {s.rank} {kind}: {s.label}<br>{format_seconds(s.end_s - s.start_s)}" for s in spans],
            hoverinfo="text"))
    xs, ys = [], []
    for m in trace.messages:
        xs += [m.depart_s / div, m.arrive_s / div, None]
        ys += [f"rank {m.src}", f"rank {m.dst}", None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="message", hoverinfo="skip",
                             line=dict(color="rgba(80,80,80,0.35)", width=1)))
    fig.update_layout(barmode="overlay", title=title, height=120 + 28 * trace.world_size,
                      xaxis_title=f"virtual time ({unit})", legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      margin=dict(l=10, r=10, t=60, b=40))
    fig.update_yaxes(categoryorder="array", categoryarray=[f"rank {r}" for r in range(trace.world_size)],
                     autorange="reversed")
    return fig


def link_bytes(trace, title: str = "Bytes per link") -> go.Figure:
    """Heatmap of the bytes each directed link carried (row: sender, column: receiver)."""
    p = trace.world_size
    z = np.zeros((p, p))
    for (src, dst), n in trace.bytes_per_link().items():
        z[src, dst] = n
    text = [[format_bytes(v) if v else "" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(z=z / 2**20, x=list(range(p)), y=list(range(p)), colorscale="Blues",
                               text=text, texttemplate="%{text}" if p <= 16 else None,
                               hovertemplate="rank %{y} → rank %{x}: %{text}<extra></extra>",
                               colorbar=dict(title="MiB")))
    fig.update_layout(title=title, height=200 + 22 * p, margin=dict(l=10, r=10, t=50, b=40))
    fig.update_xaxes(title="receiver rank", dtick=1)
    fig.update_yaxes(title="sender rank", dtick=1, autorange="reversed", scaleanchor="x")
    return fig


def traffic_per_rank(panels: dict, names: dict | None = None, title: str = "Bytes through each rank's link") -> go.Figure:
    """Bytes each rank sent and received, one panel per trace: a server's link stands out.
    ``names`` maps a panel title to the rank names (default "rank r")."""
    names = names or {}
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), shared_yaxes=True)
    for col, (panel, trace) in enumerate(panels.items(), 1):
        x = names.get(panel, [f"rank {r}" for r in range(trace.world_size)])
        for label, values, color in (("sent", trace.bytes_sent_per_rank(), "#f58518"),
                                     ("received", trace.bytes_received_per_rank(), "#4c78a8")):
            fig.add_trace(go.Bar(x=x, y=[v / 2**20 for v in values], name=label, marker_color=color,
                                 showlegend=col == 1, hovertext=[format_bytes(v) for v in values],
                                 hoverinfo="x+text"), row=1, col=col)
    fig.update_layout(barmode="stack", title=title, height=380, margin=dict(l=10, r=10, t=70, b=40))
    fig.update_yaxes(title_text="MiB", row=1, col=1)
    return fig


def _contributors(mask: int, ranks: int) -> str:
    """Bitmask -> '0+1+2' (ranks whose input is summed in), runs of 3+ as '3–6', full: 'all'."""
    if mask == (1 << ranks) - 1:
        return "all"
    members = [r for r in range(ranks) if mask >> r & 1]
    runs, start = [], members[0]
    for a, b in zip(members, members[1:] + [None]):
        if b != a + 1:
            runs.append(str(start) if a == start else f"{start}+{a}" if a == start + 1 else f"{start}–{a}")
            start = b
    return "+".join(runs)


def ring_steps(states: list[dict], height: int | None = None) -> go.Figure:
    """The ring all-reduce step by step: rows are ranks, columns are chunks; a cell lists
    the ranks whose input it already sums (colour: how many), outlined where it changed in
    that step. A slider walks through reduce-scatter then all-gather."""
    ranks = len(states[0]["chunks"])
    chunk_axis, rank_axis = list(range(ranks)), list(range(ranks))

    def heat(state):
        z = [[bin(v).count("1") for v in row] for row in state["chunks"]]
        text = [[_contributors(v, ranks) for v in row] for row in state["chunks"]]
        return dict(type="heatmap", z=z, x=chunk_axis, y=rank_axis, text=text, zmin=1, zmax=ranks,
                    texttemplate="%{text}", textfont=dict(size=max(8, 17 - ranks // 2)), colorscale="YlGnBu",
                    colorbar=dict(title="inputs<br>summed"),
                    hovertemplate="rank %{y}, chunk %{x}: sum of ranks %{text}<extra></extra>")

    def moved(state):
        cells = state["moves"]
        return dict(type="scatter", x=[c for _, _, c in cells], y=[d for _, d, _ in cells], mode="markers",
                    hoverinfo="skip", showlegend=False,
                    marker=dict(symbol="square-open", size=max(18, 300 // ranks), color="#d62728", line=dict(width=3)))

    def caption(state):
        if state["phase"] == "start":
            return "start: rank r holds its own input x_r in every chunk (a cell lists the ranks summed in it)"
        verb = "adds" if state["phase"] == "reduce-scatter" else "copies"
        return f"{state['phase']} step {state['step']}: each rank {verb} the chunk from its left neighbour (outlined)"

    fig = go.Figure([go.Heatmap(heat(states[0])), go.Scatter(moved(states[0]))])
    fig.frames = [go.Frame(name=str(k), data=[heat(s), moved(s)], traces=[0, 1], layout=dict(title_text=caption(s)))
                  for k, s in enumerate(states)]
    still = dict(frame=dict(duration=0, redraw=True), mode="immediate", transition=dict(duration=0))
    labels = ["start"] + [f"{'RS' if s['phase'] == 'reduce-scatter' else 'AG'} {s['step']}" for s in states[1:]]
    fig.update_layout(
        title=dict(text=caption(states[0]), y=0.99, yanchor="top"), height=height or 280 + 30 * ranks,
        margin=dict(l=10, r=10, t=90, b=10),
        sliders=[dict(active=0, x=0.1, len=0.9, currentvalue=dict(prefix="after: "), pad=dict(t=40),
                      steps=[dict(label=lab, method="animate", args=[[str(k)], still]) for k, lab in enumerate(labels)])],
        updatemenus=[dict(type="buttons", x=0, y=0, xanchor="left", yanchor="top", pad=dict(t=45), showactive=False,
                          buttons=[dict(label="▶ Play", method="animate",
                                        args=[None, dict(frame=dict(duration=900, redraw=True), fromcurrent=True)])])])
    fig.update_xaxes(title="chunk", dtick=1, side="top")
    fig.update_yaxes(title="rank", dtick=1, autorange="reversed")
    return fig
