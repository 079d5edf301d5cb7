"""DP x TP x PP (dlsys.train.grid3d): weights and losses equal single-rank training for every
unsplit schedule, the same trace on every backend, each stage's measured memory against the
planner's closed form for the layout, and bad input refused by name before any rank starts."""

import os

import make_golden  # noqa: E402
import numpy as np
import pytest

from dlsys.comm import Grid
from dlsys.comm.backends.mpi import mpi_unavailable
from dlsys.machine.memory import activation_bytes
from dlsys.planner import Model, Plan, memory
from dlsys.train import grid3d
from dlsys.train.grid3d import GridConfig
from dlsys.train.pipeline import SCHEDULES, single_rank_run

TOL = 1e-13  # float64: TP's partial sums and DP's ring add in another order than one rank
CASES = [
    dict(dp=2, tp=2, pp=2, schedule="1f1b"),
    dict(dp=2, tp=2, pp=2, schedule="gpipe", micro_batches=3),
    dict(dp=1, tp=4, pp=2, schedule="interleaved", chunks=2, micro_batches=4),
    dict(dp=3, tp=1, pp=4, schedule="1f1b", micro_batches=5),
    dict(dp=2, tp=2, pp=2, steps=2),
]


def ids(case):
    return "-".join(f"{k}{v}" for k, v in case.items())


def losses(values, config):
    """Each step's loss: the last stage's share from every data-parallel copy (TP index 0)."""
    last = [v for v in values if v["stage"] == config.pp - 1 and v["coords"][1] == 0]
    return [sum(v["losses"][k] for v in last) for k in range(config.steps)]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_weights_and_losses_equal_single_rank_training(case):
    config = GridConfig(**case)
    result, reference = grid3d.run(config), single_rank_run(config.reference())
    np.testing.assert_allclose(grid3d.gather_params(result.values, config), reference["params"], rtol=0, atol=TOL)
    np.testing.assert_allclose(losses(result.values, config), reference["losses"], rtol=0, atol=TOL)
    grid = Grid(config.dp, config.tp, config.pp)
    for rank, value in enumerate(result.values):  # every data-parallel copy holds the same weights
        twin = result.values[grid.rank_of(0, grid.coords(rank)[1], grid.stage(rank))]
        assert all(np.array_equal(value["params"][k], twin["params"][k]) for k in value["params"])


def test_every_rank_runs_its_stages_schedule():
    config = GridConfig(dp=2, tp=2, pp=2, micro_batches=4)
    values = grid3d.run(config).values
    for value in values:
        want = SCHEDULES["1f1b"].actions(value["stage"], config.pp, config.micro_batches, 1)
        assert [(a["action"], a["micro_batch"], a["chunk"]) for a in value["actions"]] == list(want)


@pytest.mark.parametrize("backend", ["processes", "mpi"])
def test_trace_identical_on_every_backend(backend):
    if backend == "mpi" and mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    config = GridConfig(dp=1, tp=2, pp=2)
    on_threads, other = grid3d.run(config, "threads"), grid3d.run(config, backend)
    assert make_golden.trace_record(other) == make_golden.trace_record(on_threads)
    assert [make_golden.digest(v["params"]) for v in other.values] == [
        make_golden.digest(v["params"]) for v in on_threads.values
    ]


def planner_model(config: GridConfig) -> Model:
    """The small transformer as the planner's Model: kv_heads = heads, and a SwiGLU width of
    2/3 of d_ff (its three matrices hold as much as GELU's two)."""
    d_ff = 4 * config.d_model
    assert 2 * d_ff % 3 == 0
    return Model(
        "small",
        layers=config.layers,
        hidden=config.d_model,
        heads=config.heads,
        kv_heads=config.heads,
        ffn=2 * d_ff // 3,
        vocab=config.vocab,
        seq_len=config.seq_len,
    )


