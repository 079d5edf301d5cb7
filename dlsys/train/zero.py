"""ZeRO stages 1-3 and FSDP: data parallelism whose ranks each keep 1/P of the model states.

Rajbhandari et al. 2020, "ZeRO", sections 5 and 7. Every rank still computes the whole
model on its own batch; what it *keeps* between steps is cut P ways:

    stage 1 (P_os)        optimizer state: reduce-scatter the gradient, update the own
                          shard, all-gather the parameters.            2 (P-1)/P Psi sent
    stage 2 (P_os+g)      and gradients: each unit's gradient is reduce-scattered as soon
                          as its backward is done, only the shard kept. 2 (P-1)/P Psi
    stage 3 (P_os+g+p)    and parameters: a unit is all-gathered before its forward and
                          again before its backward, dropped after use. 3 (P-1)/P Psi

per rank and step (section 7.2; a ring all-reduce, DDP's, is 2 (P-1)/P Psi). FSDP (Zhao
et al. 2023) is stage 3 whose unit is a wrapped group of layers, one FlatParameter each,
optionally gathering the next unit while this one computes (``prefetch``: PyTorch's
``forward_prefetch`` and ``BackwardPrefetch.BACKWARD_PRE``; here a direct all-gather whose
sends leave before the current unit computes, so the two overlap in virtual time).

A *unit* is a run of layers whose parameters lie together in the model's flat buffer.
Its flat slice is padded with zeros to a multiple of P and cut into P equal shards, rank r
owning shard r (DeepSpeed ``stage_1_and_2.py``: ``bit16_groups_flat`` aligned to the
data-parallel size; PyTorch ``torch/distributed/fsdp/_flat_param.py``:
``FlatParamHandle._get_shard``, chunk and pad). The padded shard is exactly the block
``reduce_scatter`` gives rank r (np.array_split of a multiple of P). Stage 1 has one unit,
the whole model (DeepSpeed's one flat group); stage 2 reduces a layer at a time (its
``reduce_independent_p_g_buckets_and_remove_grads``); stage 3 gathers a layer at a time
(its ``fetch_sub_module`` / ``release_sub_module``); FSDP ``unit_layers`` layers at a time.

numpy cannot free part of one array, so the model keeps its full flat buffers; under
stage 3 the parameters outside the gathered units are NaN (a forward without its gather
shows at once), and the ledger (``comm.memory``) counts what a rank must hold: the shards,
the gathered units and the unit's gradient from its backward to its reduce-scatter.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .. import collectives
from ..learn import nn, optim
from ..learn.task import (
    TrainConfig,
    accuracy,
    build_model,
    lr_schedule,
    progress_bar,
    steps_per_epoch,
    task_of,
    training_batches,
)

STAGES = (1, 2, 3)
PREFETCH_TAG = 26  # a program tag (the collectives use their own, 1 << 20)
MakeOptimizer = Callable[[np.ndarray, np.ndarray], optim.Optimizer]  # (params, grads) -> optimizer over them


class Unit(NamedTuple):
    """Layers ``layers`` of the model, parameters ``[start, stop)`` of its flat buffers, and
    ``shard`` elements per rank: ceil((stop - start) / P), the padded slice over P."""

    layers: range
    start: int
    stop: int
    shard: int


def units_of(model: nn.Sequential, world: int, unit_layers: int | None = None) -> list[Unit]:
    """The model cut into units of ``unit_layers`` layers with parameters (None: one unit).
    A unit also runs the parameter-free layers (ReLU, GELU) that follow its own."""
    check_sharding(3, unit_layers)
    firsts = [s.layer for s in model.layer_slices()]
    groups = [firsts[i : i + (unit_layers or len(firsts))] for i in range(0, len(firsts), unit_layers or len(firsts))]
    bounds = [0] + [g[0] for g in groups[1:]] + [len(model.layers)]
    offsets = [s.offset for s in model.layer_slices()] + [model.params.size]
    starts = [offsets[firsts.index(g[0])] for g in groups] + [model.params.size]
    return [
        Unit(range(bounds[k], bounds[k + 1]), starts[k], starts[k + 1], -(-(starts[k + 1] - starts[k]) // world))
        for k in range(len(groups))
    ]


def check_sharding(stage: int, unit_layers: int | None = None, prefetch: bool = False) -> None:
    """ValueError naming the argument and the accepted values."""
    if stage not in STAGES:
        raise ValueError(
            f"stage must be a ZeRO stage 1, 2 or 3 (stage 0 is plain data parallel: the allreduce "
            f"strategy), got {stage!r}"
        )
    if unit_layers is not None and not (isinstance(unit_layers, int) and unit_layers >= 1):
        raise ValueError(f"unit_layers must be an integer >= 1 (layers with parameters per unit), got {unit_layers!r}")
    if prefetch and (stage != 3 or unit_layers is None):
        raise ValueError(
            "prefetch gathers the next FSDP unit early: it needs stage 3 with unit_layers (fsdp), "
            f"got stage {stage}, unit_layers {unit_layers}"
        )


class Sharded:
    """One rank's part of a model trained with ZeRO ``stage``: ``step(x, loss)`` runs a
    forward, a backward and an update and returns the loss; ``params()`` gathers the weights.

    Unit k's shard of the parameters is ``self.w[k]`` (under stages 1-2 a view of this
    rank's part of ``model.params``, which it updates in place), of the gradients
    ``self.g[k]``; ``self.opts[k]`` (``make_optimizer(w, g)``) updates it. Elementwise
    optimizers only (SGD, Adam): a layer-wise one (LARS, LAMB) needs a whole layer's norm."""

    def __init__(
        self,
        comm,
        model: nn.Sequential,
        stage: int,
        make_optimizer: MakeOptimizer,
        unit_layers: int | None = None,
        prefetch: bool = False,
    ):
        check_sharding(stage, unit_layers, prefetch)
        self.comm, self.model, self.stage, self.prefetch = comm, model, stage, prefetch
        self.units = units_of(model, comm.size, None if stage == 1 else unit_layers or 1)
        self.memory, r = comm.memory, comm.rank
        self.gathered: set[int] = set()  # stage 3: the units whose parameters are in the model
        self.posted: set[int] = set()  # prefetch: the units whose shards are on their way
        self.mine = [
            slice(min(u.start + r * u.shard, u.stop), min(u.start + (r + 1) * u.shard, u.stop)) for u in self.units
        ]  # this rank's real elements of every unit (padding is not stored)
        self.w = [model.params[s].copy() if stage == 3 else model.params[s] for s in self.mine]
        self.g = [np.zeros_like(w) for w in self.w] if stage >= 2 else [model.grads[s] for s in self.mine]
        self.opts = [make_optimizer(w, g) for w, g in zip(self.w, self.g)]
        self.memory.alloc("parameters", sum(w.nbytes for w in self.w) if stage == 3 else model.params.nbytes, "params")
        self.memory.alloc("gradients", sum(g.nbytes for g in self.g) if stage >= 2 else model.grads.nbytes, "grads")
        self.memory.alloc("optimizer", sum(getattr(o, n).nbytes for o in self.opts for n in o.state_names), "state")
        if stage == 3:
            model.params[...] = np.nan  # nothing is gathered yet

    def step(self, x: np.ndarray, loss: Callable[[np.ndarray], tuple[float, np.ndarray]]) -> float:
        """One step on this rank's batch ``x``; ``loss(logits) -> (loss, dloss/dlogits)``."""
        flops = self.model.flops(len(x))
        value, dout = loss(self._forward(np.asarray(x, self.model.params.dtype), flops))
        self.memory.alloc("activations", nn.activation_nbytes(self.model), "activations")
        self._backward(dout, flops)
        self.memory.free("activations")
        if self.stage == 1:  # the whole gradient, once the backward is done
            self._reduce_scatter(0)
        self._update()
        return value

    def _update(self) -> None:
        """The step's end: every unit's optimizer updates this rank's shard (``self.opts[k]``
        over ``self.w[k]``, ``self.g[k]``); then, under stages 1-2, whose model holds every
        parameter, every unit is all-gathered (``_allgather``) so the next forward sees all
        ranks' updated shards (stage 3 gathers a unit before its forward instead). ZeRO
        section 5.2 (P_os+g): a rank updates only the parameters of its own gradient shard;
        DeepSpeed stage_1_and_2.py ``step``: the fp32 partition's optimizer step, then
        ``all_gather_dp_groups`` of the updated partitions."""
        # BEGIN SOLUTION zero2_step
        for opt in self.opts:
            opt.step()
        if self.stage < 3:
            for k in range(len(self.units)):
                self._allgather(k)
        # END SOLUTION

    def _forward(self, x: np.ndarray, flops: list[int]) -> np.ndarray:
        for k, unit in enumerate(self.units):
            self._unshard(k)
            if self.prefetch:
                self._prefetch(k + 1)
            for i in unit.layers:
                x = self.model.layers[i].forward(x)
            self.comm.compute(flops=sum(flops[i] for i in unit.layers), label=f"forward unit {k}")
            self._reshard(k)
        return x

    def _backward(self, dout: np.ndarray, flops: list[int]) -> None:
        for k in reversed(range(len(self.units))):
            self._unshard(k)
            if self.prefetch:
                self._prefetch(k - 1)
            if self.stage >= 2:  # the unit's gradient, held from its backward to its reduce-scatter
                self.memory.alloc(
                    "buffers", self.units[k].shard * self.comm.size * self.model.grads.itemsize, f"grad unit {k}"
                )
            for i in reversed(self.units[k].layers):
                dout = self.model.layers[i].backward(dout)
            self.comm.compute(flops=2 * sum(flops[i] for i in self.units[k].layers), label=f"backward unit {k}")
            self._reshard(k)
            if self.stage >= 2:
                self._reduce_scatter(k)
                self.memory.free(f"grad unit {k}")

    def params(self) -> np.ndarray:
        """The full weights, every unit all-gathered (a copy)."""
        for k in range(len(self.units)):
            self._allgather(k)
        return self.model.params.copy()

    def _reduce_scatter(self, k: int) -> None:
        """Unit k's gradient ``model.grads[unit.start:unit.stop]``, padded with zeros to
        ``unit.shard * P`` elements and reduce-scattered (``collectives.reduce_scatter``):
        g[k] <- this rank's real elements (``self.mine[k]``) of (1/P) sum_r g_r, the mean
        over the P ranks' batches, as DDP's all-reduce averages."""
        # BEGIN SOLUTION zero2_step
        unit, mine = self.units[k], self.mine[k]
        padded = np.zeros(unit.shard * self.comm.size, self.model.grads.dtype)
        padded[: unit.stop - unit.start] = self.model.grads[unit.start : unit.stop]
        self.g[k][...] = collectives.reduce_scatter(self.comm, padded, op="mean")[: mine.stop - mine.start]
        # END SOLUTION

    def _padded_shard(self, k: int) -> np.ndarray:
        """This rank's shard of unit k as it travels: its real elements, then zeros."""
        shard = np.zeros(self.units[k].shard, self.model.params.dtype)
        shard[: self.w[k].size] = self.w[k]
        return shard

    def _allgather(self, k: int) -> int:
        """Every rank's shard of unit k (``_padded_shard``: the shard's real elements, then
        zeros) all-gathered (``collectives.allgather``) into ``model.params[unit.start:unit.stop]``,
        padding dropped; returns the bytes gathered (all P padded shards)."""
        # BEGIN SOLUTION zero2_step
        unit = self.units[k]
        full = collectives.allgather(self.comm, self._padded_shard(k))
        self.model.params[unit.start : unit.stop] = full.ravel()[: unit.stop - unit.start]
        return full.nbytes
        # END SOLUTION

    def _unshard(self, k: int) -> None:
        """Stage 3: gather unit k (if there is one and it is not gathered yet) and hold it;
        a prefetched unit's shards are already on their way: receive them."""
        if self.stage != 3 or not 0 <= k < len(self.units) or k in self.gathered:
            return
        if k in self.posted:
            unit, r = self.units[k], self.comm.rank
            full = np.concatenate(
                [
                    self._padded_shard(k)
                    if src == r
                    else self.comm.recv(source=src, tag=PREFETCH_TAG, label=f"prefetch unit {k}")
                    for src in range(self.comm.size)
                ]
            )
            self.model.params[unit.start : unit.stop] = full[: unit.stop - unit.start]
            self.posted.discard(k)
        else:
            self.memory.alloc("buffers", self._allgather(k), f"params unit {k}")
        self.gathered.add(k)

    def _prefetch(self, k: int) -> None:
        """FSDP's prefetch: send this rank's shard of unit k to every peer now, before the
        current unit computes, so the gather overlaps that compute in virtual time (sends
        are buffered: DESIGN.md's clock rules); ``_unshard(k)`` receives them. A direct
        all-gather: each rank sends (P-1) shards, the ring's bytes, without its P-1 steps."""
        if not 0 <= k < len(self.units) or k in self.gathered or k in self.posted:
            return
        shard = self._padded_shard(k)
        for dst in range(self.comm.size):
            if dst != self.comm.rank:
                self.comm.send(shard, dst, PREFETCH_TAG, label=f"prefetch unit {k}")
        self.memory.alloc("buffers", shard.nbytes * self.comm.size, f"params unit {k}")
        self.posted.add(k)

    def _reshard(self, k: int) -> None:
        """Stage 3: drop unit k's gathered parameters (NaN, so a use without a gather shows)."""
        if self.stage == 3:
            unit = self.units[k]
            self.model.params[unit.start : unit.stop] = np.nan
            self.memory.free(f"params unit {k}")
            self.gathered.discard(k)


