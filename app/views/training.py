"""Distributed training: real models under BSP, SSP and ASP with a straggler, the parameter
server's pushes and pulls, and data against model parallelism."""

import cached
import streamlit as st
from charts import chart
from layout import caption
from urlstate import url_key
from widgets import option_input

from dlsys.learn.optim import scale_lr
from dlsys.learn.task import TrainConfig, build_model
from dlsys.machine.net import LINK_PRESETS
from dlsys.train import STRATEGIES
from dlsys.train.strategies import OPTIONS
from dlsys.units import format_bytes, format_seconds
from dlsys.viz import comm as viz
from dlsys.viz import training as tviz
from dlsys.viz.animation import message_animation
from dlsys.viz.style import role_names

BIG_BATCHES = [32, 64, 128, 256]
PARAMETER_SERVERS = [s.name for s in STRATEGIES.values() if s.family == "parameter-server"]

st.title("Distributed training")
caption(
    f"A real MLP (64-64-64-10) learns the 8x8 digits on {cached.TRAIN_WORKERS} workers: every gradient is really "
    "computed and really sent; time is virtual (FLOPs on the node model, messages on the link model)."
)
cols = st.columns(2)
links = list(LINK_PRESETS)
link = cols[0].selectbox(
    "link",
    links,
    index=links.index("rdma-edr"),
    key=url_key("train_link", links),
    help="On RDMA the compute matters, so stragglers show; on TCP the messages dominate.",
)
epochs = cols[1].slider("epochs", 1, 10, 3, key=url_key("train_epochs", between=(1, 10)))

views = ["Who waits: BSP, SSP, ASP", "Push and pull", "Data vs model parallel"]
sync, pushpull, split = st.tabs(views, key=url_key("train_view", views), on_change="rerun")

if sync.open:
    with sync:
        c = st.columns(2)
        slow = cached.TRAIN_WORKERS - 1  # cached.training slows the last worker; the server is rank 0
        factor = c[0].slider(
            f"straggler: worker {slow} (rank {slow + 1}) is k times slower",
            1.0,
            8.0,
            4.0,
            0.5,
            key=url_key("train_straggler", between=(1.0, 8.0)),
        )
        s = option_input(OPTIONS["staleness"], "train_staleness", "SSP staleness bound s (clocks)", high=10, where=c[1])
        runs = {
            "BSP": cached.training("ps-bsp", epochs, link, factor),
            f"SSP s={s}": cached.training("ps-ssp", epochs, link, factor, staleness=s),
            "ASP": cached.training("ps-asp", epochs, link, factor),
        }
        m = st.columns(3)
        for col, (name, r) in zip(m, runs.items()):
            col.metric(
                name,
                format_seconds(r["virtual_time_s"]),
                delta=f"{r['test_accuracy']:.1%} test accuracy, max staleness {r['max_staleness']}",
                delta_color="off",
            )
        st.latex(
            r"\text{worker } k \text{ at clock } c_k \text{ may read once } c_k - \min_j c_j \le s"
            r"\qquad (\text{BSP: } s = 0,\ \text{ASP: } s = \infty)"
        )
        chart(tviz.worker_progress(runs), "train_progress")
        caption(
            "Each staircase is one worker's gradient count. BSP: all climb at the straggler's pace. "
            "SSP: the fast ones run ahead until they are s clocks ahead, then wait. ASP: nobody waits; "
            "the straggler simply does less of the fixed budget of gradients."
        )
        left, right = st.columns(2)
        with left:
            chart(tviz.staleness_histogram(runs), "train_staleness_hist")
        with right:
            chart(tviz.loss_curves(runs), "train_loss")
        shown = st.selectbox("timeline of", list(runs), key=url_key("train_timeline_run", list(runs)))
        trace = runs[shown]["trace"]
        chart(
            viz.timeline(
                tviz.first_seconds(trace, trace.makespan_s / 10),
                f"{shown}: the first tenth of the run (rank 0 is the server)",
            ),
            "train_timeline",
        )
        caption("Grey 'wait' spans are the price of consistency: a worker whose pull the server holds.")

