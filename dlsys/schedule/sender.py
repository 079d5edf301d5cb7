"""A worker's sender thread: it holds the policy's queue and posts each item when the policy says.

Per iteration it learns from compute when each layer's gradient will be ready (one signal as
backward starts), so each item's release time (``Policy.release_s``) is known; at its clock it
takes the released item of smallest priority and asks the policy's pacer (``Policy.pacer``:
post at release; ByteScheduler's credit window; P3's sockets) whether it may go now. The
gradient itself is taken from compute only when the item is posted, so the sender waits for
it on the clock like a real one would.
"""

from __future__ import annotations

import functools
import heapq
from typing import Callable

import numpy as np

from ..comm.logical import LogicalArray
from .job import TAG_GRAD, TAG_PUSH, TAG_READY, Job
from .policy import Item, Pacer


def schedule(comm, job: Job, w: int, post: Callable[[Item, dict], None], pacer: Pacer) -> None:
    """One iteration of the sender's rule; ``post(item, grads)`` sends an item."""
    layers, policy = job.layers, job.policy
    compute = job.rank_of("compute", w)
    ready_s = comm.wait_signal(compute, TAG_READY)
    ready = dict(zip([i for i, l in enumerate(layers) if l.params], ready_s.tolist()))
    # items by release time; the released ones in a heap by priority (P3 has thousands)
    timed = sorted(
        ((policy.release_s(item, ready), item.priority, item) for item in job.items), key=lambda entry: entry[:2]
    )
    pacer.start()
    released: list[tuple[tuple, Item]] = []
    grads: dict[int, np.ndarray] = {}
    j = 0
    while j < len(timed) or released:
        while j < len(timed) and timed[j][0] <= comm.clock:
            heapq.heappush(released, timed[j][1:])
            j += 1
        if not released:
            comm.wait_until(timed[j][0], "idle: nothing released")
            continue
        item = released[0][1]
        if not pacer.may_post(item):
            continue
        heapq.heappop(released)
        for i in item.layers:
            if i not in grads:
                grads[i] = comm.wait_signal(compute, TAG_GRAD + i)
        pacer.post(job.server_of[item.index], item, functools.partial(post, item, grads))


def payload(job: Job, item: Item, grads: dict, dtype) -> np.ndarray:
    """Item index first (ps-lite sends keys with values), then the item's values."""
    if job.config is None:
        return LogicalArray(np.array([item.index], np.float32), scale=item.size + 1)
    # the item's layers are adjacent in the flat buffer: join them, then cut [lo, hi)
    layers = sorted(item.layers, key=lambda i: job.layers[i].offset)
    start = job.layers[layers[0]].offset
    values = np.concatenate([grads[i] for i in layers])[item.lo - start : item.hi - start]
    return np.concatenate([np.array([item.index], dtype), values]).astype(dtype)


def sender(comm, job: Job, w: int) -> dict:
    """The parameter-server scheme's sender: each item pushed to its server."""
    dtype = np.dtype(job.config.dtype) if job.config else np.float32
    pacer = job.policy.pacer(comm, job.scheme)

    def push(item: Item, grads: dict) -> None:
        comm.send(
            payload(job, item, grads, dtype), job.server_of[item.index], TAG_PUSH, label=f"push {job.label(item)}"
        )

    for _ in range(job.iterations):
        schedule(comm, job, w, push, pacer)
    return {}