def zero_program(
    comm,
    config: TrainConfig,
    stage: int,
    unit_layers: int | None = None,
    prefetch: bool = False,
    progress: bool = False,
) -> dict:
    """Synchronous data parallelism under ZeRO ``stage`` (FSDP: stage 3 with ``unit_layers``):
    the batches, the model and SGD with momentum of ``allreduce_program``, so the weights
    after k steps equal its weights (``tests/train/test_zero.py``: bitwise where the summation
    order is DDP's, within float32 rounding elsewhere). Every rank builds the same initial
    weights from ``config.seed`` (DDP broadcasts rank 0's, the same values). Rank 0 reports
    the weights and the test accuracy; every rank its losses and its ledger's peak bytes by kind."""
    check_sharding(stage, unit_layers, prefetch)
    task, model = task_of(config), build_model(config)
    per_epoch = steps_per_epoch(len(task.y_train), comm.size, config.batch_size)
    lr = lr_schedule(config, per_epoch)
    sharded = Sharded(
        comm,
        model,
        stage,
        lambda w, g: optim.SGD(w, g, lr, config.momentum, config.weight_decay),
        unit_layers,
        prefetch,
    )
    bar = progress_bar(config.epochs * per_epoch, progress and comm.rank == 0, f"ZeRO-{stage}")
    losses = []
    for step, X_b, y_b in training_batches(comm, config, task, per_epoch):
        bar.update()
        losses.append((step, comm.clock, sharded.step(X_b, lambda logits: nn.softmax_cross_entropy(logits, y_b))))
    bar.close()
    params = sharded.params()
    record: dict = {
        "losses": [{"rank": comm.rank, "step": s, "time_s": t, "loss": v} for s, t, v in losses],
        "memory_peak_bytes": dict(comm.memory.peak_by_kind),
    }
    if comm.rank == 0:
        record.update(params=params, test_accuracy=accuracy(model, task.X_test, task.y_test), accuracy_curve=[])
    return record
