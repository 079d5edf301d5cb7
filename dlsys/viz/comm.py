"""Figures of one run: messages travelling between ranks, the timeline, bytes per link,
and the ring all-reduce step by step. Inputs are ``dlsys.comm.Trace`` objects and the
states of ``dlsys.experiments.ring_allreduce_steps``."""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from ..collectives import REGISTRY
from ..units import format_bytes, format_seconds, linear_byte_ticks, time_unit
from .style import CONCEPT_COLOURS  # importing style registers the "dlsys" template as plotly's default

KIND_COLORS = {
    kind: CONCEPT_COLOURS[concept]
    for kind, concept in (("compute", "compute"), ("send", "send"), ("wait", "idle"), ("recv", "recv"))
}
# a phase's steps shade one sequential scale light -> dark; messages outside a collective
# (a parameter server's push and pull) take one solid colour per label. Neither uses the
# blue, orange or green that outline a computing, sending or receiving node (style.CONCEPT_COLOURS).
PHASE_SCALES = [
    "Purp",
    "RdPu",
    "Burg",
    "Magenta",
    "Reds",
]  # saturated even at their light ends: a projector washes pale ones out
LABEL_COLORS = ["#7570b3", "#e7298a", "#a6761d", "#e6ab02", "#666666", "#1b9e77", "#d95f02", "#66a61e"]
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


LAYOUTS = ("circle", "star", "tree", "hypercube", "two-level")
# hypercube: dimension d moves a rank along HYPERCUBE_AXES[d] (a square, then a cube drawn in
# perspective, then two cubes side by side...): partners of a step lie on parallel lines
HYPERCUBE_AXES = [(1.0, 0.0), (0.0, 1.0), (0.45, 0.3), (2.0, 0.0), (0.0, 2.0), (4.2, 0.0)]


