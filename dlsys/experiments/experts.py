"""All-to-all and mixture-of-experts experiments (tidy records for the page and the lesson):
each all-to-all algorithm's emulated time against its closed form and MPICH's choice; the
blocks each rank sends at each step; tokens per expert and dropped tokens against the
capacity factor. Import it as a module: ``from dlsys.experiments import experts``."""

from __future__ import annotations

import numpy as np

from .. import collectives
from ..collectives import exchange
from ..comm.launch import launch
from ..train.moe import MoEConfig, train_expert_parallel, train_single
from .collectives import simulate_collective

# MPICH's MPIR_Alltoall selection (src/mpi/coll/alltoall/alltoall.c, MPICH 3.x; the ch4 OFI
# selection keeps it): Bruck when a block (sendcount * type size) is at most
# MPIR_CVAR_ALLTOALL_SHORT_MSG_SIZE (default 256 bytes) and p >= 8; isend/irecv of every
# block at once up to MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE (32768); pairwise above. The
# isend/irecv "scattered" algorithm is not in our registry: it sends the pairwise
# exchange's bytes, so pairwise stands in for it here.
MPICH_ALLTOALL_SHORT_MSG_SIZE = 256
MPICH_ALLTOALL_MIN_BRUCK_RANKS = 8


def mpich_alltoall_algorithm(block_nbytes: float, ranks: int) -> str:
    """The registry algorithm MPICH's MPI_Alltoall would run (see the constants above)."""
    short = block_nbytes <= MPICH_ALLTOALL_SHORT_MSG_SIZE and ranks >= MPICH_ALLTOALL_MIN_BRUCK_RANKS
    return "bruck" if short else "pairwise"


def app_alltoall(algorithm: str, ranks: int, block_nbytes: int, link: str, max_memory_bytes: int) -> dict:
    """One all-to-all as the pipelines page shows it, in plain data (JSON) that
    dlsys.course.precomputed can store: ``simulate_collective``'s virtual time and
    closed form, and its trace under "trace" (``Trace.to_rows``; ``records.with_trace``
    gives the Trace back)."""
    record = simulate_collective(
        "alltoall", algorithm, ranks, ranks * block_nbytes, link, max_memory_bytes=max_memory_bytes
    )
    return {
        "algorithm": algorithm,
        "ranks": ranks,
        "block_nbytes": block_nbytes,
        "link": link,
        "virtual_time_s": record["virtual_time_s"],
        "closed_form_s": record["closed_form_s"],
        "trace": record["result"].trace.to_rows(),
    }


def alltoall_costs(ranks: int = 16, block_sizes=(8, 64, 256, 2048, 2**14, 2**17), link="rdma-edr") -> list[dict]:
    """Each all-to-all algorithm run at each block size (bytes one rank sends one other
    rank; n = ranks * block is its whole buffer): emulated time, closed form and MPICH's
    choice. Rows: algorithm, ranks, block_nbytes, nbytes, time_s, closed_form_s, mpich."""
    rows = []
    for algorithm in collectives.ALGORITHMS["alltoall"]:
        for block in block_sizes:
            rec = simulate_collective("alltoall", algorithm, ranks, ranks * block, link)
            rows.append(
                {
                    "algorithm": algorithm,
                    "ranks": ranks,
                    "block_nbytes": block,
                    "nbytes": ranks * block,
                    "time_s": rec["virtual_time_s"],
                    "closed_form_s": rec["closed_form_s"],
                    "mpich": mpich_alltoall_algorithm(block, ranks),
                }
            )
    return rows


def _tagged_alltoall(comm, algorithm: str):
    """Row d of rank r's buffer is the number p r + d: a value names its source and destination."""
    p = comm.size
    return collectives.alltoall(comm, p * comm.rank + np.arange(p, dtype=np.float64).reshape(p, 1), algorithm=algorithm)


