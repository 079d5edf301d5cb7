"""Every layout of a model on a number of GPUs, those that fit a device, fastest first.

The Ultra-Scale Playbook's recipe ("Finding the best training configuration": first fit a
replica in memory, then reach the global batch, then maximise throughput) and the JAX
scaling book's ("How to Scale Your Model", "All the Transformer Math": enumerate the
shardings, keep those that fit, compare their step times) done exhaustively: tp among the
divisors of the device's NVLink island that divide the heads, pp any stage count up to the
layers (uneven stages when it does not divide them), dp = gpus / (tp pp), ep among the
divisors of dp that divide a mixture's experts (1 for a dense model), ZeRO 0..3,
micro-batches of ``MICRO_BATCHES`` sequences, each recomputation policy, sequence
parallelism on or off (tp > 1), TP overlap with sequence parallelism, and interleaved 1F1B
with ``VIRTUAL`` chunks a stage where they divide its layers; a choice given is held fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..machine.memory import RECOMPUTE
from ..machine.topology import Topology
from .cost import breakdown
from .devices import DEVICES, Device, cluster
from .models import Model
from .plan import Plan, ep_degrees, tp_degrees, virtual_degrees

MICRO_BATCHES = (1, 2, 4, 8)
VIRTUAL = (1, 2, 3, 4)  # chunks a stage the search tries (interleaved 1F1B)
SCHEDULE = ("sequence_parallel", "tp_overlap", "virtual_stages")


def _schedules(model: Model, tp: int, pp: int, microbatches: int, fixed: dict) -> list[tuple[bool, bool, int]]:
    """(sequence_parallel, tp_overlap, virtual_stages) a layout may run: SP and its overlap
    only with tp > 1, overlap only with SP, interleaving where m is a multiple of pp."""
    sp_choices = [False, True] if tp > 1 else [False]
    virtual = [v for v in virtual_degrees(model, pp) if v in VIRTUAL and (v == 1 or microbatches % pp == 0)]
    out = []
    for sp, overlap, v in itertools.product(sp_choices, (False, True), virtual):
        if overlap and not sp:
            continue
        chosen = {"sequence_parallel": sp, "tp_overlap": overlap, "virtual_stages": v}
        if all(
            fixed.get(k) is None or (fixed[k] == chosen[k] or (k == "sequence_parallel" and tp == 1)) for k in SCHEDULE
        ):
            out.append((sp, overlap, v))
    return out


def candidates(
    model: Model, gpus: int, global_batch: int = 1024, device: Device = DEVICES["h100"], **fixed
) -> list[Plan]:
    """Every valid ``Plan`` (``Plan``'s checks pass); ``fixed`` holds any of tp, pp, ep, zero,
    micro_batch, recompute, sequence_parallel, tp_overlap, virtual_stages, optimizer,
    precision at one value."""
    choices: dict[str, Sequence] = {
        "tp": tp_degrees(model, device),
        "pp": [p for p in range(1, model.layers + 1) if gpus % p == 0],
        "zero": range(4),
        "micro_batch": MICRO_BATCHES,
        "recompute": RECOMPUTE,
    }
    choices.update({k: [v] for k, v in fixed.items() if k in choices and v is not None})
    ep = fixed.get("ep")
    extra = {k: v for k, v in fixed.items() if k not in choices and k not in SCHEDULE and k != "ep" and v is not None}
    plans = []
    for tp, pp, zero, micro_batch, recompute in itertools.product(*choices.values()):
        dp, rest = divmod(gpus, tp * pp)
        if rest or tp not in tp_degrees(model, device) or pp > model.layers or global_batch % (dp * micro_batch):
            continue
        microbatches = global_batch // (dp * micro_batch)
        if microbatches < pp:
            continue
        for degree in ep_degrees(model, dp) if ep is None else [ep] if ep in ep_degrees(model, dp) else []:
            for sp, overlap, v in _schedules(model, tp, pp, microbatches, fixed):
                plans.append(
                    Plan(
                        model,
                        gpus,
                        tp,
                        pp,
                        zero,
                        micro_batch,
                        global_batch,
                        recompute,
                        sequence_parallel=sp,
                        ep=degree,
                        device=device,
                        virtual_stages=v,
                        tp_overlap=overlap,
                        **extra,
                    )
                )
    return plans


def search(
    model: Model,
    gpus: int,
    global_batch: int = 1024,
    device: Device = DEVICES["h100"],
    network: Topology | None = None,
    **fixed,
) -> list[dict]:
    """``breakdown`` of every candidate whose fullest rank fits ``device``'s memory,
    sorted by step time (then by memory, then by the degrees: a stable order)."""
    network = network or cluster(device)
    rows = [
        row
        for row in (breakdown(plan, network) for plan in candidates(model, gpus, global_batch, device, **fixed))
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
            r["sequence_parallel"],
            r["tp_overlap"],
            r["virtual_stages"],
        ),
    )
