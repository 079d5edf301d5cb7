"""Link and node models and their presets.

Pure: no I/O, no communication. Everything that *runs* (dlsys.comm) charges virtual time
through these models; the closed forms of the collectives, written in alpha, beta and
gamma below, are in the collectives' registry (dlsys.collectives.closed_form).

The alpha-beta(-gamma) model (Hockney; Thakur, Rabenseifner & Gropp 2005): a message of n
bytes costs ``alpha + n * beta`` and reducing n bytes costs ``n * gamma``. Our links split
alpha and beta into what a real stack pays:

    alpha_eff = latency_s + 2 * overhead_s                      (CPU overhead at both ends)
    beta_eff  = 1 / bandwidth_Bps + 2 * kernel_copies / copy_bandwidth_Bps

TCP-like links copy every byte into the kernel at the sender and out of it at the receiver
(``kernel_copies=1`` per side) and pay tens of microseconds of per-message overhead;
RDMA-like links copy nothing (zero copy, kernel bypass) and pay about a microsecond.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

__all__ = [
    "LinkModel",
    "NodeModel",
    "LINK_PRESETS",
    "NODE_PRESETS",
    "get_link",
    "get_node",
    "busbw_factor",
    "parse_size",
    "parse_bandwidth",
    "SIZE_UNITS",
    "BANDWIDTH_UNITS",
]


@dataclass(frozen=True)
class LinkModel:
    """A point-to-point link: latency, bandwidth, per-message CPU overhead, kernel copies.

    A message of ``nbytes`` costs the sender ``send_overhead_s(nbytes)`` of CPU, occupies the
    sender's egress and the receiver's ingress for ``nbytes / bandwidth_Bps``, arrives
    ``latency_s`` after the last byte left, and costs the receiver ``recv_overhead_s``.
    """

    name: str
    latency_s: float
    bandwidth_Bps: float
    overhead_s: float = 0.0
    kernel_copies: int = 0
    copy_bandwidth_Bps: float = math.inf
    source: str = ""

    def __post_init__(self):
        for field, value in (("latency_s", self.latency_s), ("overhead_s", self.overhead_s)):
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
        for field, value in (("bandwidth_Bps", self.bandwidth_Bps), ("copy_bandwidth_Bps", self.copy_bandwidth_Bps)):
            if not value > 0:
                raise ValueError(f"{field} must be > 0 (math.inf allowed), got {value!r}")
        if self.kernel_copies not in (0, 1, 2):
            raise ValueError(f"kernel_copies must be 0, 1 or 2, got {self.kernel_copies!r}")

    def wire_s(self, nbytes: float) -> float:
        """Serialization time of nbytes on the wire (n / B)."""
        return nbytes / self.bandwidth_Bps

    def send_overhead_s(self, nbytes: float) -> float:
        """CPU time the sender pays: per-message overhead plus copies into the kernel."""
        return self.overhead_s + self.kernel_copies * nbytes / self.copy_bandwidth_Bps

    recv_overhead_s = send_overhead_s  # symmetric: copies out of the kernel at the receiver

    @property
    def alpha_s(self) -> float:
        """Effective per-message latency alpha of the alpha-beta model."""
        return self.latency_s + 2 * self.overhead_s

    @property
    def beta_s_per_byte(self) -> float:
        """Effective per-byte cost beta (wire time plus kernel copies at both ends)."""
        return 1 / self.bandwidth_Bps + 2 * self.kernel_copies / self.copy_bandwidth_Bps

    def message_s(self, nbytes: float) -> float:
        """Time of one message between two idle ranks: alpha + n * beta."""
        return self.alpha_s + nbytes * self.beta_s_per_byte


@dataclass(frozen=True)
class NodeModel:
    """A compute node: peak FLOP/s, the sustained fraction of it, memory bandwidth.

    ``compute(flops=f)`` takes ``f / (peak_flops * efficiency) * slowdown`` seconds;
    ``slowdown`` makes a straggler (k times slower). Reducing n bytes (read two operands,
    write one) costs ``n * gamma_s_per_byte`` with ``gamma = 3 / memory_bandwidth_Bps``.
    """

    name: str
    peak_flops: float
    efficiency: float
    memory_bandwidth_Bps: float
    slowdown: float = 1.0
    source: str = ""

    def __post_init__(self):
        if not (self.peak_flops > 0 and self.memory_bandwidth_Bps > 0):
            raise ValueError("peak_flops and memory_bandwidth_Bps must be > 0")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency!r}")
        if not (self.slowdown >= 1 and math.isfinite(self.slowdown)):
            raise ValueError(f"slowdown must be a finite number >= 1, got {self.slowdown!r}")

    @property
    def sustained_flops(self) -> float:
        return self.peak_flops * self.efficiency / self.slowdown

    @property
    def gamma_s_per_byte(self) -> float:
        return 3 * self.slowdown / self.memory_bandwidth_Bps

    def compute_s(self, flops: float) -> float:
        return flops / self.sustained_flops

    def kernel_s(self, flops: float, nbytes: float = 0) -> float:
        """The roofline (Williams et al. 2009): a kernel of ``flops`` operations moving
        ``nbytes`` through memory is bound by whichever takes longer."""
        return max(self.compute_s(flops), nbytes * self.slowdown / self.memory_bandwidth_Bps)

    def slowed(self, factor: float) -> "NodeModel":
        """The same node, ``factor`` times slower (a straggler)."""
        return replace(self, slowdown=self.slowdown * factor, name=f"{self.name}/x{factor:g}")


_TCP = "Kernel TCP: one copy into and one out of the kernel per side; per-message cost from netperf-style ping-pong measurements of commodity NICs (tens of microseconds)."
_IB = "InfiniBand verbs: zero copy, kernel bypass; latency and data rate from the InfiniBand Trade Association roadmap and vendor OSU micro-benchmark reports."

LINK_PRESETS: dict[str, LinkModel] = {
    l.name: l
    for l in [
        LinkModel("tcp-1gbe", 50e-6, 125e6, 10e-6, 1, 5e9, "1 Gb/s Ethernet = 125 MB/s. " + _TCP),
        LinkModel("tcp-10gbe", 25e-6, 1.25e9, 8e-6, 1, 5e9, "10 Gb/s Ethernet = 1.25 GB/s. " + _TCP),
        LinkModel("tcp-25gbe", 15e-6, 3.125e9, 6e-6, 1, 5e9, "25 Gb/s Ethernet = 3.125 GB/s. " + _TCP),
        LinkModel(
            "rdma-fdr",
            0.7e-6,
            6.8e9,
            0.3e-6,
            0,
            source="InfiniBand FDR 4x, 54.5 Gb/s data rate = 6.8 GB/s, about 0.7 us MPI latency. " + _IB,
        ),
        LinkModel(
            "rdma-edr",
            0.6e-6,
            12.5e9,
            0.3e-6,
            0,
            source="InfiniBand EDR 4x, 100 Gb/s = 12.5 GB/s, about 0.6 us. " + _IB,
        ),
        LinkModel(
            "rdma-hdr", 0.6e-6, 25e9, 0.3e-6, 0, source="InfiniBand HDR 4x, 200 Gb/s = 25 GB/s, about 0.6 us. " + _IB
        ),
        LinkModel(
            "nvlink",
            2e-6,
            150e9,
            0.5e-6,
            0,
            source="NVLink 2.0 on V100 (DGX-1): 6 links x 25 GB/s per direction = 150 GB/s; GPU peer copy latency about 2 us (NVIDIA Tesla V100 whitepaper, 2017).",
        ),
        LinkModel(
            "pcie3",
            1.5e-6,
            12e9,
            0.5e-6,
            0,
            source="PCIe 3.0 x16: 15.75 GB/s raw, about 12 GB/s achieved by cudaMemcpy; about 1.5 us latency (PCI-SIG spec; NVIDIA bandwidthTest).",
        ),
        LinkModel(
            "sw26010",
            1e-6,
            14e9,
            0.5e-6,
            0,
            source="Sunway TaihuLight network: about 14-16 GB/s per node, about 1 us MPI latency (Fu et al., 'The Sunway TaihuLight supercomputer: system and applications', Sci. China Inf. Sci. 2016; Dongarra, 'Report on the Sunway TaihuLight System', 2016).",
        ),
    ]
}

NODE_PRESETS: dict[str, NodeModel] = {
    n.name: n
    for n in [
        NodeModel(
            "sw26010",
            3.06e12,
            0.3,
            136e9,
            source="SW26010, the node of the Sunway TaihuLight: 4 core groups x (1 MPE + 64 CPEs) = 260 cores, 3.06 TFLOP/s peak, 32 GB at about 136 GB/s (Fu et al. 2016). Sustained 30% is a teaching default for DNN layers (swDNN, Fang et al. IPDPS 2017, reports 30-50%).",
        ),
        NodeModel(
            "k40m",
            4.29e12,
            0.5,
            288e9,
            source="NVIDIA Tesla K40m datasheet: 4.29 TFLOP/s FP32 (boost), 288 GB/s GDDR5. Sustained 50%: teaching default.",
        ),
        NodeModel(
            "p100",
            10.6e12,
            0.5,
            732e9,
            source="NVIDIA Tesla P100 SXM2 datasheet: 10.6 TFLOP/s FP32, 732 GB/s HBM2. Sustained 50%: teaching default.",
        ),
        NodeModel(
            "v100",
            15.7e12,
            0.5,
            900e9,
            source="NVIDIA Tesla V100 SXM2 datasheet: 15.7 TFLOP/s FP32, 900 GB/s HBM2. Sustained 50%: teaching default.",
        ),
        NodeModel(
            "a100",
            19.5e12,
            0.5,
            1555e9,
            source="NVIDIA A100 40GB datasheet: 19.5 TFLOP/s FP32 (non-tensor), 1555 GB/s HBM2. Sustained 50%: teaching default.",
        ),
        NodeModel(
            "laptop-cpu",
            400e9,
            0.25,
            40e9,
            source="A 4-core AVX2 laptop CPU: 4 cores x 3.1 GHz x 32 FP32 FLOP/cycle (2 FMA x 8 lanes x 2) = about 400 GFLOP/s peak; dual-channel DDR4 about 40 GB/s.",
        ),
    ]
}


def _get(kind: str, presets: dict, value, argument: str | None = None):
    """The model itself, or the preset named ``value`` in any case ("RDMA-EDR" is rdma-edr)."""
    if isinstance(value, (LinkModel, NodeModel)):
        return value
    if isinstance(value, str) and value.strip().lower() in presets:
        return presets[value.strip().lower()]
    raise ValueError(f"{argument or kind}: unknown {kind} preset {value!r}; valid: {', '.join(presets)}")


def get_link(link, argument: str = "link") -> LinkModel:
    """The one grammar of a link, every command's and the app's: a LinkModel; a preset
    name in any case; or a bandwidth (``parse_bandwidth``: 10Gbps, 10 Gb/s, 1.25GB/s),
    tcp-10gbe's latency and overheads at that bandwidth (bandwidth sweeps). Anything else:
    a ValueError naming ``argument`` and the accepted forms."""
    if isinstance(link, LinkModel) or not isinstance(link, str) or link.strip().lower() in LINK_PRESETS:
        return _get("link", LINK_PRESETS, link, argument)
    if not _QUANTITY.fullmatch(link):  # no number: a misspelt preset
        raise ValueError(
            f"{argument}: unknown link preset {link!r}; valid: {', '.join(LINK_PRESETS)} (any case), "
            "or a bandwidth like 10Gbps, 10 Gb/s or 1.25GB/s"
        )
    try:
        bandwidth_Bps = parse_bandwidth(link)
    except ValueError as exc:
        raise ValueError(f"{argument}: {exc}; or a link preset: {', '.join(LINK_PRESETS)}") from None
    base = LINK_PRESETS["tcp-10gbe"]
    return replace(
        base,
        name=link,
        bandwidth_Bps=bandwidth_Bps,
        source=f"{link}: tcp-10gbe's latency and overheads at this bandwidth",
    )


def get_node(node) -> NodeModel:
    """A NodeModel, or the preset of that name in any case (ValueError lists the valid names)."""
    return _get("node", NODE_PRESETS, node)


def busbw_factor(collective: str, p: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor."""
    if collective == "allreduce":
        return 2 * (p - 1) / p
    if collective in ("allgather", "reduce_scatter", "alltoall"):
        return (p - 1) / p
    return 1.0