def alltoall_steps(ranks: int = 4, algorithm: str = "pairwise", link="rdma-edr") -> list[dict]:
    """Which rank sends which blocks at each step of a real all-to-all (the animation's frames).

    One dict per message: step, src, dst, nbytes, depart_s, arrive_s, and ``blocks``, the
    (source, destination) of every block it carries. Pairwise: the message's block field
    (its destination). Bruck: at step k rank r forwards position j (j & 2^k) holding the
    block from r - (j mod 2^k) for r - (j mod 2^k) + j. Checked: the blocks every rank ends
    with are the ones the run returned."""
    collectives.check_algorithm("alltoall", algorithm)
    if not 2 <= ranks <= 64:
        raise ValueError(f"ranks must be in 2..64, got {ranks!r}")
    result = launch(_tagged_alltoall, ranks, "threads", link=link, args=(algorithm,))
    rows = []
    for m in sorted(result.trace.messages, key=lambda m: (m.step, m.src)):
        if algorithm == "pairwise":
            blocks = [(m.src, m.block)]
        else:
            k = 1 << m.step
            blocks = [((m.src - j % k) % ranks, (m.src - j % k + j) % ranks) for j in range(1, ranks) if j & k]
        rows.append(
            {
                "step": m.step,
                "src": m.src,
                "dst": m.dst,
                "nbytes": m.nbytes,
                "depart_s": m.depart_s,
                "arrive_s": m.arrive_s,
                "blocks": blocks,
            }
        )
    for r, got in enumerate(result.values):
        if [int(v) for v in got.ravel()] != [ranks * s + r for s in range(ranks)]:
            raise AssertionError(f"alltoall/{algorithm}: rank {r} returned {got.ravel()}")
    arrived = {dst for row in rows for _, dst in row["blocks"] if row["dst"] == dst}
    if algorithm == "pairwise" and arrived != set(range(ranks)):
        raise AssertionError("pairwise: some rank received no block addressed to it")
    return rows


def bruck_step_blocks(ranks: int) -> list[int]:
    """Blocks per Bruck message at each step (c_k; the closed form's counts)."""
    return exchange.bruck_counts(ranks)


def bruck_crossover_block_nbytes(ranks: int, link="rdma-edr") -> float:
    """The block size below which Bruck beats the pairwise exchange, from the closed forms
    (both linear in the block b: (p-1)(alpha + b beta) = sum_k (alpha + c_k b beta))."""
    at = {
        b: [collectives.textbook_form("alltoall", a, ranks, ranks * b, link) for a in ("pairwise", "bruck")]
        for b in (0, 1)
    }
    (pw0, br0), (pw1, br1) = at[0], at[1]
    return (pw0 - br0) / ((br1 - br0) - (pw1 - pw0))


def expert_load(
    capacity_factors=(0.5, 0.75, 1.0, 1.25, 1.5, 2.0),
    top_ks=(1, 2),
    ep: int = 4,
    experts: int = 8,
    tokens: int = 64,
    seed: int = 0,
) -> list[dict]:
    """Tokens per expert and dropped tokens for each (top-k, capacity factor): one forward
    step of the expert-parallel layer on ``ep`` ranks, ``tokens`` per rank. Rows, one per
    expert: top_k, capacity_factor, expert, wanted (tokens routed to it, all ranks), kept,
    capacity (per rank times ranks), dropped (choices over capacity, all experts), choices
    (tokens * k * ranks)."""
    rows = []
    for k in top_ks:
        for cf in capacity_factors:
            config = MoEConfig(
                d_model=16, d_ff=32, experts=experts, top_k=k, capacity_factor=cf, tokens=tokens, seed=seed
            )
            stats = [v["stats"][0] for v in train_expert_parallel(config, ep, steps=1).values]
            wanted, kept = sum(s["wanted"] for s in stats), sum(s["kept"] for s in stats)
            dropped = sum(s["dropped"] for s in stats)
            for e in range(experts):
                rows.append(
                    {
                        "top_k": k,
                        "capacity_factor": cf,
                        "expert": e,
                        "wanted": int(wanted[e]),
                        "kept": int(kept[e]),
                        "capacity": stats[0]["capacity"] * ep,
                        "dropped": dropped,
                        "choices": tokens * k * ep,
                    }
                )
    return rows


