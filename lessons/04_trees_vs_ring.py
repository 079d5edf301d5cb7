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
# # Lesson 04: Trees and recursive doubling against the ring
#
# **Goal.** By the end you can (1) split any collective's cost into a latency part (how
# many alphas) and a bandwidth part (how many times n beta); (2) say which all-reduce
# algorithm wins for small and for large messages, and why; (3) find the message size
# where two algorithms cross, from the closed forms, and check it against emulated runs.
#
# Run: `python lessons/04_trees_vs_ring.py` (figures in `out/lessons/`).

# %%
from dlsys.experiments import allreduce_costs, crossovers, emulated_allreduce_costs, link_table
from dlsys.collectives import textbook_form as closed_form
from dlsys.machine.net import get_link
from dlsys.viz.costs import alpha_beta_split, cost_curves
from dlsys.viz.lessons import show
from dlsys.units import format_bytes, format_seconds

# %% [markdown]
# ## Four ways to all-reduce
#
# p ranks, n bytes each, p a power of two (Thakur, Rabenseifner & Gropp 2005):
#
# | algorithm | how | time |
# | --- | --- | --- |
# | recursive doubling | step k: swap the *whole* buffer with rank $r \oplus 2^k$ and add | $\lg p\,(\alpha + n\beta)$ |
# | reduce + broadcast | binomial reduce to rank 0, binomial broadcast back | $2\lg p\,(\alpha + n\beta)$ |
# | Rabenseifner | recursive-halving reduce-scatter, recursive-doubling all-gather | $2\lg p\,\alpha + 2\frac{p-1}{p}n\beta$ |
# | ring | ring reduce-scatter, ring all-gather (lesson 03) | $2(p-1)\,\alpha + 2\frac{p-1}{p}n\beta$ |
#
# Every cost has the form
#
# $$T(p, n) = a(p)\,\alpha + b(p)\,n\beta$$
#
# where **a** counts messages on the critical path (the latency part) and **b** counts how
# many times the buffer crosses one link (the bandwidth part). Trees and recursive doubling keep a small (lg p); the ring and
# Rabenseifner keep b below 2. Which matters depends on n compared with $\alpha/\beta$.
# The closed forms themselves tell a and b: a is the cost of 0 bytes over alpha.

# %%
link = get_link("tcp-10gbe")
print(f"{'algorithm':<20} {'p':>3} {'a (alphas)':>11} {'b (n betas)':>12}")
for p in (8, 64):
    for algorithm in ("recursive_doubling", "reduce_broadcast", "rabenseifner", "ring"):
        a = closed_form("allreduce", algorithm, p, 0, link) / link.alpha_s
        b = (closed_form("allreduce", algorithm, p, 1e9, link) - a * link.alpha_s) / (1e9 * link.beta_s_per_byte)
        print(f"{algorithm:<20} {p:>3} {a:>11.0f} {b:>12.3f}")

# %% [markdown]
# ## Against message size: the crossover
#
# On 8 ranks over 10 GbE TCP: lines are the closed forms, circles are the algorithms really
# run (with virtual time), stars mark where the fastest algorithm changes.

# %%
SIZES = [2**k for k in range(0, 33)]  # 1 B .. 4 GiB
P = 8
for name in ("tcp-10gbe", "rdma-edr"):
    rows = allreduce_costs([name], [P], SIZES)
    emulated = emulated_allreduce_costs(name, P, sizes=(2**10, 2**20, 2**30))
    worst = max(abs(e["time_s"] - closed_form("allreduce", e["algorithm"], P, e["nbytes"], name)) / e["time_s"]
                for e in emulated)
    print(f"{name}: {len(emulated)} emulated runs, largest relative difference from the closed forms {worst:.1e}")
    ring_vs_doubling = [r for r in rows if r["algorithm"] in ("ring", "recursive_doubling")]
    for c in crossovers(rows, "nbytes") + crossovers(ring_vs_doubling, "nbytes"):
        print(f"  from {format_bytes(c['nbytes'])} ({format_seconds(c['time_s'])}) on: {c['to']} beats {c['from']}")
    show(cost_curves(rows, "nbytes", emulated, crossovers(rows, "nbytes"), f"All-reduce on {P} ranks, {name}"),
         f"04_allreduce_by_size_{name}")

