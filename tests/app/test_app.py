"""The Streamlit app under streamlit.testing.v1.AppTest (every page, defaults and edge
widget values, every tab), and the dlsys.experiments functions its pages call.
"""

import ast
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from test_figure_lint import assert_lint_clean

from dlsys import experiments as E
from dlsys.collectives import ALGORITHMS, closed_form
from dlsys.comm import BACKENDS
from dlsys.experiments import large_batch
from dlsys.experiments.budget import PROCESS_RANK_BYTES
from dlsys.experiments.contention import FABRICS, PATTERNS
from dlsys.machine.net import get_link
from dlsys.viz.animation import FRAMES_RANGE

APP_DIR = Path(__file__).resolve().parents[2] / "app"
APP = str(APP_DIR / "streamlit_app.py")
sys.path.insert(0, str(APP_DIR))  # the app's own modules, as streamlit_app.py imports them
import charts as charts_module  # noqa: E402
import pages  # noqa: E402

PAGES = [page.path for page in pages.PAGES]
TINY, HUGE = 4, 4 * 2**30


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    if page != PAGES[0]:
        at.switch_page(page).run()
    return ok(at)


def ok(at: AppTest) -> AppTest:
    """The run raised nothing and showed no error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def figures(at: AppTest) -> list[dict]:
    """Every figure the page drew, in page order, as plotly JSON: charts, and animations,
    which the player draws (app/player.py: a component given the figure's JSON)."""
    found = []

    def walk(node):
        kind = getattr(node, "type", None)
        if kind == "plotly_chart":
            found.append(json.loads(node.proto.spec))
        elif kind == "component_instance" and node.proto.component_name.endswith("dlsys_player"):
            found.append(json.loads(json.loads(node.proto.json_args)["spec"]))
        for _, child in sorted(getattr(node, "children", {}).items()):
            walk(child)

    walk(at.main)
    return found


def charts(at: AppTest) -> int:
    return len(figures(at))


def lint_charts(at: AppTest, where: str) -> None:
    """Every chart on the page passes the figure lint at 1280 px (dlsys/viz/lint.py), but
    for the documented exceptions of tests/viz/test_figure_lint.py."""
    for i, element in enumerate(at.get("plotly_chart")):
        assert_lint_clean(json.loads(element.proto.spec), f"{where}, chart {i}")


# --- pages --------------------------------------------------------------------------------


def test_large_batches_page_renders_from_the_cache_without_training(monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("the page must read results/large_batch.json, not train")

    monkeypatch.setattr(large_batch, "run_study", no_training)
    monkeypatch.setattr(large_batch, "train", no_training)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    ok(at.switch_page("views/large_batches.py").run())
    assert charts(at) == 2 and len(at.metric) == 4
    at.select_slider(key="lb_sched_batch").set_value(32)
    at.session_state["lb_view"] = "LARS and LAMB"
    ok(at.run())
    at.radio(key="lb_layers_opt").set_value("lamb")
    ok(at.run())
    assert charts(at) == 3


def test_the_page_registry_the_navigation_and_homes_links_agree(monkeypatch):
    """One list of pages: every app/views/*.py is registered once; the navigation the app
    builds and Home's links are the registry's, in its order, with its titles and icons;
    every concept Home maps to the app names a registered page, and every page shows one."""
    views = sorted(path.relative_to(APP_DIR).as_posix() for path in (APP_DIR / "views").glob("*.py"))
    assert sorted(PAGES) == views and len(set(PAGES)) == len(PAGES)
    assert len({page.name for page in pages.PAGES}) == len(pages.PAGES)
    navigation = {}
    navigate = st.navigation
    monkeypatch.setattr(
        st, "navigation", lambda sections, **kw: navigation.update(sections) or navigate(sections, **kw)
    )
    at = open_page(PAGES[0])
    built = [
        (section, p.title, p.icon, p.url_path, Path(p._page).relative_to(APP_DIR).as_posix())
        for section, entries in navigation.items()
        for p in entries
    ]
    assert built == [(p.section, p.title, p.icon, "" if p is pages.PAGES[0] else p.name, p.path) for p in pages.PAGES]
    links = [(link.proto.page, link.proto.label, link.proto.icon) for link in at.get("page_link")]
    assert links == [(p.name, p.title, p.icon) for p in pages.PAGES[1:]]
    home = ast.parse((APP_DIR / "views" / "home.py").read_text())
    concepts = next(
        ast.literal_eval(node.value)
        for node in home.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CONCEPTS"
    )
    shown = {where for _, _, where in concepts}
    assert shown - {"lesson", "planned"} <= set(pages.BY_NAME)
    assert {p.name for p in pages.PAGES[1:]} <= shown


@pytest.mark.parametrize(
    "page, tabs",
    [
        ("views/schedule.py", ("sched_view", [0, 1, 2])),
        ("views/taihulight.py", ("thl_view", [1, 2, 3])),
        ("views/cost_model.py", ("cost_view", [0])),
        ("views/ps_vs_ring.py", ("ps_view", [2])),
        ("views/compression.py", ("cmp_view", [4])),
        ("views/papers.py", (None, [])),
        ("views/memory.py", ("mem_view", [2, 3])),
        ("views/training.py", ("train_view", [1, 2])),
        ("views/pipelines.py", ("pipe_view", [1])),
    ],
)
def test_default_views_read_the_precomputed_store(page, tabs, monkeypatch):
    """Every sweep a default view shows is in dlsys.course.precomputed's store: with
    running any point forbidden, each of the page's sweeping tabs renders."""
    from dlsys.course import precomputed

    def no_run(name, kwargs):
        raise AssertionError(f"{name}{kwargs} is not precomputed: add it to precomputed.DEFAULTS")

    monkeypatch.setattr(precomputed, "call_by_name", no_run)
    st.cache_data.clear()
    at = open_page(page)
    assert charts(at) >= 1
    key, shown = tabs
    for index in shown:
        at.session_state[key] = at.tabs[index].label
        ok(at.run())
        assert charts(at) >= 1


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_with_defaults(page):
    at = open_page(page)
    assert charts(at) >= 1
    lint_charts(at, page)


@pytest.mark.parametrize("ranks", [2, 16])
@pytest.mark.parametrize("size", [TINY, HUGE])
def test_collectives_page_edges(ranks, size):
    at = open_page("views/collectives.py")
    at.slider(key="coll_ranks").set_value(ranks)
    at.select_slider(key="coll_size").set_value(size)
    ok(at.run())
    assert charts(at) == 1
    virtual, closed = at.metric[0].value, at.metric[1].value
    assert virtual == closed  # ring all-reduce is exact at any p and size


@pytest.mark.skipif(BACKENDS["mpi"].unavailable() is not None, reason=str(BACKENDS["mpi"].unavailable()))
def test_collectives_page_runs_on_mpi_with_the_threads_virtual_time():
    at = open_page("views/collectives.py")
    at.slider(key="coll_ranks").set_value(3)
    ok(at.run())
    threads = at.metric[0].value
    at.selectbox(key="coll_backend").set_value("mpi")
    ok(at.run())
    assert at.metric[0].value == threads


@pytest.mark.parametrize("ranks", [2, 16])
def test_collectives_animation_and_ring_steps_at_edge_ranks(ranks):
    """The Messages tab animates every rank and every message; the ring replay has a
    column per chunk and a frame per step (the first render draws the default tab)."""
    at = open_page("views/collectives.py")
    at.slider(key="coll_ranks").set_value(ranks)
    ok(at.run())
    spec = figures(at)[0]
    nodes = spec["frames"][0]["data"][0]
    assert len(nodes["x"]) == ranks and len(spec["frames"]) >= FRAMES_RANGE[0]
    assert any(f["data"][4]["text"] == [f"<b>allgather step {ranks - 1} of {ranks - 1}</b>"] for f in spec["frames"])
    at.session_state["coll_view"] = "Ring step by step"
    ok(at.run())
    spec = figures(at)[0]
    assert len(spec["frames"]) == 1 + 2 * (ranks - 1) and len(spec["data"][0]["z"]) == ranks


def test_collectives_page_explains_a_size_it_cannot_scale_exactly():
    at = open_page("views/collectives.py")
    at.slider(key="coll_ranks").set_value(6)
    at.select_slider(key="coll_size").set_value(HUGE)
    at.selectbox(key="coll_collective").set_value("scatter")
    at.run()
    assert not at.exception and charts(at) == 0
    assert "use a multiple of 6 elements" in at.error[0].value


@pytest.mark.parametrize("ranks, size", [(16, TINY), (2, HUGE)])
def test_collectives_page_every_algorithm(ranks, size):
    at = open_page("views/collectives.py")
    at.slider(key="coll_ranks").set_value(ranks)
    at.select_slider(key="coll_size").set_value(size)
    for name, algorithms in ALGORITHMS.items():
        at.selectbox(key="coll_collective").set_value(name)
        ok(at.run())
        for algorithm in algorithms:
            at.selectbox(key=f"coll_algorithm_{name}").set_value(algorithm)
            ok(at.run())
            assert charts(at) == 1, (name, algorithm)


@pytest.mark.parametrize("ranks, size", [(2, TINY), (16, HUGE)])
def test_collectives_link_load_every_pattern_on_every_fabric(ranks, size):
    """The Link load tab draws one figure for every pattern, fabric and sharing setting;
    an all-to-all whose buffer cannot be cut into p blocks says so instead."""
    at = open_page("views/collectives.py")
    at.slider(key="coll_ranks").set_value(ranks)
    at.select_slider(key="coll_size").set_value(size)
    at.session_state["coll_view"] = "Link load"
    ok(at.run())
    for fabric in FABRICS:
        at.selectbox(key="coll_load_fabric").set_value(fabric)
        for pattern in PATTERNS:
            at.selectbox(key="coll_load_pattern").set_value(pattern)
            ok(at.run())
            if pattern == "alltoall" and size == TINY:
                assert charts(at) == 0 and "multiple of 8 bytes" in at.warning[0].value
                continue
            assert charts(at) == 1, (fabric, pattern)
            assert any(f"{pattern}, " in c.value and "with sharing" in c.value for c in at.caption)
    at.selectbox(key="coll_load_pattern").set_value("ring")
    at.toggle(key="coll_load_static").set_value(True)
    ok(at.run())
    assert "sharing off" in figures(at)[0]["layout"]["title"]["text"]


@pytest.mark.parametrize(
    "page, key, tabs",
    [
        (
            "views/collectives.py",
            "coll_view",
            ["Ring step by step", "Timeline", "Bytes per link", "Link load", "Downloads"],
        ),
        ("views/cost_model.py", "cost_view", ["Against ranks", "TCP vs RDMA", "Alpha and beta"]),
        ("views/ps_vs_ring.py", "ps_view", ["Bytes per rank", "Against workers", "Downloads"]),
        ("views/training.py", "train_view", ["Push and pull", "Data vs model parallel"]),
        (
            "views/compression.py",
            "cmp_view",
            ["Residual", "Accuracy vs bytes", "Messages", "Iteration time", "Per model"],
        ),
        ("views/large_batches.py", "lb_view", ["LARS and LAMB", "Sharp vs flat minima", "Time to accuracy"]),
        ("views/schedule.py", "sched_view", ["Against bandwidth", "Slice, credit and bucket size"]),
        ("views/network_stack.py", "net_view", ["Libraries", "Training and IO"]),
        ("views/memory.py", "mem_view", ["ZeRO Figure 1", "Measured against the model"]),
        (
            "views/taihulight.py",
            "thl_view",
            ["PS vs ring", "Ring vs MPI_Allreduce", "Link load", "One iteration", "Timeline"],
        ),
    ],
)
def test_every_tab_runs(page, key, tabs):
    at = open_page(page)
    for tab in tabs:
        at.session_state[key] = tab
        ok(at.run())
        lint_charts(at, f"{page}, {tab}")
        if tab == "Downloads":
            assert len(at.get("download_button")) >= 4
        elif page not in ("views/training.py", "views/large_batches.py") or tab in (
            "Sharp vs flat minima",
            "Time to accuracy",
        ):  # the others draw several charts
            assert charts(at) == 1, tab
        else:
            assert charts(at) >= 2, tab


def test_memory_page_bars_fits_and_one_step():
    """Defaults: six stacked bars of five kinds, the metrics say what fits; the
    communication tab draws the closed form, a small run's step animated and its timeline."""
    at = open_page("views/memory.py")
    spec = figures(at)[0]
    assert [t["name"] for t in spec["data"]] == ["parameters", "gradients", "optimizer", "activations", "buffers"]
    assert spec["data"][0]["x"] == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "FSDP", "TP"]
    assert [m.label for m in at.metric] == spec["data"][0]["x"]
    assert any("Fits a 40 GiB device: ZeRO-3, FSDP, TP" in c.value for c in at.caption)
    at.session_state["mem_view"] = "Communication per step"
    ok(at.run())
    assert charts(at) == 3
    lint_charts(at, "views/memory.py, Communication per step")
    at.radio(key="mem_step_layout").set_value("DDP")
    ok(at.run())
    assert any("DDP on 4 ranks" in c.value for c in at.caption)


@pytest.mark.parametrize("ranks", [1, 1024])
def test_memory_page_free_size_and_edge_ranks(ranks):
    at = open_page("views/memory.py")
    at.selectbox(key="mem_model").set_value("free size")
    at.select_slider(key="mem_ranks").set_value(ranks)
    ok(at.run())
    assert at.selectbox(key="mem_tp").value == (1 if ranks == 1 else 8)
    assert charts(at) == 1


@pytest.mark.parametrize("ranks", [2, 16, 1024])
@pytest.mark.parametrize("size", [TINY, HUGE])
def test_cost_model_page_edges(ranks, size):
    at = open_page("views/cost_model.py")
    at.select_slider(key="cost_ranks").set_value(ranks)
    at.select_slider(key="cost_size").set_value(size)
    ok(at.run())
    at.session_state["cost_view"] = "Against ranks"
    ok(at.run())
    assert charts(at) == 1


@pytest.mark.parametrize("workers", [2, 16])
@pytest.mark.parametrize("size", [TINY, HUGE])
def test_ps_vs_ring_page_edges(workers, size):
    at = open_page("views/ps_vs_ring.py")
    at.slider(key="ps_workers").set_value(workers)
    at.select_slider(key="ps_size").set_value(size)
    ok(at.run())
    assert charts(at) == 1
    at.session_state["ps_view"] = "Against workers"
    ok(at.run())


def test_training_page_offers_the_registrys_strategies():
    from dlsys.train import STRATEGIES

    at = open_page("views/training.py")
    at.session_state["train_view"] = "Push and pull"
    ok(at.run())
    offered = at.selectbox(key="train_pp_consistency").options
    assert offered == [s.name for s in STRATEGIES.values() if "servers" in s.options]


def test_pages_name_workers_and_servers_by_rank():
    """One numbering (docs/app.md): ranks 0-based; "worker w (rank r)", "server s (rank r)"."""
    at = open_page("views/training.py")
    assert at.slider(key="train_straggler").label.startswith("straggler: worker 3 (rank 4)")
    at.session_state["train_view"] = "Push and pull"
    ok(at.run())
    at.slider(key="train_pp_servers").set_value(2)
    ok(at.run())
    assert any("worker w is rank 2 + w" in c.value for c in at.caption)
    at = open_page("views/ps_vs_ring.py")
    at.slider(key="ps_workers").set_value(2)
    at.session_state["ps_view"] = "Bytes per rank"
    ok(at.run())
    bars = [list(trace["x"]) for trace in figures(at)[0]["data"]]
    assert bars[0] == ["server 0 (rank 0)", "worker 0 (rank 1)", "worker 1 (rank 2)"]
    assert bars[-1] == ["worker 0 (rank 0)", "worker 1 (rank 1)"]


@pytest.mark.parametrize("ranks, size", [(2, 2**20), (16, 4 * 2**30)])
def test_performance_page_traffic_edges(ranks, size):
    at = open_page("views/performance.py")
    at.slider(key="perf_ranks").set_value(ranks)
    at.select_slider(key="perf_size").set_value(size)
    at.slider(key="perf_speedup").set_value(4.0)
    ok(at.run())
    assert charts(at) == 1 and len(at.metric) == 3


def test_performance_page_measures_real_processes_and_emulates():
    at = open_page("views/performance.py")
    at.session_state["perf_view"] = "Measure it here"
    ok(at.run())
    assert charts(at) == 0 and at.info  # nothing runs until the button is pressed
    at.multiselect(key="perf_bench_sizes").set_value([2**20])
    ok(at.button(key="perf_run").click().run())
    assert charts(at) == 1
    table = at.dataframe[0].value
    assert list(table["sends"]) == ["copied sends (plain memory)", "lent sends (comm.alloc)"]
    assert (table["busbw/memcpy"] >= 0).all() and table["time"].str.endswith("s").all()
    at.session_state["perf_view"] = "Emulation scale"
    ok(at.run())
    at.select_slider(key="perf_emulate_ranks").set_value(16)
    ok(at.button(key="perf_emulate").click().run())
    table = at.dataframe[0].value
    assert list(table["ranks"]) == [8, 16] and list(table["messages"]) == [112, 480]
    assert list(table["virtual time"]) == list(table["closed form"])


# --- the experiments behind the pages --------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS["allreduce"])
@pytest.mark.parametrize("ranks", [2, 8])
def test_small_real_buffers_give_the_logical_size_exactly(algorithm, ranks):
    rec = E.simulate_collective("allreduce", algorithm, ranks, "1GiB", "tcp-10gbe", max_memory_bytes=2**16)
    assert rec["memory_bytes"] <= 2**16 and rec["real_nbytes"] <= 2**13 and rec["scale"] > 2**15
    assert rec["virtual_time_s"] == pytest.approx(rec["closed_form_s"], rel=1e-9)
    assert rec["result"].network.link == get_link("tcp-10gbe")  # the trace is reported with the real link


def test_uneven_ring_blocks_are_exact_with_one_real_element_per_block():
    """2**28 float32 on 5 ranks: blocks of 53,687,092 and 53,687,091 elements. Each real
    element stands for its own block, so the bytes are exact and the largest block sets
    every ring step: the closed form at p * ceil(n / p)."""
    p, count = 5, 2**28
    rec = E.simulate_collective("allreduce", "ring", p, 4 * count, "rdma-edr", max_memory_bytes=2**12)
    assert rec["real_count"] == p and (rec["scale_min"], rec["scale_max"]) == (count // p, count // p + 1)
    blocks = [count // p + (i < count % p) for i in range(p)]
    assert rec["bytes_sent_per_rank"] == rec["result"].trace.bytes_sent_per_rank()
    assert sum(rec["bytes_sent_per_rank"]) == 4 * 2 * (p - 1) * sum(blocks)
    largest = closed_form("allreduce", "ring", p, 4 * p * max(blocks), "rdma-edr")
    assert rec["virtual_time_s"] == pytest.approx(largest, rel=1e-12)


@pytest.mark.parametrize("collective", list(ALGORITHMS))
def test_scaled_runs_equal_real_runs_in_time_and_bytes(collective):
    """The budget changes what is allocated, never what is charged: every algorithm, on
    even and uneven sizes (uneven ones only where they can be exact, else a clear error)."""
    for algorithm in ALGORITHMS[collective]:
        for p, count in ((4, 1024), (6, 1003), (5, 1000)):
            real = E.simulate_collective(collective, algorithm, p, 4 * count, record=False)
            try:
                scaled = E.simulate_collective(
                    collective, algorithm, p, 4 * count, max_memory_bytes=2**11, record=False
                )
            except ValueError as exc:
                assert "do not split into" in str(exc) and count % p, (collective, algorithm, p)
                continue
            assert real["scale"] == 1 and (scaled["scale"] > 1 or collective == "barrier")
            assert scaled["virtual_time_s"] == real["virtual_time_s"], (collective, algorithm, p)
            assert scaled["bytes_sent_per_rank"] == real["bytes_sent_per_rank"], (collective, algorithm, p)


def test_per_block_scales_cross_process_boundaries():
    budget = 5 * PROCESS_RANK_BYTES + 2**10  # five interpreters and a few real elements
    scaled = E.simulate_collective("allreduce", "ring", 5, 4 * 1003, backend="processes", max_memory_bytes=budget)
    real = E.simulate_collective("allreduce", "ring", 5, 4 * 1003)
    assert (scaled["real_count"], scaled["scale_min"], scaled["scale_max"]) == (5, 200, 201)
    assert scaled["virtual_time_s"] == real["virtual_time_s"]
    assert scaled["bytes_sent_per_rank"] == real["bytes_sent_per_rank"]


def test_512_ranks_within_the_budget_meet_the_closed_form():
    """The default budget (1 GiB for all ranks) at 512 ranks: 2**26 bytes per rank (an
    even split) and 60.97 MB (15,242,500 float32: 260 blocks one element larger)."""
    even = E.simulate_collective("allreduce", "ring", 512, 2**26, "sw26010", record=False)
    assert even["memory_bytes"] <= 2**30 and even["scale_min"] == even["scale_max"] > 1
    assert even["virtual_time_s"] == pytest.approx(even["closed_form_s"], rel=1e-12)
    assert even["bytes_sent_per_rank"] == [2 * 511 * 2**26 // 512] * 512
    uneven = E.simulate_collective("allreduce", "ring", 512, "60.97MB", "sw26010", record=False)
    assert (uneven["real_count"], uneven["scale_min"], uneven["scale_max"]) == (512, 29_770, 29_771)
    largest = closed_form("allreduce", "ring", 512, 4 * 512 * 29_771, "sw26010")
    assert uneven["virtual_time_s"] == pytest.approx(largest, rel=1e-12)


def test_budget_refuses_before_any_rank_starts():
    with pytest.raises(ValueError, match="more than the memory budget 1 KiB"):
        E.simulate_collective("allreduce", "ring", 8, "1MiB", max_memory_bytes=2**10, real=True)
    with pytest.raises(ValueError, match="even one real element per block"):
        E.simulate_collective("allgather", "ring", 4096, "1GiB", max_memory_bytes=2**20)
    with pytest.raises(ValueError, match=r"use a multiple of 6 elements \(e.g. 174 or 180\)"):
        E.simulate_collective("broadcast", "scatter_allgather", 6, 4 * 175, max_memory_bytes=2**10)


def test_uncapped_run_is_unchanged():
    rec = E.simulate_collective("allgather", "ring", 4, "64KiB")
    assert rec["scale"] == 1.0 and rec["real_nbytes"] == 64 * 2**10
    assert rec["relative_error"] < 1e-9


def test_messages_carry_their_senders_labels():
    trace = E.simulate_collective("allreduce", "ring", 4, "1KiB")["result"].trace
    labels = {m.label for m in trace.messages}
    assert "reduce-scatter step 0 block 3" in labels and "allgather step 2 block 2" in labels
    assert len(labels) == 2 * 3 * 4


@pytest.mark.parametrize("ranks", [2, 3, 8])
def test_ring_steps_replay_the_textbook_figure(ranks):
    states = E.ring_allreduce_steps(ranks)
    full = (1 << ranks) - 1
    assert len(states) == 1 + 2 * (ranks - 1)
    assert states[0]["chunks"] == [[1 << r] * ranks for r in range(ranks)]
    after_reduce_scatter = states[ranks - 1]["chunks"]
    assert [row.count(full) for row in after_reduce_scatter] == [1] * ranks  # each rank owns one full chunk
    assert all(all(v == full for v in row) for row in states[-1]["chunks"])
    assert all(len(s["moves"]) == ranks for s in states[1:])  # every rank sends once per step


@pytest.mark.parametrize("link", ["tcp-1gbe", "rdma-edr"])
@pytest.mark.parametrize("workers", [1, 3, 16])
@pytest.mark.parametrize("size", ["4", "1MiB", "1GiB"])
def test_parameter_server_meets_its_closed_form(link, workers, size):
    rec = E.simulate_ps(workers, size, link, max_memory_bytes=2**14)
    assert rec["virtual_time_s"] == pytest.approx(rec["closed_form_s"], rel=1e-9)


def test_parameter_server_link_is_the_bottleneck():
    w, n = 8, 2**20
    records = E.ps_vs_ring(w, n, "tcp-10gbe")
    server = records["parameter server"]["result"].trace
    assert server.bytes_received_per_rank()[0] == w * n and server.bytes_sent_per_rank()[0] == w * n
    assert max(records["ring all-reduce"]["bytes_sent_per_rank"]) == 2 * (w - 1) * n // w
    assert records["parameter server"]["virtual_time_s"] > 3 * records["ring all-reduce"]["virtual_time_s"]
    rows = E.ps_vs_ring_scaling((2, 8), n, "tcp-10gbe")
    assert {(r["scheme"], r["workers"]) for r in rows} == {(s, w) for s in records for w in (2, 8)}


def test_ps_program_rejects_bad_input():
    with pytest.raises(ValueError, match="workers"):
        E.simulate_ps(0)
    with pytest.raises(ValueError, match="multiple of the float32"):
        E.simulate_ps(2, 6)


def test_crossovers_are_exact_intersections():
    rows = E.allreduce_costs(["tcp-10gbe"], [8], [2**k for k in range(33)])
    (cross,) = E.crossovers(rows, "nbytes")
    a, b = cross["from"], cross["to"]
    n = cross["nbytes"]
    ta, tb = (closed_form("allreduce", x, 8, n, "tcp-10gbe") for x in (a, b))
    assert ta == pytest.approx(tb, rel=1e-9) and ta == pytest.approx(cross["time_s"], rel=1e-9)
    by_ranks = E.allreduce_costs(["tcp-10gbe"], [2**k for k in range(1, 11)], [2**20])
    assert all(c["from"] != c["to"] for c in E.crossovers(by_ranks, "ranks"))


def test_ties_are_not_crossovers():
    # at p = 2 ring and Rabenseifner cost the same at every size
    rows = [
        r
        for r in E.allreduce_costs(["rdma-edr"], [2], [2**k for k in range(20, 33)])
        if r["algorithm"] in ("ring", "rabenseifner")
    ]
    assert E.crossovers(rows) == []


def test_emulated_costs_match_closed_forms_at_powers_of_two():
    for row in E.emulated_allreduce_costs("rdma-edr", 4, sizes=(2**10, 2**30)):
        assert row["time_s"] == pytest.approx(
            closed_form("allreduce", row["algorithm"], 4, row["nbytes"], "rdma-edr"), rel=1e-9
        )


def test_link_table_half_bandwidth_size():
    for row in E.link_table():
        link = get_link(row["link"])
        assert link.message_s(row["n_half_bytes"]) == pytest.approx(2 * link.alpha_s)


def test_to_csv_and_without_values():
    rec = E.simulate_collective("allreduce", "ring", 3, "64")
    slim = E.without_values(rec)
    assert slim["result"].values == [None] * 3 and slim["result"].trace == rec["result"].trace
    assert isinstance(rec["result"].values[0], np.ndarray)
    spans, messages = rec["result"].trace.records()
    text = E.to_csv(messages)
    assert text.splitlines()[0] == "src,dst,nbytes,depart_s,arrive_s,tag,label,phase,step,block"
    assert len(text.splitlines()) == 1 + len(messages)


@pytest.mark.parametrize("method", ["onebit", "terngrad", "qsgd", "randomk", "dgc", "none"])
def test_compression_page_every_kind_of_method(method):
    at = open_page("views/compression.py")
    at.session_state["cmp_method"] = method
    ok(at.run())
    assert charts(at) == 1


# --- shareable state, presenter mode, figure downloads ----------------------------------------

# non-default values of every page's widgets that a teacher might share (tabs included)
SHARED_STATE = {
    "views/collectives.py": {
        "coll_collective": "allgather",
        "coll_algorithm_allgather": "recursive_doubling",
        "coll_ranks": 16,
        "coll_size": 2**20,
        "coll_link": "rdma-edr",
        "coll_view": "Timeline",
    },
    "views/cost_model.py": {
        "cost_ranks": 16,
        "cost_size": 64 * 2**20,
        "cost_link": "rdma-edr",
        "cost_check": False,
        "cost_view": "TCP vs RDMA",
    },
    "views/ps_vs_ring.py": {"ps_workers": 4, "ps_size": 2**20, "ps_link": "tcp-1gbe", "ps_view": "Bytes per rank"},
    "views/training.py": {
        "train_link": "tcp-10gbe",
        "train_epochs": 1,
        "train_view": "Push and pull",
        "train_pp_servers": 2,
        "train_pp_consistency": "ps-asp",
    },
    "views/compression.py": {"cmp_method": "qsgd", "cmp_bits": 8, "cmp_view": "Residual"},
    "views/performance.py": {"perf_ranks": 8, "perf_size": 16 * 2**20, "perf_speedup": 2.0},
    "views/network_stack.py": {
        "net_view": "Training and IO",
        "net_storage": "nfs",
        "net_loaders": 4,
        "net_prefetch": 8,
    },
    "views/memory.py": {
        "mem_model": "GPT-3 (175B)",
        "mem_ranks": 512,
        "mem_device": 80,
        "mem_tp": 8,
        "mem_optimizer": "sgd",
        "mem_view": "ZeRO Figure 1",
    },
    "views/taihulight.py": {
        "thl_model": "resnet50",
        "thl_nodes": 16,
        "thl_layout": "scattered",
        "thl_topology": "flat",
        "thl_static": True,
        "thl_view": "Timeline",
    },
}


def open_with_url(page: str, params: dict) -> AppTest:
    """A fresh session opening ``page`` from a link with these query parameters."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(page)
    return ok(at.run())


@pytest.mark.parametrize("page", SHARED_STATE)
def test_a_pages_url_reproduces_its_state(page):
    """Set the widgets, take the URL the page wrote, open it in a new session: same widgets."""
    state = SHARED_STATE[page] | {"presenter": True, "figure_format": "svg"}
    at = open_page(page)
    for k, v in state.items():
        at.session_state[k] = v
    ok(at.run())
    url = dict(at.query_params)
    assert set(state) <= set(url), set(state) - set(url)
    again = open_with_url(page, url)
    assert {k: again.session_state[k] for k in state} == state
    assert dict(again.query_params) == url
    assert charts(again) >= 1


def test_a_prepared_link_ring_16_ranks_64_mib_tcp_vs_rdma():
    at = open_with_url(
        "views/cost_model.py", {"cost_ranks": "16", "cost_size": str(64 * 2**20), "cost_view": "TCP vs RDMA"}
    )
    assert at.select_slider(key="cost_ranks").value == 16
    assert at.select_slider(key="cost_size").value == 64 * 2**20
    spec = figures(at)[0]
    assert spec["layout"]["title"]["text"] == "Ring all-reduce, p = 16, every link"


def test_unknown_url_values_fall_back_to_the_defaults():
    at = open_with_url("views/collectives.py", {"coll_link": "carrier-pigeon", "coll_ranks": "many"})
    assert at.selectbox(key="coll_link").value == "tcp-10gbe" and at.slider(key="coll_ranks").value == 8
    assert "coll_ranks=many" in at.warning[0].value and charts(at) == 1
    assert at.query_params["coll_ranks"] == "8"


def test_presenter_mode_enlarges_text_and_figures():
    at = open_page("views/ps_vs_ring.py")
    normal = figures(at)[0]["layout"]
    assert not any("font-size: 22px" in h.proto.body for h in at.get("html"))
    assert not at.expander
    at.toggle(key="presenter").set_value(True)
    ok(at.run())
    large = figures(at)[0]["layout"]
    assert large["template"]["layout"]["font"]["size"] == round(normal["template"]["layout"]["font"]["size"] * 1.4)
    # an animation (this one) grows only to what fits a 720p screen with its controls
    assert large["height"] == min(round((normal.get("height") or 450) * 1.4), charts_module.ANIMATION_MAX_HEIGHT_PX)
    # the sizes the figure sets itself (legend, labels, buttons) grow too, not only the template's
    assert large["legend"]["font"]["size"] == round(normal["legend"]["font"]["size"] * 1.4, 1)
    assert any("font-size: 22px" in h.proto.body for h in at.get("html"))
    # each long paragraph: its first sentence, the rest in an expander
    assert at.expander and all(more.label == "more" and (more.markdown or more.caption) for more in at.expander)
    assert at.query_params["presenter"] == "true"


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_every_figure_downloads_in_the_chosen_format(fmt):
    at = open_with_url("views/cost_model.py", {"figure_format": fmt})
    (figure,) = at.get("plotly_chart")
    options = json.loads(figure.proto.config)["toImageButtonOptions"]
    assert options["format"] == fmt and options["filename"] == "cost_by_size"


def test_the_course_maps_prepared_links_open_as_written():
    """docs/course.md's links for the slides are the app's prepared demos (app/demos.py,
    listed on Home), row for row; each opens its page with exactly those values."""
    from urllib.parse import parse_qsl, urlsplit

    from demos import DEMOS

    course = (Path(APP).parents[1] / "docs" / "course.md").read_text()
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \| `(/[a-z_]+\?[^`]+)` \|$", course, re.MULTILINE)
    assert [(int(week), what.strip(), link) for week, what, link in rows] == [tuple(d) for d in DEMOS]
    home = open_page(PAGES[0])
    listed = "\n".join(m.value for m in home.markdown)
    assert all(f"[{d.what}]({d.link})" in listed for d in DEMOS)
    links = [d.link for d in DEMOS]
    for link in links:
        url = urlsplit(link)
        params = dict(parse_qsl(url.query))
        at = open_with_url(f"views/{url.path.strip('/')}.py", params)
        assert not at.warning, (link, [w.value for w in at.warning])
        assert {k: at.query_params[k] for k in params} == params, link


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "interleaved", "zb-h1"])
def test_pipelines_page_shows_each_schedule_with_its_measured_bubble_equal_to_the_formula(schedule):
    at = open_page("views/pipelines.py")
    at.selectbox(key="pipe_schedule").set_value(schedule)
    at.select_slider(key="pipe_microbatches").set_value(12)
    ok(at.run())
    measured, formula = at.metric[0].value, at.metric[1].value
    assert measured == formula and charts(at) >= 3


def test_pipelines_page_planner_ranks_layouts_and_breaks_one_down():
    at = open_page("views/pipelines.py")
    at.session_state["pipe_view"] = "The planner"
    ok(at.run())
    assert charts(at) == 2 and at.dataframe and len(at.dataframe[0].value) == 10
    lint_charts(at, "views/pipelines.py, The planner")
    at.selectbox(key="plan_pick").set_value(3)
    ok(at.run())
    assert any("Layout #3" in c.value for c in at.caption)


def test_pipelines_page_planner_spreads_a_mixtures_experts():
    at = open_page("views/pipelines.py")
    at.session_state["pipe_view"] = "The planner"
    at.session_state["plan_model"] = "8x7b"
    ok(at.run())
    assert charts(at) == 2 and any(row > 1 for row in at.dataframe[0].value["ep"])


@pytest.mark.parametrize("algorithm", ["pairwise", "bruck"])
def test_pipelines_page_all_to_all_tab_animates_and_matches_its_closed_form(algorithm):
    at = open_page("views/pipelines.py")
    at.session_state["pipe_view"] = "All-to-all and experts"
    ok(at.run())
    lint_charts(at, "views/pipelines.py, All-to-all and experts")
    at.selectbox(key="a2a_algorithm").set_value(algorithm)
    ok(at.run())
    assert at.metric[0].value == at.metric[1].value and charts(at) == 5
