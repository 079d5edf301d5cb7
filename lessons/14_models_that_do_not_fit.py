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
# # Lesson 14: Training a model that does not fit
#
# **Goal.** By the end you can (1) count the bytes a rank holds per parameter under mixed
# precision with Adam, and say which of them ZeRO's three stages shard; (2) run ZeRO-1, 2
# and 3 as rank programs and check that their weights are data parallelism's, their bytes
# the closed form's and their traffic two or three times the model; (3) say what FSDP's
# prefetch overlaps; (4) split an MLP by columns then rows as Megatron-LM does, name the
# $f$ and $g$ operators, and check the split model equals the unsplit one; (5) say what
# sequence parallelism saves; (6) place DP x TP groups on a GPU cluster so tensor
# parallelism stays inside a node's NVLink.
#
# Run this file as `python lessons/14_models_that_do_not_fit.py` (figures go to
# `out/lessons/`), or open it with `jupytext --to notebook lessons/14_models_that_do_not_fit.py`.
# The same models are the app's *Memory and sharding* page; docs/memory.md, docs/sharding.md
# and docs/parallelism.md hold the tables.

# %%
from dataclasses import replace

import numpy as np

from dlsys.comm import Grid
from dlsys.experiments import memory as ex
from dlsys.experiments.parallelism import max_differences
from dlsys.experiments.training import train
from dlsys.learn.task import build_model
from dlsys.learn.transformer import GELU
from dlsys.machine.memory import Layout, bytes_per_param
from dlsys.train import tensor_parallel as tpm
from dlsys.train import tensor_parallel_costs as tpc
from dlsys.viz import memory as viz
from dlsys.viz.lessons import show
from dlsys.units import format_bytes, format_seconds

RANKS = 4

# %% [markdown]
# ## Bytes per parameter
#
# Data parallelism (lessons 3 and 6) gives every rank the whole model. With mixed
# precision (Micikevicius et al. 2018) a rank keeps fp16 weights and fp16 gradients, and
# Adam keeps an fp32 master copy of the weights, the momentum and the variance: $K = 12$
# bytes of optimizer state per parameter (ZeRO, Rajbhandari et al. 2020, section 3.1).
# For $\Psi$ parameters one rank holds the model states
#
# $$M_{\text{DDP}} = (2 + 2 + K)\,\Psi,$$
#
# plus the activations kept for backward. ZeRO shards over the $N_d$ data-parallel ranks
# what DDP replicates: stage 1 the optimizer state, stage 2 the gradients too, stage 3 the
# parameters too:
#
# $$M_1 = 4\Psi + \frac{K\Psi}{N_d},\qquad M_2 = 2\Psi + \frac{(2+K)\Psi}{N_d},\qquad M_3 = \frac{(2+2+K)\Psi}{N_d}.$$
#
# `Layout(params, ranks, zero=...).bytes()` is that formula by kind; `zero_figure1`
# evaluates it for the paper's Figure 1 (7.5B parameters over 64 ranks).

# %%
print("bytes per parameter (weights, gradients, optimizer):", bytes_per_param("adam", "mixed"))
for row in ex.zero_figure1_rows():
    print(f"{row['stage']}: {row['model_bytes'] / 1e9:7.2f} GB per device (the paper's bar: {row['paper_GB']:g} GB)")
show(viz.zero_figure1(ex.zero_figure1_rows()), "14_zero_figure1")

# %% [markdown]
# Model states are not all: a transformer keeps activations for backward, per layer
# $s b h (34 + 5 a s / h)$ bytes (Korthikanti et al. 2022, Table 2) for a sequence of $s$
# tokens, $b$ sequences, hidden size $h$ and $a$ heads. ZeRO does not shard them: every
# rank still runs the whole model on its own batch. Here is a GPT-3-sized layer stack on
# 64 ranks against an 80 GiB device.