# Units as the field writes them, case-sensitive: B is a byte, b a bit; k M G T are powers of
# 1000 (SI), Ki Mi Gi Ti powers of 1024 (IEC 80000-13). A rate in bytes may be written B/s or
# Bps (our own ``bandwidth_Bps`` names), a rate in bits b/s, bps or bit/s.
_SI = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
SIZE_UNITS: dict[str, int] = {"": 1} | {p + "B": f for p, f in (_SI | _IEC).items()}
BANDWIDTH_UNITS: dict[str, float] = (
    {p + u: f / 8 for p, f in _SI.items() for u in ("b/s", "bps", "bit/s")}
    | {p + u: f for p, f in _SI.items() for u in ("B/s", "Bps")}
    | {p + "B/s": f for p, f in _IEC.items()}
)
SIZE_SPELLINGS = "1024, 64kB, 61MB, 1GB (powers of 1000) or 64KiB, 16MiB, 1GiB (powers of 1024)"
BANDWIDTH_SPELLINGS = "10Gbps, 10Gb/s, 10Gbit/s (bits per second) or 1.25GB/s, 1.25GBps, 1GiB/s (bytes per second)"
_QUANTITY = re.compile(r"\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(\S*)\s*")


def _quantity(text, units: dict, what: str, spellings: str, hint, spelt=lambda unit: unit) -> float:
    """The number times its unit of ``units`` (as ``spelt`` writes it); a ValueError naming
    ``what``, ``hint``'s words for a near miss (a unit spelt in the wrong case, bits for
    bytes) and the accepted spellings."""
    m = _QUANTITY.fullmatch(str(text))
    if m and spelt(m.group(2)) in units:
        return float(m.group(1)) * units[spelt(m.group(2))]
    why = hint(m.group(2)) if m else None
    raise ValueError(f"{what}: cannot read {text!r}{f' ({why})' if why else ''}; write {spellings}")


