"""Tensor parallelism's closed forms: what a TP and a DP group's all-reduce cost on a machine,
how many collectives and bytes a step of ``tensor_parallel`` runs, and the activations a
rank keeps (Korthikanti et al. 2022, section 4). tests/train/test_tensor_parallel.py holds every
run to these counts, byte for byte.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..collectives.dispatch import closed_form
from ..comm.group import Grid
from ..machine.memory import activation_bytes
from ..machine.topology import get_network
from .tensor_parallel import TensorParallelTransformer, TPConfig


def group_costs(grid: Grid, nbytes: float, topology="gpu-cluster", algorithm: str = "ring") -> dict[str, dict]:
    """For the TP and the DP groups of ``grid`` placed on ``topology`` (rank r on node r):
    the link the group's ring crosses (its slowest, by bandwidth then latency), whether every
    hop is on that one link, and the closed-form all-reduce time of ``nbytes`` on it
    (``collectives.closed_form``, Patarasuk & Yuan's 2 (p-1) (alpha + n/p beta) for the
    ring). With every hop on one link the form is the emulation's time exactly; a ring that
    mixes links is charged as if every hop were the slowest."""
    network = get_network(topology, argument="topology")
    network.check_nodes(grid.world_size, "the world size")
    costs = {}
    for axis, members in (("tp", grid.tp_members(0)), ("dp", grid.dp_members(0))):
        ring = list(zip(members, members[1:] + members[:1])) if len(members) > 1 else []
        hops = [network.link_between(a, b) for a, b in ring]
        link = max(hops, key=lambda h: (h.beta_s_per_byte, h.alpha_s), default=network.link)
        costs[axis] = {
            "ranks": len(members),
            "link": link.name,
            "one_link": len(set(hops)) <= 1,
            "allreduce_s": closed_form("allreduce", algorithm, len(members), nbytes, link),
        }
    return costs


def activation_model(config: TPConfig) -> int:
    """Korthikanti's count for one rank's blocks without dropout, plus the layer norms' 1/std
    per row that ours keep (2 s b elements a layer; / t with sequence parallelism)."""
    e = np.dtype(config.dtype).itemsize
    shape = config.shape()
    rstd = config.layers * 2 * shape.seq_len * shape.batch * e // (config.tp if config.sequence_parallel else 1)
    return activation_bytes(shape, config.tp, config.sequence_parallel, element_nbytes=e, dropout=False) + rstd


def collectives_per_step(config: TPConfig) -> dict[str, int]:
    """How many collectives one rank of a TP group runs in one step, by direction and kind.

    Tensor parallelism: 2 all-reduces a layer forward (g after attention and after the MLP)
    and 2 backward (f before them). Sequence parallelism: forward 2 all-gathers and 2
    reduce-scatters a layer; backward the 2 all-gathers of g-bar's backward, 2 more that
    gather the column-parallel inputs again, and 2 reduce-scatters; outside the layers one
    all-gather into the output layer, one in the embedding's backward, and one all-reduce of
    the layer norms' and row-parallel biases' partial gradients. tp = 1: none."""
    L = config.layers
    if config.tp == 1:
        return {}
    if not config.sequence_parallel:
        return {"forward allreduce": 2 * L, "backward allreduce": 2 * L}
    return {
        "forward allgather": 2 * L + 1,
        "forward reduce_scatter": 2 * L,
        "backward allgather": 4 * L + 1,
        "backward reduce_scatter": 2 * L,
        "backward allreduce": 1,
    }


def bytes_per_step(config: TPConfig) -> dict[str, int]:
    """Bytes on the wire in one step, summed over every rank, by group: ring collectives of
    n bytes over p ranks move 2 (p - 1) n (all-reduce) and (p - 1) n (reduce-scatter of n,
    all-gather into n) in all. The TP collectives carry the activations n = (b/dp) s h e
    (all-gather and reduce-scatter: the whole sequence), the SP all-reduce the partial
    gradients; the DP all-reduce every rank's gradients (its 1/t of the split tensors)."""
    grid, e = config.check(), np.dtype(config.dtype).itemsize
    t, d, h = config.tp, config.dp, config.d_model
    n = config.batch // d * config.seq_len * h * e
    partial = (config.layers * (2 * 2 * h + 2 * h) + 2 * h) * e  # SP: 2 layer norms, 2 biases a layer; 1 norm
    tp_bytes = 0
    for what, count in collectives_per_step(config).items():
        kind = what.split()[1]
        size = partial if config.sequence_parallel and what == "backward allreduce" else n
        tp_bytes += count * (2 if kind == "allreduce" else 1) * (t - 1) * size
    rank_params = sum(p.size for p in _rank_shapes(config)) * e
    return {"tp": d * tp_bytes, "dp": grid.tp * 2 * (d - 1) * rank_params}


def _rank_shapes(config: TPConfig) -> list[np.ndarray]:
    """One TP rank's tensors (rank 0's: every rank's parts are the same size). Splitting
    needs only the group's rank and size; no collective runs, so a stand-in group will do."""
    return list(TensorParallelTransformer(config.model(), SimpleNamespace(rank=0, size=config.tp)).params().values())
