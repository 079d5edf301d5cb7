"""The widgets and captions several pages share: a size, a link, a backend (each in the URL),
and the honest caption of what really ran."""

import streamlit as st
from cached import MAX_MEMORY_BYTES
from urlstate import url_key

from dlsys.comm import BACKENDS
from dlsys.machine.net import LINK_PRESETS
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
