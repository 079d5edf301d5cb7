"""dlsys.viz: the figures are built from traces and records, animate only what moves, and
label their units."""

import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from test_figure_lint import assert_lint_clean

from dlsys import experiments as E
from dlsys.collectives import REGISTRY, closed_form
from dlsys.comm import Message, Span, Trace
from dlsys.experiments import schedule as ex_schedule
from dlsys.machine.datapath import ring_allreduce_traffic_bytes
from dlsys.units import (
    byte_ticks,
    count_ticks,
    format_bytes,
    format_rate,
    format_seconds,
    linear_byte_ticks,
    time_ticks,
    time_unit,
)
from dlsys.viz import animation, catalogue, comm, costs, datapath, layouts, lessons, messages, schedule, style, training
from dlsys.viz.ring_steps import _contributors, _wrap, ring_steps


@pytest.fixture(scope="module")
def ring_trace():
    return E.simulate_collective("allreduce", "ring", 4, "1MiB", "tcp-10gbe")["result"].trace


def test_units():
    assert time_unit(0.012) == (1e-3, "ms") and time_unit(0) == (1.0, "s")
    assert format_seconds(0.0123) == "12.3 ms" and format_seconds(4e-6) == "4 µs" and format_seconds(12.0) == "12 s"
    assert format_bytes(64 * 2**20) == "64 MiB" and format_bytes(4) == "4 B" and format_bytes(0) == "0 B"
    assert format_rate(1.25e9) == "1.25 GB/s" and format_rate(5) == "5 B/s"


def test_axis_ticks_are_binary_sizes_and_decades():
    assert byte_ticks(1, 2**32)[1] == ["1 B", "32 B", "1 KiB", "32 KiB", "1 MiB", "32 MiB", "1 GiB"]
    assert byte_ticks(2**10, 2**20)[1] == ["1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB"]
    assert time_ticks(2e-6, 0.3)[1] == ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]
    assert count_ticks(2, 1024)[1] == [str(2**k) for k in range(1, 11)]
    assert linear_byte_ticks(300 * 2**20)[1] == ["0", "100 MiB", "200 MiB", "300 MiB"]


def _training_records():
    def record(first_rank):
        losses = [
            dict(rank=r, time_s=t * 1e-3, loss=2.0 / (t + 1))
            for t in range(1, 6)
            for r in range(first_rank, first_rank + 2)
        ]
        return dict(
            losses=losses,
            workers=2,
            virtual_time_s=5e-3,
            bytes_moved=3 * 2**20,
            test_accuracy=0.9,
            staleness_histogram={0: 4, 1: 2},
            accuracy_curve=[dict(time_s=5e-3, test_accuracy=0.9)],
        )

    return {"BSP": record(1), "ASP": record(1)}


@pytest.fixture
def dlsys_default_template():
    """Importing streamlit (test_app.py, in the same session) makes Streamlit's template
    plotly's default; importing dlsys.viz after it makes "dlsys" the default again, as in
    the app, where streamlit is imported first (and charts.chart applies "dlsys" anyway)."""
    saved, pio.templates.default = pio.templates.default, style.TEMPLATE
    yield
    pio.templates.default = saved


def _my_figures():
    """Every figure of the modules that use the shared style, built from small records."""
    rows = E.allreduce_costs(["tcp-10gbe"], [8], [2**k for k in range(33)])
    by_ranks = E.allreduce_costs(["tcp-10gbe"], [2**k for k in range(1, 11)], [2**26])
    ring = [r for r in rows if r["algorithm"] == "ring"]
    runs = _training_records()
    return {
        "cost_curves size": costs.cost_curves(rows, "nbytes", (), E.crossovers(rows), "title"),
        "cost_curves ranks": costs.cost_curves(by_ranks, "ranks", (), E.crossovers(by_ranks, "ranks"), "title"),
        "link_comparison": costs.link_comparison(ring, "title"),
        "alpha_beta_split": costs.alpha_beta_split(ring, "title"),
        "ps_vs_ring_scaling": costs.ps_vs_ring_scaling(E.ps_vs_ring_scaling((2, 4), "1MiB", "tcp-10gbe"), "title"),
        "worker_progress": training.worker_progress(runs),
        "loss_curves": training.loss_curves(runs),
        "staleness": training.staleness_histogram(runs),
        "accuracy": training.accuracy_curves(runs),
        "cost_bars": training.cost_bars(runs),
        "traffic_bars": datapath.traffic_bars(4, 2**26),
        "emulation_scaling": datapath.emulation_scaling(
            [dict(ranks=8, wall_time_s=0.01, messages=112), dict(ranks=64, wall_time_s=0.5, messages=8064)]
        ),
        "lines": lessons.lines(
            [dict(p=p, t=p * 1e-3, s="a") for p in (2, 4, 8)],
            "p",
            "t",
            "s",
            "title",
            "p",
            "t",
            log_x=True,
            log_y=True,
            x_unit="count",
            y_unit="seconds",
        ),
        "strong_scaling": lessons.strong_scaling(
            [dict(link="l", ranks=p, compute_s=1 / p, communication_s=0.01, speedup=p / 1.5) for p in (1, 2, 4)]
        ),
        "concept_map": catalogue.concept_map([("A", "a long concept name here", "app"), ("B", "z", "planned")]),
        "gantt": schedule.gantt(_schedule_records()),
        "iteration_vs_bandwidth": schedule.iteration_vs_bandwidth(
            ex_schedule.bandwidth_sweep("alexnet", ["1Gbps", "100Gbps"], ["fifo", "wfbp"], 2)
        ),
        "option_tradeoff": schedule.option_tradeoff(
            ex_schedule.option_sweep("slice_params", (1_000_000, 4_000_000), "alexnet", 2), 1_000_000
        ),
    }