if pushpull.open:
    with pushpull:
        c = st.columns(2)
        consistency = c[0].selectbox(
            "consistency", PARAMETER_SERVERS, key=url_key("train_pp_consistency", PARAMETER_SERVERS)
        )
        servers = option_input(OPTIONS["servers"], "train_pp_servers", "servers (key ranges)", high=3, where=c[1])
        record = cached.training(consistency, 1, link, 1.0, servers=servers)
        trace = tviz.first_seconds(record["trace"], record["virtual_time_s"] / 5)
        title = f"{consistency}, {servers} server(s) + {cached.TRAIN_WORKERS} workers, the first steps"
        chart(
            message_animation({title: trace}, {title: "star"}, {title: role_names(cached.TRAIN_WORKERS, servers)}),
            "train_pp_animation",
        )
        server_text = (
            f"Servers 0..{servers - 1} are ranks 0..{servers - 1} (rank 0 in the centre)"
            if servers > 1
            else "Server 0 is rank 0, in the centre"
        )
        caption(
            f"Press ▶ Play. {server_text}; worker w is rank {servers} + w. Per step a worker sends each server a pull "
            "request (keys), then a push (keys, then values: its slice of the gradient); the server answers "
            "the pull with its slice of the weights. With several servers under SSP/ASP, server 0 tells "
            "the others the order of requests."
        )
        panel = f"{consistency}, one epoch"
        chart(
            viz.traffic_per_rank({panel: record["trace"]}, {panel: role_names(cached.TRAIN_WORKERS, servers)}),
            "train_pp_traffic",
        )
        caption(
            f"Whole epoch: {format_bytes(record['bytes_moved'])} in {record['messages']} messages. "
            "Each server carries about 1/S of the push and pull traffic."
        )

if split.open:
    with split:
        c = st.columns(3)
        micro = option_input(
            OPTIONS["micro_batches"], "train_micro", "model parallel: micro-batches M", high=16, where=c[0]
        )
        period = option_input(
            OPTIONS["period"], "train_period", "local SGD: average every K steps", high=16, where=c[1]
        )
        big = c[2].select_slider(
            "larger batch per worker",
            BIG_BATCHES,
            128,
            key=url_key("train_big_batch", BIG_BATCHES),
            help="With the linear scaling rule (Goyal et al. 2017): lr = 0.1 x batch / 32.",
        )
        big_lr = scale_lr(0.1, big, 32, "linear")
        runs = {
            "all-reduce": cached.training("allreduce", epochs, link),
            f"model parallel M={micro}": cached.training("model-parallel", epochs, link, micro_batches=micro),
            f"local SGD K={period}": cached.training("local-sgd", epochs, link, period=period),
            f"all-reduce, batch {big}, lr {big_lr:g}": cached.training(
                "allreduce", epochs, link, batch_size=big, lr=big_lr
            ),
        }
        chart(tviz.cost_bars(runs), "train_costs")
        st.latex(
            r"\text{data parallel: } 2\tfrac{P-1}{P}\,n \text{ bytes per rank per step}\qquad"
            r"\text{GPipe bubble: } \tfrac{S-1}{M+S-1}"
        )
        n = build_model(TrainConfig()).params.size  # the digits MLP every run above trains
        caption(
            f"Data parallelism moves gradients (n = {n:,} parameters per all-reduce); model parallelism "
            "moves activations and their gradients between stages, and pays the pipeline bubble; local SGD "
            "and larger batches communicate less often. All-reduce and the pipeline compute the same "
            "weights (the same test accuracy)."
        )
        chart(
            tviz.pipeline_step(
                runs[f"model parallel M={micro}"]["trace"], micro, f"model parallel M={micro}, its first step"
            ),
            "train_pipeline_step",
        )
        st.caption(
            "GPipe's bubble: each stage runs the forwards of all M micro-batches (numbered), then their "
            "backwards in reverse; while the pipe fills and drains a stage idles (grey). The formula "
            "assumes stages of equal work; the digits MLP has fewer weight layers than stages (split "
            "by FLOPs, `split_stages`), so a stage holding only a ReLU or the small last layer idles far "
            "more. The Pipelines page runs a transformer cut into equal stages."
        )
        shown = st.selectbox("timeline of", list(runs), index=1, key=url_key("train_split_timeline_run", list(runs)))
        trace = runs[shown]["trace"]
        chart(
            viz.timeline(tviz.first_seconds(trace, trace.makespan_s / 20), f"{shown}: the first steps"),
            "train_split_timeline",
        )
