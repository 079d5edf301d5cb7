"""Checks of axes and units: every numeric axis has a title and a unit (or counts things) and
two labelled ticks; data crowded over decades call for a log axis, and a log axis labels its
decades or binary sizes; bytes are binary everywhere; a tiny difference does not fill a linear
axis; auto ticks do not read "35k" beside a unit; legend entries read as words."""

from __future__ import annotations

import math
import re

from .figure import TAG, Figure, axis_key, axis_title, number, short

CROWDED = 0.01  # a linear axis where half the points sit in its first hundredth needs a log axis
TINY_SPREAD = 0.1  # spread / size below which a linear axis not from zero magnifies a tiny difference

_UNIT = re.compile(
    r"\((?:[^()]*[a-zA-Zµ%×/][^()]*)\)|\b(?:s|ms|µs|us|ns|B|KiB|MiB|GiB|TiB|b/s|bit/s|Gbit/s|Gbps"
    r"|Mbps|GB/s|MB/s|B/s|FLOP/s|TFLOP/s|bytes?|seconds?|%|x|×)(?=$|[\s,)/])|%"
)
_COUNT = re.compile(
    r"\b(?:ranks?|workers?|servers?|nodes?|GPUs?|count|number|entries|messages|items|steps?|epochs?"
    r"|iterations?|layers?|stages?|micro-batch(?:es)?|batch(?:es)?|tokens?|experts?|ratio|speedup|loss"
    r"|accuracy|norm|fraction|share|p|W|M|k|value|factor|tensors?|parameters|elements|chunks?|blocks?"
    r"|times|capacity factor|probability|density|frequency|distance|alpha|position|index|gradients|reads|pushes|draws|clocks?"
    r"|pulls)\b|\S / \S",
    re.I,
)
_DECIMAL_BYTES = re.compile(r"\d\s*(?:kB|KB|MB|GB|TB)\b(?!/s)|\((?:kB|KB|MB|GB|TB)\)")
_BYTE_AXIS = re.compile(r"\bbytes?\b|\b(?:B|KiB|MiB|GiB|TiB)\b")
_NAMED_NUMBERS = {  # words a reader counts by ("TP 8": Megatron's name for 8-way tensor parallelism)
    "rank",
    "tp",
    "pp",
    "dp",
    "worker",
    "server",
    "step",
    "layer",
    "stage",
    "group",
    "node",
    "block",
    "chunk",
    "iteration",
    "epoch",
    "batch",
    "of",
    "p",
    "s",
    "m",
    "k",
    "n",
    "top",
    "and",
    "at",
    "to",
    "worker(s)",
    "resnet",
    "gpt",
    "llama",
    "vgg",
    "w",
    "in",
    "v",
    "by",
    "for",
    "on",
    "per",
    "x",
    "bucket",
    "lane",
}


def check_axes(f: Figure) -> list[str]:
    problems = []
    for name, ax in f.axes.items():
        if ax.get("visible") is False or not f.traces_on(name) or f.axis_type(name) not in ("linear", "log"):
            continue
        if all(t.get("type") == "heatmap" for t in f.traces_on(name)):
            continue  # a heatmap's axes index its rows and columns
        title, ticktext = axis_title(ax), [str(t) for t in ax.get("ticktext") or []]
        shows = ax.get("showticklabels", True) is not False
        target = axis_key(ax["matches"]) if ax.get("matches") else None
        if not title and shows and not (target and axis_title(f.axes.get(target, {}))):
            problems.append(f"{name}: no title")
        elif title and not (
            _UNIT.search(title)
            or _COUNT.search(title)
            or any(_UNIT.search(t) for t in ticktext)
            or "%" in (ax.get("tickformat") or "")
            or ax.get("ticksuffix")
        ):
            problems.append(f"{name} '{short(title)}': no unit (and not a count)")
        rng = f.data_range(name)
        numbers = [float(v) for v in f.values(name) if number(v)]
        if rng is None or not numbers:
            continue
        kind = f.axis_type(name)
        if ax.get("tickvals") is not None:
            vals = [math.log10(v) if kind == "log" else v for v in ax["tickvals"] if kind != "log" or v > 0]
            inside = [v for v in vals if rng[0] - 1e-9 <= v <= rng[1] + 1e-9]
            if shows and len(inside) < 2:
                problems.append(f"{name} '{short(title)}': {len(inside)} labelled tick(s) in its range")
        elif kind == "log":
            problems.append(
                f"{name} '{short(title)}': a log axis without its tick labels (style.log_axis: decades or binary sizes)"
            )
        for t in ticktext + [title]:
            if _DECIMAL_BYTES.search(t):
                problems.append(f"{name}: decimal byte unit in '{short(t)}' (use KiB, MiB, GiB)")
        if kind == "linear":
            problems += _check_linear(f, name, ax, title, numbers)
    return problems


