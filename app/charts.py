"""Figures and files out of a page: a dlsys.viz figure drawn in the dlsys template (larger in
presenter mode) with its download button, and the download buttons of a trace and its records."""

import json

import plotly.graph_objects as go
import streamlit as st
from layout import FIGURE_FORMAT, FIGURE_FORMATS, PRESENTER
from player import is_animation, player

from dlsys import experiments
from dlsys.viz import style

DEFAULT_HEIGHT_PX = 450  # plotly's, for a figure that sets none
# a 720p projector, less the app's header (presenter mode's: layout.PRESENTER_CSS), the player's
# toolbar on two lines (a long step caption wraps) and a margin
ANIMATION_MAX_HEIGHT_PX = 580


def figure_config(key: str) -> dict:
    """plotly's modebar: its camera button downloads the figure, in the sidebar's format
    (PNG at twice the screen's pixels, or SVG for slides), named after the chart. Drawn by
    plotly.js in the browser: nothing is fetched, nothing new is installed."""
    fmt = st.session_state.get(FIGURE_FORMAT, FIGURE_FORMATS[0])
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt, "filename": key, "scale": 2 if fmt == "png" else 1},
    }


def chart(fig: go.Figure, key: str) -> None:
    """Draw a dlsys.viz figure in the "dlsys" template (dlsys/viz/style.py), whatever plotly's
    default was when it was built (Streamlit sets its own default when it is imported), and
    with theme=None, because Streamlit's theme would replace the template's projector-sized
    fonts with its own. In presenter mode, every text and the height grow by
    style.PRESENTER_SCALE, including the sizes the figure sets itself. An animation is at most
    ANIMATION_MAX_HEIGHT_PX high in either mode, and goes to the player (app/player.py), whose
    buttons and keys step it back and forth."""
    presenter = bool(st.session_state.get(PRESENTER))
    height = fig.layout.height or DEFAULT_HEIGHT_PX
    if presenter:
        height = round(height * style.PRESENTER_SCALE)
        fig = style.scale_fonts(fig, style.PRESENTER_SCALE)
    if fig.frames:  # an animation and its controls fit one 720p screen: no scrolling between Play and the picture
        height = min(height, ANIMATION_MAX_HEIGHT_PX)
    fig.update_layout(
        template=style.PRESENTER_TEMPLATE if presenter else style.TEMPLATE,
        height=height if presenter or fig.frames else fig.layout.height,
    )
    if is_animation(fig):
        player(fig, key, figure_config(key), style.PRESENTER_SCALE if presenter else 1.0)
    else:
        st.plotly_chart(fig, key=key, theme=None, config=figure_config(key))


def summary_row(record: dict) -> dict:
    """The record's scalar fields (no trace, no per-rank lists): one CSV row."""
    return {k: v for k, v in record.items() if isinstance(v, (int, float, str))}


def downloads(trace, records: list[dict], name: str) -> None:
    """Download buttons: the trace as Chrome trace JSON (Perfetto), its messages and spans
    as CSV, and the experiment's records as CSV. Files are built only when clicked."""
    spans, messages = trace.records()
    cols = st.columns(4)
    cols[0].download_button(
        "Chrome trace JSON (Perfetto)",
        lambda: json.dumps(trace.to_chrome()),
        f"{name}.trace.json",
        "application/json",
        on_click="ignore",
        key=f"{name}-chrome",
        help="Open in https://ui.perfetto.dev or chrome://tracing (pid = rank, times in µs).",
    )
    cols[1].download_button(
        "messages CSV",
        lambda: experiments.to_csv(messages),
        f"{name}.messages.csv",
        "text/csv",
        on_click="ignore",
        key=f"{name}-messages",
    )
    cols[2].download_button(
        "spans CSV",
        lambda: experiments.to_csv(spans),
        f"{name}.spans.csv",
        "text/csv",
        on_click="ignore",
        key=f"{name}-spans",
    )
    cols[3].download_button(
        "records CSV",
        lambda: experiments.to_csv(records),
        f"{name}.records.csv",
        "text/csv",
        on_click="ignore",
        key=f"{name}-records",
    )
