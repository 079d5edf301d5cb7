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
# # Lesson 15: Pipelines, experts and choosing a layout
#
# **Goal.** By the end you can (1) write the actions one pipeline stage runs under GPipe,
# 1F1B, interleaved 1F1B and zero bubble, and predict each bubble; (2) say why 1F1B holds
# p micro-batches of activations where GPipe holds m; (3) run an all-to-all by pairwise
# exchange and by Bruck's algorithm and say which wins for small and for large blocks;
# (4) route tokens to experts with top-k gating and a capacity factor, across ranks by
# all-to-all, and count the tokens dropped; (5) lay a large model out as DP x TP x PP with
# ZeRO on a GPU cluster, and rank the layouts that fit by step time.
#
# Run this file as `python lessons/15_pipelines_experts_layout.py` (figures go to
# `out/lessons/`). The same runs are the app's *Pipelines and the planner* page;
# docs/pipelines.md, docs/experts.md and docs/planner.md hold the tables.

# %%
import numpy as np

from dlsys.experiments import experts as ex_experts
from dlsys.experiments import pipeline as ex_pipeline
from dlsys.experiments import plan as ex_plan
from dlsys.planner import MODELS
from dlsys.train import grid3d
from dlsys.train.pipeline import SCHEDULES, single_rank_run
from dlsys.viz import experts as viz_experts
from dlsys.viz import pipeline as viz_pipeline
from dlsys.viz import plan as viz_plan
from dlsys.viz.lessons import show
from dlsys.units import format_bytes

P, M = 4, 8  # pipeline stages and micro-batches

# %% [markdown]
# ## The bubble
#
# Lesson 6 cut an MLP into stages, one per rank, and ran GPipe (Huang et al. 2019): all $m$
# forwards of the micro-batches, then all $m$ backwards. Stage $s$ cannot start before the
# first micro-batch has crossed stages $0..s-1$, and stage 0 waits at the end while the last
# backward drains back. With every forward costing $t_f$ and every backward $t_b$ on every
# stage, each stage is busy $m(t_f + t_b)$ of a step of $(m + p - 1)(t_f + t_b)$: the idle
# share, the **bubble**, is
#
# $$\frac{p-1}{m+p-1}.$$
#
# A schedule is data: the ordered list of actions one stage runs. `F i` is the forward of
# micro-batch $i$, `B i` its backward.

# %%
for s in range(P):
    print(f"stage {s}: GPipe", " ".join(f"{a.kind}{a.micro_batch}" for a in SCHEDULES["gpipe"].actions(s, P, M, 1)))

# %% [markdown]
# The emulator runs these lists over a small transformer cut into $p$ stages (the
# communication is free here, so the idle time is the schedule's alone). Each bar is an
# action's virtual time; grey behind it is idle.

# %%
gpipe = ex_pipeline.pipeline_schedule("gpipe", P, M)
show(viz_pipeline.gantt(gpipe), "15_gpipe")
print(
    f"GPipe: bubble measured {gpipe['bubble'][0]['measured']:.4f}, formula (p-1)/(m+p-1) = "
    f"{gpipe['bubble'][0]['formula']:.4f}"
)

# %% [markdown]
# ## 1F1B: the same bubble, p micro-batches instead of m
#
# GPipe's problem is memory: a stage keeps every micro-batch's activations until its
# backward, so all $m$ of them. **1F1B** (PipeDream-Flush; Narayanan et al. 2021, section
# 2.2) runs $p - s - 1$ warm-up forwards on stage $s$, then alternates one forward and one
# backward (the backward of the oldest micro-batch in flight), then drains the remaining
# backwards. Stage $s$ never holds more than $p - s$ micro-batches. The bubble does not
# change: the pipe fills and drains exactly as before.

# %%
for s in range(P):
    print(f"stage {s}: 1F1B ", " ".join(f"{a.kind}{a.micro_batch}" for a in SCHEDULES["1f1b"].actions(s, P, M, 1)))
one_f = ex_pipeline.pipeline_schedule("1f1b", P, M)
show(viz_pipeline.gantt(one_f), "15_1f1b")
for g, o in zip(gpipe["memory"], one_f["memory"]):
    print(
        f"stage {g['stage']}: GPipe holds {g['in_flight']} micro-batches "
        f"({format_bytes(g['activation_peak_nbytes'])}), 1F1B {o['in_flight']} "
        f"({format_bytes(o['activation_peak_nbytes'])})"
    )

