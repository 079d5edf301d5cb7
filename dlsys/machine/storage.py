"""Where the training data comes from, in virtual time: storage presets and a loader model
(SPEC section 9).

A loader turns stored samples into batches. For one batch of B samples of s bytes each, a
loader worker waits for B reads (each a request latency, then the bytes through the
device's bandwidth) and decodes them on its core:

    worker time per batch   t_w   = B (latency_s + s / bandwidth + decode_s)
    device time per batch   t_dev = B s / bandwidth     (one device, shared by the workers)

The pipeline (PyTorch's DataLoader: ``num_workers`` K, a bounded prefetch queue of depth D):
batch j goes to worker j mod K; it may start once batch j - D has been taken by the
trainer (the queue holds at most D batches), and once its worker is free; its bytes go
through the device first come first served (by batch number); it is ready t_w after its
worker started if the device was free. The trainer takes batch i when it is ready and it
has finished computing on batch i - 1, then computes for ``compute_s``.

Steady state. K = 0 loads in the trainer's own process, so nothing overlaps:
    step = t_w + compute_s.
K >= 1: three resources serve each batch, and the slowest sets the pace. The trainer
needs compute_s per batch; min(K, D) batches load at once (a worker more than D has no
slot to fill), so the workers deliver one batch per t_w / min(K, D); the device one per
t_dev:
    step = max(compute_s, t_w / min(K, D), t_dev),
and the trainer waits on IO for step - compute_s per step (0 when compute is the slowest).
Before that, the first batch costs t_w of waiting. ``steady_step_s`` is this closed form;
``LoaderTimeline`` runs the pipeline event by event (tests hold the two equal).

Latency overlaps between workers (many requests in flight: NVMe queues, NFS and S3
clients); a disk's seeks do not really, so the HDD preset is optimistic for K > 1. Data
stalls of this kind are measured in Mohan et al. 2021, "Analyzing and Mitigating Data
Stalls in DNN Training" (VLDB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..checks import check_int


class Storage(NamedTuple):
    name: str
    bandwidth_Bps: float
    latency_s: float  # one small random read, request to first byte
    source: str


STORAGE_PRESETS = {
    s.name: s
    for s in [
        Storage(
            "nvme",
            3.5e9,
            53e-6,
            "Samsung 970 EVO Plus data sheet (2019): 3,500 MB/s sequential read; 4 KB random read at queue "
            "depth 1, 19,000 IOPS = 53 us per read",
        ),
        Storage(
            "sata-ssd",
            550e6,
            100e-6,
            "Samsung 860 EVO data sheet (2018): 550 MB/s sequential read (the SATA III limit); 4 KB random read "
            "at queue depth 1, 10,000 IOPS = 100 us per read",
        ),
        Storage(
            "hdd",
            200e6,
            12.7e-3,
            "a 7,200 rpm disk (Seagate BarraCuda data sheet): about 200 MB/s sequential; a random read waits an "
            "average seek of 8.5 ms plus half a revolution, 4.2 ms",
        ),
        Storage(
            "nfs",
            1.1e9,
            0.5e-3,
            "NFS over 10 GbE: 1.25 GB/s line rate less TCP and RPC framing; one READ round trip through the "
            "network and the server of about half a millisecond (teaching default)",
        ),
        Storage(
            "s3",
            90e6,
            0.1,
            "Amazon S3 performance guidelines (AWS documentation, 'Performance design patterns'): 100-200 ms "
            "to the first byte of a small object, about 85-90 MB/s per request",
        ),
    ]
}

MAX_LOADER_WORKERS = 64  # processes per trainer; more would only contend for this machine's cores
# Decoding and randomly cropping one ImageNet JPEG on one core takes milliseconds (teaching
# default; Mohan et al. 2021 find this pre-processing, not reading, stalls training on fast storage)
DECODE_S_PER_SAMPLE = 2e-3


@dataclass(frozen=True)
class IOModel:
    """A loader's configuration: ``workers`` K (0: load in the trainer's process),
    ``prefetch`` D (batches the queue may hold), ``storage`` (a preset name), ``batch_size``
    B, ``sample_nbytes`` s and ``decode_s`` per sample. Checked when made."""

    storage: str = "nvme"
    workers: int = 0
    prefetch: int = 2
    batch_size: int = 32
    sample_nbytes: float = 110e3  # an ImageNet JPEG: ILSVRC-2012's 1.28 M training images take about 140 GB
    decode_s: float = DECODE_S_PER_SAMPLE

    def __post_init__(self):
        if self.storage not in STORAGE_PRESETS:
            raise ValueError(f"storage: unknown preset {self.storage!r}; valid: {', '.join(STORAGE_PRESETS)}")
        check_int("workers (loader workers)", self.workers, 0, MAX_LOADER_WORKERS)
        check_int("prefetch (batches in the queue)", self.prefetch, 1, 1 << 16)
        check_int("batch_size", self.batch_size, 1)
        for name in ("sample_nbytes", "decode_s"):
            if not 0 <= getattr(self, name) < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {getattr(self, name)!r}")

    @property
    def device(self) -> Storage:
        return STORAGE_PRESETS[self.storage]

    def device_batch_s(self) -> float:
        """t_dev = B s / bandwidth: the device's time for one batch's bytes."""
        return self.batch_size * self.sample_nbytes / self.device.bandwidth_Bps

    def worker_batch_s(self) -> float:
        """t_w = B (latency + s / bandwidth + decode): one worker's time for one batch."""
        return self.batch_size * (self.device.latency_s + self.decode_s) + self.device_batch_s()

    def steady_step_s(self, compute_s: float) -> float:
        """The trainer's steady-state step time (module docstring): t_w + compute_s for
        K = 0, else max(compute_s, t_w / min(K, D), t_dev)."""
        if self.workers == 0:
            return self.worker_batch_s() + compute_s
        return max(compute_s, self.worker_batch_s() / min(self.workers, self.prefetch), self.device_batch_s())


