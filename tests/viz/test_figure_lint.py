"""dlsys.viz.lint: each rule finds the fault it names and passes the figure drawn right; every
figure function of dlsys.viz is drawn somewhere the lint sees it: the app's pages at their
default settings (tests/app/test_app.py), the lessons as students run them (tests/course/test_lessons.py,
from the HTML each writes) and the small records of tests/viz/test_viz.py."""

import ast
import json
import re
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dlsys.viz import style
from dlsys.viz.lint import lint
from dlsys.viz.lint.axes import internal_label
from dlsys.viz.lint.figure import text_size_px

ROOT = Path(__file__).resolve().parents[2]

# Problems a figure keeps on purpose, each with its reason (a regular expression over the
# lint's sentence). Keep this short: a new entry needs a reason a teacher would accept.
EXCEPTIONS = {
    r"trace 'bytescheduler \(partitions of .*decimal byte unit": "ByteScheduler's credit option is in decimal MB "
    "(dlsys/schedule/bytescheduler.py), as the paper states it; the legend names the model's unit",
    r"'GB per device'": "ZeRO Figure 1 is the paper's figure, in the paper's decimal GB (10^9 bytes), so its bars "
    "can be read against the paper's",
    r"legend entry 'pull reply clock \d+ slowest \d+'|trace '' text .* overlaps trace '' text|"
    r"'time since the send \(µs\)': one quantity": "the message animations (dlsys/viz/comm.py message_animation, dlsys/viz/network_stack.py message_animation) "
    "belong to the animation work (branch anim): listed there, fixed there",
}


def unexcused(fig, where: str = "") -> list[str]:
    """The figure's lint problems that no EXCEPTIONS entry excuses."""
    return [p for p in lint(fig) if not any(re.search(pattern, p) for pattern in EXCEPTIONS)]


def assert_lint_clean(fig, where: str = "") -> None:
    problems = unexcused(fig, where)
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


def figure_in_html(path: Path) -> dict:
    """The figure a lesson wrote with ``fig.write_html`` (dlsys.viz.lessons.show): the data
    and layout of its ``Plotly.newPlot("id", data, layout, config)`` call."""
    text = path.read_text()
    at = text.index("Plotly.newPlot(") + len("Plotly.newPlot(")
    decoder = json.JSONDecoder()
    parts = []
    for _ in range(3):  # the id, the data, the layout
        at = re.compile(r"[\s,]*").match(text, at).end()
        value, at = decoder.raw_decode(text, at)
        parts.append(value)
    return {"data": parts[1], "layout": parts[2]}


def _line(**layout) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[1, 2, 3, 4], y=[1.0, 2.0, 3.0, 4.0], name="a"))
    fig.update_layout(template=style.TEMPLATE, **layout)
    return fig


def test_a_figure_drawn_right_passes():
    fig = _line(xaxis_title="step", yaxis_title="time (ms)")
    assert lint(fig) == []


def test_axes_need_a_title_a_unit_and_two_ticks():
    assert lint(_line()) == ["xaxis: no title", "yaxis: no title"]
    assert any("'duration': no unit" in p for p in lint(_line(xaxis_title="step", yaxis_title="duration")))
    one_tick = _line(xaxis_title="step", yaxis=dict(title="time (s)", tickvals=[2, 10], ticktext=["2", "10"]))
    assert any("1 labelled tick(s)" in p for p in lint(one_tick))
    # a unit in the tick labels counts, as log_axis writes them
    sizes = go.Figure(go.Scatter(x=[2**k for k in range(20)], y=[k * 1e-3 for k in range(1, 21)]))
    sizes.update_xaxes(**style.log_axis(sizes.data[0].x, "bytes", title="message size"))
    sizes.update_yaxes(title="time (s)")
    assert lint(sizes) == []


def test_values_over_decades_need_a_log_axis_with_labelled_ticks():
    fig = go.Figure(go.Scatter(x=[2**k for k in range(20)], y=list(range(20))))
    fig.update_layout(xaxis_title="size (B)", yaxis_title="steps")
    assert any("within the first 1% of a linear axis" in p for p in lint(fig))
    fig.update_xaxes(type="log")
    assert any("a log axis without its tick labels" in p for p in lint(fig))


def test_bytes_are_binary_and_ticks_never_read_35k():
    fig = _line(title="An all-reduce of 60.97 MB", xaxis_title="step", yaxis_title="time (s)")
    assert lint(fig) == ["title: decimal byte unit in 'An all-reduce of 60.97 MB' (use KiB, MiB, GiB)"]
    rates = _line(title="A link of 12.5 GB/s", xaxis_title="step", yaxis_title="time (s)")
    assert lint(rates) == []  # rates are decimal, as links are sold
    big = go.Figure(go.Bar(x=["a", "b"], y=[35_000, 70_000]))
    big.update_layout(yaxis_title="sent (MiB)")
    assert any("SI suffix ('35k')" in p for p in lint(big))


