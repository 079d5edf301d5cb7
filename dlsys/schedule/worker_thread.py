"""A worker's compute thread, and its receiver (parameter-server scheme).

Compute does forward layer by layer, then backward layer by layer, handing each gradient to
the communication thread as its backward ends. Before forward of the next iteration it waits
for the updates as the policy's ``forward`` says: "all" (every layer first), "layer" (forward
l waits only for layer l's update: P3, ByteScheduler, MXNet) or "stale" (OD-SGD: the next
forward runs on locally updated weights; the global update arrives a step late).

The numbers are a ``Training`` (a real job: the digits model, its batches, its loss) or an
``Emulated`` one (a layer profile: only the time, from the layers' FLOPs); the thread's
messages and compute are the same for both.
"""

from __future__ import annotations

import numpy as np

from ..learn import nn, optim
from ..learn.task import TrainConfig, batch_indices, build_model, task_of
from .job import TAG_GRAD, TAG_PARAMS, TAG_READY, TAG_REPLY, Job


class Emulated:
    """A layer profile's numbers: none; every hook does nothing."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def take(self, i: int, values: np.ndarray) -> None:
        """Layer i's update is back (ps: its weights; allreduce: its mean gradient)."""

    def local_step(self) -> None:
        """OD-SGD: w -= lr g on the weights the worker has, with its own last gradient."""

    def batch(self, it: int) -> None:
        """This worker's batch of iteration ``it`` (the data plan's)."""

    def forward(self, i: int) -> None:
        pass

    def loss(self) -> None:
        pass

    def backward(self, i: int) -> None:
        pass

    def gradient(self, i: int) -> np.ndarray:
        return np.zeros(0)

    def keep_gradient(self) -> None:
        """OD-SGD: keep this iteration's gradient for the next local step."""

    def record(self, w: int) -> dict:
        return {}


class Training(Emulated):
    """A real job's numbers: the model trains on its batches, the loss is recorded."""

    def __init__(self, job: Job, config: TrainConfig, w: int):
        super().__init__()
        self.job, self.config, self.w = job, config, w
        self.model = model = build_model(config)
        self.local_grads = np.zeros(0)
        self.optimizers: dict[int, optim.SGD] = {}
        if job.scheme == "allreduce":  # the workers update their own copies, layer by layer
            self.optimizers = {
                i: optim.SGD(
                    model.params[l.offset : l.offset + l.params],
                    model.grads[l.offset : l.offset + l.params],
                    config.lr,
                    config.momentum,
                )
                for i, l in enumerate(job.layers)
                if l.params
            }
        self.task = task_of(config)

    def _range(self, i: int) -> slice:
        layer = self.job.layers[i]
        return slice(layer.offset, layer.offset + layer.params)

    def take(self, i, values):
        if self.job.scheme == "ps":
            self.model.params[self._range(i)] = values
        else:
            self.model.grads[self._range(i)] = values
            self.optimizers[i].step()

    def local_step(self):
        self.model.params -= self.config.lr * self.local_grads

    def batch(self, it):
        n, config = len(self.task.y_train), self.config
        self.idx = batch_indices(n, it, self.w, self.job.workers, config.batch_size, config.seed)
        self.x = np.asarray(self.task.X_train[self.idx], dtype=self.model.params.dtype)

    def forward(self, i):
        self.x = self.model.layers[i].forward(self.x)

    def loss(self):
        loss, self.dout = nn.softmax_cross_entropy(self.x, self.task.y_train[self.idx])
        self.losses.append(float(loss))

    def backward(self, i):
        self.dout = self.model.layers[i].backward(self.dout)

    def gradient(self, i):
        return self.model.grads[self._range(i)].copy()

    def keep_gradient(self):
        self.local_grads = self.model.grads.copy()

    def record(self, w):
        if w:
            return {}
        task, model = self.task, self.model
        return {
            "params": model.params.copy(),
            "test_accuracy": float(np.mean(model.forward(task.X_test).argmax(axis=1) == task.y_test)),
        }


def compute(comm, job: Job, w: int) -> dict:
    """Forward layer by layer (waiting for each layer's update as the policy says), then
    backward layer by layer, handing each gradient to the communication thread."""
    layers, forward = job.layers, job.policy.forward
    send_to = job.rank_of("sender" if job.scheme == "ps" else "comm", w)
    take_from = job.rank_of("receiver" if job.scheme == "ps" else "comm", w)
    numbers = Training(job, job.config, w) if job.config is not None else Emulated()
    with_params = [i for i, l in enumerate(layers) if l.params]
    backward_ends = []

    def update(i: int) -> None:
        numbers.take(i, comm.wait_signal(take_from, TAG_PARAMS + i, f"wait for {layers[i].name}"))

    for it in range(job.iterations):
        if it and forward == "all":
            for i in with_params:
                update(i)
        if it and forward == "stale":  # OD-SGD: the global weights of step it - 2, then a local step
            for i in with_params:
                if it >= 2:
                    update(i)
            numbers.local_step()
        numbers.batch(it)
        for i, layer in enumerate(layers):
            if it and forward == "layer" and layer.params:
                update(i)
            comm.compute(flops=layer.flops, label=f"forward {layer.name}")
            numbers.forward(i)
        numbers.loss()
        clock, ready = comm.clock, {}
        for i in reversed(range(len(layers))):
            clock += comm.node.compute_s(2 * layers[i].flops)
            ready[i] = clock
        comm.signal(np.array([ready[i] for i in with_params]), send_to, TAG_READY, "backward starts")
        for i in reversed(range(len(layers))):
            numbers.backward(i)
            comm.compute(flops=2 * layers[i].flops, label=f"backward {layers[i].name}")
            if layers[i].params:
                comm.signal(numbers.gradient(i), send_to, TAG_GRAD + i, f"gradient of {layers[i].name}")
        backward_ends.append(comm.clock)
        if forward == "stale":
            numbers.keep_gradient()
    for _ in range(min(2, job.iterations) if forward == "stale" else 1):
        for i in with_params:  # the updates not taken yet: the final global weights
            update(i)
    return {"backward_ends_s": backward_ends, "end_s": comm.clock, "losses": numbers.losses} | numbers.record(w)


def receiver(comm, job: Job, w: int) -> dict:
    """Takes every reply; a layer's weights go to compute each time all the items covering
    it are back. A round is one iteration's replies: ``recv_any`` takes the earliest among
    the servers that still owe this worker a reply of the round, so it never waits on a
    server that waits for this worker's next pushes (nor, under OD-SGD, takes the next
    iteration's reply from one server before this iteration's from another)."""
    items, covering = job.items, job.covering
    compute = job.rank_of("compute", w)
    weights: dict[int, np.ndarray] = {}
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
                comm.signal(job.layer_values(i, weights), compute, TAG_PARAMS + i, f"weights of {job.layers[i].name}")
                missing[i] = covering[i]
    return {}
