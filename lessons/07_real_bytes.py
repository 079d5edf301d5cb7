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
# # Lesson 07: Real bytes: copies, memory bandwidth and zero-copy
#
# **Goal.** By the end you can (1) explain why an all-reduce between processes on one
# machine is limited by memory bandwidth, not by a network; (2) count the bytes a ring
# all-reduce reads and writes, with buffered (copied) and with lent (zero-copy) sends, and
# turn that count into an upper bound on its bus bandwidth; (3) say what MPI's eager and
# rendezvous protocols and NCCL's registered buffers buy, and what rule the program must
# keep in exchange.
#
# Run this file as `python lessons/07_real_bytes.py` (figures go to `out/lessons/`),
# or open it as a notebook with `jupytext --to notebook lessons/07_real_bytes.py`.

# %%
import time

import numpy as np

import dlsys
from dlsys import collectives
from dlsys.experiments.emulation import emulate
from dlsys.experiments.wallclock import allreduce_bench
from dlsys.comm import LEND_MIN_NBYTES
from dlsys.machine.datapath import memcpy_ratio_bound, ring_allreduce_traffic_bytes
from dlsys.collectives import closed_form
from dlsys.viz.datapath import emulation_scaling, ratio_bars, traffic_bars
from dlsys.viz.lessons import show
from dlsys.units import format_bytes, format_rate, format_seconds

# %% [markdown]
# ## No wire, only memory
#
# Until now every message cost $\alpha + n\beta$ on a modelled link, in virtual time. On
# the `processes` backend the bytes are real: a send writes the payload into shared memory
# (`/dev/shm`), the receiver maps it and reads it. Between two processes on one machine
# there is no network to wait for; every byte is read or written by a core, so the
# all-reduce is limited by **memory bandwidth**. The yardstick is `memcpy`: copying n
# bytes reads n and writes n, 2n bytes of memory traffic.
#
# Count what one rank of the ring all-reduce (lesson 03) reads and writes over a buffer of
# n bytes on p ranks. Every step handles one block of n/p bytes:
#
# | per step | reads + writes |
# | --- | --- |
# | reduce-scatter (p-1 steps): read my block, read the peer's, write the sum | 3 n/p |
# | all-gather (p-1 steps): read the peer's complete block, write it into my result | 2 n/p |
# | *copied* send (each of the 2(p-1) steps): copy my block into shared memory first | + 2 n/p |
#
# So, with k the passes per step pair (source: `dlsys/machine/datapath.py`, docs/performance.md),
#
# $$M(p, n) = k\,\frac{p-1}{p}\,n \quad\text{bytes per rank},\qquad
# k = 9 \text{ (copied sends)},\quad k = 5 \text{ (lent sends)},\qquad M_\text{memcpy} = 2n.$$

# %%
N = 64 * 2**20
print(f"{'p':>4} {'copied':>11} {'lent':>11}   (one memcpy of {format_bytes(N)}: {format_bytes(2 * N)})")
for p in (2, 4, 8, 64):
    copied, lent = (ring_allreduce_traffic_bytes(p, N, lent) for lent in (False, True))
    print(f"{p:>4} {format_bytes(copied):>11} {format_bytes(lent):>11}   = {copied / (2 * N):.2f} and "
          f"{lent / (2 * N):.2f} memcpys per rank")
show(traffic_bars(2, N), "07_traffic_p2")

# %% [markdown]
# The bandwidth term of lesson 03 told us each rank *sends* $2\frac{p-1}{p}n$ bytes. In
# memory the same all-reduce costs 2.5 (lent) or 4.5 (copied) times that, per rank, and
# all p ranks draw on the same memory at once.
#
# ## Buffered and lent sends
#
# A buffered send copies the payload out of the program's array, so the program may
# overwrite its array at once. That is MPI's **eager** protocol: small messages are copied
# into a buffer the receiver can reach, and the send completes immediately. For large
# messages MPI libraries switch to a **rendezvous** protocol: the sender announces the
# message, the receiver fetches the data straight from the sender's buffer (one copy, or
# none), and only then does the send complete. The MPI standard (section 3.7.2,
# nonblocking communication) makes this possible: after `MPI_Isend` the sender must not
# modify the send buffer until the request completes (`MPI_Wait`). NCCL does the same with
# *registered user buffers* (`ncclMemAlloc` + `ncclCommRegister`, NCCL >= 2.19): the
# collective then reads and writes the user's buffers with no internal copy.
#
# dlsys follows both: memory from `comm.alloc` is a shared segment of its own, and
# `comm.isend` of at least `LEND_MIN_NBYTES` of it is **lent**: the receiver's array *is*
# the sender's buffer (read-only), and the sender's request completes when the receiver
# drops that array. Below the threshold, and with `comm.send` or ordinary numpy memory,
# the payload is copied. Watch rank 0's `wait()`: the receiver holds the array 0.2 s.

