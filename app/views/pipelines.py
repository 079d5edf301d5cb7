"""Pipelines and the planner: each pipeline schedule's step as a Gantt chart with its bubble
and activation memory; an all-to-all step by step and the experts it feeds; the planner's
ranking of DP x TP x PP x ZeRO layouts on a GPU cluster and the chosen one's breakdown."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key
from widgets import link_select

from dlsys.experiments import experts as ex_experts
from dlsys.experiments import plan as ex_plan
from dlsys.planner import CAVEATS, DEVICES, MODELS
from dlsys.train.pipeline import SCHEDULES
from dlsys.units import format_bytes, format_seconds
from dlsys.viz import experts as viz_experts
from dlsys.viz import pipeline as viz_pipeline
from dlsys.viz import plan as viz_plan
from dlsys.viz.animation import message_animation

STAGES = [2, 3, 4, 6, 8]
CHUNKS = [2, 3, 4]
GPUS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
BATCHES = [64, 128, 256, 512, 1024, 2048, 4096]
DEVICE_GIB = [24, 40, 80, 141]
TOP = 10
A2A_RANKS = [2, 3, 4, 5, 6, 8]
BLOCKS = [8, 64, 256, 2**10, 2**12, 2**14, 2**16]
EP = [1, 2, 4, 8]

st.title("Pipelines and the planner")
markdown(
    "A pipeline cuts the model's layers into **p stages** and each batch into **m micro-batches**. "
    "**GPipe** runs every forward, then every backward; **1F1B** starts a micro-batch's backward as soon as it "
    "can, so a stage holds at most p of them; **interleaving** gives each rank v smaller chunks, so the pipe "
    "fills v times faster; **zero bubble** (ZB-H1) splits the backward into the input gradient B, which the "
    "previous stage waits for, and the weight gradient W, which nobody waits for and fills the idle time. "
    "Each bar below is one action of the small transformer on the emulator, with communication free so the "
    "bubble is the schedule's alone (`dlsys.train.pipeline`)."
)

VIEWS = ["Pipeline schedules", "All-to-all and experts", "The planner"]
tabs = st.tabs(VIEWS, key=url_key("pipe_view", VIEWS), on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        cols = st.columns([1.2, 1, 1.6, 1])
        schedule = cols[0].selectbox(
            "schedule",
            list(SCHEDULES),
            index=1,
            key=url_key("pipe_schedule", list(SCHEDULES)),
            help="; ".join(f"{s.name}: {s.citation}" for s in SCHEDULES.values()),
        )
        stages = cols[1].selectbox("stages p", STAGES, index=2, key=url_key("pipe_stages", STAGES))
        counts = [stages * k for k in range(1, 7)]
        micro_batches = cols[2].select_slider(
            "micro-batches m",
            counts,
            value=2 * stages,
            key=url_key("pipe_microbatches", counts),
            help="Multiples of p: 1F1B and ZB-H1 need m >= p, interleaving m divisible by p (Megatron-LM).",
        )
        chunks = cols[3].selectbox(
            "chunks v",
            CHUNKS,
            key=url_key("pipe_chunks", CHUNKS),
            disabled=not SCHEDULES[schedule].chunked,
            help="Interleaved 1F1B only.",
        )
        v = chunks if SCHEDULES[schedule].chunked else 1
        record = cached.pipeline_schedules(stages, (micro_batches,), chunks, (schedule,))[0]
        bubble, memory = record["bubble"][0], record["memory"]
        m = st.columns(4)
        m[0].metric("bubble, measured", f"{bubble['measured']:.1%}", help="Stage 0's idle time over the step.")
        m[1].metric("bubble, formula", f"{bubble['formula']:.1%}", help=f"${record['bubble_latex']}$")
        m[2].metric(
            "peak activations, stage 0",
            format_bytes(memory[0]["activation_peak_nbytes"]),
            help="The memory ledger's peak: the micro-batches (and chunks) stage 0 holds at once.",
        )
        m[3].metric("micro-batches in flight, stage 0", memory[0]["in_flight"])
        chart(viz_pipeline.gantt(record), "pipe_gantt")
        caption(
            f"{schedule} on p = {stages} stages, m = {micro_batches} micro-batches"
            + (f", v = {v} chunks a rank" if v > 1 else "")
            + f", the transformer's {record['layers']} layers; forward, input gradient and weight gradient cost "
            f"the same (Qi et al. 2024's T_F = T_B = T_W; an unsplit backward twice that). Measured bubble "
            f"{bubble['measured']:.4f} against ${record['bubble_latex']}$ = {bubble['formula']:.4f}. "
            f"Source: {record['citation']}."
        )
        everyone = cached.pipeline_schedules(stages, (micro_batches,), chunks)
        chart(
            viz_pipeline.stage_memory(
                everyone,
                f"Peak activations per stage at p = {stages}, m = {micro_batches} "
                "(the number above a bar: micro-batches held)",
            ),
            "pipe_memory",
        )
        held = {r["schedule"]: r["memory"][0]["in_flight"] for r in everyone}
        caption(
            f"Stage 0 holds {held['gpipe']} micro-batches under GPipe (all m), {held['1f1b']} under 1F1B "
            f"(p), {held['zb-h1']} under ZB-H1 (p: a micro-batch stays until its W), and {held['interleaved']} "
            f"chunk activations under interleaving (each 1/v of a stage's). Same bubble for GPipe and 1F1B: "
            "1F1B's gain is memory, which buys more micro-batches and so a smaller bubble."
        )
        rows = cached.pipeline_bubbles(stages, tuple(stages * k for k in (1, 2, 3, 4)), chunks)
        chart(viz_pipeline.bubble_vs_microbatches(rows), "pipe_bubbles")
        worst = max(abs(r["measured"] - r["formula"]) for r in rows)
        caption(
            f"Every marker is a run on the emulator; the dashed lines are the formulas. The largest "
            f"difference over {len(rows)} runs: {worst:.1e}."
        )
if tabs[1].open:
    with tabs[1]:
        cols = st.columns(4)
        algorithm = cols[0].selectbox(
            "all-to-all algorithm", ["pairwise", "bruck"], key=url_key("a2a_algorithm", ["pairwise", "bruck"])
        )
        ranks = cols[1].selectbox("ranks p", A2A_RANKS, index=3, key=url_key("a2a_ranks", A2A_RANKS))
        block = cols[2].select_slider(
            "block (bytes a rank sends each other rank)",
            BLOCKS,
            value=2**12,
            format_func=format_bytes,
            key=url_key("a2a_block", BLOCKS),
        )
        with cols[3]:
            link_name = link_select("a2a_link", "rdma-edr")
        record = cached.alltoall(algorithm, ranks, block, link_name)
        m = st.columns(3)
        m[0].metric("virtual time", format_seconds(record["virtual_time_s"]))
        m[1].metric("closed form", format_seconds(record["closed_form_s"]))
        m[2].metric("messages", len(record["trace"].messages))
        chart(
            message_animation(
                {f"all-to-all / {algorithm}, {ranks} ranks, blocks of {format_bytes(block)}": record["trace"]}
            ),
            "a2a_animation",
        )
        chart(
            viz_experts.alltoall_steps_figure(ex_experts.alltoall_steps(ranks, algorithm, link_name), algorithm),
            "a2a_steps",
        )
        crossover = ex_experts.bruck_crossover_block_nbytes(ranks, link_name)
        caption(
            f"Rank r's block d goes to rank d. Pairwise exchange: p - 1 = {ranks - 1} steps, step k sends "
            "to r + k and receives from r - k, one block each: (p-1)(α + n/p β). Bruck: ⌈lg p⌉ steps, each "
            "forwarding the blocks whose distance has bit k set: fewer messages, more bytes. On "
            f"{link_name} with {ranks} ranks Bruck wins below blocks of {format_bytes(crossover)} (closed "
            f"forms); MPICH runs Bruck up to {ex_experts.MPICH_ALLTOALL_SHORT_MSG_SIZE} B at p >= "
            f"{ex_experts.MPICH_ALLTOALL_MIN_BRUCK_RANKS} and would run {ex_experts.mpich_alltoall_algorithm(block, ranks)} "
            "here (docs/experts.md). Each cell of the lower figure is a message; its text the blocks it "
            "carries, source→destination."
        )
        chart(viz_experts.alltoall_cost_figure(cached.alltoall_costs(16, link_name)), "a2a_costs")
        st.subheader("Mixture of experts")
        cols = st.columns(4)
        ep = cols[0].selectbox("expert-parallel ranks", EP, index=2, key=url_key("moe_ep", EP))
        top_k = cols[1].radio(
            "top-k",
            [1, 2],
            horizontal=True,
            key=url_key("moe_top_k", [1, 2]),
            help="1: Switch Transformer (Fedus et al. 2021); 2: GShard (Lepikhin et al. 2020).",
        )
        factors = sorted({r["capacity_factor"] for r in cached.expert_load(ep, 8)})
        factor = cols[2].select_slider("capacity factor", factors, value=1.0, key=url_key("moe_capacity", factors))
        rows = cached.expert_load(ep, 8)
        chart(viz_experts.expert_load_figure(rows, top_k, factor), "moe_load")
        dropped = ex_experts.dropped_fraction(rows)
        chart(viz_experts.dropped_figure(dropped), "moe_dropped")
        here = next(d for d in dropped if d["top_k"] == top_k and d["capacity_factor"] == factor)
        caption(
            f"8 experts over {ep} ranks, 64 tokens a rank, an untrained router (`dlsys.train.moe`). Each "
            "expert takes at most capacity = ⌈factor x tokens x k / experts⌉ tokens of a rank; the rest are "
            f"dropped and pass through the residual unchanged. Top-{top_k} at factor {factor:g}: "
            f"{here['dropped_fraction']:.1%} of the choices dropped. Tokens travel to their experts' ranks "
            "by all-to-all-v and come back by another; the outputs equal one rank's MoE layer."
        )
if tabs[2].open:
    with tabs[2]:
        cols = st.columns(5)
        model = cols[0].selectbox(
            "model",
            list(MODELS),
            index=1,
            key=url_key("plan_model", list(MODELS)),
            format_func=lambda k: MODELS[k].name,
            help="; ".join(m.source for m in MODELS.values()),
        )
        gpus = cols[1].select_slider("GPUs", GPUS, value=64, key=url_key("plan_gpus", GPUS))
        global_batch = cols[2].select_slider(
            "global batch (sequences)", BATCHES, value=1024, key=url_key("plan_batch", BATCHES)
        )
        device = cols[3].selectbox(
            "device",
            list(DEVICES),
            index=1,
            key=url_key("plan_gpu", list(DEVICES)),
            format_func=lambda k: DEVICES[k].name,
            help="; ".join(d.source for d in DEVICES.values()),
        )
        device_gib = cols[4].selectbox(
            "device memory (GiB)", DEVICE_GIB, index=2, key=url_key("plan_device", DEVICE_GIB)
        )
        rows = cached.plan_ranked(model, gpus, global_batch, device_gib, device)
        if not rows:
            st.warning(f"No layout of {MODELS[model].name} fits {gpus} GPUs of {device_gib} GiB: add GPUs or memory.")
            st.stop()
        chart(
            viz_plan.step_bars(
                rows[:TOP],
                f"{MODELS[model].name} on {gpus} GPUs: the {min(TOP, len(rows))} "
                "fastest layouts that fit, one step by component",
            ),
            "plan_bars",
        )
        st.dataframe(
            [
                {
                    "#": r["rank"],
                    "tp": r["tp"],
                    "pp": r["pp"],
                    "dp": r["dp"],
                    "ep": r["ep"],
                    "ZeRO": r["zero"],
                    "micro-batch": r["micro_batch"],
                    "micro-batches": r["microbatches"],
                    "recompute": r["recompute"],
                    "SP": "on" if r["sequence_parallel"] else "off",
                    "TP overlap": "on" if r["tp_overlap"] else "off",
                    "v": r["virtual_stages"],
                    "step (s)": round(r["step_s"], 3),
                    "memory / GPU": format_bytes(r["memory_bytes"]),
                    "TFLOP/s a GPU": round(r["tflops"]),
                    "MFU": f"{r['mfu']:.1%}",
                }
                for r in rows[:TOP]
            ],
            hide_index=True,
        )
        ranked = [r["rank"] for r in rows[:TOP]]
        pick = st.selectbox(
            "layout to break down",
            ranked,
            key=url_key("plan_pick", ranked),
            format_func=lambda i: viz_plan.layout_label(rows[i - 1]),
        )
        row = rows[pick - 1]
        record = ex_plan.layout_record(
            model,
            gpus,
            row["tp"],
            row["pp"],
            row["zero"],
            row["micro_batch"],
            global_batch,
            row["recompute"],
            device,
            device_gib * 2**30,
            row["ep"],
            sequence_parallel=row["sequence_parallel"],
            tp_overlap=row["tp_overlap"],
            virtual_stages=row["virtual_stages"],
        )
        chart(viz_plan.memory_bar(record), "plan_memory")
        parts = ", ".join(
            f"{c['component']} {c['seconds']:.3f} s ({c['share']:.0%})" for c in ex_plan.components(record)
        )
        caption(
            f"{len(rows)} layouts fit {device_gib} GiB. Layout #{pick}: a step of {record['step_s']:.3f} s = "
            f"{parts}; {format_bytes(record['memory_bytes'])} per GPU; {record['tflops']:.0f} TFLOP/s a GPU "
            f"(Megatron's count, recomputation included), MFU {record['mfu']:.1%} of the {record['device']}'s "
            "dense peak. Each kernel is a roofline on the device's measured matmul ceiling and HBM bandwidth; "
            "TP groups stay inside the 8-GPU NVLink islands, DP and PP cross InfiniBand; a mixture of experts "
            "spreads its experts over ep data-parallel copies and moves tokens by all-to-all (`dlsys.planner`, "
            f"docs/planner.md, where Megatron's published runs hold it to account). Caveats: {CAVEATS}."
        )
