"""Figures of distributed training runs: progress per worker (who waits), loss and accuracy
against virtual time, staleness histograms, and the cost of each strategy. Inputs are the
records of ``dlsys.train.train`` (tidy dicts), keyed by a display name."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..comm import Trace
from .style import DASHES, log_axis, role_names
from .units import format_bytes, format_seconds, linear_byte_ticks, time_unit

HEIGHT = 440


def _end_s(records: dict) -> float:
    return max(r["virtual_time_s"] for r in records.values()) or 1e-9


def first_seconds(trace: Trace, seconds: float) -> Trace:
    """The part of a trace that starts before ``seconds`` (a readable timeline or animation)."""
    return Trace([s for s in trace.spans if s.start_s < seconds],
                 [m for m in trace.messages if m.depart_s < seconds], trace.world_size)


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
        names = role_names(len(ranks), ranks[0])[ranks[0]:]
        for i, rank in enumerate(ranks):
            times = sorted(row["time_s"] for row in record["losses"] if row["rank"] == rank)
            fig.add_trace(go.Scatter(x=[0.0] + [t / div for t in times], y=list(range(len(times) + 1)),
                                     mode="lines", line_shape="hv", name=names[i], legendgroup=str(i),
                                     showlegend=col == 1, line=dict(color=f"hsl({i * 360 // len(ranks)},60%,45%)",
                                                                    dash=DASHES[i % len(DASHES)])),
                          row=1, col=col)
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
        times = [row["time_s"] / div for row in rows][window - 1:]
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
    fig.update_layout(title=title, xaxis_title="staleness (clocks)", yaxis_title="reads", barmode="group", height=HEIGHT)
    return fig


def accuracy_curves(records: dict, title: str = "Test accuracy against virtual time") -> go.Figure:
    """Test accuracy after every epoch (as rank 0, or the first worker, saw the weights)."""
    div, unit = time_unit(_end_s(records))
    fig = go.Figure()
    for name, record in records.items():
        curve = record["accuracy_curve"]
        fig.add_trace(go.Scatter(x=[c["time_s"] / div for c in curve], y=[c["test_accuracy"] for c in curve],
                                 mode="lines+markers", name=name))
    fig.update_layout(title=title, xaxis_title=f"virtual time ({unit})", yaxis_title="test accuracy",
                      yaxis_tickformat=".0%", height=HEIGHT)
    return fig


def cost_bars(records: dict, title: str = "What each strategy costs") -> go.Figure:
    """Virtual time, bytes moved (binary units) and test accuracy side by side, one bar per run."""
    names = list(records)
    div, unit = time_unit(max(records[n]["virtual_time_s"] for n in names))
    fig = make_subplots(rows=1, cols=3, subplot_titles=("virtual time", "bytes moved", "test accuracy"))
    panels = (("virtual_time_s", 1 / div, lambda v: format_seconds(v * div)), ("bytes_moved", 1, format_bytes),
              ("test_accuracy", 1, lambda v: f"{v:.1%}"))
    for col, (key, scale, label) in enumerate(panels, 1):
        values = [records[n][key] * scale for n in names]
        fig.add_trace(go.Bar(x=names, y=values, showlegend=False, marker_color="#4c78a8",
                             text=[label(v) for v in values], textposition="auto"), row=1, col=col)
    tickvals, ticktext = linear_byte_ticks(max(records[n]["bytes_moved"] for n in names))
    fig.update_yaxes(title_text=f"virtual time ({unit})", row=1, col=1)
    fig.update_yaxes(title_text="bytes moved", tickmode="array", tickvals=tickvals, ticktext=ticktext, row=1, col=2)
    low = min(0.8, min(records[n]["test_accuracy"] for n in names) - 0.05)
    fig.update_yaxes(title_text="test accuracy (zoomed)" if low > 0 else "test accuracy", tickformat=".0%",
                     range=[max(low, 0.0), 1.0], row=1, col=3)
    fig.update_layout(title=title, height=HEIGHT)
    return fig
