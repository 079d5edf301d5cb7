"""docs/reproductions.md's tables: every claim's record at quick settings."""

from __future__ import annotations

from . import Sources, markdown_table


def why(record: dict) -> str:
    """The record's why, then each of its lines' verdict and why (a claim of several lines)."""
    return record["why"] + "".join(
        f"<br>{line['line']}: **{line['verdict']}**, {line['why']}" for line in record["lines"]
    )


def reproductions(src: Sources) -> str:
    return markdown_table(
        ["claim", "paper", "where", "paper's figure", "dlsys (quick settings)", "verdict", "why"],
        [
            [f"`{r['claim']}`", r["paper"], r["where"], r["paper_value"], r["ours"], f"**{r['verdict']}**", why(r)]
            for r in src.claims
        ],
    )


def statements(src: Sources) -> str:
    return "".join(f"- `{r['claim']}` ({r['paper']}, {r['where']}): {r['statement']}\n" for r in src.claims)
