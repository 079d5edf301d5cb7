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

One module a family of checks, each a function of a ``figure.Figure`` (the figure's layout
resolved, with its geometry estimated) returning its sentences: ``axes`` (titles, units,
ticks, log axes, binary bytes, legend labels), ``geometry`` (labels outside their plot or
on each other, heatmap cells, notes over lines, lines on each other), ``subplots`` (one
quantity on one scale). ``CHECKS`` lists them all, in the order their sentences come.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .axes import check_axes, check_legend, check_text_units
from .figure import Figure
from .geometry import check_heatmap_cells, check_labels, check_lines, check_notes_on_lines
from .subplots import check_shared

CHECKS = (
    check_axes,
    check_text_units,
    check_legend,
    check_labels,
    check_heatmap_cells,
    check_shared,
    check_lines,
    check_notes_on_lines,
)


def lint(fig: go.Figure | dict, width_px: float = 1280) -> list[str]:
    """The problems of a figure drawn ``width_px`` wide (at its own height), one sentence
    each naming the element; an empty list for a figure that passes."""
    f = Figure(fig, width_px)
    return [problem for check in CHECKS for problem in check(f)]