def _schedule_records():
    return ex_schedule.compare_policies(
        ["fifo", "p3"], "alexnet", 2, "10Gbps", options={"p3": {"slice_params": 1_000_000}}
    )


def test_every_figure_has_the_projector_style(dlsys_default_template):
    """Fonts of the dlsys template, a legend that stays beside the plots (never over a
    title), log axes with labelled decades or binary sizes only (no minor labels, no SI
    "kB"), and no annotation above the plot area where the title is."""
    for name, fig in _my_figures().items():
        template = fig.layout.template.layout
        assert template.font.size >= 16 and template.title.automargin, name
        legend = fig.layout.legend
        assert legend.y is None or legend.y <= 1 or legend.yanchor == "top", name
        for axis in [v for k, v in fig.layout.to_plotly_json().items() if k.startswith(("xaxis", "yaxis"))]:
            if axis.get("type") == "log":
                assert axis.get("tickmode") == "array" and axis.get("ticktext"), name
                assert not any(t.endswith(("kB", "MB", "GB")) for t in axis["ticktext"]), name
        for note in fig.layout.annotations:  # subplot titles sit at y = 1, on the top edge of their plot
            assert note.yref != "paper" or note.y <= 1, (name, note.text)


def test_every_figure_passes_the_figure_lint(dlsys_default_template):
    """The small records' figures (the lessons' among them) pass dlsys.viz.lint at 1280 px;
    the app's pages hold theirs to it at their defaults (test_app.py)."""
    for name, fig in _my_figures().items():
        assert_lint_clean(fig, name)


def test_crossovers_are_named_in_the_legend_not_over_the_curves():
    rows = E.allreduce_costs(["tcp-10gbe"], [2**k for k in range(1, 11)], [2**26])
    crossings = E.crossovers(rows, "ranks")
    fig = costs.cost_curves(rows, "ranks", (), crossings, "Against ranks")
    stars = [t.name for t in fig.data if t.legendgroup == "crossovers"]
    assert stars and stars == [f"★ → {c['to'].replace('_', ' ')} at p = {c['ranks']}" for c in crossings]
    assert not fig.layout.annotations


def test_importing_a_figure_module_makes_its_template_the_default():
    import subprocess
    import sys

    code = "import plotly.io as pio, dlsys.viz.comm; print(pio.templates.default)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == style.TEMPLATE


def test_the_command_line_does_not_import_plotly():
    import subprocess
    import sys

    code = "import sys, dlsys.cli; print('plotly' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def test_roles_are_named_with_their_rank():
    assert style.role_names(2, servers=1) == ["server 0 (rank 0)", "worker 0 (rank 1)", "worker 1 (rank 2)"]
    assert style.role_names(2) == ["worker 0 (rank 0)", "worker 1 (rank 1)"]
    names = [t.name for t in training.worker_progress(_training_records()).data if t.showlegend]
    assert names == ["worker 0 (rank 1)", "worker 1 (rank 2)"]


def test_rank_positions():
    circle = layouts.rank_positions(4)
    assert np.allclose(circle[0], [0, 1]) and np.allclose(circle[1], [1, 0])  # rank 0 on top, clockwise
    assert np.allclose(np.hypot(*circle.T), 1)
    star = layouts.rank_positions(5, "star")
    assert np.allclose(star[0], [0, 0]) and np.allclose(np.hypot(*star[1:].T), 1)
    with pytest.raises(ValueError, match="layout"):
        layouts.rank_positions(3, "grid")