def test_a_tiny_difference_does_not_fill_a_linear_axis():
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[1.000, 1.002, 1.006]))
    fig.update_layout(xaxis_title="step", yaxis_title="iteration time (ms)")
    assert any("a difference of 0.006" in p for p in lint(fig))
    fig.update_yaxes(rangemode="tozero")
    assert lint(fig) == []
    fig.update_yaxes(rangemode=None, title="iteration time (ms, zoomed)")
    assert lint(fig) == []


def test_legend_entries_read_as_words():
    assert internal_label("pull reply clock 0 slowest 0") and internal_label("recursive_doubling")
    assert internal_label("bucket_mb=25")
    assert not any(
        internal_label(n)
        for n in (
            "worker 0 (rank 1)",
            "SSP s=2",
            "reduce-scatter: steps 1 → 7",
            "recursive doubling",
            "batch 32 per worker",
        )
    )


def test_labels_inside_their_plot_and_apart():
    fig = go.Figure(
        go.Scatter(
            x=[1, 1.01, 50],
            y=[1, 1, 50],
            mode="markers+text",
            text=["topk", "dropping", "top"],
            textposition="top center",
        )
    )
    fig.update_layout(template=style.TEMPLATE, xaxis_title="step", yaxis_title="loss")
    problems = lint(fig)
    assert any("'topk' overlaps trace" in p for p in problems)
    assert any("text 'top': outside its plot" in p for p in problems)  # the highest point's label leaves the plot
    fig.update_traces(text=["topk", "", "top"], textposition=["top center", "top center", "bottom center"])
    assert lint(fig) == []
    # the width estimate: 0.55 em a glyph, 1.25 em a line
    assert text_size_px("abcd<br>ab", 20) == (44.0, 50.0) and text_size_px("abcd", 20, -90) == (25.0, 44.0)


def test_heatmap_labels_fit_their_cells():
    z = [[2**27] * 8 for _ in range(8)]
    fig = go.Figure(go.Heatmap(z=z, text=[["112 MiB"] * 8] * 8, texttemplate="%{text}"))
    fig.update_layout(height=376, xaxis_title="receiver rank", yaxis=dict(title="sender rank", scaleanchor="x"))
    assert any("fit labels of 7 characters only at" in p for p in lint(fig))
    fig.update_layout(height=700)
    assert lint(fig) == []


def test_subplots_of_one_quantity_share_their_axis():
    fig = make_subplots(rows=1, cols=2)
    for col, scale in ((1, 1), (2, 24)):
        fig.add_trace(go.Scatter(x=[0, scale], y=[0, 1], name=f"link {col}"), row=1, col=col)
    fig.update_xaxes(title="time (ms)")
    fig.update_yaxes(title="bytes (MiB)")
    assert any("'time (ms)': one quantity on 2 subplots" in p for p in lint(fig))
    fig.update_xaxes(matches="x")
    assert lint(fig) == []


def test_coinciding_lines_differ_in_dash():
    fig = go.Figure([go.Scatter(x=[1, 2, 3], y=[1, 2, 3], name=n) for n in ("mpich", "openmpi")])
    fig.update_layout(xaxis_title="size (B)", yaxis_title="time (s)")
    assert any("'mpich' and 'openmpi' coincide" in p for p in lint(fig))
    fig.update_traces(line_dash="dot", selector=dict(name="openmpi"))
    assert lint(fig) == []


def test_a_note_does_not_cover_a_curve():
    fig = go.Figure(go.Scatter(x=[0, 10], y=[0, 10], name="ring"))
    fig.add_annotation(x=5, y=5, text="→ tree at 5", showarrow=False, bgcolor="white")
    fig.update_layout(xaxis_title="size (B)", yaxis_title="time (s)")
    assert any("covers the line of 'ring'" in p for p in lint(fig))


def _figure_functions() -> set[str]:
    """Every public function of dlsys.viz that returns a plotly figure."""
    names = set()
    for path in (ROOT / "dlsys" / "viz").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith("_")
                and node.returns is not None
                and ast.unparse(node.returns) == "go.Figure"
            ):
                names.add(f"{path.stem}.{node.name}")
    return names


def test_every_figure_function_is_drawn_where_the_lint_sees_it():
    """The app's pages (linted at their defaults in test_app.py), the lessons (linted in
    test_lessons.py) and test_viz's small records (linted in test_viz.py) call every figure
    function of dlsys.viz."""
    callers = "\n".join(
        p.read_text()
        for p in [
            *(ROOT / "app").rglob("*.py"),
            *(ROOT / "lessons").glob("*.py"),
            ROOT / "tests" / "viz" / "test_viz.py",
        ]
    )
    missing = {name for name in _figure_functions() if not re.search(rf"\b{name.split('.')[1]}\(", callers)}
    assert not missing, missing
