"""The parameter server's thread: BSP per item, as MXNet's server (``DataHandleDefault`` in
kvstore_dist_server.h at v1.3.0): it takes the pushes as they arrive and updates an item when
its W-th push is in, summing them in worker order (as dlsys.ps does), then replies to every
worker. The policy says in which order it handles the pushes it has in (``Policy.inbox``:
as they come; P3's by priority) and how it paces its replies (``Policy.reply_pacer``).
"""

from __future__ import annotations

import functools

import numpy as np

from ..comm.logical import LogicalArray
from ..learn import optim
from ..learn.task import TrainConfig, build_model
from .job import TAG_PUSH, TAG_REPLY, Job
from .policy import Item

UPDATE_FLOPS_PER_ELEMENT = 4  # momentum SGD: v = mu v + g; w -= lr v
# What a parameter server spends per slice besides the update's arithmetic: MXNet's server
# hands each key's update to its main thread, where the Python optimizer runs (ApplyUpdates,
# src/kvstore/kvstore_dist_server.h lines 346-371 at v1.3.0), then waits for it
# (stored.WaitToRead()): one operator call from Python, 25.77 us measured with MXNet's
# NaiveEngine (apache/mxnet issue 14883, comment of 2019-09-04).
MXNET_SERVER_SLICE_S = 25.77e-6


class Weights:
    """A real job's server: its copy of the weights, one momentum SGD per item it holds."""

    def __init__(self, config: TrainConfig, mine: list[Item]):
        self.weights = build_model(config).params
        self.grad = np.zeros_like(self.weights)
        self.sgd = {
            item.index: optim.SGD(
                self.weights[item.lo : item.hi], self.grad[item.lo : item.hi], config.lr, config.momentum
            )
            for item in mine
        }

    def update(self, item: Item, values: dict[int, np.ndarray], workers: int) -> np.ndarray:
        """The mean of the workers' gradients (in worker order), one SGD step; the reply."""
        g = self.grad[item.lo : item.hi]
        g[...] = 0
        for w in range(workers):
            g += values[w] / workers
        self.sgd[item.index].step()
        return np.concatenate([[item.index], self.weights[item.lo : item.hi]]).astype(self.weights.dtype)


def server(comm, job: Job, s: int) -> dict:
    """The workers need not post their items in one order (co-located, a worker's pushes to
    its own server take the loopback, so its link frees sooner and its policy may pick
    differently). The inbox takes the earliest arrival among the workers that still owe
    this server a push of its current round (an iteration: every worker pushes every item
    of an iteration before it needs the replies), so it never waits on a worker that waits
    for it."""
    items = job.items
    mine = [item for item in items if job.server_of[item.index] == s]
    senders = [job.rank_of("sender", w) for w in range(job.workers)]
    weights = Weights(job.config, mine) if job.config is not None else None
    replies = job.policy.reply_pacer(comm)
    inbox = job.policy.inbox(comm, TAG_PUSH, lambda arr: items[int(arr[0])].priority)
    owed = {sender: 0 for sender in senders}  # pushes each worker still owes this round
    arrived: dict[int, dict[int, np.ndarray]] = {}  # item -> worker -> values
    for _ in range(len(mine) * job.iterations):
        while True:
            if not any(owed.values()) and not inbox.holds():
                owed = {sender: len(mine) for sender in senders}
            src, arr = inbox.take(owed)
            k = int(arr[0])
            arrived.setdefault(k, {})[senders.index(src)] = arr[1:]
            if len(arrived[k]) == job.workers:
                break
        item, values = items[k], arrived.pop(k)
        comm.charge_reduction(4 * item.size * job.workers, label="aggregate")
        comm.compute(flops=UPDATE_FLOPS_PER_ELEMENT * item.size, label=f"update {job.label(item)}")
        comm.compute(seconds=job.server_slice_s, label=f"server's per-slice cost {job.label(item)}")
        if weights is not None:
            reply = weights.update(item, values, job.workers)
        else:
            reply = LogicalArray(np.array([k], np.float32), scale=item.size + 1)
        for w in range(job.workers):
            receiver = job.rank_of("receiver", w)
            send = functools.partial(comm.send, reply, receiver, TAG_REPLY, label=f"pull {job.label(item)}")
            replies.post(receiver, item, send)
    return {}
