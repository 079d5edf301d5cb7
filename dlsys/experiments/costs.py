"""The cost model: closed-form all-reduce costs, emulated ones, and where they cross."""

from __future__ import annotations

from collections import defaultdict

from .. import collectives
from ..collectives.dispatch import textbook_form as closed_form
from ..machine.net import LINK_PRESETS, get_link
from ..machine.netstack import LIBRARIES
from .budget import DEFAULT_MAX_MEMORY_BYTES
from .collectives import simulate_collective

# The cost model is one flat link; there a topology-aware algorithm (a ``tiered`` form) is
# one of the others (the hierarchical all-reduce is the binomial reduce + broadcast), and a
# step-order variant (``variant_of``) costs what its original costs.
ALLREDUCE_ALGORITHMS = tuple(
    a
    for a in collectives.ALGORITHMS["allreduce"]
    if collectives.REGISTRY[("allreduce", a)].tiered is None
    and collectives.REGISTRY[("allreduce", a)].variant_of is None
)


def allreduce_costs(links=("tcp-10gbe",), ranks=(8,), sizes=(2**20,)) -> list[dict]:
    """Closed-form all-reduce time of every algorithm for every (link, ranks, size).

    Each row splits the time into its latency part (the cost of 0 bytes: the alpha terms)
    and its bandwidth part (the rest: the beta terms).
    """
    rows = []
    for link in map(get_link, links):
        for p in ranks:
            for algorithm in ALLREDUCE_ALGORITHMS:
                latency = closed_form("allreduce", algorithm, p, 0, link)
                for n in sizes:
                    t = closed_form("allreduce", algorithm, p, n, link)
                    rows.append(
                        {
                            "link": link.name,
                            "algorithm": algorithm,
                            "ranks": p,
                            "nbytes": n,
                            "time_s": t,
                            "latency_s": latency,
                            "bandwidth_s": t - latency,
                            "source": "closed form",
                        }
                    )
    return rows


def emulated_allreduce_costs(
    link="tcp-10gbe", ranks: int = 8, sizes=(2**10, 2**20, 2**30), max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES
) -> list[dict]:
    """The same rows as ``allreduce_costs``, measured by running every algorithm (real
    buffers within ``max_memory_bytes``; sizes must split exactly, see ``budget``)."""
    rows = []
    for algorithm in ALLREDUCE_ALGORITHMS:
        for n in sizes:
            rec = simulate_collective("allreduce", algorithm, ranks, n, link, max_memory_bytes=max_memory_bytes)
            rows.append(
                {
                    "link": rec["link"],
                    "algorithm": algorithm,
                    "ranks": ranks,
                    "nbytes": n,
                    "time_s": rec["virtual_time_s"],
                    "source": "emulated",
                }
            )
    return rows


def library_choice(library: str = "mpich", link="tcp-10gbe", ranks=(8,), sizes=(2**20,)) -> list[dict]:
    """What an MPI library's MPI_Allreduce runs at each (ranks, size) (its preset in
    dlsys.machine.netstack.LIBRARIES: the selection rule of its source) and that algorithm's
    closed-form time on ``link``. Rows: library, ranks, nbytes, algorithm (the registry's
    name), time_s."""
    if library not in LIBRARIES:
        raise ValueError(f"library: unknown library {library!r}; valid: {', '.join(LIBRARIES)}")
    lib, link = LIBRARIES[library], get_link(link)
    rows = []
    for p in ranks:
        for n in sizes:
            algorithm = lib.algorithm(n, p)
            rows.append(
                {
                    "library": library,
                    "ranks": p,
                    "nbytes": n,
                    "algorithm": algorithm,
                    "time_s": closed_form("allreduce", algorithm, p, n, link),
                }
            )
    return rows


def choice_changes(rows: list[dict], x: str = "nbytes") -> list[dict]:
    """Where a library's choice (rows of ``library_choice``, one slice along ``x``) changes:
    {x: the first value with the new algorithm, "from", "to"}."""
    rows = sorted(rows, key=lambda r: r[x])
    return [
        {x: b[x], "from": a["algorithm"], "to": b["algorithm"]}
        for a, b in zip(rows, rows[1:])
        if a["algorithm"] != b["algorithm"]
    ]


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
    return [
        {
            "link": l.name,
            "kind": "RDMA / zero copy" if l.kernel_copies == 0 else "TCP / kernel copies",
            "alpha_s": l.alpha_s,
            "beta_s_per_byte": l.beta_s_per_byte,
            "bandwidth_Bps": l.bandwidth_Bps,
            "n_half_bytes": l.alpha_s / l.beta_s_per_byte,
        }
        for l in LINK_PRESETS.values()
    ]
