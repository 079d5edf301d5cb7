"""The life of one message through a network stack: the stages behind alpha and beta.

A link preset (dlsys.machine.net) says what a message costs: o_s(n) at the sender, latency and
n / B on the wire, o_r(n) at the receiver, i.e. alpha + n beta. ``stages(link, n)`` says
where that time goes, stage by stage, so that a class can see why TCP costs tens of
microseconds and RDMA one:

TCP/IP (kernel sockets), per side: a system call, the TCP/IP stack and the driver,
an interrupt and the wake-up of the receiving thread, and a copy of every byte between the
user buffer and the kernel's socket buffer (``kernel_copies``), at memory-copy bandwidth.
RDMA (verbs, kernel bypass): post a work request and ring the NIC's doorbell; the NIC reads
the user's registered memory by DMA and the receiving NIC writes it into the receiver's;
the receiver polls its completion queue. No copy, no system call, no interrupt.

Each stage has a fixed part (per message) and a per-byte part, and its source. The fixed
parts of the CPU stages are typical published figures; what a preset's measured overhead
holds beyond them is one explicit "rest of the stack" stage, so the stages always add up
to the preset exactly (tests check alpha and beta).

Large messages: MPI and UCX switch from *eager* (copy into a pre-registered bounce buffer,
one copy per side) to *rendezvous* (a request-to-send / clear-to-send round trip, then
zero copy) above a threshold. ``stages(..., protocol="rendezvous")`` adds the handshake, and
``protocol="eager"`` the bounce-buffer copies on a zero-copy link.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from .net import LinkModel, get_link

SIDES = ("sender", "wire", "receiver")
RENDEZVOUS_THRESHOLD_BYTES = 8192  # UCX's UCX_RNDV_THRESH and MVAPICH2's MV2_IBA_EAGER_THRESHOLD are of this order
MEMCPY_BANDWIDTH_BPS = 10e9  # a bounce-buffer copy on one core (eager protocol)

# Typical costs of the CPU stages (seconds), with their sources.
SYSCALL_S = 0.1e-6  # Soares & Stumm 2010 (FlexSC, OSDI): a null system call ~100 ns, cache pollution aside
TCPIP_S = 1.5e-6  # Cai et al. 2021 (SIGCOMM, "Understanding host network stack overheads"): per-packet TCP/IP + driver
INTERRUPT_S = 1.0e-6  # the same study: IRQ + softirq processing per received burst
WAKEUP_S = 2.0e-6  # Li, Ding & Shen 2007 ("Quantifying the cost of context switch"): ~2-4 us to wake and switch
DOORBELL_S = 0.2e-6  # Kalia, Kaminsky & Andersen 2016 (USENIX ATC, "Design guidelines for high performance RDMA"): WQE + doorbell (MMIO)
POLL_S = 0.1e-6  # the same: polling a completion queue entry


class Stage(NamedTuple):
    name: str
    side: str  # "sender" (its CPU), "wire" (NICs, switches, cable), "receiver" (its CPU)
    fixed_s: float  # per message
    per_byte_s: float  # per byte
    source: str

    def time_s(self, nbytes: float) -> float:
        return self.fixed_s + nbytes * self.per_byte_s


def _cpu_stages(link: LinkModel, side: str, named: list[tuple[str, float, str]]) -> list[Stage]:
    """The named fixed costs of one side, the copies, and the rest of the preset's overhead."""
    out = [Stage(name, side, s, 0.0, source) for name, s, source in named]
    rest = link.overhead_s - sum(s for _, s, _ in named)
    if rest < 0:  # a preset cheaper than the typical figures: scale them down to fit it
        scale = link.overhead_s / sum(s for _, s, _ in named)
        out, rest = [st._replace(fixed_s=st.fixed_s * scale) for st in out], 0.0
    if rest > 0:
        out.append(
            Stage(
                "rest of the stack (the preset's measured overhead minus the stages above)",
                side,
                rest,
                0.0,
                link.source,
            )
        )
    if link.kernel_copies:
        verb = "user buffer -> kernel socket buffer" if side == "sender" else "kernel socket buffer -> user buffer"
        out.append(
            Stage(
                f"copy {verb}",
                side,
                0.0,
                link.kernel_copies / link.copy_bandwidth_Bps,
                "one memcpy of every byte per kernel copy, at the preset's copy bandwidth",
            )
        )
    return out


