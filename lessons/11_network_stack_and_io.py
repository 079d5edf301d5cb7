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
# # Lesson 11: The network stack and IO
#
# **Goal.** By the end you can (1) say where a message's alpha and beta come from, stage
# by stage, on TCP/IP and on RDMA, and why RDMA's are an order of magnitude smaller;
# (2) place the message libraries (MPI, NCCL, Gloo, Baidu's ring, gRPC and ZeroMQ
# parameter servers) as an algorithm choice on a transport; (3) measure alpha and beta on
# this machine; (4) predict when a data loader starves training, and how many loader
# workers and how deep a prefetch queue fix it.
#
# Run this file as `python lessons/11_network_stack_and_io.py` (figures go to
# `out/lessons/`), or open it with `jupytext --to notebook lessons/11_network_stack_and_io.py`.

# %%
import numpy as np

from dlsys.experiments import wallclock
from dlsys.learn import data
from dlsys.experiments import network_stack as ex
from dlsys.experiments import train
from dlsys.learn.loader import Loader
from dlsys.machine.netstack import LIBRARIES, breakdown
from dlsys.machine.storage import STORAGE_PRESETS, IOModel
from dlsys.train import TrainConfig
from dlsys.viz import network_stack as nviz
from dlsys.viz.lessons import show
from dlsys.units import format_bytes, format_seconds

NBYTES = 16 * 2**10

# %% [markdown]
# ## The life of one message
#
# Hockney's model charges a message of $n$ bytes $\alpha + n\beta$. The emulator splits it
# the way the hardware does: a CPU overhead $o_s(n)$ at the sender, the wire's latency $L$
# and serialization $n/B$, and an overhead $o_r(n)$ at the receiver,
#
# $$ t(n) = o_s(n) + L + \frac{n}{B} + o_r(n), \qquad o(n) = o + c\,\frac{n}{B_{copy}}, $$
#
# where $c$ is the number of kernel copies per side. On **TCP/IP** each side makes a system
# call, runs the protocol stack and the driver, takes an interrupt, wakes the receiving
# thread, and copies every byte between the user's buffer and the kernel's socket buffer
# ($c = 1$). On **RDMA** the sender posts a work request and rings the NIC's doorbell; the
# NIC reads the registered user memory and the remote NIC writes it into the receiver's;
# the receiver polls a completion queue ($c = 0$, no system call, no interrupt).
# `dlsys.machine.netstack.stages` lists the stages, each with its source; they add up to the preset.

# %%
for link in ex.MESSAGE_LINKS:
    rows = breakdown(link, NBYTES)
    total = sum(r["time_s"] for r in rows)
    print(f"{link}: one message of {format_bytes(NBYTES)} takes {format_seconds(total)}")
    for r in rows:
        print(f"  {r['side']:<8} {r['stage'].split(' (')[0]:<42} {format_seconds(r['time_s']):>9} {r['time_s'] / total:6.1%}")
show(nviz.message_animation(ex.message_path(NBYTES)), "11_one_message")

# %% [markdown]
# Large messages change the protocol: MPI and UCX send small messages **eagerly**
# (copied into a pre-registered bounce buffer, one copy per side) and large ones by
# **rendezvous** (a request-to-send / clear-to-send round trip, then zero copy), so the
# copy is paid only where it is cheaper than the handshake: `dlsys presets --stack
# rdma-edr --size 1MiB --protocol rendezvous` shows the stages.
#
# ## Message libraries: an algorithm on a transport
#
# MPI is a standard; MPICH picks the all-reduce algorithm by size (recursive doubling up to
# 2 KiB, Rabenseifner above). NCCL runs rings (and trees) over InfiniBand or NVLink; Gloo a
# chunked ring over TCP; Baidu's all-reduce a ring of MPI sends. The parameter servers of
# TensorFlow (gRPC) and MXNet (ZeroMQ, ps-lite) add their RPC stack: framing, and for gRPC
# a serialization copy of every tensor. Each preset folds those costs into its transport.

# %%
sizes = [2**k for k in range(0, 31)]
library_rows = ex.library_message_times(sizes)
measured = wallclock.stack_bench(sizes=(8, 1024, 64 * 2**10, 2**20), transports=("pipe", "tcp-nodelay"))
show(nviz.library_times(library_rows, measured["rows"]), "11_libraries")
for name, lib in LIBRARIES.items():
    link = lib.transport()
    print(f"{name:<10} alpha {format_seconds(link.alpha_s):>9}  1/beta {1e-9 / link.beta_s_per_byte:6.2f} GB/s  "
          f"({lib.link})")

