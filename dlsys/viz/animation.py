"""The message animation: ranks as nodes and every message drawn for its whole life, one
panel per trace on one clock, played in the browser (frames, a slider, three speeds) and
stepped by the app's player (``layout.meta``: the frames a teacher steps to, a caption per
frame). Where the nodes stand: ``layouts``; what a message is and looks like: ``messages``."""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..units import format_bytes, format_seconds, time_unit
from . import controls
from .layouts import rank_positions
from .messages import describe, message_colours, message_lives, step_groups, step_key
from .style import KIND_COLORS  # importing style registers the "dlsys" template as plotly's default

ARC_BOW = 0.12  # how far a message's path bows to its right (fraction of the chord)
AT_NODE = 0.17  # where a message waits beside its sender or receiver (data units from the node)
BAR = 0.18  # length of a CPU-overhead progress bar (data units)
# A browser redraws a ring's frame (redraw=True, every moving trace) about three times a
# second on a classroom laptop (issue 28: 8 frames a step at 120 ms played the default
# all-reduce's 13.6 s in 39 s): 3 frames a step, each a third of STEP_MS, play in time.
FRAMES_PER_STEP = 3  # interpolated frames per step of the busiest panel, within FRAMES_RANGE
FRAMES_RANGE = (24, 90)
STEP_MS = 960  # one step of the busiest panel at 1x speed, the whole play within PLAY_MS_RANGE
PLAY_MS_RANGE = (7_200, 28_800)
SPEEDS = {"▶ Play": 1.0, "▶ ½ speed": 0.5, "▶ 2x speed": 2.0}
LEGEND_MAX = 6  # more groups (a training run's labels) would push the legend over the controls
BOTTOM = 150  # px under the nodes: buttons, slider, legend
# The nodes lie within [-1, 1]; a node's label takes two lines beside it. Above the top node's
# label the step caption has a band of its own, under the panel's title: in a 580 px player
# (app/charts.py) in presenter mode (fonts 1.4x) the label ends near 1.55 and the caption,
# centred on CAPTION_Y, spans about 0.16 either way.
Y_RANGE = (-1.6, 1.95)  # data units, bottom to top
CAPTION_Y = 1.77  # the step caption, in its band above the ring (data units)
LEGIBLE = dict(size=15, color="#222")  # node labels and captions: read from the back of a lecture room
# a block's number on its message: 13 px, so presenter mode's 1.4x (18.2 px) stays above its 18 px floor
BLOCK_FONT = dict(size=13, color="#111")


