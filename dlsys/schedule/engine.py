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

Machines (``Job.machine_of``): a worker's threads are one machine; a separate server is a
machine of its own. Co-located (``Job.colocated``, S = W, as P3's runs: MXNet's
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

The sender's rule (what ``Policy.credit_bytes`` means): at its clock t it looks at the items
released by t and picks the smallest priority; it posts it if the bytes posted and not yet
on the wire (their egress ends after t) plus the item fit the credit, or nothing is in
flight; otherwise it waits until the first in-flight item leaves the egress and decides
again. So a lower-priority item never departs while a higher-priority one is released and
unposted at that sender (the trace tests check it).

Under ``sharing`` (dlsys.comm.replay) the replay times the program on links the machine's
streams share, so the sender's waits are logged as ``comm.wait_sent(k, time_s)``: "until
my posts 0..k have left the egress", at ``time_s`` in the run, on the replay's own flows
in the replay. Before each post it also waits for the latest item the run saw leave (a
no-op in the run), so the items in flight in the replay are among those the run allowed.
P3 (``Policy.socket_hwm``) paces per server socket instead, as its ps-lite does, and its
servers pace their replies per worker socket (``_Sockets``; docs/scheduling.md).

A job is either *real* (``config``: the digits model trains; gradients are real numpy) or
*emulated* (a layer profile: every payload is a LogicalArray of one real element, the item's
index, standing for the item's bytes).
"""

from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass

import numpy as np

from .. import collectives
from ..comm import Group
from ..comm.logical import LogicalArray, per_block
from ..learn import nn, optim
from ..learn.task import TrainConfig, batch_indices, build_model, steps_per_epoch, task_of
from .policy import Item, Layer, Policy

TAG_READY, TAG_PUSH, TAG_REPLY, TAG_GRAD, TAG_PARAMS = 31, 32, 33, 1000, 100_000
UPDATE_FLOPS_PER_ELEMENT = 4  # momentum SGD: v = mu v + g; w -= lr v
SCHEMES = ("ps", "allreduce")
# What a parameter server spends per slice besides the update's arithmetic: MXNet's server
# hands each key's update to its main thread, where the Python optimizer runs (ApplyUpdates,
# src/kvstore/kvstore_dist_server.h lines 346-371 at v1.3.0), then waits for it
# (stored.WaitToRead()): one operator call from Python, 25.77 us measured with MXNet's
# NaiveEngine (apache/mxnet issue 14883, comment of 2019-09-04).
MXNET_SERVER_SLICE_S = 25.77e-6


@dataclass(frozen=True)
class Job:
    layers: tuple[Layer, ...]
    policy: Policy
    scheme: str = "ps"
    workers: int = 2
    servers: int = 1
    iterations: int = 3
    config: TrainConfig | None = None  # real training; None: an emulated profile
    colocated: bool = False  # server m on worker m's machine, sharing its links (module docstring)
    server_slice_s: float = 0.0  # a server's time per item besides the update (MXNET_SERVER_SLICE_S)

    @functools.cached_property
    def placed(self) -> list[tuple[Item, int]]:
        """The policy's items with the server each goes to."""
        return self.policy.placed(list(self.layers), max(self.servers, 1))

    @functools.cached_property
    def items(self) -> list[Item]:
        return [item for item, _ in self.placed]

    @functools.cached_property
    def server_of(self) -> list[int]:
        return [server for _, server in self.placed]

    @property
    def machine_of(self) -> tuple[int, ...]:
        """Each rank's machine (module docstring): ps, servers 0..S-1 then the workers
        (co-located: worker w on server w's machine); allreduce, worker w's ranks on machine w."""
        if self.scheme != "ps":
            return tuple(w for w in range(self.workers) for _ in range(2))
        first = 0 if self.colocated else self.servers
        return tuple(range(self.servers)) + tuple(first + w for w in range(self.workers) for _ in range(3))

    @property
    def ranks(self) -> int:
        return self.servers + 3 * self.workers if self.scheme == "ps" else 2 * self.workers

    def role(self, rank: int) -> tuple[str, int]:
        """(role, worker or server index) of a rank."""
        if self.scheme == "ps":
            if rank < self.servers:
                return "server", rank
            w, k = divmod(rank - self.servers, 3)
            return ("compute", "sender", "receiver")[k], w
        w, k = divmod(rank, 2)
        return ("compute", "comm")[k], w

    def rank_of(self, role: str, w: int) -> int:
        if self.scheme == "ps":
            return w if role == "server" else self.servers + 3 * w + ("compute", "sender", "receiver").index(role)
        return 2 * w + ("compute", "comm").index(role)


def layers_of(model: nn.Sequential, batch: int) -> tuple[Layer, ...]:
    """The layers of a dlsys.learn.nn model: parameters, offsets and forward FLOPs for ``batch``."""
    by_layer = {s.layer: s for s in model.layer_slices()}
    out = []
    for i, (name, layer) in enumerate(zip(model.names, model.layers)):
        s = by_layer.get(i)
        out.append(Layer(name, s.size if s else 0, s.offset if s else 0, layer.flops(batch)))
    return tuple(out)


def program(comm, job: Job):
    """The rank program: dispatch on this rank's role."""
    role, index = job.role(comm.rank)
    return {"server": _server, "compute": _compute, "sender": _sender, "receiver": _receiver, "comm": _allreduce_comm}[
        role
    ](comm, job, index)


# --- the compute thread -----------------------------------------------------------------


def _compute(comm, job: Job, w: int):
    """Forward layer by layer (waiting for each layer's update as the policy says), then
    backward layer by layer, handing each gradient to the communication thread."""
    layers, real = job.layers, job.config is not None
    send_to = job.rank_of("sender" if job.scheme == "ps" else "comm", w)
    take_from = job.rank_of("receiver" if job.scheme == "ps" else "comm", w)
    model = build_model(job.config) if real else None
    optimizers = {}
    if real and job.scheme == "allreduce":  # the workers update their own copies, layer by layer
        optimizers = {
            i: optim.SGD(
                model.params[l.offset : l.offset + l.params],
                model.grads[l.offset : l.offset + l.params],
                job.config.lr,
                job.config.momentum,
            )
            for i, l in enumerate(layers)
            if l.params
        }
    task = task_of(job.config) if real else None
    with_params = [i for i, l in enumerate(layers) if l.params]
    backward_ends, losses, local_grads = [], [], None

    def update(i):
        arr = comm.wait_signal(take_from, TAG_PARAMS + i, f"wait for {layers[i].name}")
        if real:
            lo, hi = layers[i].offset, layers[i].offset + layers[i].params
            if job.scheme == "ps":
                model.params[lo:hi] = arr
            else:
                model.grads[lo:hi] = arr
                optimizers[i].step()

    for it in range(job.iterations):
        if it and job.policy.forward == "all":
            for i in with_params:
                update(i)
        if it and job.policy.forward == "stale":  # OD-SGD: the global weights of step it - 2, then a local step
            for i in with_params:
                if it >= 2:
                    update(i)
            if real:
                model.params -= job.config.lr * local_grads
        if real:
            n = len(task.y_train)
            idx = batch_indices(n, it, w, job.workers, job.config.batch_size, job.config.seed)
            x = np.asarray(task.X_train[idx], dtype=model.params.dtype)
        for i, layer in enumerate(layers):
            if it and job.policy.forward == "layer" and layer.params:
                update(i)
            comm.compute(flops=layer.flops, label=f"forward {layer.name}")
            if real:
                x = model.layers[i].forward(x)
        if real:
            loss, dout = nn.softmax_cross_entropy(x, task.y_train[idx])
            losses.append(float(loss))
        clock, ready = comm.clock, {}
        for i in reversed(range(len(layers))):
            clock += comm.node.compute_s(2 * layers[i].flops)
            ready[i] = clock
        comm.signal(np.array([ready[i] for i in with_params]), send_to, TAG_READY, "backward starts")
        for i in reversed(range(len(layers))):
            if real:
                dout = model.layers[i].backward(dout)
            comm.compute(flops=2 * layers[i].flops, label=f"backward {layers[i].name}")
            if layers[i].params:
                lo, hi = layers[i].offset, layers[i].offset + layers[i].params
                comm.signal(
                    model.grads[lo:hi].copy() if real else np.zeros(0),
                    send_to,
                    TAG_GRAD + i,
                    f"gradient of {layers[i].name}",
                )
        backward_ends.append(comm.clock)
        if real and job.policy.forward == "stale":
            local_grads = model.grads.copy()
    for _ in range(min(2, job.iterations) if job.policy.forward == "stale" else 1):
        for i in with_params:  # the updates not taken yet: the final global weights
            update(i)
    record = {"backward_ends_s": backward_ends, "end_s": comm.clock, "losses": losses}
    if real and w == 0:
        record.update(
            params=model.params.copy(),
            test_accuracy=float(np.mean(model.forward(task.X_test).argmax(axis=1) == task.y_test)),
        )
    return record


# --- the communication threads ----------------------------------------------------------


def _payload(job: Job, item: Item, grads: dict, dtype) -> np.ndarray:
    """Item index first (ps-lite sends keys with values), then the item's values."""
    if job.config is None:
        return LogicalArray(np.array([item.index], np.float32), scale=item.size + 1)
    # the item's layers are adjacent in the flat buffer: join them, then cut [lo, hi)
    layers = sorted(item.layers, key=lambda i: job.layers[i].offset)
    start = job.layers[layers[0]].offset
    values = np.concatenate([grads[i] for i in layers])[item.lo - start : item.hi - start]
    return np.concatenate([np.array([item.index], dtype), values]).astype(dtype)


class _Sockets:
    """One rank's sockets, one per peer, as ps-lite's ZMQ sockets with ``ZMQ_SNDHWM = hwm``
    (``Policy.socket_hwm``; P3's src/zmq_van.h lines 104-105): ``send(peer, post)`` blocks
    until the peer's socket holds at most the message on its wire and ``hwm`` queued behind
    it (posts not yet left the egress, on this run's clock), then posts. A wait is logged
    as ``comm.wait_left(k, time_s)`` ("until my post k has left"), which a replay with
    shared links resolves on its own flows; before each post it also waits for the latest
    post to that peer the run saw leave (a no-op here), so a connection in the replay
    never holds more than the run allowed."""

    def __init__(self, comm, hwm: int):
        self.comm, self.hwm = comm, hwm
        self.flight: dict[int, list] = {}  # peer -> [(post number, egress end)] not yet left
        self.waited: dict[int, int] = {}  # peer -> the latest post a wait was logged for

    def send(self, peer: int, post) -> None:
        comm, flight, gone = self.comm, self.flight.setdefault(peer, []), None
        while True:
            while flight and flight[0][1] <= comm.clock:
                gone = flight.pop(0)
            if len(flight) <= self.hwm:
                break
            comm.wait_left(*flight[0], "socket full: waiting for the link")
            self.waited[peer] = flight[0][0]
        if gone is not None and gone[0] > self.waited.get(peer, -1):
            comm.wait_left(*gone, "socket full: waiting for the link")  # a no-op here
            self.waited[peer] = gone[0]
        post()
        flight.append((comm.posted - 1, comm.egress_free_s))


def _schedule(comm, job: Job, w: int, post, sockets: _Sockets | None = None) -> None:
    """One iteration of the sender's rule (module docstring); ``post(item, grads)`` sends.
    With ``sockets`` (P3's ps-lite), one thread pops the released item of smallest priority
    and blocks on its server's socket (``_Sockets.send``: P3's src/van.cc lines 153-163,
    ``Van::Sending``); the credit paces nothing."""
    layers, policy = job.layers, job.policy
    compute = job.rank_of("compute", w)
    ready_s = comm.wait_signal(compute, TAG_READY)
    ready = dict(zip([i for i, l in enumerate(layers) if l.params], ready_s.tolist()))
    # items by release time; the released ones in a heap by priority (P3 has thousands)
    timed = sorted(
        ((policy.release_s(item, ready), item.priority, item) for item in job.items), key=lambda entry: entry[:2]
    )
    released, grads, flight, j = [], {}, [], 0
    gone = logged = None  # (post number, egress end) of the latest item known to have left
    while j < len(timed) or released:
        t = comm.clock
        while j < len(timed) and timed[j][0] <= t:
            heapq.heappush(released, timed[j][1:])
            j += 1
        if not released:
            comm.wait_until(timed[j][0], "idle: nothing released")
            continue
        left = [entry for entry in flight if entry[1] <= t]
        if left:  # the latest item that has left the egress: every post up to its last has left
            gone = left[-1][:2]
            flight = [entry for entry in flight if entry[1] > t]
        item = released[0][1]
        if sockets is not None:
            heapq.heappop(released)
            for i in item.layers:
                if i not in grads:
                    grads[i] = comm.wait_signal(compute, TAG_GRAD + i)
            sockets.send(job.server_of[item.index], functools.partial(post, item, grads))
            continue
        nbytes = 4 * item.size
        if flight and sum(n for _, _, n in flight) + nbytes > policy.credit_bytes:
            comm.wait_sent(*flight[0][:2], "credit: waiting for the link")
            continue
        heapq.heappop(released)
        for i in item.layers:
            if i not in grads:
                grads[i] = comm.wait_signal(compute, TAG_GRAD + i)
        if gone is not None and gone != logged and policy.credit_bytes < math.inf:
            comm.wait_sent(*gone, "credit: waiting for the link")  # a no-op here; a replay's egress may be slower
            logged = gone
        post(item, grads)
        flight.append((comm.posted - 1, comm.egress_free_s, nbytes))


def _label(job: Job, item: Item) -> str:
    """What a trace viewer shows: "conv3 slice 2 of 5 [item 17]", "bucket 0: fc8..fc6 [item 0]"."""
    return _labels(job)[item.index]


@functools.lru_cache(maxsize=16)
def _labels(job: Job) -> dict:
    items, labels = job.items, {}
    of_layer: dict[int, list[Item]] = {}
    for item in items:
        if len(item.layers) > 1:
            first, last = job.layers[item.layers[0]].name, job.layers[item.layers[-1]].name
            labels[item.index] = f"bucket {item.priority[0]}: {first}..{last} [item {item.index}]"
        else:
            of_layer.setdefault(item.layers[0], []).append(item)
    for i, pieces in of_layer.items():
        pieces.sort(key=lambda item: item.lo)
        for k, item in enumerate(pieces, 1):
            where = f" slice {k} of {len(pieces)}" if len(pieces) > 1 else ""
            labels[item.index] = f"{job.layers[i].name}{where} [item {item.index}]"
    return labels


def _sender(comm, job: Job, w: int):
    dtype = np.dtype(job.config.dtype) if job.config else np.float32
    sockets = None if job.policy.socket_hwm is None else _Sockets(comm, job.policy.socket_hwm)
    for it in range(job.iterations):
        _schedule(
            comm,
            job,
            w,
            lambda item, grads: comm.send(
                _payload(job, item, grads, dtype),
                job.server_of[item.index],
                TAG_PUSH,
                label=f"push {_label(job, item)}",
            ),
            sockets,
        )
    return {}


def _receiver(comm, job: Job, w: int):
    """Takes every reply; a layer's weights go to compute each time all the items covering
    it are back. A round is one iteration's replies: ``recv_any`` takes the earliest among
    the servers that still owe this worker a reply of the round, so it never waits on a
    server that waits for this worker's next pushes (nor, under OD-SGD, takes the next
    iteration's reply from one server before this iteration's from another)."""
    items = job.items
    compute = job.rank_of("compute", w)
    weights, covering = {}, _covering(items)
    missing = dict(covering)
    per_server = [job.server_of.count(s) for s in range(job.servers)]
    owed = [0] * job.servers
    for _ in range(job.iterations * len(items)):
        if not any(owed):
            owed = list(per_server)
        if job.servers == 1:
            arr = comm.recv(source=0, tag=TAG_REPLY)
        else:
            arr = comm.recv_any([s for s in range(job.servers) if owed[s]], TAG_REPLY)[1]
        owed[job.server_of[int(arr[0])]] -= 1
        item = items[int(arr[0])]
        weights[item.index] = arr[1:]
        for i in item.layers:
            missing[i] -= 1
            if not missing[i]:
                comm.signal(
                    _layer_values(job, i, items, weights), compute, TAG_PARAMS + i, f"weights of {job.layers[i].name}"
                )
                missing[i] = covering[i]
    return {}


def _covering(items: list[Item]) -> dict:
    """How many items cover each layer."""
    count = {}
    for item in items:
        for i in item.layers:
            count[i] = count.get(i, 0) + 1
    return count


def _layer_values(job: Job, i: int, items: list[Item], values: dict) -> np.ndarray:
    """Layer i's elements gathered from the items that cover it."""
    if job.config is None:
        return np.zeros(0)
    lo, hi = job.layers[i].offset, job.layers[i].offset + job.layers[i].params
    out = np.empty(hi - lo, np.dtype(job.config.dtype))
    for item in items:
        a, b = max(lo, item.lo), min(hi, item.hi)
        if a < b:
            out[a - lo : b - lo] = values[item.index][a - item.lo : b - item.lo]
    return out


def _server(comm, job: Job, s: int):
    """BSP per item, as MXNet's server (``DataHandleDefault`` in kvstore_dist_server.h at
    v1.3.0): it takes the pushes as they arrive and updates an item when its W-th push is
    in, summing them in worker order (as dlsys.ps does), then replies.

    The workers need not post their items in one order (co-located, a worker's pushes to
    its own server take the loopback, so its link frees sooner and its policy may pick
    differently). ``recv_any`` takes the earliest arrival among the workers that still owe
    this server a push of its current round (an iteration: every worker pushes every item
    of an iteration before it needs the replies), so it never waits on a worker that waits
    for it. With ``Policy.server_priority`` (P3) it takes in every push that has arrived
    and handles the one of highest priority first (``_next_by_priority``)."""
    items = job.items
    mine = [item for item in items if job.server_of[item.index] == s]
    senders = [job.rank_of("sender", w) for w in range(job.workers)]
    real = job.config is not None
    if real:
        weights = build_model(job.config).params
        grad = np.zeros_like(weights)
        sgd = {
            item.index: optim.SGD(
                weights[item.lo : item.hi], grad[item.lo : item.hi], job.config.lr, job.config.momentum
            )
            for item in mine
        }
    sockets = None if job.policy.socket_hwm is None else _Sockets(comm, job.policy.socket_hwm)
    owed = {sender: 0 for sender in senders}  # pushes each worker still owes this round
    arrived: dict[int, dict[int, np.ndarray]] = {}  # item -> worker -> values
    queued: list = []  # server_priority: the pushes in, not yet handled: (priority, src, array)
    for _ in range(len(mine) * job.iterations):
        while True:
            if not any(owed.values()) and not queued:
                owed = {sender: len(mine) for sender in senders}
            if job.policy.server_priority:
                src, arr = _next_by_priority(comm, job, owed, queued)
            else:
                src, arr = comm.recv_any([sender for sender in senders if owed[sender]], TAG_PUSH)
                owed[src] -= 1
            k = int(arr[0])
            arrived.setdefault(k, {})[senders.index(src)] = arr[1:]
            if len(arrived[k]) == job.workers:
                break
        item, values = items[k], arrived.pop(k)
        comm.charge_reduction(4 * item.size * job.workers, label="aggregate")
        comm.compute(flops=UPDATE_FLOPS_PER_ELEMENT * item.size, label=f"update {_label(job, item)}")
        comm.compute(seconds=job.server_slice_s, label=f"server's per-slice cost {_label(job, item)}")
        if real:
            g = grad[item.lo : item.hi]
            g[...] = 0
            for w in range(job.workers):
                g += values[w] / job.workers
            sgd[k].step()
            reply = np.concatenate([[k], weights[item.lo : item.hi]]).astype(weights.dtype)
        else:
            reply = LogicalArray(np.array([k], np.float32), scale=item.size + 1)
        for w in range(job.workers):
            receiver = job.rank_of("receiver", w)
            send = functools.partial(comm.send, reply, receiver, TAG_REPLY, label=f"pull {_label(job, item)}")
            if sockets is None:
                send()
            else:  # P3's KVServer::Response: Van::Send on the worker's socket, blocking this thread
                sockets.send(receiver, send)
    return {}


def _next_by_priority(comm, job: Job, owed: dict, queued: list) -> tuple[int, np.ndarray]:
    """The next push P3's server handles: its receiving thread queues every message as it
    arrives and its handler thread pops the one of highest priority (P3's ps-lite:
    src/van.cc line 354, ``Customer::Accept``, pushes into ``recv_queue_``, a
    ``ThreadsafeQueue`` ordered on ``meta.priority``, include/ps/internal/threadsafe_queue.h
    lines 45-52, which the worker set from the slice's priority, kv_app.h line 537, and the
    wire carries, src/van.cc lines 369 and 409; customer.cc, ``Customer::Receiving``, pops
    it and runs the handler, whose reply blocks it). So every push in by now is taken in
    first (one recv each, in arrival order), and a newly arrived slice near the input
    overtakes the queued ones. Stock ps-lite's queue is first in first out (MXNet: the
    caller's ``recv_any``)."""
    while any(owed.values()):
        candidates = [sender for sender, n in owed.items() if n]
        src, arrive_s = comm.peek_any(candidates, TAG_PUSH)
        if queued and arrive_s > comm.clock:
            break
        arr = comm.recv(source=src, tag=TAG_PUSH)
        owed[src] -= 1
        heapq.heappush(queued, (job.items[int(arr[0])].priority, src, arr))  # (priority, src): unique in a round
    _, src, arr = heapq.heappop(queued)
    return src, arr


def _allreduce_comm(comm, job: Job, w: int):
    """One all-reduce (mean) per item, in the policy's order, among the communication ranks;
    a layer's mean gradient goes to compute once every item covering it is reduced."""
    group = Group(comm, [job.rank_of("comm", v) for v in range(job.workers)])
    items = job.items
    compute, covering = job.rank_of("compute", w), _covering(items)
    for it in range(job.iterations):
        missing, reduced = dict(covering), {}

        def post(item, grads):
            if job.config is None:  # one real element per block, each standing for its block's bytes
                blocks = np.array_split(np.arange(item.size), group.size)
                payload = per_block(np.zeros(group.size, np.float32), [max(len(b), 1) for b in blocks])
            else:
                payload = _payload(job, item, grads, np.dtype(job.config.dtype))[1:]
            reduced[item.index] = collectives.allreduce(group, payload, op="mean")
            for i in item.layers:
                missing[i] -= 1
                if not missing[i]:
                    comm.signal(
                        _layer_values(job, i, items, reduced),
                        compute,
                        TAG_PARAMS + i,
                        f"mean gradient of {job.layers[i].name}",
                    )

        _schedule(comm, job, w, post)
    return {}


def steps_of(config: TrainConfig, workers: int) -> int:
    """Iterations of ``config.epochs`` epochs for ``workers`` workers (the data plan's)."""
    return config.epochs * steps_per_epoch(len(task_of(config).y_train), workers, config.batch_size)