def stages(link, nbytes: float = 0, protocol: str = "basic") -> list[Stage]:
    """The stages of one message of ``nbytes`` on ``link`` (a preset name or LinkModel).

    ``protocol``: "basic" (the preset as the emulator charges it: alpha + n beta exactly),
    "eager" (plus a bounce-buffer copy per side on a zero-copy link) or "rendezvous" (plus a
    request-to-send / clear-to-send round trip of small messages before the data)."""
    link = get_link(link)
    if protocol not in ("basic", "eager", "rendezvous"):
        raise ValueError(f"protocol: expected basic, eager or rendezvous, got {protocol!r}")
    if link.kernel_copies:  # a kernel TCP/IP stack
        send = _cpu_stages(
            link,
            "sender",
            [
                ("system call (send)", SYSCALL_S, "Soares & Stumm 2010, FlexSC (OSDI)"),
                ("TCP/IP stack and driver", TCPIP_S, "Cai et al. 2021 (SIGCOMM)"),
            ],
        )
        recv = _cpu_stages(
            link,
            "receiver",
            [
                ("interrupt and softirq", INTERRUPT_S, "Cai et al. 2021 (SIGCOMM)"),
                ("wake-up of the receiving thread", WAKEUP_S, "Li, Ding & Shen 2007"),
                ("system call (recv)", SYSCALL_S, "Soares & Stumm 2010"),
            ],
        )
    else:  # RDMA verbs: kernel bypass, zero copy
        send = _cpu_stages(
            link, "sender", [("post work request, ring the doorbell", DOORBELL_S, "Kalia et al. 2016 (USENIX ATC)")]
        )
        recv = _cpu_stages(link, "receiver", [("poll the completion queue", POLL_S, "Kalia et al. 2016 (USENIX ATC)")])
    wire = [
        Stage("latency: NICs, switches, propagation", "wire", link.latency_s, 0.0, link.source),
        Stage("serialization at the link's bandwidth", "wire", 0.0, 1 / link.bandwidth_Bps, link.source),
    ]
    extra = []
    if protocol == "rendezvous":
        handshake = 2 * (link.latency_s + 2 * link.overhead_s)
        extra = [
            Stage(
                "rendezvous: request-to-send and clear-to-send (a round trip of small messages)",
                "wire",
                handshake,
                0.0,
                f"MPI/UCX rendezvous protocol; threshold about {RENDEZVOUS_THRESHOLD_BYTES} bytes",
            )
        ]
    elif protocol == "eager" and not link.kernel_copies:
        extra = [
            Stage(
                f"eager: copy into a registered bounce buffer ({side})",
                side,
                0.0,
                1 / MEMCPY_BANDWIDTH_BPS,
                "MPI/UCX eager protocol: one copy per side, at one core's memcpy bandwidth",
            )
            for side in ("sender", "receiver")
        ]
    return send + extra + wire + recv


def breakdown(link, nbytes: float, protocol: str = "basic") -> list[dict]:
    """One row per stage: name, side, seconds for this message, source."""
    return [
        {"stage": s.name, "side": s.side, "time_s": s.time_s(nbytes), "source": s.source}
        for s in stages(link, nbytes, protocol)
    ]


def protocol_for(nbytes: float) -> str:
    """What MPI/UCX pick by size: eager below the threshold, rendezvous at or above."""
    return "rendezvous" if nbytes >= RENDEZVOUS_THRESHOLD_BYTES else "eager"


# --- message libraries: an algorithm choice on a transport --------------------------------


