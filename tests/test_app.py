"""The Streamlit app under streamlit.testing.v1.AppTest (every page, defaults and edge
widget values, every tab), and the dlsys.experiments functions its pages call.
"""

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dlsys import experiments as E
from dlsys.collectives import ALGORITHMS
from dlsys.collectives import closed_form
from dlsys.net import get_link

APP = str(Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py")
PAGES = ["views/home.py", "views/collectives.py", "views/cost_model.py", "views/ps_vs_ring.py", "views/performance.py"]
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


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


# --- pages --------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_with_defaults(page):
    at = open_page(page)
    assert charts(at) >= 1


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


@pytest.mark.parametrize("page, key, tabs", [
    ("views/collectives.py", "coll_view", ["Ring step by step", "Timeline", "Bytes per link", "Downloads"]),
    ("views/cost_model.py", "cost_view", ["Against ranks", "TCP vs RDMA", "Alpha and beta"]),
    ("views/ps_vs_ring.py", "ps_view", ["Bytes per rank", "Against workers", "Downloads"]),
])
def test_every_tab_runs(page, key, tabs):
    at = open_page(page)
    for tab in tabs:
        at.session_state[key] = tab
        ok(at.run())
        if tab == "Downloads":
            assert len(at.get("download_button")) >= 4
        else:
            assert charts(at) == 1, tab


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
    rec = E.simulate_collective("allreduce", algorithm, ranks, "1GiB", "tcp-10gbe", max_real_nbytes=4096)
    assert rec["real_nbytes"] <= 4096 and rec["scale"] > 2**17
    assert rec["virtual_time_s"] == pytest.approx(rec["closed_form_s"], rel=1e-9)
    assert rec["result"].link == get_link("tcp-10gbe")  # the trace is reported with the real link


def test_logical_trace_reports_logical_bytes():
    p, n = 5, 2**30
    rec = E.simulate_collective("allreduce", "ring", p, n, "rdma-edr", max_real_nbytes=2**12)
    for sent in rec["bytes_sent_per_rank"]:
        assert sent == pytest.approx(2 * (p - 1) / p * n, rel=1e-3)
    assert rec["virtual_time_s"] == pytest.approx(closed_form("allreduce", "ring", p, n, "rdma-edr"), rel=1e-9)


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
    rec = E.simulate_ps(workers, size, link, max_real_nbytes=2**12)
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
    rows = [r for r in E.allreduce_costs(["rdma-edr"], [2], [2**k for k in range(20, 33)])
            if r["algorithm"] in ("ring", "rabenseifner")]
    assert E.crossovers(rows) == []


def test_emulated_costs_match_closed_forms_at_powers_of_two():
    for row in E.emulated_allreduce_costs("rdma-edr", 4, sizes=(2**10, 2**30)):
        assert row["time_s"] == pytest.approx(closed_form("allreduce", row["algorithm"], 4, row["nbytes"], "rdma-edr"), rel=1e-9)


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