MOVING = 5  # per panel: nodes, messages, overhead bars (background, progress), caption


def lives_by_hand(trace):
    """Each message's (send span start, recv span end), matched as the clock makes them: a
    rank's send spans in order are its messages by departure; a rank's recv spans in order
    are the messages it received, in the trace's (program) order."""
    sends = {r: [s for s in trace.spans if s.rank == r and s.kind == "send"] for r in range(trace.world_size)}
    recvs = {r: [s for s in trace.spans if s.rank == r and s.kind == "recv"] for r in range(trace.world_size)}
    start, end = {}, {}
    for r in range(trace.world_size):
        out = sorted((i for i, m in enumerate(trace.messages) if m.src == r), key=lambda i: trace.messages[i].depart_s)
        start.update({i: s.start_s for i, s in zip(out, sends[r], strict=True)})
        into = [i for i, m in enumerate(trace.messages) if m.dst == r]
        end.update({i: s.end_s for i, s in zip(into, recvs[r], strict=True)})
    return [(start[i], end[i]) for i in range(len(trace.messages))]


def test_animation_frames_hold_only_the_moving_traces(ring_trace):
    fig = animation.message_animation({"a": ring_trace, "b": ring_trace}, {"b": "star"}, frames=30)
    assert len(fig.frames) == 31
    moving = list(fig.frames[0].traces)
    assert len(moving) == 2 * MOVING
    for frame in fig.frames:
        assert list(frame.traces) == moving and len(frame.data) == 2 * MOVING
        for nodes in (frame.data[0], frame.data[MOVING]):  # every frame has its nodes
            assert len(nodes.x) == len(nodes.y) == ring_trace.world_size
    static = [d for i, d in enumerate(fig.data) if i not in moving]
    assert all(isinstance(d.x, tuple) for d in static)  # lists: animation keeps them
    assert [fig.data[i].text[r] for i in (moving[0], moving[MOVING]) for r in (0, 3)] == ["rank 0", "rank 3"] * 2
    assert all(b.args[1]["frame"]["redraw"] is True for b in fig.layout.updatemenus[0].buttons)
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == [*animation.SPEEDS, "❚❚ Pause"]
    durations = [b.args[1]["frame"]["duration"] for b in fig.layout.updatemenus[0].buttons[:3]]
    assert durations[1] == 2 * durations[0] == 4 * durations[2]  # speed: 1x, half, double
    assert fig.layout.sliders[0].currentvalue.suffix.strip() in ("s", "ms", "µs", "ns")
    assert fig.layout.xaxis.scaleanchor is None  # the ring stretches to the page's width


@pytest.mark.parametrize("ranks, link", [(4, "tcp-10gbe"), (16, "rdma-edr"), (5, "tcp-1gbe")])
def test_every_message_is_drawn_for_its_whole_life(ranks, link):
    """From its send span's start to its recv span's end, in every frame; and no frame is
    empty while any message lives."""
    trace = E.simulate_collective("allreduce", "ring", ranks, "1MiB", link)["result"].trace
    fig = animation.message_animation({"a": trace}, frames=97)
    lives = lives_by_hand(trace)
    assert all(s < end for s, end in lives)
    for k, t in enumerate(np.linspace(0, trace.makespan_s, 98)):
        shown = list(fig.frames[k].data[1].customdata)
        assert sorted(shown) == [i for i, (s, end) in enumerate(lives) if s <= t <= end], k
        assert len(fig.frames[k].data[1].x) == len(shown)
    assert all(len(f.data[1].x) for f in fig.frames[:-1])  # the ring all-reduce is never an empty ring


def test_messages_are_sized_by_bytes_and_coloured_by_phase_and_step():
    trace = E.simulate_collective("allreduce", "ring", 4, "1MiB", "tcp-10gbe")["result"].trace
    ps = E.ps_vs_ring(3, "1KiB", "tcp-10gbe")["parameter server"]["result"].trace
    colours, legend = messages.message_colours(trace.messages)
    by_step = {}
    for m, c in zip(trace.messages, colours):
        by_step.setdefault((m.phase, m.step), set()).add(c)
    assert all(len(c) == 1 for c in by_step.values()) and len({c.pop() for c in by_step.values()}) == 6
    assert list(legend) == ["reduce-scatter", "allgather"]
    assert list(messages.message_colours(ps.messages)[1]) == ["push gradient", "pull mean"]  # no phase: by label
    mixed = Trace([], [Message(0, 1, 4, 0, 1, 0, "small"), Message(1, 0, 400, 0, 1, 0, "big")], 2)
    fig = animation.message_animation({"t": mixed}, frames=4)
    sizes = list(fig.frames[2].data[1].marker.size)
    assert sizes[1] > sizes[0] >= 12


