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
# # Lesson 08: Gradient compression: send fewer bytes, honestly counted
#
# **Goal.** By the end you can (1) say what quantization (TernGrad, QSGD, 1-bit) and
# sparsification (top-k, random-k) do to a real gradient, and count the bytes each really
# puts on the wire; (2) tell an unbiased compressor from a biased one, and explain why a
# biased one needs error feedback; (3) predict when compression makes training *slower*:
# it trades communication for compute, which pays only on a slow link.
#
# Run this file as `python lessons/08_gradient_compression.py` (figures go to `out/lessons/`),
# or open it as a notebook with `jupytext --to notebook lessons/08_gradient_compression.py`.

# %%
import numpy as np
import plotly.graph_objects as go

import dlsys
from dlsys.learn import nn
from dlsys.collectives.compressed import encode, exchange
from dlsys.compress import COMPRESSORS, NoneMemory, ResidualMemory, make, payload_nbytes
from dlsys.experiments import train
from dlsys.train import Compression, TrainConfig, build_model, load_task
from dlsys.learn.task import gradient
from dlsys.viz.lessons import show
from dlsys.viz.style import log_axis
from dlsys.units import format_bytes, format_seconds

CONFIG = TrainConfig(epochs=3)
TASK = load_task()


def real_gradient(model, step, batch_size=128):
    """The gradient of one mini-batch of digits (all parameters, one flat array)."""
    rows = np.random.default_rng([CONFIG.seed, step]).choice(len(TASK.y_train), batch_size, replace=False)
    _, dlogits = nn.softmax_cross_entropy(model.forward(TASK.X_train[rows]), TASK.y_train[rows])
    model.backward(dlogits)
    return model.grads.copy()


model = build_model(CONFIG)
g = real_gradient(model, 0)
print(f"the digits MLP {[64, *CONFIG.hidden, 10]}: {g.size} parameters, a dense fp32 gradient of "
      f"{format_bytes(g.nbytes)}; |g| from {np.abs(g).min():.2g} to {np.abs(g).max():.2g}")

# %% [markdown]
# ## What travels: the encoded payload
#
# A compressor turns a gradient into a **payload**, the arrays that travel, and the
# receiver decodes it back into a dense gradient (GRACE's split, `dlsys/compress/`). The
# bytes on the wire are the payload's bytes, not the dense tensor's:
#
# | method | payload for n entries | bytes |
# | --- | --- | --- |
# | TernGrad (Wen 2017) | 2-bit codes of $s\,\mathrm{sign}(g_i)\,b_i$, and $s$ | $\lceil n/4\rceil + 4$ |
# | QSGD (Alistarh 2017) | b-bit levels per entry, one norm per bucket of d | $\lceil nb/8\rceil + 4\lceil n/d\rceil$ |
# | 1-bit SGD (Seide 2014) | one sign bit per entry, two means | $\lceil n/8\rceil + 8$ |
# | top-k, ratio r | the $k = \lceil rn\rceil$ largest $\lvert g_i\rvert$: int32 index + value | $k(4 + 4)$ |
# | random-k | k values at indices every rank draws from a shared seed | $4k$ |
# | Gradient Dropping | the entries above a threshold set to keep about k: int32 index + value | $\approx k(4 + 4)$ |
# | DGC (Lin 2018) | the k largest, indices as 16-bit gaps + value | $\approx k(2 + 4)$ |
#
# Index width matters: numpy's indices are int64 by default, which would make top-k's
# payload 12 bytes per kept entry instead of 8. Each method states its formula as
# `encoded_nbytes(n)`; below, each payload's real size is checked against it.

