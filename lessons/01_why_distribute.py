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
# # Lesson 01: Why distribute, and what to split
#
# **Goal.** By the end you can (1) say what data parallelism and model parallelism split,
# and show with real numbers that both compute the same thing as one worker; (2) write a
# rank program and run it with `dlsys.launch`; (3) explain, with a formula and a measured
# curve, why communication takes over as you add workers.
#
# Run this file as `python lessons/01_why_distribute.py` (figures go to `out/lessons/`),
# or open it as a notebook with `jupytext --to notebook lessons/01_why_distribute.py`.

# %%
import numpy as np

import dlsys
from dlsys import collectives
from dlsys.learn import nn
from dlsys.machine import profiles
from dlsys.learn.data import load_digits
from dlsys.experiments import collective_plan
from dlsys.machine.net import get_link, get_node
from dlsys.viz.lessons import show, strong_scaling
from dlsys.units import format_bytes

# %% [markdown]
# ## One program, many worlds
#
# A distributed algorithm in dlsys is a plain function `program(comm, ...)` that every
# rank runs, in the style of MPI: `comm.rank` says who I am, `comm.size` how many we are,
# `comm.send` / `comm.recv` move numpy arrays. `dlsys.launch` starts the ranks (threads
# here; real processes with `backend="processes"`) and returns what each rank returned.
#
# Time is *virtual*: each message advances the ranks' clocks by what it would cost on the
# chosen link (latency, bandwidth, CPU overhead), so the timings below do not depend on
# this machine.

# %%
def hello(comm):
    """Rank 0 sends a greeting to every other rank; each returns what it holds."""
    if comm.rank == 0:
        for dst in range(1, comm.size):
            comm.send(np.array([42.0, dst]), dst, label="hello")
        return np.array([42.0, 0])
    return comm.recv(source=0)


result = dlsys.launch(hello, 4, "threads", link="tcp-10gbe")
for rank, (value, clock_s) in enumerate(zip(result.values, result.clocks_s)):
    print(f"rank {rank} holds {value}, its clock reads {clock_s * 1e6:.1f} us")

# %% [markdown]
# ## Data parallelism: split the data, average the gradients
#
# Every worker holds the whole model and a shard of the batch. Each computes the
# gradient on its shard; an **all-reduce** averages the gradients; every worker applies
# the same update (synchronous SGD, Goyal et al. 2017):
#
# $$W_{t+1} = W_t - \eta \, \frac{1}{p} \sum_{k=1}^{p} \nabla L_k(W_t)$$
#
# With equal shards, the mean of the shard gradients *is* the gradient of the whole
# batch: p workers compute exactly what one worker would on a p times larger batch.
# Below, 4 ranks each take 64 digits of a batch of 256, and the averaged gradient is
# compared with the one-worker gradient.

# %%
X, y = load_digits()
batch_X, batch_y = X[:256], y[:256]


def gradient(model, X, y):
    """The mean cross-entropy gradient of ``model`` on (X, y), as one flat array."""
    _, dlogits = nn.softmax_cross_entropy(model.forward(X), y)
    model.backward(dlogits)
    return model.grads.copy()


def data_parallel_gradient(comm):
    model = nn.mlp([64, 32, 10], seed=0)                 # every rank builds the same model
    shard = np.array_split(np.arange(256), comm.size)[comm.rank]
    local = gradient(model, batch_X[shard], batch_y[shard])
    return collectives.allreduce(comm, local, op="mean")


averaged = dlsys.launch(data_parallel_gradient, 4, "threads").values[0]
one_worker = gradient(nn.mlp([64, 32, 10], seed=0), batch_X, batch_y)
print(f"{averaged.size} gradient entries; largest difference from one worker: "
      f"{np.abs(averaged - one_worker).max():.2e} (float32 rounding)")

# %% [markdown]
# ## Model parallelism: split the model, exchange activations
#
# When the model does not fit on one worker, split it. Here a linear layer $y = xW$ is
# cut by output columns, $W = [W_0 \mid W_1 \mid \dots]$: rank k holds only $W_k$,
# computes $x W_k$, and an **all-gather** assembles $y$. What travels is activations
# (batch x outputs), not gradients of the whole model. Hybrids combine both splits.

# %%
rng = np.random.default_rng(1)
x_batch, W = rng.standard_normal((8, 64)), rng.standard_normal((64, 40))


def model_parallel_layer(comm):
    W_mine = np.array_split(W, comm.size, axis=1)[comm.rank]  # this rank's columns only
    slices = collectives.allgather(comm, x_batch @ W_mine)     # (p, batch, outputs / p)
    return np.concatenate(list(slices), axis=1)


y_parallel = dlsys.launch(model_parallel_layer, 4, "threads").values[0]
print(f"y is {y_parallel.shape}; largest difference from x @ W: {np.abs(y_parallel - x_batch @ W).max():.2e}")