# %%
params, shape = ex.MODEL_PRESETS["GPT-3 6.7B"]
rows = ex.page_layouts(params, 64, shape, tp=8)
for row in rows:
    kinds = ", ".join(f"{k} {format_bytes(v)}" for k, v in row["bytes"].items() if v)
    print(f"{row['describe']:<40} {format_bytes(row['total_bytes']):>10}   ({kinds})")
print("fits 80 GiB:", ex.fitting(rows, 80 * 2**30), "  fits 40 GiB:", ex.fitting(rows, 40 * 2**30))
show(viz.memory_bars(rows, 40 * 2**30, "GPT-3 6.7B on 64 ranks: one rank's memory"), "14_memory_bars")

# %% [markdown]
# ## ZeRO as rank programs
#
# `dlsys/train/zero.py` runs the stages on real numpy arrays. A rank owns shard $r$ of
# every unit (a run of layers), padded to a multiple of $P$. Per step:
#
# - **stage 1**: backward as DDP, then **reduce-scatter** the whole gradient (each rank
#   gets the sum of its shard), update its own shard with its own optimizer state, and
#   **all-gather** the updated parameters;
# - **stage 2**: the same, but each layer's gradient is reduce-scattered as soon as its
#   backward is done, and only the shard is kept;
# - **stage 3**: the parameters outside the layer being computed are not kept at all
#   (NaN in our buffers, so a forgotten gather shows at once): **all-gather** a layer before
#   its forward, again before its backward, and drop it after.
#
# A ring all-reduce is a reduce-scatter then an all-gather, so stages 1 and 2 send what
# DDP sends, $2\frac{P-1}{P}\Psi$ per rank; stage 3's second gather makes it $3\frac{P-1}{P}\Psi$
# (ZeRO section 7.2). We train the digits MLP for one epoch under each, on 4 ranks, and
# compare the weights with DDP's, the ledger's bytes with the closed form and the bytes
# each rank sent in one step with the model's size.

# %%
ddp = train("allreduce", ex.ZERO_CONFIG, RANKS)
model_nbytes = build_model(ex.ZERO_CONFIG).params.nbytes
print(f"model: {model_nbytes:,} bytes of fp32 parameters; DDP sent {ex.step_bytes_sent(ddp):,} bytes per rank in a step "
      f"({ex.step_bytes_sent(ddp) / model_nbytes:.2f} Psi)")
for name in ("zero1", "zero2", "zero3"):
    record = train(name, ex.ZERO_CONFIG, RANKS)
    diff = np.abs(record["params"] - ddp["params"]).max()
    sent = ex.step_bytes_sent(record)
    print(f"{name}: weights vs DDP max |difference| {diff:.1e}; sent {sent:,} bytes ({sent / model_nbytes:.2f} Psi); "
          f"peak {', '.join(f'{k} {v:,}' for k, v in record['memory_peak_bytes'].items() if v)}")
measured = ex.zero_memory_rows(RANKS)
differ = [r for r in measured if r["measured_bytes"] != round(r["model_bytes"])]
print(f"kinds whose measured bytes equal the closed form: {len(measured) - len(differ)} of {len(measured)}")
for r in differ:
    print(f"  differs: {r['label']} {r['kind']}: measured {r['measured_bytes']:,}, model {r['model_bytes']:,.0f}")
show(viz.measured_vs_model(measured, "Rank 0's ledger against Layout(...).bytes(), 4 ranks"), "14_measured")