# %%
DENSE_NBYTES = g.nbytes
print(f"{'method':<9} {'payload':>10} {'formula':>10} {'ratio':>7} {'error of one draw':>18}   travels by")
for name in COMPRESSORS:
    c = make(name, seed=1)
    c.set_epoch(10)  # DGC at its final sparsity (after the warm-up)
    payload, ctx = c.compress(g, "g")
    decoded = c.decompress(payload, ctx)
    error = np.linalg.norm(decoded - g) / np.linalg.norm(g)
    formula = c.encoded_nbytes(g.size)  # threshold methods: exactly k here (n is small enough for an exact threshold)
    assert formula == payload_nbytes(payload)
    print(f"{name:<9} {format_bytes(payload_nbytes(payload)):>10} {format_bytes(formula):>10} "
          f"{DENSE_NBYTES / payload_nbytes(payload):>6.1f}x {error:>18.2f}   {c.communication}")

# %% [markdown]
# One draw of TernGrad is far from g (most entries become 0 or $\pm s$), top-k at 1% keeps
# only the largest entries, yet both train. Why is different for each.
#
# ## Unbiased or biased
#
# TernGrad keeps entry i as $s\,\mathrm{sign}(g_i)$ with probability $\lvert g_i\rvert/s$
# ($s = \max_i \lvert g_i\rvert$), else sends 0:
#
# $$\tilde g_i = s\,\mathrm{sign}(g_i)\,b_i,\quad b_i \sim \mathrm{Bernoulli}\!\left(\frac{\lvert g_i\rvert}{s}\right)
# \quad\Rightarrow\quad \mathbb{E}[\tilde g_i] = g_i,\qquad \mathrm{Var}[\tilde g_i] = \lvert g_i\rvert\,(s - \lvert g_i\rvert).$$
#
# So it is **unbiased**: averaged over draws (and SGD averages over steps and workers) it is
# the gradient; the price is variance. Rounding to the nearest level instead
# ($b_i = 1$ iff $\lvert g_i\rvert \ge s/2$) has no variance but is biased: small entries
# never get through. Top-k and 1-bit are biased too: an entry below the top-k threshold is
# sent as 0 every time. The error of the mean of T draws shows the difference: it falls as
# $1/\sqrt{T}$ for an unbiased method and stays put for a biased one.

# %%
DRAWS = (1, 4, 16, 64, 256)
curves = {}
for name in ("terngrad", "qsgd", "randomk", "onebit", "topk"):
    c = make(name, seed=2)
    total, errors = np.zeros_like(g, dtype=np.float64), []
    for t in range(1, DRAWS[-1] + 1):
        total += c.decompress(*c.compress(g, "g"))
        if t in DRAWS:
            errors.append(np.linalg.norm(total / t - g) / np.linalg.norm(g))
    curves[name] = errors
    print(f"{name:<9} error of the mean of " + ", ".join(f"{t}: {e:.3f}" for t, e in zip(DRAWS, errors)))
for name in ("terngrad", "qsgd", "randomk"):
    assert curves[name][-1] < curves[name][0] / 8, "unbiased: 256 draws cut the error about 16-fold"

fig = go.Figure([go.Scatter(x=DRAWS, y=errors, name=name, mode="lines+markers") for name, errors in curves.items()])
fig.update_layout(title="Relative error of the mean of T decompressions of one real gradient",
                  xaxis=log_axis(DRAWS, "count", title="draws T"),
                  yaxis=log_axis([e for errors in curves.values() for e in errors], title="||mean - g|| / ||g||"))
show(fig, "08_bias")

# %% [markdown]
# ## Error feedback: biased, but nothing lost
#
# Error feedback (Seide 2014; Karimireddy 2019) keeps what a step did not send and adds it
# to the next step's gradient:
#
# $$p_t = g_t + e_t,\qquad \text{send } C(p_t),\qquad e_{t+1} = p_t - D(C(p_t))
# \quad\Rightarrow\quad \sum_{t<T} D(C(p_t)) + e_T = \sum_{t<T} g_t.$$
#
# Every entry is sent eventually, once its accumulated residual is among the k largest;
# without the memory, top-k drops the small entries forever. Here 60 steps of real
# gradients (fresh mini-batches, fixed weights) go through top-k at 1%:

