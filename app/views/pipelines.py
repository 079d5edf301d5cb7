"""Pipelines and the planner: each pipeline schedule's step as a Gantt chart with its bubble
and activation memory; an all-to-all step by step and the experts it feeds; the planner's
ranking of DP x TP x PP x ZeRO layouts on a GPU cluster and the chosen one's breakdown."""

import streamlit as st

import cached
from charts import chart
from urlstate import url_key
from dlsys.experiments import plan as ex_plan
from dlsys.planner import MODELS
from dlsys.train.pipeline import SCHEDULES
from dlsys.viz import plan as viz_plan
from dlsys.viz import pipeline as viz_pipeline
from dlsys.viz.units import format_bytes

STAGES = [2, 3, 4, 6, 8]
CHUNKS = [2, 3, 4]
GPUS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
BATCHES = [64, 128, 256, 512, 1024, 2048, 4096]
DEVICE_GIB = [24, 40, 80, 141]
TOP = 10

st.title("Pipelines and the planner")
st.markdown(
    "A pipeline cuts the model's layers into **p stages** and each batch into **m micro-batches**. "
    "**GPipe** runs every forward, then every backward; **1F1B** starts a micro-batch's backward as soon as it "
    "can, so a stage holds at most p of them; **interleaving** gives each rank v smaller chunks, so the pipe "
    "fills v times faster; **zero bubble** (ZB-H1) splits the backward into the input gradient B, which the "
    "previous stage waits for, and the weight gradient W, which nobody waits for and fills the idle time. "
    "Each bar below is one action of the small transformer on the emulator, with communication free so the "
    "bubble is the schedule's alone (`dlsys.train.pipeline`).")

