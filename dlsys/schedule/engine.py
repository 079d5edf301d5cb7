"""Scheduling in virtual time: a worker's framework threads as ranks of one node.

A framework overlaps communication with compute by running them on different threads: the
compute thread does forward and backward layer by layer and hands each ready gradient to a
communication thread, which sends it when the policy says. Here each thread is a rank, and
threads of one worker hand data to each other with ``comm.signal`` (same node: no link, no
time). So the compute lane and the link lanes of the trace overlap as a framework's do, on
every backend, and the policy is plain code on the sender's own clock.

World of the parameter-server scheme (W workers, S servers):
    ranks 0..S-1     servers: sum each item's W pushes (BSP, in worker order), update, reply
    S + 3w           worker w's compute thread
    S + 3w + 1       its sender: the policy's queue; posts each item to its server
                     (``Policy.placed``: index mod S, or MXNet's split of big arrays)
    S + 3w + 2       its receiver: takes the replies, hands each layer's weights to compute

Machines (``job.Job.machine_of``): a worker's threads are one machine; a separate server is a
machine of its own. Co-located (``job.Job.colocated``, S = W, as P3's runs: MXNet's
tools/launch.py starts as many servers as workers, lines 93-94 at v1.3.0, and dmlc's ssh
tracker puts process i on host i mod N, dmlc-core/tracker/dmlc_tracker/ssh.py): machine m
holds server m and worker m. Run with ``sharing`` (dlsys.comm.replay), the machine's one
egress carries the worker's pushes and the server's replies and its ingress the pushes to
the server and the replies to the worker, max-min fairly: a lone stream gets the whole
link, two busy ones half each. A worker's traffic with its own server takes the loopback
(no link: ``dlsys.machine.topology.placed``), as MXNet's does on one host.
Allreduce scheme (W workers): ranks 2w (compute) and 2w + 1 (communication: one all-reduce
per item, in the policy's order, among the communication ranks, as Horovod's background
thread does; every worker's ready times are the same, so all pick the same next item).

The threads, a file each: ``worker.compute`` (forward and backward, the policy's forward
gate), ``sender.sender`` (the policy's queue and pacing: ``Policy.pacer``), ``server.server``
and ``worker.receiver``; ``allreduce_comm`` here. The policy decides what goes next and when
(policy.py; ByteScheduler's credit in bytescheduler.py, P3's sockets and priority queue in
p3.py); under ``sharing`` its waits are logged so a replay with shared links keeps the order
the run allowed (docs/scheduling.md).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from .. import collectives
from ..comm.communicator import Communicator
from ..comm.group import Group
from ..comm.logical import per_block
from ..learn.task import TrainConfig, steps_per_epoch, task_of
from .job import TAG_PARAMS, Job
from .policy import Item
from .sender import payload, schedule, sender
from .server_thread import server
from .worker_thread import compute, receiver


def program(comm, job: Job):
    """The rank program: dispatch on this rank's role."""
    role, index = job.role(comm.rank)
    threads = {"server": server, "compute": compute, "sender": sender, "receiver": receiver, "comm": allreduce_comm}
    return threads[role](comm, job, index)


def allreduce_comm(comm, job: Job, w: int) -> dict:
    """One all-reduce (mean) per item, in the policy's order, among the communication ranks;
    a layer's mean gradient goes to compute once every item covering it is reduced."""
    # a Group is a Communicator of its members (MPI_Comm_split's), duck-typed
    group = cast(Communicator, Group(comm, [job.rank_of("comm", v) for v in range(job.workers)]))
    compute_rank, dtype = job.rank_of("compute", w), np.dtype(job.config.dtype) if job.config else None
    pacer = job.policy.pacer(comm, job.scheme)
    for _ in range(job.iterations):
        missing, reduced = dict(job.covering), {}

        def post(item: Item, grads: dict) -> None:
            data: np.ndarray
            if dtype is None:  # one real element per block, each standing for its block's bytes
                blocks = np.array_split(np.arange(item.size), group.size)
                data = per_block(np.zeros(group.size, np.float32), [max(len(b), 1) for b in blocks])
            else:
                data = payload(job, item, grads, dtype)[1:]
            reduced[item.index] = collectives.allreduce(group, data, op="mean")
            for i in item.layers:
                missing[i] -= 1
                if not missing[i]:
                    label = f"mean gradient of {job.layers[i].name}"
                    comm.signal(job.layer_values(i, reduced), compute_rank, TAG_PARAMS + i, label)

        schedule(comm, job, w, post, pacer)
    return {}


def steps_of(config: TrainConfig, workers: int) -> int:
    """Iterations of ``config.epochs`` epochs for ``workers`` workers (the data plan's)."""
    return config.epochs * steps_per_epoch(len(task_of(config).y_train), workers, config.batch_size)
