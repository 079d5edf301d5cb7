"""Pipeline schedules (dlsys.train.pipeline): every schedule's measured bubble equals its
closed form on a free link, its weights equal single-rank training bit for bit, its peak
activations equal its in-flight count times one micro-batch's, and bad input is refused."""

import math

import numpy as np
import pytest

from dlsys.machine.net import LinkModel
from dlsys.train.pipeline import SCHEDULES, PipelineConfig, check_schedule, gather_params, run, single_rank_run

FREE = LinkModel("free", 0.0, math.inf)  # zero latency, infinite bandwidth: the bubble is the schedule's alone
CASES = [
    ("gpipe", 4, 6, 1),
    ("1f1b", 4, 8, 1),
    ("interleaved", 4, 8, 2),
    ("interleaved", 2, 4, 3),
    ("zb-h1", 4, 6, 1),
    ("zb-h1", 3, 3, 1),
]


def in_flight_peak(actions, split: bool) -> int:
    held = peak = 0
    for kind, _, _ in actions:
        held += 1 if kind == "F" else -1 if kind == ("W" if split else "B") else 0
        peak = max(peak, held)
    return peak


@pytest.mark.parametrize("name", SCHEDULES)
def test_every_action_list_runs_each_micro_batch_once_and_holds_its_closed_form_peak(name):
    entry = SCHEDULES[name]
    for p in (2, 3, 4, 5):
        for m in (p, 2 * p, 3 * p):
            for v in (1, 2, 3) if entry.chunked else (1,):
                for s in range(p):
                    actions = entry.actions(s, p, m, v)
                    kinds = "FBW" if entry.split_backward else "FB"
                    assert sorted(actions) == sorted((k, i, c) for k in kinds for i in range(m) for c in range(v))
                    assert in_flight_peak(actions, entry.split_backward) == entry.in_flight(s, p, m, v), (
                        name,
                        s,
                        p,
                        m,
                        v,
                    )


@pytest.mark.parametrize("name, p, m, v", CASES)
def test_measured_bubble_equals_the_formula_on_a_free_link(name, p, m, v):
    result = run(PipelineConfig(name, p, m, v, layers=p * v), link=FREE)
    step_s = result.virtual_time_s
    for s in range(p):
        busy_s = sum(
            span.end_s - span.start_s for span in result.trace.spans if span.rank == s and span.kind == "compute"
        )
        assert (step_s - busy_s) / step_s == pytest.approx(SCHEDULES[name].bubble(p, m, v), rel=1e-12, abs=1e-15)


def test_zero_bubble_h1_is_a_third_of_1f1b_in_idle_time():
    p, m = 4, 8
    idle = {
        name: SCHEDULES[name].bubble(p, m, 1) * (3 * m + p - 1 if name == "zb-h1" else 3 * (m + p - 1))
        for name in ("1f1b", "zb-h1")
    }
    assert idle["zb-h1"] == pytest.approx(idle["1f1b"] / 3)


@pytest.mark.parametrize("name, p, m, v", CASES)
def test_weights_equal_single_rank_training_bit_for_bit(name, p, m, v):
    config = PipelineConfig(name, p, m, v, layers=p * v, steps=2)
    result, reference = run(config), single_rank_run(config)
    np.testing.assert_array_equal(gather_params(result.values, config), reference["params"])
    assert result.values[-1]["losses"] == reference["losses"]


@pytest.mark.parametrize("name, p, m, v", CASES)
def test_peak_activations_are_the_in_flight_count_times_one_micro_batch(name, p, m, v):
    config = PipelineConfig(name, p, m, v, layers=p * v)
    result = run(config)
    one = run(PipelineConfig("gpipe", p, 1, 1, layers=p * v)).values if v == 1 else None
    for s, value in enumerate(result.values):
        if v == 1:
            unit = one[s]["activation_peak_nbytes"]
        elif 0 < s < p - 1:  # the middle stages' chunks hold transformer layers alone: equal bytes
            unit = value["activation_peak_nbytes"] // SCHEDULES[name].in_flight(s, p, m, v)
        else:
            continue
        assert value["activation_peak_nbytes"] == SCHEDULES[name].in_flight(s, p, m, v) * unit


def test_threads_and_processes_give_the_same_trace():
    config = PipelineConfig("zb-h1", 3, 4, 1, layers=3)
    threads, processes = run(config, "threads"), run(config, "processes")
    assert threads.trace == processes.trace
    assert [v["actions"] for v in threads.values] == [v["actions"] for v in processes.values]


@pytest.mark.parametrize(
    "args, words",
    [
        (("1f1b", 5, 8, 1, 4), "stages (pipeline degree) x chunks must be in 2..4"),
        (("1f1b", 4, 3, 1, 8), "micro_batches must be >= 4 for 1f1b"),
        (("zb-h1", 4, 3, 1, 8), "micro_batches must be >= 4 for zb-h1"),
        (("interleaved", 4, 6, 2, 8), "micro_batches must be a multiple of stages (4)"),
        (("interleaved", 4, 8, 0, 8), "chunks (v) must be >= 1"),
        (("1f1b", 4, 8, 2, 8), "chunks (v) must be 1 for 1f1b"),
        (("interleaved", 4, 8, 3, 8), "stages (pipeline degree) x chunks must be in 2..8"),
        (("pipedream", 2, 4, 1, 4), "schedule must be one of gpipe, 1f1b, interleaved, zb-h1"),
        (("gpipe", 2, 0, 1, 4), "micro_batches must be >= 1"),
    ],
)
def test_bad_input_is_refused_by_name_before_any_rank_starts(args, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_schedule(*args)
    name, p, m, v, layers = args
    with pytest.raises(ValueError):
        run(PipelineConfig(name, p, m, v, layers=layers), timeout_s=0.001)


@pytest.mark.parametrize("name, p, m, v", [("1f1b", 4, 8, 1), ("interleaved", 4, 8, 2), ("interleaved", 2, 4, 3)])
def test_idle_over_busy_is_narayanans_p_minus_1_over_v_m(name, p, m, v):
    """Narayanan et al. 2021, section 2.2: the bubble time fraction, idle over ideal (busy)
    time, is (p - 1)/m for 1F1B and (p - 1)/(v m) interleaved; measured on a free link."""
    from dlsys.experiments.pipeline import pipeline_schedule

    for row in pipeline_schedule(name, p, m, v, layers=p * v)["bubble"]:
        assert row["relative"] == pytest.approx((p - 1) / (v * m), rel=1e-12)
