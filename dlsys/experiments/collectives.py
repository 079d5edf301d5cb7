"""Experiments on one collective: run it, check it against numpy, time it against its
closed form; and the ring all-reduce replayed step by step (the textbook figure)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import collectives
from ..checks import check_int
from ..comm.backends import BACKENDS, MAX_PROCESS_RANKS, MAX_THREAD_RANKS
from ..comm.launch import launch
from ..machine.net import busbw_factor, parse_size
from ..machine.topology import Topology, get_network
from .budget import DEFAULT_MAX_MEMORY_BYTES, PROCESS_RANK_BYTES, BufferPlan, plan_buffers

DTYPES = {"float32": np.float32, "float64": np.float64}


def collective_program(
    comm, collective: str, algorithm: str, count: int, dtype: str, op: str, seed: int, plan: BufferPlan | None = None
):
    """Rank program: every rank builds its own seeded data and runs one collective.
    With ``plan``, the ``count`` real elements stand for ``plan.logical_count``."""
    if collective == "barrier":
        return collectives.barrier(comm)
    x = rank_data(seed, comm.rank, count, dtype, op)
    if plan is not None:
        x = plan.wrap(x)
    if collective == "allreduce":  # its lean path where it has one: same messages and trace
        return collectives.allreduce(comm, x, op=op, algorithm=algorithm, fast=True)
    if collective == "reduce_scatter":
        return collectives.reduce_scatter(comm, x, op=op, algorithm=algorithm)
    if collective == "reduce":
        return collectives.reduce(comm, x, op=op, algorithm=algorithm)
    if collective == "alltoall":
        return collectives.alltoall(comm, x, algorithm=algorithm)
    if collective in ("broadcast", "scatter", "gather"):
        return getattr(collectives, collective)(comm, x, root=0, algorithm=algorithm)
    return collectives.allgather(comm, x, algorithm=algorithm)


def _counted_program(comm, *args):
    """``collective_program`` returning (its value, the logical bytes this rank sent):
    the bytes per rank without recording the trace (2 M events in a 512-rank ring, half the
    wall time of the run). The Communicator counts them (``comm.bytes_sent``); a wrapper
    around comm that added them up cost a Python call per message."""
    return collective_program(comm, *args), comm.bytes_sent


def collective_plan(
    collective: str,
    algorithm: str,
    ranks: int,
    count: int,
    dtype: str = "float32",
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    real: bool = False,
    backend: str = "threads",
    network: Topology | None = None,
) -> BufferPlan:
    """The real buffers for one collective of ``count`` logical elements per rank
    (``budget.plan_buffers``): ``unit`` is the number of blocks the algorithm cuts a buffer
    into (its registry entry's ``blocks``); gather and all-gather hold every rank's buffer,
    the others about 4 buffers per rank (input, its float64 draw, result, a block in
    flight); on the processes backend every rank is also an interpreter
    (``PROCESS_RANK_BYTES``); ``network`` places the supernodes."""
    entry = collectives.REGISTRY[collective, algorithm]
    unit = entry.blocks(ranks, 1 if network is None else len(network.supernodes(ranks)))
    copies = ranks + 3 if collective in ("gather", "allgather") else 4
    return plan_buffers(
        0 if collective == "barrier" else count,
        ranks,
        dtype,
        unit=unit,
        copies=copies,
        split_per_block=entry.block_scales,
        max_memory_bytes=max_memory_bytes,
        real=real,
        overhead_bytes=ranks * PROCESS_RANK_BYTES if backend != "threads" else 0,
    )


def rank_data(seed: int, rank: int, count: int, dtype: str, op: str) -> np.ndarray:
    """Rank ``rank``'s seeded input: standard normal values, or for "prod" their signs
    (+-1): a product of thousands of normal values under- or overflows, while a product
    of +-1 is exact in any order, so the self-check of "prod" is exact at every rank count."""
    x = np.random.default_rng([seed, rank]).standard_normal(count).astype(DTYPES[dtype])
    return np.where(x < 0, -1, 1).astype(x.dtype) if op == "prod" else x


def expected_values(collective: str, ranks: int, count: int, dtype: str, op: str, seed: int) -> list:
    """What every rank must return, computed directly with numpy (the oracle)."""
    xs = [rank_data(seed, r, count, dtype, op) for r in range(ranks)]
    stacked = np.stack(xs) if collective in ("gather", "allgather") else None  # one copy, not one per rank
    reduced = (
        {
            "sum": lambda: np.sum(xs, axis=0, dtype=np.float64),
            "mean": lambda: np.mean(xs, axis=0, dtype=np.float64),
            "max": lambda: np.max(xs, axis=0),
            "min": lambda: np.min(xs, axis=0),
            "prod": lambda: np.prod(xs, axis=0),
        }[op]()
        if xs
        else None
    )
    table = {
        "barrier": lambda r: None,
        "allreduce": lambda r: reduced,
        "reduce": lambda r: reduced if r == 0 else None,
        "reduce_scatter": lambda r: np.array_split(reduced, ranks)[r],
        "broadcast": lambda r: xs[0],
        "scatter": lambda r: np.array_split(xs[0], ranks)[r],
        "gather": lambda r: stacked if r == 0 else None,
        "allgather": lambda r: stacked,
        "alltoall": lambda r: np.stack([np.array_split(x, ranks)[r] for x in xs]),
    }
    return [table[collective](r) for r in range(ranks)]


def rounding_bounds(collective: str, ranks: int, count: int, dtype: str, op: str, seed: int) -> list:
    """How far each rank's result may lie from ``expected_values`` by rounding alone: a sum of
    p terms in any order (ring, tree, halving) takes p - 1 roundings, each at most u times a
    partial sum, so |computed - exact| <= gamma_p sum |x_i| elementwise, with
    gamma_p = p u / (1 - p u) and u the unit roundoff of ``dtype`` (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., section 4.2, eq. 4.4; the mean's division
    is one more rounding). Moving data (broadcast, scatter, gather), max, min and prod (of
    +-1, ``expected_values``' data for it) are exact: 0."""
    if op in ("max", "min", "prod") or collective not in ("allreduce", "reduce", "reduce_scatter"):
        return [0.0] * ranks
    u = np.finfo(DTYPES[dtype]).eps / 2
    gamma = ranks * u / (1 - ranks * u)
    abs_sum = sum(np.abs(rank_data(seed, r, count, dtype, op), dtype=np.float64) for r in range(ranks))
    bound = gamma * abs_sum / (ranks if op == "mean" else 1)
    return {
        "allreduce": [bound] * ranks,
        "reduce": [bound] + [0.0] * (ranks - 1),
        "reduce_scatter": np.array_split(bound, ranks),
    }[collective]


def _check_run(
    collective: str, algorithm: str, ranks: int, size, backend: str, dtype: str, op: str, max_memory_bytes: int
) -> tuple[int, int]:
    """``simulate_collective``'s input checked at the boundary: (nbytes, itemsize), else a ValueError."""
    collectives.check_algorithm(collective, algorithm)
    collectives.check_op(op)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    check_int("ranks", ranks, 1, MAX_THREAD_RANKS if backend == "threads" else MAX_PROCESS_RANKS)
    check_int("max_memory_bytes", max_memory_bytes, 1)
    nbytes = parse_size(size)
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    if nbytes % itemsize:
        raise ValueError(f"size must be a multiple of the {dtype} item size ({itemsize} bytes), got {nbytes}")
    return nbytes, itemsize


def _check_results(values, collective: str, algorithm: str, ranks: int, count: int, dtype: str, op: str, seed: int):
    """Every rank's result is ``expected_values``' within ``rounding_bounds``, else an AssertionError."""
    wants = expected_values(collective, ranks, count, dtype, op, seed)
    bounds = rounding_bounds(collective, ranks, count, dtype, op, seed)
    for rank, (got, want, bound) in enumerate(zip(values, wants, bounds)):
        # np.asarray: plain values (a LogicalArray's numpy hooks made this check 0.5 s at 512 ranks)
        wrong = want is not None and not np.all(np.abs(np.asarray(got, np.float64) - want) <= bound)
        if (got is None) != (want is None) or wrong:
            raise AssertionError(f"{collective}/{algorithm}: rank {rank} returned a wrong result")


def _closed_forms(
    collective: str, algorithm: str, ranks: int, nbytes: int, itemsize: int, network, node, charge_reductions, sharing
) -> tuple[float | None, float | None]:
    """(closed form, textbook form) of the run, or (None, None) where the network has none:
    across supernodes without a ``tiered`` form, or with links shared beyond one link a pair."""
    model_bytes = nbytes * ranks if collective in ("gather", "allgather") else nbytes
    if collective == "barrier":
        model_bytes = 0
    # the blocks of a scaled run are exactly the logical ones (budget): blocks of itemsize-byte elements
    known = network.is_flat_for(ranks) or (
        collectives.REGISTRY[(collective, algorithm)].tiered is not None and not sharing
    )
    if not known:
        return None, None
    return (
        collectives.closed_form(collective, algorithm, ranks, model_bytes, network, node, charge_reductions, itemsize),
        collectives.textbook_form(collective, algorithm, ranks, model_bytes, network, node, charge_reductions),
    )


def _times(collective: str, ranks: int, nbytes: int, t: float, closed, textbook) -> dict:
    """The run's virtual time ``t`` beside its closed forms, and its bandwidths (nccl-tests'
    algbw, and busbw by ``busbw_factor``)."""
    algbw = nbytes / t if t > 0 else 0.0
    return {
        "virtual_time_s": t,
        "closed_form_s": closed,
        "textbook_form_s": textbook,
        "relative_error": None if closed is None else abs(t - closed) / closed if closed > 0 else abs(t),
        "algbw_Bps": algbw,
        "busbw_Bps": algbw * busbw_factor(collective, ranks),
    }


def simulate_collective(
    collective: str = "allreduce",
    algorithm: str = "ring",
    ranks: int = 8,
    size="64MiB",
    link="tcp-10gbe",
    node="laptop-cpu",
    backend: str = "threads",
    dtype: str = "float32",
    op: str = "sum",
    seed: int = 0,
    charge_reductions: bool = False,
    check: bool = True,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    real: bool = False,
    record: bool = True,
    topology=None,
    sharing: bool | None = None,
) -> dict:
    """Run one collective on ``ranks`` ranks over ``size`` bytes and compare with its closed form.

    ``size`` is the per-rank buffer (the whole result for gather/allgather is ranks * size).
    Returns a record with virtual time, closed form, relative error, algbw/busbw (nccl-tests
    convention), bytes per rank, wall time, and the LaunchResult under ``"result"``.
    The real buffers of all ranks stay within ``max_memory_bytes`` (``collective_plan``):
    a larger ``size`` runs on real arrays whose elements each stand for ``scale`` logical
    ones, charged at the logical size; ``real=True`` refuses to scale. The record says
    what ran: ``real_count`` elements per rank, ``scale_min``..``scale_max`` logical
    elements per real one, ``memory_bytes`` (estimated) of ``max_memory_bytes``.
    ``record=False`` skips the trace (``result.trace`` is empty; bytes per rank are still
    counted): a 512-rank ring runs in half the wall time. The network is ``link`` for every
    pair or ``topology``, a link per pair (``dlsys.machine.topology.get_network``: a name or
    a Topology, "flat" on ``link``); across supernodes only algorithms with a ``tiered``
    form have a closed form (else it is None). ``sharing``: times from a replay in which
    concurrent messages share the links of the topology's fabric (``launch(sharing=True)``,
    dlsys.comm.replay); None, the network's own model (``topology.sharing_of``); the closed
    forms, of links per pair, only where every pair shares one link (flat, one supernode).
    """
    nbytes, itemsize = _check_run(collective, algorithm, ranks, size, backend, dtype, op, max_memory_bytes)
    network = get_network(topology, link, "topology")
    plan = collective_plan(
        collective, algorithm, ranks, nbytes // itemsize, dtype, max_memory_bytes, real, backend, network
    )
    count = plan.real_count
    result = launch(
        _counted_program,
        ranks,
        backend,
        node=node,
        seed=seed,
        record=record,
        args=(collective, algorithm, count, dtype, op, seed, plan),
        charge_reductions=charge_reductions,
        topology=network,
        sharing=sharing,
    )
    values, sent_nbytes = zip(*result.values)
    result = replace(result, values=list(values))
    if check:
        _check_results(result.values, collective, algorithm, ranks, count, dtype, op, seed)
    closed, textbook = _closed_forms(
        collective, algorithm, ranks, nbytes, itemsize, network, result.nodes[0], charge_reductions, result.sharing
    )
    return {
        "collective": collective,
        "algorithm": algorithm,
        "ranks": ranks,
        "nbytes": nbytes,
        "dtype": dtype,
        "op": op,
        "link": network.link.name,
        "topology": network.name,
        "backend": backend,
        "sharing": result.sharing,
        **_times(collective, ranks, nbytes, result.virtual_time_s, closed, textbook),
        "bytes_sent_per_rank": list(sent_nbytes),
        "wall_time_s": result.wall_time_s,
        "result": result,
        **plan_record(plan, max_memory_bytes),
    }


def plan_record(plan: BufferPlan, max_memory_bytes: int) -> dict:
    """A record's account of what really ran: real elements and bytes per rank, logical
    elements per real one (min and max: they differ by one with per-block scales; their
    mean is ``scale``), the estimated real memory of all ranks and the budget."""
    return {
        "real_count": plan.real_count,
        "real_nbytes": plan.real_count * np.dtype(plan.dtype).itemsize,
        "scale": plan.scale,
        "scale_min": min(plan.scales),
        "scale_max": max(plan.scales),
        "memory_bytes": plan.memory_bytes,
        "max_memory_bytes": max_memory_bytes,
    }


# --- the ring, step by step -------------------------------------------------------------


def _powers_of_two_allreduce(comm, count: int):
    """Rank r contributes 2**r: a reduced value, read in binary, names its contributors."""
    return collectives.allreduce(comm, np.full(count, 2.0**comm.rank), algorithm="ring")


def ring_allreduce_steps(ranks: int = 4, link="tcp-10gbe") -> list[dict]:
    """Every rank's chunks after every step of a real ring all-reduce (the textbook figure).

    Rank r contributes 2**r in every element. The run's trace says which chunk moved from
    which rank to which at each step (each message's phase, step and block); replaying those moves from the inputs gives each intermediate state as a
    bitmask of contributing ranks per (rank, chunk), and the replay's final state is
    checked against the values the ranks really returned. Returns one dict per state:
    ``phase``, ``step``, ``chunks`` (ranks x ranks bitmasks), ``moves`` [(src, dst, chunk)].
    """
    if not 2 <= ranks <= 52:  # float64 holds 2**52 exactly
        raise ValueError(f"ranks must be in 2..52, got {ranks!r}")
    result = launch(_powers_of_two_allreduce, ranks, "threads", link=link, args=(ranks,))
    chunks = [[1 << r] * ranks for r in range(ranks)]
    states = [{"phase": "start", "step": None, "chunks": [row[:] for row in chunks], "moves": []}]
    for phase in ("reduce-scatter", "allgather"):
        for step in range(ranks - 1):
            moves = [(m.src, m.dst, m.block) for m in result.trace.messages if m.phase == phase and m.step == step]
            before = [row[:] for row in chunks]
            for src, dst, chunk in moves:
                chunks[dst][chunk] = before[src][chunk] | (before[dst][chunk] if phase == "reduce-scatter" else 0)
            states.append({"phase": phase, "step": step, "chunks": [row[:] for row in chunks], "moves": moves})
    returned = [[int(v) for v in values] for values in result.values]
    if chunks != returned:
        raise AssertionError("ring replay disagrees with the values the ranks returned")
    return states
