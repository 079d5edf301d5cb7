"""The closed-form memory model against the papers' arithmetic, and ``dlsys memory``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlsys.cli import main
from dlsys.experiments.memory import MODEL_PRESETS, ZERO_CONFIG, fitting, page_layouts, step_record
from dlsys.learn.task import build_model
from dlsys.machine.memory import Layout, Transformer, activation_bytes, bytes_per_param, fsdp, zero_figure1
from dlsys.train.strategies import STRATEGIES
from dlsys.train.zero import units_of


def test_zero_figure1_per_device_memory_at_each_stage():
    """ZeRO Figure 1: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB for Psi = 7.5B, N_d = 64, K = 12."""
    gb = {stage: round(nbytes / 1e9, 1) for stage, nbytes in zero_figure1().items()}
    assert gb == {"stage 0": 120.0, "stage 1": 31.4, "stage 2": 16.6, "stage 3": 1.9}


def test_bytes_per_param_by_optimizer_and_precision():
    assert bytes_per_param("adam", "mixed") == (2, 2, 12)  # ZeRO's K = 12
    assert bytes_per_param("sgd", "mixed") == (2, 2, 8)
    assert bytes_per_param("sgd-plain", "fp32") == (4, 4, 0)
    assert bytes_per_param("adam", "fp32") == (4, 4, 8)


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_korthikanti_table2_rows(t):
    s, b, h, a = 2048, 4, 4096, 32
    shape, sbh = Transformer(3, h, a, s, b), s * b * h
    rows = {
        (False, "none"): 10 + 24 / t + 5 * a * s / (h * t),
        (True, "none"): 34 / t + 5 * a * s / (h * t),
        (False, "selective"): 10 + 24 / t,
        (True, "selective"): 34 / t,
    }
    for (sp, recompute), per_sbh in rows.items():
        assert activation_bytes(shape, t, sp, recompute) == pytest.approx(3 * sbh * per_sbh, rel=1e-12)
    assert activation_bytes(shape, t, recompute="full") == 3 * 2 * sbh


def test_tp_splits_the_model_states_and_zero_shards_over_the_data_parallel_copies():
    one = Layout(8_000, ranks=8, zero=1, tp=4, optimizer="sgd", precision="fp32").bytes()
    assert one["parameters"] == 4 * 8_000 / 4 and one["optimizer"] == 4 * 8_000 / 4 / 2


def test_fsdp_counts_the_gathered_unit_twice_with_prefetch():
    layout = fsdp(1_000_000, 4, unit_params=1000, prefetch=True)
    assert layout.bytes()["buffers"] == 1000 * (2 * 2 + 2)
    assert layout.bytes()["parameters"] == 2 * 1_000_000 / 4


@pytest.mark.parametrize(
    "bad, word",
    [
        (dict(zero=4), "zero"),
        (dict(tp=0), "tp"),
        (dict(ranks=0), "ranks"),
        (dict(params=0), "params"),
        (dict(ranks=6, tp=4), "tp=4"),
        (dict(optimizer="lion"), "optimizer"),
        (dict(unit_params=5), "zero=3"),
    ],
)
def test_bad_layouts_are_refused_naming_the_argument(bad, word):
    with pytest.raises(ValueError, match=word):
        Layout(**{"params": 10, "ranks": 2, **bad})


def test_cli_prints_bytes_by_kind(capsys):
    assert main(["memory", "--params", "7.5e9", "--ranks", "64", "--zero", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total_bytes"] == zero_figure1()["stage 2"]
    assert main(["memory", "--params", "1e6", "--ranks", "4"]) == 0
    text = capsys.readouterr().out
    assert "GB" in text and "GiB" in text and "total" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--zero", "4"], "--zero must be an integer in 0..3"),
        (["--tp", "0"], "--tp must be an integer in 1.."),
        (["--ranks", "0"], "--ranks must be an integer in 1.."),
        (["--params", "0"], "--params must be a number > 0"),
    ],
)
def test_cli_refuses_bad_input_with_the_accepted_range(argv, message, capsys):
    base = {"--params": "100", "--ranks": "2"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    assert main(["memory", *[x for kv in base.items() for x in kv]]) == 2
    assert message in capsys.readouterr().err


def test_tp_must_divide_the_heads():
    with pytest.raises(ValueError, match="tp must divide the heads"):
        Layout(100, ranks=8, tp=8, model=Transformer(2, 64, 4, 16, 1))


def test_cli_refuses_activation_options_without_a_transformer(capsys):
    assert main(["memory", "--params", "100", "--ranks", "2", "--recompute", "full"]) == 2
    assert "--recompute: not an option of dlsys memory without --transformer" in capsys.readouterr().err


def test_a_thousand_layouts_in_under_a_second():
    """benchmarks/memory_model.py, as docs/performance.md runs it."""
    out = subprocess.run(
        [sys.executable, "benchmarks/memory_model.py", "--json"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=True,
    )
    record = json.loads(out.stdout)
    assert record["layouts"] >= 1000 and record["wall_s"] < record["target_s"] == 1.0


# --- the app page's and lesson 14's rows (dlsys.experiments.memory.page_layouts) ---------------


def test_page_layouts_are_the_closed_forms_and_say_what_fits():
    params, shape = MODEL_PRESETS["GPT-3 6.7B"]
    rows = {row["layout"]: row for row in page_layouts(params, 64, shape, tp=8)}
    assert list(rows) == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "FSDP", "TP"]
    assert rows["ZeRO-2"]["bytes"] == Layout(params, 64, zero=2, model=shape).bytes()
    assert rows["TP"]["bytes"] == Layout(params, 64, tp=8, model=shape, sequence_parallel=True).bytes()
    assert rows["FSDP"]["bytes"]["buffers"] == (2 * 2 + 2) * (
        params // shape.layers
    )  # two units gathered, one's gradients
    assert rows["ZeRO-1"]["sent_bytes"] == rows["DDP"]["sent_bytes"] == 2 * 63 / 64 * 2 * params
    assert rows["ZeRO-3"]["sent_bytes"] == pytest.approx(1.5 * rows["DDP"]["sent_bytes"])
    assert fitting(list(rows.values()), 40 * 2**30) == ["ZeRO-3", "FSDP", "TP"]
    assert fitting(list(rows.values()), 1) == []


@pytest.mark.parametrize(
    "strategy, layout", [("zero1", "ZeRO-1"), ("zero2", "ZeRO-2"), ("zero3", "ZeRO-3"), ("fsdp-prefetch", "FSDP")]
)
def test_page_layouts_bytes_sent_equal_a_real_step(strategy, layout):
    """The closed form's bytes per step (fp32: w = g = 4) equal what rank 0 sent in step 1
    of the digits MLP, Psi padded to a multiple of the ranks per unit."""
    fixed = STRATEGIES[strategy].fixed
    units = units_of(build_model(ZERO_CONFIG), 4, None if fixed["stage"] == 1 else fixed.get("unit_layers", 1))
    padded = sum(u.shard for u in units) * 4
    row = next(r for r in page_layouts(padded, 4, precision="fp32", optimizer="sgd") if r["layout"] == layout)
    assert step_record(strategy, 4)["step_sent_bytes"] == row["sent_bytes"]


def test_page_layouts_refuse_a_tp_degree_that_does_not_divide_the_ranks():
    with pytest.raises(ValueError, match=r"tp must divide ranks=8: one of \[1, 2, 4, 8\], got 3"):
        page_layouts(10**9, 8, tp=3)
