"""MemoryLedger: allocations by kind on the virtual clock, peaks, the Chrome counter
export; a data-parallel run's measured numpy bytes against the closed-form model."""

import json
from pathlib import Path

import numpy as np
import pytest

from dlsys.cli import main as cli_main
from dlsys.comm import launch
from dlsys.course import docs
from dlsys.experiments.memory import compare, ddp_memory, transformer_states
from dlsys.learn import nn
from dlsys.learn.task import TrainConfig, build_model
from dlsys.machine.ledger import MemoryLedger


def test_ledger_tracks_in_use_peak_and_timeline():
    clock = iter([0.0, 1.0, 2.0, 3.0])
    ledger = MemoryLedger(rank=2, now=lambda: next(clock))
    ledger.alloc("parameters", 100, "w")
    ledger.alloc("activations", 50, "a")
    ledger.free("a")
    ledger.alloc("activations", 20, "a")
    assert ledger.in_use()["activations"] == 20 and ledger.peak_bytes == 150
    assert ledger.peak_by_kind["activations"] == 50
    assert [t for t, _ in ledger.timeline()] == [0.0, 1.0, 2.0, 3.0]
    assert ledger.timeline()[1][1]["activations"] == 50
    counters = ledger.chrome_counters()
    assert {e["ph"] for e in counters} == {"C"} and counters[1]["ts"] == 1e6 and counters[0]["pid"] == 2


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda l: l.alloc("weights", 1, "x"), "kind must be one of"),
        (lambda l: l.alloc("parameters", -1, "x"), "nbytes must be"),
        (lambda l: l.free("nothing"), "is not allocated"),
    ],
)
def test_ledger_refuses_bad_calls(call, message):
    with pytest.raises(ValueError, match=message):
        call(MemoryLedger())


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_ddp_measured_bytes_equal_the_model(model):
    """Parameters, gradients and SGD's velocity: measured nbytes == 4 + 4 + 4 bytes a parameter."""
    run = ddp_memory(model, ranks=3, steps=2)
    params = build_model(TrainConfig(model=model)).params.size
    for ledger in run.values:
        rows = {row["kind"]: row for row in compare(ledger, params, 3)}
        for kind in ("parameters", "gradients", "optimizer"):
            assert rows[kind]["measured_bytes"] == rows[kind]["model_bytes"] == 4 * params
        assert rows["activations"]["measured_bytes"] > 0 and ledger.in_use()["activations"] == 0


def test_activation_bytes_of_the_mlp_are_the_linear_inputs_and_relu_masks():
    model = nn.mlp([64, 32, 10])
    model.forward(np.zeros((8, 64)))
    assert nn.activation_nbytes(model) == 8 * 64 * 4 + 8 * 32 * 1 + 8 * 32 * 4


def test_trace_exports_memory_counters_and_is_unchanged_without_them(tmp_path):
    run = ddp_memory("mlp", ranks=2, steps=1)
    plain = run.trace.to_chrome()
    with_memory = run.trace.to_chrome(memory=run.values)
    assert with_memory["traceEvents"][: len(plain["traceEvents"])] == plain["traceEvents"]
    counters = [e for e in with_memory["traceEvents"] if e["ph"] == "C"]
    assert {e["pid"] for e in counters} == {0, 1}
    assert len(counters) == sum(len(ledger.changes) for ledger in run.values)
    run.trace.save_chrome(tmp_path / "trace.json", memory=run.values)
    assert json.loads((tmp_path / "trace.json").read_text()) == with_memory


def test_ledgers_come_back_from_process_ranks():
    run = ddp_memory("mlp", ranks=2, steps=1, backend="processes")
    threads = ddp_memory("mlp", ranks=2, steps=1)
    assert [l.changes for l in run.values] == [l.changes for l in threads.values]


def _no_memory(comm):
    return comm.rank


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_launch_result_carries_the_ledgers_the_program_used(backend):
    run = ddp_memory("mlp", ranks=2, steps=1, backend=backend)
    assert [l.changes for l in run.memory] == [l.changes for l in run.values]
    assert [l.rank for l in run.memory] == [0, 1]
    assert launch(_no_memory, 2, backend).memory is None  # never asked for comm.memory: nothing made


def test_train_trace_has_the_memory_counters(tmp_path):
    path = tmp_path / "trace.json"
    assert cli_main(["train", "--strategy", "zero2", "--workers", "2", "--epochs", "1", "--trace", str(path)]) == 0
    counters = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "C"]
    assert {e["pid"] for e in counters} == {0, 1}
    assert set(counters[0]["args"]) == {"parameters", "gradients", "optimizer", "activations", "buffers"}


def test_memory_tables_in_docs_are_what_the_code_gives():
    page = Path(docs.DOCS_DIR) / "memory.md"
    text = page.read_text()
    assert {m["name"] for m in docs.BLOCK.finditer(text)} == {
        "memory.zero_figure1",
        "memory.korthikanti",
        "memory.measured",
    }
    assert docs.render(text, docs.Sources(claims=[])) == text, "run python -m dlsys.course.docs"


def test_transformer_with_adam_measures_4_4_8_bytes_a_parameter():
    params, ledger = transformer_states()
    rows = {row["kind"]: row for row in compare(ledger, params, 1, optimizer="adam")}
    assert rows["optimizer"]["measured_bytes"] == rows["optimizer"]["model_bytes"] == 8 * params
    assert rows["parameters"]["measured_bytes"] == rows["gradients"]["measured_bytes"] == 4 * params
