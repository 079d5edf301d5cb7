"""Figures of overlap and scheduling (``dlsys.experiments.schedule``): worker 0's compute,
push and pull lanes per policy, stacked on one clock with a time slider; iteration time
against bandwidth for every policy; the trade-off of slice, credit and bucket sizes. A
policy's colour and an option's axis title are the policy's own (``dlsys.schedule``)."""

from __future__ import annotations

from bisect import bisect_right

import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from ..schedule import OPTIONS, POLICIES
from ..units import format_seconds, time_unit
from . import style  # noqa: F401 - registers the "dlsys" template as plotly's default
from .style import log_axis

LANES = {"compute": "compute", "push": "push (wire)", "pull": "pull (wire)"}
LAYER_SCALE = "Viridis"  # layer 0 (the input) dark, the output layer yellow
WAIT_COLOUR, NO_LAYER_COLOUR = "#d9d9d9", "#888888"
SLIDER_STEPS = 100
PIXELS = 2000  # bars closer than end / PIXELS are drawn as one (under a pixel apart on any screen)
ROW_PX = 190


def layer_colours(n_layers: int) -> list[str]:
    """One colour per layer, forward order: the input layer at one end of the scale."""
    return sample_colorscale(LAYER_SCALE, [i / max(n_layers - 1, 1) for i in range(n_layers)])


def _bar_colour(bar: dict, colours: list[str]) -> str:
    if bar["kind"] == "wait":
        return WAIT_COLOUR
    return colours[bar["layer"]] if bar["layer"] >= 0 else NO_LAYER_COLOUR


def _at(bars: list[dict], t: float, busy: str, tolerance_s: float) -> str:
    """What a lane (bars sorted by start) does at ``t``: the label of its bar running at t
    or ended less than ``tolerance_s`` before (P3's slices leave gaps of a send overhead
    between them, invisible at the figure's scale), else "idle"."""
    k = bisect_right([b["start_s"] for b in bars], t) - 1
    if k >= 0 and bars[k]["end_s"] + tolerance_s > t:
        return f"{busy}: {bars[k]['label']}"
    return f"{busy} idle"


def _merge(bars: list[dict], tolerance_s: float) -> list[dict]:
    """Runs of bars of one lane, kind and layer with gaps under ``tolerance_s`` (less than
    a pixel) as one bar: P3's thousands of slices would make the browser draw for seconds."""
    out = []
    for bar in bars:
        last = out[-1] if out else None
        if (
            last
            and (last["lane"], last["kind"], last["layer"]) == (bar["lane"], bar["kind"], bar["layer"])
            and bar["start_s"] - last["end_s"] < tolerance_s
        ):
            count = last.get("count", 1) + 1
            first = last["label"].split(" … ")[0]
            out[-1] = last | {
                "end_s": max(last["end_s"], bar["end_s"]),
                "count": count,
                "label": f"{first} … {bar['label']}: {count} items",
            }
        else:
            out.append(bar)
    return out


def gantt(records: list[dict], title: str = "Worker 0 under each policy") -> go.Figure:
    """One panel per policy record (``experiments.schedule.compare_policies``), stacked on
    one clock: worker 0's compute lane (forward solid, backward hatched, waits for an update
    grey), its pushes on the wire and the servers' replies arriving, every bar coloured by
    its layer. A time slider greys out what has not happened yet and names, per policy,
    what the compute thread and the link are doing at that moment. The panel titles name
    the policies; their options are the records' ``describe``."""
    n = len(records)
    names = records[0]["layers"]
    colours = layer_colours(len(names))
    end_s = max(r["end_s"] for r in records)
    div, unit = time_unit(end_s)
    titles = [
        f"<b>{r['policy']}</b>: {format_seconds(r['iteration_s'])} per iteration, {r['overlap']:.0%} of pushes hidden"
        for r in records
    ]
    fig = make_subplots(
        rows=n, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.5 / (n * ROW_PX / 100 + 1)
    )
    per_lane = []
    for row, record in enumerate(records, 1):
        lanes = {
            lane: sorted((b for b in record["lanes"] if b["lane"] == lane), key=lambda b: b["start_s"])
            for lane in LANES
        }
        per_lane.append(lanes)
        bars = [b for lane in LANES for b in _merge(lanes[lane], end_s / PIXELS)]
        fig.add_trace(_lane_bars(bars, colours, div, unit), row=row, col=1)
        fig.update_yaxes(
            categoryorder="array", categoryarray=list(LANES.values()), autorange="reversed", row=row, col=1
        )
    for trace in _legend(colours, names):
        fig.add_trace(trace, row=1, col=1)
    for annotation in fig.layout.annotations:  # subplot titles to the left: the slider's caption goes right
        annotation.update(x=0, xanchor="left", font=dict(size=15))
    domains = [fig.layout[f"yaxis{'' if i == 0 else i + 1}"].domain for i in range(n)]
    for domain in domains:
        fig.add_annotation(
            x=1,
            y=domain[1],
            xref="paper",
            yref="paper",
            xanchor="right",
            yanchor="bottom",
            text="",
            showarrow=False,
            font=dict(size=13, color="#444"),
        )

    fig.update_layout(
        title=title,
        height=120 + ROW_PX * n,
        barmode="overlay",
        bargap=0.2,
        plot_bgcolor="white",
        legend=dict(x=1.02, y=1, yanchor="top"),
        margin=dict(l=10, r=10, t=80, b=110),
        sliders=[_slider(end_s, div, unit, per_lane)],
    )
    fig.update_layout(_at_time(end_s, end_s, div, per_lane))
    fig.update_xaxes(title=f"virtual time ({unit})", row=n, col=1)
    fig.update_xaxes(range=[0, end_s / div])
    return fig