class Library(NamedTuple):
    """A communication library as the emulator sees it: the all-reduce algorithm it picks by
    rank count and message size, the transport under it, and what its own layer adds per
    message and per byte on each side (an RPC stack's framing, serialization copies).

    ``algorithms`` is the selection rule as the library's source writes it: rank-count bands
    ``((below this many ranks, ((below this many bytes, algorithm), ...)), ...)``, each
    bound strict (Open MPI's ``communicator_size < 8``; MPICH's ``nbytes <= 2048`` is
    ``below 2049``), the last band and the last size of a band covering the rest.
    ``count_below_pof2``: the algorithm it takes when the buffer has fewer elements than the
    largest power of two <= p (MPICH's ``count < pof2``), whatever the size. ``rooted``:
    its MPI_Bcast, MPI_Reduce and MPI_Gather, ``(("broadcast", algorithm), ...)``, where the
    collectives registry has them (a parameter server built on MPI uses them)."""

    name: str
    link: str
    algorithms: tuple
    per_message_s: float
    per_byte_s: float
    source: str
    count_below_pof2: str | None = None
    rooted: tuple = ()

    def algorithm(self, nbytes: float, ranks: int = 2, itemsize: int = 4) -> str:
        """The all-reduce algorithm it runs for ``nbytes`` (of ``itemsize``-byte elements) on ``ranks``."""
        if self.count_below_pof2 and nbytes // itemsize < 1 << (ranks.bit_length() - 1):
            return self.count_below_pof2
        sizes = next(rule for below, rule in self.algorithms if ranks < below)
        return next(algo for below, algo in sizes if nbytes < below)

    def rooted_algorithm(self, collective: str) -> str:
        """Its algorithm for a rooted collective ("broadcast", "reduce", "gather")."""
        choices = dict(self.rooted)
        if collective not in choices:
            raise ValueError(
                f"library: {self.name} has no {collective} algorithm here; libraries with rooted "
                f"collectives: {', '.join(n for n, lib in LIBRARIES.items() if lib.rooted)}"
            )
        return choices[collective]

    def transport(self) -> LinkModel:
        """The link with the library's own costs folded into the per-side overhead and copies."""
        link = get_link(self.link)
        copies = link.kernel_copies / link.copy_bandwidth_Bps + self.per_byte_s  # per byte per side
        return replace(
            link,
            name=f"{self.name} on {link.name}",
            overhead_s=link.overhead_s + self.per_message_s,
            kernel_copies=1 if copies else 0,
            copy_bandwidth_Bps=1 / copies if copies else float("inf"),
            source=self.source,
        )


INF = float("inf")


def everywhere(algorithm: str) -> tuple:
    """A library that runs one algorithm at every rank count and size."""
    return ((INF, ((INF, algorithm),)),)


# Open MPI's tuned component, commutative operations (a sum of floats), v5.0.0
# ompi/mca/coll/tuned/coll_tuned_decision_fixed.c lines 120-215. Its algorithm numbers: 2 nonoverlapping
# (MPI_Reduce then MPI_Bcast: "reduce_broadcast"), 3 recursive doubling, 4 ring, 5 segmented ring, called
# with segsize 0, which coll_base_allreduce.c turns into the plain ring (COLL_BASE_COMPUTED_SEGCOUNT leaves
# segcount = count, then "count < size * segcount: use regular ring"), 6 Rabenseifner (redscat_allgather,
# distance 1 first).
RD, RING, TREES, RABENSEIFNER = "recursive_doubling", "ring", "reduce_broadcast", "rabenseifner_distance_doubling"
OPENMPI_ALLREDUCE = (
    (4, ((8, RING), (4096, RD), (8192, RING), (16384, RD), (65536, RING), (262144, RING), (INF, RABENSEIFNER))),
    (8, ((16, RING), (8192, RD), (INF, RABENSEIFNER))),
    (16, ((8192, RD), (INF, RABENSEIFNER))),
    (32, ((64, RING), (4096, RD), (INF, RABENSEIFNER))),
    (64, ((128, RING), (INF, RABENSEIFNER))),
    (128, ((262144, RD), (INF, RABENSEIFNER))),
    (256, ((131072, TREES), (262144, RD), (INF, RABENSEIFNER))),
    (512, ((4096, TREES), (INF, RABENSEIFNER))),
    (2048, ((2048, TREES), (16384, RD), (INF, RABENSEIFNER))),
    (4096, ((2048, TREES), (4096, RING), (16384, RD), (INF, RABENSEIFNER))),
    (INF, ((2048, TREES), (16384, RING), (32768, RD), (INF, RABENSEIFNER))),
)

