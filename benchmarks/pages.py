"""Every page of the app, timed (issue 28, "Fast or honest about it"; docs/performance.md,
"The app's pages"): the first render of each page at its defaults, each of its tabs, and a
typical widget change, every step a fresh Streamlit run of the page's script under
``streamlit.testing.v1.AppTest`` (what a browser waits for, less the drawing).

    .venv/bin/python benchmarks/pages.py                 # every page, a table
    .venv/bin/python benchmarks/pages.py schedule        # some pages only
    .venv/bin/python benchmarks/pages.py --json          # one JSON line
    .venv/bin/python benchmarks/pages.py --write-docs    # docs/performance.md's measured block

Each page starts from an empty ``st.cache_data`` (a fresh server): its first render pays
what a default view computes, and the steps after it see what the page's caches kept, as
in one session. The target: every step under ``TARGET_S``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import streamlit as st
import streamlit.logger
from streamlit.testing.v1 import AppTest

from dlsys.course.docs import benchmark_parser, markdown_table, write_measured

APP_DIR = Path(__file__).resolve().parents[1] / "app"
sys.path.insert(0, str(APP_DIR))
import pages  # noqa: E402

streamlit.logger.set_log_level("error")  # AppTest's bare-mode warnings, a dozen a run
TARGET_S = 2.0  # issue 28: every page change under 2 s at its default settings
TIMEOUT_S = 600


# page -> its steps after the first render, in order: ("tab", tabs key, index) opens a tab
# (each page's views in turn, then back to the first), (what, widget key, value) changes a widget
def _tabs(key: str, count: int) -> list[tuple]:
    return [("tab", key, i) for i in (*range(1, count), 0)]


STEPS = {
    "home": [],
    "collectives": [*_tabs("coll_view", 6), ("ranks 8 -> 12", "coll_ranks", 12)],
    "cost_model": [*_tabs("cost_view", 4), ("ranks 8 -> 16", "cost_ranks", 16)],
    "ps_vs_ring": [*_tabs("ps_view", 4), ("workers 8 -> 4", "ps_workers", 4)],
    "training": [*_tabs("train_view", 3), ("epochs 3 -> 2", "train_epochs", 2)],
    "compression": [*_tabs("cmp_view", 6), ("method topk -> qsgd", "cmp_method", "qsgd")],
    "large_batches": [*_tabs("lb_view", 4), ("batch 32", "lb_sched_batch", 32)],
    "schedule": [
        *_tabs("sched_view", 3),
        ("workers 2 -> 4", "sched_workers", 4),
        ("tab", "sched_view", 1),
        ("tab", "sched_view", 2),
        ("model resnet50 -> vgg19", "sched_model", "vgg19"),
        ("tab", "sched_view", 1),
    ],
    "memory": [*_tabs("mem_view", 4), ("ranks 64 -> 256", "mem_ranks", 256)],
    "pipelines": [*_tabs("pipe_view", 3), ("stages -> 8", "pipe_stages", 8)],
    "performance": [("tab", "perf_view", 2), ("tab", "perf_view", 0), ("ranks 2 -> 4", "perf_ranks", 4)],
    "network_stack": [*_tabs("net_view", 3), ("tab", "net_view", 2), ("loader workers 1 -> 2", "net_loaders", 2)],
    # (up to 512 nodes runs for many minutes here, under its progress bar: not a step)
    "taihulight": [*_tabs("thl_view", 6), ("tab", "thl_view", 1), ("nodes up to 64 -> 128", "thl_nodes", 128)],
    "papers": [("claim 2", "papers_claim", None)],
    "playground": [("ranks 4 -> 8", "pg_ranks", 8)],
}


def _resolve(at: AppTest, what: str, key: str, value) -> tuple[str, object]:
    """A tab's label from its index; None: the widget's second option."""
    if what == "tab":
        label = at.tabs[value].label
        return f"tab: {label}", label
    if value is None:
        return what, at.selectbox(key=key).options[1]
    return what, value


def timed_run(at: AppTest) -> float:
    """The run's seconds; math.inf if it did not end within TIMEOUT_S."""
    start = time.perf_counter()
    try:
        at.run(timeout=TIMEOUT_S)
    except RuntimeError as exc:
        if "timed out" not in str(exc):
            raise
        return math.inf
    seconds = time.perf_counter() - start
    if at.exception:
        raise RuntimeError("; ".join(e.value for e in at.exception))
    return seconds