def _check_linear(f: Figure, name: str, ax: dict, title: str, numbers: list[float]) -> list[str]:
    problems = []
    points = [float(v) for v in f.values(name, kinds=("scatter", "scattergl")) if number(v)]
    stacked = f.get("barmode") in ("stack", "relative")
    bars = [] if stacked else [float(v) for v in f.values(name, kinds=("bar",)) if number(v)]
    for values, what in ((points, "points"), (bars, "bars")):
        positive = [v for v in values if v > 0]
        if len(positive) >= 4 and max(positive) / min(positive) > 100:
            crowded = sum(v < CROWDED * max(positive) for v in positive)
            if crowded >= len(positive) / 2:
                problems.append(
                    f"{name} '{short(title)}': {crowded} of {len(positive)} {what} within the first "
                    f"{CROWDED:.0%} of a linear axis over {math.log10(max(positive) / min(positive)):.1f} "
                    "decades (use style.log_axis)"
                )
    if (
        points
        and not bars
        and not f.has_bars(name)
        and ax.get("rangemode") != "tozero"
        and not ax.get("range")
        and "zoom" not in title.lower()
    ):
        lo, hi = min(points), max(points)
        size = max(abs(lo), abs(hi))
        if lo * hi > 0 and 0 < hi - lo < TINY_SPREAD * size:
            problems.append(
                f"{name} '{short(title)}': a difference of {hi - lo:.3g} fills an axis of values near "
                f"{size:.3g} ({(hi - lo) / size:.1%}): start it at zero (rangemode='tozero') or say 'zoomed'"
            )
    if (
        ax.get("tickvals") is None
        and ax.get("exponentformat") not in ("none", "power", "e", "E")
        and (_UNIT.search(title) or _BYTE_AXIS.search(title))
    ):
        rng = f.data_range(name)
        top = max(abs(rng[0]), abs(rng[1])) if rng else 0
        if top >= 1e4 or 0 < top < 1e-3:
            problems.append(
                f"{name} '{short(title)}': auto ticks reach {top:.3g} and get an SI suffix ('35k') beside "
                "the unit in the title: use a larger or smaller unit"
            )
    return problems


def check_text_units(f: Figure) -> list[str]:
    """Decimal byte units anywhere a reader sees them: title, notes, labels, legend, colour bars."""
    texts = [("title", f.get("title", "text") or "")]
    texts += [
        (f"annotation {i} '{short(a.get('text', ''))}'", a.get("text", ""))
        for i, a in enumerate(f.layout.get("annotations", []))
    ]
    for t in f.traces:
        texts.append((f"trace '{short(t.get('name', ''))}'", t.get("name") or ""))
        for label in t.get("text") if isinstance(t.get("text"), (list, tuple)) else [t.get("text") or ""]:
            texts.append((f"trace '{short(t.get('name', ''))}' text", str(label)))
        texts.append((f"trace '{short(t.get('name', ''))}' colour bar", axis_title(t.get("colorbar", {}))))
    return [
        f"{where}: decimal byte unit in '{short(text)}' (use KiB, MiB, GiB)"
        for where, text in texts
        if text and _DECIMAL_BYTES.search(str(text))
    ]


def internal_label(name: str) -> bool:
    """A legend entry that reads like a record rather than words: snake_case, key=value, or
    words each followed by a bare number that no reader counts by ("clock 0 slowest 0")."""
    text = TAG.sub(" ", name)
    if re.search(r"\b[a-z]+_[a-z_]+\b", text) or re.search(r"[A-Za-z]{2,}=", text) or re.search(r"[{}\[\]]", text):
        return True
    odd = [w for w, _ in re.findall(r"\b([A-Za-z()]+) (\d+)\b", text) if w.lower() not in _NAMED_NUMBERS]
    return len(odd) >= 2


def check_legend(f: Figure) -> list[str]:
    return [
        f"legend entry '{short(t['name'])}': reads like an internal label (raw field names)"
        for t in f.traces
        if f.in_legend(t) and internal_label(str(t["name"]))
    ]
