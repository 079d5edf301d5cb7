"""The sidebar every page shares: presenter mode and the figures' download format, both in the URL."""

import streamlit as st

from dlsys.viz import style
from urlstate import url_key

PRESENTER, FIGURE_FORMAT = "presenter", "figure_format"  # the sidebar's keys
FIGURE_FORMATS = ["png", "svg"]
# Streamlit sizes its text in rem: a larger root font enlarges every text, widget and margin.
PRESENTER_CSS = f"<style>html {{ font-size: {round(16 * style.PRESENTER_SCALE)}px; }}</style>"


def sidebar() -> None:
    """The sidebar every page shares: presenter mode and the figures' download format, both in the URL."""
    with st.sidebar:
        presenter = st.toggle("presenter", key=url_key(PRESENTER, [False, True]),
                              help="For a projector: larger text everywhere, larger figures.")
        st.radio("figure downloads", FIGURE_FORMATS, horizontal=True, key=url_key(FIGURE_FORMAT, FIGURE_FORMATS),
                 help="The camera button above each figure (hover over it) downloads it as PNG or SVG.")
        st.caption("The address bar holds this page's settings: copy it to share this exact view.")
    if presenter:
        st.html(PRESENTER_CSS)
