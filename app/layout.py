"""The sidebar every page shares (presenter mode and the figures' download format, both in the
URL), what presenter mode changes on the page (PRESENTER_CSS), and the pages' paragraphs,
which presenter mode shortens (caption, markdown)."""

import re

import streamlit as st
from urlstate import url_key

from dlsys.viz import style

PRESENTER, FIGURE_FORMAT = "presenter", "figure_format"  # the sidebar's keys
FIGURE_FORMATS = ["png", "svg"]
# Every page, every width: what Streamlit would cut with an ellipsis or scroll sideways (a
# metric's "142 ...", a select box's "allre", a toggle's label, the policies' chips, the
# navigation's titles) wraps onto another line instead (a multiselect's box grows to hold its
# chips' rows: Streamlit's fixed height hid them, over the widgets below), and code in a caption keeps the minimum
# font size (tests/app/test_browser.py's MIN_FONT_PX). tests/app/test_browser.py measures both.
PAGE_CSS = """<style>
[data-testid="stMetric"] *, [data-baseweb="select"] *, [data-testid="stSidebarNav"] *,
[data-testid="stWidgetLabel"] *, [data-testid="stTab"] *, [data-testid="stPageLink"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  overflow-wrap: anywhere; }
[data-testid="stMultiSelectTagsContainer"] { flex-wrap: wrap !important; height: auto !important;
  max-height: none !important; }
[data-testid="stMultiSelectTagsContainer"] span { max-width: none !important; text-overflow: clip !important; }
div:has(> [data-testid="stMultiSelectTagsContainer"]), div:has(> div > [data-testid="stMultiSelectTagsContainer"]) {
  height: auto !important; max-height: none !important; }
code:not(pre *) { font-size: 0.95em !important; }
</style>"""
# Streamlit sizes its text in rem: a larger root font enlarges every text, widget and margin.
# The page gives the content the margins Streamlit's wide layout keeps (5rem a side), a metric's
# number shrinks to fit five in a row at 1280 px, and a code block's text keeps the minimum size.
PRESENTER_CSS = f"""<style>
html {{ font-size: {round(16 * style.PRESENTER_SCALE)}px; }}
[data-testid="stMainBlockContainer"] {{ padding: 3rem 1.5rem 4rem; max-width: none; }}
[data-testid="stHeader"] {{ height: 2.5rem; min-height: 2.5rem; }}
[data-testid="stMetricValue"] {{ font-size: 1.75rem; }}
pre, pre code {{ font-size: 0.85rem !important; }}
</style>"""


def sidebar() -> None:
    """The sidebar every page shares: presenter mode and the figures' download format, both in the URL."""
    with st.sidebar:
        presenter = st.toggle(
            "presenter",
            key=url_key(PRESENTER, [False, True]),
            help="For a projector: larger text everywhere, larger figures.",
        )
        st.radio(
            "figure downloads",
            FIGURE_FORMATS,
            horizontal=True,
            key=url_key(FIGURE_FORMAT, FIGURE_FORMATS),
            help="The camera button above each figure (hover over it) downloads it as PNG or SVG.",
        )
        st.caption("The address bar holds this page's settings: copy it to share this exact view.")
    st.html(PAGE_CSS + (PRESENTER_CSS if presenter else ""))
    # presenter mode opens with the sidebar collapsed: the page gets the projector's width
    st.set_page_config(initial_sidebar_state="collapsed" if presenter else "auto")


# In presenter mode a paragraph longer than this shows its first sentence; the rest waits in an
# expander, for the teacher to open: the class reads the figure, not a column of text.
PRESENTER_PARAGRAPH_CHARS = 200
_SENTENCE_END = re.compile(r"(?<=[.:;!?])\s+(?=[A-Z*(])")


def _paragraph(show, text: str, **kwargs) -> None:
    """``show(text)``, or in presenter mode a long one-paragraph text as its first sentence
    and an expander ("more") with the rest."""
    if not st.session_state.get(PRESENTER) or len(text) <= PRESENTER_PARAGRAPH_CHARS or "\n" in text:
        show(text, **kwargs)
        return
    parts = _SENTENCE_END.split(text, maxsplit=1)
    if len(parts) == 1:  # one long sentence: nothing shorter says it
        show(text, **kwargs)
        return
    show(parts[0], **kwargs)
    with st.expander("more"):
        show(parts[1])


def caption(text: str, **kwargs) -> None:
    """st.caption, with presenter mode's expander for a long one (PRESENTER_PARAGRAPH_CHARS)."""
    _paragraph(st.caption, text, **kwargs)


def markdown(text: str, **kwargs) -> None:
    """st.markdown, with presenter mode's expander for a long paragraph (PRESENTER_PARAGRAPH_CHARS)."""
    _paragraph(st.markdown, text, **kwargs)
