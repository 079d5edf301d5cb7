"""One layout's step in closed form, by component, on its device's cluster.

Sources: Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", SC'21), Korthikanti et al. 2022 (activations, recomputation,
sequence parallelism), ZeRO (Rajbhandari et al. 2020), the Ultra-Scale Playbook (Tazi et
al. 2025) and "How to Scale Your Model" (Austin et al. 2025, "Transformer Math").

A stage's micro-batch costs c = its layers x (forward + backward) + the embedding (first
stage) + the head (last stage), each kernel as ``efficiency`` charges it on the device, and
its TP and EP communication; the slowest stage k sets the pace of 1F1B:

    compute    m c_k
    TP         m (layers of k) n AR_tp(b s h e)  n = 4 all-reduces a layer (Megatron's f and g,
                                                  2 forward, 2 backward; 6 with full
                                                  recomputation). Sequence parallelism is
                                                  charged as ``dlsys.train.tensor_parallel_costs``
                                                  emulates it (``collectives_per_step``): forward
                                                  2 all-gathers + 2 reduce-scatters, backward 4
                                                  + 2 (the backward gathers the inputs again for
                                                  the weights' gradients): 10 half-rings, 5
                                                  all-reduces' worth, 25% more than plain TP (7
                                                  with full recomputation); the head and the
                                                  embedding add one each. ``tp_overlap`` hides
                                                  them behind the layer's GEMMs: exposed
                                                  max(0, TP - GEMMs)
    EP         m (layers of k) n A2A_ep(b s h e k_top / tp)
                                                  dispatch and combine, forward and backward
                                                  (GShard section 2.2), n = 4 (6 with full
                                                  recomputation), on the critical path
    bubble     (sum of every stage's c + TP + EP - the slowest's) / v
                                                  1F1B's fill and drain (Narayanan eq. 1:
                                                  (pp - 1)/m of the step for equal stages),
                                                  interleaving divides it by v (section 2.2.2)
    PP         2 v (m + pp - 1) (alpha + b s h e / tp beta)
                                                  each slot waits for one activation and one
                                                  gradient from a neighbour stage, each rank
                                                  sending its 1/tp (section 4.1, scatter/gather),
                                                  v times as many with interleaving
    DP         the gradients of a rank's N_r = N_stage / tp parameters over the dp copies,
               ring forms on the DP group's slowest link (``collectives.closed_form``):
               ZeRO 0  max(0, AR(g N_r) - t_b): DDP's buckets in the last backward
               ZeRO 1  max(0, RS - t_b) + AG(w N_r): the updated weights gathered after the step
               ZeRO 2  m max(0, RS - t_b) + AG
               ZeRO 3  m (max(0, AG - t_f) + max(0, AG + RS - t_b))
               t_f, t_b the slowest stage's forward and backward of a micro-batch. Under
               expert parallelism the experts are reduced over the dp/ep copies holding them
               and the rest over dp; both share the rank's link, so their times add.
    optimizer  the rank's parameters' bytes (weights, gradients, state; 1/dp of the state
               with ZeRO >= 1) read and written once at HBM bandwidth

The step's FLOPs (``efficiency.executed_flops``, Megatron's count, equation 3 with full
recomputation) over its time and GPUs are the achieved FLOP/s a GPU that Narayanan et al.
report; MFU is the model FLOPs (no recomputation) over the device's peak.
"""

from __future__ import annotations

from ..collectives.dispatch import closed_form
from ..machine.memory import bytes_per_param
from ..machine.topology import Topology
from .devices import cluster
from .efficiency import backward_s, executed_flops, layer_times, model_flops
from .plan import Plan, memory

COMPONENTS = ("compute", "tp", "pp", "dp", "ep", "bubble", "optimizer")
CAVEATS = (
    "kernels at the device's measured matmul ceiling and HBM bandwidth (roofline, wave quantization); "
    "attention's scores through HBM (no FlashAttention); no kernel-launch gaps, data loading or stragglers; "
    "collectives in closed form on the datasheet links (NCCL reaches less); experts balanced"
)


def slowest_link(network: Topology, members: list[int], ring: bool = True):
    """The slowest link (by bandwidth, then latency) between consecutive ``members`` (and from
    the last back to the first, for a ``ring``): a group whose hops mix links is charged as
    if every hop were on it (as ``train.tensor_parallel_costs.group_costs``)."""
    hops = [network.link_between(a, b) for a, b in zip(members, members[1:] + (members[:1] if ring else []))]
    return max(hops, key=lambda link: (link.beta_s_per_byte, link.alpha_s), default=network.link)


def _stage_kinds(plan: Plan) -> list[tuple[int, bool, bool]]:
    """(layers, first, last) of every distinct kind of stage."""
    base, extra = divmod(plan.model.layers, plan.pp)
    if plan.pp == 1:
        return [(base, True, True)]
    last = base + (1 if extra == plan.pp - 1 else 0)
    kinds = [(base, True, False), (last, False, True)]
    if extra:
        kinds.append((base + 1, False, False))
    if plan.pp - 2 > extra:
        kinds.append((base, False, False))
    return kinds


def _tp_layer(plan: Plan, network: Topology) -> tuple[float, float]:
    """A layer's TP seconds for one micro-batch (exposed, with ``tp_overlap``), and one all-reduce's."""
    if plan.tp == 1:
        return 0.0, 0.0
    w_b = bytes_per_param(plan.optimizer, plan.precision)[0]
    nbytes = plan.micro_batch * plan.model.seq_len * plan.model.hidden * w_b
    allreduce = closed_form("allreduce", "ring", plan.tp, nbytes, slowest_link(network, plan.grid.tp_members(0)))
    count = (5 if plan.sp else 4) + (2 if plan.recompute == "full" else 0)
    seconds = count * allreduce
    if plan.tp_overlap:
        times = layer_times(plan.model, plan.device, plan.tp, plan.micro_batch, plan.sp, plan.dropout)
        seconds = max(0.0, seconds - times.gemm * (4 if plan.recompute == "full" else 3))
    return seconds, allreduce


