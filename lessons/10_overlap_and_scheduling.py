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
# # Lesson 10: Overlap and scheduling
#
# **Goal.** By the end you can (1) say why sending gradients in the order backprop makes
# them wastes the network, and how much of an iteration that costs; (2) write the
# iteration time of wait-free backpropagation (WFBP) as a recurrence over the layers;
# (3) explain how P3's priorities and slices let the next forward start early, and what
# ByteScheduler's credit and DDP's buckets trade; (4) find where scheduling pays, against
# bandwidth, and where it cannot.
#
# Run this file as `python lessons/10_overlap_and_scheduling.py` (figures go to
# `out/lessons/`), or open it with `jupytext --to notebook lessons/10_overlap_and_scheduling.py`.

# %%
from dlsys.experiments import schedule as ex
from dlsys.machine.net import LinkModel, get_node
from dlsys.viz import schedule as sviz
from dlsys.viz.lessons import show

MODEL, WORKERS, LINK = "resnet50", 2, "10Gbps"

# %% [markdown]
# ## Backprop makes gradients in the wrong order
#
# A worker's iteration is a forward pass through layers $0, \dots, L-1$ (input first),
# then a backward pass from $L-1$ down to 0; layer $l$'s gradient is ready when its
# backward ends. With data parallelism every gradient must be pushed to the parameter
# server and the new weights pulled back before the next forward can use them. The
# simplest schedule, **FIFO**, pushes everything after backward and waits for every
# layer: compute and communication never overlap,
#
# $$T_{\text{FIFO}} = \sum_l (f_l + b_l) + T_{\text{comm}}, \qquad b_l \approx 2 f_l .$$
#
# **Wait-free backpropagation** (WFBP, Zhang et al. 2017, Poseidon) pushes each layer
# the moment its backward ends, so the pushes of the top layers travel while the lower
# layers still compute. With $r_l$ the ready time of layer $l$, $w_l = n_l / B$ its time on
# the wire and $d_l$ its departure, pushes leave in backprop order, each when it is ready
# and the link is free:
#
# $$d_{L-1} = r_{L-1}, \qquad d_l = \max\left(r_l,\; d_{l+1} + w_{l+1}\right),$$
#
# the server updates each as it arrives and replies, and the next forward waits for the
# last reply. But the next forward needs layer 0 *first*, and layer 0's gradient is the
# *last* one made and the last one sent: WFBP overlaps the push of the top layers with
# backward, and then still waits for everything.
#
# The emulator runs each worker's compute thread, sender and receiver as ranks of one
# node; compute follows each layer's FLOPs on a V100; one parameter-server shard per worker.

# %%
policies = ["fifo", "wfbp", "p3", "bytescheduler", "fusion"]
records = ex.compare_policies(policies, MODEL, WORKERS, LINK)
# the figure shows the two ends, FIFO and P3 (all five are on the app's Overlap page; the
# notebook stays small); the table below has every policy
show(sviz.gantt([r for r in records if r["policy"] in ("fifo", "p3")],
                f"{MODEL}, {WORKERS} workers at {LINK}: worker 0 under FIFO and P3"), "10_gantt")
first = records[0]["layers"][0]
for r in records:
    forward_starts = [b["start_s"] for b in r["lanes"] if b["label"] == f"forward {first}"]
    backward_ends = [b["end_s"] for b in r["lanes"] if b["label"] == f"backward {first}"]
    next_forward, backward_end = forward_starts[1], backward_ends[0]  # the second iteration's start
    print(f"{r['describe']:<52} iteration {r['iteration_s'] * 1e3:6.1f} ms (compute {r['compute_s'] * 1e3:.1f} ms), "
          f"{r['overlap']:4.0%} of the pushes hidden, next forward {(next_forward - backward_end) * 1e3:5.1f} ms "
          f"after backward, {r['items']:,} items")

# %% [markdown]
# FIFO hides none of its pushes. WFBP hides most of them behind backward, yet the next
# forward starts only when the last layer's reply is back. Drag the time slider in the
# Gantt: on P3's link the dark (input-layer) slices leave between the yellow (output-layer)
# ones as soon as they are ready.
#
# ## Priorities and slices: P3 and ByteScheduler
#
# **P3** (Jayarajan et al. 2019) fixes the order: it cuts every layer into slices of
# $s$ parameters (40,000 in the paper), gives a slice of layer $l$ priority $l$ (input
# first), keeps the slices in a priority queue and posts one onto its server's connection
# only while that connection holds at most one slice besides the one on its wire (ZMQ's
# high-water mark of 1 in P3's code), so a newly ready high-priority slice overtakes the
# rest within a slice or two, and starts forward $l$ as soon as layer $l$'s weights are
# back. The next forward overlaps the remaining communication, too.
# A slice waits behind at most what its worker already has in its sockets, two slices
# per server: $8Ss/B$ with $S$ servers on one egress; each slice pays
# the per-message cost $\alpha$, so a model of $P$ parameters pays about $(P/s)\,\alpha$ per
# iteration in latency:
#
# $$\text{preemption delay} \le \frac{8Ss}{B}, \qquad \text{latency paid} \approx \frac{P}{s}\,\alpha .$$
#
# **ByteScheduler** (Peng et al. 2019) uses larger partitions and a **credit**: it keeps
# posting the highest-priority partition while the bytes in flight fit the credit, so the
# link never idles between posts, at the price of preempting later. Small slices and
# small credits overlap more and pay more latency; the trade-off below sweeps P3's slice size.

