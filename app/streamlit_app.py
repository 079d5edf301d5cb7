"""dlsys in class: watch the messages of distributed deep learning flow.

Start it with ``make app`` (Streamlit on 127.0.0.1, ``PORT=8502 make app`` for another port).
Every page is thin: widgets -> a cached ``dlsys.experiments`` call -> ``dlsys.viz`` figures.
A new page is one file in app/pages/ and one line in PAGES.
"""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # pages import shared.py (AppTest does not add it)

st.set_page_config(page_title="dlsys", page_icon="🔁", layout="wide")

PAGES = {
    "dlsys": [st.Page("pages/home.py", title="Home", icon="🏠", default=True)],
    "Communication": [
        st.Page("pages/collectives.py", title="Collectives", icon="🔁"),
        st.Page("pages/cost_model.py", title="Cost model explorer", icon="📈"),
        st.Page("pages/ps_vs_ring.py", title="PS vs ring", icon="🕸️"),
    ],
}

st.navigation(PAGES).run()