class Load(NamedTuple):
    batch: int
    worker: int  # -1: the trainer's own process (K = 0)
    start_s: float
    ready_s: float


class LoaderTimeline:
    """The pipeline of the module docstring, event by event. The trainer calls
    ``take(now_s)`` when it wants its next batch and idles until the returned time."""

    def __init__(self, model: IOModel):
        self.model = model
        self.worker_free_s = [0.0] * model.workers
        self.device_free_s = 0.0
        self.loads: list[Load] = []
        self.taken_s: list[float] = []

    def _load(self, batch: int, issue_s: float) -> None:
        m = self.model
        worker = batch % m.workers if m.workers else -1
        start_s = max(issue_s, self.worker_free_s[worker]) if worker >= 0 else issue_s
        # the B latencies pass in the worker; then the bytes queue for the device
        read_s = max(start_s + m.batch_size * m.device.latency_s, self.device_free_s)
        self.device_free_s = read_s + m.device_batch_s()
        ready_s = self.device_free_s + m.batch_size * m.decode_s
        if worker >= 0:
            self.worker_free_s[worker] = ready_s
        self.loads.append(Load(batch, worker, start_s, ready_s))

    def take(self, now_s: float) -> float:
        """The time the trainer, asking at ``now_s``, has its next batch."""
        i = len(self.taken_s)
        if self.model.workers == 0:
            self._load(i, now_s)
        else:  # issue every batch whose queue slot is free: j < D at 0, else when j - D was taken
            for j in range(len(self.loads), i + self.model.prefetch):
                self._load(j, self.taken_s[j - self.model.prefetch] if j >= self.model.prefetch else 0.0)
        taken_s = max(now_s, self.loads[i].ready_s)
        self.taken_s.append(taken_s)
        return taken_s


def io_timeline(model: IOModel, compute_s: float, steps: int) -> list[dict]:
    """A trainer that computes ``compute_s`` per step for ``steps`` steps, fed by ``model``:
    one row per step with its load (worker, start, ready), when the trainer took it,
    its IO wait and when its compute ended."""
    check_int("steps", steps, 1)
    timeline, now_s, rows = LoaderTimeline(model), 0.0, []
    for step in range(steps):
        taken_s = timeline.take(now_s)
        load = timeline.loads[step]
        rows.append(
            {
                "step": step,
                "worker": load.worker,
                "load_start_s": load.start_s,
                "ready_s": load.ready_s,
                "taken_s": taken_s,
                "io_wait_s": taken_s - now_s,
                "compute_end_s": taken_s + compute_s,
            }
        )
        now_s = taken_s + compute_s
    return rows
