"""A parameter server next to ring all-reduce: the same gradients averaged both ways."""

from __future__ import annotations

import numpy as np

from ..checks import check_int
from ..comm.backends import MAX_THREAD_RANKS
from ..comm.launch import launch
from ..machine.net import get_link, parse_size
from ..ps import ps_round
from .budget import DEFAULT_MAX_MEMORY_BYTES, BufferPlan, plan_buffers
from .collectives import plan_record, simulate_collective


def _ps_program(comm, count: int, seed: int, plan: BufferPlan):
    """Rank program: one synchronous parameter-server round (``dlsys.ps.ps_round``), rank 0
    the server. Worker w's gradient is the one ring rank w-1 uses in ``collective_program``;
    its ``count`` real elements stand for ``plan.logical_count``."""
    grad = None
    if comm.rank > 0:
        grad = plan.wrap(np.random.default_rng([seed, comm.rank - 1]).standard_normal(count).astype(np.float32))
    return ps_round(comm, grad)


def ps_closed_form_s(workers: int, nbytes: float, link) -> float:
    """Time of one synchronous PS round in the emulator's model:
    2 (alpha + n beta) + 2 (W - 1) max(n / B, o_s(n)): the server's ingress then its
    egress serialize W messages each (or its per-message CPU cost does, if larger)."""
    link = get_link(link)
    per_message_s = max(link.wire_s(nbytes), link.send_overhead_s(nbytes))
    return 2 * link.message_s(nbytes) + 2 * (workers - 1) * per_message_s


def simulate_ps(
    workers: int = 8,
    size="64MiB",
    link="tcp-10gbe",
    node="laptop-cpu",
    seed: int = 0,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
) -> dict:
    """One PS round with ``workers`` workers plus a server (rank 0), checked and timed.

    Record keys as ``simulate_collective`` where they apply, plus ``scheme`` and ``workers``.
    Real buffers within ``max_memory_bytes`` (``budget.plan_buffers``; the server holds
    about 4 buffers: the sum, a push, the mean, its float64 draw... and so do the workers).
    """
    check_int("workers", workers, 1, MAX_THREAD_RANKS - 1)
    nbytes = parse_size(size)
    if nbytes % 4:
        raise ValueError(f"size must be a multiple of the float32 item size (4 bytes), got {nbytes}")
    plan = plan_buffers(nbytes // 4, workers + 1, "float32", copies=4, max_memory_bytes=max_memory_bytes)
    count, link = plan.real_count, get_link(link)
    result = launch(_ps_program, workers + 1, "threads", link=link, node=node, seed=seed, args=(count, seed, plan))
    want = np.mean(
        [np.random.default_rng([seed, w]).standard_normal(count).astype(np.float32) for w in range(workers)], axis=0
    )
    if not all(np.allclose(v, want, rtol=1e-4, atol=1e-5) for v in result.values):
        raise AssertionError("parameter server: a worker got a wrong mean")
    t, closed = result.virtual_time_s, ps_closed_form_s(workers, nbytes, link)
    return {
        "scheme": "parameter server",
        "workers": workers,
        "ranks": workers + 1,
        "nbytes": nbytes,
        "link": link.name,
        "virtual_time_s": t,
        "closed_form_s": closed,
        "relative_error": abs(t - closed) / closed,
        "bytes_sent_per_rank": result.trace.bytes_sent_per_rank(),
        "wall_time_s": result.wall_time_s,
        "result": result,
        **plan_record(plan, max_memory_bytes),
    }


def ps_vs_ring(
    workers: int = 8, size="64MiB", link="tcp-10gbe", max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES
) -> dict:
    """The same gradients averaged by a parameter server and by ring all-reduce (op mean).

    Returns {"parameter server": record, "ring all-reduce": record}; the two means agree.
    """
    ps = simulate_ps(workers, size, link, max_memory_bytes=max_memory_bytes)
    ring = simulate_collective("allreduce", "ring", workers, size, link, op="mean", max_memory_bytes=max_memory_bytes)
    ring["scheme"], ring["workers"] = "ring all-reduce", workers
    return {"parameter server": ps, "ring all-reduce": ring}


def ps_vs_ring_scaling(
    workers=(2, 4, 8, 16, 32), size="64MiB", link="tcp-10gbe", max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES
) -> list[dict]:
    """Emulated and closed-form communication time of both schemes for each worker count,
    and the busiest rank's traffic (bytes sent + received): the server's link for PS."""
    rows = []
    for w in workers:
        for name, rec in ps_vs_ring(w, size, link, max_memory_bytes).items():
            trace = rec["result"].trace
            traffic = [s + r for s, r in zip(trace.bytes_sent_per_rank(), trace.bytes_received_per_rank())]
            rows.append(
                {
                    "scheme": name,
                    "workers": w,
                    "nbytes": rec["nbytes"],
                    "link": rec["link"],
                    "virtual_time_s": rec["virtual_time_s"],
                    "closed_form_s": rec["closed_form_s"],
                    "busiest_rank_bytes": max(traffic),
                }
            )
    return rows
