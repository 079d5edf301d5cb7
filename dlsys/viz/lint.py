"""A figure lint: what a class at the back of the room would find wrong with a figure drawn
1280 px wide, found before class.

``lint(fig, width_px=1280)`` returns one sentence per problem, each naming the element
("xaxis2", "annotation 3 '→ ring at 64 KiB'", "trace 'ring' text 'ring'"):

- every numeric axis has a title, and a unit (in the title, in its tick labels, or a %
  format) unless it counts things; it shows at least two labelled ticks;
- an axis whose data crowd into its first hundredth (values over two decades and more) is
  a log axis, and a log axis has labelled decades or binary sizes (``style.log_axis``);
- sizes in bytes are binary (KiB, MiB, GiB) everywhere in the figure, and no auto tick
  reads "35k" beside a unit (plotly's SI suffixes start at 10^4 and below 10^-3);
- a linear axis is not filled by a tiny difference: its values' spread is at least a tenth
  of their size, or the axis starts at zero (``rangemode="tozero"``), or its title says
  "zoomed";
- no legend entry reads like a record (snake_case, ``key=value``, "clock 0 slowest 0");
- annotations and text labels lie inside their plot (subplot titles and paper notes inside
  the figure) and do not overlap each other; a note does not cover another trace's line;
  heatmap cell labels fit their cells at a readable size;
- subplots showing the same quantity (same axis title) share that axis (``matches``);
- lines on one plot that coincide on screen differ in dash or marker.

Geometry is estimated, not rendered (no browser here): a glyph is ``CHAR_EM`` of its
font size wide on average (Arial and Source Sans run 0.5 to 0.55 em for lower case, digits
0.55), a line ``LINE_EM`` high; the plot area is the figure less its margins, grown by the
tick labels, axis titles, the title and a legend at the right as plotly's ``automargin``
grows them; autoranges pad markers by 5 % as plotly does. The estimate errs on the wide
side, so a label it passes fits.
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

CHAR_EM, LINE_EM = 0.55, 1.25
DEFAULT_HEIGHT_PX = 450  # plotly's, for a figure that sets none
MIN_CELL_FONT_PX = 10  # plotly shrinks heatmap cell text to fit; smaller than this is unreadable projected
CROWDED = 0.01  # a linear axis where half the points sit in its first hundredth needs a log axis
TINY_SPREAD = 0.1  # spread / size below which a linear axis not from zero magnifies a tiny difference
OVERLAP_PX = 3  # boxes overlapping by less than this in either direction are touching, not overlapping

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
_NAMED_NUMBERS = {
    "rank",
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
_TAG = re.compile(r"<[^>]+>")


@dataclass
class _Box:
    """A text label's extent in figure pixels (y down), and what to call it."""

    name: str
    x0: float
    y0: float
    x1: float
    y1: float
    subplot: str | None  # "xy", "x2y2" for data-placed labels; None for paper-placed ones
    grows: str = ""  # the letters of the autoranged axes that grow to hold it

    def overlap(self, other: _Box) -> bool:
        return (
            min(self.x1, other.x1) - max(self.x0, other.x0) > OVERLAP_PX
            and min(self.y1, other.y1) - max(self.y0, other.y0) > OVERLAP_PX
        )


def text_size_px(text: str, font_px: float, angle: float = 0) -> tuple[float, float]:
    """(width, height) of a label, tags stripped, ``<br>`` a new line: CHAR_EM x font size a
    glyph, LINE_EM x font size a line; a label turned by 90 degrees swaps the two."""
    lines = [_TAG.sub("", line) for line in re.split(r"<br\s*/?>", str(text))]
    width = max((len(line) for line in lines), default=0) * CHAR_EM * font_px
    height = len(lines) * LINE_EM * font_px
    return (height, width) if abs(angle or 0) % 180 == 90 else (width, height)


def _short(text) -> str:
    text = _TAG.sub(" ", str(text)).strip()
    return text if len(text) <= 40 else text[:37] + "..."