LIBRARIES = {
    lib.name: lib
    for lib in [
        Library(
            "mpich",
            "rdma-edr",
            ((INF, ((2049, RD), (INF, RABENSEIFNER))),),
            0.0,
            0.0,
            "MPICH 3.2's MPI_Allreduce (src/mpi/coll/allreduce.c lines 398-400, MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE = "
            "2048 at line 17): recursive doubling up to 2048 bytes or for fewer elements than the largest power of "
            "two <= p, else Rabenseifner's reduce-scatter + all-gather, its halving from distance 1 (lines 462-573; "
            "Thakur, Rabenseifner & Gropp 2005); over InfiniBand verbs. MPICH 4's collective selection "
            "(maint/tuning/coll/mpir/generic.json) keeps the rule with 8 bytes for 2048",
            count_below_pof2=RD,
        ),
        Library(
            "openmpi",
            "rdma-edr",
            OPENMPI_ALLREDUCE,
            0.0,
            0.0,
            "Open MPI 5.0's tuned fixed decision for commutative operations "
            "(ompi/mca/coll/tuned/coll_tuned_decision_fixed.c lines 120-215, ompi_coll_tuned_allreduce_intra_dec_fixed): "
            "by communicator size and bytes, recursive doubling, ring, MPI_Reduce + MPI_Bcast or Rabenseifner "
            "(coll_base_allreduce.c); over InfiniBand verbs",
        ),
        Library(
            "taihulight-mpi",
            "sw26010",
            everywhere(RD),
            0.0,
            0.0,
            "The TaihuLight MPI the Caffe case study measured (SPEC section 11): the paper explains the ring's lead "
            "with 'the traditional MPI_Allreduce algorithm was designed for low-latency networks', i.e. an "
            "algorithm that takes the fewest steps and sends the whole message at each: recursive doubling for "
            "the all-reduce, binomial trees for MPI_Bcast, MPI_Reduce and MPI_Gather (Thakur, Rabenseifner & "
            "Gropp 2005, the short-message algorithms), at every size; over the sw26010 link",
            rooted=(("broadcast", "binomial"), ("reduce", "binomial"), ("gather", "binomial")),
        ),
        Library(
            "nccl-ring",
            "rdma-edr",
            everywhere(RING),
            0.0,
            0.0,
            "NCCL's ring all-reduce (NVIDIA NCCL documentation, 'Collective operations'; the bandwidth-optimal "
            "ring of Patarasuk & Yuan 2009), over InfiniBand",
        ),
        Library(
            "nccl-tree",
            "rdma-edr",
            everywhere(TREES),
            0.0,
            0.0,
            "NCCL 2.4's tree all-reduce for latency-bound sizes (Sanders et al. 2009 double binary trees; here a "
            "binomial reduce + broadcast), over InfiniBand",
        ),
        Library(
            "gloo",
            "tcp-10gbe",
            everywhere(RING),
            0.0,
            0.0,
            "Gloo's allreduce_ring_chunked (facebookincubator/gloo, gloo/allreduce_ring_chunked.h) over TCP",
        ),
        Library(
            "baidu",
            "tcp-10gbe",
            everywhere(RING),
            0.0,
            0.0,
            "Baidu's ring all-reduce (Gibiansky 2017, baidu-research/baidu-allreduce), MPI send/recv over TCP",
        ),
        Library(
            "grpc-ps",
            "tcp-10gbe",
            everywhere("ps"),
            20e-6,
            1 / 1e9,
            "a gRPC parameter server (TensorFlow 1.x): HTTP/2 framing and a protobuf serialization copy of every "
            "tensor on each side; per-RPC overhead of tens of microseconds (gRPC performance dashboard, "
            "grpc.io/docs/guides/benchmarking) and serialization at about 1 GB/s per core: teaching defaults",
        ),
        Library(
            "zeromq-ps",
            "tcp-10gbe",
            everywhere("ps"),
            5e-6,
            0.0,
            "a ZeroMQ parameter server (ps-lite's van): zero-copy message frames, a few microseconds of "
            "per-message overhead on top of TCP (zeromq.org performance tests): teaching default",
        ),
    ]
}
MPI_LIBRARIES = ("mpich", "openmpi", "taihulight-mpi")  # the MPI_Allreduce presets a case study compares


def fit_alpha_beta(nbytes, times_s) -> tuple[float, float]:
    """Hockney's model t(n) = alpha + n beta fitted to measured one-way times by least
    squares on relative errors (each row divided by its t, so 8 bytes and 64 MiB weigh the
    same: a plain fit would let the large sizes decide alpha too). Returns (alpha_s, beta_s_per_byte)."""
    n, t = np.asarray(nbytes, float), np.asarray(times_s, float)
    if n.shape != t.shape or n.size < 2 or len(set(n.tolist())) < 2:
        raise ValueError("nbytes, times_s: need matching lists with at least two different sizes")
    if not (np.all(t > 0) and np.all(n >= 0)):
        raise ValueError("times_s must be > 0 and nbytes >= 0")
    # BEGIN SOLUTION alpha_beta_fit
    A = np.stack([np.ones_like(n), n], axis=1) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    return float(alpha), float(beta)
    # END SOLUTION


def predict_ring_allreduce_s(p: int, nbytes: float, alpha_s: float, beta_s_per_byte: float) -> float:
    """A ring all-reduce of nbytes on p ranks from a fitted alpha and beta:
    2 (p - 1) (alpha + n / p beta) (Patarasuk & Yuan 2009; 0 on one rank)."""
    # BEGIN SOLUTION alpha_beta_fit
    return 2 * (p - 1) * (alpha_s + nbytes / p * beta_s_per_byte)
    # END SOLUTION
