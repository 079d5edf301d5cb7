"""Real bytes and emulation scale: how much memory traffic an all-reduce needs, how fast the
real data path moves it here (copied vs lent sends), and how far the emulator scales."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key
from widgets import SIZES

from dlsys.machine.datapath import memcpy_ratio_bound, ring_allreduce_traffic_bytes
from dlsys.machine.profiles import totals
from dlsys.units import format_bytes, format_seconds
from dlsys.viz import datapath as viz

BENCH_SIZES = [2**20, 4 * 2**20, 16 * 2**20, 64 * 2**20]
BENCH_RANKS = [2, 4]
EMULATION_RANKS = [8, 16, 32, 64, 128, 256, 512]

st.title("Real bytes and emulation scale")
markdown(
    "Two clocks. The **virtual** clock of every other page charges a modelled network. Here the **wall** "
    "clock counts: real float32 bytes moved between real processes on this machine, where there is no "
    "network and the limit is **memory bandwidth**: every byte an all-reduce touches is read or written "
    "by some core. And the wall time the emulator itself needs for big clusters."
)

views = ["Memory traffic", "Measure it here", "Emulation scale"]
traffic_tab, measure_tab, scale_tab = st.tabs(views, key=url_key("perf_view", views), on_change="rerun")
if traffic_tab.open:  # only the open tab is built and drawn
    with traffic_tab:
        cols = st.columns(3)
        ranks = cols[0].slider("ranks p", 2, 16, 2, key=url_key("perf_ranks", between=(2, 16)))
        nbytes = cols[1].select_slider(
            "buffer per rank",
            SIZES[5:],
            value=64 * 2**20,
            format_func=format_bytes,
            key=url_key("perf_size", SIZES[5:]),
        )
        speedup = cols[2].slider(
            "memory bandwidth of all cores / one core",
            1.0,
            4.0,
            1.35,
            0.05,
            key=url_key("perf_speedup", between=(1.0, 4.0)),
            help="1.35 measured on the 2-core machine of docs/performance.md (two copies at once vs one).",
        )
        chart(viz.traffic_bars(ranks, nbytes), "perf_traffic")
        m = st.columns(3)
        m[0].metric(
            "copied sends",
            format_bytes(ring_allreduce_traffic_bytes(ranks, nbytes, False)),
            delta=f"bound {memcpy_ratio_bound(ranks, False, speedup):.2f} of memcpy",
            delta_color="off",
            delta_arrow="off",
        )
        m[1].metric(
            "lent sends",
            format_bytes(ring_allreduce_traffic_bytes(ranks, nbytes, True)),
            delta=f"bound {memcpy_ratio_bound(ranks, True, speedup):.2f} of memcpy",
            delta_color="off",
            delta_arrow="off",
        )
        m[2].metric("one memcpy", format_bytes(2 * nbytes))
        st.latex(
            r"\text{traffic per rank} = k\,(p-1)\,\tfrac{n}{p},\quad k = 9\ \text{(copied)},\ 5\ \text{(lent)}"
            r"\qquad \frac{\text{busbw}}{\text{memcpy}} \le \frac{4s}{k\,p}"
        )
        caption(
            "A copied send first copies its block into shared memory (read + write); a lent send "
            "(isend of comm.alloc memory, MPI's rendezvous) lets the receiver read the sender's own "
            "buffer, and the request completes when the receiver drops it. Lending changes no virtual "
            "time. Model: dlsys/machine/datapath.py; lesson 07."
        )
if measure_tab.open:
    with measure_tab:
        cols = st.columns([2, 1, 1])
        sizes = cols[0].multiselect(
            "sizes",
            BENCH_SIZES,
            default=[4 * 2**20, 16 * 2**20],
            format_func=format_bytes,
            key=url_key("perf_bench_sizes", BENCH_SIZES, many=True),
        )
        bench_ranks = cols[1].radio(
            "ranks",
            BENCH_RANKS,
            horizontal=True,
            key=url_key("perf_bench_ranks", BENCH_RANKS),
            help="Real processes; 4 ranks share this machine's cores (oversubscribed).",
        )
        run = cols[2].button("Run on this machine", key="perf_run", type="primary", disabled=not sizes)
        if run:
            records = [
                cached.real_allreduce(bench_ranks, n, buffers) for n in sorted(sizes) for buffers in ("plain", "alloc")
            ]
            chart(viz.ratio_bars(records), "perf_ratio")
            st.dataframe(
                [
                    {
                        "size": format_bytes(r["nbytes"]),
                        "sends": viz.BUFFER_NAMES[r["buffers"]],
                        "time": format_seconds(r["wall_time_s"]),
                        "busbw/memcpy": round(r["ratio_to_memcpy"], 2),
                    }
                    for r in records
                ],
                hide_index=True,
            )
            caption(
                "Ring all-reduce of real float32 data between processes (median of 5 after a warm-up, "
                "checked every time), against numpy's memcpy of the same size in the same run. Other "
                "work on this machine (another student pressing this button) moves the numbers; "
                "`dlsys bench allreduce` in a terminal gives the careful figures."
            )
        else:
            st.info("Press the button to start real rank processes on this machine (a few seconds).")
if scale_tab.open:
    with scale_tab:
        top = st.select_slider(
            "up to ranks",
            EMULATION_RANKS,
            value=128,
            key=url_key("perf_emulate_ranks", EMULATION_RANKS),
            help="512 ranks take a few seconds; each size is cached once run.",
        )
        if st.button("Emulate", key="perf_emulate", type="primary"):
            curve = [cached.emulation(r) for r in EMULATION_RANKS if r <= top]
            chart(viz.emulation_scaling(curve), "perf_scaling")
            st.dataframe(
                [
                    {
                        "ranks": r["ranks"],
                        "messages": r["messages"],
                        "wall time": format_seconds(r["wall_time_s"]),
                        "virtual time": format_seconds(r["virtual_time_s"], 6),
                        "closed form": format_seconds(r["closed_form_s"], 6),
                        "relative error": f"{r['relative_error']:.1e}",
                    }
                    for r in curve
                ],
                hide_index=True,
            )
            params = totals("alexnet")[0]
            caption(
                f"A ring all-reduce of AlexNet's gradient ({params / 1e6:.1f} M float32, "
                f"{format_bytes(4 * params)}) on the threads backend: "
                "each rank holds a few real floats that stand for the full gradient (LogicalArray), the "
                "virtual time equals the closed form, and the wall time grows as the 2p(p-1) messages."
            )
        else:
            st.info("Press the button to emulate ring all-reduces of AlexNet's gradient from 8 ranks up.")