tabs = st.tabs(["Pipeline schedules", "The planner"], key=url_key("pipe_view"), on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        cols = st.columns([1.2, 1, 1.6, 1])
        schedule = cols[0].selectbox("schedule", list(SCHEDULES), index=1, key=url_key("pipe_schedule"),
                                     help="; ".join(f"{s.name}: {s.citation}" for s in SCHEDULES.values()))
        stages = cols[1].selectbox("stages p", STAGES, index=2, key=url_key("pipe_stages"))
        micro_batches = cols[2].select_slider("micro-batches m", [stages * k for k in range(1, 7)], value=2 * stages,
                                              key=url_key("pipe_microbatches"),
                                              help="Multiples of p: 1F1B and ZB-H1 need m >= p, interleaving m "
                                                   "divisible by p (Megatron-LM).")
        chunks = cols[3].selectbox("chunks v", CHUNKS, key=url_key("pipe_chunks"),
                                   disabled=not SCHEDULES[schedule].chunked, help="Interleaved 1F1B only.")
        v = chunks if SCHEDULES[schedule].chunked else 1
        record = cached.pipeline_schedule(schedule, stages, micro_batches, v)
        bubble, memory = record["bubble"][0], record["memory"]
        m = st.columns(4)
        m[0].metric("bubble, measured", f"{bubble['measured']:.1%}", help="Stage 0's idle time over the step.")
        m[1].metric("bubble, formula", f"{bubble['formula']:.1%}", help=f"${record['bubble_latex']}$")
        m[2].metric("peak activations, stage 0", format_bytes(memory[0]["activation_peak_nbytes"]),
                    help="The memory ledger's peak: the micro-batches (and chunks) stage 0 holds at once.")
        m[3].metric("micro-batches in flight, stage 0", memory[0]["in_flight"])
        chart(viz_pipeline.gantt(record), "pipe_gantt")
        st.caption(
            f"{schedule} on p = {stages} stages, m = {micro_batches} micro-batches"
            + (f", v = {v} chunks a rank" if v > 1 else "")
            + f", the transformer's {record['layers']} layers; forward, input gradient and weight gradient cost "
            f"the same (Qi et al. 2024's T_F = T_B = T_W; an unsplit backward twice that). Measured bubble "
            f"{bubble['measured']:.4f} against ${record['bubble_latex']}$ = {bubble['formula']:.4f}. "
            f"Source: {record['citation']}.")
        everyone = [cached.pipeline_schedule(name, stages, micro_batches, chunks if s.chunked else 1)
                    for name, s in SCHEDULES.items()]
        chart(viz_pipeline.stage_memory(everyone, f"Peak activations per stage at p = {stages}, m = {micro_batches} "
                                                  "(the number above a bar: micro-batches held)"), "pipe_memory")
        held = {r["schedule"]: r["memory"][0]["in_flight"] for r in everyone}
        st.caption(f"Stage 0 holds {held['gpipe']} micro-batches under GPipe (all m), {held['1f1b']} under 1F1B "
                   f"(p), {held['zb-h1']} under ZB-H1 (p: a micro-batch stays until its W), and {held['interleaved']} "
                   f"chunk activations under interleaving (each 1/v of a stage's). Same bubble for GPipe and 1F1B: "
                   "1F1B's gain is memory, which buys more micro-batches and so a smaller bubble.")
        rows = cached.pipeline_bubbles(stages, tuple(stages * k for k in (1, 2, 3, 4)), chunks)
        chart(viz_pipeline.bubble_vs_microbatches(rows), "pipe_bubbles")
        worst = max(abs(r["measured"] - r["formula"]) for r in rows)
        st.caption(f"Every marker is a run on the emulator; the dashed lines are the formulas. The largest "
                   f"difference over {len(rows)} runs: {worst:.1e}.")
if tabs[1].open:
    with tabs[1]:
        cols = st.columns(4)
        model = cols[0].selectbox("model", list(MODELS), index=1, key=url_key("plan_model"),
                                  format_func=lambda k: MODELS[k].name, help="; ".join(m.source for m in MODELS.values()))
        gpus = cols[1].select_slider("GPUs", GPUS, value=64, key=url_key("plan_gpus"))
        global_batch = cols[2].select_slider("global batch (sequences)", BATCHES, value=1024, key=url_key("plan_batch"))
        device_gib = cols[3].selectbox("device memory (GiB)", DEVICE_GIB, index=2, key=url_key("plan_device"))
        rows = cached.plan_ranked(model, gpus, global_batch, device_gib)
        if not rows:
            st.warning(f"No layout of {MODELS[model].name} fits {gpus} GPUs of {device_gib} GiB: add GPUs or memory.")
            st.stop()
        chart(viz_plan.step_bars(rows[:TOP], f"{MODELS[model].name} on {gpus} GPUs: the {min(TOP, len(rows))} "
                                             "fastest layouts that fit, one step by component"), "plan_bars")
        st.dataframe([{"#": r["rank"], "tp": r["tp"], "pp": r["pp"], "dp": r["dp"], "ZeRO": r["zero"],
                       "micro-batch": r["micro_batch"], "micro-batches": r["microbatches"], "recompute": r["recompute"],
                       "step (s)": round(r["step_s"], 3), "memory / GPU": format_bytes(r["memory_bytes"]),
                       "MFU": f"{r['mfu']:.1%}"} for r in rows[:TOP]], hide_index=True)
        pick = st.selectbox("layout to break down", [r["rank"] for r in rows[:TOP]], key=url_key("plan_pick"),
                            format_func=lambda i: viz_plan.layout_label(rows[i - 1]))
        row = rows[pick - 1]
        record = ex_plan.layout_record(model, gpus, row["tp"], row["pp"], row["zero"], row["micro_batch"],
                                       global_batch, row["recompute"], device_bytes=device_gib * 2**30)
        chart(viz_plan.memory_bar(record), "plan_memory")
        parts = ", ".join(f"{c['component']} {c['seconds']:.3f} s ({c['share']:.0%})" for c in ex_plan.components(record))
        st.caption(f"{len(rows)} layouts fit {device_gib} GiB. Layout #{pick}: a step of {record['step_s']:.3f} s = "
                   f"{parts}; {format_bytes(record['memory_bytes'])} per GPU. Compute is charged at the device's "
                   "dense peak (MFU is therefore an upper bound); TP groups stay inside the 8-GPU NVLink islands "
                   "of `gpu_cluster`, DP and PP cross InfiniBand (`dlsys.planner`, docs/planner.md).")
