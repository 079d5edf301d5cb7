"""Memory and sharding: what one rank holds, by kind, under DDP, ZeRO-1/2/3, FSDP and
tensor parallelism, against a device's memory; ZeRO's Figure 1; the small runs' measured
bytes against the closed form; and what each layout sends per step."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key

from dlsys.experiments import memory as ex
from dlsys.machine.memory import OPTIMIZERS, PRECISIONS, RECOMPUTE, bytes_per_param
from dlsys.units import format_bytes
from dlsys.viz import comm as viz_comm
from dlsys.viz import memory as viz
from dlsys.viz.animation import message_animation

FREE = "free size"
RANKS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
STEP_STRATEGIES = {"DDP": "allreduce", "ZeRO-1": "zero1", "ZeRO-2": "zero2", "ZeRO-3": "zero3", "FSDP": "fsdp-prefetch"}
SMALL_RANKS = 4

st.title("Memory and sharding")
markdown(
    f"Under mixed precision with Adam every parameter costs **2 + 2 + K = {sum(bytes_per_param())} bytes** (fp16 weights, fp16 gradients, "
    f"K = {bytes_per_param()[2]} of fp32 master weights, momentum and variance), and every rank of plain data parallelism (**DDP**) holds "
    "all of it. **ZeRO** shards over the data-parallel ranks the optimizer state (stage 1), then the gradients "
    "(stage 2), then the parameters (stage 3); **FSDP** is stage 3 gathering one layer at a time. **Tensor "
    "parallelism** (Megatron) splits every weight matrix, so it divides the activations too. The bars are "
    "`Layout(...).bytes()` of `dlsys.machine.memory`; activations follow Korthikanti et al. 2022 for one sequence."
)

cols = st.columns([1.6, 1, 1, 1])
models = [*ex.MODEL_PRESETS, FREE]
preset = cols[0].selectbox("model", models, index=1, key=url_key("mem_model", models))
if preset == FREE:
    params = int(
        cols[1].number_input(
            "parameters (billions)", 0.001, 2000.0, 10.0, key=url_key("mem_params_b", between=(0.001, 2000.0))
        )
        * 1e9
    )
    shape = None
else:
    params, shape = ex.MODEL_PRESETS[preset]
ranks = cols[2].select_slider("ranks", RANKS, value=64, key=url_key("mem_ranks", RANKS))
device_gib = cols[3].selectbox("device memory (GiB)", ex.DEVICE_GIB, index=2, key=url_key("mem_device", ex.DEVICE_GIB))
cols = st.columns(4)
optimizer = cols[0].selectbox(
    "optimizer",
    OPTIMIZERS,
    key=url_key("mem_optimizer", OPTIMIZERS),
    help="sgd = with momentum; sgd-plain keeps no state.",
)
precision = cols[1].selectbox("precision", PRECISIONS, key=url_key("mem_precision", PRECISIONS))
degrees = [t for t in RANKS if t <= ranks and ranks % t == 0 and (shape is None or shape.heads % t == 0)]
if st.session_state.get(url_key("mem_tp", degrees)) not in degrees:  # none yet, or a rank or model change
    st.session_state["mem_tp"] = degrees[min(3, len(degrees) - 1)]
tp = cols[2].selectbox(
    "TP degree",
    degrees,
    key="mem_tp",
    help="Divides the ranks and the heads. TP runs with sequence parallelism and DDP over the rest.",
)
recompute = cols[3].selectbox(
    "activation recomputation", RECOMPUTE, key=url_key("mem_recompute", RECOMPUTE), disabled=shape is None
)

rows = ex.page_layouts(params, ranks, shape, optimizer, precision, tp, recompute)
device_bytes = device_gib * 2**30
fits = ex.fitting(rows, device_bytes)
w_b, g_b, k_b = bytes_per_param(optimizer, precision)

views = ["Memory per rank", "ZeRO Figure 1", "Measured against the model", "Communication per step"]
tabs = st.tabs(views, key=url_key("mem_view", views), on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        m = st.columns(len(rows))
        for col, row in zip(m, rows):
            col.metric(
                row["layout"],
                format_bytes(row["total_bytes"]),
                help=row["describe"],
                delta="fits" if row["layout"] in fits else "does not fit",
                delta_arrow="off",
                delta_color="normal" if row["layout"] in fits else "inverse",
            )
        chart(
            viz.memory_bars(
                rows,
                device_bytes,
                f"{preset if shape else f'{params / 1e9:g}B parameters'} on {ranks} ranks: one rank's memory",
            ),
            "mem_bars",
        )
        activations = (
            f"activations of one {shape.seq_len}-token sequence through {shape.layers} layers "
            f"(h = {shape.hidden}, {shape.heads} heads, recomputation: {recompute})"
            if shape
            else "no activations (a size without a shape)"
        )
        caption(
            f"{params:,} parameters at {w_b} + {g_b} + {k_b} bytes each ({precision}, {optimizer}); "
            f"{activations}. DDP holds {format_bytes(rows[0]['total_bytes'])} per rank, ZeRO-3 "
            f"{format_bytes(rows[3]['total_bytes'])}, TP {tp} "
            f"{format_bytes(rows[5]['total_bytes'])}. Fits a {device_gib} GiB device: "
            f"{', '.join(fits) or 'none of them'}. FSDP's buffers are one layer's gathered weights twice "
            "(prefetch) and its gradient; the activations do not shrink under ZeRO, only under TP's split."
        )
if tabs[1].open:
    with tabs[1]:
        figure = ex.zero_figure1_rows()
        chart(viz.zero_figure1(figure), "mem_zero_figure1")
        caption(
            "Rajbhandari et al. 2020, Figure 1: Psi = 7.5B parameters, N_d = 64, Adam with mixed precision "
            f"(K = {bytes_per_param()[2]}), model states only. The closed form gives "
            + ", ".join(f"{r['stage']} {r['model_bytes'] / 1e9:.1f} GB" for r in figure)
            + "; the paper prints "
            + ", ".join(f"{r['paper_GB']:g}" for r in figure)
            + f". The paper rounds its stage-3 bar ({figure[3]['model_bytes'] / 1e9:g} GB) to one decimal."
        )
if tabs[2].open:
    with tabs[2]:
        measured = cached.zero_memory(SMALL_RANKS)
        chart(
            viz.measured_vs_model(
                measured, f"The digits MLP on {SMALL_RANKS} ranks: rank 0's ledger against the closed form"
            ),
            "mem_measured",
        )
        differ = [f"{r['label']} {r['kind']}" for r in measured if r["measured_bytes"] != round(r["model_bytes"])]
        caption(
            f"Every sharded strategy really trained (threads, fp32, SGD with momentum); each rank's "
            f"`comm.memory` ledger counted the numpy arrays it held. {len(measured) - len(differ)} of "
            f"{len(measured)} kinds equal `Layout(...).bytes()` to the byte (shards padded to a multiple of "
            f"the ranks, the buffers the largest unit's). Below the model: {', '.join(differ) or 'none'}; "
            "prefetch is modelled as two units of the largest size, and here the unit after the largest is "
            "the small last layer (docs/sharding.md)."
        )
if tabs[3].open:
    with tabs[3]:
        chart(viz.sent_bars(rows, f"{ranks} ranks: bytes one rank sends per step (ring collectives)"), "mem_sent")
        caption(
            f"DDP all-reduces {format_bytes(g_b * params)} of gradients: 2 (N-1)/N of it, "
            f"{format_bytes(rows[0]['sent_bytes'])}. ZeRO-1 and 2 replace it by a reduce-scatter and an "
            f"all-gather, the same bytes; ZeRO-3 and FSDP gather the weights again in backward: "
            f"{format_bytes(rows[3]['sent_bytes'])}, {rows[3]['sent_bytes'] / rows[0]['sent_bytes']:g} times DDP's. TP sends its DP group's gradients "
            "(1/t of the model) and four all-reduces of the activations per layer."
        )
        layout = st.radio(
            "one step of a small run",
            list(STEP_STRATEGIES),
            index=3,
            horizontal=True,
            key=url_key("mem_step_layout", list(STEP_STRATEGIES)),
        )
        record = cached.memory_step(STEP_STRATEGIES[layout], SMALL_RANKS)
        step = record["trace"]
        chart(
            message_animation({f"{layout}, digits MLP, {SMALL_RANKS} ranks, one step": step}),
            "mem_step_animation",
        )
        chart(viz_comm.timeline(step, f"{layout}: one step's timeline"), "mem_step_timeline")
        caption(
            f"The digits MLP trained under {layout} on {SMALL_RANKS} ranks (tcp-10gbe): rank 0 sent "
            f"{record['step_sent_bytes']:,} bytes in this step. Press ▶ Play: each dot is a message on the "
            "ring, its area its bytes."
        )
