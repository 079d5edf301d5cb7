"""Every page keeps its widgets in the URL (app/urlstate.py): each bound widget's value
round-trips through a link, a value a widget refuses is dropped alone and named in one
warning while the link's good values stay, and a link to an unknown page says so."""

import ast
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP_DIR = Path(__file__).resolve().parents[2] / "app"
APP = str(APP_DIR / "streamlit_app.py")
sys.path.insert(0, str(APP_DIR))  # the app's own modules, as streamlit_app.py imports them
import pages  # noqa: E402

SIDEBAR = {"presenter": True, "figure_format": "svg"}
ANOTHER = object()  # "an option other than the widget's default", for options read from data
# Non-default values of every widget each page binds, one state per tab that has its own
# widgets (test_every_bound_key_is_covered checks this covers every url_key of the sources).
STATES = {
    "views/collectives.py": [
        {
            "coll_collective": "allgather",
            "coll_algorithm_allgather": "recursive_doubling",
            "coll_ranks": 4,
            "coll_size": 2**20,
            "coll_link": "rdma-edr",
            "coll_backend": "processes",
            "coll_view": "Timeline",
        },
        {
            "coll_view": "Link load",
            "coll_load_pattern": "incast",
            "coll_load_fabric": "flat",
            "coll_load_over": 2,
            "coll_load_static": True,
        },
    ],
    "views/cost_model.py": [
        {
            "cost_ranks": 16,
            "cost_size": 2**20,
            "cost_link": "rdma-edr",
            "cost_check": False,
            "cost_library": "openmpi",
            "cost_view": "Against ranks",
        },
    ],
    "views/ps_vs_ring.py": [{"ps_workers": 4, "ps_size": 2**20, "ps_link": "tcp-1gbe", "ps_view": "Bytes per rank"}],
    "views/training.py": [
        {
            "train_link": "tcp-10gbe",
            "train_epochs": 1,
            "train_straggler": 2.0,
            "train_staleness": 1,
            "train_timeline_run": "ASP",
        },
        {"train_epochs": 1, "train_view": "Push and pull", "train_pp_servers": 2, "train_pp_consistency": "ps-asp"},
        {
            "train_epochs": 1,
            "train_view": "Data vs model parallel",
            "train_micro": 2,
            "train_period": 2,
            "train_big_batch": 64,
            "train_split_timeline_run": "local SGD K=2",
        },
    ],
    "views/compression.py": [
        {"cmp_method": "qsgd", "cmp_bits": 8, "cmp_view": "Per model", "cmp_model": "alexnet"},
        {"cmp_method": "randomk", "cmp_ratio": 0.1, "cmp_view": "Residual"},
        {"cmp_method": "terngrad", "cmp_clip": True},
    ],
    "views/large_batches.py": [
        {"lb_sched_batch": ANOTHER},
        {"lb_view": "LARS and LAMB", "lb_layers_opt": ANOTHER},
    ],
    "views/schedule.py": [
        {
            "sched_model": "alexnet",
            "sched_workers": 1,
            "sched_link": "25Gbps",
            "sched_policies": ["fifo", "wfbp"],
            "sched_slice": 1_000_000,
            "sched_credit": 32,
            "sched_bucket": 50,
            "sched_view": "Slice, credit and bucket size",
            "sched_sweep": "bucket_mb",
        },
    ],
    "views/memory.py": [
        {
            "mem_model": "GPT-3 (175B)",
            "mem_ranks": 512,
            "mem_device": 80,
            "mem_tp": 8,
            "mem_optimizer": "sgd",
            "mem_precision": "fp32",
            "mem_recompute": "full",
            "mem_view": "ZeRO Figure 1",
        },
        {"mem_model": "free size", "mem_params_b": 1.5, "mem_view": "Communication per step", "mem_step_layout": "DDP"},
    ],
    "views/pipelines.py": [
        {"pipe_schedule": "interleaved", "pipe_stages": 2, "pipe_microbatches": 6, "pipe_chunks": 3},
        {
            "pipe_view": "All-to-all and experts",
            "a2a_algorithm": "bruck",
            "a2a_ranks": 4,
            "a2a_block": 256,
            "a2a_link": "tcp-10gbe",
            "moe_ep": 2,
            "moe_top_k": 2,
            "moe_capacity": 1.5,
        },
        {
            "pipe_view": "The planner",
            "plan_model": "1b",
            "plan_gpus": 32,
            "plan_batch": 512,
            "plan_gpu": "a100",
            "plan_device": 40,
            "plan_pick": 2,
        },
    ],
    "views/playground.py": [
        {"pg_starter": ANOTHER, "pg_ranks": 3, "pg_link": "rdma-edr", "pg_topology": ANOTHER, "pg_n": 16384},
    ],
    "views/performance.py": [
        {"perf_ranks": 8, "perf_size": 16 * 2**20, "perf_speedup": 2.0},
        {"perf_view": "Measure it here", "perf_bench_sizes": [2**20], "perf_bench_ranks": 4},
        {"perf_view": "Emulation scale", "perf_emulate_ranks": 16},
    ],
    "views/network_stack.py": [
        {"net_size": 1024},
        {"net_view": "Training and IO", "net_storage": "nfs", "net_loaders": 4, "net_prefetch": 8},
    ],
    "views/papers.py": [{"papers_claim": ANOTHER}],
    "views/taihulight.py": [
        {
            "thl_model": "resnet50",
            "thl_nodes": 16,
            "thl_layout": "scattered",
            "thl_topology": "flat",
            "thl_static": True,
            "thl_library": "mpich",
            "thl_ps": "ps-gather",
            "thl_view": "Timeline",
        },
    ],
}
# keys that stay out of the URL on purpose: a link should not start a measurement or a 20 s
# re-run (buttons, cmp_fresh); mem_tp is bound by url_key before its selectbox (memory.py)
UNBOUND = {"perf_run", "perf_emulate", "cmp_fresh", "mem_tp"}


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def open_with_url(page: str, params: dict, url: str | None = None) -> AppTest:
    """A fresh session opening ``page`` from a link with these query parameters."""
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    if url:
        at.context = {"url": url}
    if page != pages.PAGES[0].path:
        at.switch_page(page)
    return ok(at.run())