def rank_positions(ranks: int, layout: str = "circle", groups: list | None = None) -> np.ndarray:
    """(ranks, 2) coordinates within [-1, 1] of the ranks, drawn in the shape of an algorithm
    (each registry algorithm's ``shape``):
    - "circle": rank 0 at the top, the others clockwise (a ring);
    - "star": rank 0 (a server) in the centre, the others on the circle;
    - "tree": MPICH's binomial tree under rank 0 (v's parent is v minus its lowest set bit),
      rank 0 at the top, a level per hop;
    - "hypercube": rank v at the sum of HYPERCUBE_AXES[d] over its set bits d, so recursive
      doubling's partners (v and v XOR 2^d) are joined by parallel lines per step;
    - "two-level": ``groups`` (the supernodes, lists of ranks, leaders first) side by side,
      each a binomial tree under its leader, the leaders on an arc above them.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "tree":
        return _fit(_tree(list(range(ranks))), ranks)
    if layout == "hypercube":
        dims = max((ranks - 1).bit_length(), 1)
        if dims > len(HYPERCUBE_AXES):  # past 64 ranks no drawing of a hypercube is legible: a ring
            return rank_positions(ranks)
        axes = np.array(HYPERCUBE_AXES[:dims])
        return _fit(np.array([[(v >> d) & 1 for d in range(dims)] for v in range(ranks)], dtype=float) @ axes, ranks)
    if layout == "two-level":
        groups = groups or [list(range(ranks))]
        if sorted(r for g in groups for r in g) != list(range(ranks)):
            raise ValueError(f"groups must hold every rank 0..{ranks - 1} once, got {groups}")
        xy = np.zeros((ranks, 2))
        for g, members in enumerate(groups):
            tree = _tree(members)  # the supernode's own binomial tree, within [0, 1] x [-depth, 0]
            tree[:, 0] = ((tree[:, 0] - 0.5) * 0.8 + g + 0.5) / len(groups)  # its own band, a gap between
            lift = 1.2 + 0.5 * math.sin(math.pi * (g + 0.5) / len(groups))  # the leaders' arc
            xy[members] = tree + [0.0, lift]
        return _fit(xy, ranks)
    on_circle = ranks - 1 if layout == "star" else ranks
    angles = math.pi / 2 - 2 * math.pi * np.arange(on_circle) / max(on_circle, 1)
    ring = np.column_stack([np.cos(angles), np.sin(angles)])
    return np.vstack([[0.0, 0.0], ring]) if layout == "star" else ring


def _tree(members: list[int]) -> np.ndarray:
    """(len(members), 2) coordinates of MPICH's binomial tree over ``members`` (relative
    rank v = its index; parent v - lowest bit of v): y = -depth (the number of set bits),
    x in [0, 1] with each subtree over its own span, so no two edges cross."""
    p = len(members)
    # children of v: v + k for the powers of two k below v's lowest bit (the root: below p)
    kids = [
        [v + k for k in (1 << b for b in range(p.bit_length())) if v + k < p and (v == 0 or k < v & -v)]
        for v in range(p)
    ]
    leaves = sum(not k for k in kids)
    slots = iter(np.linspace(0.0, 1.0, leaves) if leaves > 1 else [0.5])
    xy = np.zeros((p, 2))

    def place(v: int) -> float:  # leaves left to right, smallest subtree first; a parent over its children
        xy[v] = (float(np.mean([place(c) for c in kids[v]])) if kids[v] else next(slots), -bin(v).count("1"))
        return xy[v, 0]

    place(0)
    return xy


def _fit(xy: np.ndarray, ranks: int) -> np.ndarray:
    """``xy`` scaled into [-1, 1] on both axes (y up: the first rank at the top)."""
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    out = 2 * (xy - lo) / span - 1
    out[:, hi - lo == 0] = 0.0
    return out.reshape(ranks, 2)


def algorithm_positions(collective: str, algorithm: str, ranks: int, groups: list | None = None) -> np.ndarray:
    """The ranks drawn in the shape of the algorithm that runs (its registry ``shape``; where
    p is not a power of two and it has a ``fallback``, the fallback's): a binomial tree,
    a hypercube, supernodes (``groups``, as the run's network cut them) or a ring."""
    entry = REGISTRY[collective, algorithm]
    if entry.fallback and ranks & (ranks - 1):
        entry = REGISTRY[collective, entry.fallback]
    return rank_positions(ranks, entry.shape, groups)


def _arc_point(a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Points at fractions ``f`` along the arc from a to b, bowed to the right of travel,
    so the two directions of a full-duplex link are drawn apart."""
    chord = b - a
    right = np.array([chord[1], -chord[0]])
    f = np.asarray(f)[:, None]
    return a + f * chord + ARC_BOW * np.sin(np.pi * f) * right


def message_lives(trace) -> np.ndarray:
    """(messages, 6) virtual times of each message's life: its sender's send span (start,
    end), departure, arrival, its receiver's recv span (start, end).

    A trace does not link spans to messages, but the clock's rules do: a rank's sends
    depart in program order, each after its own send span, and a rank's receives are
    listed in program order, each recv span starting at or after its arrival. A message
    whose span was not recorded (zero overhead, or cut off by ``first_seconds``) gets a
    zero-length phase there."""
    lives = np.array(
        [[m.depart_s, m.depart_s, m.depart_s, m.arrive_s, m.arrive_s, m.arrive_s] for m in trace.messages], dtype=float
    ).reshape(-1, 6)
    spans = {
        (r, kind): sorted((s for s in trace.spans if s.rank == r and s.kind == kind), key=lambda s: s.start_s)
        for r in range(trace.world_size)
        for kind in ("send", "recv")
    }
    sent = sorted(range(len(trace.messages)), key=lambda i: trace.messages[i].depart_s)
    for side, order, fits, cols in (
        ("send", sent, lambda s, m: s.end_s <= m.depart_s, (0, 1)),
        ("recv", range(len(trace.messages)), lambda s, m: s.start_s >= m.arrive_s, (4, 5)),
    ):
        nxt = {}
        for i in order:
            m = trace.messages[i]
            rank = m.src if side == "send" else m.dst
            queue, k = spans[rank, side], nxt.get(rank, 0)
            if k < len(queue) and fits(queue[k], m):
                lives[i, cols[0]], lives[i, cols[1]] = queue[k].start_s, queue[k].end_s
                nxt[rank] = k + 1
    return lives


def _groups(messages) -> tuple[list, dict]:
    """Each message's colour group and, per group, its steps in the order they start: a
    collective's phase (its steps in ``Message.step``), else the message's label; groups in
    order of first departure. Steps are counted in time, not by their number: a binomial
    broadcast numbers its steps by the subtree's bit, largest (first) down, yet its first
    step is step 1 to the class."""
    keys = [m.phase or m.label or "message" for m in messages]
    steps: dict = {}
    for key, m in sorted(zip(keys, messages), key=lambda km: km[1].depart_s):
        order = steps.setdefault(key, [])
        step = m.step if m.phase else -1
        if step not in order:
            order.append(step)
    return keys, steps


def _colours(messages) -> tuple[list[str], dict]:
    """A colour per message (phase and step: a phase's scale, light to dark by step; else
    one colour per label) and a legend: group -> (colour, description)."""
    keys, steps = _groups(messages)
    phased = [k for k in steps if steps[k] != [-1]]
    shade = {}
    for g, key in enumerate(phased):
        n = len(steps[key])
        shades = sample_colorscale(
            PHASE_SCALES[g % len(PHASE_SCALES)], [0.45 + 0.55 * i / max(n - 1, 1) for i in range(n)]
        )
        shade.update({(key, s): c for s, c in zip(steps[key], shades)})
    solid = {k: LABEL_COLORS[i % len(LABEL_COLORS)] for i, k in enumerate(k for k in steps if k not in phased)}
    colours = [shade[key, m.step] if (key, m.step) in shade else solid[key] for key, m in zip(keys, messages)]
    legend = {
        k: (shade[k, steps[k][len(steps[k]) // 2]], f"{k}: steps 1 → {len(steps[k])}, light → dark") for k in phased
    }
    legend.update({k: (c, k) for k, c in solid.items()})
    return colours, legend


def _step_key(m):
    """The step a message belongs to: a collective's (phase, step), else its label."""
    return (m.phase, m.step) if m.phase else m.label


def _describe(m, steps: dict) -> str:
    """A message's step in words, from its structured fields: 'reduce-scatter step 3 of 7'
    (counted 1, 2, ... in the order the phase's steps start, as said in class; ``steps``
    from ``_groups``), else its label."""
    if not m.phase:
        return m.label or "message"
    block = f", block {m.block}" if m.block >= 0 else ""
    return f"{m.phase} step {steps[m.phase].index(m.step) + 1} of {len(steps[m.phase])}{block}"


class _Panel:
    """One trace's moving parts at any virtual time t: nodes (outlined while their CPU
    pays a send or receive overhead), messages (beside the sender while it copies or its
    egress is busy, on the arc while on the wire, beside the receiver until its receive
    overhead ends) and progress bars of the overheads; and the caption."""

    def __init__(self, trace, pos: np.ndarray, names: list[str]):
        self.trace, self.pos, self.names = trace, pos, names
        self.lives = message_lives(trace)
        self.colours, self.legend = _colours(trace.messages)
        _, self.steps = _groups(trace.messages)
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
            f"{names[m.src]} → {names[m.dst]}<br>{_describe(m, self.steps)}<br>{format_bytes(m.nbytes)}"
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
            counts[_step_key(messages[i])] = counts.get(_step_key(messages[i]), 0) + 1
        shown = min((messages[i] for i in live), key=lambda m: (-counts[_step_key(m)], m.depart_s))
        return _describe(shown._replace(block=-1), self.steps)


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
    layouts, names = layouts or {}, names or {}
    built = {}
    for title, trace in panels.items():
        shape = layouts.get(title, "circle")
        pos = rank_positions(trace.world_size, shape) if isinstance(shape, str) else np.asarray(shape, dtype=float)
        built[title] = _Panel(trace, pos, names.get(title, [f"rank {r}" for r in range(trace.world_size)]))
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
    for col, (title, panel) in enumerate(built.items(), 1):
        pos, trace = panel.pos, panel.trace
        arc_x, arc_y = [], []  # plain lists: plotly.js animation drops base64-encoded (numpy) static traces
        for a, b in sorted(trace.bytes_per_link()):
            arc = _arc_point(pos[a], pos[b], np.linspace(0, 1, 16))
            arc_x += arc[:, 0].tolist() + [None]
            arc_y += arc[:, 1].tolist() + [None]
        fig.add_trace(
            go.Scatter(
                x=arc_x,
                y=arc_y,
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                line=dict(color="#d0d0d0", width=1.5),
            ),
            row=1,
            col=col,
        )
        for k, t in enumerate(times):
            frame_data[k].extend(panel.moving(t))
        nodes, messages, back, fill, caption = frame_data[0][-5:]
        moving.extend(range(len(fig.data), len(fig.data) + 5))
        fig.add_trace(
            go.Scatter(
                nodes,
                mode="markers+text",
                text=[_node_label(n) for n in panel.names],
                textposition=[_text_position(x, y) for x, y in pos],
                textfont=LEGIBLE,
                hovertext=panel.names,
                hoverinfo="text",
                showlegend=False,
                cliponaxis=False,
                marker=dict(size=30, color="white", **nodes["marker"]),
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
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
            row=1,
            col=col,
        )
        for bar, colour in ((back, "#cfcfcf"), (fill, "#222")):
            fig.add_trace(
                go.Scatter(bar, mode="lines", hoverinfo="skip", showlegend=False, line=dict(color=colour, width=7)),
                row=1,
                col=col,
            )
        fig.add_trace(
            go.Scatter(
                caption,
                mode="text",
                hoverinfo="skip",
                showlegend=False,
                cliponaxis=False,
                textfont=dict(size=20, color="#222"),
            ),
            row=1,
            col=col,
        )
        legend.update(panel.legend)
        fig.update_xaxes(visible=False, range=[-1.55, 1.55], fixedrange=True, row=1, col=col)
        fig.update_yaxes(visible=False, range=list(Y_RANGE), fixedrange=True, row=1, col=col)
    # with many labels (a training run's "pull reply clock 7 ...") the caption and the
    # hover name each message instead
    for colour, text in legend.values() if len(legend) <= LEGEND_MAX else ():
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=text, marker=dict(size=14, color=colour)))

    # redraw=True: Streamlit's plotly.js (4.2) drops the traces a frame does not name when redraw=False
    pause = dict(frame=dict(duration=0, redraw=True), mode="immediate", transition=dict(duration=0))
    play = [
        dict(
            label=label,
            method="animate",
            args=[
                None,
                dict(
                    frame=dict(duration=round(frame_ms / speed), redraw=True),
                    fromcurrent=True,
                    mode="immediate",
                    transition=dict(duration=0),
                ),
            ],
        )
        for label, speed in SPEEDS.items()
    ]
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=40, b=BOTTOM),
        plot_bgcolor="white",
        # under the buttons and the slider (paper units, from the plot area's height in px)
        legend=dict(orientation="h", x=0, y=-(BOTTOM - 40) / (height - 40 - BOTTOM), yanchor="top", font=dict(size=13)),
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=0,
                y=-0.01,
                xanchor="left",
                yanchor="top",
                showactive=False,
                font=dict(size=14),
                buttons=play + [dict(label="❚❚ Pause", method="animate", args=[[None], pause])],
            )
        ],
        sliders=[
            dict(
                active=0,
                x=0,
                len=1,
                y=-0.01,
                yanchor="top",
                pad=dict(t=45, b=0),
                ticklen=0,
                minorticklen=0,
                font=dict(color="rgba(0,0,0,0)"),  # a label per frame would overlap: show only the current one
                currentvalue=dict(prefix="virtual time: ", suffix=f" {unit}", font=dict(size=15, color="#222")),
                steps=[
                    dict(label=f"{t / div:.3g}", method="animate", args=[[str(k)], pause]) for k, t in enumerate(times)
                ],
            )
        ],
    )
    captions = [tuple(d["text"][0] for d in data[4::5]) for data in frame_data]
    fig.update_layout(meta=dict(stops=_stops(captions), captions=_toolbar_captions(captions, list(panels))))
    return _Animation(fig, [dict(name=str(k), data=data, traces=moving) for k, data in enumerate(frame_data)])


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