class _Figure:
    """A figure's layout resolved against its template, its axes' data and pixel extents."""

    def __init__(self, fig: go.Figure | dict, width_px: float):
        # an animation's frames are not drawn until played: the first frame is the figure itself
        self.fig = (
            fig
            if isinstance(fig, go.Figure)
            else go.Figure(_decoded({k: v for k, v in fig.items() if k in ("data", "layout")}))
        )
        self.layout = self.fig.layout.to_plotly_json()
        template = self.fig.layout.template
        self.template = (
            template.layout.to_plotly_json()
            if template and template.layout
            else pio.templates[pio.templates.default].layout.to_plotly_json()
        )
        self.traces = [t.to_plotly_json() for t in self.fig.data]
        self.width = self.layout.get("width") or width_px
        self.height = self.layout.get("height") or DEFAULT_HEIGHT_PX
        self.axes = {name: self.layout.get(name, {}) for name in self._axis_names()}
        self._plot_area()

    # --- fonts and layout defaults --------------------------------------------------------
    def get(self, *path, default=None):
        """A layout property, else the template's: get("legend", "font", "size")."""
        for source in (self.layout, self.template):
            node = source
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            if node is not None:
                return node
        return default

    def font(self, own: dict | None, *template_path) -> float:
        return (
            (own or {}).get("size")
            or self.get(*template_path, "font", "size", default=None)
            or self.get("font", "size", default=12)
        )

    def tick_font(self, axis: str) -> float:
        return (
            self.axes[axis].get("tickfont", {}).get("size")
            or self.get(axis[0] + "axis", "tickfont", "size")
            or self.get("font", "size", default=12)
        )

    # --- axes ----------------------------------------------------------------------------
    def _axis_names(self) -> list[str]:
        names = {k for k in self.layout if re.fullmatch(r"[xy]axis\d*", k)}
        for t in self.traces:
            if self._cartesian(t):
                names |= {_axis_key(t.get("xaxis", "x")), _axis_key(t.get("yaxis", "y"))}
        return sorted(names, key=lambda n: (n[0], int(n[5:] or 1)))

    @staticmethod
    def _cartesian(trace: dict) -> bool:
        return trace.get("type", "scatter") in ("scatter", "bar", "heatmap", "histogram", "box", "scattergl")

    def traces_on(self, axis: str) -> list[dict]:
        ref = axis[0] + axis[5:]
        return [t for t in self.traces if self._cartesian(t) and t.get(axis[0] + "axis", axis[0]) == ref]

    def values(self, axis: str, kinds=("scatter", "bar", "heatmap", "histogram", "box", "scattergl")) -> list:
        """The data on an axis: numbers, or strings for categories (bars' bases added)."""
        out: list = []
        letter = axis[0]
        for t in self.traces_on(axis):
            if t.get("type", "scatter") not in kinds:
                continue
            own = t.get(letter)
            if own is None and t.get("type") == "heatmap":
                z = t.get("z") or []
                own = list(range(len(z) if letter == "y" else len(z[0]) if len(z) else 0))
            if own is None:
                continue
            own = list(own)
            horizontal = t.get("orientation") == "h"
            if t.get("type") == "bar" and (letter == "x") == horizontal:  # the bar's value axis
                base = t.get("base")
                bases = list(base) if isinstance(base, (list, tuple)) else [base or 0] * len(own)
                own = [b + v if _number(v) and _number(b) else v for v, b in zip(own, bases)] + [
                    b for b in bases if _number(b)
                ]
            out += [v for v in own if v is not None]
        if self.get("barmode") in ("stack", "relative") and self._has_bars(axis):
            out += self._stack_tops(axis)
        for shape in self.layout.get("shapes", []):  # plotly's autorange takes in lines drawn on the data
            if shape.get(f"{letter}ref", letter) == axis[0] + axis[5:]:
                out += [v for v in (shape.get(f"{letter}0"), shape.get(f"{letter}1")) if _number(v)]
        return out

    def _stack_tops(self, axis: str) -> list[float]:
        letter, other = axis[0], "y" if axis[0] == "x" else "x"
        tops: dict = {}
        for t in self.traces_on(axis):
            if t.get("type") == "bar" and t.get(letter) is not None:
                for where, v in zip(t.get(other) or range(len(t[letter])), t[letter]):
                    if _number(v):
                        tops[str(where)] = tops.get(str(where), 0.0) + float(v)
        return list(tops.values())

    def axis_type(self, axis: str) -> str:
        kind = self.axes[axis].get("type")
        if kind in ("log", "category", "multicategory", "date", "linear"):
            return kind
        values = self.values(axis)
        if any(isinstance(v, str) and not _number(v) for v in values):
            return "category"
        return "linear"

    def domain(self, axis: str) -> tuple[float, float]:
        own = self.axes[axis].get("domain")
        return (own[0], own[1]) if own else (0.0, 1.0)

    def data_range(self, axis: str) -> tuple[float, float] | None:
        """The axis' range in its own coordinates (log10 for log axes), explicit or as
        plotly's autorange would make it (bars from zero, markers padded by 5 %)."""
        ax, kind = self.axes[axis], self.axis_type(axis)
        if ax.get("range") and None not in ax["range"]:
            lo, hi = ax["range"]
            return (min(lo, hi), max(lo, hi))
        if ax.get("matches") and _axis_key(ax["matches"]) != axis:
            return self.data_range(_axis_key(ax["matches"]))
        values = self.values(axis)
        if kind in ("category", "multicategory"):
            n = len(dict.fromkeys(map(str, values)))
            return (-0.5, n - 0.5) if n else None
        numbers = [float(v) for v in values if _number(v)]
        if kind == "log":
            numbers = [math.log10(v) for v in numbers if v > 0]
        if not numbers:
            return None
        lo, hi = min(numbers), max(numbers)
        if kind != "log" and (self._has_bars(axis) or ax.get("rangemode") == "tozero"):
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        pad = (
            0.05 * (hi - lo)
            if any("markers" in t.get("mode", "") or "text" in t.get("mode", "") for t in self.traces_on(axis))
            else 0
        )
        return (lo - pad, hi + pad) if hi > lo else (lo - 1, hi + 1)

    def _has_bars(self, axis: str) -> bool:
        letter = axis[0]
        return any(
            t.get("type") == "bar" and (letter == "x") == (t.get("orientation") == "h") for t in self.traces_on(axis)
        )

    def reversed(self, axis: str) -> bool:
        return self.axes[axis].get("autorange") == "reversed"

    def to_px(self, axis: str, value: float, log_given: bool = False) -> float | None:
        """A data value's pixel position along the figure (x right, y down)."""
        rng = self.data_range(axis)
        if rng is None or rng[1] == rng[0]:
            return None
        kind = self.axis_type(axis)
        if kind == "log" and not log_given:
            if not _number(value) or float(value) <= 0:
                return None
            value = math.log10(float(value))
        elif kind in ("category", "multicategory") and isinstance(value, str) and not _number(value):
            cats = list(dict.fromkeys(map(str, self.values(axis))))
            order = self.axes[axis].get("categoryarray")
            cats = list(order) + [c for c in cats if c not in order] if order else cats
            value = cats.index(value) if value in cats else None
        if value is None or not _number(value):
            return None
        f = (float(value) - rng[0]) / (rng[1] - rng[0])
        if self.reversed(axis):
            f = 1 - f
        d0, d1 = self.domain(axis)
        if axis[0] == "x":
            return self.left + (d0 + f * (d1 - d0)) * self.plot_w
        return self.top + (1 - (d0 + f * (d1 - d0))) * self.plot_h

    def subplot_rect(self, subplot: str) -> tuple[float, float, float, float]:
        xa, ya = _subplot_axes(subplot)
        (x0, x1), (y0, y1) = (
            self.domain(xa) if xa in self.axes else (0, 1),
            self.domain(ya) if ya in self.axes else (0, 1),
        )
        return (
            self.left + x0 * self.plot_w,
            self.top + (1 - y1) * self.plot_h,
            self.left + x1 * self.plot_w,
            self.top + (1 - y0) * self.plot_h,
        )

    # --- the plot area -------------------------------------------------------------------
    def _plot_area(self) -> None:
        margin = {k: self.get("margin", k, default=80) for k in "lrtb"}
        left, right, top, bottom = margin["l"], margin["r"], margin["t"], margin["b"]
        title = self.get("title", "text")
        if title:
            top = max(top, text_size_px(title, self.font(self.layout.get("title", {}).get("font"), "title"))[1] + 20)
        for name, ax in self.axes.items():
            if ax.get("visible") is False or not self.traces_on(name):
                continue
            tick = self.tick_font(name)
            labels = ax.get("ticktext") or [_auto_label(v) for v in self.values(name)[:200] if v is not None] or [""]
            title_px = (
                LINE_EM * self.font(ax.get("title", {}).get("font"), name[0] + "axis", "title") if _title(ax) else 0
            )
            if name[0] == "y" and self.domain(_x_of(self, name))[0] <= 0.01 and ax.get("side") != "right":
                label_w = max(text_size_px(str(t), tick)[0] for t in labels) if ax.get("showticklabels", True) else 0
                left = max(left, margin["l"] + label_w + title_px + 8)
            elif name[0] == "x":  # every x axis' labels, the bottom row's or not, take a line under it
                bottom = max(bottom, margin["b"] + LINE_EM * tick + title_px + 8)
        if self._legend_right():
            font = self.font(self.layout.get("legend", {}).get("font"), "legend")
            names = [t.get("name", "") for t in self.traces if self._in_legend(t)]
            right = max(right, margin["r"] + max(text_size_px(n, font)[0] for n in names) + 50)
        if any(t.get("type") == "heatmap" and t.get("showscale", True) is not False for t in self.traces):
            right = max(right, margin["r"] + 100)
        self.left, self.top = left, top
        self.plot_w, self.plot_h = max(self.width - left - right, 1), max(self.height - top - bottom, 1)

    def _in_legend(self, trace: dict) -> bool:
        if trace.get("showlegend") is False or not trace.get("name"):
            return False
        return trace.get("showlegend") is True or trace.get("type", "scatter") not in ("heatmap",)

    def _legend_right(self) -> bool:
        if (
            self.layout.get("showlegend") is False
            or sum(self._in_legend(t) for t in self.traces) < 2
            and not any(t.get("showlegend") is True for t in self.traces)
        ):
            return False
        orientation = self.get("legend", "orientation", default="v")
        x = self.get("legend", "x", default=1.02)
        return orientation == "v" and x >= 1


