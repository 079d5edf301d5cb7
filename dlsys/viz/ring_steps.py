"""The ring all-reduce step by step (the states of ``dlsys.experiments.ring_allreduce_steps``):
ranks by blocks, each cell the ranks whose input it already sums."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default
from .controls import STILL, buttons, play_button


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
    steps_in = {phase: sum(s["phase"] == phase for s in states) for phase in ("reduce-scatter", "allgather")}

    def data(state) -> list[dict]:
        return [_heat(state, ranks), _outlines(state), _outlines(state, 0, "dot", 2)]

    first = data(states[0])
    fig = go.Figure([go.Heatmap(first[0]), go.Scatter(first[1]), go.Scatter(first[2])])
    fig.update_layout(meta=dict(captions=[re.sub(r"<[^>]+>", "", _caption(s, steps_in)) for s in states]))
    fig.frames = [
        go.Frame(name=str(k), data=data(s), traces=[0, 1, 2], layout=dict(title_text=_caption(s, steps_in)))
        for k, s in enumerate(states)
    ]
    labels = ["start"] + [f"{'RS' if s['phase'] == 'reduce-scatter' else 'AG'} {s['step'] + 1}" for s in states[1:]]
    fig.update_layout(
        title=dict(text=_caption(states[0], steps_in), y=0.99, yanchor="top", font=dict(size=17)),
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
                steps=[dict(label=lab, method="animate", args=[[str(k)], STILL]) for k, lab in enumerate(labels)],
            )
        ],
        updatemenus=[buttons([play_button(1200)], x=0, y=0, pad=dict(t=45), font=dict(size=14))],
    )
    fig.update_xaxes(title="block", dtick=1, side="top", range=[-0.5, ranks - 0.5], showgrid=False, zeroline=False)
    fig.update_yaxes(title="rank", dtick=1, autorange="reversed", showgrid=False, zeroline=False)
    return fig


def _heat(state: dict, ranks: int) -> dict:
    """The cells: colour = how many inputs a block sums, text = which ranks'."""
    # 16 columns share about 650 px on a 1280 px projector with the sidebar open: 5
    # characters of 12 px text per line, so longer lists wrap onto a second line
    font, width = (20, 40) if ranks <= 4 else (16, 12) if ranks <= 8 else (13, 6) if ranks <= 12 else (12, 5)
    z = [[bin(v).count("1") for v in row] for row in state["chunks"]]
    names = [[_contributors(v, ranks) for v in row] for row in state["chunks"]]
    return dict(
        type="heatmap",
        z=z,
        x=list(range(ranks)),
        y=list(range(ranks)),
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


def _outlines(state: dict, end: int = 1, dash: str = "solid", width: int = 4) -> dict:
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


def _caption(state: dict, steps_in: dict) -> str:
    """The step in words, as the title: "reduce-scatter step 3 of 7" (``steps_in``: steps per phase)."""
    if state["phase"] == "start":
        return "start: rank r holds its own input x_r in every block (a cell lists the ranks summed in it)"
    verb = "adds" if state["phase"] == "reduce-scatter" else "copies"
    return (
        f"<b>{state['phase']} step {state['step'] + 1} of {steps_in[state['phase']]}</b>: "
        f"each rank {verb} the block from its left neighbour (dotted: sent, solid: received)"
    )
