"""The network stack and IO (SPEC sections 8 and 9) as records for the page and the
lesson: one message's path through the stages of a link (``dlsys.machine.netstack``), one
message's time against size per message library, and a trainer fed by a data loader
(``dlsys.machine.storage``)."""

from __future__ import annotations

import math

from ..machine.net import get_node
from ..machine.netstack import LIBRARIES, stages
from ..machine.profiles import totals
from ..machine.storage import IOModel, io_timeline

MESSAGE_LINKS = ("tcp-10gbe", "rdma-edr")


def message_path(nbytes: float, links=MESSAGE_LINKS, protocol: str = "basic") -> list[dict]:
    """One message of ``nbytes`` on each link, stage after stage from the sender's call to
    the receiver's buffer: one row per stage with its start and end (seconds from the
    send), side and source. Each link's last end is its alpha + n beta."""
    rows = []
    for link in links:
        start_s = 0.0
        for stage in stages(link, nbytes, protocol):
            time_s = stage.time_s(nbytes)
            rows.append(
                {
                    "link": link,
                    "stage": stage.name,
                    "side": stage.side,
                    "start_s": start_s,
                    "end_s": start_s + time_s,
                    "time_s": time_s,
                    "source": stage.source,
                }
            )
            start_s += time_s
    return rows


def library_message_times(sizes) -> list[dict]:
    """One message's time alpha + n beta through each library's transport
    (``Library.transport``: the link plus the library's per-message and per-byte costs)."""
    rows = []
    for lib in LIBRARIES.values():
        link = lib.transport()
        rows += [
            {"library": lib.name, "link": lib.link, "nbytes": n, "time_s": link.alpha_s + n * link.beta_s_per_byte}
            for n in sizes
        ]
    return rows


def compute_step_s(model: str = "resnet50", node: str = "v100", batch_size: int = 32) -> float:
    """Forward and backward of one batch: 3 x forward FLOPs per sample x batch / sustained FLOP/s."""
    return 3 * totals(model)[1] * batch_size / get_node(node).sustained_flops


def loader_timeline(
    storage: str = "nvme",
    workers: int = 0,
    prefetch: int = 2,
    model: str = "resnet50",
    node: str = "v100",
    steps: int = 24,
) -> dict:
    """A trainer of ``model`` on ``node`` (batch 32 of ImageNet-sized JPEGs, ``IOModel``'s
    defaults) fed by ``workers`` loaders through a queue of ``prefetch``: the timeline's
    rows, the compute per step, a loader worker's and the device's time per batch, the
    closed-form steady step, the fewest workers (and queue depth) that keep up,
    ceil(t_w / compute) (None if the device itself is slower than compute), the trainer's
    IO wait over the run and the run's length."""
    io = IOModel(storage, workers, prefetch)
    compute_s = compute_step_s(model, node, io.batch_size)
    rows = io_timeline(io, compute_s, steps)
    hidden = io.device_batch_s() <= compute_s  # else no number of workers keeps up: the device is the bottleneck
    return {
        "storage": storage,
        "workers": workers,
        "prefetch": prefetch,
        "model": model,
        "node": node,
        "batch_size": io.batch_size,
        "sample_nbytes": io.sample_nbytes,
        "decode_s": io.decode_s,
        "rows": rows,
        "compute_s": compute_s,
        "worker_batch_s": io.worker_batch_s(),
        "device_batch_s": io.device_batch_s(),
        "steady_step_s": io.steady_step_s(compute_s),
        "workers_to_keep_up": math.ceil(io.worker_batch_s() / compute_s) if hidden else None,
        "io_wait_s": sum(r["io_wait_s"] for r in rows),
        "run_s": rows[-1]["compute_end_s"],
    }
