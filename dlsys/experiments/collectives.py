"""Experiments on one collective: run it, check it against numpy, time it against its
closed form; and the ring all-reduce replayed step by step (the textbook figure)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import collectives
from ..comm import LaunchResult, Trace, launch
from ..net import busbw_factor, get_link, get_node, parse_size

DTYPES = {"float32": np.float32, "float64": np.float64}


def collective_program(comm, collective: str, algorithm: str, count: int, dtype: str, op: str, seed: int):
    """Rank program: every rank builds its own seeded data and runs one collective."""
    x = np.random.default_rng([seed, comm.rank]).standard_normal(count).astype(DTYPES[dtype])
    if collective == "barrier":
        return collectives.barrier(comm)
    if collective in ("allreduce", "reduce_scatter"):
        return getattr(collectives, collective)(comm, x, op=op, algorithm=algorithm)
    if collective == "reduce":
        return collectives.reduce(comm, x, op=op, algorithm=algorithm)
    if collective in ("broadcast", "scatter", "gather"):
        return getattr(collectives, collective)(comm, x, root=0, algorithm=algorithm)
    return collectives.allgather(comm, x, algorithm=algorithm)


def expected_values(collective: str, ranks: int, count: int, dtype: str, op: str, seed: int) -> list:
    """What every rank must return, computed directly with numpy (the oracle)."""
    xs = [np.random.default_rng([seed, r]).standard_normal(count).astype(DTYPES[dtype]) for r in range(ranks)]
    reduced = {"sum": lambda: np.sum(xs, axis=0, dtype=np.float64), "mean": lambda: np.mean(xs, axis=0, dtype=np.float64),
               "max": lambda: np.max(xs, axis=0)}[op]() if xs else None
    table = {
        "barrier": lambda r: None,
        "allreduce": lambda r: reduced,
        "reduce": lambda r: reduced if r == 0 else None,
        "reduce_scatter": lambda r: np.array_split(reduced, ranks)[r],
        "broadcast": lambda r: xs[0],
        "scatter": lambda r: np.array_split(xs[0], ranks)[r],
        "gather": lambda r: np.stack(xs) if r == 0 else None,
        "allgather": lambda r: np.stack(xs),
    }
    return [table[collective](r) for r in range(ranks)]


def simulate_collective(collective: str = "allreduce", algorithm: str = "ring", ranks: int = 8,
                        size="64MiB", link="tcp-10gbe", node="laptop-cpu", backend: str = "threads",
                        dtype: str = "float32", op: str = "sum", seed: int = 0,
                        charge_reductions: bool = False, check: bool = True,
                        max_real_nbytes: int | None = None) -> dict:
    """Run one collective on ``ranks`` ranks over ``size`` bytes and compare with its closed form.

    ``size`` is the per-rank buffer (the whole result for gather/allgather is ranks * size).
    Returns a record with virtual time, closed form, relative error, algbw/busbw (nccl-tests
    convention), bytes per rank, wall time, and the LaunchResult under ``"result"``.
    ``max_real_nbytes`` caps the real buffers: a larger ``size`` runs on smaller real arrays
    charged as the logical size (see ``launch_logical``); ``real_nbytes`` and ``scale`` in
    the record say so.
    """
    collectives.check_algorithm(collective, algorithm)
    collectives.check_op(op)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    nbytes = parse_size(size)
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    if nbytes % itemsize:
        raise ValueError(f"size must be a multiple of the {dtype} item size ({itemsize} bytes), got {nbytes}")
    link = get_link(link)
    count = real_count(nbytes // itemsize, ranks, itemsize, max_real_nbytes)
    result = launch_logical(collective_program, ranks, nbytes, count * itemsize, backend, link=link,
                            node=node, seed=seed, args=(collective, algorithm, count, dtype, op, seed),
                            charge_reductions=charge_reductions)
    if check:
        for rank, (got, want) in enumerate(zip(result.values, expected_values(collective, ranks, count, dtype, op, seed))):
            if (got is None) != (want is None) or (want is not None and not np.allclose(got, want, rtol=1e-4, atol=1e-4)):
                raise AssertionError(f"{collective}/{algorithm}: rank {rank} returned a wrong result")
    model_bytes = nbytes * ranks if collective in ("gather", "allgather") else nbytes
    if collective == "barrier":
        model_bytes = 0
    closed = collectives.closed_form(collective, algorithm, ranks, model_bytes, link, result.nodes[0], charge_reductions,
                                     nbytes / count if count else itemsize)  # a real element stands for this
    t = result.virtual_time_s
    algbw = nbytes / t if t > 0 else 0.0
    return {
        "collective": collective, "algorithm": algorithm, "ranks": ranks, "nbytes": nbytes,
        "dtype": dtype, "op": op, "link": link.name, "backend": backend,
        "virtual_time_s": t, "closed_form_s": closed,
        "relative_error": abs(t - closed) / closed if closed > 0 else abs(t),
        "algbw_Bps": algbw, "busbw_Bps": algbw * busbw_factor(collective, ranks),
        "bytes_sent_per_rank": result.trace.bytes_sent_per_rank(),
        "wall_time_s": result.wall_time_s, "result": result,
        "real_nbytes": count * itemsize, "scale": nbytes / (count * itemsize) if count else 1.0,
    }


# --- real buffers standing for large logical sizes --------------------------------------

def real_count(count: int, ranks: int, itemsize: int, max_real_nbytes: int | None) -> int:
    """Elements each rank really allocates: ``count``, or, above ``max_real_nbytes``, the
    largest multiple of ``ranks`` that fits (so every block stays the same fraction)."""
    if max_real_nbytes is None or count * itemsize <= max_real_nbytes:
        return count
    return ranks * max(1, max_real_nbytes // itemsize // ranks)


def launch_logical(program, ranks: int, nbytes: int, real_nbytes: int, backend: str = "threads", *,
                   link="tcp-10gbe", node="laptop-cpu", **kwargs) -> LaunchResult:
    """``launch`` on real buffers of ``real_nbytes`` that stand for ``nbytes`` of logical data.

    With factor = nbytes / real_nbytes, every real byte is charged as ``factor`` logical
    bytes: the link's wire and copy bandwidths and the node's memory bandwidth are divided
    by the factor; latency and per-message overheads stay. So each message costs exactly
    what its logical size costs, the virtual times are those of the logical run, and the
    returned trace reports logical bytes (with the original link and node models).
    """
    factor = nbytes / real_nbytes if real_nbytes and nbytes > real_nbytes else 1.0
    if factor == 1.0:
        result = launch(program, ranks, backend, link=link, node=node, **kwargs)
        return result
    link, node = get_link(link), get_node(node)
    slow_link = replace(link, bandwidth_Bps=link.bandwidth_Bps / factor,
                        copy_bandwidth_Bps=link.copy_bandwidth_Bps / factor)
    slow_node = replace(node, memory_bandwidth_Bps=node.memory_bandwidth_Bps / factor)
    result = launch(program, ranks, backend, link=slow_link, node=slow_node, **kwargs)
    messages = [m._replace(nbytes=round(m.nbytes * factor)) for m in result.trace.messages]
    return replace(result, trace=Trace(result.trace.spans, messages, ranks), link=link, nodes=(node,) * ranks)



# --- the ring, step by step -------------------------------------------------------------

def _powers_of_two_allreduce(comm, count: int):
    """Rank r contributes 2**r: a reduced value, read in binary, names its contributors."""
    return collectives.allreduce(comm, np.full(count, 2.0 ** comm.rank), algorithm="ring")


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
    result = launch_logical(_powers_of_two_allreduce, ranks, ranks * 8, ranks * 8, link=link, args=(ranks,))
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
