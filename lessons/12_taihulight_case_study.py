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
# # Lesson 12: Case study, Caffe on the Sunway TaihuLight
#
# **Goal.** By the end you can (1) describe the machine the paper ran on and what its
# network costs, pair by pair; (2) explain, with the alpha-beta model, why the paper's
# decentralized design beat its parameter server as the nodes grew; (3) say what the
# contiguous gradient buffer saves per iteration; (4) compare a ring with the all-reduce an
# MPI library picks; and (5) name where this emulator's assumptions differ from the machine.
#
# Run this file as `python lessons/12_taihulight_case_study.py` (figures go to
# `out/lessons/`), or open it with `jupytext --to notebook lessons/12_taihulight_case_study.py`.
# The same experiments are `dlsys casestudy taihulight` and the app's "Case study: TaihuLight" page.

# %%
from dlsys import collectives
from dlsys.experiments import simulate_collective
from dlsys.experiments import taihulight as study
from dlsys.experiments import taihulight_bounds as bounds
from dlsys.machine.fabric import TAIHULIGHT_UPLINK_Bps
from dlsys.machine.netstack import MPI_LIBRARIES
from dlsys.machine.net import get_node
from dlsys.machine.topology import taihulight, two_level
from dlsys.viz import taihulight as tviz
from dlsys.viz.lessons import show
from dlsys.units import format_rate

NODES = (2, 4, 8, 16, 32)  # the app and the CLI go to 512; the lesson stays quick
MEMORY_BYTES = 2**24  # real buffers of all ranks together: each real element stands for many (lesson 07)

# %% [markdown]
# ## The machine
#
# The Sunway TaihuLight (Fu et al. 2016) has 40,960 SW26010 nodes. A node is one chip of
# 4 core groups, each a management core and 64 compute cores; 256 nodes form a
# **supernode**, and a central network joins the 160 supernodes. Every node injects 14 GB/s,
# but the bisection is 70 TB/s: when half the machine sends to the other half, it offers
#
# $$\frac{40960}{2} \times 14\ \text{GB/s} = 287\ \text{TB/s} \;\text{ to }\; 70\ \text{TB/s}, $$
#
# so the level above the supernodes is **oversubscribed about 4:1**. `dlsys.machine.topology`
# turns this into a link per pair of nodes: the full link inside a supernode, a quarter of
# it across. The virtual clock charges a send by its destination's link and an arrival by
# its source's.

# %%
machine = taihulight()
node = get_node("sw26010")
print(f"{machine.max_nodes:,} nodes, supernodes of {machine.supernode_size}; inside: "
      f"{machine.link.bandwidth_Bps / 1e9:g} GB/s, across: {machine.uplink.bandwidth_Bps / 1e9:.2f} GB/s per node "
      f"({machine.link.bandwidth_Bps / machine.uplink.bandwidth_Bps:.2f}:1)")
print(f"node: {node.peak_flops / 1e12:g} TFLOP/s peak, {node.efficiency:.0%} sustained on DNN layers, "
      f"{node.memory_bandwidth_Bps / 1e9:g} GB/s memory")
show(tviz.machine(machine), "12_machine")

# %% [markdown]
# ## Two designs, one average
#
# Caffe's model is a `Net` of `Layer`s whose weights and gradients live in `Blob`s
# (`data` and `diff`); a `Solver` updates the net (`dlsys.train.caffe`). The paper's two
# synchronous designs, as rank code:
#
# * **parameter server**: rank 0 (the server, and a worker too) sends $W$ to every worker;
#   in backward, as soon as layer $j$'s gradient ($n_j$ bytes) is computed every worker
#   sends it to rank 0, which averages and updates. Everything goes through rank 0's link:
#   $(p-1)\,N\beta$ out for $W$ ($N = \sum_j n_j$) and $(p-1)\,n_j\beta$ in per layer.
#   Backward hides what it can: with worker $k$'s push of layer $j$ departing at $D_{kj}$,
#   rank 0 takes the pushes in order,
#   $$A_{kj} = \max\left(D_{kj} + L + n_j\beta,\; A_{\text{prev}} + n_j\beta\right),$$
#   so once $(p-1)\,n_j\beta$ exceeds the backward it overlaps, the server's link sets the
#   pace and the time grows linearly with $p$ (`taihulight_forms.ps_rank0_s` is this recurrence; it
#   equals the emulation).
# * **decentralized**: every rank computes everything, then one ring all-reduce of the
#   $n = \sum_j n_j$ bytes of gradients: $T = 2(p-1)\,(\alpha + \tfrac{n}{p}\beta)$, which
#   tends to $2n\beta$.
#
# Both compute the same average, so they end with the same weights, bit for bit.

