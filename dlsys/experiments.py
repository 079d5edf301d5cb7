"""Named, reproducible experiments: one call runs a program and returns a tidy record.

The CLI, the app and the lessons all call these, so a figure in class and a number in the
terminal come from the same code.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from dataclasses import replace

import numpy as np

from . import collectives
from .comm import LaunchResult, Trace, launch
from .net import LINK_PRESETS, busbw_factor, closed_form, get_link, get_node, parse_size

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


def without_values(record: dict) -> dict:
    """The record without the ranks' returned arrays (trace kept): small enough to cache."""
    result = record["result"]
    return {**record, "result": replace(result, values=[None] * result.world_size)}


# --- the ring, step by step -------------------------------------------------------------

def _powers_of_two_allreduce(comm, count: int):
    """Rank r contributes 2**r: a reduced value, read in binary, names its contributors."""
    return collectives.allreduce(comm, np.full(count, 2.0 ** comm.rank), algorithm="ring")


def ring_allreduce_steps(ranks: int = 4, link="tcp-10gbe") -> list[dict]:
    """Every rank's chunks after every step of a real ring all-reduce (the textbook figure).

    Rank r contributes 2**r in every element. The run's trace says which chunk moved from
    which rank to which at each step ("reduce-scatter step s block b", "allgather step s
    block b"); replaying those moves from the inputs gives each intermediate state as a
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
        pattern = re.compile(rf"{phase} step (\d+) block (\d+)")
        for step in range(ranks - 1):
            moves = [(m.src, m.dst, int(g[2])) for m in result.trace.messages
                     if (g := pattern.fullmatch(m.label)) and int(g[1]) == step]
            before = [row[:] for row in chunks]
            for src, dst, chunk in moves:
                chunks[dst][chunk] = before[src][chunk] | (before[dst][chunk] if phase == "reduce-scatter" else 0)
            states.append({"phase": phase, "step": step, "chunks": [row[:] for row in chunks], "moves": moves})
    returned = [[int(v) for v in values] for values in result.values]
    if chunks != returned:
        raise AssertionError("ring replay disagrees with the values the ranks returned")
    return states


# --- a parameter server next to ring all-reduce -------------------------------------------

def ps_sync_program(comm, count: int, seed: int):
    """Rank program: one synchronous parameter-server round; rank 0 is the server.

    Every worker (ranks 1..W) pushes its gradient to rank 0; rank 0 sums them and sends
    the mean back to every worker. The server's ingress carries W * n bytes and its egress
    another W * n, where a ring all-reduce puts 2 (W-1)/W * n on every link.
    Worker w's gradient is the one ring rank w-1 uses in ``collective_program``.
    """
    workers = comm.size - 1
    if comm.rank == 0:
        total = sum(comm.recv(w, label="push gradient").astype(np.float64) for w in range(1, workers + 1))
        mean = (total / workers).astype(np.float32)
        for w in range(1, workers + 1):
            comm.send(w, mean, label="pull mean")
        return mean
    grad = np.random.default_rng([seed, comm.rank - 1]).standard_normal(count).astype(np.float32)
    comm.send(0, grad, label="push gradient")
    return comm.recv(0, label="pull mean")


def ps_closed_form_s(workers: int, nbytes: float, link) -> float:
    """Time of one synchronous PS round in the emulator's model:
    2 (alpha + n beta) + 2 (W - 1) max(n / B, o_s(n)): the server's ingress then its
    egress serialize W messages each (or its per-message CPU cost does, if larger)."""
    link = get_link(link)
    per_message_s = max(link.wire_s(nbytes), link.send_overhead_s(nbytes))
    return 2 * link.message_s(nbytes) + 2 * (workers - 1) * per_message_s


def simulate_ps(workers: int = 8, size="64MiB", link="tcp-10gbe", node="laptop-cpu", seed: int = 0,
                max_real_nbytes: int | None = None) -> dict:
    """One PS round with ``workers`` workers plus a server (rank 0), checked and timed.

    Record keys as ``simulate_collective`` where they apply, plus ``scheme`` and ``workers``.
    """
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    nbytes = parse_size(size)
    if nbytes % 4:
        raise ValueError(f"size must be a multiple of the float32 item size (4 bytes), got {nbytes}")
    count = real_count(nbytes // 4, workers, 4, max_real_nbytes)
    result = launch_logical(ps_sync_program, workers + 1, nbytes, count * 4, link=link, node=node,
                            seed=seed, args=(count, seed))
    want = np.mean([np.random.default_rng([seed, w]).standard_normal(count).astype(np.float32)
                    for w in range(workers)], axis=0)
    if not all(np.allclose(v, want, rtol=1e-4, atol=1e-5) for v in result.values):
        raise AssertionError("parameter server: a worker got a wrong mean")
    t, closed = result.virtual_time_s, ps_closed_form_s(workers, nbytes, link)
    return {"scheme": "parameter server", "workers": workers, "ranks": workers + 1, "nbytes": nbytes,
            "link": get_link(link).name, "virtual_time_s": t, "closed_form_s": closed,
            "relative_error": abs(t - closed) / closed, "bytes_sent_per_rank": result.trace.bytes_sent_per_rank(),
            "wall_time_s": result.wall_time_s, "result": result, "real_nbytes": count * 4, "scale": nbytes / (count * 4)}


def ps_vs_ring(workers: int = 8, size="64MiB", link="tcp-10gbe", max_real_nbytes: int | None = None) -> dict:
    """The same gradients averaged by a parameter server and by ring all-reduce (op mean).

    Returns {"parameter server": record, "ring all-reduce": record}; the two means agree.
    """
    ps = simulate_ps(workers, size, link, max_real_nbytes=max_real_nbytes)
    ring = simulate_collective("allreduce", "ring", workers, size, link, op="mean", max_real_nbytes=max_real_nbytes)
    ring["scheme"], ring["workers"] = "ring all-reduce", workers
    return {"parameter server": ps, "ring all-reduce": ring}


def ps_vs_ring_scaling(workers=(2, 4, 8, 16, 32), size="64MiB", link="tcp-10gbe",
                       max_real_nbytes: int | None = 16 * 2**10) -> list[dict]:
    """Emulated and closed-form communication time of both schemes for each worker count,
    and the busiest rank's traffic (bytes sent + received): the server's link for PS."""
    rows = []
    for w in workers:
        for name, rec in ps_vs_ring(w, size, link, max_real_nbytes).items():
            trace = rec["result"].trace
            traffic = [s + r for s, r in zip(trace.bytes_sent_per_rank(), trace.bytes_received_per_rank())]
            rows.append({"scheme": name, "workers": w, "nbytes": rec["nbytes"], "link": rec["link"],
                         "virtual_time_s": rec["virtual_time_s"], "closed_form_s": rec["closed_form_s"],
                         "busiest_rank_bytes": max(traffic)})
    return rows


# --- the cost model: closed forms and where they cross ------------------------------------

ALLREDUCE_ALGORITHMS = collectives.ALGORITHMS["allreduce"]


def allreduce_costs(links=("tcp-10gbe",), ranks=(8,), sizes=(2**20,)) -> list[dict]:
    """Closed-form all-reduce time of every algorithm for every (link, ranks, size).

    Each row splits the time into its latency part (the cost of 0 bytes: the alpha terms)
    and its bandwidth part (the rest: the beta terms).
    """
    rows = []
    for link in links:
        for p in ranks:
            for algorithm in ALLREDUCE_ALGORITHMS:
                latency = closed_form("allreduce", algorithm, p, 0, link)
                for n in sizes:
                    t = closed_form("allreduce", algorithm, p, n, link)
                    rows.append({"link": get_link(link).name, "algorithm": algorithm, "ranks": p, "nbytes": n,
                                 "time_s": t, "latency_s": latency, "bandwidth_s": t - latency,
                                 "source": "closed form"})
    return rows


def emulated_allreduce_costs(link="tcp-10gbe", ranks: int = 8, sizes=(2**10, 2**20, 2**30),
                             max_real_nbytes: int = 16 * 2**10) -> list[dict]:
    """The same rows as ``allreduce_costs``, measured by running every algorithm."""
    rows = []
    for algorithm in ALLREDUCE_ALGORITHMS:
        for n in sizes:
            rec = simulate_collective("allreduce", algorithm, ranks, n, link, max_real_nbytes=max_real_nbytes)
            rows.append({"link": rec["link"], "algorithm": algorithm, "ranks": ranks, "nbytes": n,
                         "time_s": rec["virtual_time_s"], "source": "emulated"})
    return rows


def crossovers(rows: list[dict], x: str = "nbytes", rel_tol: float = 1e-9) -> list[dict]:
    """Where the fastest algorithm changes along ``x`` ("nbytes" or "ranks").

    Rows are one (link, ranks) slice (x="nbytes") or one (link, nbytes) slice (x="ranks").
    Costs are linear in bytes, so a size crossover is the exact intersection of the two
    lines through neighbouring grid points; in ranks it is the first rank count at which
    the new algorithm is fastest. Ties (within rel_tol) keep the current winner.
    """
    times = defaultdict(dict)
    for r in rows:
        times[r[x]][r["algorithm"]] = r["time_s"]
    xs, out, winner = sorted(times), [], None
    for prev, cur in zip([None] + xs, xs):
        best = min(times[cur].values())
        if winner is not None and times[cur][winner] <= best * (1 + rel_tol):
            continue
        new = min(times[cur], key=times[cur].get)
        if winner is not None:
            at = cur
            if x == "nbytes":
                slope = {a: (times[cur][a] - times[prev][a]) / (cur - prev) for a in (winner, new)}
                at = prev + (times[prev][new] - times[prev][winner]) / (slope[winner] - slope[new])
            t = times[cur][new] if x != "nbytes" else times[prev][new] + slope[new] * (at - prev)
            out.append({x: at, "time_s": t, "from": winner, "to": new})
        winner = new
    return out


def link_table() -> list[dict]:
    """Every link preset's alpha, beta and half-bandwidth size n_1/2 = alpha / beta (the
    message size at which latency and bandwidth cost the same)."""
    return [{"link": l.name, "kind": "RDMA / zero copy" if l.kernel_copies == 0 else "TCP / kernel copies",
             "alpha_s": l.alpha_s, "beta_s_per_byte": l.beta_s_per_byte, "bandwidth_Bps": l.bandwidth_Bps,
             "n_half_bytes": l.alpha_s / l.beta_s_per_byte} for l in LINK_PRESETS.values()]


def to_csv(rows: list[dict]) -> str:
    """Rows of dicts as CSV text (columns: the union of the keys, in first-seen order)."""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.DictWriter(out, fields)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