# %%
topk = make("topk", ratio=0.01)
memories = {"no memory": NoneMemory(), "error feedback": ResidualMemory()}
sent = {label: np.zeros_like(g, dtype=np.float64) for label in memories}
total = np.zeros_like(g, dtype=np.float64)
for step in range(60):
    g_t = real_gradient(model, step)
    total += g_t
    for label, memory in memories.items():
        p = memory.compensate(g_t, "g")
        payload, ctx = topk.compress(p, "g")
        memory.update(p, "g", topk, payload, ctx)
        sent[label] += topk.decompress(payload, ctx)
    if step + 1 in (1, 10, 60):
        print(f"after {step + 1:>2} steps, ||sum sent - sum g|| / ||sum g||: " + ", ".join(
            f"{label} {np.linalg.norm(sent[label] - total) / np.linalg.norm(total):.3f}" for label in memories))
residual = memories["error feedback"].residuals["g"]
print(f"error feedback: sum sent + residual = sum g within {np.abs(sent['error feedback'] + residual - total).max():.1g} "
      f"(float32 rounding); entries ever sent: {np.count_nonzero(sent['error feedback'])} of {g.size}, "
      f"without memory {np.count_nonzero(sent['no memory'])}")

# %% [markdown]
# ## Training with compression
#
# Four workers train the digits MLP with the ring all-reduce, each compressing every
# parameter tensor's gradient (`dlsys.experiments.train(..., compression=...)`). The
# record counts the bytes of every message in the trace, and charges compression and
# decompression as compute on the node model's roofline.

# %%
METHODS = {"none": Compression("none"), "terngrad": Compression("terngrad"), "qsgd": Compression("qsgd"),
           "topk 1%": Compression("topk", (("ratio", 0.01),)), "onebit": Compression("onebit")}
print(f"{'method':<9} {'accuracy':>8} {'bytes/step':>11} {'ratio':>7} {'compress':>10} {'decompress':>11} {'time':>10}")
runs = {}
for label, compression in METHODS.items():
    runs[label] = r = train("allreduce", CONFIG, workers=4, compression=compression, link="tcp-1gbe")
    print(f"{label:<9} {r['test_accuracy']:>8.3f} {format_bytes(r['bytes_per_step']):>11} {r['compression_ratio']:>6.1f}x "
          f"{format_seconds(r['compress_s']):>10} {format_seconds(r['decompress_s']):>11} "
          f"{format_seconds(r['virtual_time_s']):>10}")
dense = runs["none"]
print("bytes per step against dense: " + ", ".join(
    f"{label} {dense['bytes_per_step'] / r['bytes_per_step']:.1f}x" for label, r in runs.items() if label != "none"))
print("slower than dense all the same: " + (", ".join(
    label for label, r in runs.items() if r["virtual_time_s"] > dense["virtual_time_s"]) or "none"))

# %% [markdown]
# Every method learns; top-k and 1-bit with the error feedback their papers pair them with
# (`Compression`'s default memory). Compare the bytes per step with the payload ratios
# above: the all-gathered methods save less, because codes cannot be summed on the way,
# so every rank receives p - 1 payloads (an all-gather's traffic grows with p, a ring
# all-reduce's does not). And fewer bytes is not always a shorter step: each tensor's
# all-gather (and TernGrad's scaler all-reduce) adds latency terms that a small model's
# few KiB per tensor do not amortize.
#
# ## When compression makes training slower
#
# Compression spends compute to save communication. Whether that pays depends on the
# link: per step, compressed training wins only if
#
# $$t_\text{compress} + t_\text{decompress} + t_\text{comm}(\text{payload}) < t_\text{comm}(\text{dense}).$$
#
# On 1 Gb/s TCP a byte costs 8 ns, on 100 Gb/s InfiniBand (RDMA) 0.08 ns, while
# compressing costs the same on both. One training step of a wider MLP (hidden 512, 512)
# on four workers, split from rank 0's trace:

# %%
WIDE = TrainConfig(hidden=(512, 512))


def one_step(comm, compression):
    """Forward, backward, then every parameter tensor compressed, exchanged and decoded."""
    model = build_model(WIDE)
    rows = np.arange(comm.rank * WIDE.batch_size, (comm.rank + 1) * WIDE.batch_size)
    gradient(comm, model, TASK.X_train[rows], TASK.y_train[rows])
    compressor, memory = compression.build(WIDE.seed, comm.rank, comm.size)
    for s in model.param_slices():
        grad = model.grads[s.offset:s.offset + s.size]
        payload, ctx = encode(comm, grad, compressor, memory, s.name)
        exchange(comm, payload, ctx, compressor, grad, s.name)


print(f"{'link':<9} {'method':<9} {'compute':>9} {'compress':>9} {'comm':>9} {'step':>9}")
step_s = {}
for link in ("tcp-1gbe", "rdma-edr"):
    for label, compression in METHODS.items():
        run = dlsys.launch(one_step, 4, "threads", link=link, args=(compression,))
        spans = [s for s in run.trace.spans if s.rank == 0]
        compute = sum(s.end_s - s.start_s for s in spans if s.label == "forward+backward")
        coding = sum(s.end_s - s.start_s for s in spans if s.label.startswith(("compress ", "decompress ")))
        step_s[link, label] = run.clocks_s[0]
        print(f"{link:<9} {label:<9} {format_seconds(compute):>9} {format_seconds(coding):>9} "
              f"{format_seconds(run.clocks_s[0] - compute - coding):>9} {format_seconds(run.clocks_s[0]):>9}")
for link in ("tcp-1gbe", "rdma-edr"):
    faster = [label for label in METHODS if label != "none" and step_s[link, label] < step_s[link, "none"]]
    print(f"{link}: faster than dense: {', '.join(faster) or 'none of them'}")

# %% [markdown]
# On TCP the dense all-reduce dominates the step, and cutting its bytes pays for the
# compression compute many times over. On RDMA the dense all-reduce of the same gradient
# costs about as much as compressing and decompressing it, so compression has little
# communication left to save and adds its compute (and the latency of more, smaller
# messages) on top. This is what users of GRACE and BytePS report on fast networks. The break-even
# moves with the model (a larger n amortizes the latency), the number of workers (all-gather
# traffic grows with p) and the node (a GPU compresses faster than this laptop CPU model).
#
# ## Try it
#
# 1. Count by hand the payload of TernGrad and of top-k at 1% for a 25 M-parameter
#    gradient (ResNet-50); what ratio does each reach against dense fp32?
# 2. In the bias cell, add `int8`: is it biased? Why does its error stay small anyway?
# 3. Run the error-feedback cell with `ratio=0.1`. How many steps until every entry has
#    been sent at least once?
# 4. In the last cell, try `hidden=(64, 64)` and `link="tcp-10gbe"`: where is the break-even
#    for top-k? Which term of the inequality above moved?
#
# ## Exercises `terngrad_quantizer` (15), `topk_error_feedback` (15)
#
# After `dlsys exercises release hw/`: in `hw/compress/terngrad.py` write TernGrad's `compress`
# (Bernoulli codes, packed 2 bits per entry with `pack_bits`, s as one float32) and
# `decompress`; in `hw/compress/topk.py` top-k's `compress` (int32 indices, values in the
# gradient's dtype, `np.argpartition`) and in `hw/compress/compressor.py` `ResidualMemory.compensate` and
# `update`. Graded: TernGrad's mean and variance over many seeded draws, the exact top-k
# against a full sort, the identity sum(sent) + residual = sum(gradients), and the bytes
# against the formulas. Rounding to nearest, forgetting the residual, unpacked codes or
# int64 indices each lose points. `dlsys grade hw --exercise topk_error_feedback` grades one.
