"""Widget state in the page URL: a widget created with ``key=url_key("coll_ranks")`` keeps
its value in the URL (``?coll_ranks=16``): a link restores it, and every change updates the
address bar (``streamlit_app.py`` calls ``save_url`` after each run)."""

import json

import streamlit as st

_URL_KEYS = "_url_keys"  # session state: the keys bound to the URL in this run
_URL_RESTORED = "_url_restored"  # session state: keys whose value came from the URL, not yet drawn
_URL_REJECTED = "_url_rejected"  # session state: a link's values a widget refused, to say so once


def _to_url(value) -> str:
    """Strings as they are (readable links), unless they would read back as another type."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value)


def _from_url(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def url_key(key: str) -> str:
    """``key``, bound to the URL's query parameter of the same name: on a session's first run
    the URL's value becomes the widget's (before the widget exists, as Streamlit requires),
    and ``save_url`` writes the widget's value back after each run. Use it as the widget's
    key: ``st.slider("ranks p", 2, 16, 8, key=url_key("coll_ranks"))``."""
    if key not in st.session_state and key in st.query_params:
        st.session_state[key] = _from_url(st.query_params[key])
        st.session_state.setdefault(_URL_RESTORED, {})[key] = st.query_params[key]
    st.session_state.setdefault(_URL_KEYS, set()).add(key)
    return key


def reject_url_values(exc: Exception) -> None:
    """A page failed: if a link set some widget (a hand-edited ``?coll_ranks=many``), forget
    the link's values and run the page again with its defaults, saying so; else re-raise."""
    restored = st.session_state.pop(_URL_RESTORED, {})
    if not restored:
        raise exc
    for key in restored:
        st.session_state.pop(key, None)
        st.query_params.pop(key, None)
    st.session_state[_URL_REJECTED] = restored
    st.rerun()


def start_url_run() -> None:
    """Called before a page runs: only the keys it binds go into its URL."""
    st.session_state[_URL_KEYS] = set()
    if rejected := st.session_state.pop(_URL_REJECTED, None):
        st.warning("This link's " + ", ".join(f"{k}={v}" for k, v in rejected.items()) +
                   " could not be used; the page shows its defaults instead.")


def save_url() -> None:
    """The URL's query parameters := the values of this run's bound widgets. The values a
    link set have been drawn by now: a later failure is the page's, not the link's."""
    st.session_state.pop(_URL_RESTORED, None)
    values = {k: _to_url(st.session_state[k]) for k in st.session_state.get(_URL_KEYS, ()) if k in st.session_state}
    for k in [k for k in st.query_params if k not in values]:
        del st.query_params[k]
    for k, v in values.items():
        if st.query_params.get(k) != v:
            st.query_params[k] = v
