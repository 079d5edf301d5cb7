"""Cost-model figures from experiment records: all-reduce time against size and ranks
with crossovers, links compared, alpha and beta apart, parameter server against ring."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..collectives.registry import REGISTRY
from ..units import format_bytes, format_seconds, linear_byte_ticks
from .style import DASHES, log_axis

X_TITLES = {"nbytes": "message size per rank", "ranks": "ranks p"}
X_UNITS = {"nbytes": "bytes", "ranks": "count"}

# Every closed form of the registry as LaTeX (the textbook form, gamma left out: the app
# does not charge reductions). p ranks, n bytes, L = ceil(lg p).
CLOSED_FORM_LATEX = {key: algorithm.latex for key, algorithm in REGISTRY.items()}


def _name(algorithm: str) -> str:
    """A registry key in words, for a legend: "recursive_doubling" -> "recursive doubling"."""
    return algorithm.replace("_", " ")


def _x_label(x: str, value) -> str:
    return format_bytes(value) if x == "nbytes" else f"p = {value}"


def cost_curves(
    rows: list[dict],
    x: str = "nbytes",
    emulated: list[dict] = (),
    crossovers: list[dict] = (),
    title: str = "",
    choice: list[dict] = (),
) -> go.Figure:
    """Log-log time of every algorithm in ``rows`` (all-reduce unless the rows name their
    "collective") against ``x`` ("nbytes" or "ranks"), in the registry's colours: closed forms as
    lines, emulated runs as markers, crossovers (where the fastest algorithm changes) as
    dotted lines with a star, named in the legend; ``choice`` (rows of ``experiments.library_choice``) as a wide
    grey band under the algorithm an MPI library picks at each point."""
    fig = go.Figure()
    if choice:
        fig.add_trace(_choice_band(choice, x))
    collective = next((r.get("collective", "allreduce") for r in [*rows, *emulated]), "allreduce")
    # a dash each: two closed forms can agree over a whole range (Rabenseifner and reduce +
    # broadcast at small sizes), and one colour hid the other
    for algorithm, dash in zip((name for c, name in REGISTRY if c == collective), itertools.cycle(DASHES)):
        fig.add_traces(_algorithm(algorithm, REGISTRY[(collective, algorithm)].color, dash, rows, emulated, x))
    for c in crossovers:
        fig.add_vline(x=c[x], line=dict(dash="dot", color="gray"))
        # named in the legend: a note in the plot ran over the curves (at the foot of the
        # line) or into the title (above it), wherever the curves crowd
        fig.add_trace(
            go.Scatter(
                x=[c[x]],
                y=[c["time_s"]],
                mode="markers",
                legendgroup="crossovers",
                name=f"★ → {_name(c['to'])} at {_x_label(x, c[x])}",
                marker=dict(symbol="star", size=15, color="black"),
                hovertext=f"{_name(c['from'])} → {_name(c['to'])} at {_x_label(x, c[x])} ({format_seconds(c['time_s'])})",
                hoverinfo="text",
            )
        )
    if emulated:
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name="emulated run",
                marker=dict(symbol="circle-open", size=10, color="gray", line=dict(width=2)),
            )
        )
    fig.update_layout(title=title, height=480, hovermode="closest")
    fig.update_xaxes(**log_axis([r[x] for r in rows], X_UNITS[x], title=X_TITLES[x]))
    fig.update_yaxes(**log_axis([r["time_s"] for r in [*rows, *emulated]], "seconds", title="time"))
    return fig


def _choice_band(choice: list[dict], x: str) -> go.Scatter:
    """A wide grey band under the algorithm an MPI library picks at each point."""
    mine = sorted(choice, key=lambda r: r[x])
    return go.Scatter(
        x=[r[x] for r in mine],
        y=[r["time_s"] for r in mine],
        mode="lines",
        name=f"{mine[0]['library']} picks",
        line=dict(color="rgba(0,0,0,0.18)", width=14),
        customdata=[f"{_x_label(x, r[x])}: {r['algorithm']}" for r in mine],
        hovertemplate="%{customdata}<extra>library's choice</extra>",
    )


def _algorithm(algorithm: str, color: str, dash: str, rows: list[dict], emulated: list[dict], x: str) -> list:
    """One algorithm's closed form (a line) and its emulated runs (markers), where it has them."""
    closed = sorted((r for r in rows if r["algorithm"] == algorithm), key=lambda r: r[x])
    runs = [r for r in emulated if r["algorithm"] == algorithm]
    line = dict(mode="lines", name=_name(algorithm), line=dict(color=color, width=2, dash=dash))
    markers = dict(
        mode="markers",
        name=f"{_name(algorithm)} (emulated)",
        legendgroup=algorithm,
        showlegend=False,
        marker=dict(color=color, size=10, symbol="circle-open", line=dict(width=2)),
    )
    return [
        go.Scatter(
            x=[r[x] for r in mine],
            y=[r["time_s"] for r in mine],
            customdata=[_x_label(x, r[x]) for r in mine],
            hovertemplate=f"{_name(algorithm)}<br>%{{customdata}}: %{{y:.3s}}s<extra>{kind}</extra>",
            **style,
        )
        for mine, kind, style in ((closed, "closed form", line), (runs, "emulated", markers))
        if mine
    ]