def test_caption_names_the_step():
    trace = E.simulate_collective("allreduce", "ring", 4, "1MiB", "tcp-10gbe")["result"].trace
    fig = animation.message_animation({"a": trace}, frames=60)
    captions = [f.data[4].text[0] for f in fig.frames]
    assert captions[0] == captions[1] == "<b>reduce-scatter step 1 of 3</b>"
    seen = list(dict.fromkeys(captions))
    assert seen == [f"<b>{p} step {s} of 3</b>" for p in ("reduce-scatter", "allgather") for s in (1, 2, 3)]

    records = E.ps_vs_ring(3, "1MiB", "tcp-10gbe")  # the server is the slower: the ring finishes first
    traces = {k: r["result"].trace for k, r in records.items()}
    fig = animation.message_animation(
        traces,
        {"parameter server": "star"},
        {"parameter server": style.role_names(3, servers=1), "ring all-reduce": style.role_names(3)},
    )
    assert fig.data[fig.frames[0].traces[0]].text[0] == "server 0<br>(rank 0)"
    assert fig.data[fig.frames[0].traces[MOVING]].text[2] == "worker 2<br>(rank 2)"
    ring_done = max(life[1] for life in lives_by_hand(traces["ring all-reduce"]))
    assert fig.frames[-1].data[MOVING + 4].text[0] == f"<b>finished in {format_seconds(ring_done)}</b>"


def test_message_arc_ends_at_the_ranks():
    a, b = np.array([0.0, 1.0]), np.array([1.0, 0.0])
    ends = animation._arc_point(a, b, [0.0, 1.0])
    assert np.allclose(ends, [a, b])
    there, back = animation._arc_point(a, b, [0.5])[0], animation._arc_point(b, a, [0.5])[0]
    assert not np.allclose(there, back)  # the two directions are drawn apart


def test_timeline_and_link_bytes(ring_trace):
    fig = comm.timeline(ring_trace)
    bars = [d for d in fig.data if isinstance(d, go.Bar)]
    assert sum(len(d.x) for d in bars) == len(ring_trace.spans)
    assert "virtual time" in fig.layout.xaxis.title.text
    heat = comm.link_bytes(ring_trace).data[0]
    assert np.sum(heat.z) * 2**20 == pytest.approx(sum(ring_trace.bytes_per_link().values()))


def test_traffic_per_rank_names_the_server():
    records = E.ps_vs_ring(3, "1KiB", "tcp-10gbe")
    traces = {k: r["result"].trace for k, r in records.items()}
    fig = comm.traffic_per_rank(traces, {"parameter server": ["server", "w1", "w2", "w3"]})
    assert fig.data[0].x[0] == "server" and len(fig.data) == 4


def test_long_contributor_lists_wrap_after_a_plus():
    assert _wrap("0–3+13–15", 5) == "0–3+<br>13–15"
    assert _wrap("0+1+14+15", 5) == "0+1+<br>14+15"
    assert _wrap("0+2", 5) == "0+2" and _wrap("10–13+15", 5) == "10–13+<br>15"


def test_contributor_labels():
    assert _contributors(0b1011, 4) == "0+1+3"
    assert _contributors(0b1110111, 8) == "0–2+4–6"
    assert _contributors(0b1111, 4) == "all"
    assert _contributors(0b100, 4) == "2"


