"""Parameter server against ring all-reduce: the same gradients, two ways to average them."""

import cached
import streamlit as st
from charts import chart, downloads, summary_row
from layout import caption, markdown
from urlstate import url_key
from widgets import link_select, real_data_note, size_slider

from dlsys.units import format_bytes, format_seconds
from dlsys.viz import comm as viz
from dlsys.viz.animation import message_animation
from dlsys.viz.costs import ps_vs_ring_scaling
from dlsys.viz.style import role_names

st.title("Parameter server vs ring all-reduce")
markdown(
    "Every worker holds a gradient of $n$ bytes and needs the mean. **Parameter server**: each worker pushes "
    "its gradient to the server (rank 0), which sums them and sends the mean back to every worker; the "
    "server's link carries $W n$ bytes in and $W n$ out. **Ring all-reduce**: workers pass chunks of $n/W$ "
    "around a ring, every link carries $2(W-1)/W \\cdot n$ and no link is special."
)

cols = st.columns(3)
workers = cols[0].slider("workers W", 2, 16, 8, key=url_key("ps_workers", between=(2, 16)))
with cols[1]:
    nbytes = size_slider("gradient size", "ps_size")
with cols[2]:
    link = link_select("ps_link")

records = cached.ps_vs_ring(workers, nbytes, link)
ps, ring = records["parameter server"], records["ring all-reduce"]
traces = {name: r["result"].trace for name, r in records.items()}

m = st.columns(4)
m[0].metric(
    "parameter server",
    format_seconds(ps["virtual_time_s"]),
    delta=f"closed form {format_seconds(ps['closed_form_s'])}",
    delta_color="off",
    delta_arrow="off",
)
m[1].metric(
    "ring all-reduce",
    format_seconds(ring["virtual_time_s"]),
    delta=f"closed form {format_seconds(ring['closed_form_s'])}",
    delta_color="off",
    delta_arrow="off",
)
m[2].metric("PS / ring", f"{ps['virtual_time_s'] / ring['virtual_time_s']:.2f}x")
server = traces["parameter server"]
m[3].metric(
    "server link traffic",
    format_bytes(server.bytes_sent_per_rank()[0] + server.bytes_received_per_rank()[0]),
    help="Bytes server 0 (rank 0) sent plus received.",
)
st.latex(
    r"T_{PS} = 2(\alpha + n\beta) + 2(W-1)\max\!\left(\tfrac{n}{B},\ o_s(n)\right)"
    r"\qquad T_{ring} = 2(W-1)\left(\alpha + \tfrac{n}{W}\beta\right)"
)
caption(
    "The server's ingress serializes W pushes and its egress W pulls (or its per-message CPU cost does, "
    "if larger). " + real_data_note(ring) + " Both runs average the same gradients; the means agree."
)

views = ["Side by side", "Bytes per rank", "Against workers", "Downloads"]
animation, traffic, scaling, files = st.tabs(views, key=url_key("ps_view", views), on_change="rerun")
if animation.open:  # only the open tab is built and drawn
    with animation:
        chart(
            message_animation(
                traces,
                {"parameter server": "star"},
                {"parameter server": role_names(workers, servers=1), "ring all-reduce": role_names(workers)},
            ),
            "ps_animation",
        )
        caption(
            "One clock for both panels: press ▶ Play and watch the ring finish while the server's link is "
            "still busy. Left: server 0 (rank 0) in the centre, worker w is rank w + 1. Right: worker w is "
            "rank w."
        )
if traffic.open:
    with traffic:
        names = {"parameter server": role_names(workers, servers=1), "ring all-reduce": role_names(workers)}
        chart(viz.traffic_per_rank(traces, names), "ps_traffic")
if scaling.open:
    with scaling:
        chart(
            ps_vs_ring_scaling(cached.ps_vs_ring_scaling(nbytes, link), f"{format_bytes(nbytes)} gradient on {link}"),
            "ps_scaling",
        )
        caption(
            "The PS time grows linearly with W (the server's link is the bottleneck); the ring's tends to "
            "2n/B. Markers: emulated runs; lines: closed forms."
        )
if files.open:
    with files:
        for name, trace in traces.items():
            markdown(f"**{name}**")
            downloads(trace, [summary_row(r) for r in records.values()], name.replace(" ", "-"))
