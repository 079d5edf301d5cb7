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
# # Lesson 13: Topology and contention
#
# **Goal.** By the end you can (1) compute the max-min fair shares of messages that cross
# the same links at the same time; (2) say why an incast at a parameter server ends at
# $L + (p-1)\,n/B$ whether its receiver's link serves the pushes one after the other or
# all at once; (3) count how often the ring, recursive doubling and a hierarchical
# all-reduce cross the thin upper level of a tree, and why the ring barely notices it;
# (4) bound an all-to-all on an oversubscribed fat tree by the links it must cross.
#
# Run this file as `python lessons/13_topology_and_contention.py` (figures go to
# `out/lessons/`), or open it with `jupytext --to notebook lessons/13_topology_and_contention.py`.
# The same runs are the app's Collectives page, tab *Link load*.

# %%
from dlsys.experiments import contention as ex
from dlsys.machine.flows import max_min_rates
from dlsys.viz.lessons import show
from dlsys.viz.links import link_load_figure
from dlsys.units import format_bytes, format_rate, format_seconds

RANKS, SIZE, LINK = 8, 16 * 2**20, "rdma-edr"  # 16 MiB per rank on InfiniBand EDR

# %% [markdown]
# ## Links that messages share
#
# Until now every message had its pair's link to itself (DESIGN.md): a message of $n$
# bytes costs $L + n/B$ whatever else is on the wire. A real network is links and switches,
# and messages that cross one link at the same time share it. On a topology with links
# above its nodes that is the default: a run whose ranks span them is replayed on the links
# of its topology's **fabric** (`launch(..., sharing=True)` asks for it anywhere; a flat
# network keeps the per-pair clock, its closed forms exactly; docs/flows.md): a message pays
# its route's latency $L$, then moves at its **max-min fair** share of every link on its
# route (Bertsekas & Gallager, *Data Networks*, 2nd ed. 1992, section 6.5.2): no link
# carries more than its capacity $C_l$, and no rate can grow without shrinking one that is
# no larger. The shares come from **progressive filling**: raise every rate together until
# a link is full, at the level
#
# $$\lambda_l = \frac{C_l - \text{(rates already fixed on } l)}{\text{flows on } l \text{ not yet fixed}},$$
#
# fix the flows of the link with the least level, and go on with the rest. Whenever a
# message starts or ends, the shares are solved again (SimGrid's model, with which ours
# agrees to rounding: tests/machine/test_simgrid_oracle.py).
#
# Three flows on two links: flow 0 on link 0 (10 GB/s), flow 1 on links 0 and 1, flow 2
# on link 1 (2 GB/s). Link 1 fills first, at 1 GB/s each; flow 0 then takes all that
# flow 1 leaves on link 0, not half of it.

# %%
routes, capacities_Bps = [[0], [0, 1], [1]], [10e9, 2e9]
flows_on = [sum(link in route for route in routes) for link in range(len(capacities_Bps))]
static = [min(capacities_Bps[link] / flows_on[link] for link in route) for route in routes]
print("max-min rates:", ", ".join(format_rate(r) for r in max_min_rates(routes, capacities_Bps)))
print("a static split (each link's capacity over its flows, the least on the route):",
      ", ".join(format_rate(r) for r in static))

# %% [markdown]
# ## Incast at a parameter server
#
# $p - 1$ workers push $n$ bytes of gradient each to the server, rank 0, at once. Every
# push ends on the server's ingress link, so no schedule can finish before that link has
# carried $(p-1)\,n$ bytes:
#
# $$T_{\text{incast}} \ge L + \frac{(p-1)\,n}{B}.$$
#
# Without sharing the ingress serves the pushes **first in, first out**: the first arrives
# after $L + n/B$, the last after $L + (p-1)\,n/B$. With sharing they move **together**, each
# at $B/(p-1)$, and all arrive at $L + (p-1)\,n/B$. The last arrival, the one the server
# waits for, is the same: sharing changes who waits, not how long the step takes.

# %%
incast = ex.sharing_pair("incast", "flat", RANKS, SIZE, link=LINK)
for record in incast:
    messages = record["result"].trace.messages
    start_s = min(m.depart_s for m in messages)
    print(f"sharing {'on ' if record['sharing'] else 'off'}: first push in after "
          f"{format_seconds(min(m.arrive_s for m in messages) - start_s)}, last after "
          f"{format_seconds(max(m.arrive_s for m in messages) - start_s)}")
bound = incast[1]
print(f"L + (p-1) n / B = {format_seconds(bound['latency_s'] + bound['link_bound_s'])} "
      f"({format_bytes(bound['hottest_nbytes'])} through {bound['hottest_link']})")
show(link_load_figure(incast[1]["rows"], "Incast, sharing on: rank 0's ingress is full, every egress at 1/(p-1)",
                      incast[1]["capacities_Bps"]), "13_incast")

# %% [markdown]
# With $W$ workers the server's link carries $W n$ bytes each way per step: this is why
# lesson 05's parameter server stops scaling, and why ps-lite spreads the keys over
# several servers.
#
# ## Three all-reduces on an oversubscribed two-level tree
#
# Two supernodes of 4 ranks; inside a supernode a full crossbar at $B$; each supernode has
# one uplink of $4B/4 = B$ to the level above (oversubscribed 4:1: its 4 nodes could send
# $4B$). The old rule, static shares (`sharing=False`, kept for this contrast), charges
# **every** message across the static worst case, $B/4$, however few cross at once. With
# sharing, the default, a message across gets what the uplink has left.
#
# * **Ring** (Thakur, Rabenseifner & Gropp 2005, section 4): rank $r$ sends to $r + 1$, so
#   in every step exactly one message leaves each supernode (rank 3 to 4, rank 7 to 0). It
#   has the uplink to itself: with sharing, the ring runs at full speed.
# * **Recursive doubling**: at distance 4 every rank exchanges its whole buffer with the
#   rank in the other supernode, 4 messages on one uplink at once: $B/4$ each, sharing or not.
# * **Hierarchical**: reduce inside each supernode, a ring between the two leaders, then a
#   broadcast inside: only the leaders cross, one message per uplink at a time.

