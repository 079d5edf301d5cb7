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
# # Lesson 03: Ring all-reduce, step by step
#
# **Goal.** By the end you can (1) run a ring all-reduce by hand: which block every rank
# sends and adds at every step of the reduce-scatter, and which it forwards in the
# all-gather; (2) derive its cost $2(p-1)(\alpha + \frac{n}{p}\beta)$ from that picture;
# (3) explain why, for large messages, its time stops depending on the number of ranks,
# while a reduce to one rank followed by a broadcast keeps growing.
#
# Run: `python lessons/03_ring_allreduce.py` (figures in `out/lessons/`).

# %%
import numpy as np

import dlsys
from dlsys import collectives
from dlsys.experiments import allreduce_costs, ring_allreduce_steps, simulate_collective
from dlsys.viz.comm import timeline
from dlsys.viz.costs import cost_curves
from dlsys.viz.lessons import show
from dlsys.viz.ring_steps import ring_steps
from dlsys.units import format_bytes, format_seconds

# %% [markdown]
# ## The algorithm
#
# Arrange the p ranks in a ring; rank r sends only to its right neighbour r+1 and receives
# only from its left neighbour r-1 (mod p). Cut every rank's buffer of n bytes into p
# blocks of n/p.
#
# 1. **Reduce-scatter**, p-1 steps: in step s, rank r sends block $(r-s-1) \bmod p$ to
#    the right and adds the block $(r-s-2) \bmod p$ it receives from the left to its own
#    copy. Each block travels around the ring collecting one more rank's contribution per
#    hop; after p-1 steps rank r holds the complete sum of block r.
# 2. **All-gather**, p-1 steps: in step s, rank r forwards block $(r-s) \bmod p$ (complete
#    by now) to the right and stores the block $(r-s-1) \bmod p$ it receives. After p-1
#    steps everyone holds every complete block.
#
# Each of the $2(p-1)$ steps is one message of n/p bytes per rank, all ranks at once, so
# (Patarasuk & Yuan 2009; Baidu's ring all-reduce, Gibiansky 2017; Thakur et al. 2005)
#
# $$T_\text{ring}(p, n) = 2(p-1)\left(\alpha + \frac{n}{p}\beta\right),
# \qquad \text{bytes sent per rank} = 2\,\frac{p-1}{p}\,n \;\to\; 2n.$$
#
# ## Watch it
#
# Rank r contributes $2^r$ to every element, so each value, written in binary, names the
# ranks whose input it already contains. `ring_allreduce_steps` runs a real ring
# all-reduce on 4 ranks and replays its trace step by step.

# %%
P = 4
states = ring_allreduce_steps(P)


def contributors(mask):
    return "all" if mask == (1 << P) - 1 else "+".join(str(r) for r in range(P) if mask >> r & 1)


for state in states:
    title = "start" if state["phase"] == "start" else f"after {state['phase']} step {state['step']}"
    moves = ", ".join(f"{src}->{dst} block {chunk}" for src, dst, chunk in state["moves"])
    print(f"{title}{': ' + moves if moves else ''}")
    for rank, chunks in enumerate(state["chunks"]):
        print(f"  rank {rank}: " + " | ".join(f"{contributors(m):>7}" for m in chunks))
show(ring_steps(states), "03_ring_steps")

# %% [markdown]
# ## The same run as messages
#
# The trace records every message. The labels say which step and which block; each is
# n/p bytes. Here n = 4 KiB of float32 on 4 ranks, so every message carries 1 KiB.

# %%
def ring_allreduce(comm, count):
    return collectives.allreduce(comm, np.ones(count, np.float32), algorithm="ring")


run = dlsys.launch(ring_allreduce, P, "threads", link="tcp-10gbe", args=(1024,))
for m in sorted(run.trace.messages, key=lambda m: (m.depart_s, m.src)):
    print(f"{m.label:<32} rank {m.src} -> rank {m.dst}  {format_bytes(m.nbytes):>8}  "
          f"departs {format_seconds(m.depart_s):>9}, arrives {format_seconds(m.arrive_s)}")
print(f"bytes sent per rank: {run.trace.bytes_sent_per_rank()} = 2 (p-1)/p n = {2 * (P - 1) * 4096 // P}")
show(timeline(dlsys.launch(ring_allreduce, P, "threads", link="tcp-10gbe", args=(2**18,)).trace,
              "Ring all-reduce of 1 MiB on 4 ranks: 6 steps, every link busy at once"), "03_timeline")

# %% [markdown]
# ## Why the time stops depending on p
#
# The bandwidth term $2\frac{p-1}{p}n\beta$ tends to $2n\beta$: every rank sends and
# receives about twice its buffer, *whatever* p is, because all p links work at the same
# time. Compare a reduce to rank 0 followed by a broadcast, both binomial trees:
# $2\lceil\lg p\rceil(\alpha + n\beta)$ sends the *whole* buffer $2\lg p$ times in a row.
# Below: 64 MiB on 10 GbE TCP, closed forms (lines) and emulated runs (circles).

# %%
N, LINK, RANKS = 64 * 2**20, "tcp-10gbe", (2, 4, 8, 16, 32, 64)
shown = ("ring", "reduce_broadcast")
closed = [r for r in allreduce_costs([LINK], RANKS, [N]) if r["algorithm"] in shown]
emulated = []
for p in RANKS:
    for algorithm in shown:
        record = simulate_collective("allreduce", algorithm, p, N, LINK, max_memory_bytes=2**24, record=False)
        emulated.append({"algorithm": algorithm, "ranks": p, "time_s": record["virtual_time_s"]})
        if algorithm == "ring":
            print(f"p = {p:>2}: ring {format_seconds(record['virtual_time_s']):>9} (closed form "
                  f"{format_seconds(record['closed_form_s'])}), sent per rank "
                  f"{format_bytes(max(record['bytes_sent_per_rank']))} (2n = {format_bytes(2 * N)})")
show(cost_curves(closed, "ranks", emulated, title=f"All-reduce of {format_bytes(N)} on {LINK}: ring against reduce + broadcast"),
     "03_ring_vs_tree_by_ranks")

# %% [markdown]
# ## Try it
#
# 1. In the printed states, follow block 2 through the reduce-scatter: which ranks hold it,
#    and in which order are the contributions added?
# 2. With p = 64, what fraction of the ring's time is latency ($2(p-1)\alpha$) for
#    64 MiB? For 64 KiB? Run `simulate_collective("allreduce", "ring", 64, "64KiB")`.
# 3. The ring's time hardly grows with p at 64 MiB. Why does it grow at all? Which term
#    would dominate at p = 4096?
# 4. Patarasuk & Yuan (2009) show that when bandwidth dominates no all-reduce beats
#    $2\frac{p-1}{p}n\beta$: the ring is bandwidth-optimal. Which algorithm of lesson 04
#    also reaches that bound, and what does it pay less of?
#
# ## Exercises `ring_reduce_scatter` (20), `ring_allgather` (15), `ring_allreduce` (20)
#
# In `hw/collectives/ring.py` (after `dlsys exercises release hw/`): write
# `reduce_scatter_blocks` and `allgather_blocks` on a list of p blocks, then
# `allreduce_ring` from those two. Use `send` (it names each message's phase, step and
# block), `recv_like` and `combine` (they check shapes and charge reductions). Graded: the values
# (also uneven blocks: 13 elements on 5 ranks), p-1 messages of one block to the right
# neighbour per phase, and the closed-form time; sending whole buffers or an off-by-one
# block index loses points. `dlsys grade hw --exercise ring_allreduce` grades one.