def dropped_fraction(rows: list[dict]) -> list[dict]:
    """One row per (top_k, capacity_factor) of ``expert_load``: the fraction of choices dropped."""
    seen = {(r["top_k"], r["capacity_factor"]): r for r in rows}
    return [
        {"top_k": k, "capacity_factor": cf, "dropped": r["dropped"], "dropped_fraction": r["dropped"] / r["choices"]}
        for (k, cf), r in seen.items()
    ]


# --- tables of docs/experts.md (dlsys.course.docs) -----------------------------------

TABLE_RANKS, TABLE_LINK = 16, "rdma-edr"


def table_alltoall() -> tuple[list[str], list[list]]:
    """Both algorithms at each block size on 16 ranks: emulated time, closed form, MPICH's choice."""
    rows = alltoall_costs(TABLE_RANKS, (8, 256, 2048, 2**14, 2**17), TABLE_LINK)
    by = {(r["algorithm"], r["block_nbytes"]): r for r in rows}
    out = []
    for block in dict.fromkeys(r["block_nbytes"] for r in rows):
        pw, br = by["pairwise", block], by["bruck", block]
        out.append(
            [
                f"{block:,}",
                f"{pw['time_s'] * 1e6:,.2f}",
                f"{pw['closed_form_s'] * 1e6:,.2f}",
                f"{br['time_s'] * 1e6:,.2f}",
                f"{br['closed_form_s'] * 1e6:,.2f}",
                "bruck" if br["time_s"] < pw["time_s"] else "pairwise",
                pw["mpich"],
            ]
        )
    crossover = bruck_crossover_block_nbytes(TABLE_RANKS, TABLE_LINK)
    out.append([f"crossover {crossover:,.0f}", "", "", "", "", "", f"MPICH: {MPICH_ALLTOALL_SHORT_MSG_SIZE}"])
    return (
        [
            "block (B), 16 ranks, rdma-edr",
            "pairwise emulated (µs)",
            "pairwise form (µs)",
            "Bruck emulated (µs)",
            "Bruck form (µs)",
            "faster",
            "MPICH runs",
        ],
        out,
    )


def table_dropped() -> tuple[list[str], list[list]]:
    """Dropped choices against the capacity factor, top-1 and top-2 (8 experts on 4 ranks, 64 tokens each)."""
    fractions = dropped_fraction(expert_load())
    factors = sorted({f["capacity_factor"] for f in fractions})
    by = {(f["top_k"], f["capacity_factor"]): f for f in fractions}
    return (
        ["capacity factor", "top-1 (Switch) dropped", "top-2 (GShard) dropped"],
        [[f"{cf:g}", f"{by[1, cf]['dropped_fraction']:.1%}", f"{by[2, cf]['dropped_fraction']:.1%}"] for cf in factors],
    )


def table_equality() -> tuple[list[str], list[list]]:
    """Expert parallel against one rank: the largest difference after 3 SGD steps."""
    rows = []
    for k, cf in ((1, 1.0), (2, 1.25)):
        config = MoEConfig(top_k=k, capacity_factor=cf)
        for ep in (1, 2, 4):
            values = train_expert_parallel(config, ep, steps=3).values
            single = train_single(config, ep, steps=3)
            diffs = [np.abs(np.concatenate([v["y"] for v in values]) - single["y"]).max()]
            for name, w in single["params"].items():
                got = (
                    values[0]["params"][name]
                    if name == "router"
                    else np.concatenate([v["params"][name] for v in values])
                )
                diffs.append(np.abs(got - w).max())
            dropped = sum(v["stats"][0]["dropped"] for v in values)
            rows.append([f"top-{k}, capacity factor {cf:g}", ep, dropped, f"{max(diffs):.1e}"])
    return ["gating", "ep ranks", "choices dropped (step 1)", "largest difference (outputs, weights)"], rows


TABLES = {"experts.alltoall": table_alltoall, "experts.dropped": table_dropped, "experts.equality": table_equality}