def _lane_bars(bars: list[dict], colours: list[str], div: float, unit: str) -> go.Bar:
    """One policy's lanes as one trace of bars, each coloured by its layer (backward hatched)."""
    # unvalidated: plotly's checks of P3's thousands of bars took seconds of the page's
    # first render (issue 28), for lists built right here; the JSON draws the same
    return go.Bar(
        orientation="h",
        y=[LANES[b["lane"]] for b in bars],
        base=[b["start_s"] / div for b in bars],
        x=[(b["end_s"] - b["start_s"]) / div for b in bars],
        showlegend=False,
        width=0.8,
        marker=dict(
            color=[_bar_colour(b, colours) for b in bars],
            line_width=0,
            pattern=dict(shape=["/" if b["kind"] == "backward" else "" for b in bars], fgcolor="white", size=6),
        ),
        hovertext=[f"{b['label']}<br>{b['start_s'] / div:.4g} to {b['end_s'] / div:.4g} {unit}" for b in bars],
        hoverinfo="text",
        _validate=False,
    )


def _legend(colours: list[str], names: list[str]) -> list:
    """The legend's entries (forward, backward, waiting) and the layers' colour bar, input to output."""
    entries = [
        go.Bar(
            x=[None],
            y=[None],
            orientation="h",
            name=name,
            marker=dict(color=colour, pattern=dict(shape=pattern, fgcolor="white")),
        )
        for name, pattern, colour in (
            ("forward", "", colours[0]),
            ("backward", "/", colours[0]),
            ("wait for an update", "", WAIT_COLOUR),
        )
    ]
    colour_bar = dict(
        title=dict(text="layer", side="right"),
        x=1.02,
        y=0,
        yanchor="bottom",
        len=0.6,
        tickvals=[0, len(names) - 1],
        ticktext=[f"{names[0]} (input)", f"{names[-1]} (output)"],
    )
    scale = dict(color=[0], cmin=0, cmax=len(names) - 1, colorscale=LAYER_SCALE, showscale=True, colorbar=colour_bar)
    return entries + [go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip", marker=scale)]


def _across(kind: str, x0: float, x1: float, **look) -> dict:
    """A shape from x0 to x1 on the time axis across every panel (the paper's full height)."""
    return dict(type=kind, xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1, **look)


def _slider(end_s: float, div: float, unit: str, per_lane: list[dict]) -> dict:
    """A slider of SLIDER_STEPS steps over the run, each a relayout to that time (``_at_time``), starting at the end."""
    times = [end_s * k / SLIDER_STEPS for k in range(SLIDER_STEPS + 1)]
    return dict(
        active=SLIDER_STEPS,
        x=0,
        len=1,
        y=0,
        yanchor="top",
        pad=dict(t=50, b=0),
        ticklen=0,
        minorticklen=0,
        font=dict(color="rgba(0,0,0,0)"),  # a label per step would overlap
        currentvalue=dict(prefix="virtual time: ", suffix=f" {unit}", font=dict(size=15, color="#222")),
        steps=[
            dict(label=f"{t / div:.4g}", method="relayout", args=[_at_time(t, end_s, div, per_lane)]) for t in times
        ],
    )


def _at_time(t: float, end_s: float, div: float, per_lane: list[dict]) -> dict:
    """The slider's relayout at ``t``: what has not happened yet greyed out, a line at t, and
    per policy (the annotations after the subplot titles) what compute and the link do."""
    n = len(per_lane)
    cover = [
        # what has not happened yet, greyed out; a line at now
        _across("rect", t / div, end_s / div, line_width=0, fillcolor="white", opacity=0.75, layer="above"),
        _across("line", t / div, t / div, line=dict(color="#222", width=2)),
    ]
    texts = {
        f"annotations[{n + i}].text": f"{_at(lanes['compute'], t, 'compute', 0.0)} · "
        f"{_at(lanes['push'], t, 'link', end_s / PIXELS)}"
        for i, lanes in enumerate(per_lane)
    }
    return {"shapes": cover, **texts}


def iteration_vs_bandwidth(rows: list[dict], title: str | None = None) -> go.Figure:
    """Iteration time of every policy against the link bandwidth (``bandwidth_sweep``
    rows), with compute alone as the floor; right: each policy's time over FIFO's."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["iteration time", "relative to FIFO"], horizontal_spacing=0.1)
    div, unit = time_unit(min(r["iteration_s"] for r in rows))
    gbps = sorted({r["bandwidth_Bps"] * 8e-9 for r in rows})
    fifo = {r["bandwidth_Bps"]: r["iteration_s"] for r in rows if r["policy"] == "fifo"}
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["bandwidth_Bps"])
        line = dict(color=POLICIES[policy].colour, width=3)
        x = [r["bandwidth_Bps"] * 8e-9 for r in mine]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[r["iteration_s"] / div for r in mine],
                name=mine[0]["describe"],
                mode="lines+markers",
                line=line,
                legendgroup=policy,
                hovertemplate="%{x:.3g} Gbit/s: %{y:.4g} " + unit + "<extra>" + policy + "</extra>",
            ),
            row=1,
            col=1,
        )
        if fifo:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[r["iteration_s"] / fifo[r["bandwidth_Bps"]] for r in mine],
                    name=policy,
                    mode="lines+markers",
                    line=line,
                    legendgroup=policy,
                    showlegend=False,
                    hovertemplate="%{x:.3g} Gbit/s: %{y:.1%} of FIFO<extra>" + policy + "</extra>",
                ),
                row=1,
                col=2,
            )
    compute_s = rows[0]["compute_s"]
    fig.add_trace(
        go.Scatter(
            x=[gbps[0], gbps[-1]],
            y=[compute_s / div] * 2,
            name="compute alone",
            mode="lines",
            line=dict(color="#222", dash="dash"),
        ),
        row=1,
        col=1,
    )
    times = [r["iteration_s"] / div for r in rows] + [compute_s / div]
    fig.update_xaxes(**log_axis(gbps, title="link bandwidth (Gbit/s)"))
    fig.update_yaxes(**log_axis(times, title=f"iteration time ({unit})"), row=1, col=1)
    fig.update_yaxes(title="iteration time / FIFO's", tickformat=".0%", rangemode="tozero", row=1, col=2)
    fig.update_layout(title=title or "Iteration time against link bandwidth", height=460)
    return fig


def option_tradeoff(rows: list[dict], chosen=None, title: str | None = None) -> go.Figure:
    """One option's sweep (``option_sweep`` rows): iteration time (compute alone dashed),
    the share of pushes hidden behind compute, and items per iteration (each pays the
    per-message latency), against the option's value; ``chosen`` marks the current one."""
    option = rows[0]["option"]
    axis_title, factor = OPTIONS[option][1].axis_title, OPTIONS[option][1].axis_factor
    x = [r["value"] * factor for r in rows]
    div, unit = time_unit(min(r["iteration_s"] for r in rows))
    fig = make_subplots(
        rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=["iteration time", "overlap", "latency: messages"]
    )
    colour = POLICIES[rows[0]["policy"]].colour
    for col, (y, template) in enumerate(
        (
            ([r["iteration_s"] / div for r in rows], "%{y:.4g} " + unit),
            ([r["overlap"] for r in rows], "%{y:.0%} hidden"),
            ([r["items"] for r in rows], "%{y:,} items"),
        ),
        1,
    ):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                line=dict(color=colour, width=3),
                showlegend=False,
                hovertemplate="%{x:.4g}: " + template + "<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.add_trace(
        go.Scatter(
            x=[min(x), max(x)],
            y=[rows[0]["compute_s"] / div] * 2,
            mode="lines",
            name="compute alone",
            line=dict(color="#222", dash="dash"),
        ),
        row=1,
        col=1,
    )
    if chosen is not None:
        for col in (1, 2, 3):
            fig.add_vline(x=chosen * factor, line=dict(color="#888", dash="dot"), row=1, col=col)
    axis = log_axis(x, title=axis_title)
    axis["ticktext"] = [f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in axis["tickvals"]]  # 1,000,000, not 1e+06
    fig.update_xaxes(**axis)
    fig.update_yaxes(title=f"iteration time ({unit})", row=1, col=1)
    fig.update_yaxes(tickformat=".0%", range=[0, 1], title="share of push time", row=1, col=2)
    fig.update_yaxes(
        **log_axis([r["items"] for r in rows], "count", title="items (messages) per iteration"), row=1, col=3
    )
    first = rows[0]
    fig.update_layout(
        title=title
        or f"{first['describe'].split(' (')[0]} on {first['model']}: the trade-off of {axis_title.split(' (')[0]}",
        height=440,
    )
    return fig