def _arc_point(a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Points at fractions ``f`` along the arc from a to b, bowed to the right of travel,
    so the two directions of a full-duplex link are drawn apart."""
    chord = b - a
    right = np.array([chord[1], -chord[0]])
    f = np.asarray(f)[:, None]
    return a + f * chord + ARC_BOW * np.sin(np.pi * f) * right


class _Panel:
    """One trace's moving parts at any virtual time t: nodes (outlined while their CPU
    pays a send or receive overhead), messages (beside the sender while it copies or its
    egress is busy, on the arc while on the wire, beside the receiver until its receive
    overhead ends) and progress bars of the overheads; and the caption."""

    def __init__(self, trace, pos: np.ndarray, names: list[str]):
        self.trace, self.pos, self.names = trace, pos, names
        self.lives = message_lives(trace)
        self.colours, self.legend = message_colours(trace.messages)
        _, self.steps = step_groups(trace.messages)
        self.n_steps = {k: len(s) for k, s in self.steps.items()}
        biggest = max((m.nbytes for m in trace.messages), default=0) or 1
        # area grows with bytes; the smallest message stays visible
        self.sizes = [12 + 18 * math.sqrt(m.nbytes / biggest) for m in trace.messages]
        self.busy = {
            kind: [
                [(s.start_s, s.end_s) for s in trace.spans if s.rank == r and s.kind == kind]
                for r in range(trace.world_size)
            ]
            for kind in ("send", "recv")
        }
        # the block a message carries, written on it: the same number as Ring step by step's columns
        self.blocks = [str(m.block) if m.block >= 0 else "" for m in trace.messages]
        self.hover = [
            f"{names[m.src]} → {names[m.dst]}<br>{describe(m, self.steps)}<br>{format_bytes(m.nbytes)}"
            for m in trace.messages
        ]
        self.ends = []  # where it waits beside its sender (arc fraction; beside the receiver: 1 minus it)
        for m in trace.messages:
            chord = float(np.hypot(*(pos[m.dst] - pos[m.src])))
            self.ends.append(min(0.35, AT_NODE / max(chord, 1e-9)))

    def nodes(self, t: float) -> dict:
        colour, width = [], []
        for r in range(len(self.pos)):
            kind = next((k for k in ("send", "recv") if any(a <= t < b for a, b in self.busy[k][r])), None)
            colour.append(KIND_COLORS[kind] if kind else "#444")
            width.append(5 if kind else 2)
        return dict(
            type="scatter",
            x=self.pos[:, 0].tolist(),
            y=self.pos[:, 1].tolist(),
            marker=dict(line=dict(color=colour, width=width)),
        )

    def alive(self, t: float) -> list[int]:
        """The messages whose life (send span start to recv span end) contains t."""
        return [i for i, life in enumerate(self.lives) if life[0] <= t <= life[5]]

    def moving(self, t: float) -> list[dict]:
        """The frame at t: nodes, messages, overhead bars (background, then progress), and
        the caption (a text trace: frames that change the layout cost twice the time)."""
        live = self.alive(t)
        xy, back, fill = [], ([], []), ([], [])
        for i in live:
            m, (s0, s1, depart, arrive, r0, r1), f0 = self.trace.messages[i], self.lives[i], self.ends[i]
            along = f0 + (1 - 2 * f0) * min(max((t - depart) / max(arrive - depart, 1e-30), 0.0), 1.0)
            at = _arc_point(self.pos[m.src], self.pos[m.dst], [along])[0]
            xy.append(at)
            progress = (
                (t - s0) / (s1 - s0)
                if s0 <= t < s1 and s1 > s0
                else (t - r0) / (r1 - r0)
                if r0 <= t <= r1 and r1 > r0
                else None
            )
            if progress is not None:
                x0, y = at[0] - BAR / 2, at[1] - 0.13
                back[0].extend([x0, x0 + BAR, None]), back[1].extend([y, y, None])
                fill[0].extend([x0, x0 + BAR * progress, None]), fill[1].extend([y, y, None])
        xy = np.array(xy).reshape(-1, 2)
        messages = dict(
            type="scatter",
            x=xy[:, 0].tolist(),
            y=xy[:, 1].tolist(),
            customdata=live,
            hovertext=[self.hover[i] for i in live],
            text=[self.blocks[i] for i in live],
            marker=dict(size=[self.sizes[i] for i in live], color=[self.colours[i] for i in live]),
        )
        return [
            self.nodes(t),
            messages,
            dict(type="scatter", x=back[0], y=back[1]),
            dict(type="scatter", x=fill[0], y=fill[1]),
            dict(type="scatter", x=[0.0], y=[CAPTION_Y], text=[f"<b>{self.caption(t)}</b>"]),
        ]

    def caption(self, t: float) -> str:
        """What the class sees now: the step most live messages belong to (ties: the earlier);
        once its last message is received, when it finished (panels share one clock, so the
        ring's panel says so while the server's link is still busy)."""
        live = self.alive(t)
        if not live:
            done = float(self.lives[:, 5].max(initial=0.0))
            return f"finished in {format_seconds(done)}" if self.trace.messages and t > done else ""
        messages = self.trace.messages
        counts: dict = {}
        for i in live:
            counts[step_key(messages[i])] = counts.get(step_key(messages[i]), 0) + 1
        shown = min((messages[i] for i in live), key=lambda m: (-counts[step_key(m)], m.depart_s))
        return describe(shown._replace(block=-1), self.steps)


def _node_label(name: str) -> str:
    """'worker 3 (rank 4)' on two lines, so labels stay short beside a node."""
    return name.replace(" (", "<br>(")


def _text_position(x: float, y: float) -> str:
    """A node's label outside the ring (radially), never over its arcs' ends."""
    if y > 0.5 or (abs(x) < 1e-9 and abs(y) < 1e-9):
        return "top center"
    if y < -0.5:
        return "bottom center"
    return "middle right" if x > 0 else "middle left"


def message_animation(
    panels: dict,
    layouts: dict | None = None,
    names: dict | None = None,
    frames: int | None = None,
    frame_ms: int | None = None,
    height: int = 620,
) -> go.Figure:
    """Ranks as nodes and every message drawn for its whole life: beside its sender while
    the sender's CPU copies it (a filling bar) or its egress is busy, along the arc from
    departure to arrival, beside its receiver until the receive overhead ends (a filling
    bar). A node is outlined orange while it pays a send overhead, green while a receive
    one. Messages are sized by bytes (area) and coloured by phase and step; a caption per
    panel names the step ("reduce-scatter step 3 of 7"); play at three speeds, pause, and
    a time slider.

    ``panels`` maps a title to a Trace; several panels share one clock (side by side).
    ``layouts`` maps a title to a layout of ``rank_positions`` ("circle", the default; "star":
    rank 0 in the centre) or to the ranks' positions (``algorithm_positions``);
    ``names`` maps a title to node names (default "rank r"; ``style.role_names`` for servers and workers).
    The nodes do not keep a circle's aspect: the ring stretches to the page's width.
    Static traces (links, legend) are drawn once; each frame holds the moving traces.
    ``frames`` defaults to FRAMES_PER_STEP per step of the busiest panel, within
    FRAMES_RANGE; ``frame_ms`` (at 1x) to what plays a step in STEP_MS.
    """
    built = _panels(panels, layouts or {}, names or {})
    steps = max(sum(panel.n_steps.values()) for panel in built.values())
    if frames is None:
        frames = min(FRAMES_RANGE[1], max(FRAMES_RANGE[0], FRAMES_PER_STEP * steps))
    if frame_ms is None:
        frame_ms = max(1, round(min(PLAY_MS_RANGE[1], max(PLAY_MS_RANGE[0], STEP_MS * steps)) / frames))
    end_s = (
        max(max(t.makespan_s, float(p.lives.max(initial=0.0))) for t, p in zip(panels.values(), built.values())) or 1e-9
    )
    div, unit = time_unit(end_s)
    times = np.linspace(0.0, end_s, frames + 1)
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), horizontal_spacing=0.04)
    moving, frame_data, legend = [], [[] for _ in times], {}
    for col, panel in enumerate(built.values(), 1):
        fig.add_trace(_links(panel), row=1, col=col)
        for k, t in enumerate(times):
            frame_data[k].extend(panel.moving(t))
        moving.extend(range(len(fig.data), len(fig.data) + 5))
        for trace in _styled(panel, frame_data[0][-5:]):
            fig.add_trace(trace, row=1, col=col)
        legend.update(panel.legend)
        fig.update_xaxes(visible=False, range=[-1.55, 1.55], fixedrange=True, row=1, col=col)
        fig.update_yaxes(visible=False, range=list(Y_RANGE), fixedrange=True, row=1, col=col)
    # with many labels (a training run's "pull reply clock 7 ...") the caption and the
    # hover name each message instead
    for colour, text in legend.values() if len(legend) <= LEGEND_MAX else ():
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=text, marker=dict(size=14, color=colour)))
    fig.update_layout(**_controls(times, div, unit, frame_ms, height))
    captions = [tuple(d["text"][0] for d in data[4::5]) for data in frame_data]
    fig.update_layout(meta=dict(stops=_stops(captions), captions=_toolbar_captions(captions, list(panels))))
    return _Animation(fig, [dict(name=str(k), data=data, traces=moving) for k, data in enumerate(frame_data)])


def _panels(panels: dict, layouts: dict, names: dict) -> dict:
    """Each trace's _Panel: its ranks where its layout puts them, named by ``names`` or "rank r"."""
    built = {}
    for title, trace in panels.items():
        shape = layouts.get(title, "circle")
        pos = rank_positions(trace.world_size, shape) if isinstance(shape, str) else np.asarray(shape, dtype=float)
        built[title] = _Panel(trace, pos, names.get(title, [f"rank {r}" for r in range(trace.world_size)]))
    return built


