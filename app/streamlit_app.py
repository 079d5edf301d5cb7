"""dlsys in class: watch the messages of distributed deep learning flow.

Start it with ``make app`` (Streamlit on 127.0.0.1, ``PORT=8502 make app`` for another port).
Every page is thin: widgets -> a cached ``dlsys.experiments`` call -> ``dlsys.viz`` figures.
A new page is one file in app/views/ (not pages/: that name switches Streamlit to its
old directory-based navigation when a page URL is opened first) and one line in PAGES.
Widget state lives in the URL (``shared.url_key``): a link reproduces a page as it was.
"""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # pages import shared.py (AppTest does not add it)

import shared  # noqa: E402  (after the path is set)

st.set_page_config(page_title="dlsys", page_icon=shared.ICONS["collectives"], layout="wide")

PAGES = {
    "dlsys": [st.Page("views/home.py", title="Home", icon=shared.ICONS["home"], default=True)],
    "Communication": [
        st.Page("views/collectives.py", title="Collectives", icon=shared.ICONS["collectives"]),
        st.Page("views/cost_model.py", title="Cost model explorer", icon=shared.ICONS["cost_model"]),
        st.Page("views/ps_vs_ring.py", title="PS vs ring", icon=shared.ICONS["ps_vs_ring"]),
    ],
    "Training": [st.Page("views/training.py", title="Distributed training", icon=shared.ICONS["training"]),
                 st.Page("views/compression.py", title="Gradient compression", icon=shared.ICONS["compression"]),
                 st.Page("views/large_batches.py", title="Large batches", icon=shared.ICONS["large_batches"]),
                 st.Page("views/schedule.py", title="Overlap and scheduling", icon=shared.ICONS["schedule"])],
    "Under the hood": [st.Page("views/performance.py", title="Real bytes and scale", icon=shared.ICONS["performance"]),
                       st.Page("views/network_stack.py", title="Network stack and IO",
                               icon=shared.ICONS["network_stack"])],
    "Case studies": [st.Page("views/taihulight.py", title="Case study: TaihuLight", icon=shared.ICONS["taihulight"])],
}

shared.start_url_run()
shared.sidebar()
try:
    st.navigation(PAGES).run()
except Exception as exc:  # noqa: BLE001 - st.stop and st.rerun are BaseExceptions and pass through
    shared.reject_url_values(exc)
finally:  # also after st.stop(): the URL says what the page shows
    shared.save_url()
