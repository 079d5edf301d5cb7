"""The one figure style of dlsys: readable on a 1280x720 projector at the back of a room.

Importing any figure module of ``dlsys.viz`` imports this one, which registers the plotly
template ``"dlsys"`` and makes it the default, so every figure built afterwards (app,
lessons, CLI) gets it without asking:
- fonts of 16 px (ticks 14 px, titles 20 px): plotly's 12 px is unreadable projected;
- the title left-aligned with its own margin (``automargin``), so no annotation, legend or
  subplot title can sit on it;
- the legend outside the plot area, to the right, where it cannot cover a subplot title
  (a legend above the plots is what covered "ASP" on the training page);
- no minor tick labels: log axes get their ticks from ``log_axis``.

The app draws figures with ``st.plotly_chart(..., theme=None)``: Streamlit's own theme
would otherwise overwrite the template's fonts with its 12 px ones.

Numbering, one convention everywhere (docs/app.md): ranks are 0-based; on parameter-server
and training pages a rank is also named by its role, "worker w (rank r)" and
"server s (rank r)", with w and s 0-based; the servers take the first ranks.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from ..units import byte_ticks, count_ticks, decade_ticks, time_ticks

FONT_SIZE, TICK_SIZE, TITLE_SIZE = 16, 14, 20
TEMPLATE = "dlsys"
PRESENTER_TEMPLATE = "dlsys-presenter"  # the app's presenter mode: every text PRESENTER_SCALE times larger
PRESENTER_SCALE = 1.4
# lines that may lie on each other (one formula, workers in lockstep) take a dash each
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _template(scale: float = 1.0) -> go.layout.Template:
    template = go.layout.Template(pio.templates["plotly_white"])
    font, tick, title = (round(size * scale) for size in (FONT_SIZE, TICK_SIZE, TITLE_SIZE))
    axis = dict(
        automargin=True,
        tickfont=dict(size=tick),
        title=dict(font=dict(size=font)),
        showline=True,
        linecolor="#888",
        ticks="outside",
        minor=dict(showgrid=False, ticks=""),
    )
    template.layout.update(
        font=dict(size=font, family="Source Sans, Arial, sans-serif"),
        title=dict(font=dict(size=title), x=0, xanchor="left", xref="paper", automargin=True),
        margin=dict(l=10, r=10, t=60, b=10),
        legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top", font=dict(size=tick)),
        hoverlabel=dict(font=dict(size=tick)),
        annotationdefaults=dict(font=dict(size=font)),
        # animation controls keep plotly's compact sizes: at 16 px the Play/Pause buttons grow
        # into the slider's "virtual time" label, and the slider's many step labels collide
        updatemenudefaults=dict(font=dict(size=tick)),
        sliderdefaults=dict(font=dict(size=round(12 * scale)), currentvalue=dict(font=dict(size=tick))),
        xaxis=axis,
        yaxis=axis,
    )
    return template


def scale_fonts(fig: go.Figure, scale: float) -> go.Figure:
    """``fig`` with every font size it sets itself (a node's label, a button, a legend, in
    the layout, its traces and its animation frames) ``scale`` times larger: a template
    only sizes the texts a figure leaves unset. Per-point sizes (arrays) scale too."""

    def scaled(node, in_font: bool = False):
        if isinstance(node, dict):
            return {
                k: (
                    _times(v, scale)
                    if in_font and k == "size"
                    else scaled(v, k.endswith("font") or (in_font and k == "font"))
                )
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [scaled(v) for v in node]
        return node

    spec = fig.to_dict()
    template = spec["layout"].pop("template", None)
    spec = scaled(spec)
    if template is not None:
        spec["layout"]["template"] = template
    return go.Figure(spec, skip_invalid=False)


def _times(size, scale: float):
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return round(size * scale, 1)
    if isinstance(size, (list, tuple)):
        return [_times(s, scale) for s in size]
    return size


pio.templates[TEMPLATE] = _template()
pio.templates[PRESENTER_TEMPLATE] = _template(PRESENTER_SCALE)
pio.templates.default = TEMPLATE

# One colour per concept on every page and in every tab: a colour that means compute in one
# figure never means a message, a phase or a send in another (docs/app.md). Series that are
# just categories (libraries, schedules, methods) take their own palettes.
CONCEPT_COLOURS = {
    "compute": "#4c78a8",
    "forward": "#4c78a8",  # a rank's own work; a forward pass is compute
    "backward": "#1d3f6e",
    "weight gradient": "#9ecae9",  # the other passes: darker, lighter compute
    "send": "#f58518",  # the sender's CPU: per-message overhead, copies into the kernel
    "recv": "#54a24b",  # the receiver's CPU
    "wire": "#b279a2",  # bytes on a link: a message travelling, a communication time
    "idle": "#d9d9d9",  # waiting: a blocked receive, a pipeline's bubble
}
# a span's kind (dlsys.comm.Span): a timeline's bars, and the outline of a node paying it in an animation
KIND_COLORS = {
    kind: CONCEPT_COLOURS[concept]
    for kind, concept in (("compute", "compute"), ("send", "send"), ("wait", "idle"), ("recv", "recv"))
}

_TICKS = {"bytes": byte_ticks, "seconds": time_ticks, "count": count_ticks, None: decade_ticks}


def log_axis(values, unit: str | None = None, **axis) -> dict:
    """Properties of a log axis over ``values`` (update_xaxes/update_yaxes keyword arguments)
    with labelled major ticks only: binary sizes ("bytes": 1 KiB, 32 KiB, 1 MiB...),
    decades of seconds ("seconds": 1 µs, 10 µs...), powers of two ("count": ranks,
    workers) or plain decades (None). Extra keyword arguments are passed through."""
    positive = [v for v in values if v is not None and v > 0]
    tickvals, ticktext = _TICKS[unit](min(positive), max(positive))
    return dict(type="log", tickmode="array", tickvals=tickvals, ticktext=ticktext, **axis)


def rank_name(rank: int) -> str:
    """A rank of a collective: "rank 3"."""
    return f"rank {rank}"


def role_names(workers: int, servers: int = 0) -> list[str]:
    """Names of every rank of a parameter-server or training run, indexed by rank: the
    servers first ("server 0 (rank 0)"), then the workers ("worker 0 (rank 1)")."""
    return [f"server {s} (rank {s})" for s in range(servers)] + [
        f"worker {w} (rank {servers + w})" for w in range(workers)
    ]
