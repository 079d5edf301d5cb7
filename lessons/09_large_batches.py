# ---
# jupyter:
#   jupytext:
#     formats: lessons//py:percent,notebooks//ipynb
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lesson 09: Large batches
#
# **Goal.** By the end you can (1) say why a larger global batch means fewer messages and
# what it costs in accuracy; (2) scale the learning rate with the linear and square-root
# rules and add Goyal et al.'s gradual warm-up; (3) compute LARS's layer-wise rate and say
# why layers need different rates; (4) measure the sharpness of a minimum (Keskar et al.);
# (5) find where adding workers stops shortening the time to a target accuracy.
#
# Run this file as `python lessons/09_large_batches.py` (figures go to `out/lessons/`), or
# open it with `jupytext --to notebook lessons/09_large_batches.py`.

# %%
import numpy as np

from dlsys.learn import nn, optim
from dlsys.experiments import QUICK, RULES, large_batch_study, largest_good_batch, load_study, lr_schedules
from dlsys.experiments.large_batch import cache_problem
from dlsys.viz import large_batch as lbviz
from dlsys.viz.lessons import show

# %% [markdown]
# ## Fewer, larger steps
#
# Data-parallel SGD on P workers with b samples each takes steps on a global batch of
# B = Pb, and all-reduces the gradient once per step. An epoch of n samples then costs
# n / B all-reduces: doubling the batch halves the messages. But it also halves the
# number of updates, so with the same learning rate an epoch makes less progress. The
# **linear scaling rule** (Goyal et al. 2017) keeps the progress per sample: for a batch
# k times larger, take a k times larger rate,
#
# $$\eta_k = k\,\eta, \qquad \text{(some optimizers use } \eta_k = \sqrt{k}\,\eta\text{)},$$
#
# because k small steps of size eta move the weights about as far as one step of k eta,
# as long as the gradient changes little over those k steps. That fails at the start,
# where the gradient changes fast: **gradual warm-up** ramps the rate linearly from eta
# to k eta over the first epochs (5 of 90 in the paper, ResNet-50 at batch 8,192).

# %%
study = QUICK
rows = lr_schedules(study, max(study.batches))
show(lbviz.lr_schedules(rows, max(study.batches)), "09_schedules")
for rule in ("fixed", "sqrt", "linear", "linear + warm-up"):
    mine = [r["lr"] for r in rows if r["rule"] == rule]
    print(f"{rule:<18} first step lr {mine[0]:.4g}, peak {max(mine):.4g}")

# %% [markdown]
# ## A real batch sweep
#
# `QUICK` is a small study on the 8x8 digits that trains in seconds; every point is a real
# data-parallel run. The full study (`dlsys train --sweep batch`, a few minutes) trains an
# MLP on an MNIST-sized set of generated digit images, from batch 32 to 8,192; its results
# are cached in `results/large_batch.json`, and the app's "Large batches" page shows them.

# %%
quick = large_batch_study(QUICK, path=None)
show(lbviz.accuracy_vs_batch(quick["sweep"], QUICK.tolerance), "09_quick_sweep")
for rule in RULES:
    print(f"{rule:<18} keeps within {QUICK.tolerance:.0%} up to batch "
          f"{largest_good_batch(quick['sweep'], rule, QUICK.tolerance)}")

# %%
problem = cache_problem()  # None once `dlsys train --sweep batch` has run with the current code and settings
full = None if problem else load_study()
record = full if full is not None else quick
print("showing the full study" if full is not None else f"showing the quick study: {problem}")
s = record["study"]
show(lbviz.accuracy_vs_batch(record["sweep"], s["tolerance"]), "09_sweep")
for rule in RULES:
    print(f"{rule:<18} largest batch within {s['tolerance']:.0%} of batch {s['base_batch']}: "
          f"{largest_good_batch(record['sweep'], rule, s['tolerance'])}")

# %% [markdown]
# ## LARS: a rate per layer
#
# You et al. 2017 measured ||w|| / ||g|| for every layer of AlexNet: the ratios differ by
# orders of magnitude, so a global rate large enough for one layer makes another diverge.
# LARS gives layer l its own *local* rate, with trust coefficient eta (0.001) and weight
# decay beta:
#
# $$\lambda_l = \eta\, \frac{\lVert w_l\rVert}{\lVert g_l\rVert + \beta\,\lVert w_l\rVert}, \qquad
#   v \leftarrow m\,v + \gamma\,\lambda_l\,(g_l + \beta w_l), \qquad w \leftarrow w - v.$$
#
# A layer whose weights are all zero (a bias at initialisation) would get a zero rate and
# never move; one without gradient would divide by zero. Both get ratio 1 instead. LAMB
# (You et al. 2019) applies the same layer-wise ratio to Adam's update.