# %% [markdown]
# The markers are this machine, measured just now: half the median round trip of a
# ping-pong through a pipe and a TCP loopback socket. Alpha and beta are fitted by least
# squares on relative errors, $\min_{\alpha,\beta} \sum_i \big((\alpha + n_i\beta - t_i)/t_i\big)^2$:

# %%
for transport, fit in measured["fits"].items():
    bandwidth = f"{fit['bandwidth_Bps'] / 1e9:.2f} GB/s" if fit["bandwidth_Bps"] else "no bandwidth term"
    print(f"{transport:<12} alpha {format_seconds(fit['alpha_s'])}, 1/beta {bandwidth}")

# %% [markdown]
# ## IO: a loader that keeps up, or not
#
# Before a step can compute, its batch must be read from storage and decoded. One loader
# worker needs, for a batch of $B$ samples of $s$ bytes,
#
# $$ t_w = B\left(\ell + \frac{s}{b} + d\right), \qquad t_{dev} = \frac{B s}{b}, $$
#
# with the storage's request latency $\ell$ and bandwidth $b$ and the decode time $d$ per
# sample; the device's $t_{dev}$ is shared by all workers. With $K$ workers and a prefetch
# queue of $D$ batches (PyTorch's DataLoader), at most $\min(K, D)$ batches load at once,
# and the steady-state step of a trainer computing $c$ per step is
#
# $$ T = \max\left(c,\ \frac{t_w}{\min(K, D)},\ t_{dev}\right) \quad (K \ge 1), \qquad T = t_w + c \quad (K = 0). $$
#
# The trainer waits $T - c$ per step for data. `dlsys.machine.storage` derives it, and the
# event-by-event timeline reproduces it exactly.

# %%
for name, s in STORAGE_PRESETS.items():
    print(f"{name:<9} latency {format_seconds(s.latency_s):>9}  bandwidth {s.bandwidth_Bps / 1e9:6.3g} GB/s")
for workers, prefetch in [(0, 2), (1, 2), (4, 1), (4, 4), (8, 8)]:
    record = ex.loader_timeline("hdd", workers, prefetch)
    print(f"hdd, K={workers}, D={prefetch}: step {format_seconds(record['steady_step_s'])} "
          f"(compute {format_seconds(record['compute_s'])}), waiting {record['io_wait_s'] / record['run_s']:.0%}")
show(nviz.loader_gantt(ex.loader_timeline("hdd", 4, 1)), "11_loader_capped_by_prefetch")

# %% [markdown]
# Four workers with a queue of one batch are no better than one: a worker more than $D$
# has no slot to fill. The loader in `dlsys.learn.loader` is real: $K$ processes fill a pool of
# $D + 1$ batch slots in shared memory, and the trainer reads each batch as a zero-copy
# view, in exactly the order of the plain single-process loader.

# %%
X, y = data.load_digits()
with Loader(X, y, 100, workers=2, prefetch=3, seed=4) as loader:
    same = all(np.array_equal(a, c) and np.array_equal(b, d)
               for (a, b), (c, d) in zip(loader.epoch(0), data.batches(X, y, 100, seed=4)))
    print(f"2 workers give the plain loader's {loader.steps_per_epoch} batches: {same}; "
          f"at most {loader.max_queued} batches were queued")

# %% [markdown]
# Training charges the model's waits in virtual time while the real loader delivers the
# batches: `dlsys train --storage nvme --loader-workers 2 --prefetch 4`.

# %%
config = TrainConfig(epochs=1, hidden=(256, 256))
sample_nbytes = X[0].nbytes
for workers, prefetch in [(0, 2), (2, 4)]:
    io = IOModel("nvme", workers, prefetch, config.batch_size, sample_nbytes, decode_s=10e-6)
    record = train("allreduce", config, 2, io=io)
    print(f"K={workers}, D={prefetch}: {format_seconds(record['virtual_time_s'])} in all, "
          f"{format_seconds(record['io_wait_s'])} waiting for data ({record['io_wait_fraction']:.0%})")

# %% [markdown]
# ## Try it
#
# 1. At which message size does TCP's copy stage cost more than its fixed stages? Change
#    `NBYTES` and compare with `dlsys presets --stack tcp-10gbe --size 1MiB`.
# 2. Run `dlsys bench stack` and compare your alpha and beta with the pipe and TCP rows
#    above; which transport has the smallest alpha, and why?
# 3. Put the data on `s3` in `ex.loader_timeline`: how many workers keep up? What changes
#    if samples are packed into large shards, so one request reads a whole batch?
#
# ## Exercise (graded): `alpha_beta_fit`
#
# Fit alpha and beta to measured ping-pong times by least squares and predict a ring
# all-reduce from them (`dlsys/machine/netstack.py`, introduced in lesson 02): `dlsys grade hw
# --exercise alpha_beta_fit`.