def _size_hint(unit: str) -> str | None:
    if unit.endswith("b") and unit[:-1] + "B" in SIZE_UNITS:
        return f"a size is in bytes: {unit} is bits, {unit[:-1]}B bytes"
    if unit.upper() == "KB":
        return "KB is ambiguous: kB is 1000 bytes, KiB 1024"
    near = [u for u in SIZE_UNITS if u and u.lower() == unit.lower()]
    if near:
        return f"units are case-sensitive: did you mean {near[0]} (B is a byte, b a bit)?"
    return "a size is in bytes, not per second" if unit in BANDWIDTH_UNITS else None


def _bandwidth_spelt(unit: str) -> str:
    """A rate's unit as ``BANDWIDTH_UNITS`` writes it: the prefix and the "ps" in any case
    (10gbps, 10GB/S), the b or B as written; all in capitals (GBPS) stays ambiguous."""
    at = next((i for i, c in enumerate(unit) if c in "bB"), None)
    if at is None or unit[at:] == "BPS":
        return unit
    prefix = {p.lower(): p for p in (*_SI, *_IEC)}.get(unit[:at].lower(), unit[:at])
    return prefix + unit[at] + unit[at + 1 :].lower()


def _bandwidth_hint(unit: str) -> str | None:
    near = [u for u in BANDWIDTH_UNITS if u.lower() == unit.lower()]
    if len(near) > 1:
        return f"units are case-sensitive, b is a bit and B a byte: {' or '.join(near)}?"
    if near:
        return f"units are case-sensitive: did you mean {near[0]}?"
    return "a bandwidth needs a unit per second" if unit in SIZE_UNITS else None