# %%
rows = [r for model in study.MODELS for design in ("ps", "ring") for r in study.sweep(model, design, NODES)]
show(tviz.design_scaling(rows), "12_designs")
for model in study.MODELS:
    ps, ring = ([r for r in rows if r["model"] == model and r["design"] == d] for d in ("ps", "ring"))
    print(f"{model:<10} compute {ps[0]['compute_s'] * 1e3:6.0f} ms; communication at {NODES[0]} -> {NODES[-1]} nodes: "
          f"PS {ps[0]['communication_s'] * 1e3:7.1f} -> {ps[-1]['communication_s'] * 1e3:8.1f} ms, "
          f"ring {ring[0]['communication_s'] * 1e3:5.1f} -> {ring[-1]['communication_s'] * 1e3:5.1f} ms "
          f"(closed forms {ps[-1]['closed_communication_s'] * 1e3:.1f} and {ring[-1]['closed_communication_s'] * 1e3:.1f} ms)")
same = study.run_design("alexnet", "ps", 4)["weights"] == study.run_design("alexnet", "ring", 4)["weights"]
print(f"identical weights after one iteration on 4 nodes: {bool(same.all())}")

# %% [markdown]
# GoogLeNet and ResNet-50 do many FLOPs per byte of gradient, so backward hides much of
# the PS's traffic on a few nodes; AlexNet's fully connected layers hold almost all of its
# bytes and little of its compute, and nothing hides them.
#
# ## What the contiguous buffer saves
#
# With one blob per layer, the all-reduce needs the gradients in one buffer first: a
# packing copy, then an unpacking copy of the result, each reading and writing $n$ bytes
# at the memory bandwidth $M$:
#
# $$T_{\text{copies}} = 2 \times \frac{2n}{M}.$$

# %%
for model in study.MODELS:
    scattered = study.run_design(model, "ring", 8, contiguous=False)
    contiguous = study.run_design(model, "ring", 8, contiguous=True)
    saved = scattered["iteration_s"] - contiguous["iteration_s"]
    print(f"{model:<10} {scattered['gradient_nbytes'] / 1e6:6.1f} MB of gradients: copies "
          f"{scattered['pack_s'] * 1e3:5.2f} ms, iteration {scattered['iteration_s'] * 1e3:7.1f} -> "
          f"{contiguous['iteration_s'] * 1e3:7.1f} ms ({saved / scattered['iteration_s']:.1%} saved)")

# %% [markdown]
# ## The ring against MPI_Allreduce
#
# The paper compared its ring with the library's `MPI_Allreduce` on a 60.97 MB message and
# explained its 2.3-4.1x lead at 512 nodes: "the traditional MPI_Allreduce algorithm was
# designed for low-latency networks". Which algorithm a library runs is a rule in its source,
# by rank count and size; `dlsys.machine.netstack.LIBRARIES` holds three:
#
# * `taihulight-mpi`, the paper's: designed for low latency means the fewest steps, each
#   with the whole message: recursive doubling at every size (and binomial trees for
#   `MPI_Bcast`, `MPI_Reduce`, `MPI_Gather`);
# * `mpich` (MPICH 3.2, `src/mpi/coll/allreduce.c`): recursive doubling up to 2048 bytes,
#   Rabenseifner's reduce-scatter + all-gather above, halving from distance 1;
# * `openmpi` (Open MPI 5.0's tuned fixed decision): eleven rank bands of size thresholds.
#
# $$T_{\text{recursive doubling}} = \lg p\,(\alpha + n\beta) \qquad
# T_{\text{Rabenseifner}} = 2\lg p\,\alpha + 2\tfrac{p-1}{p}\,n\beta
# \qquad T_{\text{ring}} = 2(p-1)\,\alpha + 2\tfrac{p-1}{p}\,n\beta .$$