# %%
def lend(comm, count, hold_s):
    """Rank 0 isends `count` float32 of comm.alloc memory; rank 1 holds what it got for hold_s."""
    if comm.rank == 0:
        buf = comm.alloc(count)
        buf[:] = 7
        start = time.perf_counter()
        comm.isend(buf, 1).wait()  # only now may rank 0 write buf again (MPI's rule)
        return time.perf_counter() - start
    got = comm.recv(source=0)
    writeable, total = got.flags.writeable, float(got.sum())
    time.sleep(hold_s)
    del got                        # this is what completes rank 0's request when lent
    return writeable, total


print(f"LEND_MIN_NBYTES = {format_bytes(LEND_MIN_NBYTES)}")
for count in (LEND_MIN_NBYTES // 4, LEND_MIN_NBYTES // 4 - 1):
    waited_s, (writeable, total) = dlsys.launch(lend, 2, "processes", args=(count, 0.2)).values
    kind = "lent  " if not writeable else "copied"
    print(f"{4 * count:>9,} bytes: {kind} (receiver's array writeable: {writeable}), sum {total:.0f}, "
          f"rank 0 waited {format_seconds(waited_s)}")

# %% [markdown]
# The ring all-reduce's fast path (`collectives.allreduce(comm, x, out=out)`, in
# `dlsys/collectives/ring_fast.py`; the ring you wrote in lesson 03 is its reading path) sends with `isend` and
# waits for each step's send before the next, because in the all-gather it overwrites
# blocks it lent. With `comm.alloc` buffers its reduce-scatter adds the peer's block read
# *straight out of the peer's input*, and its all-gather copies the peer's sum *straight
# out of the peer's result*: k = 5, the least traffic an all-reduce can do this way.
#
# ## From bytes to a bound
#
# nccl-tests reports an all-reduce of n bytes in time t as the *bus bandwidth*
# $\text{busbw} = \frac{n}{t}\cdot\frac{2(p-1)}{p}$ (its doc/PERFORMANCE.md), a number
# comparable across p with the hardware's link bandwidth. Here the hardware is memory: if
# one core streams BW bytes/s and all cores together $s \cdot BW$ (s is `SPEEDUP` below, for the two
# cores of this machine, docs/performance.md), the p ranks move $p\,M(p,n)$ bytes in at
# least $t = p\,M/(s\,BW)$, while a memcpy takes $2n/BW$. Divide:
#
# $$\frac{\text{busbw}}{\text{memcpy bandwidth}} \;\le\; \frac{4s}{k\,p}
# \qquad (\text{the cell below prints it for } p = 2).$$
#
# An upper bound: caches help a little, wake-ups and page faults cost a little. Now measure:
# real float32 all-reduces between two processes (`dlsys.experiments.wallclock.allreduce_bench`, median of
# 5 after 1 warm-up, the result checked every time), with plain numpy buffers (every send
# copied) and with `comm.alloc` buffers (lent), against numpy's memcpy in the same run.

# %%
P, SPEEDUP = 2, 1.35
records = []
for size in ("1MiB", "16MiB"):
    for buffers in ("plain", "alloc"):
        r = allreduce_bench(P, size, repeats=5, warmup=1, buffers=buffers)
        records.append(r)
        bound = memcpy_ratio_bound(P, buffers == "alloc", SPEEDUP)
        print(f"{format_bytes(r['nbytes']):>8} {buffers:<5}: {format_seconds(r['wall_time_s']):>9}, busbw "
              f"{format_rate(r['busbw_Bps'])}, memcpy {format_rate(r['memcpy_Bps'])}, "
              f"ratio {r['ratio_to_memcpy']:.2f} (bound {bound:.2f})")
show(ratio_bars(records, SPEEDUP), "07_ratio_to_memcpy")

# %% [markdown]
# At 16 MiB the lent sends come much closer to memcpy than the copied ones, and both should
# stay under their bounds (the numbers move with the machine's load: run it twice). At
# 1 MiB the two are about the same: each block is 512 KiB, below `LEND_MIN_NBYTES`, so even
# `comm.alloc` memory is copied, and every step also pays a process wake-up. The
# measured 64 MiB ratios of this machine, lent, copied, Open MPI and gloo, are in
# docs/performance.md (written by `dlsys bench allreduce`).
#
# ## Virtual time does not see any of this
#
# Lending is about the real bytes only. In the link model a sender never waits for its
# receiver, so a lent send's `wait()` is real-time synchronisation and charges nothing: the
# same ring, on the same link, takes the same virtual time and sends the same messages
# with either kind of buffer (the closed form $2(p-1)(\alpha + \frac{n}{p}\beta)$).

# %%
def ring(comm, count, buffers):
    x = comm.alloc(count) if buffers == "alloc" else np.zeros(count, np.float32)
    out = comm.alloc(count) if buffers == "alloc" else np.zeros(count, np.float32)
    x[:] = comm.rank + 1
    collectives.allreduce(comm, x, out=out)
    return float(out[0])


COUNT = 2**20  # 4 MiB: blocks of 2 MiB are lent
for buffers in ("plain", "alloc"):
    run = dlsys.launch(ring, P, "processes", link="tcp-10gbe", args=(COUNT, buffers))
    print(f"{buffers:<5}: sum {run.values[0]:.0f}, virtual time {format_seconds(run.virtual_time_s)} (closed form "
          f"{format_seconds(closed_form('allreduce', 'ring', P, 4 * COUNT, 'tcp-10gbe'))}), "
          f"{len(run.trace.messages)} messages, {format_bytes(run.trace.bytes_sent_per_rank()[0])} sent per rank")

# %% [markdown]
# The emulator of the earlier lessons moves almost no real bytes at all: a 512-rank ring
# over AlexNet's 244 MB gradient holds one float32 per block (`dlsys.comm.logical`) and
# charges the logical size. Its wall time here is set by the number of messages,
# $2p(p-1)$, not by bytes: that is why it scales to hundreds of ranks on two cores.

# %%
curve = [emulate("ring", ranks) for ranks in (8, 16, 32, 64, 128, 256)]
for e in curve:
    print(f"{e['ranks']:>4} ranks: {e['messages']:>7,} messages, {format_seconds(e['wall_time_s']):>9} here, "
          f"virtual {format_seconds(e['virtual_time_s'])} (closed form off by {e['relative_error']:.0e})")
show(emulation_scaling(curve), "07_emulation_scaling")

# %% [markdown]
# ## Try it
#
# 1. Predict busbw/memcpy at P = 4 with the bound (same s: still two cores), then run
#    `dlsys bench allreduce --ranks 4 --size 64MiB --buffers alloc` and `--buffers plain`.
#    Why does the measurement fall further below the bound than at P = 2? (Four processes
#    share two cores.)
# 2. Why are payloads under `LEND_MIN_NBYTES` (1 MiB) copied even from `comm.alloc`
#    memory? Compare the cost of copying 256 KiB at memory speed with one extra wake-up of
#    the sender (`dlsys bench latency`), and with an MPI library's eager limit.
# 3. In `lend` above, let rank 1 keep `got` and call `comm.recv(source=0)` for a second message
#    that rank 0 sends only after its `wait()`. What happens? Run it: dlsys reports a
#    `DeadlockError` naming the array ("rank 0 waits for rank 1 to drop the array rank 0
#    lent it"). Which MPI rule would the same program break?
# 4. Why must the ring wait for each step's `isend` before the next step? Which blocks
#    would a receiver read wrong if it did not?
# 5. With lent sends, which of the 5 passes per step pair could any all-reduce avoid?
#    Would an in-place all-reduce (`out=x`) move fewer bytes, or only use less memory?
#
# ## Exercise `ring_memory_traffic` (10 points)
#
# In `hw/machine/datapath.py` (after `dlsys exercises release hw/`): `ring_allreduce_traffic_bytes`
# (the bytes one rank reads plus writes, copied or lent) and `memcpy_ratio_bound` (the
# bound on busbw/memcpy it implies when p ranks share s times one core's memory
# bandwidth). Count the passes step by step; the graded tests hold your count to values
# worked out by hand, to the bytes the reference ring really sends (its trace), and the
# bound to nccl-tests' definition of busbw (`dlsys grade hw --exercise ring_memory_traffic`).