# %% [markdown]
# The peaks are the memory ledger's (lesson 14): each stage records the activations it keeps
# for backward. Since 1F1B's memory no longer grows with $m$, a run can take many
# micro-batches, and that is what shrinks the bubble.
#
# ## Interleaving: v chunks per rank
#
# Give each rank $v$ non-contiguous chunks of layers (rank $s$ holds virtual stages $s$,
# $s + p$, ...; Megatron-LM's interleaved schedule, Narayanan et al. 2021, section 2.2.1).
# A micro-batch now crosses the ranks $v$ times, each time with $1/v$ of the work, so the pipe
# fills $v$ times faster: the idle time is divided by $v$. Narayanan writes the bubble as
# idle over busy time, $(p-1)/(vm)$; over the whole step it is $(p-1)/(vm + p - 1)$. The
# price: $v$ times more point-to-point messages, and $m$ must be a multiple of $p$.
#
# ## Zero bubble: split the backward
#
# A backward computes two things: the gradient of the layer's input $dX$, which the previous
# stage waits for, and the gradient of its weights $dW$, which nobody waits for until the
# optimizer step. **ZB-H1** (Qi et al. 2024, section 3.1) runs them as two actions, `B`
# (input) and `W` (weights), keeps 1F1B's order of `F` and `B`, and lets stage $s$ delay its
# first $s$ `W`s into the idle time of the cool-down. With $T_F = T_B = T_W$ the idle time
# is a third of 1F1B's, at 1F1B's peak memory.

# %%
records = {name: ex_pipeline.pipeline_schedule(name, P, M, 2 if s.chunked else 1) for name, s in SCHEDULES.items()}
show(viz_pipeline.gantt(records["zb-h1"]), "15_zb_h1")
show(viz_pipeline.stage_memory(list(records.values())), "15_stage_memory")
for name, r in records.items():
    b = r["bubble"][0]
    print(
        f"{name:>12}: bubble {b['measured']:.4f} (formula {b['formula']:.4f}), stage 0 idle "
        f"{b['idle_s'] * 1e6:.3f} us, holds {r['memory'][0]['in_flight']} (micro-batch, chunk) activations"
    )
print(
    f"ZB-H1's idle time over 1F1B's: {records['zb-h1']['bubble'][0]['idle_s'] / records['1f1b']['bubble'][0]['idle_s']:.4f}"
)

# %%
show(viz_pipeline.bubble_vs_microbatches(ex_pipeline.bubble_vs_microbatches(P)), "15_bubble_vs_m")

# %% [markdown]
# ## All-to-all
#
# In an all-to-all every rank has one block for every rank: rank $r$'s block $d$ goes to
# rank $d$. With $n$ bytes a rank (its $p$ blocks), the **pairwise exchange** (MPICH's
# `MPIR_Alltoall_intra_pairwise`) runs $p - 1$ steps; at step $k$ rank $r$ sends its block
# for $r + k$ and receives the block of $r - k$:
#
# $$T_{\text{pairwise}} = (p-1)\left(\alpha + \frac{n}{p}\beta\right).$$
#
# **Bruck's algorithm** (Bruck et al. 1997) needs only $\lceil \lg p \rceil$ steps: at step
# $k$ every rank forwards, in one message, all the blocks whose remaining distance has bit
# $k$ set, about half of its buffer, so at a power of two
#
# $$T_{\text{Bruck}} = \lg p \left(\alpha + \frac{n}{2}\beta\right).$$
#
# Fewer messages, more bytes: Bruck wins when the blocks are small and $\alpha$ dominates.

# %%
for algorithm in ("pairwise", "bruck"):
    show(
        viz_experts.alltoall_steps_figure(ex_experts.alltoall_steps(5, algorithm), algorithm),
        f"15_alltoall_{algorithm}",
    )
costs = ex_experts.alltoall_costs(16)
for row in costs:
    print(
        f"{row['algorithm']:>8}, blocks of {format_bytes(row['block_nbytes']):>9}: {row['time_s'] * 1e6:9.3f} us "
        f"(closed form {row['closed_form_s'] * 1e6:9.3f} us); MPICH would run {row['mpich']}"
    )
print(
    f"Bruck beats pairwise on 16 ranks below blocks of {format_bytes(ex_experts.bruck_crossover_block_nbytes(16))}; "
    f"MPICH switches at {ex_experts.MPICH_ALLTOALL_SHORT_MSG_SIZE} B (thresholds measured on its machines, "
    "with copies our model does not charge)"
)

