"""Gradient compression: what each method does to a gradient, its bytes, its accuracy, its time."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key
from widgets import option_input

from dlsys.compress import COMPRESSORS
from dlsys.compress.qsgd import BITS as QSGD_BITS
from dlsys.machine.profiles import PROFILES
from dlsys.units import format_bytes, format_seconds
from dlsys.viz import compression as viz
from dlsys.viz.animation import message_animation

RATIOS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
PAPER_CLIP = 2.5  # TernGrad's clip in standard deviations (Wen et al. 2017)

st.title("Gradient compression")
markdown(
    "Send fewer bytes per gradient: **quantize** each entry to fewer bits (fp16, 8-bit, 1-bit SGD, TernGrad, QSGD) "
    "or **sparsify**, sending a few (index, value) pairs (top-k, random-k, gradient dropping, DGC). Biased methods "
    "keep what they did not send in a **residual** and add it to the next gradient (error feedback). "
    "The bytes below are the encoded payloads that really travel; compressing and decoding are charged on the "
    "node's roofline, so a fast network can make compression a loss."
)

cols = st.columns(3)
method = cols[0].selectbox(
    "method", list(COMPRESSORS), index=list(COMPRESSORS).index("topk"), key=url_key("cmp_method", list(COMPRESSORS))
)
declared = {o.name: o for o in COMPRESSORS[method].options}
options = {}
if "ratio" in declared:
    value = 0.01 if method != "randomk" else 0.25
    options["ratio"] = option_input(
        declared["ratio"], "cmp_ratio", "ratio kept", values=RATIOS, value=value, where=cols[1]
    )
if "bits" in declared:
    options["bits"] = option_input(
        declared["bits"], "cmp_bits", "bits per entry", values=list(QSGD_BITS), value=4, selectbox=True, where=cols[1]
    )
if "clip" in declared and cols[1].toggle(
    f"clip at {PAPER_CLIP} sigma", key=url_key("cmp_clip", [False, True]), help=declared["clip"].help
):
    options["clip"] = PAPER_CLIP
if "warmup_epochs" in declared:
    options["warmup_epochs"] = 0  # the figures below show one step, where warm-up does not apply
key = tuple(sorted(options.items()))
data = cached.compression(method, key)
once = data["once"]
m = st.columns(3)
m[0].metric("dense fp32 gradient", format_bytes(once["dense_nbytes"]))
m[1].metric("encoded payload", format_bytes(once["encoded_nbytes"]))
m[2].metric("ratio", f"{once['dense_nbytes'] / max(once['encoded_nbytes'], 1):.1f}x")

views = ["Before and after", "Residual", "Accuracy vs bytes", "Messages", "Iteration time", "Per model"]
tabs = st.tabs(views, key=url_key("cmp_view", views), on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        chart(viz.histogram(once), "cmp_histogram")
        caption(
            "A real gradient of the digits MLP (one batch of 128) and what every receiver decodes from "
            f"{format_bytes(once['encoded_nbytes'])}. Counts on a log axis."
        )
if tabs[1].open:
    with tabs[1]:
        chart(viz.residual(data["residual"], method), "cmp_residual")
        rows = data["residual"]
        what = "the residual carried to the next step" if rows[-1]["carried"] else "what was not sent (dropped)"
        caption(
            f"One worker's SGD for {len(rows)} steps: at the last, {what} has norm "
            f"{rows[-1]['error_norm']:.3g} against a gradient of {rows[-1]['gradient_norm']:.3g}. Biased "
            "methods (1-bit, top-k, dropping, DGC) carry what they did not send until it adds up; unbiased "
            "ones (TernGrad, QSGD, random-k) send the whole gradient in expectation and keep nothing."
        )
if tabs[2].open:
    with tabs[2]:
        fresh = st.toggle("re-run every method now (about 20 s) instead of the cached runs", key="cmp_fresh")
        rows = cached.compression_pareto(fresh)
        chart(viz.pareto(rows), "cmp_pareto")
        best = max(rows, key=lambda r: r["compression_ratio"])
        caption(
            f"Digits MLP, {rows[0]['workers']} workers, {rows[0]['epochs']} epochs, ring all-reduce or "
            f"all-gather per tensor. Fewest bytes: {best['method']} at {format_bytes(best['bytes_per_step'])} "
            f"per step and {best['test_accuracy']:.1%} accuracy."
        )
if tabs[3].open:
    with tabs[3]:
        chart(message_animation({f"{method}": data["trace"]}), "cmp_animation")
        caption(
            "One compressed exchange of real gradients on 4 workers: arrows are sized by the encoded bytes. "
            "Sparse methods of varying size first exchange their lengths (tiny messages)."
        )
if tabs[4].open:
    with tabs[4]:
        split = cached.compression_split(method, key)
        chart(viz.iteration_split(split), "cmp_split")
        slow, fast = ([r for r in split if r["link"] == link] for link in ("tcp-1gbe", "rdma-edr"))
        caption(
            f"Per iteration on 1 GbE: dense {format_seconds(slow[0]['iteration_s'])}, {method} "
            f"{format_seconds(slow[1]['iteration_s'])}; on RDMA EDR: dense {format_seconds(fast[0]['iteration_s'])}, "
            f"{method} {format_seconds(fast[1]['iteration_s'])}. Each tensor is compressed and sent on its own, "
            "so per-message latency adds up (fusion, the next topic, fixes that)."
        )
if tabs[5].open:
    with tabs[5]:
        model = st.selectbox(
            "model", PROFILES, index=list(PROFILES).index("resnet50"), key=url_key("cmp_model", PROFILES)
        )
        table = cached.compression_model(model, method, key)
        chart(viz.layer_bytes(table), "cmp_layers")
        caption(
            f"One iteration of {model}: {format_bytes(table['dense_nbytes'])} dense, "
            f"{format_bytes(table['encoded_nbytes'])} encoded; compressing takes "
            f"{format_seconds(table['compress_s'])} on a {table['node']}. Same as `dlsys compress --model "
            f"{model} --method {method}`."
        )