# %% [markdown]
# Below the crossover, recursive doubling wins: only lg p = 3 messages on the critical path
# instead of the ring's 2(p-1) = 14. Above it, the ring (and Rabenseifner) win: each rank
# moves $2\frac{p-1}{p}n$ bytes, where recursive doubling moves $\lg p \cdot n$. In this
# model Rabenseifner gets both (few messages *and* few bytes) and the ring never beats it;
# real rings win anyway because every step uses only neighbour links, which map onto any
# network without contention, and they work at any p. MPICH picks by size: recursive
# doubling for short messages, Rabenseifner for long ones (Thakur et al. 2005).
#
# Every crossover is a multiple of the link's $n_{1/2} = \alpha/\beta$ (both closed forms
# are $a\alpha + b\,n\beta$). RDMA shrinks alpha a lot, but beta too, so the crossovers
# move much less than alpha does:

# %%
tcp, rdma = (next(r for r in link_table() if r["link"] == name) for name in ("tcp-10gbe", "rdma-edr"))
print(f"alpha: {tcp['alpha_s'] / rdma['alpha_s']:.0f}x smaller on RDMA; beta: {tcp['beta_s_per_byte'] / rdma['beta_s_per_byte']:.0f}x "
      f"smaller; n_1/2: {format_bytes(tcp['n_half_bytes'])} on TCP, {format_bytes(rdma['n_half_bytes'])} on RDMA")

# %% [markdown]
# ## Where the ring's time goes
#
# The ring's latency part $2(p-1)\alpha$ and bandwidth part $2\frac{p-1}{p}n\beta$,
# apart. The star is where they are equal.

# %%
ring_rows = [r for r in allreduce_costs(["tcp-10gbe"], [P], SIZES) if r["algorithm"] == "ring"]
show(alpha_beta_split(ring_rows, f"Ring all-reduce on {P} ranks, tcp-10gbe: latency and bandwidth parts"),
     "04_ring_alpha_beta")

# %% [markdown]
# ## Against the number of ranks
#
# For a small message (1 KiB) the latency part decides: the ring's $2(p-1)\alpha$ grows
# linearly and trees win ever more clearly. For a large message (64 MiB) the bandwidth
# part decides, and recursive doubling's $\lg p \cdot n\beta$ grows while the ring's
# stays near $2n\beta$.

# %%
RANKS = [2**k for k in range(1, 11)]  # 2 .. 1024
for n in (2**10, 64 * 2**20):
    rows = allreduce_costs(["tcp-10gbe"], RANKS, [n])
    show(cost_curves(rows, "ranks", (), crossovers(rows, "ranks"), f"All-reduce of {format_bytes(n)}, tcp-10gbe"),
         f"04_allreduce_by_ranks_{n}B")

# %% [markdown]
# ## Try it
#
# 1. Set the ring's and recursive doubling's closed forms equal and solve for n. Check
#    your formula against the printed "ring beats recursive_doubling" size on 8 ranks.
# 2. Why is there no crossover between the ring and recursive doubling on 2 ranks?
# 3. For which p do the ring and Rabenseifner have the same latency part
#    ($2(p-1) = 2\lg p$)? What does the difference in a tell you about p = 1024?
# 4. Charge reductions (`allreduce_costs` uses `closed_form(..., reduce=False)`): with
#    `closed_form("allreduce", "recursive_doubling", 8, n, "tcp-10gbe", "laptop-cpu",
#    reduce=True)`, does the crossover move up or down? Why?
#
# ## Exercise `ring_allreduce_cost` (20 points)
#
# In `hw/exercises/ring_cost.py` (after `dlsys exercises release hw/`): the time of a ring all-reduce
# from alpha and beta, the bytes each rank sends, and the crossover size with recursive
# doubling (`math.inf` when the ring never wins). Derive them by counting steps and block
# sizes; the graded tests hold them to the emulator's virtual time and trace, and check
# that below your crossover recursive doubling is faster and above it the ring is
# (`dlsys grade hw --exercise ring_allreduce_cost`).