def another_option(at: AppTest, key: str):
    """An option of the widget ``key`` other than its value (a radio, selectbox or select_slider)."""
    widget = next(w for kind in ("radio", "selectbox", "select_slider") for w in at.get(kind) if w.key == key)
    value = widget.value
    return next(type(value)(o) for o in widget.options if type(value)(o) != value)


def bound_keys(source: str) -> set[str]:
    """The URL keys a source binds: url_key's first argument (an f-string's text up to its
    first field, then "*"), and the keys widgets.py's helpers bind for their caller."""
    keys = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            at = {"url_key": 0, "link_select": 0, "backend_select": 0, "size_slider": 1, "option_input": 1}.get(
                node.func.id
            )
            if at is None or len(node.args) <= at:
                continue
            arg = node.args[at]
            if isinstance(arg, ast.Constant):
                keys.add(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                keys.add(arg.values[0].value + "*")
    return keys


def test_every_bound_key_is_covered_and_every_widget_is_bound():
    """STATES sets every key the pages bind, and no page keys a widget outside the URL."""
    covered = {k for states in STATES.values() for state in states for k in state}
    for page in pages.PAGES:
        source = (APP_DIR / page.path).read_text()
        for key in bound_keys(source):
            assert any(k.startswith(key.rstrip("*")) for k in covered) if key.endswith("*") else key in covered, (
                page.path,
                key,
            )
        plain = {
            kw.value.value
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
            for kw in node.keywords
            if kw.arg == "key" and isinstance(kw.value, ast.Constant)
        }
        charts = {
            n.args[1].value
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "chart"
            and len(n.args) > 1
            and isinstance(n.args[1], ast.Constant)
        }
        assert plain - charts <= UNBOUND, (page.path, plain - charts - UNBOUND)


@pytest.mark.parametrize(
    "page, state",
    [(page, state) for page, states in STATES.items() for state in states],
    ids=lambda x: x if isinstance(x, str) else ",".join(x),
)
def test_every_widget_round_trips_through_the_url(page, state):
    """Set the widgets, take the URL the page wrote, open it in a new session: same widgets."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(page)
    if ANOTHER in state.values():  # open the widget's tab, then read its options
        for k, v in state.items():
            if v is not ANOTHER:
                at.session_state[k] = v
        ok(at.run())
    state = {k: another_option(at, k) if v is ANOTHER else v for k, v in state.items()} | SIDEBAR
    for k, v in state.items():
        at.session_state[k] = v
    ok(at.run())
    url = dict(at.query_params)
    assert set(state) <= set(url), set(state) - set(url)
    again = open_with_url(page, url)
    assert not again.warning or all("link" not in w.value for w in again.warning), [w.value for w in again.warning]
    assert {k: again.session_state[k] for k in state} == state
    assert dict(again.query_params) == url


# per page: a link with a bad value for each kind of widget, and good values that must stay
BAD = {
    "views/collectives.py": (
        {
            "presenter": "maybe",
            "figure_format": "jpeg",
            "coll_ranks": "many",
            "coll_link": "carrier-pigeon",
            "coll_size": "12345",
            "coll_view": "Nope",
        },
        {"coll_collective": "allgather", "coll_backend": "threads"},
    ),
    "views/performance.py": (
        {"perf_ranks": "4.5", "perf_speedup": "9", "perf_view": "Memory traffic!"},
        {"perf_size": str(16 * 2**20)},
    ),
    "views/memory.py": ({"mem_params_b": "-1", "mem_ranks": "3"}, {"mem_model": "free size", "mem_device": "80"}),
    "views/schedule.py": (
        {"sched_policies": '["fifo", "bogus"]', "sched_workers": "0"},
        {"sched_model": "alexnet", "sched_view": "Against bandwidth"},
    ),
}
ACCEPTED = {
    "presenter": "must be one of false, true",
    "coll_ranks": "must be an integer in 2..16",
    "perf_speedup": "must be a number in 1..4",
    "mem_params_b": "must be a number in 0.001..2000",
    "sched_policies": "must be a list of some of fifo, wfbp",
}


@pytest.mark.parametrize("page", BAD)
def test_a_bad_value_is_named_and_the_good_ones_stay(page):
    bad, good = BAD[page]
    at = open_with_url(page, bad | good)
    (warning,) = [w.value for w in at.warning if "link" in w.value]
    for k, v in bad.items():
        assert f"{k}={v}: {ACCEPTED.get(k, '')}" in warning, (k, warning)
        assert at.query_params[k] != v  # the widget's default took its place
    assert {k: at.query_params[k] for k in good} == good
    again = ok(at.run())  # the next run (any change) no longer repeats it
    assert not [w.value for w in again.warning if "link" in w.value]


def test_presenter_maybe_is_a_warning_not_a_traceback():
    at = open_with_url("views/home.py", {"presenter": "maybe"})
    assert [w.value for w in at.warning] == [
        "This link's values that cannot be used were dropped (those widgets show their defaults): "
        "presenter=maybe: must be one of false, true."
    ]
    assert at.toggle(key="presenter").value is False and at.query_params["presenter"] == "false"


def test_a_link_to_an_unknown_page_says_so():
    """Streamlit runs Home for /nonexistent (its browser code shows "Page not found" without
    the name); Home names it. A known page's or Home's own URL says nothing."""
    at = open_with_url("views/home.py", {}, "http://localhost:8501/nonexistent")
    assert "There is no page /nonexistent" in at.warning[0].value
    assert not open_with_url("views/home.py", {}, "http://localhost:8501/").warning
    assert not open_with_url("views/home.py", {}, "http://localhost:8501").warning


def unchecked_page():
    """A page binding keys without options or range (as a page written before the checks)."""
    import streamlit as st
    import urlstate

    notice = urlstate.start_url_run()
    try:
        st.slider("ranks", 2, 16, 8, key=urlstate.url_key("ranks"))
        st.selectbox("link", ["tcp", "rdma"], key=urlstate.url_key("link"))
    except Exception as exc:  # noqa: BLE001 - as streamlit_app.py does
        urlstate.reject_url_values(exc)
    finally:
        urlstate.save_url(notice)


@pytest.mark.parametrize(
    "params, named",
    [
        ({"ranks": "many"}, "ranks=many: its widget refused it"),
        ({"link": "pigeon"}, "link=pigeon: its widget does not offer it"),
    ],
)
def test_an_unchecked_key_still_falls_back_and_is_named(params, named):
    at = AppTest.from_function(unchecked_page)
    for k, v in params.items():
        at.query_params[k] = v
    ok(at.run())
    assert named in at.warning[0].value
    assert at.slider(key="ranks").value == 8 and at.selectbox(key="link").value == "tcp"


def test_option_input_draws_a_declared_option_in_its_range():
    """widgets.option_input: an Option's help, default and range make the widget (a slider
    where the range is bounded, a number input where not, a select of the page's values), and
    a page offering a value outside the range fails."""

    def page():
        import streamlit as st
        from widgets import option_input

        from dlsys.options import Option

        staleness = Option("staleness", "integer", 0, 100, "SSP bound s in clocks", default=2)
        st.session_state["s"] = option_input(staleness, "t_slider", high=10)
        st.session_state["n"] = option_input(
            Option("n", "number", 0, help="any", low_open=True, default=1.5), "t_num", low=0.5
        )
        st.session_state["v"] = option_input(
            Option("ratio", "number", 0, 1, "kept", low_open=True), "t_select", values=[0.1, 0.5], value=0.5
        )
        option_input(staleness, "t_bad", values=[1, 200])

    at = AppTest.from_function(page).run()
    assert at.slider(key="t_slider").help == "SSP bound s in clocks"
    assert (at.slider(key="t_slider").min, at.slider(key="t_slider").max, at.session_state["s"]) == (0, 10, 2)
    assert at.number_input(key="t_num").value == 1.5 and at.session_state["v"] == 0.5
    assert "staleness: the page offers 200" in at.exception[0].value
