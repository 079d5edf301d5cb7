"""A parameter server after ps-lite (Li et al., "Scaling Distributed Machine Learning with
the Parameter Server", OSDI 2014), with BSP, SSP and ASP consistency.

World layout: ranks 0..S-1 are the server group, ranks S..S+W-1 the workers; workers
never talk to each other. Keys are the model's parameter tensors (``param_slices()``);
their values live in one flat key space that is cut into S contiguous ranges, one per
server, so a large tensor is sliced across servers (as ps-lite slices big arrays).

Worker API (``KVWorker``, ps-lite's names): ``push(keys, values)`` and ``pull(keys)`` are
non-blocking and return a timestamp; ``wait(ts)`` completes it. A message carries a key
list and a value list, as in ps-lite. Servers aggregate and update (SGD with momentum).

Consistency, with a worker's clock c = the number of gradients it has pushed:
* BSP: a pull at clock c waits until every worker has pushed c gradients; the server
  applies one update with the mean of the W gradients of each round.
* SSP(s) (Ho et al., NIPS 2013, "More Effective Distributed ML via a Stale Synchronous
  Parallel Parameter Server"): the pull waits while c - (slowest clock) > s, so a worker
  never reads weights missing more than s clocks of anybody's updates; s = 0 is BSP's gate.
* ASP: pulls never wait. SSP and ASP apply every gradient as it arrives, scaled by 1/W so
  that W pushes move the weights as far as one synchronous step.
Training stops after a budget of epochs * steps_per_epoch * W gradients: the server then
answers pulls with "stop". So under ASP fast workers simply do more of the work.

The simplest round of all, one server and plain synchronous averaging, is ``ps_round``:
the experiments that put a parameter server beside ring all-reduce use it.

Determinism: server 0 takes requests in virtual-arrival order (``comm.recv_any``); with
several servers it tells the others the order (a 1-number message), so every server makes
the same decisions. Under BSP the order is fixed (round robin), no ordering messages.

Failure: ``fail=(worker, step)`` makes that worker crash at that step. ps-lite's scheduler
notices a dead node by its missing heartbeats; we model the notice as a LEAVE message the
worker sends as it dies. Under SSP/ASP the servers drop it from the clock gate and the
others finish the budget; under BSP no round can complete, so the servers fail the run
with an error naming the worker.
"""

from __future__ import annotations

import math
import os
import numpy as np

from ..learn import optim
from ..collectives.compressed import encode
from ..compress import DGCMemory, frame, payload_nbytes, unframe
from ..learn.task import (Compression, TrainConfig, accuracy, batch_indices, build_model, gradient, progress_bar,
                           steps_per_epoch, task_of)

CONSISTENCY = ("bsp", "ssp", "asp")
PULL, PUSH, LEAVE = 0, 1, 2
REQUEST, DATA, REPLY, ORDER, GATHER = 21, 22, 23, 24, 25  # message tags
STOP = -1.0  # the clock in a reply that tells the worker training is over
UPDATE_FLOPS_PER_ELEMENT = 4  # momentum SGD: v = mu v + g; w -= lr v


class WorkerFailed(RuntimeError):
    """A worker left a BSP run: no synchronous round can complete without it."""


def ps_round(comm, grad=None):
    """One synchronous parameter-server round, rank 0 the server: every worker (ranks
    1..W) pushes its gradient ``grad``, the server averages the W gradients and sends the
    mean back to every worker. Returns the mean on every rank (``grad`` is unused on rank 0).

    The server's ingress carries W n bytes and its egress another W n, where a ring
    all-reduce puts 2 (W-1)/W n on every link: one round costs
    2 (alpha + n beta) + 2 (W-1) n / B (``experiments.ps_closed_form_s``).
    """
    workers = comm.size - 1
    if comm.rank == 0:
        total = sum(comm.recv(w, label="push gradient") for w in range(1, workers + 1))
        mean = total / workers
        for w in range(1, workers + 1):
            comm.send(mean, w, label="pull mean")
        return mean
    comm.send(grad, 0, label="push gradient")
    return comm.recv(0, label="pull mean")


