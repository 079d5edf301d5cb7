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
# # Lesson 02: Communication primitives and the alpha-beta model
#
# **Goal.** By the end you can (1) say what each collective (broadcast, scatter, gather,
# all-gather, reduce, all-reduce, reduce-scatter) leaves on every rank; (2) predict the
# time of a message with the alpha-beta model and read alpha and beta off a ping-pong
# curve; (3) explain why a binomial tree broadcasts in lg p steps where the obvious loop
# takes p - 1.
#
# Run: `python lessons/02_primitives_alpha_beta.py` (figures in `out/lessons/`).

# %%
import numpy as np

import dlsys
from dlsys import collectives
from dlsys.collectives import closed_form
from dlsys.experiments import link_table, plan_buffers
from dlsys.machine.net import get_link
from dlsys.viz.comm import timeline
from dlsys.viz.costs import link_comparison
from dlsys.viz.lessons import lines, show
from dlsys.units import format_bytes, format_rate, format_seconds

# %% [markdown]
# ## Point to point: send and recv
#
# `comm.send(x, dest)` hands an array to rank `dest` and returns at once (the message is
# buffered); `comm.recv(source=s)` blocks until rank `s`'s next message is there. Everything
# else is built from these two. The calls take mpi4py's arguments in mpi4py's order, so
# `comm.recv`'s first argument is a buffer, not the source: name the source, as mpi4py's
# own examples do (`comm.recv(3)` is refused, not read as rank 3).
#
# ## The alpha-beta model
#
# A message of n bytes between two idle ranks costs (Hockney 1994; Thakur, Rabenseifner
# & Gropp 2005)
#
# $$T(n) = \alpha + n\beta$$
#
# alpha is what *any* message costs (wire latency plus the CPU overhead at both ends),
# beta what each byte costs (1 / bandwidth, plus copying it into and out of the kernel on
# TCP; RDMA copies nothing). Small messages are latency-bound, large ones bandwidth-bound;
# they cost the same at $n_{1/2} = \alpha / \beta$, where the effective bandwidth
# $n / T(n)$ reaches half its peak $1/\beta$.
#
# The classic way to measure a link is a ping-pong: rank 0 sends n bytes to rank 1, which
# sends them back; half the round trip is T(n).

# %%
def ping_pong(comm, plan):
    buf = plan.full(0)
    if comm.rank == 0:
        comm.send(buf, 1, label="ping")
        comm.recv(source=1)
    else:
        comm.recv(source=0)
        comm.send(buf, 0, label="pong")


SIZES = [4**k for k in range(16)]  # 1 B .. 1 GiB
MAX_MEMORY_BYTES = 2**20  # real buffers of all ranks together (dlsys.experiments.plan_buffers)
rows = []
for link in ("tcp-10gbe", "rdma-edr"):
    for n in SIZES:
        plan = plan_buffers(n, 2, "uint8", max_memory_bytes=MAX_MEMORY_BYTES)  # big messages: small real
        run = dlsys.launch(ping_pong, 2, "threads", link=link, args=(plan,))    # buffers charged as n bytes
        rows.append({"link": link, "nbytes": n, "time_s": run.virtual_time_s / 2})

print(f"{'link':<10} {'n':>10} {'T(n) emulated':>14} {'alpha + n beta':>15} {'n / T(n)':>12}")
for r in rows[::3]:
    model_s = get_link(r["link"]).message_s(r["nbytes"])
    print(f"{r['link']:<10} {format_bytes(r['nbytes']):>10} {format_seconds(r['time_s']):>14} "
          f"{format_seconds(model_s):>15} {format_rate(r['nbytes'] / r['time_s']):>12}")
show(link_comparison(rows, "Ping-pong: half a round trip against message size"), "02_ping_pong")

# %% [markdown]
# Flat on the left (alpha), slope 1 on the right (n beta). The knee is $n_{1/2}$:

# %%
for r in link_table():
    if r["link"] in ("tcp-10gbe", "rdma-edr"):
        print(f"{r['link']:<10} alpha = {format_seconds(r['alpha_s'])}, beta = {r['beta_s_per_byte'] * 1e9:.3f} ns/B "
              f"(peak {format_rate(1 / r['beta_s_per_byte'])}), n_1/2 = {format_bytes(r['n_half_bytes'])}")

# %% [markdown]
# ## Collectives: who holds what afterwards
#
# A collective is called by *every* rank of the group. Below, rank r starts with
# $x_r = [10r, 10r+1, 10r+2, 10r+3]$ and each collective runs on 4 ranks:
#
# | collective | afterwards |
# | --- | --- |
# | broadcast | every rank holds the root's x |
# | scatter | rank r holds block r of the root's x |
# | gather | the root holds every rank's x |
# | all-gather | every rank holds every rank's x |
# | reduce | the root holds the sum of all x |
# | all-reduce | every rank holds the sum of all x |
# | reduce-scatter | rank r holds block r of the sum |

# %%
def every_collective(comm):
    x = 10.0 * comm.rank + np.arange(4)
    return {
        "broadcast from 0": collectives.broadcast(comm, x, root=0),
        "scatter from 0": collectives.scatter(comm, x, root=0),
        "gather to 0": collectives.gather(comm, x, root=0),
        "all-gather": collectives.allgather(comm, x),
        "reduce (sum) to 0": collectives.reduce(comm, x, root=0),
        "all-reduce (sum)": collectives.allreduce(comm, x),
        "reduce-scatter (sum)": collectives.reduce_scatter(comm, x),
    }


held = dlsys.launch(every_collective, 4, "threads").values
for name in held[0]:
    print(name)
    for rank, results in enumerate(held):
        value = results[name]
        print(f"  rank {rank}: {'-' if value is None else np.asarray(value).tolist()}")

# %% [markdown]
# ## Broadcast two ways: a loop or a tree
#
# The obvious broadcast is a loop at the root: send to rank 1, then 2, ..., then p-1.
# Every message leaves through the root's one link, one after the other, so the last rank
# waits for p - 1 messages: about $(p-1)\,n\beta + \alpha$ for big messages and
# $(p-1)$ send overheads for small ones.
#
# A **binomial tree** doubles the number of ranks that hold the data every round: the
# root sends to rank p/2; then both send to p/4 and 3p/4; and so on. After
# $\lceil \lg p \rceil$ rounds everyone has it (Thakur et al. 2005):
#
# $$T_\text{binomial}(p, n) = \lceil \lg p \rceil \, (\alpha + n\beta)$$

# %%
def loop_broadcast(comm, plan):
    """The root sends x to every other rank in turn."""
    x = plan.full(1.0)
    if comm.rank == 0:
        for dst in range(1, comm.size):
            comm.send(x, dst, label=f"to rank {dst}")
        return x
    return comm.recv(source=0)


def tree_broadcast(comm, plan):
    x = plan.full(1.0)
    return collectives.broadcast(comm, x if comm.rank == 0 else np.zeros_like(x), root=0)


