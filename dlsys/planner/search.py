"""Every layout of a model on a number of GPUs, those that fit a device, fastest first.

The Ultra-Scale Playbook's recipe ("Finding the best training configuration": first fit a
replica in memory, then reach the global batch, then maximise throughput) and the JAX
scaling book's ("How to Scale Your Model", "All the Transformer Math": enumerate the
shardings, keep those that fit, compare their step times) done exhaustively: tp among the
divisors of the NVLink island (8) that divide the heads, pp among the divisors of the layer
count, dp = gpus / (tp pp), ep among the divisors of dp that divide a mixture's experts
(1 for a dense model), ZeRO 0..3, micro-batches of ``MICRO_BATCHES`` sequences, each
recomputation policy; a degree given is held fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..machine.memory import RECOMPUTE
from ..machine.topology import Topology, gpu_cluster
from .cost import ISLAND, Plan, breakdown, divisors, ep_degrees
from .models import DEVICES, Device, Model

MICRO_BATCHES = (1, 2, 4, 8)


def candidates(model: Model, gpus: int, global_batch: int = 1024, **fixed) -> list[Plan]:
    """Every valid ``Plan`` (``Plan``'s checks pass); ``fixed`` holds any of tp, pp, ep, zero,
    micro_batch, recompute, optimizer, precision at one value."""
    choices: dict[str, Sequence] = {
        "tp": divisors(ISLAND),
        "pp": divisors(model.layers),
        "zero": range(4),
        "micro_batch": MICRO_BATCHES,
        "recompute": RECOMPUTE,
    }
    choices.update({k: [v] for k, v in fixed.items() if k in choices and v is not None})
    ep = fixed.get("ep")
    extra = {k: v for k, v in fixed.items() if k not in choices and k != "ep" and v is not None}
    plans = []
    for tp, pp, zero, micro_batch, recompute in itertools.product(*choices.values()):
        dp, rest = divmod(gpus, tp * pp)
        if (
            rest
            or model.heads % tp
            or model.kv_heads % tp
            or global_batch % (dp * micro_batch)
            or global_batch // (dp * micro_batch) < pp
        ):
            continue
        for degree in ep_degrees(model, dp) if ep is None else [ep] if ep in ep_degrees(model, dp) else []:
            plans.append(Plan(model, gpus, tp, pp, zero, micro_batch, global_batch, recompute, ep=degree, **extra))
    return plans


def search(
    model: Model,
    gpus: int,
    global_batch: int = 1024,
    device: Device = DEVICES["h100"],
    network: Topology | None = None,
    **fixed,
) -> list[dict]:
    """``breakdown`` of every candidate whose stage-0 rank fits ``device``'s memory,
    sorted by step time (then by memory, then by the degrees: a stable order)."""
    network = network or gpu_cluster()
    rows = [
        row
        for row in (breakdown(plan, device, network) for plan in candidates(model, gpus, global_batch, **fixed))
        if row["fits"]
    ]
    return sorted(
        rows,
        key=lambda r: (
            r["step_s"],
            r["memory_bytes"],
            r["tp"],
            r["pp"],
            r["ep"],
            r["zero"],
            r["micro_batch"],
            r["recompute"],
        ),
    )
