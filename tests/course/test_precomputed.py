"""dlsys.course.precomputed: the committed results of the app's default views are
what a rerun gives, a call finds them whatever the spelling of its arguments, and the
progress bar's estimate of the time left follows the points measured."""

import functools

import pytest

from dlsys.course import precomputed as P


def test_the_store_holds_every_default_call_under_the_code_version():
    store = P._store()
    assert store, f"{P.PATH.name} is missing or of another VERSION: run python -m dlsys.course.precomputed"
    assert set(store) == {P.key_of(name, kwargs) for name, kwargs in P.DEFAULTS}


# the quick points, compared in every run (one of P3's, one of the large-batch study's, which
# other code may change, every pipeline schedule at its fewest micro-batches, the experts'
# load and all-to-all, the training page's epoch of pushes and pulls); the whole store under -m slow (minutes)
QUICK = [
    (name, kwargs)
    for name, kwargs in P.DEFAULTS
    if (name == "schedule:option_sweep" and kwargs["option"] == "bucket_mb" and kwargs["values"][0] >= 50)
    or (name == "costs:emulated_allreduce_costs" and kwargs["ranks"] <= 4)
    or (name == "schedule:option_sweep" and kwargs["values"] == [max(P.schedule.SWEEPS["slice_params"])])
    or (name == "taihulight:sweep" and kwargs["nodes"][0] <= 4 and kwargs["model"] == "alexnet")
    or (name == "reproduce:run_claims" and kwargs["names"] in (["linear-scaling"], ["terngrad-bytes"]))
    or (name == "pipeline:pipeline_schedule" and kwargs["micro_batches"] == kwargs["stages"])
    or name in ("experts:expert_load", "experts:app_alltoall")
    or (name == "training:app_record" and kwargs["epochs"] == 1)
]


def test_stored_results_are_what_a_rerun_gives_quick_points():
    assert len(QUICK) >= 6
    assert P.stale(QUICK) == []


def _other_setting(name: str, kwargs: dict) -> bool:
    """A stored call for a setting a teacher picks beside the default view: the TaihuLight
    sweeps past the default node count, the scheduling page's other models and worker counts."""
    if name.startswith("taihulight:") and "nodes" in kwargs and isinstance(kwargs["nodes"], list):
        return max(kwargs["nodes"]) > P.taihulight.DEFAULT_LARGEST_NODES
    return name.startswith("schedule:") and (kwargs["model"], kwargs["workers"]) != (
        P._SCHEDULE["model"],
        P._SCHEDULE["workers"],
    )


OTHER = [(name, kwargs) for name, kwargs in P.DEFAULTS if _other_setting(name, kwargs)]
# one of each kind of the other settings, at its smallest (the generator's --check reruns them all: many minutes)
OTHER_SAMPLE = [
    (name, kwargs)
    for name, kwargs in OTHER
    if (name == "taihulight:sweep" and kwargs["nodes"] == [128] and kwargs["model"] == "alexnet")
    or (
        name == "schedule:bandwidth_sweep"
        and kwargs["model"] == "alexnet"
        and kwargs["workers"] == 8
        and kwargs["links"] == ["10Gbps"]
        and kwargs["policies"] == ["p3"]
    )
]


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 4 minutes on two cores at load 5
def test_stored_results_are_what_a_rerun_gives():
    assert len(OTHER_SAMPLE) == 3 and len(OTHER) > 100
    assert P.stale([call for call in P.DEFAULTS if call not in OTHER] + OTHER_SAMPLE) == []


def test_a_call_finds_its_result_whatever_the_spelling_and_runs_nothing():
    name, kwargs = next((n, k) for n, k in P.DEFAULTS if n == "schedule:bandwidth_sweep")
    function = P.function_of(name)

    @functools.wraps(function)
    def not_run(**_):
        raise AssertionError("a stored call must not run")

    respelled = kwargs | {
        "links": tuple(kwargs["links"]),
        "options": {p: {k: float(v) for k, v in o.items()} for p, o in kwargs["options"].items()},
    }
    assert P.call(not_run, **respelled) == P.stored(function, **kwargs) is not None
    assert P.stored(function, **(kwargs | {"workers": max(P.schedule.WORKER_COUNTS) + 1})) is None


def test_a_call_not_stored_runs_and_gives_the_stores_form():
    rows = P.call(
        P.function_of("schedule:option_sweep"),
        option="bucket_mb",
        values=(75.0,),
        model="resnet50",
        workers=2,
        link="10Gbps",
        options={},
    )
    assert isinstance(rows, list) and rows[0]["value"] == 75.0 and "result" not in rows[0]


def test_plain_drops_wall_clock_fields_and_tuples():
    assert P.plain({"a": (1, 2), "wall_time_s": 3.0, "b": [{"wall_time_s": 1, "c": 2.5}]}) == {
        "a": [1, 2],
        "b": [{"c": 2.5}],
    }


def test_time_left_follows_the_measured_growth():
    assert P.time_left_s([], [8]) is None
    assert P.time_left_s([(4, 2.0)], [8, 16]) == pytest.approx(4.0 + 8.0)  # one size: linear
    cubic = [(n, 0.5 * n**3) for n in (2, 4, 8)]
    assert P.time_left_s(cubic, [16]) == pytest.approx(0.5 * 16**3)


def test_a_training_record_keeps_its_trace_and_histogram_through_the_store():
    from dlsys.experiments import train
    from dlsys.experiments.training import app_record, with_trace
    from dlsys.train import TrainConfig

    kwargs = dict(strategy="ps-ssp", epochs=1, link="rdma-edr", workers=2, straggler_factor=3.0, staleness=1)
    stored = with_trace(P.plain(app_record(**kwargs)))
    record = train("ps-ssp", TrainConfig(epochs=1), 2, link="rdma-edr", straggler=(1, 3.0), staleness=1)
    assert stored["trace"] == record["result"].trace and len(stored["trace"].messages) > 0
    assert stored["staleness_histogram"] == record["staleness_histogram"] and len(record["staleness_histogram"]) > 1
    assert stored["losses"] == record["losses"] and stored["test_accuracy"] == record["test_accuracy"]


def test_the_memory_pages_step_is_the_runs_trace_within_the_step():
    from dlsys.experiments.memory import app_step, step_record
    from dlsys.experiments.records import with_trace

    step = with_trace(P.plain(app_step("zero2", 2)))
    record = step_record("zero2", 2)
    start_s, stop_s = record["step_s"]
    trace = record["result"].trace
    assert step["trace"].spans == [s for s in trace.spans if start_s <= s.start_s < stop_s] != []
    assert step["trace"].messages == [m for m in trace.messages if start_s <= m.depart_s < stop_s] != []
    assert len(step["trace"].messages) < len(trace.messages) and step["step_sent_bytes"] == record["step_sent_bytes"]
