"""Collectives: run one collective on real ranks and watch its messages in virtual time."""

import cached
import streamlit as st
from charts import chart, downloads, summary_row
from layout import caption
from urlstate import url_key
from widgets import backend_select, link_select, real_data_note, size_slider

from dlsys.collectives import ALGORITHMS
from dlsys.experiments.contention import ALLREDUCES, FABRICS, PATTERNS
from dlsys.units import format_bytes, format_rate, format_seconds
from dlsys.viz import animation
from dlsys.viz import comm as viz
from dlsys.viz.costs import CLOSED_FORM_LATEX
from dlsys.viz.layouts import algorithm_positions
from dlsys.viz.links import link_load_figure
from dlsys.viz.ring_steps import ring_steps

OVERSUBSCRIPTIONS = [1, 2, 4, 8]

st.title("Collectives")
caption(
    "Pick a collective and an algorithm: the ranks really run it (threads, processes or MPI ranks, real "
    "numpy arrays), and every message advances virtual clocks through the link model."
)

cols = st.columns([1.2, 1.4, 1, 1.6, 1.2, 1])
name = cols[0].selectbox(
    "collective",
    list(ALGORITHMS),
    index=list(ALGORITHMS).index("allreduce"),
    key=url_key("coll_collective", list(ALGORITHMS)),
)
algorithm = cols[1].selectbox("algorithm", ALGORITHMS[name], key=url_key(f"coll_algorithm_{name}", ALGORITHMS[name]))
ranks = cols[2].slider("ranks p", 2, 16, 8, key=url_key("coll_ranks", between=(2, 16)))
with cols[3]:
    nbytes = size_slider("size per rank", "coll_size")
with cols[4]:
    link_name = link_select("coll_link")
with cols[5]:
    backend = backend_select("coll_backend")

record = cached.collective(name, algorithm, ranks, nbytes, link_name, backend)
trace, link = record["result"].trace, record["result"].network.link

m = st.columns(5)
m[0].metric(
    "virtual time", format_seconds(record["virtual_time_s"]), help="Emulated makespan: the latest rank's clock."
)
m[1].metric(
    "closed form",
    format_seconds(record["closed_form_s"]),
    delta=f"{record['relative_error']:.1e} relative error",
    delta_color="off",
    delta_arrow="off",
    help="Thakur, Rabenseifner & Gropp (2005), dlsys.collectives.closed_form.",
)
busbw_help = "nccl-tests convention: algbw = n / t; busbw = algbw x 2(p-1)/p (all-reduce), (p-1)/p (all-gather, reduce-scatter), 1 otherwise."
m[2].metric("algbw", format_rate(record["algbw_Bps"]) if name != "barrier" else "n/a", help=busbw_help)
m[3].metric("busbw", format_rate(record["busbw_Bps"]) if name != "barrier" else "n/a", help=busbw_help)
m[4].metric(
    "bytes on the wire",
    format_bytes(sum(record["bytes_sent_per_rank"])),
    help="All messages of all ranks, logical bytes.",
)

left, right = st.columns([1, 2])
left.latex(r"T = " + CLOSED_FORM_LATEX[(name, algorithm)])
right.caption(
    f"α = {format_seconds(link.alpha_s)} (latency + 2 x per-message overhead), "
    f"β = 1/B + copies = {link.beta_s_per_byte * 1e9:.3g} ns per byte ({format_rate(1 / link.beta_s_per_byte)} effective), "
    f"p = {ranks}, n = {format_bytes(nbytes)}, L = ⌈lg p⌉. Tree, recursive-doubling and halving forms are exact at "
    "powers of two; elsewhere they are the textbook estimate (recursive doubling all-gather and halving "
    "reduce-scatter then fall back to the ring). " + real_data_note(record)
)

views = ["Messages", "Ring step by step", "Timeline", "Bytes per link", "Link load", "Downloads"]
messages, steps, gantt, links, load, files = st.tabs(views, key=url_key("coll_view", views), on_change="rerun")
if messages.open:  # only the open tab is built and drawn
    with messages:
        title = f"{name} / {algorithm}, {ranks} ranks, {format_bytes(nbytes)}"
        shape = algorithm_positions(name, algorithm, ranks, record["result"].network.supernodes(ranks))
        chart(animation.message_animation({title: trace}, {title: shape}), "coll_animation")
        caption(
            "Press ▶ Play or space; step back and forth with the buttons or the ← → keys (the pointer over "
            "the animation). Each dot is a message, its area its bytes, its colour its phase and step "
            "(light to dark), its number the block it carries. A bar fills under it while its sender's CPU "
            "copies it (the node outlined orange) and again while its receiver's does (green); between, it "
            "travels in virtual time. The ranks stand in the algorithm's shape: a binomial tree, a "
            "hypercube (recursive doubling and halving), supernodes under their leaders (hierarchical) or "
            "a ring. Hover for a message's size and step; drag the slider through time. The animation draws "
            f"{animation.FRAMES_PER_STEP} frames per step, about as many as a browser redraws in a step's "
            f"{animation.STEP_MS / 1000:g} s, so it plays in time."
        )
