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
# # Lesson 05: The parameter server, and BSP, SSP and ASP
#
# **Goal.** By the end you can (1) explain ps-lite's push/pull model and how a server
# group splits the keys; (2) state the three consistency models as rules on worker clocks
# and show, on a real training run, what each one costs and what it buys; (3) explain why a
# failed worker stops a synchronous run and not an asynchronous one.
#
# Run this file as `python lessons/05_parameter_server.py` (figures go to `out/lessons/`),
# or open it as a notebook with `jupytext --to notebook lessons/05_parameter_server.py`.

# %%
import numpy as np

import dlsys
from dlsys.ps import KeyLayout
from dlsys.experiments import train
from dlsys.train import TrainConfig, build_model
from dlsys.viz.lessons import show
from dlsys.viz.training import loss_curves, staleness_histogram, worker_progress

# %% [markdown]
# ## Push, pull, and a group of servers
#
# A parameter server (Li et al., OSDI 2014) keeps the model; workers never talk to each
# other. A worker **pulls** the weights, computes a gradient on its minibatch and
# **pushes** it; the servers aggregate and update. In ps-lite both calls are non-blocking
# and return a timestamp, `wait(ts)` completes one, and every message carries a list of
# keys and a list of values.
#
# Here the keys are the model's parameter tensors. Their values live in one flat key
# space, cut into one contiguous range per server, so a large tensor is *sliced* across
# servers and every server's link carries only its share of each push and pull:

# %%
model = build_model(TrainConfig())
layout = KeyLayout([p.size for p in model.param_slices()], servers=3)
print(f"{model.params.size} parameters, server ranges {layout.bounds}")
for key, p in enumerate(model.param_slices()):
    shares = [positions.size for positions, _ in layout.parts((key,))]
    print(f"key {key} = {p.name:<10} {p.size:>5} values, per server {shares}")

# %% [markdown]
# ## BSP is synchronous SGD
#
# Bulk synchronous parallel: in round t every worker k pushes its gradient $g_k(t)$, the
# server waits for all W of them, then applies one update
#
# $$W(t+1) = W(t) - \eta\,\frac{1}{W}\sum_{k=1}^{W} g_k(t),$$
#
# exactly what all-reduce data parallelism computes, only averaged at a server instead of
# among peers. Same data, same seed: the same weights.

# %%
config = TrainConfig(epochs=3, dtype="float64")
bsp = train("ps-bsp", config, 4)
ring = train("allreduce", config, 4)
print(f"largest weight difference PS-BSP vs ring all-reduce: {np.max(np.abs(bsp['params'] - ring['params'])):.1e}")
for name, r in (("ps-bsp", bsp), ("allreduce", ring)):
    print(f"{name:>9}: test accuracy {r['test_accuracy']:.2%}, virtual time {r['virtual_time_s'] * 1e3:.2f} ms, "
          f"{r['bytes_moved'] / 1e6:.2f} MB moved")

# %% [markdown]
# ## Clocks, stragglers and the three consistency models
#
# Give worker k a clock $c_k$: the number of gradients it has pushed. When worker k asks
# for the weights at clock $c_k$, the server answers
#
# $$\text{BSP: once } c_k - \min_j c_j \le 0, \qquad \text{SSP}(s)\text{: once } c_k - \min_j c_j \le s, \qquad \text{ASP: at once.}$$
#
# SSP (Ho et al., NIPS 2013) bounds how stale a read can be: a worker never misses more
# than s clocks of anybody's updates. s = 0 is BSP's gate, s = infinity is ASP. Under SSP
# and ASP the server applies each gradient as it arrives (scaled by 1/W), and training ends
# after the same budget of gradients as the BSP run, so fast workers may do more of them.
#
# Now make worker 3 four times slower (rank 4: the server is rank 0, worker w is rank w + 1).
# On RDMA the compute matters, so the straggler shows:

# %%
slow = dict(straggler=(3, 4.0), link="rdma-edr")
config = TrainConfig(epochs=5)
runs = {"BSP": train("ps-bsp", config, 4, **slow),
        "SSP s=3": train("ps-ssp", config, 4, staleness=3, **slow),
        "ASP": train("ps-asp", config, 4, **slow)}
for name, r in runs.items():
    steps = [sum(1 for row in r["losses"] if row["rank"] == rank) for rank in range(1, 5)]
    print(f"{name:>8}: {r['virtual_time_s'] * 1e3:6.2f} ms, test accuracy {r['test_accuracy']:.2%}, "
          f"max staleness {r['max_staleness']:>3} clocks, gradients per worker {steps}")
show(worker_progress(runs, "Who waits: gradients per worker, worker 3 (rank 4) is 4x slower"), "05_worker_progress")
show(staleness_histogram(runs), "05_staleness")
show(loss_curves(runs), "05_loss")

# %% [markdown]
# Under BSP the four staircases climb together at the straggler's pace. Under SSP the fast
# workers run ahead until they are s clocks ahead, then wait: a persistent straggler still
# sets the pace (SSP absorbs *transient* delays). Under ASP nobody waits; the straggler
# simply contributes fewer gradients, and reads get very stale, yet on this easy problem
# the model still learns.

# %% [markdown]
# ## When a worker dies
#
# ps-lite's scheduler notices a dead node by its missing heartbeats; here the crashing
# worker sends a LEAVE message. Under ASP the servers drop it and the others finish the
# budget; under BSP no round can ever complete, so the run fails and names the worker.

# %%
survivor = train("ps-asp", TrainConfig(epochs=5), 4, fail=(1, 5))
print(f"ASP with worker 1 (rank 2) dead after 5 steps: {survivor['failed']}, test accuracy {survivor['test_accuracy']:.2%}")
try:
    train("ps-bsp", TrainConfig(epochs=5), 4, fail=(1, 5))
except dlsys.RankFailed as exc:
    print(f"BSP: {exc.summary}")

# %% [markdown]
# ## Try it
#
# 1. Sweep the SSP bound s = 0, 1, 2, 4, 8, 16 with the 4x straggler. Plot the virtual time
#    against s. Why does it level off at BSP's time for small s and only drop when s is
#    large compared with the run?
# 2. Make the straggler only 1.5x slower. Which s makes SSP as fast as ASP?
# 3. On `tcp-10gbe` (the default link) rerun the straggler experiment. Why does the
#    straggler matter much less there? (Compare compute per step with the server's incast
#    $W n / B$.)
# 4. Use `servers=2`. What happens to the virtual time and to the bytes through each
#    server's link? Why does ASP need "request order" messages between the servers?
#
# ## Exercises `ps_aggregation` (15) and `ssp_gate` (10)
#
# In `hw/ps/server.py` (after `dlsys exercises release hw/`): write `KVServer.aggregate`, which
# adds one worker's gradient into the server's update and says when to apply it (BSP: the
# mean of a full round; SSP/ASP: every gradient alone, scaled by 1/W), and the SSP gate,
# `KVServer.slowest` and `KVServer.may_read`. Graded by
# `dlsys grade hw --exercise ps_aggregation` and `--exercise ssp_gate`.
