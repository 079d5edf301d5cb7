"""A layout of a large run, as real runs build it, and what one GPU of it holds.

A layout puts ``gpus = dp x tp x pp`` GPUs of ``device`` in Megatron's order
(``dlsys.comm.Grid``: tp fastest, then dp, then pp), the global batch of B sequences cut
into m micro-batches of b sequences per data-parallel copy (B = dp m b). Its stages hold
L // pp layers each, and when pp does not divide L the L mod pp left over go one each to
the stages after the first (the first holds the embedding and the most activations in
flight; Megatron-LM's ``decoder_first_pipeline_num_layers`` makes the same choice by
hand); the first stage holds the embedding, the last the final norm and the output layer.
``virtual_stages`` v > 1 is Narayanan et al.'s interleaved 1F1B (2021, section 2.2.2): each
stage holds v chunks of L/(pp v) layers, m a multiple of pp.

Memory is that of the fullest GPU: stage 0 (its layers and the embedding, and 1F1B's
min(pp, m) micro-batches of activations in flight, Korthikanti et al. 2022 section 4.2.3:
L layers' worth of one micro-batch; interleaving keeps (1 + (pp - 1)/(pp v)) times that),
or, with uneven stages, stage 1 (one more layer, one micro-batch fewer in flight) if it
holds more: ``machine.memory.Layout`` of the stage's parameters over dp x tp ranks with
Korthikanti's activations (sequence parallelism whenever tp > 1 unless the plan turns it
off), ZeRO-3 gathering one layer at a time with prefetch (FSDP's wrapping). Korthikanti
counts a GPT layer (an MLP of 4h, every head with its own K and V): for SwiGLU and GQA the
count is approximate, and for a mixture of experts it counts one MLP's activations a token
(not top_k of them). A rank of an expert-parallel layout adds a second Layout: its 1/ep of
the stage's experts, sharded by ZeRO over the dp/ep copies that hold them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..comm.group import Grid
from ..machine.memory import RECOMPUTE, Layout, Transformer, bytes_per_param
from .devices import DEVICES, Device
from .models import Model


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def tp_degrees(model: Model, device: Device) -> list[int]:
    """Tensor-parallel degrees inside one NVLink island that divide the heads and key-value heads."""
    return [k for k in divisors(device.island) if model.heads % k == 0 and model.kv_heads % k == 0]


def virtual_degrees(model: Model, pp: int) -> list[int]:
    """Chunks a stage may hold (interleaved 1F1B): divisors of L / pp when pp > 1 divides L."""
    return divisors(model.layers // pp) if pp > 1 and model.layers % pp == 0 else [1]


def _check_int(plan, name: str) -> None:
    value = getattr(plan, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class Plan:
    """A layout of ``model`` on ``gpus`` GPUs of ``device``: degrees, ZeRO stage,
    micro-batches of ``micro_batch`` sequences, ``global_batch`` sequences a step, a
    recomputation policy, ``virtual_stages`` chunks a pipeline stage (interleaved 1F1B),
    ``tp_overlap`` (TP's collectives overlapped with the layer's GEMMs, as Megatron-Core's
    ``--tp-comm-overlap``, which needs sequence parallelism). ``sequence_parallel`` defaults
    to tp > 1 (Megatron's practice); ``dropout`` False counts no dropout masks (a model
    trained without dropout, as the small transformer the rank programs run)."""

    model: Model
    gpus: int
    tp: int = 1
    pp: int = 1
    zero: int = 0
    micro_batch: int = 1
    global_batch: int = 1024
    recompute: str = "none"
    optimizer: str = "adam"
    precision: str = "mixed"
    sequence_parallel: bool | None = None
    dropout: bool = True
    ep: int = 1
    device: Device = field(default=DEVICES["h100"])
    virtual_stages: int = 1
    tp_overlap: bool = False

    def __post_init__(self):
        """Bad input by name, before anything runs (the CLI and the search check here)."""
        m = self.model
        for name in ("gpus", "tp", "pp", "micro_batch", "global_batch", "virtual_stages"):
            _check_int(self, name)
        if self.tp not in tp_degrees(m, self.device):
            raise ValueError(
                f"tp must divide the NVLink island of {self.device.island} GPUs and the heads ({m.heads}, "
                f"{m.kv_heads} key-value): one of {tp_degrees(m, self.device)}, got {self.tp}"
            )
        if self.pp > m.layers:
            raise ValueError(f"pp must be in 1..{m.layers} (the layer count; uneven stages allowed), got {self.pp}")
        if self.gpus % (self.tp * self.pp):
            raise ValueError(
                f"gpus must be dp x tp x pp: tp x pp = {self.tp} x {self.pp} does not divide gpus = {self.gpus}"
            )
        if self.ep != 1 and not m.experts:
            raise ValueError(f"ep must be 1 for a dense model (experts = 0), got {self.ep!r}")
        if self.ep not in ep_degrees(m, self.dp):
            raise ValueError(
                f"ep must divide the experts ({m.experts}) and dp ({self.dp}): one of "
                f"{ep_degrees(m, self.dp)}, got {self.ep!r}"
            )
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be a ZeRO stage 0, 1, 2 or 3, got {self.zero}")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if self.global_batch % (self.dp * self.micro_batch):
            raise ValueError(
                f"global_batch must be dp x micro-batches x micro_batch: dp x micro_batch = "
                f"{self.dp} x {self.micro_batch} does not divide global_batch = {self.global_batch}"
            )
        if self.microbatches < self.pp:
            raise ValueError(
                f"microbatches must be >= pp = {self.pp} for 1F1B (every stage busy in the steady "
                f"state), got {self.microbatches} (global_batch / (dp x micro_batch))"
            )
        self._check_schedule()
        bytes_per_param(self.optimizer, self.precision)

    def _check_schedule(self) -> None:
        if self.virtual_stages not in virtual_degrees(self.model, self.pp):
            raise ValueError(
                f"virtual_stages must divide the layers of a stage (pp = {self.pp} dividing "
                f"{self.model.layers} layers; 1 without a pipeline or with uneven stages): one of "
                f"{virtual_degrees(self.model, self.pp)}, got {self.virtual_stages!r}"
            )
        if self.virtual_stages > 1 and self.microbatches % self.pp:
            raise ValueError(
                f"microbatches must be a multiple of pp = {self.pp} for interleaved 1F1B "
                f"(virtual_stages = {self.virtual_stages}), got {self.microbatches}"
            )
        if not isinstance(self.tp_overlap, bool):
            raise ValueError(f"tp_overlap must be True or False, got {self.tp_overlap!r}")
        if self.tp_overlap and not self.sp:
            raise ValueError("tp_overlap needs tp > 1 and sequence parallelism (Megatron-Core's --tp-comm-overlap)")

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def sp(self) -> bool:
        """Sequence parallelism: on whenever tp > 1 unless the plan turns it off."""
        return self.tp > 1 if self.sequence_parallel is None else self.sequence_parallel and self.tp > 1

    @property
    def microbatches(self) -> int:
        """m = B / (dp b)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def grid(self) -> Grid:
        return Grid(self.dp, self.tp, self.pp, self.ep)

    def stage_layers(self, stage: int = 0) -> int:
        """Layers of ``stage``: L // pp, one more for stages 1 .. L mod pp."""
        base, extra = divmod(self.model.layers, self.pp)
        return base + (1 if 1 <= stage <= extra else 0)

    def stage_params(self, stage: int = 0) -> int:
        """A stage's parameters: its layers and, on stage 0, the embedding (everything when pp = 1)."""
        m = self.model
        if self.pp == 1:
            return m.params()
        return self.stage_layers(stage) * m.layer_params() + (m.vocab * m.hidden if stage == 0 else 0)

    def stage_expert_params(self, stage: int = 0) -> int:
        """A stage's experts (0 for a dense model): all of them, before ep spreads them."""
        return self.stage_layers(stage) * self.model.expert_layer_params()

    def layout(self, stage: int = 0) -> Layout:
        """A stage's ``machine.memory.Layout`` with one micro-batch of activations: all its
        parameters but the experts (``expert_layout``)."""
        m = self.model
        shape = Transformer(self.stage_layers(stage), m.hidden, m.heads, m.seq_len, self.micro_batch)
        return self._layout(
            self.stage_params(stage) - self.stage_expert_params(stage),
            self.dp * self.tp,
            m.layer_params() - m.expert_layer_params(),
            model=shape,
            sequence_parallel=self.sp,
            recompute=self.recompute,
            dropout=self.dropout,
        )

    def expert_layout(self, stage: int = 0) -> Layout | None:
        """A stage's rank's experts: 1/ep of the stage's, split by tp, ZeRO-sharded over the
        dp/ep copies holding the same ones (None for a dense model)."""
        if not self.model.experts:
            return None
        return self._layout(
            self.stage_expert_params(stage) // self.ep,
            self.dp // self.ep * self.tp,
            self.model.expert_layer_params() // self.ep,
        )

    def _layout(self, params: int, ranks: int, unit: int, **activations) -> Layout:
        """``params`` held by ``ranks`` ranks under this plan's ZeRO stage, tp, optimizer and
        precision; ZeRO-3 gathers (and prefetches) them a layer's ``unit`` at a time."""
        return Layout(
            params,
            ranks,
            self.zero,
            self.tp,
            self.optimizer,
            self.precision,
            unit_params=unit if self.zero == 3 else 0,
            prefetch=self.zero == 3,
            **activations,
        )