@pytest.mark.parametrize("ranks", [2, 4, 16])
def test_ring_steps_figure(ranks):
    states = E.ring_allreduce_steps(ranks)
    fig = ring_steps(states)
    assert len(fig.frames) == len(states) == 1 + 2 * (ranks - 1)
    assert all(list(f.traces) == [0, 1, 2] for f in fig.frames)
    last = fig.frames[-1].data[0]
    assert all(text == "all" for row in last.text for text in row)
    assert f"reduce-scatter step 1 of {ranks - 1}" in fig.frames[1].layout.title.text
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ Play", "❚❚ Pause"]
    for frame, state in zip(fig.frames[1:], states[1:]):  # outlines: the changed cells' own edges
        xs, ys = frame.data[1].x, frame.data[1].y
        boxes = [
            (min(xs[i : i + 5]), max(xs[i : i + 5]), min(ys[i : i + 5]), max(ys[i : i + 5]))
            for i in range(0, len(xs), 6)
        ]
        assert boxes == [(c - 0.47, c + 0.47, d - 0.47, d + 0.47) for _, d, c in state["moves"]]
        xs, ys = frame.data[2].x, frame.data[2].y  # dotted: the sender's cell of the block that moved
        boxes = [
            (min(xs[i : i + 5]), max(xs[i : i + 5]), min(ys[i : i + 5]), max(ys[i : i + 5]))
            for i in range(0, len(xs), 6)
        ]
        assert boxes == [(c - 0.47, c + 0.47, s - 0.47, s + 0.47) for s, _, c in state["moves"]]
        assert all(d == (s + 1) % ranks for s, d, _ in state["moves"])  # from the left neighbour
    widest = max(len(line) for row in fig.frames[ranks - 1].data[0].text for t in row for line in t.split("<br>"))
    assert widest <= {2: 40, 4: 40, 16: 6}[ranks]  # wrapped to fit a cell at 16 ranks


def test_cost_curves_mark_crossovers():
    rows = E.allreduce_costs(["tcp-10gbe"], [8], [2**k for k in range(33)])
    cross = E.crossovers(rows)
    emulated = [{"algorithm": "ring", "nbytes": 2**20, "time_s": 1e-3}]
    fig = costs.cost_curves(rows, "nbytes", emulated, cross)
    lines = [d for d in fig.data if d.mode == "lines"]
    stars = [d for d in fig.data if d.mode == "markers" and d.marker.symbol == "star"]
    assert len(lines) == 4 and len(stars) == len(cross) == 1
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_link_comparison_and_alpha_beta_split():
    rows = E.allreduce_costs(["tcp-10gbe", "rdma-edr"], [8], [2**k for k in range(0, 33, 4)])
    ring = [r for r in rows if r["algorithm"] == "ring"]
    fig = costs.link_comparison(ring)
    assert [d.line.dash for d in fig.data] == ["dash", "solid"]
    star = costs.alpha_beta_split([r for r in ring if r["link"] == "rdma-edr"]).data[-1]
    n_half, latency_s = star.x[0], star.y[0]  # where the latency and bandwidth parts are equal
    assert closed_form("allreduce", "ring", 8, n_half, "rdma-edr") == pytest.approx(2 * latency_s)


def test_closed_form_latex_covers_every_algorithm():
    assert set(costs.CLOSED_FORM_LATEX) == set(REGISTRY)


def test_ps_scaling_figure():
    rows = E.ps_vs_ring_scaling((2, 4), "1MiB", "tcp-10gbe")
    fig = costs.ps_vs_ring_scaling(rows)
    assert len(fig.data) == 6 and fig.layout.xaxis.title.text == "workers W"


def test_concept_map():
    fig = catalogue.concept_map(
        [
            ("A", "x", "app"),
            ("A", "y", "planned"),
            ("B", "z", "lesson"),
            ("B", "a name longer than one line of the column", "app"),
        ]
    )
    headers, *tiles = fig.data
    assert list(headers.text) == ["<b>A</b>", "<b>B</b>"]
    by_where = {t.name: list(t.text) for t in tiles}
    assert by_where == {"app": ["x", "a name longer than one line of<br>the column"], "lesson": ["z"], "planned": ["y"]}
    # every name on lines of its own: no two concepts of a column share a line
    rows = sorted(
        (x, y - (text.count("<br>")) / 2, y + text.count("<br>") / 2)
        for t in tiles
        for x, y, text in zip(t.x, t.y, t.text)
    )
    assert all(a[2] < b[1] for a, b in zip(rows, rows[1:]) if a[0] == b[0])


def test_figures_of_a_hand_made_trace():
    """Traces from any source work: zero-length spans, zero-byte messages, one rank idle."""
    spans = [Span(0, 0.0, 1e-3, "compute", "forward"), Span(1, 0.0, 0.0, "send", "")]
    messages = [Message(0, 1, 0, 1e-3, 1e-3, 0, "token"), Message(1, 0, 8, 1e-3, 2e-3, 0, "")]
    trace = Trace(spans, messages, 3)
    for fig in (animation.message_animation({"t": trace}, frames=4), comm.timeline(trace), comm.link_bytes(trace)):
        assert fig.to_json()
    assert math.isfinite(trace.makespan_s)


