"""Widget state in the page URL: a widget created with ``key=url_key("coll_ranks", between=(2, 16))``
keeps its value in the URL (``?coll_ranks=16``): a link restores it, and every change updates
the address bar (``streamlit_app.py`` calls ``save_url`` after each run).

A link's value is checked, key by key, against what its widget accepts before the widget
exists: a value it refuses (``?coll_ranks=many``, ``?presenter=maybe``) is dropped alone, the
widget shows its default, the link's other values stay, and one warning names every dropped
key, its value and what is accepted. (Streamlit itself would either raise, a traceback, or
silently show another value: a slider raises on "many", a selectbox shows its first option.)
"""

import json
import math
from collections.abc import Sequence
from urllib.parse import urlsplit

import streamlit as st

_URL_KEYS = "_url_keys"  # session state: the keys bound to the URL in this run
_URL_RESTORED = "_url_restored"  # session state: unchecked keys whose value came from the URL, not yet drawn
_URL_REJECTED = "_url_rejected"  # session state: key -> (the link's text, what is accepted), said in this run
_URL_PENDING = "_url_pending"  # session state: the rejections of a run that was restarted, said in the next
_NO_MATCH = object()


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


def _option(value, options: Sequence):
    """The option equal to ``value`` (1 == 1.0, but True is no number), else _NO_MATCH."""
    return next((o for o in options if o == value and isinstance(o, bool) == isinstance(value, bool)), _NO_MATCH)


def _listing(options: Sequence) -> str:
    shown = [_to_url(o) for o in options]
    return ", ".join(shown if len(shown) <= 12 else [*shown[:4], "...", *shown[-2:]])


def _accept(value, options: Sequence | None, between: tuple | None, many: bool):
    """(the widget's value, None) if the widget accepts ``value``, else (None, what it accepts)."""
    if options is not None and many:
        chosen = [_option(v, options) for v in value] if isinstance(value, list) else [_NO_MATCH]
        if _NO_MATCH in chosen:
            return None, f'must be a list of some of {_listing(options)} (e.g. ["{_to_url(options[0])}"])'
        return chosen, None
    if options is not None:
        chosen = _option(value, options)
        return (None, f"must be one of {_listing(options)}") if chosen is _NO_MATCH else (chosen, None)
    if between is not None:
        low, high = between
        integer = isinstance(low, int) and isinstance(high, int)
        number = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
        if not number or isinstance(value, bool) or not low <= value <= high:
            return None, f"must be {'an integer' if integer else 'a number'} in {low:g}..{high:g}"
        return (value if integer else float(value)), None
    return value, None


def url_key(key: str, options: Sequence | None = None, *, between: tuple | None = None, many: bool = False) -> str:
    """``key``, bound to the URL's query parameter of the same name: on a session's first run
    the URL's value becomes the widget's (before the widget exists, as Streamlit requires),
    and ``save_url`` writes the widget's value back after each run. Use it as the widget's
    key, with what the widget accepts: ``options`` (a selectbox's, radio's, select_slider's or
    tabs' values, ``[False, True]`` for a toggle; ``many=True``: a multiselect's), or
    ``between=(low, high)`` (a slider's or number_input's range; integers if both are):
    ``st.slider("ranks p", 2, 16, 8, key=url_key("coll_ranks", between=(2, 16)))``.
    A value outside them is dropped and named (``start_url_run``); a key without them keeps
    the old rule: a value its widget raises on drops the link's unchecked values."""
    if key not in st.session_state and key in st.query_params:
        text = st.query_params[key]
        value, accepted = _accept(_from_url(text), options, between, many)
        if accepted:
            st.session_state.setdefault(_URL_REJECTED, {})[key] = (text, accepted)
        else:
            st.session_state[key] = value
            if options is None and between is None:
                st.session_state.setdefault(_URL_RESTORED, {})[key] = text
    st.session_state.setdefault(_URL_KEYS, set()).add(key)
    return key


def reject_url_values(exc: Exception) -> None:
    """A page failed: if a link set some unchecked widget, forget those values and run the
    page again with their defaults, saying so; else re-raise."""
    restored = st.session_state.pop(_URL_RESTORED, {})
    if not restored:
        raise exc
    for key in restored:
        st.session_state.pop(key, None)
        st.query_params.pop(key, None)
    refused = {k: (text, "its widget refused it") for k, text in restored.items()}
    st.session_state[_URL_PENDING] = st.session_state.get(_URL_REJECTED, {}) | refused
    st.rerun()


def start_url_run():
    """Called before a page runs: only the keys it binds go into its URL. Returns the place,
    at the top of the page, where ``save_url`` names the link's refused values."""
    st.session_state[_URL_KEYS] = set()
    st.session_state[_URL_REJECTED] = st.session_state.pop(_URL_PENDING, {})
    return st.empty()


def save_url(notice) -> None:
    """The URL's query parameters := the values of this run's bound widgets; ``notice`` (from
    ``start_url_run``) names the link's values that were not used. The values a link set have
    been drawn by now: a later failure is the page's, not the link's."""
    rejected = st.session_state.get(_URL_REJECTED, {})
    for key, text in st.session_state.pop(_URL_RESTORED, {}).items():  # unchecked: did the widget keep it?
        if key in st.session_state and _to_url(st.session_state[key]) != text:
            rejected[key] = (text, "its widget does not offer it")
    if rejected:
        notice.warning(
            "This link's values that cannot be used were dropped (those widgets show their defaults): "
            + "; ".join(f"{k}={text}: {accepted}" for k, (text, accepted) in rejected.items())
            + "."
        )
    values = {k: _to_url(st.session_state[k]) for k in st.session_state.get(_URL_KEYS, ()) if k in st.session_state}
    for k in [k for k in st.query_params if k not in values]:
        del st.query_params[k]
    for k, v in values.items():
        if st.query_params.get(k) != v:
            st.query_params[k] = v


def unknown_page(names: Sequence[str]) -> str | None:
    """The path the browser asked for, if it names none of the app's pages (``names``, the
    url paths; Home's is ""). Streamlit then runs the default page and its browser code
    shows a "Page not found" dialog without the page's name; the default page names it."""
    url = st.context.url
    if url is None:
        return None
    path = urlsplit(url).path.strip("/")
    base = st.get_option("server.baseUrlPath").strip("/")
    if base and (path == base or path.startswith(base + "/")):
        path = path[len(base) :].strip("/")
    return None if path in names else "/" + path
