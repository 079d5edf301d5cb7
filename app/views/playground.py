"""Playground: a student's own rank program, run in the grader's sandbox, its messages and time shown."""

import streamlit as st
from charts import chart
from layout import caption
from urlstate import url_key
from widgets import link_select

from dlsys.grading import playground as pg
from dlsys.machine.topology import TOPOLOGY_PRESETS, get_network
from dlsys.units import format_bytes, format_seconds
from dlsys.viz import comm as viz
from dlsys.viz.animation import message_animation

SIZES = [8, 64, 2**10, 16 * 2**10, 256 * 2**10, 2**20]


@st.cache_data(max_entries=64, show_spinner=False)
def run(source: str, ranks: int, link: str, topology: str, nbytes: int) -> pg.PlaygroundRun:
    """The sandboxed run (deterministic: the same program and settings give the same run)."""
    return pg.run_program(source, ranks, link, topology, nbytes)


st.title("Playground")
caption(
    "Write a rank program, mpi4py style: `def program(comm): ...` with `comm.rank`, `comm.size`, "
    "`comm.send(x, dest=r)`, `comm.recv(source=r)`, `ssend`, `isend`/`irecv`, `sendrecv` (mpi4py's "
    "signatures; `MPI.ANY_SOURCE`, `MPI.ANY_TAG`, `MPI.Status`) and `dlsys.collectives`; `np` is numpy and `n` the "
    f"bytes per rank chosen below. It runs in the grader's sandbox (a separate, contained process; "
    f"{pg.TIME_LIMIT_S:g} s, {format_bytes(pg.MEMORY_BYTES)} of memory), never in this server."
)

cols = st.columns([1.6, 1, 1.2, 1.2, 1.4])
starter = cols[0].selectbox("starter program", list(pg.STARTERS), key=url_key("pg_starter", list(pg.STARTERS)))
ranks = cols[1].slider("ranks p", 2, pg.MAX_RANKS, 4, key=url_key("pg_ranks", between=(2, pg.MAX_RANKS)))
with cols[2]:
    link_name = link_select("pg_link")
topology = cols[3].selectbox(
    "topology",
    TOPOLOGY_PRESETS,
    key=url_key("pg_topology", list(TOPOLOGY_PRESETS)),
    help="flat: every pair on the link; the others: dlsys.machine.topology.get_network.",
)
nbytes = cols[4].select_slider(
    "n, bytes per rank", SIZES, value=2**10, format_func=format_bytes, key=url_key("pg_n", SIZES)
)

source_text, formula_text = pg.STARTERS[starter]
source = st.text_area("your program (Ctrl+Enter runs it)", source_text, height=300, key=f"pg_code_{starter}")
formula = st.text_input(
    "your closed form, in p, n, alpha, beta (log2, ceil, floor allowed)",
    formula_text,
    key=f"pg_formula_{starter}",
    placeholder="e.g. (p - 1) * (alpha + n * beta)",
    help="Numbers, + - * / // % **, p, n (bytes), alpha (s), beta (s per byte), log2, ceil, "
    "floor; nothing else is evaluated. The ring's textbook form is exact when p divides "
    "the n/8 float64 elements (equal blocks); the naive all-reduce's sends share each "
    "sender's link, so no simple form is exact.",
)

link = get_network(topology, link_name, "topology").link
with st.spinner("running your program in the sandbox..."):
    result = run(source, ranks, link_name, topology, nbytes)

if result.error is not None:
    st.error(pg.describe_error(result.error))
    st.stop()

m = st.columns(3)
m[0].metric("virtual time", format_seconds(result.time_s), help="Emulated makespan: the latest rank's clock.")
if formula.strip():
    try:
        predicted_s = pg.closed_form_s(formula, ranks, nbytes, link.alpha_s, link.beta_s_per_byte)
    except ValueError as exc:
        st.error(str(exc))
    else:
        m[1].metric("your closed form", format_seconds(predicted_s))
        m[2].metric(
            "relative difference",
            f"{(result.time_s - predicted_s) / result.time_s:+.1e}",
            help="(virtual time - closed form) / virtual time",
        )
caption(
    f"alpha = {format_seconds(link.alpha_s)} (the latency plus twice the per-message overhead), "
    f"beta = {link.beta_s_per_byte * 1e9:.3g} ns per byte, of {link.name}"
    + ("" if topology == "flat" else f" (the link inside a {topology} supernode)")
    + f"; p = {ranks}, "
    f"n = {format_bytes(nbytes)}."
)

st.dataframe({"rank": list(range(ranks)), "returned": result.values}, hide_index=True)
messages, gantt = st.tabs(["Messages", "Timeline"])
with messages:
    if not result.trace.messages:
        st.info("Your program sent no message.")
    else:
        title = f"{starter if source == source_text else 'your program'}, {ranks} ranks"
        chart(message_animation({title: result.trace}), "pg_animation")
with gantt:
    chart(viz.timeline(result.trace), "pg_timeline")