# --- the real data path and the emulation's scale ----------------------------------------------


def test_traffic_bars_stack_to_the_model_and_to_hand_counts():
    fig = datapath.traffic_bars(2, 64 * 2**20)
    stacks = [sum(trace.y[i] for trace in fig.data) / 2**20 for i in range(3)]  # MiB: copied, lent, memcpy
    assert stacks == [288, 160, 128]  # by hand: 4.5 n, 2.5 n, 2 n for n = 64 MiB at p = 2
    assert stacks[:2] == [ring_allreduce_traffic_bytes(2, 64 * 2**20, lent) / 2**20 for lent in (False, True)]
    huge = datapath.traffic_bars(2, 4 * 2**30)  # one binary unit on the axis, as on the totals: no "35k" MiB
    assert huge.layout.yaxis.ticktext[-1].endswith("GiB") and assert_lint_clean(huge, "traffic_bars 4 GiB") is None


def test_ratio_bars_show_measurements_and_their_bounds():
    records = [
        dict(nbytes=n, buffers=b, ratio_to_memcpy=r, wall_time_s=0.01, ranks=2)
        for n, b, r in [(2**20, "plain", 0.1), (2**20, "alloc", 0.2), (2**24, "alloc", 0.4)]
    ]
    fig = datapath.ratio_bars(records)
    bars = {trace.name: list(trace.y) for trace in fig.data}
    assert bars == {datapath.BUFFER_NAMES["plain"]: [0.1, None], datapath.BUFFER_NAMES["alloc"]: [0.2, 0.4]}
    bounds = sorted(round(shape.y0, 2) for shape in fig.layout.shapes)
    assert bounds == [0.3, 0.54]


def test_emulation_scaling_is_log_log_in_rank_order():
    fig = datapath.emulation_scaling(
        [dict(ranks=16, wall_time_s=0.02, messages=480), dict(ranks=8, wall_time_s=0.01, messages=112)]
    )
    assert list(fig.data[0].x) == [8, 16] and fig.layout.xaxis.type == fig.layout.yaxis.type == "log"


def test_gantt_lanes_colours_and_time_slider():
    records = _schedule_records()
    fig = schedule.gantt(records)
    bars = [t for t in fig.data if isinstance(t, go.Bar) and t.x and t.x[0] is not None]
    assert len(bars) == len(records)
    colours = schedule.layer_colours(len(records[0]["layers"]))
    for trace, record in zip(bars, records):
        assert set(trace.y) == set(schedule.LANES.values())
        pushes = [k for k, y in enumerate(trace.y) if y == schedule.LANES["push"]]
        assert 0 < len(pushes) <= sum(b["lane"] == "push" for b in record["lanes"])  # runs under a pixel merged
        assert {trace.marker.color[k] for k in pushes} <= set(colours)
        wire_s = sum(b["end_s"] - b["start_s"] for b in record["lanes"] if b["lane"] == "push")
        div = schedule.time_unit(max(r["end_s"] for r in records))[0]
        assert sum(trace.x[k] for k in pushes) * div >= wire_s * (1 - 1e-9)  # merging covers every push
    assert fig.layout.xaxis2.title.text.startswith("virtual time (")
    steps = fig.layout.sliders[0].steps
    assert len(steps) == schedule.SLIDER_STEPS + 1 and steps[-1].method == "relayout"
    first = steps[0].args[0]
    assert first["shapes"][0]["x0"] == 0  # at t = 0 everything is still to come
    assert all(first[f"annotations[{len(records) + i}].text"].startswith("compute") for i in range(len(records)))


def test_scheduling_curves_state_their_units():
    rows = ex_schedule.bandwidth_sweep(
        "alexnet", ["1Gbps", "100Gbps"], ["fifo", "p3"], 2, options={"p3": {"slice_params": 4_000_000}}
    )
    fig = schedule.iteration_vs_bandwidth(rows)
    assert fig.layout.xaxis.title.text == "link bandwidth (Gbit/s)" and "(" in fig.layout.yaxis.title.text
    relative = [t for t in fig.data if t.name == "fifo" and t.showlegend is False]
    assert list(relative[0].y) == [1.0, 1.0]
    tradeoff = schedule.option_tradeoff(ex_schedule.option_sweep("credit_bytes", (4e6, 64e6), "alexnet", 2), 16e6)
    assert tradeoff.layout.xaxis.title.text == "ByteScheduler credit (MB in flight)"
    assert not any("e+" in t for t in tradeoff.layout.xaxis.ticktext)