def _links(panel: _Panel) -> go.Scatter:
    """The static trace: every directed link the trace used, an arc bowed to its right."""
    arc_x, arc_y = [], []  # plain lists: plotly.js animation drops base64-encoded (numpy) static traces
    for a, b in sorted(panel.trace.bytes_per_link()):
        arc = _arc_point(panel.pos[a], panel.pos[b], np.linspace(0, 1, 16))
        arc_x += arc[:, 0].tolist() + [None]
        arc_y += arc[:, 1].tolist() + [None]
    return go.Scatter(
        x=arc_x, y=arc_y, mode="lines", hoverinfo="skip", showlegend=False, line=dict(color="#d0d0d0", width=1.5)
    )


def _styled(panel: _Panel, first: list[dict]) -> list[go.Scatter]:
    """The five moving traces at the first frame (nodes, messages, the overhead bars'
    background and progress, the caption) with what the frames do not change: labels,
    fonts, line styles."""
    nodes, messages, back, fill, caption = first
    return [
        go.Scatter(
            nodes,
            mode="markers+text",
            text=[_node_label(n) for n in panel.names],
            textposition=[_text_position(x, y) for x, y in panel.pos],
            textfont=LEGIBLE,
            hovertext=panel.names,
            hoverinfo="text",
            showlegend=False,
            cliponaxis=False,
            marker=dict(size=30, color="white", **nodes["marker"]),
        ),
        go.Scatter(
            messages,
            mode="markers+text",
            hoverinfo="text",
            showlegend=False,
            cliponaxis=False,
            textposition="middle center",
            textfont=BLOCK_FONT,
            marker=dict(line=dict(width=1, color="#222"), opacity=0.95, **messages["marker"]),
        ),
        *(
            go.Scatter(bar, mode="lines", hoverinfo="skip", showlegend=False, line=dict(color=colour, width=7))
            for bar, colour in ((back, "#cfcfcf"), (fill, "#222"))
        ),
        go.Scatter(
            caption,
            mode="text",
            hoverinfo="skip",
            showlegend=False,
            cliponaxis=False,
            textfont=dict(size=20, color="#222"),
        ),
    ]