class KeyLayout:
    """Keys 0..K-1 of sizes `sizes` in one flat space; server s owns [bounds[s], bounds[s+1])."""

    def __init__(self, sizes, servers: int):
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = int(self.offsets[-1])
        if not 1 <= servers <= total:
            raise ValueError(f"servers must be in 1..{total} (the number of parameters), got {servers}")
        self.bounds = [int(b[0]) for b in np.array_split(np.arange(total), servers)] + [total]
        self.servers = servers
        self._parts = {}

    def parts(self, keys: tuple) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each server: (positions in the concatenated values of `keys`, the same
        elements as offsets into that server's range)."""
        if keys not in self._parts:
            if not all(0 <= k < len(self.offsets) - 1 for k in keys):
                raise ValueError(f"keys must be in 0..{len(self.offsets) - 2}, got {keys}")
            elements = np.concatenate([np.arange(self.offsets[k], self.offsets[k + 1]) for k in keys])
            self._parts[keys] = [(np.flatnonzero((elements >= lo) & (elements < hi)),
                                  elements[(elements >= lo) & (elements < hi)] - lo)
                                 for lo, hi in zip(self.bounds, self.bounds[1:])]
        return self._parts[keys]


class KVWorker:
    """ps-lite's worker-side API. Pushes are not acknowledged (our sends are buffered, so
    ``wait`` on a push returns at once); a pull's ``wait`` returns (clock, values), or
    None once the servers say training is over."""

    def __init__(self, comm, layout: KeyLayout, compressor=None, memory=None):
        self.comm, self.layout, self.servers = comm, layout, layout.servers
        self.compressor, self.memory = compressor, memory
        self.encoded_nbytes = 0  # payload bytes pushed so far (with compression)
        self._pulls: dict[int, tuple] = {}
        self._ts = 0

    def _request(self, kind: int, keys) -> tuple:
        keys = tuple(int(k) for k in keys)
        for s in range(self.servers):
            self.comm.send(np.array([kind, *keys], np.int64), s, REQUEST, label=["pull", "push", "leave"][kind])
        return keys

    def push(self, keys, values) -> int:
        keys = self._request(PUSH, keys)
        for s, (positions, _) in enumerate(self.layout.parts(keys)):
            if self.compressor is None:
                self.comm.send(values[positions], s, DATA, label=f"push {positions.size} values")
                continue
            # each server's share is compressed alone (with its own residual) and decoded there
            payload, _ = encode(self.comm, values[positions], self.compressor, self.memory, f"server {s}",
                                share_scale=False)
            self.encoded_nbytes += payload_nbytes(payload)
            self.comm.send(frame(payload), s, DATA, label=f"push {positions.size} values compressed")
        self._ts += 1
        return self._ts

    def pull(self, keys) -> int:
        self._ts += 1
        self._pulls[self._ts] = self._request(PULL, keys)
        return self._ts

    def wait(self, ts: int):
        if ts not in self._pulls:
            return None
        keys = self._pulls.pop(ts)
        replies = [self.comm.recv(s, REPLY) for s in range(self.servers)]  # server 0 first: it gates
        if replies[0][0] == STOP:
            return None
        values = np.empty(sum(p.size for p, _ in self.layout.parts(keys)), replies[0].dtype)
        for (positions, _), reply in zip(self.layout.parts(keys), replies):
            values[positions] = reply[1:]
        return int(replies[0][0]), values

    def leave(self) -> None:
        """Tell every server this worker is gone (our stand-in for missed heartbeats)."""
        self._request(LEAVE, ())


class KVServer:
    """One server of the group: owns one key range, aggregates pushes, updates, gates pulls."""

    def __init__(self, comm, layout: KeyLayout, config: TrainConfig, workers: int, consistency: str,
                 staleness: int, budget: int, initial: np.ndarray, compressor=None, momentum=None):
        if consistency not in CONSISTENCY:
            raise ValueError(f"consistency must be one of {', '.join(CONSISTENCY)}, got {consistency!r}")
        self.comm, self.layout, self.consistency = comm, layout, consistency
        self.staleness = {"bsp": 0, "ssp": staleness, "asp": math.inf}[consistency]
        self.lo, self.hi = layout.bounds[comm.rank], layout.bounds[comm.rank + 1]
        self.weights = initial[self.lo:self.hi].copy()
        self.grad = np.zeros_like(self.weights)
        self.sgd = optim.SGD(self.weights, self.grad, config.lr, config.momentum if momentum is None else momentum)
        self.compressor = compressor  # decodes the workers' compressed pushes
        self.workers = list(range(layout.servers, layout.servers + workers))
        self.active = set(self.workers)
        self.clock = dict.fromkeys(self.workers, 0)  # gradients received from each worker
        self.pushes, self.budget, self.discarded = 0, budget, 0
        self.held: list[tuple[int, tuple]] = []  # pulls waiting at the clock gate
        self.in_round = 0  # BSP: gradients of the current round summed so far
        self.reads: list[dict] = []
        self.failed: list[dict] = []
        self._turn = 0

    def slowest(self) -> int:
        """The smallest clock among the active workers (those that neither left nor stopped)."""
        # BEGIN SOLUTION ssp_gate
        return min(self.clock[w] for w in self.active)
        # END SOLUTION

    def may_read(self, src: int) -> bool:
        """SSP's read rule (Ho et al. 2013): worker `src`, at clock c = self.clock[src], may
        read the weights once c - slowest <= self.staleness (0 under BSP, inf under ASP)."""
        # BEGIN SOLUTION ssp_gate
        return self.clock[src] - self.slowest() <= self.staleness
        # END SOLUTION

    def serve(self, progress: bool = False) -> None:
        """Handle requests until every worker has been told to stop (or has left)."""
        bar = progress_bar(self.budget - self.pushes, progress and self.comm.rank == 0,
                           f"parameter server ({self.consistency})")
        while self.active:
            src, meta = self.next_request()
            kind, keys = int(meta[0]), tuple(int(k) for k in meta[1:])
            if kind == PULL:
                self.held.append((src, keys))
            elif kind == PUSH:
                bar.update(self.push(src, keys, self.receive_gradient(src)))
            else:
                self.leave(src)
            self.answer_pulls()
        bar.close()

    def receive_gradient(self, src: int) -> np.ndarray:
        """A worker's gradient for this server's range, decoded if it came compressed."""
        values = self.comm.recv(src, DATA)
        if self.compressor is None:
            return values
        n = self.layout.bounds[self.comm.rank + 1] - self.layout.bounds[self.comm.rank]
        flops, nbytes = self.compressor.cost(n, self.weights.itemsize)[1]
        self.comm.compute(flops=flops, nbytes=nbytes, label="decompress push")
        return self.compressor.decompress(unframe(values), ((n,), self.weights.dtype))

    def next_request(self) -> tuple[int, np.ndarray]:
        """BSP: round robin. SSP/ASP: server 0 takes the earliest virtual arrival and tells
        the other servers whose request that was; they follow the same order."""
        if self.consistency == "bsp":
            src = self.workers[self._turn % len(self.workers)]
            while src not in self.active:
                self._turn += 1
                src = self.workers[self._turn % len(self.workers)]
            self._turn += 1
            return src, self.comm.recv(src, REQUEST)
        if self.comm.rank > 0:
            src = int(self.comm.recv(0, ORDER)[0])
            return src, self.comm.recv(src, REQUEST)
        src, meta = self.comm.recv_any(sorted(self.active), REQUEST)
        for s in range(1, self.layout.servers):
            self.comm.send(np.array([src], np.int64), s, ORDER, label="request order")
        return src, meta

    def push(self, src: int, keys: tuple, values: np.ndarray) -> bool:
        """Count the worker's clock, aggregate its gradient, update when `aggregate` says so.
        False if the budget is spent (the gradient is discarded)."""
        self.clock[src] += 1
        if self.pushes >= self.budget:
            self.discarded += 1
            return False
        self.pushes += 1
        self.comm.charge_reduction(values.nbytes, label="aggregate")
        if self.aggregate(self.layout.parts(keys)[self.comm.rank][1], values):
            self.sgd.step()
            self.comm.compute(flops=UPDATE_FLOPS_PER_ELEMENT * self.weights.size, label="server update")
        return True

    def aggregate(self, local: np.ndarray, values: np.ndarray) -> bool:
        """Add one worker's gradient `values` (for the elements `local` of this server's
        range) into self.grad; True when self.grad holds the update to apply now.
        BSP: self.grad = (1/W) sum of the W gradients of the round, ready after the W-th
        (self.in_round counts them; every round starts from zeros). SSP/ASP: self.grad is
        this gradient alone, g / W (zeros elsewhere), ready at once. W = len(self.workers)."""
        # BEGIN SOLUTION ps_aggregation
        if self.consistency != "bsp" or self.in_round == 0:
            self.grad[...] = 0
        self.grad[local] += values / len(self.workers)
        self.in_round = (self.in_round + 1) % len(self.workers) if self.consistency == "bsp" else 0
        return self.in_round == 0
        # END SOLUTION

    def leave(self, src: int) -> None:
        worker = src - self.layout.servers
        if self.consistency == "bsp":
            raise WorkerFailed(f"worker {worker} (rank {src}) failed at clock {self.clock[src]}; "
                               f"BSP cannot continue: every round needs all workers' gradients")
        self.active.discard(src)
        self.failed.append({"worker": worker, "clock": self.clock[src], "time_s": self.comm.clock})

    def answer_pulls(self) -> None:
        """The gate: a pull at clock c is answered once c - slowest <= s; once the budget is
        spent, every pull is answered with STOP."""
        waiting = []
        for src, keys in self.held:
            c = self.clock[src]
            if self.pushes >= self.budget:
                self.active.discard(src)
                self.comm.send(np.array([STOP], self.weights.dtype), src, REPLY, label="stop")
            elif self.may_read(src):
                self.reads.append({"worker": src - self.layout.servers, "clock": c, "slowest": self.slowest(),
                                   "staleness": c - self.slowest(), "time_s": self.comm.clock})
                local = self.layout.parts(keys)[self.comm.rank][1]
                self.comm.send(np.concatenate([[c], self.weights[local]]).astype(self.weights.dtype), src,
                               REPLY, label=f"pull reply clock {c} slowest {self.slowest()}")
            else:
                waiting.append((src, keys))
        self.held = waiting

    def save(self, directory) -> None:
        """This server's key range, optimizer state and clocks (each server saves its own)."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"server{self.comm.rank}.npz")
        state = {f"optimizer_{k}": v for k, v in self.sgd.state_dict().items()}
        np.savez(f"{path}.tmp.npz", weights=self.weights, pushes=self.pushes,
                 clocks=[self.clock[w] for w in self.workers], **state)
        os.replace(f"{path}.tmp.npz", path)

    def restore(self, directory) -> None:
        with np.load(os.path.join(directory, f"server{self.comm.rank}.npz")) as ckpt:
            if ckpt["weights"].shape != self.weights.shape or len(ckpt["clocks"]) != len(self.workers):
                raise ValueError(f"checkpoint in {directory} is for another model, server group or worker count")
            self.weights[...] = ckpt["weights"]
            self.sgd.load_state_dict({k[len("optimizer_"):]: ckpt[k] for k in ckpt.files if k.startswith("optimizer_")})
            self.pushes = int(ckpt["pushes"])
            self.clock = dict(zip(self.workers, (int(c) for c in ckpt["clocks"])))


def ps_program(comm, config: TrainConfig, servers: int = 1, consistency: str = "bsp", staleness: int = 0,
               fail: tuple[int, int] | None = None, checkpoint=None, resume=None, progress: bool = False,
               compression: Compression | None = None):
    """Rank program: ranks below `servers` serve, the others train. The budget is
    epochs * steps_per_epoch * W gradients, the work of `epochs` synchronous epochs.
    ``compression``: workers push compressed gradients (pulls stay dense), servers decode."""
    task, model = task_of(config), build_model(config)
    layout = KeyLayout([p.size for p in model.param_slices()], servers)
    workers = comm.size - servers
    budget = config.epochs * steps_per_epoch(len(task.y_train), workers, config.batch_size) * workers
    compressor, memory = (compression.build(config.seed, comm.rank, workers, config.momentum)
                          if compression else (None, None))
    if compressor is not None and compressor.same_draws_on_every_rank:
        raise ValueError(f"compression: {compression.method} cannot push to a parameter server: the server "
                         "would need every worker's draw of indices; use it with allreduce")
    if comm.rank >= servers:
        return _work(comm, config, task, model, layout, workers, fail, KVWorker(comm, layout, compressor, memory))
    server = KVServer(comm, layout, config, workers, consistency, staleness, budget, model.params, compressor,
                      0.0 if isinstance(memory, DGCMemory) else None)
    if resume:
        server.restore(resume)
    server.serve(progress)
    if checkpoint:
        server.save(checkpoint)
    if comm.rank > 0:
        comm.send(server.weights, 0, GATHER, label="gather weights for evaluation")
        return {}
    for s in range(servers):
        lo, hi = layout.bounds[s], layout.bounds[s + 1]
        model.params[lo:hi] = server.weights if s == 0 else comm.recv(s, GATHER)
    return {"params": model.params.copy(), "test_accuracy": accuracy(model, task.X_test, task.y_test),
            "reads": server.reads, "failed": server.failed, "gradients_applied": server.pushes,
            "gradients_discarded": server.discarded}


def _work(comm, config, task, model, layout, workers, fail, kv):
    """A worker: pull the weights, compute a gradient on this clock's batch, push it."""
    worker, n = comm.rank - layout.servers, len(task.y_train)
    keys = range(len(layout.offsets) - 1)
    per_epoch = steps_per_epoch(n, workers, config.batch_size)
    losses, curve, steps = [], [], 0
    while True:
        if fail is not None and fail == (worker, steps):
            kv.leave()
            break
        pulled = kv.wait(kv.pull(keys))
        if pulled is None:
            break
        clock, weights = pulled
        model.params[...] = weights
        if worker == 0 and clock % per_epoch == 0 and clock:
            curve.append({"epoch": clock // per_epoch, "time_s": comm.clock,
                          "test_accuracy": accuracy(model, task.X_test, task.y_test)})
        idx = batch_indices(n, clock, worker, workers, config.batch_size, config.seed)
        loss = gradient(comm, model, task.X_train[idx], task.y_train[idx])
        losses.append({"rank": comm.rank, "step": clock, "time_s": comm.clock, "loss": loss})
        if kv.compressor is not None and clock % per_epoch == 0:
            kv.compressor.set_epoch(clock // per_epoch)
        kv.push(keys, model.grads)
        steps += 1
    record = {"losses": losses, "accuracy_curve": curve, "steps": steps}
    if kv.compressor is not None:
        record.update(encoded_nbytes_per_step=kv.encoded_nbytes / max(steps, 1), dense_nbytes_per_step=model.grads.size * 4)
    return record