def _decoded(node):
    """A figure's JSON with plotly's typed arrays ({"dtype", "bdata", "shape"}) as lists."""
    if isinstance(node, dict):
        if "bdata" in node and "dtype" in node:
            array = np.frombuffer(base64.b64decode(node["bdata"]), dtype=node["dtype"])
            shape = node.get("shape")
            if shape:
                array = array.reshape([int(n) for n in str(shape).split(",")])
            return array.tolist()
        return {k: _decoded(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_decoded(v) for v in node]
    return node


def _axis_key(ref: str) -> str:
    """ "x2" -> "xaxis2", "y" -> "yaxis"."""
    return f"{ref[0]}axis{ref[1:]}"


def _subplot_axes(subplot: str) -> tuple[str, str]:
    x, y = re.fullmatch(r"(x\d*)(y\d*)", subplot).groups()
    return _axis_key(x), _axis_key(y)


def _x_of(figure: _Figure, yaxis: str) -> str:
    anchor = figure.axes[yaxis].get("anchor")
    return _axis_key(anchor) if anchor and anchor != "free" and _axis_key(anchor) in figure.axes else "xaxis"


def _number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return math.isfinite(v)
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _auto_label(v) -> str:
    return f"{v:.3g}" if _number(v) and not isinstance(v, str) else str(v)


def _title(ax: dict) -> str:
    title = ax.get("title")
    return (title.get("text") if isinstance(title, dict) else title) or ""


# --- the checks ---------------------------------------------------------------------------


def _check_axes(f: _Figure) -> list[str]:
    problems = []
    for name, ax in f.axes.items():
        if ax.get("visible") is False or not f.traces_on(name) or f.axis_type(name) not in ("linear", "log"):
            continue
        if all(t.get("type") == "heatmap" for t in f.traces_on(name)):
            continue  # a heatmap's axes index its rows and columns
        title, ticktext = _title(ax), [str(t) for t in ax.get("ticktext") or []]
        shows = ax.get("showticklabels", True) is not False
        target = _axis_key(ax["matches"]) if ax.get("matches") else None
        if not title and shows and not (target and _title(f.axes.get(target, {}))):
            problems.append(f"{name}: no title")
        elif title and not (
            _UNIT.search(title)
            or _COUNT.search(title)
            or any(_UNIT.search(t) for t in ticktext)
            or "%" in (ax.get("tickformat") or "")
            or ax.get("ticksuffix")
        ):
            problems.append(f"{name} '{_short(title)}': no unit (and not a count)")
        rng = f.data_range(name)
        numbers = [float(v) for v in f.values(name) if _number(v)]
        if rng is None or not numbers:
            continue
        kind = f.axis_type(name)
        if ax.get("tickvals") is not None:
            vals = [math.log10(v) if kind == "log" else v for v in ax["tickvals"] if kind != "log" or v > 0]
            inside = [v for v in vals if rng[0] - 1e-9 <= v <= rng[1] + 1e-9]
            if shows and len(inside) < 2:
                problems.append(f"{name} '{_short(title)}': {len(inside)} labelled tick(s) in its range")
        elif kind == "log":
            problems.append(
                f"{name} '{_short(title)}': a log axis without its tick labels (style.log_axis: decades or binary sizes)"
            )
        for t in ticktext + [title]:
            if _DECIMAL_BYTES.search(t):
                problems.append(f"{name}: decimal byte unit in '{_short(t)}' (use KiB, MiB, GiB)")
        if kind == "linear":
            problems += _check_linear(f, name, ax, title, numbers)
    return problems


def _check_linear(f: _Figure, name: str, ax: dict, title: str, numbers: list[float]) -> list[str]:
    problems = []
    points = [float(v) for v in f.values(name, kinds=("scatter", "scattergl")) if _number(v)]
    stacked = f.get("barmode") in ("stack", "relative")
    bars = [] if stacked else [float(v) for v in f.values(name, kinds=("bar",)) if _number(v)]
    for values, what in ((points, "points"), (bars, "bars")):
        positive = [v for v in values if v > 0]
        if len(positive) >= 4 and max(positive) / min(positive) > 100:
            crowded = sum(v < CROWDED * max(positive) for v in positive)
            if crowded >= len(positive) / 2:
                problems.append(
                    f"{name} '{_short(title)}': {crowded} of {len(positive)} {what} within the first "
                    f"{CROWDED:.0%} of a linear axis over {math.log10(max(positive) / min(positive)):.1f} "
                    "decades (use style.log_axis)"
                )
    if (
        points
        and not bars
        and not f._has_bars(name)
        and ax.get("rangemode") != "tozero"
        and not ax.get("range")
        and "zoom" not in title.lower()
    ):
        lo, hi = min(points), max(points)
        size = max(abs(lo), abs(hi))
        if lo * hi > 0 and 0 < hi - lo < TINY_SPREAD * size:
            problems.append(
                f"{name} '{_short(title)}': a difference of {hi - lo:.3g} fills an axis of values near "
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
                f"{name} '{_short(title)}': auto ticks reach {top:.3g} and get an SI suffix ('35k') beside "
                "the unit in the title: use a larger or smaller unit"
            )
    return problems


def _check_text_units(f: _Figure) -> list[str]:
    """Decimal byte units anywhere a reader sees them: title, notes, labels, legend, colour bars."""
    texts = [("title", f.get("title", "text") or "")]
    texts += [
        (f"annotation {i} '{_short(a.get('text', ''))}'", a.get("text", ""))
        for i, a in enumerate(f.layout.get("annotations", []))
    ]
    for t in f.traces:
        texts.append((f"trace '{_short(t.get('name', ''))}'", t.get("name") or ""))
        for label in t.get("text") if isinstance(t.get("text"), (list, tuple)) else [t.get("text") or ""]:
            texts.append((f"trace '{_short(t.get('name', ''))}' text", str(label)))
        texts.append((f"trace '{_short(t.get('name', ''))}' colour bar", _title(t.get("colorbar", {}))))
    return [
        f"{where}: decimal byte unit in '{_short(text)}' (use KiB, MiB, GiB)"
        for where, text in texts
        if text and _DECIMAL_BYTES.search(str(text))
    ]


def internal_label(name: str) -> bool:
    """A legend entry that reads like a record rather than words: snake_case, key=value, or
    words each followed by a bare number that no reader counts by ("clock 0 slowest 0")."""
    text = _TAG.sub(" ", name)
    if re.search(r"\b[a-z]+_[a-z_]+\b", text) or re.search(r"[A-Za-z]{2,}=", text) or re.search(r"[{}\[\]]", text):
        return True
    odd = [w for w, _ in re.findall(r"\b([A-Za-z()]+) (\d+)\b", text) if w.lower() not in _NAMED_NUMBERS]
    return len(odd) >= 2


def _check_legend(f: _Figure) -> list[str]:
    return [
        f"legend entry '{_short(t['name'])}': reads like an internal label (raw field names)"
        for t in f.traces
        if f._in_legend(t) and internal_label(str(t["name"]))
    ]


def _labels(f: _Figure) -> list[_Box]:
    """Every annotation's and every text label's box in figure pixels."""
    boxes = []
    default = f.get("annotationdefaults", "font", "size") or f.get("font", "size", default=12)
    for i, a in enumerate(f.layout.get("annotations", [])):
        if a.get("visible") is False or not a.get("text"):
            continue
        w, h = text_size_px(a["text"], (a.get("font") or {}).get("size") or default, a.get("textangle") or 0)
        xref, yref = a.get("xref", "x"), a.get("yref", "y")
        x, y = _ref_px(f, xref, a.get("x", 0.5), "x"), _ref_px(f, yref, a.get("y", 0.5), "y")
        if x is None or y is None:
            continue
        x, y = x + (a.get("xshift") or 0), y - (a.get("yshift") or 0)
        if a.get("showarrow", True):
            x, y = (
                x + (a.get("ax") if a.get("ax") is not None else -10),
                y + (a.get("ay") if a.get("ay") is not None else -30),
            )
        xanchor = a.get("xanchor", "auto")
        if xanchor == "auto":
            xanchor = (
                "center"
                if a.get("showarrow", True) or not xref.startswith("paper")
                else ("left" if a.get("x", 0.5) < 1 / 3 else "right" if a.get("x", 0.5) > 2 / 3 else "center")
            )
        yanchor = a.get("yanchor", "auto")
        x0 = x - {"left": 0, "center": w / 2, "right": w}[xanchor]
        y0 = y - {"top": 0, "middle": h / 2, "bottom": h, "auto": h / 2}[yanchor]
        data = not xref.startswith("paper") and not yref.startswith("paper")
        subplot = f"{xref.split()[0]}{yref.split()[0]}" if data else None
        # plotly's autorange grows a data axis until the annotations placed on it fit
        grows = "".join(
            r[0]
            for r in (xref, yref)
            if not r.startswith("paper")
            and not r.endswith("domain")
            and not f.axes.get(_axis_key(r.split()[0]), {}).get("range")
        )
        boxes.append(_Box(f"annotation {i} '{_short(a['text'])}'", x0, y0, x0 + w, y0 + h, subplot, grows))
    for t in f.traces:
        if (
            t.get("type", "scatter") not in ("scatter", "scattergl")
            or "text" not in t.get("mode", "")
            or t.get("visible") is False
        ):
            continue
        size = (t.get("textfont") or {}).get("size") or f.get("font", "size", default=12)
        marker = (t.get("marker") or {}).get("size", 6)
        texts = t.get("text")
        texts = list(texts) if isinstance(texts, (list, tuple)) else [texts] * len(t.get("x") or [])
        positions = t.get("textposition") or "middle center"
        xa, ya = _axis_key(t.get("xaxis", "x")), _axis_key(t.get("yaxis", "y"))
        for k, (x, y, text) in enumerate(zip(t.get("x") or [], t.get("y") or [], texts)):
            if not text:
                continue
            px, py = f.to_px(xa, x), f.to_px(ya, y)
            if px is None or py is None:
                continue
            where = positions[k] if isinstance(positions, (list, tuple)) else positions
            vertical, horizontal = (where.split() + ["center"])[:2] if " " in where else ("middle", where)
            w, h = text_size_px(text, size)
            gap = marker / 2 + 2
            x0 = {"left": px - gap - w, "center": px - w / 2, "right": px + gap}[horizontal]
            y0 = {"top": py - gap - h, "middle": py - h / 2, "bottom": py + gap}[vertical]
            subplot = t.get("xaxis", "x") + t.get("yaxis", "y")
            boxes.append(
                _Box(f"trace '{_short(t.get('name', ''))}' text '{_short(text)}'", x0, y0, x0 + w, y0 + h, subplot)
            )
    return boxes


def _ref_px(f: _Figure, ref: str, value, letter: str) -> float | None:
    """A position given against "paper", an axis ("x2") or an axis' domain ("x2 domain")."""
    if ref.startswith("paper"):
        return f.left + value * f.plot_w if letter == "x" else f.top + (1 - value) * f.plot_h
    axis = _axis_key(ref.split()[0])
    if axis not in f.axes:
        return None
    if ref.endswith("domain"):
        d0, d1 = f.domain(axis)
        v = d0 + value * (d1 - d0)
        return f.left + v * f.plot_w if letter == "x" else f.top + (1 - v) * f.plot_h
    return f.to_px(axis, value, log_given=True)  # annotations on log axes take log10


def _check_labels(f: _Figure) -> list[str]:
    problems = []
    boxes = _labels(f)
    for b in boxes:
        rect = f.subplot_rect(b.subplot) if b.subplot else (0, 0, f.width, f.height)
        out_x = "x" not in b.grows and (b.x0 < rect[0] - 2 or b.x1 > rect[2] + 2)
        out_y = "y" not in b.grows and (b.y0 < rect[1] - 2 or b.y1 > rect[3] + 2)
        if out_x or out_y:
            where = f"its plot {b.subplot}" if b.subplot else "the figure"
            problems.append(
                f"{b.name}: outside {where} at {f.width:.0f} px "
                f"(box {b.x0:.0f}..{b.x1:.0f} x {b.y0:.0f}..{b.y1:.0f}, area {rect[0]:.0f}..{rect[2]:.0f} x "
                f"{rect[1]:.0f}..{rect[3]:.0f})"
            )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if a.overlap(b):
                problems.append(f"{a.name} overlaps {b.name} at {f.width:.0f} px")
    return problems


def _check_heatmap_cells(f: _Figure) -> list[str]:
    problems = []
    for t in f.traces:
        if t.get("type") != "heatmap" or not t.get("texttemplate") or not t.get("z"):
            continue
        xa, ya = _axis_key(t.get("xaxis", "x")), _axis_key(t.get("yaxis", "y"))
        rows, cols = len(t["z"]), len(t["z"][0])
        x0, y0, x1, y1 = f.subplot_rect(t.get("xaxis", "x") + t.get("yaxis", "y"))
        cell_w, cell_h = (x1 - x0) / max(cols, 1), (y1 - y0) / max(rows, 1)
        if f.axes.get(ya, {}).get("scaleanchor") or f.axes.get(xa, {}).get("scaleanchor"):
            cell_w = cell_h = min(cell_w, cell_h)  # square cells: the plot shrinks to the smaller side
        texts = [str(v) for row in (t.get("text") or t["z"]) for v in row if v not in (None, "")]
        longest = max((len(_TAG.sub("", s)) for s in texts), default=0)
        if not longest:
            continue
        fixed = (t.get("textfont") or {}).get("size")
        fits = min(cell_w / (longest * CHAR_EM), cell_h / LINE_EM)
        if (fixed and fixed > fits) or (not fixed and fits < MIN_CELL_FONT_PX):
            problems.append(
                f"heatmap '{_short(t.get('name', ''))}': cells of {cell_w:.0f} x {cell_h:.0f} px fit labels "
                f"of {longest} characters only at {fits:.0f} px (at least {MIN_CELL_FONT_PX} px to read)"
            )
    return problems


def _check_shared(f: _Figure) -> list[str]:
    """Axes with the same title (one quantity) in several subplots: linked, or one range."""
    problems = []
    for letter in "xy":
        by_title: dict = {}
        for name, ax in f.axes.items():
            if name[0] == letter and f.traces_on(name) and _title(ax) and f.axis_type(name) in ("linear", "log"):
                by_title.setdefault(_title(ax), []).append(name)
        for title, names in by_title.items():
            roots = {_root(f, n) for n in names}
            ranges = {tuple(round(v, 9) for v in f.data_range(n) or ()) for n in names}
            if len(roots) > 1 and len(ranges) > 1:
                problems.append(
                    f"{', '.join(names)} '{_short(title)}': one quantity on {len(names)} subplots with "
                    "different scales (matches=...)"
                )
    return problems


def _root(f: _Figure, name: str) -> str:
    seen = set()
    while f.axes.get(name, {}).get("matches") and name not in seen:
        seen.add(name)
        name = _axis_key(f.axes[name]["matches"])
    return name


def _check_lines(f: _Figure) -> list[str]:
    """Lines of one plot that coincide on screen must differ in dash or marker symbol."""
    problems = []
    lines = [
        t
        for t in f.traces
        if t.get("type", "scatter") == "scatter"
        and "lines" in t.get("mode", "lines")
        and t.get("visible") is not False
        and t.get("x") is not None
        and len(t.get("x")) > 1
        and f._in_legend(t)
    ]
    for i, a in enumerate(lines):
        for b in lines[i + 1 :]:
            if (a.get("xaxis", "x"), a.get("yaxis", "y")) != (b.get("xaxis", "x"), b.get("yaxis", "y")):
                continue
            if (
                (a.get("line") or {}).get("dash") != (b.get("line") or {}).get("dash")
                or ("markers" in a.get("mode", "")) != ("markers" in b.get("mode", ""))
                or (a.get("marker") or {}).get("symbol") != (b.get("marker") or {}).get("symbol")
            ):
                continue
            widths = sorted(((a.get("line") or {}).get("width") or 2, (b.get("line") or {}).get("width") or 2))
            if widths[1] >= 3 * widths[0]:
                continue  # a wide band under a line: both show
            if _coincide(f, a, b):
                problems.append(
                    f"traces '{_short(a.get('name', ''))}' and '{_short(b.get('name', ''))}' coincide "
                    "on screen: give them different dashes or markers"
                )
    return problems


def _coincide(f: _Figure, a: dict, b: dict) -> bool:
    xa, ya = _axis_key(a.get("xaxis", "x")), _axis_key(a.get("yaxis", "y"))
    ys = {x: y for x, y in zip(b["x"], b["y"]) if x is not None and y is not None}
    common = [(x, y, ys[x]) for x, y in zip(a["x"], a["y"]) if x in ys and y is not None]
    if len(common) < 2:
        return False
    for x, y1, y2 in common:
        p1, p2 = f.to_px(ya, y1), f.to_px(ya, y2)
        if p1 is None or p2 is None or abs(p1 - p2) > 3:
            return False
    return f.to_px(xa, common[0][0]) is not None


def _check_notes_on_lines(f: _Figure) -> list[str]:
    """A note with a background hides the lines under it: it must not sit on another trace's line."""
    problems = []
    notes = [(i, a) for i, a in enumerate(f.layout.get("annotations", [])) if a.get("bgcolor")]
    if not notes:
        return problems
    boxes = {b.name: b for b in _labels(f)}
    for i, a in notes:
        box = boxes.get(f"annotation {i} '{_short(a['text'])}'")
        if box is None:
            continue
        for t in f.traces:
            if t.get("type", "scatter") != "scatter" or "lines" not in t.get("mode", "lines") or t.get("x") is None:
                continue
            xa, ya = _axis_key(t.get("xaxis", "x")), _axis_key(t.get("yaxis", "y"))
            pts = [(f.to_px(xa, x), f.to_px(ya, y)) for x, y in zip(t["x"], t.get("y") or [])]
            pts = [(x, y) for x, y in pts if x is not None and y is not None]
            if any(_segment_hits(p, q, box) for p, q in zip(pts, pts[1:])):
                problems.append(f"{box.name}: covers the line of '{_short(t.get('name', ''))}'")
    return problems


def _segment_hits(p, q, box: _Box, steps: int = 20) -> bool:
    inset = OVERLAP_PX
    return any(
        box.x0 + inset < p[0] + (q[0] - p[0]) * k / steps < box.x1 - inset
        and box.y0 + inset < p[1] + (q[1] - p[1]) * k / steps < box.y1 - inset
        for k in range(steps + 1)
    )


CHECKS = (
    _check_axes,
    _check_text_units,
    _check_legend,
    _check_labels,
    _check_heatmap_cells,
    _check_shared,
    _check_lines,
    _check_notes_on_lines,
)


def lint(fig: go.Figure | dict, width_px: float = 1280) -> list[str]:
    """The problems of a figure drawn ``width_px`` wide (at its own height), one sentence
    each naming the element; an empty list for a figure that passes."""
    f = _Figure(fig, width_px)
    return [problem for check in CHECKS for problem in check(f)]