def timeline(trace, title: str = "Timeline") -> go.Figure:
    """Gantt chart: each rank's compute, send (CPU overhead), wait and recv spans over
    virtual time, with every message drawn from (departure, sender) to (arrival, receiver)."""
    div, unit = time_unit(trace.makespan_s)
    fig = go.Figure()
    for kind, color in KIND_COLORS.items():
        spans = [s for s in trace.spans if s.kind == kind]
        fig.add_trace(
            go.Bar(
                name=kind,
                orientation="h",
                marker_color=color,
                y=[f"rank {s.rank}" for s in spans],
                base=[s.start_s / div for s in spans],
                x=[(s.end_s - s.start_s) / div for s in spans],
                hovertext=[f"rank {s.rank} {kind}: {s.label}<br>{format_seconds(s.end_s - s.start_s)}" for s in spans],
                hoverinfo="text",
            )
        )
    xs, ys = [], []
    for m in trace.messages:
        xs += [m.depart_s / div, m.arrive_s / div, None]
        ys += [f"rank {m.src}", f"rank {m.dst}", None]
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, mode="lines", name="message", hoverinfo="skip", line=dict(color="rgba(80,80,80,0.35)", width=1)
        )
    )
    fig.update_layout(
        barmode="overlay",
        title=title,
        height=120 + 28 * trace.world_size,
        xaxis_title=f"virtual time ({unit})",
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        margin=dict(l=10, r=10, t=60, b=40),
    )
    fig.update_yaxes(
        categoryorder="array", categoryarray=[f"rank {r}" for r in range(trace.world_size)], autorange="reversed"
    )
    return fig