def _controls(times, div: float, unit: str, frame_ms: int, height: int) -> dict:
    """The layout under the panels: a Play button per speed and Pause, the time slider, the
    legend below them."""
    play = [controls.play_button(round(frame_ms / speed), label) for label, speed in SPEEDS.items()]
    return dict(
        height=height,
        margin=dict(l=10, r=10, t=40, b=BOTTOM),
        plot_bgcolor="white",
        # under the buttons and the slider (paper units, from the plot area's height in px)
        legend=dict(orientation="h", x=0, y=-(BOTTOM - 40) / (height - 40 - BOTTOM), yanchor="top", font=dict(size=13)),
        updatemenus=[controls.buttons(play, x=0, y=-0.01, font=dict(size=14))],
        sliders=[
            controls.time_slider(
                times,
                div,
                unit,
                "virtual time: ",
                font=dict(size=15, color="#222"),
                x=0,
                len=1,
                y=-0.01,
                pad=dict(t=45, b=0),
            )
        ],
    )


def _toolbar_captions(captions: list[tuple], titles: list[str]) -> list[str]:
    """Each frame's caption in one line of plain text (layout.meta.captions: the app's player
    shows it beside its Play button): the panels' captions, each after its title when there
    are several; between two steps, the last step's."""
    out, last = [], ""
    for now in captions:
        texts = [re.sub(r"<[^>]+>", "", c) for c in now]
        if any(texts):
            last = " · ".join(t if len(texts) == 1 else f"{title}: {t}" for title, t in zip(titles, texts) if t)
        out.append(last)
    return out


def _stops(captions: list[tuple]) -> list[int]:
    """The frames a teacher steps to (layout.meta.stops, read by the app's player): the first,
    and each where a panel's caption turns to a new step; not a pause between steps, where
    no message is in flight and the caption is blank."""
    stops, last = [0], captions[0] if captions else ()
    for k, now in enumerate(captions):
        if now != last and any(c != "<b></b>" for c in now):
            stops.append(k)
            last = now
    return stops


class _Animation(go.Figure):
    """A figure whose frames stay the plain dicts they were built as until ``.frames`` is
    read. Plotly makes every trace of every frame an object (about 0.4 ms each, even
    unvalidated: half a second or more for the PS page's 1,100, which the page would wait
    for), while Streamlit and ``write_html`` only need the JSON, which ``to_dict`` writes
    straight from the dicts. The static figure is a validated go.Figure as usual."""

    def __init__(self, fig: go.Figure, frames: list[dict]):
        super().__init__(fig)
        self._plain_frames, self._frame_objects = frames, None

    @property
    def frames(self) -> tuple:
        if self._frame_objects is None:
            self._frame_objects = go.Figure(frames=self._plain_frames, _validate=False).frames
        return self._frame_objects

    def to_dict(self) -> dict:
        return {**super().to_dict(), "frames": self._plain_frames}