def ep_degrees(model: Model, dp: int) -> list[int]:
    """The expert-parallel degrees of a layout with ``dp`` copies: divisors of dp that divide
    the experts (only 1 for a dense model)."""
    return [k for k in divisors(dp) if model.experts % k == 0] if model.experts else [1]


def stage_memory(plan: Plan, stage: int = 0) -> dict[str, float]:
    """A stage's bytes per rank by kind (``machine.memory.KINDS``): the Layout's (plus the
    experts' Layout under a mixture of experts), with 1F1B's min(pp - stage, m)
    micro-batches of activations in flight (x (1 + (pp - 1)/(pp v)) interleaved)."""
    nbytes = plan.layout(stage).bytes()
    experts = plan.expert_layout(stage)
    if experts is not None:
        nbytes = {kind: n + experts.bytes()[kind] for kind, n in nbytes.items()}
    in_flight: float = min(plan.pp - stage, plan.microbatches)
    if plan.virtual_stages > 1:
        in_flight *= 1 + (plan.pp - 1) / (plan.pp * plan.virtual_stages)
    return {**nbytes, "activations": nbytes["activations"] * in_flight}


def memory(plan: Plan) -> dict[str, float]:
    """The fullest GPU's bytes by kind: stage 0's, or stage 1's when uneven stages give it
    a layer more and that outweighs its micro-batch fewer in flight."""
    first = stage_memory(plan)
    if plan.pp == 1 or plan.model.layers % plan.pp == 0:
        return first
    second = stage_memory(plan, 1)
    return second if sum(second.values()) > sum(first.values()) else first