def link_bytes(trace, title: str = "Bytes per link") -> go.Figure:
    """Heatmap of the bytes each directed link carried (row: sender, column: receiver)."""
    p = trace.world_size
    z = np.zeros((p, p))
    for (src, dst), n in trace.bytes_per_link().items():
        z[src, dst] = n
    text = [[format_bytes(v) if v else "" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z / 2**20,
            x=list(range(p)),
            y=list(range(p)),
            colorscale="Blues",
            text=text,
            texttemplate="%{text}" if p <= 16 else None,
            hovertemplate="rank %{y} → rank %{x}: %{text}<extra></extra>",
            colorbar=dict(title="MiB"),
        )
    )
    # cells of about 40 px hold a label like "112 MiB" at a readable size (plotly shrinks the text to fit)
    fig.update_layout(title=title, height=200 + (40 if p <= 16 else 22) * p, margin=dict(l=10, r=10, t=50, b=40))
    # Square cells without widening the axes past the ranks (a wide page stretched them to -7..22):
    # the plot area shrinks instead of the range growing.
    fig.update_xaxes(title="receiver rank", dtick=1, range=[-0.5, p - 0.5], constrain="domain")
    fig.update_yaxes(title="sender rank", dtick=1, autorange="reversed", scaleanchor="x", constrain="domain")
    return fig


