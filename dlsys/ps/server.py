"""The server of the group: it owns one key range, aggregates the workers' pushes, updates
with momentum SGD and answers pulls at the consistency gate. It knows nothing of the model
or the data; compression, checkpoints, progress and logging come in as hooks (hooks.py)."""

from __future__ import annotations

import math

import numpy as np

from ..learn import optim
from .hooks import DENSE, NO_HOOKS
from .keys import KeyLayout
from .protocol import DATA, ORDER, PULL, PUSH, REPLY, REQUEST, STOP

CONSISTENCY = ("bsp", "ssp", "asp")
UPDATE_FLOPS_PER_ELEMENT = 4  # momentum SGD: v = mu v + g; w -= lr v


class WorkerFailed(RuntimeError):
    """A worker left a BSP run: no synchronous round can complete without it."""


class KVServer:
    """One server of the group (rank < layout.servers), for `workers` workers, until
    `budget` gradients are applied. `config` gives lr and momentum (`momentum` overrides it)."""

    def __init__(
        self,
        comm,
        layout: KeyLayout,
        config,
        workers: int,
        consistency: str,
        staleness: int,
        budget: int,
        initial: np.ndarray,
        momentum=None,
        codec=DENSE,
        hooks=NO_HOOKS,
    ):
        if consistency not in CONSISTENCY:
            raise ValueError(f"consistency must be one of {', '.join(CONSISTENCY)}, got {consistency!r}")
        self.comm, self.layout, self.consistency, self.codec, self.hooks = comm, layout, consistency, codec, hooks
        self.staleness = {"bsp": 0, "ssp": staleness, "asp": math.inf}[consistency]
        self.weights = initial[layout.bounds[comm.rank] : layout.bounds[comm.rank + 1]].copy()
        self.grad = np.zeros_like(self.weights)
        self.sgd = optim.SGD(self.weights, self.grad, config.lr, config.momentum if momentum is None else momentum)
        self.workers = list(range(layout.servers, layout.servers + workers))
        self.active = set(self.workers)
        self.clock = dict.fromkeys(self.workers, 0)  # gradients received from each worker
        self.pushes, self.budget, self.discarded = 0, budget, 0
        self.held: list[tuple[int, tuple]] = []  # pulls waiting at the clock gate
        self.in_round = 0  # BSP: gradients of the current round summed so far
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

    def serve(self) -> None:
        """Handle requests until every worker has been told to stop (or has left)."""
        self.hooks.started(self)
        while self.active:
            src, meta = self.next_request()
            kind, keys = int(meta[0]), tuple(int(k) for k in meta[1:])
            if kind == PULL:
                self.held.append((src, keys))
            elif kind == PUSH:
                values = self.codec.decode(self.comm, self.comm.recv(source=src, tag=DATA), self.weights)
                self.hooks.pushed(self, self.push(src, keys, values))
            else:
                self.leave(src)
            self.answer_pulls()
        self.hooks.finished(self)

    def next_request(self) -> tuple[int, np.ndarray]:
        """BSP: round robin. SSP/ASP: server 0 takes the earliest virtual arrival and tells
        the other servers whose request that was; they follow the same order."""
        if self.consistency == "bsp":
            src = self.workers[self._turn % len(self.workers)]
            while src not in self.active:
                self._turn += 1
                src = self.workers[self._turn % len(self.workers)]
            self._turn += 1
            return src, self.comm.recv(source=src, tag=REQUEST)
        if self.comm.rank > 0:
            src = int(self.comm.recv(source=0, tag=ORDER)[0])
            return src, self.comm.recv(source=src, tag=REQUEST)
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
        """A worker left: BSP cannot go on; SSP/ASP drop it from the gate."""
        if self.consistency == "bsp":
            raise WorkerFailed(
                f"worker {src - self.layout.servers} (rank {src}) failed at clock {self.clock[src]}; "
                f"BSP cannot continue: every round needs all workers' gradients"
            )
        self.active.discard(src)
        self.hooks.left(self, src)

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
                self.hooks.read(self, src)
                local = self.layout.parts(keys)[self.comm.rank][1]
                self.comm.send(
                    np.concatenate([[c], self.weights[local]]).astype(self.weights.dtype),
                    src,
                    REPLY,
                    label=f"pull reply clock {c} slowest {self.slowest()}",
                )
            else:
                waiting.append((src, keys))
        self.held = waiting
