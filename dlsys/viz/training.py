"""Figures of distributed training runs: progress per worker (who waits), loss and accuracy
against virtual time, staleness histograms, and the cost of each strategy. Inputs are the
records of ``dlsys.train.train`` (tidy dicts), keyed by a display name."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..comm.trace import Trace
from ..train.pipeline import fill_drain_bubble
from ..units import format_bytes, format_seconds, linear_byte_ticks, time_unit
from .style import CONCEPT_COLOURS, DASHES, log_axis, role_names

HEIGHT = 440


def _end_s(records: dict) -> float:
    return max(r["virtual_time_s"] for r in records.values()) or 1e-9


def first_seconds(trace: Trace, seconds: float) -> Trace:
    """The part of a trace that starts before ``seconds`` (a readable timeline or animation)."""
    return Trace(
        [s for s in trace.spans if s.start_s < seconds],
        [m for m in trace.messages if m.depart_s < seconds],
        trace.world_size,
    )


def worker_progress(records: dict, title: str = "Gradients computed by each worker") -> go.Figure:
    """One panel per run, one staircase per worker: its step count against virtual time.
    Under BSP the stairs move together (everyone waits for the slowest); under ASP the fast
    workers climb away from a straggler; SSP lets them run at most s steps ahead. Workers
    are named "worker w (rank r)": the ranks before the first worker are servers."""
    div, unit = time_unit(_end_s(records))
    # under BSP the workers' stairs lie on each other: a dash each shows that all are there
    # one time axis for every run: BSP waiting shows as a run that takes longer
    fig = make_subplots(rows=1, cols=len(records), subplot_titles=list(records), shared_yaxes=True, shared_xaxes="all")
    for col, record in enumerate(records.values(), 1):
        ranks = sorted({row["rank"] for row in record["losses"]})
        names = role_names(len(ranks), ranks[0])[ranks[0] :]
        for i, rank in enumerate(ranks):
            times = sorted(row["time_s"] for row in record["losses"] if row["rank"] == rank)
            fig.add_trace(
                go.Scatter(
                    x=[0.0] + [t / div for t in times],
                    y=list(range(len(times) + 1)),
                    mode="lines",
                    line_shape="hv",
                    name=names[i],
                    legendgroup=str(i),
                    showlegend=col == 1,
                    line=dict(color=f"hsl({i * 360 // len(ranks)},60%,45%)", dash=DASHES[i % len(DASHES)]),
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text=f"virtual time ({unit})", row=1, col=col)
    fig.update_yaxes(title_text="gradients computed", row=1, col=1)
    fig.update_layout(title=title, height=HEIGHT)
    return fig


def loss_curves(records: dict, title: str = "Training loss against virtual time") -> go.Figure:
    """Each run's minibatch losses (all workers) by virtual time, as a moving mean over
    5 losses per worker, so runs that take different times compare at a glance."""
    div, unit = time_unit(_end_s(records))
    fig, shown = go.Figure(), []
    for name, record in records.items():
        rows = sorted(record["losses"], key=lambda row: row["time_s"])
        window = max(1, min(5 * record["workers"], len(rows)))
        loss = np.convolve([row["loss"] for row in rows], np.ones(window) / window, mode="valid")
        times = [row["time_s"] / div for row in rows][window - 1 :]
        fig.add_trace(go.Scatter(x=times, y=loss, mode="lines", name=name))
        shown += loss.tolist()
    fig.update_layout(title=title, xaxis_title=f"virtual time ({unit})", height=HEIGHT)
    fig.update_yaxes(**log_axis(shown, title="cross-entropy loss"))
    return fig


def staleness_histogram(records: dict, title: str = "Staleness of every read") -> go.Figure:
    """Reads per staleness (the reader's clock minus the slowest worker's clock), one bar
    series per run; SSP's bars stop at s, ASP's tail is as long as the straggler lags."""
    fig = go.Figure()
    for name, record in records.items():
        hist = record["staleness_histogram"]
        fig.add_trace(go.Bar(x=list(hist), y=list(hist.values()), name=name))
    fig.update_layout(
        title=title, xaxis_title="staleness (clocks)", yaxis_title="reads", barmode="group", height=HEIGHT
    )
    return fig


def accuracy_curves(records: dict, title: str = "Test accuracy against virtual time") -> go.Figure:
    """Test accuracy after every epoch (as rank 0, or the first worker, saw the weights)."""
    div, unit = time_unit(_end_s(records))
    fig = go.Figure()
    for name, record in records.items():
        curve = record["accuracy_curve"]
        fig.add_trace(
            go.Scatter(
                x=[c["time_s"] / div for c in curve],
                y=[c["test_accuracy"] for c in curve],
                mode="lines+markers",
                name=name,
            )
        )
    fig.update_layout(
        title=title,
        xaxis_title=f"virtual time ({unit})",
        yaxis_title="test accuracy",
        yaxis_tickformat=".0%",
        height=HEIGHT,
    )
    return fig


def cost_bars(records: dict, title: str = "What each strategy costs") -> go.Figure:
    """Virtual time, bytes moved (binary units) and test accuracy side by side, one bar per run."""
    names = list(records)
    div, unit = time_unit(max(records[n]["virtual_time_s"] for n in names))
    fig = make_subplots(rows=1, cols=3, subplot_titles=("virtual time", "bytes moved", "test accuracy"))
    panels = (
        ("virtual_time_s", 1 / div, lambda v: format_seconds(v * div)),
        ("bytes_moved", 1, format_bytes),
        ("test_accuracy", 1, lambda v: f"{v:.1%}"),
    )
    for col, (key, scale, label) in enumerate(panels, 1):
        values = [records[n][key] * scale for n in names]
        fig.add_trace(
            go.Bar(
                x=names,
                y=values,
                showlegend=False,
                marker_color="#4c78a8",
                text=[label(v) for v in values],
                textposition="auto",
            ),
            row=1,
            col=col,
        )
    tickvals, ticktext = linear_byte_ticks(max(records[n]["bytes_moved"] for n in names))
    fig.update_yaxes(title_text=f"virtual time ({unit})", row=1, col=1)
    fig.update_yaxes(title_text="bytes moved", tickmode="array", tickvals=tickvals, ticktext=ticktext, row=1, col=2)
    low = min(0.8, min(records[n]["test_accuracy"] for n in names) - 0.05)
    fig.update_yaxes(
        title_text="test accuracy (zoomed)" if low > 0 else "test accuracy",
        tickformat=".0%",
        range=[max(low, 0.0), 1.0],
        row=1,
        col=3,
    )
    fig.update_layout(title=title, height=HEIGHT)
    return fig


def pipeline_step(trace: Trace, micro_batches: int, title: str = "One step of the GPipe pipeline") -> go.Figure:
    """The first step of a model-parallel run (dlsys.train.model_parallel) as GPipe draws it:
    a row per stage, its forward and backward of each micro-batch (numbered) on the step's
    idle time (grey: the bubble). The step ends where stage 0 finishes its last backward.
    Each stage's measured idle share is named beside GPipe's (S - 1) / (M + S - 1), which
    assumes stages of equal work: the run's own stages say how far they are from it."""
    stages = trace.world_size
    computes = sorted((s for s in trace.spans if s.kind == "compute"), key=lambda s: s.start_s)
    backward_0 = [s for s in computes if s.rank == 0 and s.label.startswith("backward")]
    if len(backward_0) < micro_batches:
        raise ValueError(
            f"trace: needs one whole step of {micro_batches} micro-batches, got {len(backward_0)} backwards on stage 0"
        )
    step_s = backward_0[micro_batches - 1].end_s
    mine = [s for s in computes if s.end_s <= step_s]
    div, unit = time_unit(step_s)
    names = [f"stage {s} (rank {s})" for s in range(stages)]
    busy = [sum(s.end_s - s.start_s for s in mine if s.rank == r) for r in range(stages)]
    idle = [1 - b / step_s for b in busy]
    formula = fill_drain_bubble(stages, micro_batches)
    fig = go.Figure(
        go.Bar(
            name="idle (bubble)",
            y=names,
            x=[step_s / div] * stages,
            base=[0] * stages,
            orientation="h",
            marker_color=CONCEPT_COLOURS["idle"],
            hovertext=[f"{n}: idle {i:.0%} of the step" for n, i in zip(names, idle)],
            hoverinfo="text",
        )
    )
    for kind in ("forward", "backward"):
        spans = [s for s in mine if s.label.startswith(kind)]
        fig.add_trace(
            go.Bar(
                name=kind,
                y=[names[s.rank] for s in spans],
                orientation="h",
                x=[(s.end_s - s.start_s) / div for s in spans],
                base=[s.start_s / div for s in spans],
                marker=dict(color=CONCEPT_COLOURS[kind], line=dict(color="white", width=1)),
                text=[s.label.split()[-1] for s in spans],
                textposition="inside",
                insidetextanchor="middle",
                hovertext=[f"{names[s.rank]}: {s.label}, {format_seconds(s.end_s - s.start_s)}" for s in spans],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        height=150 + 40 * stages,
        title=f"{title}: S = {stages}, M = {micro_batches}; idle {', '.join(f'{i:.0%}' for i in idle)} "
        f"per stage (formula {formula:.0%})",
    )
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=names)
    fig.update_xaxes(title=f"virtual time ({unit})", range=[0, step_s / div])
    return fig