if steps.open:
    with steps:
        if (name, algorithm) != ("allreduce", "ring"):
            st.info(
                f"This tab replays the ring all-reduce, block by block; {name} / {algorithm} is not a ring "
                "all-reduce. Pick collective allreduce and algorithm ring to see it; the Messages tab draws "
                f"{algorithm} in its own shape."
            )
        else:
            chart(ring_steps(cached.ring_steps(ranks, link_name)), "coll_ring_steps")
            caption(
                f"Ring all-reduce on {ranks} ranks, replayed from a real run's trace: in reduce-scatter each "
                "rank adds the block arriving from its left neighbour (the message carrying that block's "
                "number in the Messages tab), so after p-1 steps rank r holds the full sum of one block; "
                "all-gather then passes the finished blocks around. The replay's final state is checked "
                "against the values the ranks returned."
            )
if gantt.open:
    with gantt:
        chart(viz.timeline(trace), "coll_timeline")
        caption(
            "send = the sender's CPU overhead (and kernel copies on TCP); wait = idle until a message "
            "arrives; recv = the receiver's overhead. Grey lines join each message's departure and arrival."
        )
if links.open:
    with links:
        chart(viz.link_bytes(trace), "coll_link_bytes")
if load.open:
    with load:
        c = st.columns([1.4, 1.2, 1.4, 1])
        pattern = c[0].selectbox(
            "pattern",
            PATTERNS,
            index=PATTERNS.index(algorithm if algorithm in ALLREDUCES else "ring"),
            key=url_key("coll_load_pattern", PATTERNS),
            help="incast: ranks 1..p-1 push to rank 0; "
            "alltoall: block j of every rank to rank j; the others: all-reduce algorithms.",
        )
        fabric = c[1].selectbox(
            "fabric",
            FABRICS,
            index=FABRICS.index("two-level"),
            key=url_key("coll_load_fabric", FABRICS),
            help="two-level: supernodes of 4 ranks; fat-tree: the smallest k-ary fat tree "
            "that holds the ranks (k = 4 up to 16 ranks).",
        )
        over = c[2].select_slider(
            "oversubscription",
            OVERSUBSCRIPTIONS,
            4,
            key=url_key("coll_load_over", OVERSUBSCRIPTIONS),
            help="How many times thinner the switch level is than the nodes under it.",
        )
        sharing = not c[3].toggle(
            "static shares (the old rule)",
            value=False,
            key=url_key("coll_load_static", [False, True]),
            help="Off (the model): messages crossing one link at once share it (max-min fair). On, for "
            "contrast: every message has its pair's link to itself (DESIGN.md's rules).",
        )
        try:
            off, on = cached.contention(pattern, fabric, ranks, nbytes, link_name, float(over))
        except ValueError as exc:
            st.warning(f"{exc}. Pick another size or rank count.")
        else:
            shown = on if sharing else off
            chart(
                link_load_figure(
                    shown["rows"],
                    f"{pattern} on {shown['topology']}, {ranks} ranks, sharing {'on' if sharing else 'off'}",
                    shown["capacities_Bps"],
                ),
                "coll_link_load",
            )
            caption(
                f"{pattern}, {format_bytes(nbytes)} per rank on {link_name}: {format_seconds(on['virtual_time_s'])} "
                f"with sharing, {format_seconds(off['virtual_time_s'])} without. The busiest link, "
                f"{on['hottest_link']}, carries {format_bytes(on['hottest_nbytes'])}: no schedule of these messages "
                f"ends before {format_seconds(on['link_bound_s'])} (its bytes over its capacity). "
                f"{on['switch_messages']} of {on['messages']} messages ({format_bytes(on['switch_nbytes'])}) cross a "
                "switch link. Without sharing every message across supernodes is charged its pair's link at "
                "1/oversubscription of B however few cross; with sharing, k messages on one uplink each get a "
                "max-min share of it (docs/flows.md)."
            )
if files.open:
    with files:
        downloads(trace, [summary_row(record)], f"{name}-{algorithm}-p{ranks}")