# %%
for library in MPI_LIBRARIES:
    versus = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), NODES, library=library)
    if library == study.LIBRARY:
        show(tviz.ring_vs_mpi(versus, f"Ring all-reduce vs MPI_Allreduce ({library})"), "12_ring_vs_mpi")
    print(library)
    for ring, mpi in zip(versus[::2], versus[1::2]):
        print(f"{ring['nodes']:>6} nodes: ring {ring['virtual_time_s'] * 1e3:6.2f} ms, MPI_Allreduce "
              f"({mpi['algorithm']}) {mpi['virtual_time_s'] * 1e3:6.2f} ms: "
              f"{mpi['virtual_time_s'] / ring['virtual_time_s']:.2f}x the ring")

# %% [markdown]
# Against the paper's MPI the ring pulls ahead as $p$ grows: recursive doubling sends the
# whole message $\lg p$ times, the ring about twice. Against Rabenseifner (MPICH, Open MPI)
# the ring never wins in this model: both move the same bytes and Rabenseifner pays fewer
# latencies. So the paper's result says which algorithm its library picked, as its own
# explanation does. The CLI (`--versus-mpi --library`) goes to 512 nodes, where the ring
# crosses the supernodes: next section.
#
# ## Links that messages share: the 512-node ring
#
# The old per-pair rule (static shares, `sharing=False`, kept for this contrast) gives every
# message across supernodes a static quarter of its link, as if every node were sending
# across at once. By default, once the nodes span supernodes, a replay of the run lets
# messages that cross a link at the same time share it max-min fairly (`dlsys.comm.replay`):
# a supernode's uplink carries the ring's one crossing message a step at a node link's
# full bandwidth, while recursive doubling's last step sends all 256 nodes of a supernode
# across at once, the uplink over 256 each, exactly the static share (the cell prints
# both). The closed forms say it
# before the emulation does (`study.recursive_doubling_form_s`, `study.mpi_ratio_bounds`).

# %%
print(f"uplink {format_rate(TAIHULIGHT_UPLINK_Bps)}, node link {format_rate(machine.link.bandwidth_Bps)}; "
      f"the uplink over {machine.supernode_size}: {format_rate(TAIHULIGHT_UPLINK_Bps / machine.supernode_size)}, "
      f"the static share {format_rate(machine.uplink.bandwidth_Bps)}")
for sharing in (False, None):  # None: the default, links shared across supernodes
    ring, mpi = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (512,), sharing=sharing)
    print(f"512 nodes, {'links shared ' if ring['sharing'] else 'static shares'}: ring {ring['virtual_time_s'] * 1e3:6.2f} "
          f"ms, recursive doubling {mpi['virtual_time_s'] * 1e3:6.2f} ms: "
          f"{mpi['virtual_time_s'] / ring['virtual_time_s']:.2f}x")
ring_32 = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (32,))[0]
print(f"the shared ring at 512 over 32 nodes: {ring['virtual_time_s'] / ring_32['virtual_time_s']:.2f}x (nearly flat)")
bound = study.mpi_ratio_bounds()
print(f"MPI / ring at 512 nodes grows with the message from {bound['latency_ratio']:.3g}x to "
      f"{bound['bandwidth_ratio']:.3g}x; the paper's " + " and ".join(f"{r:g}x" for r in study.PAPER_MPI_RATIOS)
      + " are messages of " + " and ".join(f"{bound['nbytes_for_ratio'][r] / 1e6:.1f} MB"
                                          for r in study.PAPER_MPI_RATIOS))

# %% [markdown]
# So with shared links the ring is nearly flat from 32 to 512 nodes, as the paper saw, and
# the paper's MPI falls further behind than the paper measured for this message: the model
# puts the paper's range at smaller messages (the numbers above). `dlsys casestudy
# taihulight --versus-mpi` prints the whole sweep (`--static-shares`: the old rule); the app's "Link load" tab draws
# which links are busy, and when.
#
# ## The parameter server on MPI, and which published ratios a model can reach
#
# The paper's PS sends $W$ and takes every gradient through rank 0's link. Built on MPI it
# could instead `MPI_Bcast` $W$ and `MPI_Reduce` (or `MPI_Gather`) each layer to rank 0 by
# the library's binomial trees (`--design ps-reduce`, `ps-gather`;
# `dlsys.train.caffe.ps_mpi_iteration`). A reduce adds on the way, so rank 0 takes $\lg p$
# messages per layer instead of $p-1$. With compute free, every design's time lies in a
# bracket of simple sums (`bounds.ratio_bounds`, derived in its docstring): for the PS on
# `MPI_Reduce`, $2\alpha + 2\lg p\,N\beta \le T \le \lg p\,((L+1)\alpha + 2N\beta)$, so
# against the ring it is about $\lg p$ times slower, never more than $\lg p \cdot p/(p-1)$
# on any link; a PS whose server takes every gradient is at least about $p/2$ times slower.