@pytest.mark.parametrize("dp, tp, pp", [(2, 2, 2), (1, 4, 2), (2, 1, 4), (1, 2, 4)])
def test_stage_zero_memory_is_the_planners_for_the_layout(dp, tp, pp):
    """1F1B on stage 0 holds min(pp, m) micro-batches (the planner's count, Korthikanti
    4.2.3): the measured peak of activations is the planner's bytes (Korthikanti's tensors,
    no dropout, no sequence parallelism, 4-byte elements) plus, per micro-batch, what
    Korthikanti leaves out: the layer norms' 1/std (2 s b a layer) and the embedding's token
    ids (s b int64s). Parameters: the planner's matrices (layer_params less its 2h norms) over tp are
    the split matrices a rank holds, byte for byte; what the planner does not split or count
    (biases, norms, positions; the embedding replicated, not vocabulary-split) is the rest."""
    config = GridConfig(dp=dp, tp=tp, pp=pp, micro_batches=6, d_model=12, dtype="float32")
    m, b, s, h = config.micro_batches, config.micro_batch_size, config.seq_len, config.d_model
    plan = Plan(
        planner_model(config),
        dp * tp * pp,
        tp=tp,
        pp=pp,
        micro_batch=b,
        global_batch=dp * m * b,
        optimizer="sgd-plain",
        precision="fp32",
        sequence_parallel=False,
        dropout=False,
    )
    assert plan.microbatches == m and plan.dp == dp
    planned = memory(plan)
    layers = config.layers // pp
    assert planned["activations"] == min(pp, m) * activation_bytes(
        plan.layout().model, tp, element_nbytes=4, dropout=False
    )
    extra = layers * 2 * s * b * 4 + s * b * 8
    result = grid3d.run(config)
    matrices = plan.model.layer_params() - 2 * h
    for value in result.values:
        if value["stage"] != 0:
            continue
        measured = value["peak_by_kind"]
        assert measured["activations"] == planned["activations"] + min(pp, m) * extra
        split = sum(a.nbytes for k, a in value["params"].items() if value["how"][k] and a.ndim == 2)
        assert split == 4 * layers * matrices // tp
        assert planned["parameters"] == 4 * (layers * plan.model.layer_params() + config.vocab * h) / tp
        assert measured["gradients"] == measured["parameters"] > planned["parameters"]
        assert planned["optimizer"] == 0 and planned["gradients"] == planned["parameters"]


@pytest.mark.parametrize(
    "case, words",
    [
        (dict(pp=5, layers=4), r"stages \(pipeline degree\) x chunks must be in 2..4"),
        (dict(pp=4, layers=8, micro_batches=3), r"micro_batches must be >= 4 for 1f1b on 4 stages, got 3"),
        (dict(schedule="zb-h1"), r"schedule must be one of gpipe, 1f1b, interleaved for a DP x TP x PP run"),
        (dict(schedule="interleaved", chunks=2, micro_batches=3), r"micro_batches must be a multiple of stages \(2\)"),
        (dict(tp=3), r"tp must divide world size = 12, heads = 4, d_model = 16, d_ff = 64: one of \[1, 2, 4\], got 3"),
        (dict(dp=0), r"dp must be an integer >= 1, got 0"),
        (dict(dtype="float16"), "dtype must be float32 or float64"),
    ],
)
def test_bad_input_refused_by_name_before_any_rank_starts(case, words, monkeypatch):
    monkeypatch.setattr(grid3d, "grid_program", None)  # a rank starting would fail otherwise
    with pytest.raises(ValueError, match=words):
        grid3d.run(GridConfig(**case))


def test_world_size_not_the_product_refused(monkeypatch):
    monkeypatch.setattr(grid3d, "grid_program", None)
    with pytest.raises(ValueError, match=r"world_size must be dp x tp x pp = 2 x 2 x 2 = 8, got 6"):
        grid3d.run(GridConfig(), world_size=6)


def test_the_benchmark_checks_its_weights_and_refuses_bad_input(capsys):
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchmarks", "grid_step.py")
    spec = importlib.util.spec_from_file_location("grid_step", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    record = bench.measure(dp=2, tp=2, pp=2, micro_batches=2, repeats=1)
    assert record["ranks"] == 8 and record["max_weight_error"] <= 1e-12 and record["messages"] > 0
    assert "8 ranks (dp 2 x tp 2 x pp 2, 1f1b" in bench.sentence(record)
    for argv, words in (
        (["--pp", "8", "--microbatches", "2"], "micro_batches must be >= 8"),
        (["--dp", "64"], "--dp x --tp x --pp must be 1..256 ranks, got 1024"),
    ):
        with pytest.raises(SystemExit):
            bench.main(argv)
        assert words in capsys.readouterr().err