def _ep_layer(plan: Plan, network: Topology) -> float:
    if plan.ep == 1:
        return 0.0
    w_b = bytes_per_param(plan.optimizer, plan.precision)[0]
    m = plan.model
    tokens_nbytes = plan.micro_batch * m.seq_len * m.hidden * w_b * m.top_k / plan.tp
    a2a = closed_form("alltoall", "pairwise", plan.ep, tokens_nbytes, slowest_link(network, plan.grid.ep_members(0)))
    return (6 if plan.recompute == "full" else 4) * a2a


def _dp(plan: Plan, network: Topology, t_f: float, t_b: float) -> float:
    if plan.dp == 1:
        return 0.0
    w_b, g_b, _ = bytes_per_param(plan.optimizer, plan.precision)
    grid = plan.grid
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
    mb = plan.microbatches
    return {
        0: max(0.0, ar - t_b),
        1: max(0.0, rs - t_b) + ag,
        2: mb * max(0.0, rs - t_b) + ag,
        3: mb * (max(0.0, ag - t_f) + max(0.0, ag + rs - t_b)),
    }[plan.zero]


def step_time(plan: Plan, network: Topology | None = None) -> dict[str, float]:
    """One step's seconds by component (``COMPONENTS``; the module docstring's forms) and the total."""
    network = network or cluster(plan.device)
    m, mb, v = plan.model, plan.microbatches, plan.virtual_stages
    times = layer_times(m, plan.device, plan.tp, plan.micro_batch, plan.sp, plan.dropout)
    layer_f, layer_b = times.forward, backward_s(times, plan.recompute)
    tp_layer, allreduce = _tp_layer(plan, network)
    ep_layer = _ep_layer(plan, network)
    stages = []  # (count of such stages, forward, backward, tp, ep) for one micro-batch
    for layers, first, last in _stage_kinds(plan):
        f = layers * layer_f + (times.embedding if first else 0) + (times.head if last else 0)
        b = layers * layer_b + (2 * times.embedding if first else 0) + (2 * times.head if last else 0)
        tp = layers * tp_layer + allreduce * ((1 if first else 0) + (1 if last else 0))
        stages.append((f, b, tp, layers * ep_layer))
    slowest = max(stages, key=lambda s: sum(s))
    total = m.layers * (layer_f + layer_b + tp_layer + ep_layer) + 3 * (times.embedding + times.head)
    total += 2 * allreduce
    t_f, t_b = slowest[0], slowest[1]
    pp = 0.0
    if plan.pp > 1:
        w_b = bytes_per_param(plan.optimizer, plan.precision)[0]
        link = slowest_link(network, plan.grid.pp_members(0), ring=False)
        nbytes = plan.micro_batch * m.seq_len * m.hidden * w_b / plan.tp
        pp = 2 * v * (mb + plan.pp - 1) * (link.alpha_s + nbytes * link.beta_s_per_byte)
    parts = {
        "compute": mb * (t_f + t_b),
        "tp": mb * slowest[2],
        "pp": pp,
        "dp": _dp(plan, network, t_f, t_b),
        "ep": mb * slowest[3],
        "bubble": max(0.0, total - sum(slowest)) / v if plan.pp > 1 else 0.0,
        "optimizer": _optimizer_s(plan),
    }
    return {**parts, "total": sum(parts.values())}


def _optimizer_s(plan: Plan) -> float:
    """The optimizer step: every byte of the rank's weights, gradients and state read and written once."""
    w_b, g_b, s_b = bytes_per_param(plan.optimizer, plan.precision)
    n_r = plan.stage_params() / plan.tp
    sharded = plan.dp if plan.zero >= 1 else 1
    return 2 * n_r * (w_b + g_b + s_b / sharded) / plan.device.hbm_Bps


def breakdown(plan: Plan, network: Topology | None = None) -> dict:
    """A layout's record: its degrees, a step's seconds by component, the fullest GPU's
    bytes by kind, whether they fit the device, the achieved FLOP/s a GPU (Megatron's count:
    the FLOPs the step runs, recomputation included) and the MFU (model FLOPs over peak)."""
    seconds, nbytes = step_time(plan, network), memory(plan)
    total_bytes = sum(nbytes.values())
    step, gpus, device = seconds["total"], plan.gpus, plan.device
    achieved = executed_flops(plan.model, plan.global_batch, plan.recompute) / (gpus * step)
    return {
        "model": plan.model.name,
        "gpus": gpus,
        **{k: getattr(plan, k) for k in ("dp", "tp", "pp", "ep", "zero", "micro_batch", "microbatches")},
        "global_batch": plan.global_batch,
        "recompute": plan.recompute,
        "sequence_parallel": plan.sp,
        "virtual_stages": plan.virtual_stages,
        "tp_overlap": plan.tp_overlap,
        "seconds": seconds,
        "step_s": step,
        "bytes": nbytes,
        "memory_bytes": total_bytes,
        "device": device.name,
        "device_bytes": device.memory_bytes,
        "device_peak_flops": device.peak_flops,
        "fits": total_bytes <= device.memory_bytes,
        "tflops": achieved / 1e12,
        "hfu": achieved / device.peak_flops,
        "mfu": model_flops(plan.model, plan.global_batch) / (gpus * device.peak_flops * step),
    }
