"""A figure as the lint sees it: its layout resolved against its template, its axes' data
and where everything lands in pixels.

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
OVERLAP_PX = 3  # boxes overlapping by less than this in either direction are touching, not overlapping
TAG = re.compile(r"<[^>]+>")


@dataclass
class Box:
    """A text label's extent in figure pixels (y down), and what to call it."""

    name: str
    x0: float
    y0: float
    x1: float
    y1: float
    subplot: str | None  # "xy", "x2y2" for data-placed labels; None for paper-placed ones
    grows: str = ""  # the letters of the autoranged axes that grow to hold it

    def overlap(self, other: Box) -> bool:
        return (
            min(self.x1, other.x1) - max(self.x0, other.x0) > OVERLAP_PX
            and min(self.y1, other.y1) - max(self.y0, other.y0) > OVERLAP_PX
        )


def text_size_px(text: str, font_px: float, angle: float = 0) -> tuple[float, float]:
    """(width, height) of a label, tags stripped, ``<br>`` a new line: CHAR_EM x font size a
    glyph, LINE_EM x font size a line; a label turned by 90 degrees swaps the two."""
    lines = [TAG.sub("", line) for line in re.split(r"<br\s*/?>", str(text))]
    width = max((len(line) for line in lines), default=0) * CHAR_EM * font_px
    height = len(lines) * LINE_EM * font_px
    return (height, width) if abs(angle or 0) % 180 == 90 else (width, height)


def short(text) -> str:
    text = TAG.sub(" ", str(text)).strip()
    return text if len(text) <= 40 else text[:37] + "..."


class Figure:
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
                names |= {axis_key(t.get("xaxis", "x")), axis_key(t.get("yaxis", "y"))}
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
                own = [b + v if number(v) and number(b) else v for v, b in zip(own, bases)] + [
                    b for b in bases if number(b)
                ]
            out += [v for v in own if v is not None]
        if self.get("barmode") in ("stack", "relative") and self.has_bars(axis):
            out += self._stack_tops(axis)
        for shape in self.layout.get("shapes", []):  # plotly's autorange takes in lines drawn on the data
            if shape.get(f"{letter}ref", letter) == axis[0] + axis[5:]:
                out += [v for v in (shape.get(f"{letter}0"), shape.get(f"{letter}1")) if number(v)]
        return out

    def _stack_tops(self, axis: str) -> list[float]:
        letter, other = axis[0], "y" if axis[0] == "x" else "x"
        tops: dict = {}
        for t in self.traces_on(axis):
            if t.get("type") == "bar" and t.get(letter) is not None:
                for where, v in zip(t.get(other) or range(len(t[letter])), t[letter]):
                    if number(v):
                        tops[str(where)] = tops.get(str(where), 0.0) + float(v)
        return list(tops.values())

    def axis_type(self, axis: str) -> str:
        kind = self.axes[axis].get("type")
        if kind in ("log", "category", "multicategory", "date", "linear"):
            return kind
        values = self.values(axis)
        if any(isinstance(v, str) and not number(v) for v in values):
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
        if ax.get("matches") and axis_key(ax["matches"]) != axis:
            return self.data_range(axis_key(ax["matches"]))
        values = self.values(axis)
        if kind in ("category", "multicategory"):
            n = len(dict.fromkeys(map(str, values)))
            return (-0.5, n - 0.5) if n else None
        numbers = [float(v) for v in values if number(v)]
        if kind == "log":
            numbers = [math.log10(v) for v in numbers if v > 0]
        if not numbers:
            return None
        lo, hi = min(numbers), max(numbers)
        if kind != "log" and (self.has_bars(axis) or ax.get("rangemode") == "tozero"):
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        pad = (
            0.05 * (hi - lo)
            if any("markers" in t.get("mode", "") or "text" in t.get("mode", "") for t in self.traces_on(axis))
            else 0
        )
        return (lo - pad, hi + pad) if hi > lo else (lo - 1, hi + 1)

    def has_bars(self, axis: str) -> bool:
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
            if not number(value) or float(value) <= 0:
                return None
            value = math.log10(float(value))
        elif kind in ("category", "multicategory") and isinstance(value, str) and not number(value):
            cats = list(dict.fromkeys(map(str, self.values(axis))))
            order = self.axes[axis].get("categoryarray")
            cats = list(order) + [c for c in cats if c not in order] if order else cats
            value = cats.index(value) if value in cats else None
        if value is None or not number(value):
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
                LINE_EM * self.font(ax.get("title", {}).get("font"), name[0] + "axis", "title") if axis_title(ax) else 0
            )
            if name[0] == "y" and self.domain(_x_of(self, name))[0] <= 0.01 and ax.get("side") != "right":
                label_w = max(text_size_px(str(t), tick)[0] for t in labels) if ax.get("showticklabels", True) else 0
                left = max(left, margin["l"] + label_w + title_px + 8)
            elif name[0] == "x":  # every x axis' labels, the bottom row's or not, take a line under it
                bottom = max(bottom, margin["b"] + LINE_EM * tick + title_px + 8)
        if self._legend_right():
            font = self.font(self.layout.get("legend", {}).get("font"), "legend")
            names = [t.get("name", "") for t in self.traces if self.in_legend(t)]
            right = max(right, margin["r"] + max(text_size_px(n, font)[0] for n in names) + 50)
        if any(t.get("type") == "heatmap" and t.get("showscale", True) is not False for t in self.traces):
            right = max(right, margin["r"] + 100)
        self.left, self.top = left, top
        self.plot_w, self.plot_h = max(self.width - left - right, 1), max(self.height - top - bottom, 1)

    def in_legend(self, trace: dict) -> bool:
        if trace.get("showlegend") is False or not trace.get("name"):
            return False
        return trace.get("showlegend") is True or trace.get("type", "scatter") not in ("heatmap",)

    def _legend_right(self) -> bool:
        if (
            self.layout.get("showlegend") is False
            or sum(self.in_legend(t) for t in self.traces) < 2
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


def axis_key(ref: str) -> str:
    """ "x2" -> "xaxis2", "y" -> "yaxis"."""
    return f"{ref[0]}axis{ref[1:]}"


def _subplot_axes(subplot: str) -> tuple[str, str]:
    x, y = re.fullmatch(r"(x\d*)(y\d*)", subplot).groups()
    return axis_key(x), axis_key(y)


def _x_of(figure: Figure, yaxis: str) -> str:
    anchor = figure.axes[yaxis].get("anchor")
    return axis_key(anchor) if anchor and anchor != "free" and axis_key(anchor) in figure.axes else "xaxis"


def number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return math.isfinite(v)
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _auto_label(v) -> str:
    return f"{v:.3g}" if number(v) and not isinstance(v, str) else str(v)


def axis_title(ax: dict) -> str:
    title = ax.get("title")
    return (title.get("text") if isinstance(title, dict) else title) or ""
