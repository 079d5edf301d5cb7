"""Checks of where things land on screen, 1280 px wide: annotations and text labels inside
their plot and apart, heatmap cell labels that fit their cells, notes that cover no line,
lines that coincide told apart by dash or marker."""

from __future__ import annotations

from .figure import CHAR_EM, LINE_EM, OVERLAP_PX, TAG, Box, Figure, axis_key, short, text_size_px

MIN_CELL_FONT_PX = 10  # plotly shrinks heatmap cell text to fit; smaller than this is unreadable projected


def label_boxes(f: Figure) -> list[Box]:
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
            and not f.axes.get(axis_key(r.split()[0]), {}).get("range")
        )
        boxes.append(Box(f"annotation {i} '{short(a['text'])}'", x0, y0, x0 + w, y0 + h, subplot, grows))
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
        xa, ya = axis_key(t.get("xaxis", "x")), axis_key(t.get("yaxis", "y"))
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
                Box(f"trace '{short(t.get('name', ''))}' text '{short(text)}'", x0, y0, x0 + w, y0 + h, subplot)
            )
    return boxes


def _ref_px(f: Figure, ref: str, value, letter: str) -> float | None:
    """A position given against "paper", an axis ("x2") or an axis' domain ("x2 domain")."""
    if ref.startswith("paper"):
        return f.left + value * f.plot_w if letter == "x" else f.top + (1 - value) * f.plot_h
    axis = axis_key(ref.split()[0])
    if axis not in f.axes:
        return None
    if ref.endswith("domain"):
        d0, d1 = f.domain(axis)
        v = d0 + value * (d1 - d0)
        return f.left + v * f.plot_w if letter == "x" else f.top + (1 - v) * f.plot_h
    return f.to_px(axis, value, log_given=True)  # annotations on log axes take log10


def check_labels(f: Figure) -> list[str]:
    problems = []
    boxes = label_boxes(f)
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


def check_heatmap_cells(f: Figure) -> list[str]:
    problems = []
    for t in f.traces:
        if t.get("type") != "heatmap" or not t.get("texttemplate") or not t.get("z"):
            continue
        xa, ya = axis_key(t.get("xaxis", "x")), axis_key(t.get("yaxis", "y"))
        rows, cols = len(t["z"]), len(t["z"][0])
        x0, y0, x1, y1 = f.subplot_rect(t.get("xaxis", "x") + t.get("yaxis", "y"))
        cell_w, cell_h = (x1 - x0) / max(cols, 1), (y1 - y0) / max(rows, 1)
        if f.axes.get(ya, {}).get("scaleanchor") or f.axes.get(xa, {}).get("scaleanchor"):
            cell_w = cell_h = min(cell_w, cell_h)  # square cells: the plot shrinks to the smaller side
        texts = [str(v) for row in (t.get("text") or t["z"]) for v in row if v not in (None, "")]
        longest = max((len(TAG.sub("", s)) for s in texts), default=0)
        if not longest:
            continue
        fixed = (t.get("textfont") or {}).get("size")
        fits = min(cell_w / (longest * CHAR_EM), cell_h / LINE_EM)
        if (fixed and fixed > fits) or (not fixed and fits < MIN_CELL_FONT_PX):
            problems.append(
                f"heatmap '{short(t.get('name', ''))}': cells of {cell_w:.0f} x {cell_h:.0f} px fit labels "
                f"of {longest} characters only at {fits:.0f} px (at least {MIN_CELL_FONT_PX} px to read)"
            )
    return problems


def check_lines(f: Figure) -> list[str]:
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
        and f.in_legend(t)
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
                    f"traces '{short(a.get('name', ''))}' and '{short(b.get('name', ''))}' coincide "
                    "on screen: give them different dashes or markers"
                )
    return problems


def _coincide(f: Figure, a: dict, b: dict) -> bool:
    xa, ya = axis_key(a.get("xaxis", "x")), axis_key(a.get("yaxis", "y"))
    ys = {x: y for x, y in zip(b["x"], b["y"]) if x is not None and y is not None}
    common = [(x, y, ys[x]) for x, y in zip(a["x"], a["y"]) if x in ys and y is not None]
    if len(common) < 2:
        return False
    for x, y1, y2 in common:
        p1, p2 = f.to_px(ya, y1), f.to_px(ya, y2)
        if p1 is None or p2 is None or abs(p1 - p2) > 3:
            return False
    return f.to_px(xa, common[0][0]) is not None


def check_notes_on_lines(f: Figure) -> list[str]:
    """A note with a background hides the lines under it: it must not sit on another trace's line."""
    problems = []
    notes = [(i, a) for i, a in enumerate(f.layout.get("annotations", [])) if a.get("bgcolor")]
    if not notes:
        return problems
    boxes = {b.name: b for b in label_boxes(f)}
    for i, a in notes:
        box = boxes.get(f"annotation {i} '{short(a['text'])}'")
        if box is None:
            continue
        for t in f.traces:
            if t.get("type", "scatter") != "scatter" or "lines" not in t.get("mode", "lines") or t.get("x") is None:
                continue
            xa, ya = axis_key(t.get("xaxis", "x")), axis_key(t.get("yaxis", "y"))
            pts = [(f.to_px(xa, x), f.to_px(ya, y)) for x, y in zip(t["x"], t.get("y") or [])]
            pts = [(x, y) for x, y in pts if x is not None and y is not None]
            if any(_segment_hits(p, q, box) for p, q in zip(pts, pts[1:])):
                problems.append(f"{box.name}: covers the line of '{short(t.get('name', ''))}'")
    return problems


def _segment_hits(p, q, box: Box, steps: int = 20) -> bool:
    inset = OVERLAP_PX
    return any(
        box.x0 + inset < p[0] + (q[0] - p[0]) * k / steps < box.x1 - inset
        and box.y0 + inset < p[1] + (q[1] - p[1]) * k / steps < box.y1 - inset
        for k in range(steps + 1)
    )
