"""Cost model explorer: closed-form all-reduce costs, where algorithms cross, TCP vs RDMA."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key
from widgets import link_select, size_slider

from dlsys import experiments
from dlsys.machine.net import LINK_PRESETS
from dlsys.machine.netstack import MPI_LIBRARIES
from dlsys.units import format_bytes, format_rate, format_seconds
from dlsys.viz import costs as viz

SIZE_GRID = [2**k for k in range(0, 33)]  # 1 B .. 4 GiB
RANK_GRID = [2**k for k in range(1, 11)]  # 2 .. 1024, powers of two: the tree forms are exact there

st.title("Cost model explorer")
markdown(
    "A message of $n$ bytes costs $\\alpha + n\\beta$: **alpha** is the fixed cost of any message (wire "
    "latency plus the CPU overhead at both ends), **beta** the cost per byte (1 / bandwidth, plus kernel "
    "copies on TCP). Small messages are latency-bound, large ones bandwidth-bound; algorithms trade "
    "fewer messages (fewer alphas) against fewer bytes (smaller beta terms)."
)

cols = st.columns([1, 1, 1.5, 1, 1])
with cols[0]:
    link = link_select("cost_link")
ranks = cols[1].select_slider("ranks p", RANK_GRID, value=8, key=url_key("cost_ranks", RANK_GRID))
with cols[2]:
    nbytes = size_slider("size for the ranks plot", "cost_size")
library = cols[4].selectbox(
    "MPI library",
    MPI_LIBRARIES,
    key=url_key("cost_library", MPI_LIBRARIES),
    help="The grey band follows the algorithm this library's MPI_Allreduce picks "
    "(its source's selection rule, dlsys presets).",
)
check = cols[3].toggle(
    "check against emulation",
    value=True,
    key=url_key("cost_check", [False, True]),
    disabled=ranks > 16,
    help="Run every algorithm on real ranks at 1 KiB, 1 MiB and 1 GiB (p <= 16).",
)

by_size = experiments.allreduce_costs([link], [ranks], SIZE_GRID)
views = ["Against size", "Against ranks", "TCP vs RDMA", "Alpha and beta"]
size_tab, ranks_tab, links_tab, split_tab = st.tabs(views, key=url_key("cost_view", views), on_change="rerun")
if size_tab.open:  # only the open tab is built and drawn
    with size_tab:
        size_cross = experiments.crossovers(by_size, "nbytes")
        emulated = cached.emulated_allreduce_costs(link, ranks) if check and ranks <= 16 else []
        choice = experiments.library_choice(library, link, [ranks], SIZE_GRID)
        chart(
            viz.cost_curves(
                by_size, "nbytes", emulated, size_cross, f"All-reduce time against size, p = {ranks}, {link}", choice
            ),
            "cost_by_size",
        )
        caption(
            "Lines: closed forms. Circles: the same algorithms really run (virtual time). Stars: where the "
            "fastest algorithm changes. "
            + " ".join(f"Above {format_bytes(c['nbytes'])}: {c['to']} beats {c['from']}." for c in size_cross)
            + f" Grey band: {library} runs {choice[0]['algorithm']}"
            + "".join(
                f", from {format_bytes(c['nbytes'])} {c['to']}" for c in experiments.choice_changes(choice, "nbytes")
            )
            + "."
        )
if ranks_tab.open:
    with ranks_tab:
        by_ranks = experiments.allreduce_costs([link], RANK_GRID, [nbytes])
        choice = experiments.library_choice(library, link, RANK_GRID, [nbytes])
        chart(
            viz.cost_curves(
                by_ranks,
                "ranks",
                (),
                experiments.crossovers(by_ranks, "ranks"),
                f"All-reduce time against ranks, n = {format_bytes(nbytes)}, {link}",
                choice,
            ),
            "cost_by_ranks",
        )
        caption(
            "Ring all-reduce costs 2(p-1)(α + n/(pB)): its bandwidth term tends to 2n/B, so for large "
            "messages its time hardly grows with p, while its latency term grows linearly. In this model "
            "Rabenseifner moves the same bytes with only 2 lg p alphas; the ring wins in practice because "
            "each step uses only neighbour links (no contention on real topologies) and it works at any p. "
            f"Grey band: {library} runs {choice[0]['algorithm']}"
            + "".join(f", from p = {c['ranks']} {c['to']}" for c in experiments.choice_changes(choice, "ranks"))
            + "."
        )
if links_tab.open:
    with links_tab:
        markdown(
            "TCP copies every byte into the kernel at the sender and out again at the receiver, and pays tens of "
            "microseconds per message; RDMA (InfiniBand verbs) reads and writes remote memory directly: zero "
            "copy, kernel bypass, about a microsecond. Below: ring all-reduce on every link preset (TCP dashed)."
        )
        every_link = [
            r for r in experiments.allreduce_costs(list(LINK_PRESETS), [ranks], SIZE_GRID) if r["algorithm"] == "ring"
        ]
        chart(viz.link_comparison(every_link, f"Ring all-reduce, p = {ranks}, every link"), "cost_links")
        st.dataframe(
            [
                {
                    "link": r["link"],
                    "kind": r["kind"],
                    "alpha": format_seconds(r["alpha_s"]),
                    "beta (ns/byte)": round(r["beta_s_per_byte"] * 1e9, 4),
                    "wire bandwidth": format_rate(r["bandwidth_Bps"]),
                    "n½ = α/β": format_bytes(r["n_half_bytes"]),
                }
                for r in experiments.link_table()
            ],
            hide_index=True,
        )
        caption(
            "n½ is the message size at which latency and bandwidth cost the same: below it, send fewer "
            "messages; above it, send fewer bytes."
        )
if split_tab.open:
    with split_tab:
        ring = [r for r in by_size if r["algorithm"] == "ring"]
        chart(
            viz.alpha_beta_split(ring, f"Ring all-reduce on {link}, p = {ranks}: alpha and beta apart"),
            "cost_alpha_beta",
        )