# --- animations a teacher can drive (issue 28) ---------------------------------------------


def _phase_steps_seen(fig) -> dict:
    """phase -> its step numbers in the order the captions show them."""
    import re

    seen: dict = {}
    for frame in fig.frames:
        for caption in frame.data[4::MOVING]:
            found = re.fullmatch(r"<b>(.+) step (\d+) of (\d+)</b>", caption.text[0])
            if found and int(found[2]) not in seen.setdefault(found[1], []):
                seen[found[1]].append(int(found[2]))
    return seen


@pytest.mark.parametrize("collective, algorithm", list(REGISTRY))
def test_step_captions_count_up_in_every_collective(collective, algorithm):
    """Every phase's caption starts at step 1 and counts up (a binomial broadcast numbers its
    steps by subtree bit, largest first: its first step must still read 'step 1')."""
    if collective == "barrier":
        pytest.skip("a barrier moves no data: its tokens are not drawn per step")
    trace = E.simulate_collective(collective, algorithm, 8, "64KiB", "tcp-10gbe")["result"].trace
    seen = _phase_steps_seen(animation.message_animation({"a": trace}, frames=240))
    assert seen, "no step caption"
    for phase, steps in seen.items():
        assert steps == sorted(steps) and steps[0] == 1, (phase, steps)


def test_binomial_broadcast_and_scatter_start_at_step_1():
    for collective in ("broadcast", "scatter"):
        trace = E.simulate_collective(collective, "binomial", 8, "64KiB", "tcp-10gbe")["result"].trace
        fig = animation.message_animation({"a": trace}, frames=60)
        assert fig.frames[0].data[4].text[0] == f"<b>{collective} step 1 of 3</b>"
        first = min(trace.messages, key=lambda m: m.depart_s)
        assert (first.src, first.dst) == (0, 4)  # the biggest subtree goes first: that is step 1


def test_each_message_shows_the_block_it_carries(ring_trace):
    fig = animation.message_animation({"a": ring_trace}, frames=30)
    for frame in fig.frames:
        messages = frame.data[1]
        assert list(messages.text) == [str(ring_trace.messages[i].block) for i in messages.customdata]
    assert any(len(f.data[1].text) for f in fig.frames) and all(m.block >= 0 for m in ring_trace.messages)
    assert (
        fig.layout.xaxis.visible is False and "block" in ring_steps(E.ring_allreduce_steps(4)).layout.xaxis.title.text
    )


def test_trees_are_drawn_as_binomial_trees():
    trace = E.simulate_collective("broadcast", "binomial", 8, "64KiB", "tcp-10gbe")["result"].trace
    pos = layouts.algorithm_positions("broadcast", "binomial", 8)
    assert np.allclose(pos[0], [pos[0][0], 1])  # the root on top
    depth = {r: bin(r).count("1") for r in range(8)}
    for m in trace.messages:  # every message goes one level down its tree edge
        assert depth[m.dst] == depth[m.src] + 1 and pos[m.dst][1] < pos[m.src][1]


def test_recursive_doubling_is_drawn_on_a_hypercube():
    trace = E.simulate_collective("allreduce", "recursive_doubling", 8, "64KiB", "tcp-10gbe")["result"].trace
    pos = layouts.algorithm_positions("allreduce", "recursive_doubling", 8)
    assert len({tuple(np.round(p, 6)) for p in pos}) == 8
    directions: dict = {}
    for m in trace.messages:
        bit = m.src ^ m.dst
        assert bit & (bit - 1) == 0  # partners differ in one bit: an edge of the cube
        along = (pos[m.dst] - pos[m.src]) * (1 if m.dst > m.src else -1)
        directions.setdefault(bit, set()).add(tuple(np.round(along, 6)))
    assert all(len(d) == 1 for d in directions.values()) and len(directions) == 3  # one direction per step
    assert (
        layouts.algorithm_positions("allgather", "recursive_doubling", 6).tolist() == layouts.rank_positions(6).tolist()
    )  # falls back to the ring