# %% [markdown]
# Stage 1 reduce-scatters the whole flat gradient in one piece, exactly the first half of
# DDP's ring all-reduce, so its weights are DDP's bit for bit. Stages 2 and 3 reduce a
# layer at a time: the same numbers added in another order, equal to the last few bits.
# The one kind below the model is FSDP-with-prefetch's buffers: the model counts two units
# of the largest size, and the unit after the largest here is the small last layer.
#
# ## FSDP and prefetch
#
# PyTorch's FSDP (Zhao et al. 2023) is stage 3 with a *unit* of several layers, one flat
# parameter each. Without prefetch a unit's all-gather waits until the unit before it has
# computed; with prefetch (`forward_prefetch`, `BackwardPrefetch.BACKWARD_PRE`) the next
# unit's gather leaves first, so it travels while this unit computes. The price is a second
# gathered unit in memory (the buffers). On a wider MLP, where the gathers take time:

# %%
wide = replace(ex.ZERO_CONFIG, hidden=(256, 256, 256))
for name in ("zero3", "fsdp", "fsdp-prefetch"):
    record = train(name, wide, RANKS)
    print(f"{name:<14} virtual time {format_seconds(record['virtual_time_s']):>10}   "
          f"buffers peak {record['memory_peak_bytes']['buffers']:,} bytes")

# %% [markdown]
# ## Tensor parallelism: Megatron's split MLP
#
# ZeRO shards what a rank *keeps*; every rank still computes every layer whole, with its
# whole activations. Megatron-LM (Shoeybi et al. 2019, section 3) splits the layer itself.
# An MLP $Z = \mathrm{GELU}(XA)\,B$: split $A$ by columns, $A = [A_1, \dots, A_t]$; rank
# $i$ computes $Y_i = \mathrm{GELU}(XA_i)$ with no communication, because GELU acts on each
# column alone. Then split $B$ by rows:
#
# $$Z = \sum_{i=1}^{t} Y_i B_i,$$
#
# one all-reduce. Two operators bracket the split: $f$ is the identity forward and an
# all-reduce of $\partial L/\partial X$ backward; $g$ is an all-reduce forward and the
# identity backward. Here is the algebra with plain numpy, $t = 4$:

# %%
rng = np.random.default_rng(0)
X, A, B, t = rng.normal(size=(8, 16)), rng.normal(size=(16, 64)), rng.normal(size=(64, 16)), 4
gelu = GELU().forward
Z = gelu(X @ A) @ B
parts = [gelu(X @ A_i) @ B_i for A_i, B_i in zip(np.split(A, t, axis=1), np.split(B, t, axis=0))]
print("max |sum of the ranks' parts - unsplit|:", np.abs(sum(parts) - Z).max())

# %% [markdown]
# Attention is split by heads the same way: rank $i$ holds the $Q, K, V$ columns of $a/t$
# heads and the output projection's rows that read them. A layer costs two all-reduces of
# the activations ($s b h$ elements) forward and two backward. `tensor_parallel.run` trains
# the small transformer split on real ranks; we compare with the unsplit model (float64):
# the first step's logits, its gradients and the weights after three steps.

# %%
for layout in (dict(tp=2), dict(tp=4), dict(dp=2, tp=2)):
    config = tpm.TPConfig(steps=3, **layout)
    logits, grads, weights = max_differences(config)
    print(f"dp {config.dp} x tp {config.tp}: max |difference| logits {logits:.0e}, gradients {grads:.0e}, "
          f"weights {weights:.0e}; collectives per step {tpc.collectives_per_step(config)}")

# %% [markdown]
# ## Sequence parallelism
#
# Outside the split region (layer norms, dropout, residuals) every tensor-parallel rank
# still keeps the whole activation: Korthikanti et al. 2022 count $s b h (10 + 24/t)$ of
# the $34\,sbh$ per layer left whole. **Sequence parallelism** keeps only $s/t$ tokens
# there: $f$ becomes an all-gather along the sequence (backward: reduce-scatter) and $g$ a
# reduce-scatter (backward: all-gather), the same bytes as the all-reduce they replace.
# Measured block activations of the small transformer against the formula (float32):