def traffic_per_rank(
    panels: dict, names: dict | None = None, title: str = "Bytes through each rank's link"
) -> go.Figure:
    """Bytes each rank sent and received, one panel per trace: a server's link stands out.
    ``names`` maps a panel title to the rank names (default "rank r")."""
    names = names or {}
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), shared_yaxes=True)
    for col, (panel, trace) in enumerate(panels.items(), 1):
        x = names.get(panel, [f"rank {r}" for r in range(trace.world_size)])
        for label, values, color in (
            ("sent", trace.bytes_sent_per_rank(), CONCEPT_COLOURS["send"]),
            ("received", trace.bytes_received_per_rank(), CONCEPT_COLOURS["recv"]),
        ):
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=list(values),
                    name=label,
                    marker_color=color,
                    showlegend=col == 1,
                    hovertext=[format_bytes(v) for v in values],
                    hoverinfo="x+text",
                ),
                row=1,
                col=col,
            )
    fig.update_layout(barmode="stack", title=title, height=380, margin=dict(l=10, r=10, t=70, b=40))
    # ticks in one binary unit at any size (MiB numbers read "35k" past 10 GiB)
    top = max(max(np.add(t.bytes_sent_per_rank(), t.bytes_received_per_rank())) for t in panels.values())
    tickvals, ticktext = linear_byte_ticks(top)
    fig.update_yaxes(
        title_text="bytes sent + received", tickmode="array", tickvals=tickvals, ticktext=ticktext, row=1, col=1
    )
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


def _wrap(label: str, width: int) -> str:
    """Break a contributor list after a '+' so a line holds at most ``width`` characters
    (a single longer run keeps its own line): '0–3+13–15' stays inside a narrow cell."""
    parts = label.split("+")
    lines = [""]
    for token in [p + "+" for p in parts[:-1]] + parts[-1:]:
        if lines[-1] and len(lines[-1]) + len(token) > width:
            lines.append("")
        lines[-1] += token
    return "<br>".join(lines)