def test_hierarchical_is_drawn_on_two_levels_and_the_ring_on_a_circle():
    from dlsys.machine.topology import two_level

    groups = two_level("tcp-10gbe", 4, 4.0).supernodes(8)
    pos = layouts.algorithm_positions("allreduce", "hierarchical", 8, groups)
    leaders = [g[0] for g in groups]
    for g in groups:
        assert all(pos[g[0]][1] > pos[r][1] for r in g[1:])  # each leader above its supernode
        assert max(pos[r][0] for r in g) < min(pos[r][0] for r in groups[1]) or g is groups[1]  # side by side
    assert min(pos[r][1] for r in leaders) > max(pos[r][1] for g in groups for r in g[1:])
    assert np.allclose(np.hypot(*layouts.algorithm_positions("allreduce", "ring", 8).T), 1)
    with pytest.raises(ValueError, match="groups"):
        layouts.rank_positions(4, "two-level", [[0, 1], [1, 2]])
    assert {a.shape for a in REGISTRY.values()} <= set(layouts.LAYOUTS)


def test_the_player_steps_to_each_new_caption_and_shows_it(ring_trace):
    fig = animation.message_animation({"a": ring_trace}, frames=120)
    stops, captions = fig.layout.meta["stops"], fig.layout.meta["captions"]
    assert len(captions) == len(fig.frames) and stops[0] == 0 and stops == sorted(set(stops))
    shown = [fig.frames[k].data[4].text[0] for k in stops]
    assert shown == [f"<b>{p} step {s} of 3</b>" for p in ("reduce-scatter", "allgather") for s in (1, 2, 3)] + [
        fig.frames[-1].data[4].text[0]
    ] * (len(stops) - 6)
    assert captions[stops[1]] == "reduce-scatter step 2 of 3"
    two = animation.message_animation({"a": ring_trace, "b": ring_trace}, frames=30).layout.meta["captions"]
    assert two[0] == "a: reduce-scatter step 1 of 3 · b: reduce-scatter step 1 of 3"
    states = E.ring_allreduce_steps(4)
    assert ring_steps(states).layout.meta["captions"][1].startswith("reduce-scatter step 1 of 3")


def test_the_gpipe_bubble_shows_on_the_model_parallel_step():
    from dlsys.train import TrainConfig
    from dlsys.train.pipeline import fill_drain_bubble

    trace = E.train("model-parallel", TrainConfig(epochs=1), 4, link="rdma-edr", micro_batches=4)["result"].trace
    fig = training.pipeline_step(trace, 4)
    idle, forward, backward = fig.data
    assert [forward.name, backward.name] == ["forward", "backward"]
    assert sorted(forward.text) == sorted(backward.text) and sorted(set(forward.text)) == ["0", "1", "2", "3"]
    assert len(idle.y) == 4 and set(forward.y) <= set(idle.y)
    step = idle.x[0]
    stage0 = [(b, b + x) for y, b, x in zip(forward.y, forward.base, forward.x) if y == idle.y[0]]
    stage0 += [(b, b + x) for y, b, x in zip(backward.y, backward.base, backward.x) if y == idle.y[0]]
    measured = 1 - sum(e - s for s, e in stage0) / step
    assert (
        f"{measured:.0%}" in fig.layout.title.text and f"formula {fill_drain_bubble(4, 4):.0%}" in fig.layout.title.text
    )
    assert measured > 0.2  # the pipe fills and drains: stage 0 idles for a visible share of its step
    with pytest.raises(ValueError, match="micro-batches"):
        training.pipeline_step(trace, 400)


def test_one_colour_per_concept():
    from dlsys.viz import network_stack, pipeline, plan, taihulight

    concept = style.CONCEPT_COLOURS
    assert style.KIND_COLORS == {
        "compute": concept["compute"],
        "send": concept["send"],
        "wait": concept["idle"],
        "recv": concept["recv"],
    }
    assert pipeline.ACTION_COLOURS["F"] == concept["compute"] and pipeline.ACTION_COLOURS["idle"] == concept["idle"]
    assert network_stack.SIDE_COLOURS == {
        "sender": concept["send"],
        "wire": concept["wire"],
        "receiver": concept["recv"],
    }
    assert (
        plan.COMPONENT_COLOURS["compute"] == concept["compute"] and plan.COMPONENT_COLOURS["bubble"] == concept["idle"]
    )
    assert taihulight.COMMUNICATION[1] == concept["wire"]
    # what moves in an animation never takes the colour of a node's send or receive outline, or of compute
    outline = {concept["send"], concept["recv"], concept["compute"]}
    assert not outline & set(messages.LABEL_COLORS[:4])
    assert not {"Blues", "Oranges", "Greens"} & set(messages.PHASE_SCALES)
    # a colour names one concept, except forward, which is compute
    names = {}
    for name, colour in concept.items():
        names.setdefault(colour, set()).add(name)
    assert all(len(n) == 1 or n == {"compute", "forward"} for n in names.values())