# %%
for layout in (dict(tp=1), dict(tp=2), dict(tp=2, sequence_parallel=True), dict(tp=4, sequence_parallel=True)):
    config = tpm.TPConfig(dtype="float32", **layout)
    value = tpm.run(config, "threads").values[0]
    print(f"tp {config.tp}{' + SP' if config.sequence_parallel else '     '}: block activations measured "
          f"{value['block_activation_nbytes']:>6,} B, formula {tpc.activation_model(config):>6,} B")

# %% [markdown]
# ## DP x TP on a GPU cluster
#
# Tensor parallelism sends activations in every layer, forward and backward; data
# parallelism sends gradients once per step. So TP goes where the links are fastest:
# inside a node's NVLink island. `Grid.of(world, tp)` numbers ranks with TP fastest-varying,
# so on `gpu-cluster` (nodes of GPUs on NVLink, nodes joined by InfiniBand) a TP group
# no larger than a node stays on NVLink, and the DP group's ring crosses the slower links.
# The closed form of a 4 MiB all-reduce on each group:

# %%
for tp in (1, 2, 4, 8, 16):
    costs = tpc.group_costs(Grid.of(16, tp), 4 * 2**20, "gpu-cluster")
    print(f"dp {16 // tp:>2} x tp {tp:>2}: TP ring on {costs['tp']['link']:<10} "
          f"{format_seconds(costs['tp']['allreduce_s']):>10};  DP ring on {costs['dp']['link']:<10} "
          f"{format_seconds(costs['dp']['allreduce_s']):>10}")
print("TP 8 x DP 8 for GPT-3 6.7B:", format_bytes(Layout(params, 64, tp=8, model=shape, sequence_parallel=True).total()),
      "per rank")

# %% [markdown]
# ## Try it
#
# 1. In the GPT-3 6.7B bars, which kind dominates under ZeRO-3? Turn on full recomputation
#    (`recompute="full"` in `page_layouts`). Which layouts fit 40 GiB now?
# 2. Run `zero2` with 3 ranks: are the weights still DDP's? What does the padding add to
#    the bytes sent?
# 3. Run `fsdp` and `fsdp-prefetch` on the wider MLP at 2 ranks and on the `tcp-1gbe`
#    link (`train(..., link="tcp-1gbe")`): when does the prefetch save nothing?
# 4. Split the numpy MLP above with $t = 3$: which dimension must $t$ divide?
# 5. On the app's *Memory and sharding* page, tab *Communication per step*, play one step
#    of ZeRO-3 and count its collectives.
#
# ## Exercises (graded): `zero2_step` (15 points) and `tensor_parallel_mlp` (15 points)
#
# `zero2_step`: write the ZeRO-2 step in `dlsys/train/zero.py`: `Sharded._reduce_scatter`
# (pad the flat gradient to a multiple of P, reduce-scatter it as a mean, keep your real
# elements), `Sharded._update` (your shard's optimizer step, then the all-gather of every
# unit) and `Sharded._allgather`. The graded tests hold each rank's gradient shard, its
# update, the gathered model and three steps against numpy data parallelism, and the bytes
# each rank sends against 2(P-1)/P of the padded model.
#
# `tensor_parallel_mlp`: write Megatron's $f$ and $g$ (`Region`'s `enter`, `enter_backward`,
# `leave` and `leave_backward`; `SequenceRegion` holds sequence parallelism's) and the forward
# and backward of `ColumnParallelLinear` and `RowParallelLinear` in
# `dlsys/train/tensor_parallel_layers.py`, each product through `matmul`, which charges its FLOPs. The tests hold each layer, and the whole MLP, to the
# unsplit MLP in numpy on 2 and 4 ranks, and count the all-reduces: one forward, one
# backward.
#
# Forgetting the all-gather before the next forward, dividing the gradient by P twice, a
# missing $g$ all-reduce or an all-reduce in $f$'s forward each cost only the tests they
# break. `dlsys exercises release hw`, then
# `dlsys grade hw --exercise zero2_step --exercise tensor_parallel_mlp`.