# %%
rows = ex.option_sweep("slice_params", (20_000, 40_000, 250_000, 1_000_000, 25_000_000), MODEL, WORKERS, LINK)
show(sviz.option_tradeoff(rows, 40_000), "10_slice_size")
for r in rows:
    print(f"slices of {r['value']:>10,}: {r['items']:>5,} items, iteration {r['iteration_s'] * 1e3:6.1f} ms, "
          f"{r['overlap']:.0%} hidden")

# %% [markdown]
# ## Fewer, larger messages: tensor fusion
#
# PyTorch DDP (Li et al. 2020) goes the other way: it packs layers, in reverse order, into
# **buckets** of at most `bucket_cap_mb` = 25 MiB (PyTorch's name says MB; its code multiplies by 1024 * 1024) and all-reduces (here: pushes) a bucket
# once all its layers are ready. A model of $P$ float32 parameters needs about
# $\lceil 4P / \text{cap} \rceil$ messages instead of one per layer, so it pays $\alpha$
# less often, but the first bucket waits for all its layers' backward before it can go.
# On a parameter server each message goes to one shard, so a few huge buckets also load
# one server's link with most of the model while the others idle. Horovod's fusion buffer
# does the same with a threshold and a cycle time.

# %%
rows = ex.option_sweep("bucket_mb", (1.0, 5.0, 25.0, 100.0, 500.0), MODEL, WORKERS, LINK)
show(sviz.option_tradeoff(rows, 25.0), "10_bucket_size")
for r in rows:
    print(f"buckets of {r['value']:>5g} MiB: {r['items']:>3} buckets, iteration {r['iteration_s'] * 1e3:6.1f} ms, "
          f"{r['overlap']:.0%} hidden")

# %% [markdown]
# ## Where scheduling pays
#
# Overlap can hide at most the compute that runs while the network works. On a slow link
# the iteration is communication-bound whatever the order; on a very fast one there is
# little left to hide. Between the two, the order decides.

# %%
sweep = ex.bandwidth_sweep(MODEL, ["1Gbps", "10Gbps", "100Gbps"], policies, WORKERS)
show(sviz.iteration_vs_bandwidth(sweep, f"{MODEL}, {WORKERS} workers: iteration time against bandwidth"),
     "10_bandwidth")
gap = ex.widest_gap(sweep)
print(f"compute alone: {sweep[0]['compute_s'] * 1e3:.1f} ms")
for r in sweep:
    print(f"{r['bandwidth_Bps'] * 8e-9:>5g} Gbit/s {r['policy']:<14} {r['iteration_s'] * 1e3:8.1f} ms")
print(f"the policies differ most at {gap['bandwidth_Bps'] * 8e-9:g} Gbit/s: {gap['fastest']['policy']} "
      f"{gap['fastest']['iteration_s'] * 1e3:.1f} ms, {gap['slowest']['policy']} {gap['slowest']['iteration_s'] * 1e3:.1f} ms")

# %% [markdown]
# ## WFBP's recurrence, checked against the emulator
#
# With one worker, one server and a link without CPU overheads, the emulator obeys the
# recurrence above exactly; the exercise asks you to write it. Here the emulator's
# iteration time against the two bounds every schedule lies between: compute alone, and
# compute plus every push and pull one after the other.

# %%
node, link = get_node("v100"), LinkModel("10 Gbit/s, no overheads", 25e-6, 1.25e9)
layers = ex.layers(MODEL, 32)
wfbp = ex.simulate_schedule("wfbp", MODEL, 1, link, "v100", servers=1)
serial_s = sum(2 * (link.latency_s + link.wire_s(4 * (l.params + 1))) + node.compute_s(4 * l.params)
               for l in layers if l.params)
print(f"compute {wfbp['compute_s'] * 1e3:.2f} ms <= WFBP {wfbp['iteration_s'] * 1e3:.2f} ms <= "
      f"compute + serial communication {(wfbp['compute_s'] + serial_s) * 1e3:.2f} ms")

# %% [markdown]
# ## Try it
#
# 1. In the Gantt, at what virtual time does P3 send the first slice of the input layer,
#    and what is WFBP's link sending at that moment?
# 2. Raise the bandwidth to 100 Gbit/s (`LINK = "100Gbps"`) and rerun the first cell. Which
#    policy's advantage vanishes first, and why?
# 3. With the formula for the latency paid, estimate the slice size at which P3's
#    per-message cost equals one backward pass of ResNet-50 on this link; compare with the sweep.
# 4. OD-SGD (`"odsgd"`) computes on locally updated weights while the global update
#    travels. Add it to `policies`: how close does it come to compute alone, and what does
#    it give up?
#
# ## Exercise (graded): `wfbp_iteration` and `ddp_buckets`
#
# `wfbp_iteration`: write `wfbp_iteration_s` in `dlsys/exercises/overlap.py`, the
# recurrence above for pushes, server updates and pulls; the graded tests hold it to the
# emulator on AlexNet, ResNet-50 and GoogLeNet. `ddp_buckets`: write `Fusion.items` in
# `dlsys/schedule/fusion.py`: DDP's buckets in reverse order, at most the cap unless one
# layer is larger. `dlsys exercises release hw`, then `dlsys grade hw --exercise wfbp_iteration`.
