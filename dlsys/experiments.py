"""Named, reproducible experiments: one call runs a program and returns a tidy record.

The CLI, the app and the lessons all call these, so a figure in class and a number in the
terminal come from the same code.
"""

from __future__ import annotations

import numpy as np

from . import collectives
from .comm import launch
from .net import busbw_factor, closed_form, get_link, parse_size

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
                        charge_reductions: bool = False, check: bool = True) -> dict:
    """Run one collective on ``ranks`` ranks over ``size`` bytes and compare with its closed form.

    ``size`` is the per-rank buffer (the whole result for gather/allgather is ranks * size).
    Returns a record with virtual time, closed form, relative error, algbw/busbw (nccl-tests
    convention), bytes per rank, wall time, and the LaunchResult under ``"result"``.
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
    count = nbytes // itemsize
    result = launch(collective_program, ranks, backend, link=link, node=node, seed=seed,
                    args=(collective, algorithm, count, dtype, op, seed), charge_reductions=charge_reductions)
    if check:
        for rank, (got, want) in enumerate(zip(result.values, expected_values(collective, ranks, count, dtype, op, seed))):
            if (got is None) != (want is None) or (want is not None and not np.allclose(got, want, rtol=1e-4, atol=1e-4)):
                raise AssertionError(f"{collective}/{algorithm}: rank {rank} returned a wrong result")
    model_bytes = nbytes * ranks if collective in ("gather", "allgather") else nbytes
    if collective == "barrier":
        model_bytes = 0
    closed = closed_form(collective, algorithm, ranks, model_bytes, link, result.nodes[0], charge_reductions)
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
    }
