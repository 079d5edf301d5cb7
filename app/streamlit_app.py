"""dlsys in class: watch the messages of distributed deep learning flow.

Start it with ``make app`` (Streamlit on 127.0.0.1, ``PORT=8502 make app`` for another port).
Every page is thin: widgets -> a cached ``dlsys.experiments`` call -> ``dlsys.viz`` figures.
A new page is one file in app/views/ (not pages/: that name switches Streamlit to its
old directory-based navigation when a page URL is opened first) and one line in PAGES.
"""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # pages import shared.py (AppTest does not add it)

from shared import ICONS  # noqa: E402  (after the path is set)

st.set_page_config(page_title="dlsys", page_icon=ICONS["collectives"], layout="wide")

PAGES = {
    "dlsys": [st.Page("views/home.py", title="Home", icon=ICONS["home"], default=True)],
    "Communication": [
        st.Page("views/collectives.py", title="Collectives", icon=ICONS["collectives"]),
        st.Page("views/cost_model.py", title="Cost model explorer", icon=ICONS["cost_model"]),
        st.Page("views/ps_vs_ring.py", title="PS vs ring", icon=ICONS["ps_vs_ring"]),
    ],
    "Training": [st.Page("views/training.py", title="Distributed training", icon=ICONS["training"]),
                 st.Page("views/compression.py", title="Gradient compression", icon=ICONS["compression"]),
                 st.Page("views/large_batches.py", title="Large batches", icon=ICONS["large_batches"]),
                 st.Page("views/schedule.py", title="Overlap and scheduling", icon=ICONS["schedule"])],
    "Under the hood": [st.Page("views/performance.py", title="Real bytes and scale", icon=ICONS["performance"])],
}

st.navigation(PAGES).run()