# %%
tree = {a: ex.sharing_pair(a, "two-level", RANKS, SIZE, link=LINK) for a in ex.ALLREDUCES}
print(f"{'all-reduce':<20}{'messages across':>16}{'bytes across':>14}{'no sharing':>12}{'sharing':>10}"
      f"{'busiest link bound':>20}")
for algorithm, (off, on) in tree.items():
    print(f"{algorithm:<20}{on['switch_messages']:>9} of {on['messages']:<4}{format_bytes(on['switch_nbytes']):>14}"
          f"{format_seconds(off['virtual_time_s']):>12}{format_seconds(on['virtual_time_s']):>10}"
          f"{format_seconds(on['link_bound_s']):>12} ({on['hottest_link']})")
show(link_load_figure(tree["recursive_doubling"][1]["rows"],
                      "Recursive doubling, sharing on: the uplinks full at distance 4",
                      tree["recursive_doubling"][1]["capacities_Bps"]), "13_doubling")

# %% [markdown]
# The static model punished the ring for an oversubscription it never meets; the fabric
# shows it crosses the upper level with one message per step, at full speed. Recursive
# doubling sends the most bytes across, all at the same moment, and pays for it either
# way. (The hierarchical all-reduce here moves whole buffers through binomial trees
# inside the supernodes, which the ring's $n/p$ blocks beat at this size.)
#
# ## All-to-all on a fat tree: the bisection bound
#
# A k-ary fat tree (Al-Fares, Loukissas & Vahdat, SIGCOMM 2008) of $k = 4$ holds 16 hosts:
# 4 pods of 2 edge and 2 aggregation switches, 4 core switches. Here each switch-to-switch
# link carries $B/o$: oversubscribed $o{:}1$. In an all-to-all each of the $p$ ranks sends
# $n/p$ bytes to every other. Three cuts bound it:
#
# * a host's egress carries $(p-1)\,n/p$ bytes at $B$;
# * the **bisection** (half the pods from the other half) is crossed by $p/2 \times n/2$
#   bytes each way, over $p/2$ links' worth of $B/o$: $T \ge n\,o / (2B)$;
# * an edge switch's $k/2$ uplinks carry its $k/2$ hosts' bytes to the $p - k/2$ hosts
#   elsewhere, at $k/2 \times B/o$.
#
# The largest bound wins; the busiest link of the run (`link_bound_s`) is that cut.

# %%
HOSTS = 16
print(f"{'o':>3}{'host egress':>13}{'bisection':>11}{'edge uplinks':>14}{'busiest link':>14}{'no sharing':>12}"
      f"{'sharing':>10}")
for o in (1, 2, 4):
    off, on = ex.sharing_pair("alltoall", "fat-tree", HOSTS, SIZE, link=LINK, oversubscription=o)
    B, n, half = on["result"].network.link.bandwidth_Bps, SIZE, 2
    host_s = (HOSTS - 1) * n / HOSTS / B
    bisection_s = n * o / (2 * B)
    edge_s = half * n * (HOSTS - half) / HOSTS / (half * B / o)
    print(f"{o:>3}{format_seconds(host_s):>13}{format_seconds(bisection_s):>11}{format_seconds(edge_s):>14}"
          f"{format_seconds(on['link_bound_s']):>14}{format_seconds(off['virtual_time_s']):>12}"
          f"{format_seconds(on['virtual_time_s']):>10}")
show(link_load_figure(on["rows"], "All-to-all on a 4:1 fat tree, sharing on: the edge uplinks are the cut",
                      on["capacities_Bps"]), "13_alltoall")

# %% [markdown]
# At full bisection ($o = 1$) the hosts' own links are the limit, and the all-to-all runs
# at the host bound. Oversubscribed, the first level above the hosts is the thinnest cut:
# with the same $o$ at every level, an edge switch's uplinks carry every byte that leaves
# it ($(p - k/2)/p$ of its hosts' bytes, 14 of 16 here), more than the half that crosses
# the bisection, over capacity in the same proportion to its hosts. With sharing
# the run meets the busiest link's bound (plus latency and overheads); without, each
# message pays the static $B/o$ whether its links are busy or not.
#
# ## Try it
#
# 1. In the incast, how long does the first push take with sharing, and without? Which
#    would a server that updates key by key as pushes arrive prefer?
# 2. Make the uplink wider (`oversubscription=2` in the two-level runs). Which
#    all-reduce's time changes with sharing, and which without?
# 3. On the fat tree, at which $o$ does the bisection bound overtake the host bound? Why
#    is the edge bound never below the bisection bound here?
# 4. On the Collectives page, tab *Link load*, find the step of recursive doubling where
#    the upper level is hot, and the rows that stay cold.
#
# ## Exercise (graded): `contention_step` (15 points)
#
# Write `max_min_rates` and `flow_finish_s` in `dlsys/exercises/contention.py`: the
# max-min fair rates of flows on their routes by progressive filling, and the time each
# flow of one step arrives, its latency first and then its shares, solved again whenever a
# flow finishes. The graded tests hold your times to the emulator's replay, flow for flow,
# on a flat switch, a two-level tree and a fat tree. `dlsys exercises release hw`, then
# `dlsys grade hw --exercise contention_step`.
