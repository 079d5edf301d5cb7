"""Checks of subplots: subplots that show the same quantity (the same axis title) share
its scale (``matches``) or have one range."""

from __future__ import annotations

from .figure import Figure, axis_key, axis_title, short


def check_shared(f: Figure) -> list[str]:
    """Axes with the same title (one quantity) in several subplots: linked, or one range."""
    problems = []
    for letter in "xy":
        by_title: dict = {}
        for name, ax in f.axes.items():
            if name[0] == letter and f.traces_on(name) and axis_title(ax) and f.axis_type(name) in ("linear", "log"):
                by_title.setdefault(axis_title(ax), []).append(name)
        for title, names in by_title.items():
            roots = {_root(f, n) for n in names}
            ranges = {tuple(round(v, 9) for v in f.data_range(n) or ()) for n in names}
            if len(roots) > 1 and len(ranges) > 1:
                problems.append(
                    f"{', '.join(names)} '{short(title)}': one quantity on {len(names)} subplots with "
                    "different scales (matches=...)"
                )
    return problems


def _root(f: Figure, name: str) -> str:
    seen = set()
    while f.axes.get(name, {}).get("matches") and name not in seen:
        seen.add(name)
        name = axis_key(f.axes[name]["matches"])
    return name
