"""Overlap and scheduling: when each gradient goes on the wire under FIFO, WFBP, P3,
ByteScheduler, fusion and OD-SGD, worker 0's lanes on one clock, against bandwidth, and
the trade-off of slice, credit and bucket sizes."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key
from widgets import option_input

from dlsys.experiments.schedule import BANDWIDTHS, KNOBS, SHOWN_POLICIES, SWEEPS, WORKER_COUNTS, widest_gap
from dlsys.machine.net import LINK_PRESETS
from dlsys.machine.profiles import PROFILES
from dlsys.schedule import OPTIONS, POLICIES, default_of
from dlsys.units import format_seconds
from dlsys.viz import schedule as viz

SLICES = [20_000, 40_000, 100_000, 250_000, 1_000_000, 4_000_000]
CREDITS_MB = [4, 8, 16, 32, 64]
BUCKETS_MB = [1, 5, 10, 25, 50, 100]
AXES = {name: OPTIONS[name][1] for name in SWEEPS}  # each option's title with its unit, and the factor to it

st.title("Overlap and scheduling")
markdown(
    "Backward makes the gradients last layer first, but the next forward needs them **first layer first**. "
    "**FIFO** sends after backward and overlaps nothing; **WFBP** (Poseidon) sends each layer as soon as it is "
    "ready; **P3** cuts layers into slices and sends the input layers' slices first, so they jump the queue; "
    "**ByteScheduler** does the same with larger partitions and a credit of bytes in flight; **fusion** (DDP "
    "buckets) sends fewer, larger messages; **OD-SGD** computes on locally updated weights while the global update "
    "travels. Compute follows each layer's FLOPs on a V100; the parameter server has one shard per worker."
)

cols = st.columns(4)
model = cols[0].selectbox("model", PROFILES, index=PROFILES.index("resnet50"), key=url_key("sched_model", PROFILES))
workers = cols[1].slider(
    "workers",
    WORKER_COUNTS[0],
    WORKER_COUNTS[-1],
    2,
    key=url_key("sched_workers", between=(WORKER_COUNTS[0], WORKER_COUNTS[-1])),
)
links = [*BANDWIDTHS, *LINK_PRESETS]
link = cols[2].selectbox(
    "link",
    links,
    index=links.index("10Gbps"),
    key=url_key("sched_link", links),
    help="A bandwidth (tcp-10gbe's latency and overheads) or a link preset.",
)
policies = cols[3].multiselect(
    "policies", list(POLICIES), list(SHOWN_POLICIES), key=url_key("sched_policies", list(POLICIES), many=True)
)
cols = st.columns(3)
slice_params = option_input(
    AXES["slice_params"],
    "sched_slice",
    values=SLICES,
    value=default_of("slice_params"),
    format_func=lambda v: f"{v:,}",
    where=cols[0],
)
credit_mb = option_input(
    AXES["credit_bytes"],
    "sched_credit",
    values=CREDITS_MB,
    value=round(default_of("credit_bytes") * AXES["credit_bytes"].axis_factor),
    unit=1 / AXES["credit_bytes"].axis_factor,
    note="At least one partition of 1,000,000 float32 (4 MB).",
    where=cols[1],
)
bucket_mb = option_input(
    AXES["bucket_mb"], "sched_bucket", values=BUCKETS_MB, value=round(default_of("bucket_mb")), where=cols[2]
)
if not policies:
    st.info("Pick at least one policy.")
    st.stop()
options = (
    ("p3", (("slice_params", slice_params),)),
    ("bytescheduler", (("credit_bytes", credit_mb * 1e6),)),
    ("fusion", (("bucket_mb", float(bucket_mb)),)),
)

views = ["Timeline", "Against bandwidth", "Slice, credit and bucket size"]
tabs = st.tabs(views, key=url_key("sched_view", views), on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        records = cached.schedule_policies(tuple(policies), model, workers, link, options)
        base = records[0]
        for col, r in zip(st.columns(len(records)), records):
            col.metric(
                r["policy"],
                format_seconds(r["iteration_s"]),
                help=r["describe"],
                delta=None if r is base else f"{r['iteration_s'] / base['iteration_s'] - 1:+.0%} vs {base['policy']}",
                delta_color="inverse",
            )
        chart(viz.gantt(records), "sched_gantt")
        most = max(records, key=lambda r: r["items"])
        caption(
            f"{model} on {workers} worker(s) at {link}, {base['iterations']} iterations: forward and backward need {format_seconds(base['compute_s'])} per iteration; the "
            "iteration time is the last one's (backward end to backward end). Drag the slider: the bars "
            "still to come fade, and each panel names what worker 0 computes and sends at that moment. "
            f"{most['describe']} sends {most['items']:,} items per iteration, so the dark input-layer slices "
            "go out between the later layers' ones and the next forward starts as soon as its first layer "
            "is back."
        )
if tabs[1].open:
    with tabs[1]:
        rows = cached.schedule_bandwidths(tuple(policies), model, workers, options)
        chart(
            viz.iteration_vs_bandwidth(rows, f"{model}, {workers} worker(s): iteration time against bandwidth"),
            "sched_bandwidth",
        )
        gap = widest_gap(rows)
        fastest, slowest = gap["fastest"], gap["slowest"]
        caption(
            f"Compute alone takes {format_seconds(rows[0]['compute_s'])}. On a slow link every policy waits "
            "for the network, and ordering cannot hide much more than one backward; on a fast one there is "
            f"little left to hide. The policies differ most at {gap['bandwidth_Bps'] * 8e-9:g} Gbit/s: "
            f"{fastest['policy']} {format_seconds(fastest['iteration_s'])} against {slowest['policy']} "
            f"{format_seconds(slowest['iteration_s'])}."
        )
if tabs[2].open:
    with tabs[2]:
        option = st.radio(
            "sweep",
            list(SWEEPS),
            format_func=lambda name: AXES[name].axis_title.split(" (")[0],
            horizontal=True,
            key=url_key("sched_sweep", list(SWEEPS)),
        )
        chosen = {"slice_params": slice_params, "credit_bytes": credit_mb * 1e6, "bucket_mb": float(bucket_mb)}[option]
        rows = cached.schedule_option(option, SWEEPS[option], model, workers, link, options)
        chart(viz.option_tradeoff(rows, chosen), "sched_tradeoff")
        fastest = min(rows, key=lambda r: r["iteration_s"])
        caption(
            f"{KNOBS[option]} on {model}, {workers} worker(s) at {link}; the dotted line is the slider's "
            f"value. Small items preempt sooner and overlap more, but every item pays the per-message "
            f"latency and overheads: {rows[0]['items']:,} items per iteration at the smallest value against "
            f"{rows[-1]['items']:,} at the largest. Fastest here: {fastest['value']:,g} "
            f"({format_seconds(fastest['iteration_s'])}, {fastest['overlap']:.0%} of the pushes hidden)."
        )