# %%
model = nn.mlp([64, 32, 32, 10], seed=0)
rng = np.random.default_rng(0)
X, y = rng.normal(size=(64, 64)).astype(np.float32), rng.integers(0, 10, 64)
loss, dlogits = nn.softmax_cross_entropy(model.forward(X), y)
model.backward(dlogits)
lars = optim.LARS(model.params, model.grads, 1.0, model.param_slices(), weight_decay=5e-4)
for s_, ratio in zip(model.param_slices(), lars.local_lr()):
    w = np.linalg.norm(model.params[s_.offset:s_.offset + s_.size])
    g = np.linalg.norm(model.grads[s_.offset:s_.offset + s_.size])
    by_hand = 0.001 * w / (g + 5e-4 * w) if w > 0 and g > 0 else 1.0
    print(f"{s_.name:<10} ||w|| {w:8.4f}  ||g|| {g:8.4f}  ||w||/||g|| {w / g:9.3g}  "
          f"LARS {ratio:.3g} (by hand {by_hand:.3g})")

# %%
show(lbviz.layer_ratio_heatmap(record["layers"], "sgd + warm-up", "ratio"), "09_ratios")
show(lbviz.layer_ratio_heatmap(record["layers"], "lars", "trust"), "09_trust")
for r in record["optimizers"]:
    print(f"{r['optimizer']:<14} batch {r['batch']:>5}: test accuracy {r['test_accuracy']:.1%}")

# %% [markdown]
# ## Sharp and flat minima
#
# Keskar et al. 2017 found that large-batch training converges to *sharp* minima, where
# the loss rises quickly around the solution, and small batches to flat ones; a sharp
# minimum's training loss predicts its test loss badly. Their sharpness of a solution w is
# the largest relative loss rise in a small box:
#
# $$\phi(w) = 100\,\frac{\max_{|\delta_i| \le \epsilon(|w_i| + 1)} L(w + \delta) - L(w)}{1 + L(w)}.$$
#
# `dlsys.learn.landscape.sharpness` takes the max over random draws. The plot walks the line
# from the small-batch solution (alpha = 0) to the large-batch one (alpha = 1).

# %%
shape = record["landscape"]
show(lbviz.loss_landscape(shape), "09_landscape")
for which in ("small", "large"):
    print(f"sharpness of {shape[which]}: {shape['sharpness'][which]:.3g}")

# %% [markdown]
# ## Time to accuracy
#
# More workers make every epoch shorter, since each computes 1/P of it, but only while
# the global batch stays small enough to train well: past that, each epoch is worth less
# and the warm-up and scaling rules run out. The virtual time comes from the node model
# (FLOPs) and the link model (the ring all-reduce of every step).

# %%
show(lbviz.time_to_accuracy(record["time_to_accuracy"], s["target_accuracy"]), "09_time_to_accuracy")
for r in record["time_to_accuracy"]:
    reached = f"{r['time_to_target_s'] * 1e3:.2f} ms" if r["time_to_target_s"] is not None else "never"
    print(f"{r['workers']:>3} workers x batch {r['batch_per_worker']:>4} = {r['global_batch']:>5}: "
          f"{s['target_accuracy']:.0%} after {reached}")

# %% [markdown]
# ## Try it
#
# 1. In the full study, which rule keeps the largest batch within the tolerance of the smallest batch? Where
#    does linear scaling without warm-up break, and why does warm-up move that point?
# 2. Change `Study.warmup_epochs` in `dlsys.experiments.large_batch` (a copy of the study:
#    `dataclasses.replace(QUICK, warmup_epochs=2)`) and rerun the quick sweep. Is longer
#    warm-up always better?
# 3. For a one-parameter loss L(w) = c w^2 / 2 at its minimum w = 0, compute the sharpness
#    by hand for epsilon = 0.05. How does it depend on c?
# 4. In the heat map of ||w|| / ||g||, which tensors have the largest ratio? What would
#    one global learning rate do to them?
#
# ## Exercise (graded): `lars_local_lr` and `goyal_schedule`
#
# `lars_local_lr`: write `trust_ratio` and `LARS.local_lr` in `dlsys/learn/optim.py`: the rate
# per layer with the weight-decay term, and ratio 1 for zero norms. `goyal_schedule`:
# write `warmup_lr`, `step_decay_lr` and `goyal_schedule` (warm-up from eta to k eta,
# then divide by gamma at each milestone). `dlsys exercises release hw`, then
# `dlsys grade hw --exercise lars_local_lr`.
