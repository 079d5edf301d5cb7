"""Every published result dlsys teaches, run again: the paper's figure beside dlsys's, and a
verdict (SPEC's claims; issue 24).

    from dlsys.course import reproduce
    reproduce.run_claims(["ring-closed-form"], quick=True)    # one record per claim
    dlsys reproduce [--quick] [--json] [CLAIM ...]            # the same, as a table

One ``Claim`` per published statement: the paper, where in it (figure, table, section), the
statement, the paper's number(s) (``published``, and ``paper_value`` as the table prints
them), a runner ``run(quick)`` that runs dlsys (quick settings for CI, the app and the docs;
full ones for the record) and returns our numbers, a verdict rule ``judge(paper, measured)``
and what to plot (``plot``). A verdict is one of ``VERDICTS``:
- "holds": our number is the paper's within the claim's stated tolerance;
- "shape holds": the trend the paper shows holds, not its number (another problem, or a
  statement with no number to compare);
- "differs": and the reason, in the record's "why".
A claim of several lines (methods, models) judges each line ("lines": [{"line", "verdict",
"why"}]) and takes the worst line's verdict (``verdict.summary``): one method's failure
cannot hide behind the others' success.
Issue 24's rule: a claim is reproduced by modelling what the paper's system did, never by
tuning a constant until the figure appears; where the model cannot reach it, "differs"
says why.

A runner returns {"dlsys": {label: number}, "ours": text, "rows": [{"series", "x", "y"}]}
and, when the paper's figure is a formula rather than a constant, "paper": {label: number}
(the formula evaluated where we measured). Adding a claim is a runner, a judge (or one of
the rules in ``verdict``: ``within``, ``in_range``) and one ``Claim`` in its family's
module (collectives, consistency, compression, large_batch, taihulight, scheduling,
planner), whose
``CLAIMS`` list this package joins in the order the table shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from . import collectives, compression, consistency, large_batch, planner, scheduling, taihulight
from .verdict import VERDICTS, Claim, summary

CLAIMS: dict[str, Claim] = {
    claim.name: claim
    for family in (collectives, consistency, compression, large_batch, taihulight, scheduling, planner)
    for claim in family.CLAIMS
}


def check_names(names) -> list[str]:
    """``names`` (all claims if empty), each a key of CLAIMS; a ValueError naming the valid ones."""
    unknown = [name for name in names or () if name not in CLAIMS]
    if unknown:
        raise ValueError(f"claim: unknown claim {', '.join(map(repr, unknown))}; valid: {', '.join(CLAIMS)}")
    return list(names) or list(CLAIMS)


def run_claim(claim: Claim, quick: bool = False) -> dict:
    """Run one claim: the paper's side, ours, the verdict and why (a claim of several lines:
    the worst line's, and each line's in "lines"), and the rows to plot."""
    start = time.perf_counter()
    measured = claim.run(quick)
    paper = measured.get("paper", claim.published or {})
    verdict, why, lines = summary(claim.judge(paper, measured))
    for v in (verdict, *(line["verdict"] for line in lines)):
        if v not in VERDICTS:
            raise AssertionError(f"{claim.name}: verdict {v!r} is not one of {VERDICTS}")
    return {
        "claim": claim.name,
        "paper": claim.paper,
        "where": claim.where,
        "statement": claim.statement,
        "paper_value": claim.paper_value,
        "ours": measured["ours"],
        "verdict": verdict,
        "why": why,
        "lines": lines,
        "published": paper,
        "dlsys": measured["dlsys"],
        "rows": measured["rows"],
        "plot": claim.plot._asdict(),
        "quick": quick,
        "wall_time_s": time.perf_counter() - start,
    }


def run_claims(names=(), quick: bool = False, progress: Callable[[str], None] | None = None) -> list[dict]:
    """``run_claim`` for every named claim (all if none), in CLAIMS' order of the names."""
    records = []
    for name in check_names(names):
        if progress:
            progress(name)
        records.append(run_claim(CLAIMS[name], quick))
    return records
