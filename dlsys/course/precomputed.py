"""What the app's default views show, computed once and committed (issue 28: every page
change at its default settings under 2 s on a 2-core machine).

``DEFAULTS`` lists experiment calls, each a function of dlsys.experiments and its keyword
arguments, that a page's default view needs and that take seconds to minutes to run
(scheduling sweeps, the TaihuLight sweeps, 512-rank link loads), or whose small runs wait on
a loaded machine (the training page's). Their results (JSON: rows of numbers and names, a
trace as ``Trace.to_rows``) are stored in ``precomputed.json`` beside this file, under
``VERSION``. ``call(function, **kwargs)`` returns the stored result of exactly that call,
else runs it: a page at other settings computes as before.

    python -m dlsys.course.precomputed            # add the calls not stored yet
    python -m dlsys.course.precomputed --fresh    # rerun them all (minutes)
    python -m dlsys.course.precomputed --check    # which stored results a rerun no longer gives

The runs are deterministic (virtual time), so the store is a pure cache: ``stale()``
reruns every call and compares, and tests/course/test_precomputed.py does that (the slow calls
under ``-m slow``). Fields that measure this machine's wall clock (``WALL_CLOCK_KEYS``)
are not stored: a stored run has no wall time of its own. Bump VERSION when a change
of code changes a result, and rewrite the file.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from ..experiments import schedule, taihulight
from ..learn.optim import scale_lr
from ..machine.profiles import PROFILES
from ..outputs import write_atomic
from ..schedule import default_of
from ..train.pipeline import SCHEDULES
from . import reproduce

VERSION = 1
PATH = Path(__file__).with_name("precomputed.json")
WALL_CLOCK_KEYS = ("wall_time_s",)

# The app's default settings (app/views/*.py), as app/cached.py calls the experiments: one call per point
# of a sweep (a page assembles its sweeps point by point, so a slider that widens a sweep
# reuses the points it had). tests/app/test_app.py checks that each page's default view finds
# its calls here.
_SCHEDULE = dict(model="resnet50", workers=2)
_SCHEDULE_OPTIONS = {
    "p3": {"slice_params": default_of("slice_params")},
    "bytescheduler": {"credit_bytes": default_of("credit_bytes")},
    "fusion": {"bucket_mb": default_of("bucket_mb")},
}
_THL = dict(contiguous=True, topology="taihulight", sharing=True)
_THL_LINK_NODES = taihulight.SWEEP_NODES[-1]
# the training page's runs (app/views/training.py): BSP, SSP and ASP with a straggler; one
# epoch of pushes and pulls; data parallel against model parallel, local SGD and a larger batch
_TRAINING = dict(
    link="rdma-edr", workers=4, straggler_factor=1.0, batch_size=32, lr=0.1
)  # as app/cached.py spells them
_TRAINING_RUNS = [
    ("ps-bsp", 3, dict(straggler_factor=4.0)),
    ("ps-ssp", 3, dict(straggler_factor=4.0, staleness=2)),
    ("ps-asp", 3, dict(straggler_factor=4.0)),
    ("ps-bsp", 1, dict(servers=1)),
    ("allreduce", 3, {}),
    ("model-parallel", 3, dict(micro_batches=4)),
    ("local-sgd", 3, dict(period=4)),
    ("allreduce", 3, dict(batch_size=128, lr=scale_lr(0.1, 128, 32, "linear"))),
]
# real buffers of all ranks together in the app's runs (app/cached.py's MAX_MEMORY_BYTES)
APP_MEMORY_BYTES = 16 * 2**20


def _taihulight_points() -> list[tuple[str, dict]]:
    """The PS-vs-ring sweep's points at every node count of the page's slider (issue 28:
    512 nodes under 20 s; a 512-node point alone takes about a minute), and ring_vs_mpi up
    to each count from the default up (one call per count: its sizes are rounded for the
    largest node count)."""
    counts = taihulight.SWEEP_NODES
    return [
        *[
            ("taihulight:sweep", dict(model=model, design=design, nodes=[n], **_THL))
            for model in taihulight.MODELS
            for design in ("ps", "ring")
            for n in counts
        ],
        *[
            (
                "taihulight:ring_vs_mpi",
                dict(
                    nbytes=[taihulight.PAPER_MESSAGE_BYTES, taihulight.model_gradient_nbytes(taihulight.MODELS[0])],
                    nodes=[n for n in counts if n <= largest],
                    topology="taihulight",
                    library=taihulight.LIBRARY,
                    sharing=True,
                ),
            )
            for largest in counts
            if largest >= taihulight.DEFAULT_LARGEST_NODES
        ],
    ]


def _schedule_points(model: str, workers: int) -> list[tuple[str, dict]]:
    """The scheduling page's sweeps for ``model`` and ``workers`` at its other defaults
    (issue 28: its sweeps under 20 s; VGG-19's bandwidth sweep on 4 workers runs for half a
    minute, P3's thousands of slices an iteration), and its timeline at the default model
    and workers only (a timeline keeps every span: P3's on VGG-19 over 8 workers are MBs)."""
    at = dict(_SCHEDULE, model=model, workers=workers)
    timeline = (model, workers) == (_SCHEDULE["model"], _SCHEDULE["workers"])
    return [
        *[
            ("schedule:compare_policies", dict(policies=[policy], **at, link="10Gbps", options=_SCHEDULE_OPTIONS))
            for policy in schedule.SHOWN_POLICIES
            if timeline
        ],
        *[
            ("schedule:bandwidth_sweep", dict(**at, links=[link], policies=[policy], options=_SCHEDULE_OPTIONS))
            for link in schedule.BANDWIDTHS
            for policy in schedule.SHOWN_POLICIES
        ],
        *[
            ("schedule:option_sweep", dict(option=option, values=[value], **at, link="10Gbps", options={}))
            for option, values in schedule.SWEEPS.items()
            for value in values
        ],
    ]


DEFAULTS: list[tuple[str, dict]] = [
    *[point for model in PROFILES for workers in schedule.WORKER_COUNTS for point in _schedule_points(model, workers)],
    *_taihulight_points(),
    *[
        (
            "taihulight:link_load_rows",
            dict(
                algorithm=algorithm,
                nodes=_THL_LINK_NODES,
                sharing=True,
                links=taihulight.boundary_links(_THL_LINK_NODES),
            ),
        )
        for algorithm in ("ring", "recursive_doubling")
    ],
    *[
        ("costs:emulated_allreduce_costs", dict(link="tcp-10gbe", ranks=ranks, max_memory_bytes=APP_MEMORY_BYTES))
        for ranks in (2, 4, 8, 16)
    ],
    (
        "ps_vs_ring:ps_vs_ring_scaling",
        dict(workers=[2, 4, 8, 16, 32], size=64 * 2**20, link="tcp-10gbe", max_memory_bytes=APP_MEMORY_BYTES),
    ),
    ("compression:iteration_split", dict(method="topk", options={"ratio": 0.01}, workers=4)),
    *[("reproduce:run_claims", dict(names=[name], quick=True)) for name in reproduce.CLAIMS],
    *[
        ("pipeline:pipeline_schedule", dict(schedule=name, stages=4, micro_batches=m, chunks=2 if s.chunked else 1))
        for name, s in SCHEDULES.items()
        for m in (4, 8, 12, 16)
    ],
    ("experts:alltoall_costs", dict(ranks=16, link="rdma-edr")),
    ("experts:expert_load", dict(ep=4, experts=8)),
    (
        "experts:app_alltoall",
        dict(algorithm="pairwise", ranks=5, block_nbytes=2**12, link="rdma-edr", max_memory_bytes=APP_MEMORY_BYTES),
    ),
    *[
        ("training:app_record", dict(strategy=strategy, epochs=epochs, **(_TRAINING | options)))
        for strategy, epochs, options in _TRAINING_RUNS
    ],
    ("memory:zero_memory_rows", dict(ranks=4)),
    ("memory:app_step", dict(strategy="zero3", ranks=4)),
]


def time_left_s(done: list[tuple[float, float]], left: list[float]) -> float | None:
    """The seconds the points of sizes ``left`` will take, from the (size, seconds) of the
    points measured so far in this run: seconds = a size^b fitted through them (least
    squares in logs; b = 1 with one size), None before any point is measured. A sweep
    whose points grow with the nodes (the TaihuLight's) thus extrapolates its own growth."""
    measured = [(size, seconds) for size, seconds in done if size > 0 and seconds > 0]
    if not measured:
        return None
    xs = [math.log(size) for size, _ in measured]
    ys = [math.log(seconds) for _, seconds in measured]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 1.0
    return sum(math.exp(mean_y + b * (math.log(size) - mean_x)) for size in left)


def name_of(function: Callable) -> str:
    """``module:function``, the module's name within dlsys.experiments or dlsys.course (the
    store's and DEFAULTS' names)."""
    return f"{function.__module__.rsplit('.', 1)[-1]}:{function.__qualname__}"


def function_of(name: str) -> Callable:
    module, function = name.split(":")
    package = __package__ if module == reproduce.__name__.rsplit(".", 1)[-1] else "dlsys.experiments"
    return getattr(importlib.import_module(f"{package}.{module}"), function)


def _same_number(value):
    """Whole floats as ints, in lists and dicts: 16e6 bytes and 16_000_000 are one call."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _same_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same_number(v) for v in value]
    return value


def key_of(name: str, kwargs: dict) -> str:
    """One string per call: tuples and lists alike, keys sorted, 25.0 and 25 alike."""
    return json.dumps([name, _same_number(plain(kwargs))], sort_keys=True)


def plain(value):
    """``value`` as the store gives it back (JSON: tuples become lists), without WALL_CLOCK_KEYS."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in WALL_CLOCK_KEYS}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return json.loads(json.dumps(value))


@cache
def _store(path: Path = PATH) -> dict:
    if not path.is_file():
        return {}
    record = json.loads(path.read_text())
    return record["results"] if record.get("version") == VERSION else {}


def stored(function: Callable, **kwargs):
    """The stored result of ``function(**kwargs)``, or None."""
    found = _store().get(key_of(name_of(function), kwargs))
    return None if found is None else json.loads(json.dumps(found))  # a copy: callers may change it


def call(function: Callable, **kwargs):
    """``function(**kwargs)``: the stored result if the call is one of DEFAULTS, else a run
    (its result in the same form, ``plain``)."""
    found = stored(function, **kwargs)
    return plain(function(**kwargs)) if found is None else found


def call_by_name(name: str, kwargs: dict):
    """``call`` of the function DEFAULTS names ``name`` (``module:function``)."""
    return call(function_of(name), **kwargs)


def compute(calls: list[tuple[str, dict]] = DEFAULTS) -> dict:
    """Each of ``calls`` (name, kwargs) run now: key -> result."""
    return {key_of(name, kwargs): plain(function_of(name)(**kwargs)) for name, kwargs in calls}


def stale(calls: list[tuple[str, dict]] = DEFAULTS) -> list[str]:
    """The keys of ``calls`` whose stored result a rerun no longer gives (or that are missing)."""
    store = _store()
    return [key for key, result in compute(calls).items() if store.get(key) != result]


def write(fresh: bool = False, path: Path = PATH) -> None:
    """Store every call of DEFAULTS: only those not stored yet, or (``fresh``) all again."""
    kept = {} if fresh else _store(path)
    missing = [(name, kwargs) for name, kwargs in DEFAULTS if key_of(name, kwargs) not in kept]
    results = kept | compute(missing)
    wanted = {key_of(name, kwargs) for name, kwargs in DEFAULTS}
    write_atomic(
        path,
        json.dumps(
            {"version": VERSION, "results": {k: v for k, v in results.items() if k in wanted}}, separators=(",", ":")
        )
        + "\n",
    )
    _store.cache_clear()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="rerun every call and name the stale ones")
    parser.add_argument("--fresh", action="store_true", help="rerun every call (default: only those not stored)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.check:
        keys = stale()
        print("\n".join(keys) if keys else f"{PATH.name}: every stored result is what a rerun gives")
        return 1 if keys else 0
    write(args.fresh)
    print(f"rewrote {PATH} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