def measure_page(page: pages.Page) -> list[dict]:
    """The page's first render and each of its STEPS, in seconds, from an empty cache."""
    st.cache_data.clear()
    at = AppTest.from_file(str(APP_DIR / "streamlit_app.py"), default_timeout=TIMEOUT_S)
    at.run(timeout=TIMEOUT_S)
    rows = []
    if page is not pages.PAGES[0]:
        at.switch_page(page.path)
    rows.append({"page": page.name, "step": "first render", "default": True, "seconds": timed_run(at)})
    default = True  # until a widget leaves its default: the steps the target is about
    for what, key, value in STEPS.get(page.name, []):
        if rows[-1]["seconds"] == math.inf:  # the session is stuck in the run that timed out
            break
        default = default and what == "tab"
        what, value = _resolve(at, what, key, value)
        at.session_state[key] = value
        rows.append({"page": page.name, "step": what, "default": default, "seconds": timed_run(at)})
    return rows


def shown(seconds: float) -> str:
    return f"> {TIMEOUT_S} s" if seconds == math.inf else f"{seconds:.2f} s"


def measure(names: list[str] | None = None) -> list[dict]:
    chosen = [p for p in pages.PAGES if not names or p.name in names]
    rows = []
    for page in chosen:
        for row in measure_page(page):
            if row["seconds"] == math.inf:
                print(
                    f"  {row['page']}: {row['step']} did not end within {TIMEOUT_S} s; the page's later steps "
                    "are not measured",
                    file=sys.stderr,
                )
            print(f"  {row['page']:<14} {row['step']:<32} {shown(row['seconds']):>9}", file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """docs/performance.md's measured block ``bench.pages``: per page, its first render, its
    slowest view at default settings (the target) and its slowest step at other settings
    (behind a progress bar where it runs points)."""
    by_page: dict[str, list[dict]] = {}
    for r in rows:
        by_page.setdefault(r["page"], []).append(r)
    out = []
    for name, steps in by_page.items():
        defaults = [r for r in steps if r["default"]]
        others = [r for r in steps if not r["default"]]
        slowest = max(defaults, key=lambda r: r["seconds"])
        other = max(others, key=lambda r: r["seconds"], default=None)
        out.append(
            [
                pages.BY_NAME[name].title,
                shown(steps[0]["seconds"]),
                f"{slowest['step']}: {shown(slowest['seconds'])}",
                "met" if slowest["seconds"] < TARGET_S else "missed",
                f"{other['step']}: {shown(other['seconds'])}" if other else "",
            ]
        )
    return markdown_table(
        [
            "page",
            "first render",
            "slowest view at default settings",
            f"< {TARGET_S:g} s",
            "slowest step at other settings",
        ],
        out,
    )


def main(argv=None) -> int:
    parser = benchmark_parser(__doc__)
    parser.add_argument("pages", nargs="*", choices=[[], *pages.BY_NAME], help="page names (default: every page)")
    args = parser.parse_args(argv)
    rows = measure(args.pages)
    print(json.dumps(rows) if args.json else table(rows))
    if args.write_docs:
        command = " ".join(["python benchmarks/pages.py", *(sys.argv[1:] if argv is None else argv)])
        write_measured({"bench.pages": table(rows)}, command, args.write_docs)
    return 0 if all(r["seconds"] < TARGET_S for r in rows if r["default"]) else 1


if __name__ == "__main__":
    sys.exit(main())
