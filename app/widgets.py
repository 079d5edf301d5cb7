"""The widgets and captions several pages share: a size, a link, a backend, a declared option
(each in the URL), and the honest caption of what really ran."""

import math
from collections.abc import Sequence

import streamlit as st
from cached import MAX_MEMORY_BYTES
from urlstate import url_key

from dlsys.comm import BACKENDS
from dlsys.machine.net import LINK_PRESETS
from dlsys.options import Option
from dlsys.units import format_bytes

SIZES = [4, 64, 2**10, 16 * 2**10, 256 * 2**10, 2**20, 4 * 2**20, 16 * 2**20, 64 * 2**20, 256 * 2**20, 2**30, 4 * 2**30]


def size_slider(label: str, key: str, default: int = 64 * 2**20) -> int:
    """A size in bytes, 4 B to 4 GiB (costs are virtual, so huge sizes are cheap); in the URL."""
    return st.select_slider(
        label,
        SIZES,
        value=default,
        format_func=format_bytes,
        key=url_key(key, SIZES),
        help=f"Bytes per rank. Real arrays stay small (at most {format_bytes(MAX_MEMORY_BYTES)} "
        "for all ranks); the virtual time is computed for the size chosen here.",
    )


def link_select(key: str, default: str = "tcp-10gbe") -> str:
    """A link preset name, in the URL; the help text cites the preset's source."""
    names = list(LINK_PRESETS)
    return st.selectbox(
        "link",
        names,
        index=names.index(default),
        key=url_key(key, names),
        help="; ".join(f"{n}: {l.source}" for n, l in LINK_PRESETS.items()),
    )


def real_data_note(record: dict) -> str:
    """An honest caption: what really ran, and how the virtual time was charged."""
    real = format_bytes(record["real_nbytes"])
    low, high = record["scale_min"], record["scale_max"]
    if high == 1:
        return f"Real run: {real} per rank of real float32 data moved between {record['ranks']} ranks (threads)."
    stands = f"{low:,}" if low == high else f"{low:,} to {high:,} (one element per ring block)"
    return (
        f"Real run on {real} per rank of real float32 data ({record['ranks']} ranks, threads); every real "
        f"element stands for {stands} elements, and every message is charged at its logical size, so the "
        f"virtual times and byte counts are those of {format_bytes(record['nbytes'])} (exact)."
    )


def backend_select(key: str) -> str:
    """The backends that can run here (mpi where mpi4py and mpirun are installed), in the URL."""
    names = [name for name, backend in BACKENDS.items() if backend.unavailable() is None]
    return st.selectbox(
        "backend",
        names,
        key=url_key(key, names),
        help="Where the ranks run: threads of this server, OS processes (shared memory), or MPI "
        "processes started by mpirun (docs/mpi.md). Values and virtual times are the same on "
        "each; only the wall time differs.",
    )


def option_input(
    option: Option,
    key: str,
    label: str = "",
    *,
    values: Sequence | None = None,
    value=None,
    low: float | None = None,
    high: float | None = None,
    unit: float = 1.0,
    selectbox: bool = False,
    note: str = "",
    where=st,
    **kwargs,
):
    """The widget of an algorithm's declared ``option`` (``dlsys.options.Option``), in the URL
    under ``key``: labelled ``label`` (else the option's axis title, else its name), its help
    the option's (then ``note``), starting at ``value`` (else the option's default). With
    ``values``: a select_slider of them (a selectbox if ``selectbox``); else a slider over the
    option's range, or the part ``low``..``high`` the page shows, or a number input where the range
    has no top. Every value offered, times ``unit`` (the widget's unit in the option's: 1e6 for
    MB of a size in bytes), must be in the option's range: a page cannot offer what the
    algorithm refuses."""
    label = label or option.axis_title or option.name.replace("_", " ")
    help = f"{option.help}. {note}" if note else option.help
    value = option.default if value is None else value
    if values is not None:
        _check_in_range(option, [v * unit for v in values])
        if selectbox:
            return where.selectbox(
                label, values, index=list(values).index(value), key=url_key(key, values), help=help, **kwargs
            )
        return where.select_slider(label, values, value=value, key=url_key(key, values), help=help, **kwargs)
    kind = int if option.kind == "integer" else float
    low, high = kind(option.low if low is None else low), option.high if high is None else high
    _check_in_range(option, [low * unit, high * unit])
    if math.isinf(high):  # the URL's check needs an integer top for an integer (a number input's largest)
        between = (low, 2**53 if kind is int else high)
        return where.number_input(
            label, min_value=low, value=kind(value), key=url_key(key, between=between), help=help, **kwargs
        )
    high = kind(high)
    return where.slider(label, low, high, kind(value), key=url_key(key, between=(low, high)), help=help, **kwargs)


def _check_in_range(option: Option, values) -> None:
    for v in values:
        above = v > option.low if option.low_open else v >= option.low
        if not (above and v <= option.high):
            raise ValueError(f"{option.name}: the page offers {v!r}, outside {option.accepted}")
