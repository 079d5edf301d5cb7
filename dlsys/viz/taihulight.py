"""Figures of the Caffe-on-TaihuLight case study (dlsys.experiments.taihulight): the machine,
the paper's scaling figures regenerated, and one iteration's timeline with its packing copies."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..machine.topology import Topology
from ..units import format_bytes, format_rate, format_seconds, time_unit
from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default
from .style import CONCEPT_COLOURS, log_axis

DESIGN_COLORS = {"ps": "#D62728", "ps-gather": "#FF9896", "ps-reduce": "#9467BD", "ring": "#1F77B4"}
DESIGN_NAMES = {
    "ps": "parameter server",
    "ps-gather": "PS on MPI_Gather",
    "ps-reduce": "PS on MPI_Reduce",
    "ring": "ring all-reduce",
}
LIBRARY_COLORS = {"ring": "#1F77B4", "MPI_Allreduce": "#2CA02C"}
MODEL_DASHES = {"alexnet": "solid", "googlenet": "dot", "resnet50": "dash"}
# what a span of one iteration is, by its label's first word (dlsys.train.caffe labels them)
SPAN_PARTS = {
    "forward": ("forward", CONCEPT_COLOURS["forward"]),
    "backward": ("backward", CONCEPT_COLOURS["backward"]),
    "pack": ("packing copy", "#e45756"),
    "unpack": ("packing copy", "#e45756"),
    "update": ("update", "#72b7b2"),
}
COMMUNICATION = ("communication", CONCEPT_COLOURS["wire"])
SUPERNODES_DRAWN = 6


def machine(topology: Topology, cores_per_group: int = 64, groups: int = 4) -> go.Figure:
    """The SW26010 chip (``groups`` core groups of one management core and an 8 x 8 mesh of
    ``cores_per_group`` compute cores) and the network: supernodes of ``supernode_size``
    nodes on full-speed links, joined by an oversubscribed upper level."""
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.34, 0.66],
        horizontal_spacing=0.08,
        subplot_titles=(
            f"a node: {groups} x (1 + {cores_per_group}) cores",
            f"{topology.max_nodes:,} nodes, supernodes of {topology.supernode_size} ({SUPERNODES_DRAWN} drawn)",
        ),
    )
    _chip(fig, cores_per_group, groups)
    _network(fig, topology)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_yaxes(scaleanchor="x", row=1, col=1)
    fig.update_layout(height=520, plot_bgcolor="white", legend=dict(orientation="h", y=-0.05), margin=dict(t=90))
    return fig


def _chip(fig: go.Figure, cores_per_group: int, groups: int) -> None:
    """The left panel: each core group a box of its 8 x 8 compute cores and its management core above them."""
    side = int(cores_per_group**0.5)
    for g in range(groups):
        x0, y0 = (g % 2) * (side + 3), (g // 2) * (side + 3)
        fig.add_shape(
            type="rect",
            x0=x0 - 0.8,
            y0=y0 - 0.8,
            x1=x0 + side - 0.2,
            y1=y0 + side + 1.2,
            line=dict(color="#888"),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[x0 + i % side for i in range(cores_per_group)],
                y=[y0 + i // side for i in range(cores_per_group)],
                mode="markers",
                marker=dict(size=7, color="#4c78a8"),
                name="compute core (CPE)",
                legendgroup="cpe",
                showlegend=g == 0,
                hoverinfo="name",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[x0 + (side - 1) / 2],
                y=[y0 + side + 0.3],
                mode="markers",
                marker=dict(size=12, color="#f58518", symbol="square"),
                name="management core (MPE)",
                legendgroup="mpe",
                showlegend=g == 0,
                hoverinfo="name",
            ),
            row=1,
            col=1,
        )


def _network(fig: go.Figure, topology: Topology) -> None:
    """The right panel: SUPERNODES_DRAWN supernodes of 256 nodes, each linked up to the central network."""
    inside, up = topology.link, topology.uplink or topology.link
    for s in range(SUPERNODES_DRAWN):
        x = s * 3.0
        fig.add_shape(type="rect", x0=x - 1.2, y0=-1.2, x1=x + 1.2, y1=1.2, line=dict(color="#888"), row=1, col=2)
        fig.add_trace(
            go.Scatter(
                x=[x - 1 + 2 * (i % 16) / 15 for i in range(256)],
                y=[-1 + 2 * (i // 16) / 15 for i in range(256)],
                mode="markers",
                marker=dict(size=2, color="#4c78a8"),
                hovertext=f"supernode {s}: 256 nodes",
                hoverinfo="text",
                showlegend=False,
            ),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(
                x=[x, (SUPERNODES_DRAWN - 1) * 1.5],
                y=[1.2, 4],
                mode="lines",
                line=dict(color="#e45756", width=2),
                hoverinfo="skip",
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    centre = (SUPERNODES_DRAWN - 1) * 1.5
    fig.add_trace(
        go.Scatter(
            x=[centre],
            y=[4.4],
            mode="markers+text",
            text=["central network"],
            textposition="middle right",
            marker=dict(size=26, color="#e45756", symbol="diamond"),
            hoverinfo="skip",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    ratio = inside.bandwidth_Bps / up.bandwidth_Bps
    fig.add_annotation(
        x=centre,
        y=-2.2,
        showarrow=False,
        row=1,
        col=2,
        text=f"inside a supernode: {format_rate(inside.bandwidth_Bps)} per node, "
        f"{format_seconds(inside.latency_s)}; across: {format_rate(up.bandwidth_Bps)} per node "
        f"({ratio:.1f}:1 oversubscribed)",
    )


def design_scaling(rows: list[dict], title: str = "Communication per iteration: parameter server vs ring") -> go.Figure:
    """The paper's comparison: communication time (what the compute does not hide) against
    nodes, one line per (design, model); rows from ``taihulight.sweep``."""
    fig = go.Figure()
    for design, model in dict.fromkeys((r["design"], r["model"]) for r in rows):
        mine = sorted((r for r in rows if (r["design"], r["model"]) == (design, model)), key=lambda r: r["nodes"])
        fig.add_trace(
            go.Scatter(
                x=[r["nodes"] for r in mine],
                y=[r["communication_s"] for r in mine],
                name=f"{DESIGN_NAMES[design]}, {model}",
                mode="lines+markers",
                line=dict(color=DESIGN_COLORS[design], dash=MODEL_DASHES.get(model, "solid")),
            )
        )
    fig.update_layout(title=title, height=460)
    fig.update_xaxes(**log_axis([r["nodes"] for r in rows], "count", title="nodes"))
    fig.update_yaxes(**log_axis([r["communication_s"] for r in rows], "seconds", title="communication time"))
    return fig


def ring_vs_mpi(rows: list[dict], title: str = "Ring all-reduce vs MPI_Allreduce") -> go.Figure:
    """The paper's figs 7-8: all-reduce time against nodes for each message size, the ring
    against the library's choice (left), and the ring's time over the library's (right);
    rows from ``taihulight.ring_vs_mpi``."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("all-reduce time", "ring / MPI_Allreduce"), horizontal_spacing=0.12
    )
    dashes = ["solid", "dot", "dash", "dashdot"]
    for i, nbytes in enumerate(dict.fromkeys(r["nbytes"] for r in rows)):
        by_library = {
            library: sorted(
                (r for r in rows if r["nbytes"] == nbytes and r["library"] == library), key=lambda r: r["nodes"]
            )
            for library in LIBRARY_COLORS
        }
        for library, colour in LIBRARY_COLORS.items():
            mine = by_library[library]
            fig.add_trace(
                go.Scatter(
                    x=[r["nodes"] for r in mine],
                    y=[r["virtual_time_s"] for r in mine],
                    name=f"{library}, {format_bytes(nbytes)}",
                    mode="lines+markers",
                    hovertext=[r["algorithm"] for r in mine],
                    line=dict(color=colour, dash=dashes[i % 4]),
                ),
                row=1,
                col=1,
            )
        ring, mpi = by_library["ring"], by_library["MPI_Allreduce"]
        fig.add_trace(
            go.Scatter(
                x=[r["nodes"] for r in ring],
                y=[a["virtual_time_s"] / b["virtual_time_s"] for a, b in zip(ring, mpi)],
                name=f"ratio, {format_bytes(nbytes)}",
                mode="lines+markers",
                line=dict(color="#555", dash=dashes[i % 4]),
            ),
            row=1,
            col=2,
        )
    fig.update_layout(title=title, height=460)
    for col in (1, 2):
        fig.update_xaxes(**log_axis([r["nodes"] for r in rows], "count", title_text="nodes"), row=1, col=col)
    fig.update_yaxes(title_text="seconds", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ring time / MPI_Allreduce time", row=1, col=2)
    return fig


def iteration_timeline(panels: dict, ranks: int = 4, title: str = "One iteration, rank by rank") -> go.Figure:
    """Each design's iteration as bars per rank (its first ``ranks``): forward, backward,
    packing copies, update, and communication (send overheads and waits); ``panels``
    maps a title to a trace (``taihulight.run_design(..., record=True)``)."""
    end_s = max(trace.makespan_s for trace in panels.values())
    div, unit = time_unit(end_s)
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=list(panels), shared_xaxes=True, vertical_spacing=0.12)
    shown = set()
    for row, trace in enumerate(panels.values(), 1):
        for part, colour in [*dict.fromkeys(SPAN_PARTS.values()), COMMUNICATION]:
            spans = [
                s
                for s in trace.spans
                if s.rank < ranks
                and (
                    SPAN_PARTS.get(s.label.split(" ")[0], COMMUNICATION)[0] if s.kind == "compute" else COMMUNICATION[0]
                )
                == part
            ]
            fig.add_trace(
                go.Bar(
                    name=part,
                    orientation="h",
                    marker_color=colour,
                    legendgroup=part,
                    showlegend=part not in shown,
                    y=[f"rank {s.rank}" for s in spans],
                    base=[s.start_s / div for s in spans],
                    x=[(s.end_s - s.start_s) / div for s in spans],
                    hovertext=[f"{s.label or s.kind}: {format_seconds(s.end_s - s.start_s)}" for s in spans],
                    hoverinfo="text",
                ),
                row=row,
                col=1,
            )
            shown.add(part)
        fig.update_yaxes(
            categoryorder="array",
            categoryarray=[f"rank {r}" for r in range(ranks)],
            autorange="reversed",
            row=row,
            col=1,
        )
    fig.update_layout(barmode="overlay", title=title, height=180 + 40 * ranks * len(panels))
    fig.update_xaxes(title_text=f"virtual time ({unit})", row=len(panels), col=1)
    return fig