LINK = "tcp-10gbe"
bcast_rows = []
for n in (64, 2**20):
    for p in (2, 4, 8, 16, 32, 64):
        plan = plan_buffers(n // 4, p, "float32", max_memory_bytes=MAX_MEMORY_BYTES)
        for name, program in (("loop", loop_broadcast), ("binomial tree", tree_broadcast)):
            t = dlsys.launch(program, p, "threads", link=LINK, args=(plan,)).virtual_time_s
            bcast_rows.append({"series": f"{name}, {format_bytes(n)}", "ranks": p, "time_ms": t * 1e3,
                               "algorithm": name, "nbytes": n, "time_s": t})

for r in bcast_rows:
    if r["algorithm"] == "binomial tree" and r["ranks"] in (8, 64):
        formula_s = closed_form("broadcast", "binomial", r["ranks"], r["nbytes"], LINK)
        print(f"binomial, p = {r['ranks']}, {format_bytes(r['nbytes'])}: emulated {format_seconds(r['time_s'])}, "
              f"lg p (alpha + n beta) = {format_seconds(formula_s)}")
times = {(r["algorithm"], r["nbytes"], r["ranks"]): r["time_s"] for r in bcast_rows}
for n in (64, 2**20):
    wins = [p for p in (2, 4, 8, 16, 32, 64) if times["binomial tree", n, p] < times["loop", n, p]]
    print(f"{format_bytes(n)}: the tree wins at p = {', '.join(map(str, wins)) or 'none of these'}")
link = get_link(LINK)
print(f"{LINK}: send overhead o_s = {format_seconds(link.send_overhead_s(64))} for 64 B, "
      f"alpha = {format_seconds(link.alpha_s)}")
show(lines(bcast_rows, "ranks", "time_ms", "series", f"Broadcast on {LINK}: a loop at the root against a binomial tree",
           "ranks p", "time (ms)", log_x=True, log_y=True, x_unit="count"), "02_broadcast_loop_vs_tree")

# %% [markdown]
# The cell above prints where the tree wins: for 1 MiB from a few ranks on, for 64 bytes
# only at many ranks. The loop's extra messages cost the root only its send overhead o_s
# each (printed), while every tree round pays the full alpha, because a rank must receive
# before it can forward. The model predicts both: compare $\alpha + (p-1)\,o_s$ with $\lg p \, \alpha$.
#
# The timelines show the difference: the loop keeps the root busy while everyone waits;
# the tree puts more ranks to work every round (grey lines are messages).

# %%
plan = plan_buffers(2**18, 8, "float32", max_memory_bytes=MAX_MEMORY_BYTES)  # 1 MiB per rank
for name, program in (("loop", loop_broadcast), ("binomial tree", tree_broadcast)):
    trace = dlsys.launch(program, 8, "threads", link=LINK, args=(plan,)).trace
    show(timeline(trace, f"Broadcast of 1 MiB to 8 ranks: {name}"), f"02_timeline_{name.replace(' ', '_')}")

# %% [markdown]
# ## Try it
#
# 1. Read alpha off the ping-pong figure for each link (the flat part) and beta (the
#    slope); compare with the printed values. Why does TCP's beta exceed 1 / bandwidth?
# 2. At 64 ranks and 1 MiB, how many times faster is the tree than the loop? Predict it
#    from $(p-1)$ against $\lg p$ first.
# 3. For which message sizes would you rather scatter the data and all-gather it (van de
#    Geijn: $(\lg p + p - 1)\alpha + 2\frac{p-1}{p} n\beta$) than use the tree? Try
#    `collectives.broadcast(..., algorithm="scatter_allgather")`.
# 4. Change `LINK` to `"rdma-edr"`. Which curves move, and by how much?
#
# ## Exercise `binomial_broadcast` (15 points)
#
# Write the binomial tree yourself: the body of `broadcast_binomial` in `hw/collectives/trees.py` (after
# `dlsys exercises release hw/`). Work with ranks relative to the root,
# `vrank = (rank - root) % p`; a rank receives once from its parent, then sends to its
# children, largest subtree first. Graded: every rank gets the root's array for any root,
# p - 1 messages in all, and a time of exactly $\lceil \lg p \rceil (\alpha + n\beta)$
# (`dlsys grade hw --exercise binomial_broadcast`).
#
# ## Exercise `alpha_beta_fit` (10 points)
#
# alpha and beta are measurable: `dlsys bench stack` times one message through a pipe, a
# TCP loopback socket and shared memory on this machine, at sizes from 8 B to 64 MiB. Write
# `fit_alpha_beta(nbytes, times_s)` in `hw/machine/netstack.py`: the least-squares fit of
# $t(n) = \alpha + n\beta$, with each row divided by its $t$ (so that an 8-byte message
# counts as much as a 64 MiB one; otherwise the large messages' noise decides alpha), and
# `predict_ring_allreduce_s(p, nbytes, alpha_s, beta_s_per_byte)`:
# $2(p-1)(\alpha + \frac{n}{p}\beta)$. Graded on exact and noisy timings and against the
# emulated ring (`dlsys grade hw --exercise alpha_beta_fit`).
