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
# # Lesson 06: Data vs model parallelism, and communicating less often
#
# **Goal.** By the end you can (1) turn single-process training code into data-parallel
# code the way Horovod does, and show that it computes the same weights as one process
# with a P times larger batch; (2) split a model into pipeline stages and measure the
# pipeline bubble; (3) cut communication with local SGD and larger batches, and say what
# it costs in accuracy.
#
# Run this file as `python lessons/06_data_vs_model_parallel.py` (figures go to
# `out/lessons/`), or open it with `jupytext --to notebook lessons/06_data_vs_model_parallel.py`.

# %%
from dataclasses import replace

import numpy as np

import dlsys
from dlsys.learn import optim
from dlsys.experiments import train
from dlsys.train import (DistributedOptimizer, TrainConfig, batch_indices, broadcast_parameters, build_model,
                         load_task, split_stages)
from dlsys.learn.task import gradient
from dlsys.viz.comm import timeline
from dlsys.viz.lessons import lines, show
from dlsys.viz.training import cost_bars, first_seconds

# %% [markdown]
# ## Data parallelism, Horovod style
#
# Write the single-process loop, then add three things (Sergeev & Del Balso 2018):
# broadcast rank 0's initial weights, wrap the optimizer so that `step()` first averages
# the gradients of all P ranks with one ring all-reduce,
#
# $$g \leftarrow \frac{1}{P}\sum_{r=0}^{P-1} g_r, \qquad W \leftarrow W - \eta\, g,$$
#
# and give each rank its own part of every global batch. Because `model.grads` is one
# contiguous buffer, one all-reduce syncs every layer with no packing copy.

# %%
config = TrainConfig(epochs=2, batch_size=8, dtype="float64")


def horovod_program(comm, config):
    task, model = load_task(), build_model(config)
    broadcast_parameters(comm, model.params)                                  # 1. same start
    opt = DistributedOptimizer(optim.SGD(model.params, model.grads, config.lr, config.momentum), comm)  # 2.
    n = len(task.y_train)
    for step in range(config.epochs * (n // (comm.size * config.batch_size))):
        idx = batch_indices(n, step, comm.rank, comm.size, config.batch_size, config.seed)  # 3. my part
        gradient(comm, model, task.X_train[idx], task.y_train[idx])
        opt.step()
    return model.params


run = dlsys.launch(horovod_program, 4, "threads", args=(config,))
one = train("allreduce", replace(config, batch_size=32), 1)
print(f"every rank holds the same weights: {all(np.array_equal(v, run.values[0]) for v in run.values)}")
print(f"4 workers x batch 8 vs 1 process x batch 32: largest difference {np.max(np.abs(run.values[0] - one['params'])):.1e}")
print(f"virtual time {run.virtual_time_s * 1e3:.2f} ms, bytes sent per rank {run.trace.bytes_sent_per_rank()}")
print(f"n = {run.values[0].size:,} float32 parameters (and gradients)")

# %% [markdown]
# ## Model parallelism: a pipeline of layer stages
#
# When the model does not fit one worker, split its *layers*. Stage s holds layers
# [start, stop) and passes activations forward and their gradients backward. Run naively,
# only one stage works at a time. GPipe (Huang et al. 2019) cuts each batch into M
# micro-batches so the stages overlap; what remains idle is the bubble
#
# $$\text{bubble} = \frac{S-1}{M+S-1}$$
#
# of each step, for S stages. Same data, same seed: the same weights as data parallelism.

# %%
model = build_model(TrainConfig())
print("stages (layers [start, stop)):", split_stages(model, 4), "of", [type(l).__name__ for l in model.layers])
rows = []
for m in (1, 2, 4, 8, 16, 32):
    r = train("model-parallel", TrainConfig(epochs=2), 4, micro_batches=m, link="rdma-edr")
    rows.append({"micro_batches": m, "time_ms": r["virtual_time_s"] * 1e3, "bubble": r["bubble_fraction"],
                 "run": "model parallel, 4 stages"})
    print(f"M = {m:>2}: {r['virtual_time_s'] * 1e3:6.2f} ms, bubble {r['bubble_fraction']:.0%}, "
          f"{r['bytes_moved'] / 1e6:.2f} MB of activations, test accuracy {r['test_accuracy']:.2%}")
show(lines(rows, "micro_batches", "time_ms", "run", "GPipe: more micro-batches, a smaller bubble",
           "micro-batches M", "virtual time (ms)", log_x=True, x_unit="count"), "06_pipeline_microbatches")
for m in (1, 4):
    r = train("model-parallel", TrainConfig(epochs=1), 4, micro_batches=m, link="rdma-edr")
    trace = r["result"].trace
    show(timeline(first_seconds(trace, trace.makespan_s / 10), f"Pipeline with M = {m}: the first steps"),
         f"06_pipeline_timeline_M{m}")

# %% [markdown]
# With M = 1 the timeline is a staircase: each stage waits for the one before (forward)
# and after (backward). With M = 4 the micro-batches overlap. More micro-batches shrink the
# bubble but send more, smaller messages: past some M the per-message latency wins.

# %% [markdown]
# ## Communicate less often
#
# Two ways to all-reduce fewer times per epoch: **local SGD** takes K local steps, then
# averages the weights, $W \leftarrow \frac{1}{P}\sum_r W_r$ (K = 1 is synchronous SGD);
# a **larger batch** takes fewer, bigger steps, with the learning rate scaled linearly
# (Goyal et al. 2017: k times the batch, k times the rate).

# %%
base = TrainConfig(epochs=5)
runs = {"all-reduce, batch 32": train("allreduce", base, 4)}
for k in (2, 4, 16):
    runs[f"local SGD, K={k}"] = train("local-sgd", base, 4, period=k)
for batch in (64, 128):
    lr = optim.scale_lr(base.lr, batch, base.batch_size)
    runs[f"all-reduce, batch {batch}, lr {lr:g}"] = train("allreduce", replace(base, batch_size=batch, lr=lr), 4)
for name, r in runs.items():
    print(f"{name:<30} {r['virtual_time_s'] * 1e3:6.2f} ms  {r['bytes_moved'] / 1e6:6.2f} MB  "
          f"test accuracy {r['test_accuracy']:.2%}")
show(cost_bars(runs, "Communicating less often: 5 epochs on 4 workers, tcp-10gbe"), "06_communicate_less")

# %% [markdown]
# ## Try it
#
# 1. Count the bytes one all-reduce of the n float32 gradients (printed above) sends per rank
#    ($2\frac{P-1}{P}n$) and check it against `run.trace.bytes_sent_per_rank()` divided by
#    the number of steps.
# 2. Give the pipeline 2 stages instead of 4 (`workers=2`). Which M gives a bubble under
#    10%? Does the measured time agree with the formula? Why not exactly?
# 3. Local SGD with K = 16 on non-iid shards: would the average of 4 models that each saw
#    only 2 or 3 digit classes still be good? (See `dlsys.learn.data.shard_noniid`.)
# 4. With a batch of 256 per worker, does the linear scaling rule still work? Try a
#    warm-up (`dlsys.learn.optim.goyal_schedule`).
#
# ## Exercise (not graded): a 1F1B pipeline
#
# GPipe keeps the activations of all M micro-batches until the backward passes start.
# PipeDream's 1F1B schedule starts micro-batch m's backward as soon as the last stage has
# it, so each stage holds at most S in-flight micro-batches. Copy `pipeline_program` from
# `dlsys/train/model_parallel.py` and change the schedule to 1F1B; check that the weights
# stay identical to the GPipe run's, and compare the timelines.