def ring_steps(states: list[dict], height: int | None = None) -> go.Figure:
    """The ring all-reduce step by step: rows are ranks, columns are blocks (the numbers the
    messages of ``message_animation`` carry); a cell lists
    the ranks whose input it already sums (colour: how many), outlined where a message of
    that step arrived (solid) and in the sender's cell of the same block (dotted). Play, pause, and a slider walk through reduce-scatter then all-gather; the
    title says which step ("reduce-scatter step 3 of 7", steps 1-based)."""
    ranks = len(states[0]["chunks"])
    chunk_axis, rank_axis = list(range(ranks)), list(range(ranks))
    # 16 columns share about 650 px on a 1280 px projector with the sidebar open: 5
    # characters of 12 px text per line, so longer lists wrap onto a second line
    font, width = (20, 40) if ranks <= 4 else (16, 12) if ranks <= 8 else (13, 6) if ranks <= 12 else (12, 5)

    def heat(state):
        z = [[bin(v).count("1") for v in row] for row in state["chunks"]]
        names = [[_contributors(v, ranks) for v in row] for row in state["chunks"]]
        return dict(
            type="heatmap",
            z=z,
            x=chunk_axis,
            y=rank_axis,
            text=[[_wrap(n, width) for n in row] for row in names],
            customdata=names,
            zmin=1,
            zmax=ranks,
            texttemplate="%{text}",
            textfont=dict(size=font),
            colorscale="YlGnBu",
            colorbar=dict(title="inputs<br>summed"),
            xgap=2,
            ygap=2,
            hovertemplate="rank %{y}, block %{x}: sum of ranks %{customdata}<extra></extra>",
        )

    def moved(state, end: int = 1, dash: str = "solid", width: int = 4):
        """Outlines exactly the size of the cells the step's messages touch (data units, not
        marker pixels, so they grow and shrink with the cells), drawn on the cell's edge: the
        label inside stays visible. ``end=1``: the receiving cell, which changed; ``end=0``:
        the sending rank's cell of the same block, where the message's data came from."""
        xs, ys = [], []
        for move in state["moves"]:
            rank, chunk = move[end], move[2]
            x0, x1, y0, y1 = chunk - 0.47, chunk + 0.47, rank - 0.47, rank + 0.47
            xs += [x0, x1, x1, x0, x0, None]
            ys += [y0, y0, y1, y1, y0, None]
        return dict(
            type="scatter",
            x=xs,
            y=ys,
            mode="lines",
            hoverinfo="skip",
            showlegend=False,
            line=dict(color="#d62728", width=width, dash=dash),
        )

    def sent(state):
        return moved(state, 0, "dot", 2)

    steps_in = {phase: sum(s["phase"] == phase for s in states) for phase in ("reduce-scatter", "allgather")}

    def caption(state):
        if state["phase"] == "start":
            return "start: rank r holds its own input x_r in every block (a cell lists the ranks summed in it)"
        verb = "adds" if state["phase"] == "reduce-scatter" else "copies"
        return (
            f"<b>{state['phase']} step {state['step'] + 1} of {steps_in[state['phase']]}</b>: "
            f"each rank {verb} the block from its left neighbour (dotted: sent, solid: received)"
        )

    fig = go.Figure([go.Heatmap(heat(states[0])), go.Scatter(moved(states[0])), go.Scatter(sent(states[0]))])
    fig.update_layout(meta=dict(captions=[re.sub(r"<[^>]+>", "", caption(s)) for s in states]))
    fig.frames = [
        go.Frame(name=str(k), data=[heat(s), moved(s), sent(s)], traces=[0, 1, 2], layout=dict(title_text=caption(s)))
        for k, s in enumerate(states)
    ]
    still = dict(frame=dict(duration=0, redraw=True), mode="immediate", transition=dict(duration=0))
    play = dict(frame=dict(duration=1200, redraw=True), fromcurrent=True, mode="immediate", transition=dict(duration=0))
    labels = ["start"] + [f"{'RS' if s['phase'] == 'reduce-scatter' else 'AG'} {s['step'] + 1}" for s in states[1:]]
    fig.update_layout(
        title=dict(text=caption(states[0]), y=0.99, yanchor="top", font=dict(size=17)),
        height=height or max(420, 190 + 34 * ranks),
        margin=dict(l=10, r=10, t=90, b=10),
        plot_bgcolor="white",
        sliders=[
            dict(
                active=0,
                x=0.28,
                len=0.72,
                currentvalue=dict(prefix="after: ", font=dict(size=15)),
                pad=dict(t=40),
                steps=[dict(label=lab, method="animate", args=[[str(k)], still]) for k, lab in enumerate(labels)],
            )
        ],
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=0,
                y=0,
                xanchor="left",
                yanchor="top",
                pad=dict(t=45),
                showactive=False,
                font=dict(size=14),
                buttons=[
                    dict(label="▶ Play", method="animate", args=[None, play]),
                    dict(label="❚❚ Pause", method="animate", args=[[None], still]),
                ],
            )
        ],
    )
    fig.update_xaxes(title="block", dtick=1, side="top", range=[-0.5, ranks - 0.5], showgrid=False, zeroline=False)
    fig.update_yaxes(title="rank", dtick=1, autorange="reversed", showgrid=False, zeroline=False)
    return fig
