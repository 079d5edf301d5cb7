"""One layout of a large run in closed form: a step's time by component and a rank's memory.

A layout puts ``gpus = dp x tp x pp`` GPUs on ``gpu_cluster`` in Megatron's order
(``dlsys.comm.Grid``: tp fastest, then dp, then pp), the global batch of B sequences cut
into m micro-batches of b sequences per data-parallel copy (B = dp m b). Sources: Narayanan
et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", section 3), Korthikanti et al. 2022 (activations, recomputation), ZeRO
(Rajbhandari et al. 2020), the Ultra-Scale Playbook (Tazi et al. 2025, huggingface/nanotron)
and "How to Scale Your Model" (Austin et al. 2025, jax-ml/scaling-book, "Transformer Math").

    compute    6 N B s / (gpus F)                   N (active) parameters, s tokens a sequence, F the
               (x 8/6 with full recomputation:      device's dense peak (no MFU factor: time at
               the forward runs twice)              peak; the attention scores' FLOPs not counted)
    TP         m (L/pp) k AR_tp(b s h e)            k = 4 all-reduces a layer (2 forward, 2
                                                    backward; 6 with full recomputation), on
                                                    NVLink, on the critical path (Megatron's
                                                    blocking all-reduces; sequence parallelism
                                                    swaps each for a reduce-scatter and an
                                                    all-gather of the same ring time)
    PP         2 (m + pp - 1) (alpha + b s h e / tp beta)
                                                    each of the m + pp - 1 slots of 1F1B waits for
                                                    one activation and one gradient from a
                                                    neighbour stage, each rank sending its 1/tp
                                                    (Narayanan section 4.1, scatter/gather), on
                                                    the pipeline's slowest hop
    EP         m (L/pp) k A2A_ep(b s h e k_top / tp) a mixture of experts over ep ranks (GShard
                                                    section 2.2): dispatch and combine, forward
                                                    and backward (k = 4; 6 with full
                                                    recomputation), pairwise all-to-alls of the
                                                    rank's tokens (its 1/tp: sequence
                                                    parallelism), each sent to k_top experts, on
                                                    the critical path (the experts wait for them)
    bubble     (pp - 1) / m (compute + TP)          1F1B's idle slots (Narayanan eq. 1): a
                                                    fraction (pp - 1)/(m + pp - 1) of compute +
                                                    TP + bubble
    DP         the gradients of a rank's N_r = N_stage / tp parameters over the dp copies, ring
               forms on the DP group's slowest link (``collectives.closed_form``):
               ZeRO 0  AR(g N_r), in the last micro-batch's backward (PyTorch DDP's buckets, Li
                       et al. 2020 section 3.2.3; gradient accumulation defers it to the last):
                       exposed max(0, AR - t_b)
               ZeRO 1  RS(g N_r) likewise; the AG(w N_r) of the updated weights after the
                       optimizer step is exposed (DeepSpeed stage_1_and_2.py ``step``)
               ZeRO 2  RS every micro-batch, each hidden behind its backward, + the AG exposed:
                       m max(0, RS - t_b) + AG
               ZeRO 3  every micro-batch gathers the weights for forward and again for
                       backward (prefetched: hidden behind that pass) and reduce-scatters the
                       gradients: m (max(0, AG - t_f) + max(0, AG + RS - t_b))
               with t_f, t_b one micro-batch's forward and backward (backward = 2 forwards;
               with full recomputation it also runs the forward again). Under expert
               parallelism a rank's experts (1/ep of the stage's) are reduced over the dp/ep
               copies holding the same experts and the rest over dp; both share the rank's
               link, so their times add before the overlap.

Memory is stage 0's (it holds the embedding, and 1F1B keeps min(pp, m) micro-batches of
activations in flight there, Korthikanti section 4.2.3: L layers' worth of one micro-batch):
``machine.memory.Layout`` of N_stage parameters over dp x tp ranks with Korthikanti's
activations of L/pp layers (sequence parallelism whenever tp > 1 unless the plan turns it off), ZeRO-3 gathering one
layer at a time with prefetch (FSDP's wrapping). Korthikanti counts a GPT layer (an MLP of
4h, every head with its own K and V): for SwiGLU and GQA the count is approximate, and for
a mixture of experts it counts one MLP's activations a token (not top_k of them). A rank of
an expert-parallel layout adds a second Layout: its 1/ep of the stage's experts, sharded by
ZeRO over the dp/ep copies that hold them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..collectives import closed_form
from ..comm import Grid
from ..machine.memory import RECOMPUTE, Layout, Transformer, bytes_per_param
from ..machine.topology import Topology, gpu_cluster
from .models import DEVICES, Device, Model

ISLAND = 8  # GPUs on one NVLink island of gpu_cluster (a DGX H100)
COMPONENTS = ("compute", "tp", "pp", "dp", "ep", "bubble")


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@dataclass(frozen=True)
class Plan:
    """A layout of ``model`` on ``gpus`` GPUs: degrees, ZeRO stage, micro-batches of
    ``micro_batch`` sequences, ``global_batch`` sequences a step, a recomputation policy.
    ``sequence_parallel`` defaults to tp > 1 (Megatron's practice); ``dropout`` False counts
    no dropout masks (a model trained without dropout, as the small transformer the rank
    programs run)."""

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

    def __post_init__(self):
        """Bad input by name, before anything runs (the CLI and the search check here)."""
        m = self.model
        for name in ("gpus", "tp", "pp", "micro_batch", "global_batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.tp not in [k for k in divisors(ISLAND) if m.heads % k == 0 and m.kv_heads % k == 0]:
            raise ValueError(
                f"tp must divide the NVLink island of {ISLAND} GPUs and the heads ({m.heads}, "
                f"{m.kv_heads} key-value): one of "
                f"{[k for k in divisors(ISLAND) if m.heads % k == 0 and m.kv_heads % k == 0]}, "
                f"got {self.tp}"
            )
        if self.pp > m.layers or m.layers % self.pp:
            raise ValueError(
                f"pp must divide the layer count {m.layers} (at most {m.layers} stages): one of "
                f"{divisors(m.layers)}, got {self.pp}"
            )
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
        bytes_per_param(self.optimizer, self.precision)

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def microbatches(self) -> int:
        """m = B / (dp b)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def grid(self) -> Grid:
        return Grid(self.dp, self.tp, self.pp, self.ep)

    def stage_params(self) -> int:
        """Stage 0's parameters: its L/pp layers and the embedding (everything when pp = 1)."""
        m = self.model
        if self.pp == 1:
            return m.params()
        return m.layers // self.pp * m.layer_params() + m.vocab * m.hidden

    def stage_expert_params(self) -> int:
        """Stage 0's experts (0 for a dense model): all of them, before ep spreads them."""
        return self.model.layers // self.pp * self.model.expert_layer_params()

    def layout(self) -> Layout:
        """Stage 0's ``machine.memory.Layout`` with one micro-batch of activations: all its
        parameters but the experts (``expert_layout``)."""
        m = self.model
        shape = Transformer(m.layers // self.pp, m.hidden, m.heads, m.seq_len, self.micro_batch)
        unit = m.layer_params() - m.expert_layer_params() if self.zero == 3 else 0
        return Layout(
            self.stage_params() - self.stage_expert_params(),
            self.dp * self.tp,
            self.zero,
            self.tp,
            self.optimizer,
            self.precision,
            unit_params=unit,
            prefetch=self.zero == 3,
            model=shape,
            sequence_parallel=self.tp > 1 if self.sequence_parallel is None else self.sequence_parallel,
            recompute=self.recompute,
            dropout=self.dropout,
        )

    def expert_layout(self) -> Layout | None:
        """Stage 0's rank's experts: 1/ep of the stage's, split by tp, ZeRO-sharded over the
        dp/ep copies holding the same ones (None for a dense model)."""
        if not self.model.experts:
            return None
        unit = self.model.expert_layer_params() // self.ep if self.zero == 3 else 0
        return Layout(
            self.stage_expert_params() // self.ep,
            self.dp // self.ep * self.tp,
            self.zero,
            self.tp,
            self.optimizer,
            self.precision,
            unit_params=unit,
            prefetch=self.zero == 3,
        )


def ep_degrees(model: Model, dp: int) -> list[int]:
    """The expert-parallel degrees of a layout with ``dp`` copies: divisors of dp that divide
    the experts (only 1 for a dense model)."""
    return [k for k in divisors(dp) if model.experts % k == 0] if model.experts else [1]


def memory(plan: Plan) -> dict[str, float]:
    """Stage 0's bytes per rank by kind (``machine.memory.KINDS``): the Layout's (plus the
    experts' Layout under a mixture of experts), with 1F1B's min(pp, m) micro-batches of
    activations in flight."""
    nbytes = plan.layout().bytes()
    experts = plan.expert_layout()
    if experts is not None:
        nbytes = {kind: n + experts.bytes()[kind] for kind, n in nbytes.items()}
    return {**nbytes, "activations": nbytes["activations"] * min(plan.pp, plan.microbatches)}


def slowest_link(network: Topology, members: list[int], ring: bool = True):
    """The slowest link (by bandwidth, then latency) between consecutive ``members`` (and from
    the last back to the first, for a ``ring``): a group whose hops mix links is charged as
    if every hop were on it (as ``train.tensor_parallel.group_costs``)."""
    hops = [network.link_between(a, b) for a, b in zip(members, members[1:] + (members[:1] if ring else []))]
    return max(hops, key=lambda link: (link.beta_s_per_byte, link.alpha_s), default=network.link)


def step_time(plan: Plan, device: Device = DEVICES["h100"], network: Topology | None = None) -> dict[str, float]:
    """One step's seconds by component (``COMPONENTS``; the module docstring's forms) and the total."""
    network = network or gpu_cluster()
    m, grid, mb = plan.model, plan.grid, plan.microbatches
    w_b, g_b, _ = bytes_per_param(plan.optimizer, plan.precision)
    full = plan.recompute == "full"
    compute = (
        6 * m.active_params() * plan.global_batch * m.seq_len / (plan.gpus * device.peak_flops) * (8 / 6 if full else 1)
    )
    per_mb = compute / mb
    t_f = per_mb / (4 if full else 3)
    t_b = per_mb - t_f
    activation_nbytes = plan.micro_batch * m.seq_len * m.hidden * w_b
    tp = 0.0
    if plan.tp > 1:
        per_layer = (6 if full else 4) * closed_form(
            "allreduce", "ring", plan.tp, activation_nbytes, slowest_link(network, grid.tp_members(0))
        )
        tp = mb * (m.layers // plan.pp) * per_layer
    pp = 0.0
    if plan.pp > 1:
        link = slowest_link(network, grid.pp_members(0), ring=False)
        pp = 2 * (mb + plan.pp - 1) * (link.alpha_s + activation_nbytes / plan.tp * link.beta_s_per_byte)
    ep = 0.0
    if plan.ep > 1:
        tokens_nbytes = activation_nbytes * m.top_k / plan.tp
        ep = (
            mb
            * (m.layers // plan.pp)
            * (6 if full else 4)
            * closed_form("alltoall", "pairwise", plan.ep, tokens_nbytes, slowest_link(network, grid.ep_members(0)))
        )
    bubble = (plan.pp - 1) / mb * (compute + tp)
    dp = 0.0
    if plan.dp > 1:
        # (group, parameters of a rank it reduces): the experts over the copies holding them, the rest over dp
        shares = [
            (members, n_r, slowest_link(network, members))
            for members, n_r in (
                (grid.dp_members(0), (plan.stage_params() - plan.stage_expert_params()) / plan.tp),
                (grid.expert_dp_members(0), plan.stage_expert_params() / (plan.ep * plan.tp)),
            )
            if n_r and len(members) > 1
        ]
        ar, rs, ag = (
            sum(closed_form(c, "ring", len(members), n_r * e, link) for members, n_r, link in shares)
            for c, e in (("allreduce", g_b), ("reduce_scatter", g_b), ("allgather", w_b))
        )
        dp = {
            0: max(0.0, ar - t_b),
            1: max(0.0, rs - t_b) + ag,
            2: mb * max(0.0, rs - t_b) + ag,
            3: mb * (max(0.0, ag - t_f) + max(0.0, ag + rs - t_b)),
        }[plan.zero]
    parts = {"compute": compute, "tp": tp, "pp": pp, "dp": dp, "ep": ep, "bubble": bubble}
    return {**parts, "total": sum(parts.values())}


def breakdown(plan: Plan, device: Device = DEVICES["h100"], network: Topology | None = None) -> dict:
    """A layout's record: its degrees, a step's seconds by component, stage 0's bytes per
    rank by kind, whether they fit ``device``, and the model FLOPs utilisation of the step
    (6 N B s / (gpus F total): the fraction of peak the whole step achieves)."""
    seconds, nbytes = step_time(plan, device, network), memory(plan)
    total_bytes = sum(nbytes.values())
    flops = 6 * plan.model.active_params() * plan.global_batch * plan.model.seq_len
    return {
        "model": plan.model.name,
        "gpus": plan.gpus,
        "dp": plan.dp,
        "tp": plan.tp,
        "pp": plan.pp,
        "ep": plan.ep,
        "zero": plan.zero,
        "micro_batch": plan.micro_batch,
        "microbatches": plan.microbatches,
        "global_batch": plan.global_batch,
        "recompute": plan.recompute,
        "seconds": seconds,
        "step_s": seconds["total"],
        "bytes": nbytes,
        "memory_bytes": total_bytes,
        "device": device.name,
        "device_bytes": device.memory_bytes,
        "fits": total_bytes <= device.memory_bytes,
        "mfu": flops / (plan.gpus * device.peak_flops * seconds["total"]),
    }