def link_comparison(rows: list[dict], title: str = "") -> go.Figure:
    """Time against size for one algorithm on every link: TCP dashed, RDMA solid."""
    fig = go.Figure()
    for link in dict.fromkeys(r["link"] for r in rows):
        mine = sorted((r for r in rows if r["link"] == link), key=lambda r: r["nbytes"])
        fig.add_trace(
            go.Scatter(
                x=[r["nbytes"] for r in mine],
                y=[r["time_s"] for r in mine],
                mode="lines",
                name=link,
                line=dict(dash="dash" if link.startswith("tcp") else "solid", width=2),
                customdata=[format_bytes(r["nbytes"]) for r in mine],
                hovertemplate=f"{link}<br>%{{customdata}}: %{{y:.3s}}s<extra></extra>",
            )
        )
    fig.update_layout(title=title, height=460)
    fig.update_xaxes(**log_axis([r["nbytes"] for r in rows], "bytes", title=X_TITLES["nbytes"]))
    fig.update_yaxes(**log_axis([r["time_s"] for r in rows], "seconds", title="time"))
    return fig


def alpha_beta_split(rows: list[dict], title: str = "") -> go.Figure:
    """One algorithm's time against size split into its latency (alpha) part and its
    bandwidth (beta) part; the star marks the size where the two are equal."""
    rows = sorted(rows, key=lambda r: r["nbytes"])
    n = [r["nbytes"] for r in rows]
    fig = go.Figure(
        [
            go.Scatter(x=n, y=[r["time_s"] for r in rows], name="total", line=dict(color="black", width=3)),
            go.Scatter(x=n, y=[r["latency_s"] for r in rows], name="latency terms (alpha)", line=dict(dash="dash")),
            go.Scatter(x=n, y=[r["bandwidth_s"] for r in rows], name="bandwidth terms (n beta)", line=dict(dash="dot")),
        ]
    )
    equal = next((r for r in rows if r["bandwidth_s"] >= r["latency_s"] > 0), None)
    if equal:
        half = equal["nbytes"] * equal["latency_s"] / equal["bandwidth_s"]  # bandwidth part is linear in n
        fig.add_trace(
            go.Scatter(
                x=[half],
                y=[equal["latency_s"]],
                mode="markers+text",
                name="alpha = n beta",
                marker=dict(symbol="star", size=15, color="black"),
                textposition="top left",
                text=[f"{format_bytes(half)}"],
            )
        )
    fig.update_layout(title=title, height=460, hovermode="x unified")
    fig.update_xaxes(**log_axis(n, "bytes", title=X_TITLES["nbytes"]))
    fig.update_yaxes(
        **log_axis([r[k] for r in rows for k in ("time_s", "latency_s", "bandwidth_s")], "seconds", title="time")
    )
    return fig


def ps_vs_ring_scaling(rows: list[dict], title: str = "") -> go.Figure:
    """Left: communication time against workers, closed form (lines) and emulated
    (markers), for the parameter server and ring all-reduce. Right: bytes through the
    busiest rank's link: the server's grows with W, the ring's stays about 2n."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("time of one synchronization", "busiest rank's traffic"),
        horizontal_spacing=0.15,
    )
    for scheme, color in zip(dict.fromkeys(r["scheme"] for r in rows), qualitative.D3[4:]):
        mine = sorted((r for r in rows if r["scheme"] == scheme), key=lambda r: r["workers"])
        w = [r["workers"] for r in mine]
        fig.add_trace(
            go.Scatter(
                x=w,
                y=[r["closed_form_s"] for r in mine],
                name=f"{scheme} (closed form)",
                legendgroup=scheme,
                line=dict(color=color),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=w,
                y=[r["virtual_time_s"] for r in mine],
                mode="markers",
                name=f"{scheme} (emulated)",
                legendgroup=scheme,
                marker=dict(color=color, size=10, symbol="circle-open", line=dict(width=2)),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=[str(v) for v in w],
                y=[r["busiest_rank_bytes"] for r in mine],
                name=f"{scheme}: bytes",
                legendgroup=scheme,
                marker_color=color,
                showlegend=False,
                hovertext=[format_bytes(r["busiest_rank_bytes"]) for r in mine],
                hoverinfo="x+text",
            ),
            row=1,
            col=2,
        )
    tickvals, ticktext = linear_byte_ticks(max(r["busiest_rank_bytes"] for r in rows))
    fig.update_layout(title=title, height=460, barmode="group")
    fig.update_xaxes(**log_axis([r["workers"] for r in rows], "count", title_text="workers W"), row=1, col=1)
    fig.update_xaxes(title_text="workers W", type="category", row=1, col=2)
    fig.update_yaxes(
        **log_axis([r[k] for r in rows for k in ("closed_form_s", "virtual_time_s")], "seconds", title_text="time"),
        row=1,
        col=1,
    )
    fig.update_yaxes(
        title_text="bytes sent + received", tickmode="array", tickvals=tickvals, ticktext=ticktext, row=1, col=2
    )
    return fig