# %%
rows = bounds.published_figures()
for v in bounds.verdicts(rows):
    print(f"{v['figure']}: {v['verdict']}")
for r in rows:
    if r["figure"] == "alexnet: 10x at 256 nodes":
        print(f"  {r['design']:<10} {r['lo']:.3g}x to {r['hi']:.3g}x on the sw26010 link, "
              f"{r['any_lo']:.3g}x to {r['any_hi']:.3g}x on any link")
#
# ## Topology: when the nodes leave the supernode
#
# Beyond 256 nodes some messages cross the thin upper level. A ring's every step waits for
# its slowest hop, so one crossing pair slows the whole ring; a **hierarchical** all-reduce
# reduces inside each supernode, all-reduces across the $k$ leaders and broadcasts inside,
#
# $$T_{\text{hier}} = 2\lg s\,(\alpha + n\beta) + 2(k-1)\,(\alpha_{up} + \tfrac{n}{k}\beta_{up}).$$
#
# only the leaders cross, but the binomial trees inside move the whole buffer $\lg s$ times
# each way. A small tree of 16-node supernodes at 64 nodes, a short and a long message:

# %%
tree = two_level("sw26010", supernode_size=16, oversubscription=4.1)
for nbytes in (2**16, 2**24):
    for algorithm in ("ring", "rabenseifner", "hierarchical"):
        r = simulate_collective("allreduce", algorithm, 64, nbytes, topology=tree, record=False,
                                max_memory_bytes=MEMORY_BYTES)
        form = "" if r["closed_form_s"] is None else f" (closed form {r['closed_form_s'] * 1e3:.3f} ms)"
        print(f"{nbytes / 2**20:6.3g} MiB {algorithm:<13} {r['virtual_time_s'] * 1e3:7.3f} ms{form}")
    flat_ring_s = collectives.closed_form("allreduce", "ring", 64, nbytes, "sw26010")
    print(f"{nbytes / 2**20:6.3g} MiB ring on a flat network: {flat_ring_s * 1e3:.3f} ms")

# %% [markdown]
# For the short message the hierarchical all-reduce beats the ring: $2\lg s + 2(k-1)$
# latencies instead of $2(p-1)$. For the long one its trees' whole-buffer hops cost more
# than the thin upper level saves; that is why MPICH's and NCCL's hierarchical collectives
# reduce-scatter inside a node instead of reducing to one leader.
#
# ## Where the emulator differs from the machine
#
# * **Shared links replay eager sends.** By default the replay shares links max-min across
#   supernodes (static shares, `sharing=False`, give every crossing message a quarter of the
#   link), but its sends are eager: a rank's successive sends share its egress, where MPI's
#   blocking sends take turns (docs/taihulight.md).
# * **Sends never wait for the receiver.** MPI's rendezvous protocol makes a large send wait
#   until the receiver posts its receive; here the PS workers run ahead of rank 0.
# * **Compute is a roofline**: 30 % of the peak for every layer and no OS noise; every node
#   is identical, so no straggler shows up.
# * **Gradients are stand-ins**: small integers, so both designs' sums are exact; only the
#   sizes are the model's (rounded to whole real elements, less than half of one per layer).
#
# ## Try it
#
# 1. `dlsys casestudy taihulight --model alexnet --design ps --nodes 2,4,...,512`: at how
#    many nodes does the PS's communication exceed its compute?
# 2. Compare `--contiguous` and `--scattered` for ResNet-50 and AlexNet: which gains more
#    per iteration, and why (hint: compute per byte of gradient)?
# 3. Rerun the topology cell with `oversubscription=1`: which algorithm gains most?
# 4. `dlsys casestudy taihulight --model resnet50 --design ps-reduce --nodes 2,4,...,64` beside
#    `--design ps`: how much of the PS's cost was its server's link, and how much its design?
#
# ## Exercise
#
# When the server's link is the bottleneck, the PS recurrence collapses to a closed form.
# Assume the compute hides nothing: write rank 0's time as $W$'s $p-1$ sends plus
# $(p-1)\sum_j n_j\beta$ of pushes plus the first worker's wait, and find the node count
# above which it is within 5 % of `taihulight_forms.ps_rank0_s` for AlexNet. Then do the same for
# ResNet-50: why does it take many more nodes?