# %% [markdown]
# ## Mixture of experts
#
# A mixture-of-experts layer replaces a transformer's MLP by $E$ MLPs, the experts, and a
# router: a linear layer and a softmax give each token a probability per expert, and the
# token goes to its top $k$ (Switch Transformer: $k = 1$, Fedus et al. 2021; GShard: $k = 2$,
# Lepikhin et al. 2020), its output the gate-weighted sum of theirs. An expert takes at most
#
# $$\text{capacity} = \left\lceil \text{capacity factor} \cdot \frac{\text{tokens} \cdot k}{E} \right\rceil$$
#
# tokens; the rest are **dropped** and pass through the residual unchanged. With experts
# spread over the ranks (**expert parallelism**), each rank routes its own tokens, sends
# each expert's tokens to the expert's rank by an all-to-all-v (uneven: the router decides
# the counts, which travel first in a small all-to-all), the experts run, and a second
# all-to-all-v brings the outputs home. Backward runs the same steps in reverse.

# %%
header, table = ex_experts.table_equality()  # the expert-parallel layer against one rank's
print(" | ".join(header))
for line in table:
    print(" | ".join(str(c) for c in line))
load = ex_experts.expert_load()
show(viz_experts.expert_load_figure(load, 1, 1.0), "15_expert_load")
show(viz_experts.dropped_figure(ex_experts.dropped_fraction(load)), "15_dropped")
for d in ex_experts.dropped_fraction(load):
    print(
        f"top-{d['top_k']}, capacity factor {d['capacity_factor']:g}: {d['dropped_fraction']:.1%} of the choices dropped"
    )

# %% [markdown]
# ## Choosing a layout
#
# A large model on many GPUs combines all of it: tensor parallelism (lesson 14) inside a
# node, where NVLink is an order of magnitude faster than the network; pipeline stages
# across nodes, where only one activation per micro-batch crosses; data parallelism over the
# rest, with ZeRO if the optimizer state does not fit. Which layout is best is arithmetic
# (Narayanan et al. 2021, section 3; the Ultra-Scale Playbook; the JAX scaling book): for
# each layout count what one GPU holds, the FLOPs, and the bytes each collective moves on
# its link. `dlsys.planner` does this in closed form for Llama-shaped models on a device's
# cluster (A100, H100 or H200 from their datasheets: 8 GPUs to an NVLink island, an
# InfiniBand rail per GPU). Each kernel is a roofline: its FLOPs at the device's measured
# matmul ceiling or its bytes at HBM bandwidth, whichever is longer. It runs no rank, so it
# can rank thousands of layouts in a second or two; docs/planner.md holds it to
# Megatron-LM's published runs (Narayanan et al. 2021, Table 1), and it comes out about a
# quarter faster than they measured: read why there.

# %%
model, gpus = "7b", 64
rows = ex_plan.ranked(model, gpus)
print(f"{MODELS[model].name} on {gpus} GPUs: {len(rows)} layouts fit 80 GiB; the five fastest:")
for r in rows[:5]:
    print(
        f"  tp {r['tp']} pp {r['pp']:>2} dp {r['dp']:>2} ZeRO {r['zero']}, {r['microbatches']:>3} micro-batches of "
        f"{r['micro_batch']}, recompute {r['recompute']:>9}: step {r['step_s']:.3f} s, "
        f"{format_bytes(r['memory_bytes'])} a GPU, {r['tflops']:.0f} TFLOP/s, MFU {r['mfu']:.0%}"
    )
show(viz_plan.step_bars(rows[:10]), "15_plan_bars")

# %% [markdown]
# Now hold the model fixed and look at one layout that does not fit: plain data
# parallelism without ZeRO keeps $(2 + 2 + 12)\Psi$ bytes of model states on every GPU.

# %%
ddp = ex_plan.layout_record(model, gpus, tp=1, pp=1, zero=0, micro_batch=1)
print(f"DDP: {format_bytes(ddp['memory_bytes'])} a GPU, fits: {ddp['fits']}")
for part in ex_plan.components(ddp):
    print(f"  {part['component']:>8}: {part['seconds']:.3f} s ({part['share']:.0%})")
show(viz_plan.memory_bar(ddp), "15_plan_ddp_memory")

# %% [markdown]
# The planner's numbers are arithmetic; the small transformer can run the same layout on
# ranks. `dlsys.train.grid3d` puts it on a `Grid(dp, tp, pp)`: each rank holds its Megatron
# split of its stage's layers, runs 1F1B over its data-parallel copy's micro-batches, and
# all-reduces its gradients over its copy group. Its weights after the step are one rank's,
# and stage 0's memory ledger holds what the planner counts for that layout (the
# activations of the micro-batches 1F1B keeps in flight; `tests/train/test_grid3d.py` holds the
# two byte for byte).