# %% [markdown]
# ## Why communication dominates as you scale
#
# Split a fixed global batch B over p workers (strong scaling). One iteration costs the
# compute of B/p samples plus one all-reduce of the n gradient bytes. Forward and backward
# together take about 3 times the forward FLOPs F per sample (backward computes gradients
# for inputs and weights); with a ring all-reduce (lesson 03; Thakur, Rabenseifner &
# Gropp 2005):
#
# $$t(p) = \frac{3 F B}{p \cdot \mathrm{FLOP/s}} + 2(p-1)\left(\alpha + \frac{n}{p}\beta\right),
# \qquad \text{speedup } S(p) = \frac{t(1)}{t(p)}, \qquad \text{efficiency } E = \frac{S}{p}$$
#
# The compute term shrinks like 1/p; the communication term does not shrink at all (it
# tends to $2n\beta$). So past some p, adding workers buys nothing, and a faster network
# (smaller alpha and beta) or faster compute moves that point: with faster GPUs the
# communication *share* grows. Below, ResNet-50 (its parameters and forward FLOPs per
# sample from `dlsys.machine.profiles`, printed) with B = 256 on V100-class nodes, emulated:
# every rank computes its share and then really runs the ring all-reduce (on small real
# buffers charged as the full gradient: `collective_plan` picks real buffers within a memory
# budget, each real element standing for many, and every message is charged at its
# logical size).

# %%
params, fwd_flops = profiles.totals("resnet50")
GLOBAL_BATCH, NODE = 256, "v100"
grad_nbytes = 4 * params
print(f"resnet50: {params / 1e6:.1f} M parameters ({format_bytes(grad_nbytes)} of float32 gradient), "
      f"{fwd_flops / 2e9:.1f} GMACs forward per sample")


MAX_MEMORY_BYTES = 64 * 2**20  # real buffers of all ranks together


def iteration(comm, flops_per_rank, plan):
    """One synchronous data-parallel step: compute, then all-reduce the gradients."""
    comm.compute(flops=flops_per_rank, label="forward + backward")
    collectives.allreduce(comm, plan.full(1.0), op="mean")


rows = []
for link in ("tcp-10gbe", "rdma-edr"):
    for p in (1, 2, 4, 8, 16, 32, 64):
        flops_per_rank = 3 * fwd_flops * GLOBAL_BATCH / p
        plan = collective_plan("allreduce", "ring", p, params, max_memory_bytes=MAX_MEMORY_BYTES)
        run = dlsys.launch(iteration, p, "threads", link=link, node=NODE, args=(flops_per_rank, plan))
        compute_s = get_node(NODE).compute_s(flops_per_rank)
        rows.append({"link": link, "ranks": p, "compute_s": compute_s,
                     "communication_s": run.virtual_time_s - compute_s, "time_s": run.virtual_time_s})
for r in rows:
    t1 = next(q["time_s"] for q in rows if q["link"] == r["link"] and q["ranks"] == 1)
    r["speedup"] = t1 / r["time_s"]

print(f"ResNet-50, batch {GLOBAL_BATCH}, {NODE}, gradients {grad_nbytes / 1e6:.0f} MB")
print(f"{'link':<10} {'p':>3} {'compute (ms)':>13} {'comm (ms)':>10} {'speedup':>8} {'efficiency':>10}")
for r in rows:
    print(f"{r['link']:<10} {r['ranks']:>3} {r['compute_s'] * 1e3:>13.1f} {r['communication_s'] * 1e3:>10.1f} "
          f"{r['speedup']:>8.2f} {r['speedup'] / r['ranks']:>10.0%}")
show(strong_scaling(rows, f"ResNet-50, global batch {GLOBAL_BATCH}, {NODE}: compute shrinks, communication stays"),
     "01_strong_scaling")

# %% [markdown]
# Check the emulation against the formula at one point: on 64 ranks over 10 GbE TCP,
# the ring's bandwidth term alone is $2 \cdot \frac{63}{64} \cdot n\beta$.

# %%
tcp = get_link("tcp-10gbe")
formula_s = 2 * 63 * (tcp.alpha_s + grad_nbytes / 64 * tcp.beta_s_per_byte)
emulated_s = next(r["communication_s"] for r in rows if r["link"] == "tcp-10gbe" and r["ranks"] == 64)
print(f"communication on 64 ranks: emulated {emulated_s * 1e3:.2f} ms, formula {formula_s * 1e3:.2f} ms")

# %% [markdown]
# ## Try it
#
# 1. Change `NODE` to `"k40m"` (a 2013 GPU, 4x slower). Does the speedup on TCP get
#    better or worse? Why does *faster* compute make scaling *harder*?
# 2. At what p does TCP's communication exceed compute? Predict it from the formula
#    ($3FB/p = 2n\beta$, ignoring alpha) before reading the table.
# 3. Replace `"resnet50"` by `"vgg19"` (the cell prints its size). Which model scales
#    better, and which ratio decides it?
# 4. In `data_parallel_gradient`, give rank 0 65 samples and rank 3 63 (uneven shards).
#    Is the averaged gradient still the one-worker gradient? What would fix it?
#
# ## Exercise `token_ring` (10 points)
#
# Your first rank program: pass a token once around a ring with `send` and `recv` only.
# Get the student files with `dlsys exercises release hw/`, fill in `hw/exercises/token_ring.py`
# (the docstring says exactly what each rank returns), and check it with
# `dlsys grade hw --exercise token_ring`. The graded tests also check the trace: the token
# must travel 0 -> 1 -> ... -> p-1 -> 0, and one lap must cost p (alpha + n beta).