def parse_size(text) -> int:
    """A size in bytes: '64MiB' -> 67108864, '61MB' -> 61000000, '1024' -> 1024. Units are
    case-sensitive (``SIZE_UNITS``); a bit unit (``1Gb``) and an ambiguous one (``KB``,
    ``gb``) are refused with the accepted spellings: a silent factor of 8 or of 1.024 is the
    error a networking course must not make."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        scaled = _quantity(text, SIZE_UNITS, "size", SIZE_SPELLINGS, _size_hint)
        if scaled != int(scaled):
            raise ValueError(f"size: {text!r} is not a whole number of bytes")
        value = int(scaled)
    if value < 0:
        raise ValueError(f"size must be >= 0 bytes, got {text!r}")
    return value


def parse_bandwidth(text) -> float:
    """A bandwidth in bytes per second: '10Gbps', '10 Gb/s' and '10gbps' -> 1.25e9 (bits),
    '1.25GB/s' and '1.25GBps' -> 1.25e9 (bytes). The prefix in any case; b is a bit and B a
    byte, so ``10GBPS``, where the two cannot be told apart, is refused with the spellings it
    may have meant, never guessed."""
    value = _quantity(text, BANDWIDTH_UNITS, "bandwidth", BANDWIDTH_SPELLINGS, _bandwidth_hint, _bandwidth_spelt)
    if not 0 < value < math.inf:
        raise ValueError(f"bandwidth must be > 0 and finite, got {text!r}")
    return value
