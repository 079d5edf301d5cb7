"""A claim and its verdict: what ``dlsys.course.reproduce`` runs for each published
statement, the common rules a judge is built from (``within``, ``in_range``, and
``within_each`` for a claim of several lines), and ``summary``: a claim of several lines
(methods, models) takes its worst line's verdict, so no line's failure hides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

VERDICTS = ("holds", "shape holds", "differs")


class Plot(NamedTuple):
    """How ``dlsys.viz.reproduce.claim_figure`` draws a claim's rows: "line" or "bar"."""

    kind: str
    x_title: str
    y_title: str
    log_x: bool = False
    log_y: bool = False


@dataclass(frozen=True)
class Claim:
    name: str  # the CLI's name for it
    paper: str  # authors, year, venue
    where: str  # figure, table or section of the paper
    statement: str  # what the paper says, in a sentence
    paper_value: str  # the paper's figure as the table prints it
    run: Callable[[bool], dict]  # quick -> {"dlsys": {label: number}, "ours": text, "rows": [...]}
    # (paper numbers, measured) -> (verdict, why), or {line: (verdict, why)} for several lines (``summary``)
    judge: Callable[[dict, dict], tuple[str, str] | dict[str, tuple[str, str]]]
    plot: Plot
    published: dict | None = None  # the paper's numbers by label, where they are constants


def within(rel_tol: float, because: str) -> Callable[[dict, dict], tuple[str, str]]:
    """ "holds" if every number we measured is the paper's within ``rel_tol`` (relative),
    else "differs" with the largest gap and ``because``."""

    def judge(paper: dict, measured: dict) -> tuple[str, str]:
        gaps = {
            label: abs(measured["dlsys"][label] - value) / abs(value)
            for label, value in paper.items()
            if label in measured["dlsys"]
        }
        worst = max(gaps, key=gaps.__getitem__)
        if gaps[worst] <= rel_tol:
            return "holds", (
                f"within a relative {rel_tol:.2g} of the paper everywhere (largest gap {gaps[worst]:.2g}, {worst})"
            )
        return "differs", f"{worst}: ours {measured['dlsys'][worst]:.3g}, the paper's {paper[worst]:.3g}. {because}"

    return judge


def in_range(because: Callable[[dict], str]) -> Callable[[dict, dict], tuple[str, str]]:
    """ "holds" if every number we measured lies in the paper's (low, high) range for its
    label, else "differs" and ``because(measured)``."""

    def judge(paper: dict, measured: dict) -> tuple[str, str]:
        outside = [
            label
            for label, (low, high) in paper.items()
            if label in measured["dlsys"] and not low <= measured["dlsys"][label] <= high
        ]
        if not outside:
            return "holds", "inside the paper's range"
        return "differs", because(measured)

    return judge


def series_rows(series: str, points) -> list[dict]:
    """One plotted series: a row {"series", "x", "y"} per (x, y) point."""
    return [{"series": series, "x": x, "y": y} for x, y in points]


def within_each(rel_tol: float, because: Callable[[str], str]) -> Callable[[dict, dict], dict]:
    """``within`` line by line: each label of the paper we measured (a model, a method) is a
    line with its own verdict, "differs" with ``because(label)``."""

    def judge(paper: dict, measured: dict) -> dict[str, tuple[str, str]]:
        lines = {}
        for label, theirs in paper.items():
            if label not in measured["dlsys"]:
                continue
            ours = measured["dlsys"][label]
            gap = abs(ours - theirs) / abs(theirs)
            told = f"ours {ours:.3g}, the paper's {theirs:.3g} (relative gap {gap:.2g})"
            lines[label] = (
                ("holds", f"{told}, within {rel_tol:.2g}")
                if gap <= rel_tol
                else ("differs", f"{told}, more than {rel_tol:.2g}. {because(label)}")
            )
        return lines

    return judge


def worst(verdicts) -> str:
    """The worst of ``verdicts`` in ``VERDICTS``' order: "differs" over "shape holds" over "holds"."""
    return max(verdicts, key=VERDICTS.index)


def summary(judged: tuple[str, str] | dict[str, tuple[str, str]]) -> tuple[str, str, list[dict]]:
    """A judge's answer as (verdict, why, lines). A judge answers (verdict, why) for a claim of
    one line, or {line: (verdict, why)} for one of several (methods, models): then the
    claim's verdict is its worst line's, so no line's failure hides behind the others'
    success, and why names every line's verdict; ``lines`` holds each line's own why."""
    if not isinstance(judged, dict):
        return (*judged, [])
    if not judged:
        raise AssertionError("a judge of several lines gave none")
    verdict = worst(v for v, _ in judged.values())
    tally = ", ".join(f"{line} {v}" for line, (v, _) in judged.items())
    lines = [{"line": line, "verdict": v, "why": why} for line, (v, why) in judged.items()]
    return verdict, f"the worst of its lines: {tally}", lines
