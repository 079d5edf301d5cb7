"""Accelerators as data, with their sources: what a planner needs of a GPU and of the
server and network it sits in.

    peak_flops      dense BF16/FP16 tensor-core peak (no 2:4 sparsity), the datasheet's:
                    what MFU is measured against
    matmul_flops    the Maximum Achievable Matmul FLOPS (MAMF) measured with BF16 inputs
                    on the best shape of a brute-force search (Bekman, "Machine Learning
                    Engineering", compute/accelerator/README.md, "Maximum Achievable Matmul
                    FLOPS comparison table", mamf-finder.py): the ceiling a large GEMM
                    reaches (``efficiency.gemm_s`` lowers it for a GEMM's shape)
    sms             streaming multiprocessors: a GEMM's tiles run in waves of ``sms``
    memory_bytes    HBM capacity; hbm_Bps its bandwidth (memory-bound kernels run at it)
    island          GPUs of one server on NVLink/NVSwitch; nvlink_Bps each way per GPU
    ib_Bps          each GPU's InfiniBand rail, each way (one NIC per GPU in a DGX)

No efficiency in this file is fitted to a training run: peaks and bandwidths are
datasheets', the matmul ceiling is a single-GPU kernel measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..machine.net import LinkModel
from ..machine.topology import Topology

_MAMF = (
    "MAMF: Bekman, 'Machine Learning Engineering' (stas00/ml-engineering), compute/accelerator/README.md, "
    "'Maximum Achievable Matmul FLOPS comparison table', BF16"
)


@dataclass(frozen=True)
class Device:
    """An accelerator, its server and its network rail (module docstring)."""

    name: str
    peak_flops: float
    memory_bytes: int
    source: str
    matmul_flops: float = 0.0  # 0: the peak (an ideal GEMM)
    hbm_Bps: float = 3.35e12
    sms: int = 132
    island: int = 8
    nvlink_Bps: float = 450e9
    ib_Bps: float = 50e9
    nvlink_latency_s: float = 2e-6
    ib_latency_s: float = 3e-6

    def __post_init__(self):
        for name in ("peak_flops", "memory_bytes", "hbm_Bps", "nvlink_Bps", "ib_Bps"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"{name} must be a number > 0, got {value!r}")
        if not 0 <= self.matmul_flops <= self.peak_flops:
            raise ValueError(f"matmul_flops must be in 0..peak_flops = {self.peak_flops:g}, got {self.matmul_flops!r}")

    @property
    def gemm_flops(self) -> float:
        """The rate of a GEMM of the best shape: the measured ceiling, else the peak."""
        return self.matmul_flops or self.peak_flops


DEVICES = {
    "a100": Device(
        "A100 SXM 80GB",
        312e12,
        80 * 2**30,
        "NVIDIA A100 Tensor Core GPU datasheet (2021), SXM4 80GB: 312 TFLOP/s BF16/FP16 dense (624 with "
        "sparsity), 80 GB HBM2e at 2,039 GB/s, NVLink 3 at 600 GB/s (300 each way); 108 SMs (NVIDIA A100 "
        "architecture whitepaper); DGX A100 (the Selene nodes of Narayanan et al. 2021, section 5): 8 GPUs "
        "on NVSwitch, 8 HDR InfiniBand NICs of 200 Gb/s (25 GB/s each way, one per GPU); "
        + _MAMF
        + ": 271.2 TFLOP/s (86.9%)",
        matmul_flops=271.2e12,
        hbm_Bps=2039e9,
        sms=108,
        nvlink_Bps=300e9,
        ib_Bps=25e9,
    ),
    "h100": Device(
        "H100 SXM",
        989.4e12,
        80 * 2**30,
        "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5: 1,979 TFLOP/s BF16 with 2:4 sparsity, 989.4 "
        "dense; 80 GB of HBM3 (80 GiB on the board) at 3.35 TB/s; NVLink 4 at 900 GB/s (450 each way); 132 "
        "SMs (NVIDIA H100 whitepaper); DGX H100: 8 GPUs on NVSwitch, 8 ConnectX-7 NDR NICs of 400 Gb/s "
        "(50 GB/s each way, one per GPU); " + _MAMF + ": 794.5 TFLOP/s (80.3%)",
        matmul_flops=794.5e12,
        hbm_Bps=3.35e12,
        sms=132,
        nvlink_Bps=450e9,
        ib_Bps=50e9,
    ),
    "h200": Device(
        "H200 SXM",
        989.4e12,
        141 * 10**9,
        "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM: 989 TFLOP/s BF16 dense, 141 GB HBM3e at "
        "4.8 TB/s, NVLink 4 at 900 GB/s (450 each way); the H100's GH100 die (132 SMs); DGX H200: 8 GPUs "
        "on NVSwitch, 8 ConnectX-7 NDR NICs of 400 Gb/s; "
        + _MAMF
        + ": no H200 row; the GH200 (the same die with 141 GB of HBM3e, 900 W) measured 828.6 TFLOP/s (83.6%), "
        "used here",
        matmul_flops=828.6e12,
        hbm_Bps=4.8e12,
        sms=132,
        nvlink_Bps=450e9,
        ib_Bps=50e9,
    ),
}


def device_of(name: str = "h100", memory_bytes: int | None = None) -> Device:
    """A device preset by name (any case), with its memory replaced if ``memory_bytes`` is given."""
    key = name.lower() if isinstance(name, str) else name
    if key not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)} (any case), got {name!r}")
    base = DEVICES[key]
    return base if memory_bytes is None else replace(base, memory_bytes=memory_bytes)


def cluster(device: Device, max_nodes: int = 2**16) -> Topology:
    """Servers of ``device.island`` GPUs on NVLink, one InfiniBand rail a GPU across them
    (as ``machine.topology.gpu_cluster``, with this device's links)."""
    nvlink = LinkModel(f"nvlink ({device.name})", device.nvlink_latency_s, device.nvlink_Bps, source=device.source)
    ib = LinkModel(f"infiniband ({device.name})", device.ib_latency_s, device.ib_Bps, source=device.source)
    return Topology(f"{device.name} cluster", nvlink, max_nodes, device.island, ib, device.source)
