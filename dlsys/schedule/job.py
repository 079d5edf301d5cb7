"""A scheduling job: the model's layers, the policy, the cluster, and which rank is which thread.

The ranks of each scheme and their machines are drawn in dlsys.schedule.engine's docstring.

A job is either *real* (``config``: the digits model trains; gradients are real numpy) or
*emulated* (a layer profile: every payload is a LogicalArray of one real element, the item's
index, standing for the item's bytes).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..learn import nn
from ..learn.task import TrainConfig
from .policy import Item, Layer, Policy

# the tags of a job's messages: a layer's gradient is TAG_GRAD + its index, its weights TAG_PARAMS + it
TAG_READY, TAG_PUSH, TAG_REPLY, TAG_GRAD, TAG_PARAMS = 31, 32, 33, 1000, 100_000
SCHEMES = ("ps", "allreduce")


@dataclass(frozen=True)
class Job:
    layers: tuple[Layer, ...]
    policy: Policy
    scheme: str = "ps"
    workers: int = 2
    servers: int = 1
    iterations: int = 3
    config: TrainConfig | None = None  # real training; None: an emulated profile
    colocated: bool = False  # server m on worker m's machine, sharing its links (dlsys.schedule.engine)
    server_slice_s: float = 0.0  # a server's time per item besides the update (server.MXNET_SERVER_SLICE_S)

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

    @functools.cached_property
    def covering(self) -> dict[int, int]:
        """How many items cover each layer."""
        count: dict[int, int] = {}
        for item in self.items:
            for i in item.layers:
                count[i] = count.get(i, 0) + 1
        return count

    @property
    def machine_of(self) -> tuple[int, ...]:
        """Each rank's machine (dlsys.schedule.engine): ps, servers 0..S-1 then the workers
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

    def label(self, item: Item) -> str:
        """What a trace viewer shows: "conv3 slice 2 of 5 [item 17]", "bucket 0: fc8..fc6 [item 0]"."""
        return self.labels[item.index]

    @functools.cached_property
    def labels(self) -> dict[int, str]:
        labels: dict[int, str] = {}
        of_layer: dict[int, list[Item]] = {}
        for item in self.items:
            if len(item.layers) > 1:
                first, last = self.layers[item.layers[0]].name, self.layers[item.layers[-1]].name
                labels[item.index] = f"bucket {item.priority[0]}: {first}..{last} [item {item.index}]"
            else:
                of_layer.setdefault(item.layers[0], []).append(item)
        for i, pieces in of_layer.items():
            pieces.sort(key=lambda item: item.lo)
            for k, item in enumerate(pieces, 1):
                where = f" slice {k} of {len(pieces)}" if len(pieces) > 1 else ""
                labels[item.index] = f"{self.layers[i].name}{where} [item {item.index}]"
        return labels

    def layer_values(self, i: int, values: dict) -> np.ndarray:
        """Layer i's elements gathered from the items that cover it (``values``: item -> its
        elements); emulated, nothing."""
        if self.config is None:
            return np.zeros(0)
        lo, hi = self.layers[i].offset, self.layers[i].offset + self.layers[i].params
        out = np.empty(hi - lo, np.dtype(self.config.dtype))
        for item in self.items:
            a, b = max(lo, item.lo), min(hi, item.hi)
            if a < b:
                out[a - lo : b - lo] = values[item.index][a - item.lo : b - item.lo]
        return out


def layers_of(model: nn.Sequential, batch: int) -> tuple[Layer, ...]:
    """The layers of a dlsys.learn.nn model: parameters, offsets and forward FLOPs for ``batch``."""
    by_layer = {s.layer: s for s in model.layer_slices()}
    out = []
    for i, (name, layer) in enumerate(zip(model.names, model.layers)):
        s = by_layer.get(i)
        out.append(Layer(name, s.size if s else 0, s.offset if s else 0, layer.flops(batch)))
    return tuple(out)
