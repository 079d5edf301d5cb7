"""The ring all-reduce's closed form (Patarasuk & Yuan; Thakur, Rabenseifner & Gropp)
against the emulated ring."""

from __future__ import annotations

from ...experiments.collectives import simulate_collective
from ...machine.net import get_link
from .verdict import Claim, Plot, series_rows, within

RING_LINK, RING_NBYTES = "tcp-10gbe", 64 * 2**20


def run_ring(quick: bool) -> dict:
    """The ring all-reduce of 64 MiB emulated at p ranks (real arrays within a 4 MiB budget,
    charged at the logical size) against 2 (p - 1)(alpha + n / (p B))."""
    ranks = (2, 4, 8, 16, 32) if quick else (2, 4, 8, 16, 32, 64, 128, 256)  # p divides n: the paper's n/p is exact
    link = get_link(RING_LINK)
    emulated = {
        p: simulate_collective(
            "allreduce", "ring", p, RING_NBYTES, RING_LINK, record=False, max_memory_bytes=4 * 2**20
        )["virtual_time_s"]
        for p in ranks
    }
    formula = {p: 2 * (p - 1) * (link.alpha_s + RING_NBYTES / p * link.beta_s_per_byte) for p in ranks}
    top = max(ranks)
    return {
        "dlsys": {f"p={p}": t for p, t in emulated.items()},
        "paper": {f"p={p}": t for p, t in formula.items()},
        "ours": f"{emulated[top] * 1e3:.2f} ms at p = {top}, {emulated[2] * 1e3:.2f} ms at p = 2 (emulated)",
        "rows": series_rows("2(p-1)(α + n/(pB))", formula.items()) + series_rows("dlsys, emulated", emulated.items()),
    }


CLAIMS = [
    Claim(
        "ring-closed-form",
        "Patarasuk & Yuan 2009 (JPDC); Thakur, Rabenseifner & Gropp 2005 (IJHPCA)",
        "the ring all-reduce's cost (SPEC section 2)",
        "A ring all-reduce of n bytes on p ranks takes 2(p-1)(α + n/(pB)): for large p it no longer depends on p.",
        "2(p-1)(α + n/(pB))",
        run_ring,
        within(1e-9, "the emulator's clock rules no longer give the ring its closed form"),
        Plot("line", "ranks p", "time (s)", log_x=True),
    ),
]
