"""dlsys in class: watch the messages of distributed deep learning flow.

Start it with ``make app`` (Streamlit on 127.0.0.1, ``PORT=8502 make app`` for another port).
Every page is thin: widgets -> a cached ``dlsys.experiments`` call (cached.py) -> ``dlsys.viz``
figures (charts.py). A new page is one file in app/views/ (not pages/: that name switches
Streamlit to its old directory-based navigation when a page URL is opened first) and one
entry in PAGES (pages.py). Widget state lives in the URL (``urlstate.url_key``): a link
reproduces a page as it was.
"""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # pages import app/*.py (AppTest does not add it)

import urlstate  # noqa: E402  (after the path is set)
from layout import sidebar  # noqa: E402
from pages import BY_NAME, PAGES  # noqa: E402

st.set_page_config(page_title="dlsys", page_icon=BY_NAME["collectives"].icon, layout="wide")

NAVIGATION: dict[str, list] = {}
for page in PAGES:
    NAVIGATION.setdefault(page.section, []).append(
        st.Page(page.path, title=page.title, icon=page.icon, default=page is PAGES[0])
    )

notice = urlstate.start_url_run()
sidebar()
try:
    st.navigation(NAVIGATION).run()
except Exception as exc:  # noqa: BLE001 - st.stop and st.rerun are BaseExceptions and pass through
    urlstate.reject_url_values(exc)
finally:  # also after st.stop(): the URL says what the page shows
    urlstate.save_url(notice)