# %%
config = grid3d.GridConfig(dp=2, tp=2, pp=2, micro_batches=4)
run = grid3d.run(config)
error = np.abs(grid3d.gather_params(run.values, config) - single_rank_run(config.reference())["params"]).max()
print(
    f"{config.dp * config.tp * config.pp} ranks (dp {config.dp}, tp {config.tp}, pp {config.pp}): "
    f"{len(run.trace.messages)} messages, {run.virtual_time_s * 1e3:.3f} ms virtual; "
    f"largest weight difference from one rank {error:.1e}"
)
for value in run.values[: config.dp * config.tp]:  # stage 0's ranks
    print(
        f"  rank {run.values.index(value)} (stage 0, copy {value['coords'][0]}, TP {value['coords'][1]}): "
        f"activations peak {format_bytes(value['peak_by_kind']['activations'])}"
    )

# %% [markdown]
# A mixture of experts adds a fourth axis. Mixtral-8x7B (Jiang et al. 2024) has eight
# experts a layer and sends each token to two, so it computes with far fewer parameters a
# token than it holds (printed below). Expert parallelism spreads the experts over ep data-parallel copies
# (`Grid(dp, tp, pp, ep)`), which then exchange the tokens by all-to-all four times a layer
# (dispatch and combine, forward and backward): the **ep** column below.

# %%
mixtral = MODELS["8x7b"]
print(
    f"{mixtral.name}: {mixtral.params() / 1e9:.1f} B parameters, {mixtral.active_params() / 1e9:.1f} B active a token"
)
moe = ex_plan.ranked("8x7b", 64, global_batch=256)
print(f"on 64 GPUs, 256 sequences a step: {len(moe)} layouts fit; the fastest:")
for r in moe[:5]:
    print(
        f"  tp {r['tp']} pp {r['pp']:>2} dp {r['dp']:>2} ep {r['ep']} ZeRO {r['zero']}: step {r['step_s']:.3f} s, "
        f"EP all-to-all {r['ep_s']:.3f} s, {format_bytes(r['memory_bytes'])} a GPU"
    )

# %% [markdown]
# ## Try it
#
# 1. `dlsys pipeline --schedule interleaved --stages 4 --microbatches 8 --chunks 4`: how does
#    the bubble compare with $v = 2$? What does each stage hold?
# 2. Run the same with `--link tcp-10gbe`: why does the bubble grow, and which schedule
#    suffers most from the extra messages?
# 3. At which block size does Bruck stop paying off on 64 ranks over `tcp-10gbe`
#    (`ex_experts.bruck_crossover_block_nbytes(64, "tcp-10gbe")`)?
# 4. `dlsys plan --model 70b --gpus 1024`: why is TP 4 or 8 and never 16? Force
#    `--tp 1` and read what breaks.
# 5. `dlsys plan --model 8x7b --gpus 256 --global-batch 256 --tp 8 --ep 8`: where does the
#    EP group's all-to-all run now, and what does it cost against `--tp 2 --ep 4`?
#
# ## Exercises (graded): `pipeline_1f1b_order` (10 points) and `pairwise_alltoall` (15 points)
#
# `pipeline_1f1b_order`: write `one_f_one_b` in `dlsys/train/pipeline.py`, the action list
# of stage $s$: $p - s - 1$ warm-up forwards, then one forward and one backward in turn
# (each backward for the oldest micro-batch in flight), then the remaining backwards in
# order. The tests check every micro-batch's forward comes before its backward, the warm-up
# count, at most $p - s$ micro-batches in flight, and simulate every stage's list together:
# no deadlock, and a step of $3(m + p - 1)$ time units with $F = 1$, $B = 2$. GPipe's order
# keeps the bubble but not the memory, and costs the memory tests.
#
# `pairwise_alltoall`: write `pairwise_exchange` in `dlsys/collectives/exchange.py`. The tests
# check the blocks land in their slots (also uneven ones), one message to every other rank,
# and the virtual time equal to $(p-1)(\alpha + \frac{n}{p}\beta)$. Sending every block first
# and then receiving is faster here (sends are buffered) but it is another algorithm
# (MPICH's "scattered"), and it loses the time test.
#
# `dlsys exercises release hw`, then
# `dlsys grade hw --exercise pipeline_1f1b_order --exercise pairwise_alltoall`.
