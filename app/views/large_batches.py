"""Large batches: scaling rules, warm-up, LARS and LAMB, sharp minima and time to accuracy,
from the cached large-batch study (``dlsys train --sweep batch`` makes it)."""

import cached
import streamlit as st
from charts import chart
from layout import caption
from urlstate import url_key

from dlsys.experiments import RULES, largest_good_batch
from dlsys.experiments.large_batch import cache_problem
from dlsys.units import format_seconds
from dlsys.viz import large_batch as lbviz

study = cached.large_batch_study()
if study is None:
    st.error(f"The large-batch study cannot be shown: {cache_problem()}.")
    st.stop()
s, n = study["study"], study["train_samples"]
largest, base = max(s["batches"]), s["base_batch"]

st.title("Large batches")
caption(
    f"A real MLP ({'-'.join(str(w) for w in [256, *s['hidden'], 10])}) trained on {n:,} generated digit "
    f"images for {s['epochs']} epochs, data parallel on {s['workers']} workers: the global batch is the sum "
    f"of the workers' batches. Every point is a real training run; time is virtual ({s['link']}, "
    f"{s['node']})."
)

views = ["Scaling rules and warm-up", "LARS and LAMB", "Sharp vs flat minima", "Time to accuracy"]
rules, optimizers, landscape, scaling = st.tabs(views, key=url_key("lb_view", views), on_change="rerun")

if rules.open:
    with rules:
        # two formulas: on one line, the rules and warm-up were wider than the page's column at 1280 px
        st.latex(
            r"\text{batch } kB:\quad \eta_{\text{fixed}} = \eta,\quad \eta_{\sqrt{}} = \sqrt{k}\,\eta,\quad"
            r"\eta_{\text{linear}} = k\,\eta"
        )
        st.latex(r"\text{warm-up: } \eta \to k\eta \text{ linearly over the first epochs}")
        chart(lbviz.accuracy_vs_batch(study["sweep"], s["tolerance"]), "lb_accuracy")
        kept = {rule: largest_good_batch(study["sweep"], rule, s["tolerance"]) for rule in RULES}
        for col, (rule, batch) in zip(st.columns(len(kept)), kept.items()):
            col.metric(rule, f"batch {batch:,}", delta=f"largest within {s['tolerance']:.0%}", delta_color="off")
        caption(
            f"Base: batch {base}, learning rate {s['base_lr']:g}, momentum {s['momentum']:g}. A fixed rate "
            "takes too few steps at large batches; the linear rule (Goyal et al. 2017) keeps the progress per "
            f"epoch until the rate is too large to start with; warm-up over {s['warmup_epochs']} epochs lets "
            "the network reach a flatter region before the full rate."
        )
        batch = st.select_slider(
            "schedules at global batch", s["batches"], value=largest, key=url_key("lb_sched_batch", s["batches"])
        )
        chart(lbviz.lr_schedules(cached.lr_schedules(batch, n), batch), "lb_schedules")

if optimizers.open:
    with optimizers:
        st.latex(
            r"\text{LARS: } \eta_l = \eta\,\frac{\lVert w_l\rVert}{\lVert g_l\rVert + \beta\lVert w_l\rVert}"
            r"\qquad \text{LAMB: } w_l \leftarrow w_l - \eta\,\frac{\lVert w_l\rVert}{\lVert r_l + \lambda w_l\rVert}"
            r"\,(r_l + \lambda w_l)"
        )
        chart(
            lbviz.accuracy_curves(study["optimizers"], "optimizer", "Test accuracy at the largest batches"),
            "lb_optimizers",
        )
        best = {r["optimizer"]: r["test_accuracy"] for r in study["optimizers"] if r["batch"] == largest}
        for col, (name, acc) in zip(st.columns(len(best)), best.items()):
            col.metric(f"{name}, batch {largest:,}", f"{acc:.1%}")
        name = st.radio(
            "per-layer view of", list(best), index=1, horizontal=True, key=url_key("lb_layers_opt", list(best))
        )
        left, right = st.columns(2)
        with left:
            chart(lbviz.layer_ratio_heatmap(study["layers"], name, "ratio"), "lb_ratio")
        with right:
            chart(lbviz.layer_ratio_heatmap(study["layers"], name, "trust"), "lb_trust")
        caption(
            f"||w||/||g|| differs by orders of magnitude between tensors (You et al. 2017), so one global rate "
            f"is too large for some layers and too small for others. LARS (trust coefficient "
            f"{s['trust_coefficient']:g}) and LAMB rescale each tensor's step; SGD applies no trust ratio "
            "(blank). Biases start at zero: their ratio is undefined, and the trust ratio falls back to 1."
        )

if landscape.open:
    with landscape:
        shape = study["landscape"]
        chart(lbviz.loss_landscape(shape), "lb_landscape")
        cols = st.columns(2)
        for col, which in zip(cols, ("small", "large")):
            col.metric(f"sharpness of {shape[which]}", f"{shape['sharpness'][which]:.3g}")
        caption(
            f"Keskar et al. 2017: sharpness = 100 max (L(w + d) - L(w)) / (1 + L(w)) over perturbations "
            f"|d_i| <= {s['sharpness_epsilon']:g} (|w_i| + 1), here the max of {s['sharpness_samples']} random "
            f"draws on {s['landscape_samples']:,} training samples. A sharper minimum's training loss says "
            "less about its test loss."
        )

if scaling.open:
    with scaling:
        rows = study["time_to_accuracy"]
        chart(lbviz.time_to_accuracy(rows, s["target_accuracy"]), "lb_time")
        fastest = min((r for r in rows if r["time_to_target_s"] is not None), key=lambda r: r["time_to_target_s"])
        caption(
            f"Linear scaling with warm-up from batch {base}. More workers shorten every epoch, but the global "
            f"batch grows with them: past some size each epoch is worth less, and the rate the linear rule asks "
            f"for no longer trains. Fastest here: {fastest['workers']} workers x batch "
            f"{fastest['batch_per_worker']} ({format_seconds(fastest['time_to_target_s'])})."
        )
