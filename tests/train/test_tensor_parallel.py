"""Megatron tensor parallelism and sequence parallelism against the unsplit transformer:
outputs, gradients and weights; bytes held against the memory model; communication per
step against the closed forms; the same trace on threads and processes; bad layouts."""

import make_golden  # noqa: E402
import numpy as np
import pytest

from dlsys.comm.backends.mpi import mpi_unavailable
from dlsys.learn.transformer import MultiHeadAttention
from dlsys.machine.memory import Layout
from dlsys.train import tensor_parallel as tpm
from dlsys.train import tensor_parallel_costs as tpc
from dlsys.train.tensor_parallel import TPConfig

LAYOUTS = [
    dict(tp=1),
    dict(tp=2),
    dict(tp=4),
    dict(dp=2, tp=2),
    dict(tp=2, sequence_parallel=True),
    dict(tp=4, sequence_parallel=True),
    dict(dp=2, tp=2, sequence_parallel=True),
]
STEPS = 3


def ids(layout):
    return "-".join(f"{k}{v}" for k, v in layout.items()).replace("sequence_parallelTrue", "sp")


def compare(layout: dict, dtype: str, atol: float, rtol: float = 0.0):
    config = TPConfig(steps=STEPS, dtype=dtype, **layout)
    grid, ref, result = config.check(), tpm.unsplit_run(config), tpm.run(config, "threads")
    values = result.values
    # every rank of a DP replica's TP group computes the whole logits of that replica's rows
    for rank, value in enumerate(values):
        d, _ = grid.coords(rank)
        rows = slice(d * config.batch // grid.dp, (d + 1) * config.batch // grid.dp)
        np.testing.assert_allclose(value["logits"], ref["logits"][rows], rtol=rtol, atol=atol)
    loss = np.mean([values[grid.rank_of(d, 0)]["loss"] for d in range(grid.dp)])
    assert loss == pytest.approx(ref["loss"], rel=max(rtol, atol))
    grads, params = tpm.gather_tensors(values, grid, "grads"), tpm.gather_tensors(values, grid, "params")
    assert grads.keys() == ref["grads"].keys() == params.keys()
    for name in ref["grads"]:  # after the DP mean: the gradient of the whole batch's loss
        np.testing.assert_allclose(grads[name], ref["grads"][name], rtol=rtol, atol=atol, err_msg=name)
        np.testing.assert_allclose(params[name], ref["params"][name], rtol=rtol, atol=atol, err_msg=name)
    return values


@pytest.mark.parametrize("layout", LAYOUTS, ids=ids)
def test_equals_the_unsplit_model_float64(layout):
    compare(layout, "float64", atol=1e-12)


@pytest.mark.parametrize("layout", [dict(tp=4), dict(dp=2, tp=2, sequence_parallel=True)], ids=ids)
def test_equals_the_unsplit_model_float32(layout):
    """float32: the split sums add in another order. Measured worst over 3 steps: logits
    2.2e-6, gradients 6.7e-6, weights 6.7e-7 (absolute, on values of order 1: tens of
    float32 ulps); held to 2e-5 absolute + 1e-5 relative."""
    compare(layout, "float32", atol=2e-5, rtol=1e-5)


def test_dp_replicas_hold_the_same_weights():
    config = TPConfig(dp=2, tp=2, steps=2)
    values, grid = tpm.run(config, "threads").values, config.check()
    for t in range(grid.tp):
        a, b = (values[grid.rank_of(d, t)]["params"] for d in range(2))
        assert all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("layout", LAYOUTS, ids=ids)
def test_activation_bytes_match_korthikanti(layout):
    """The blocks keep exactly Korthikanti's TP (s b h (4 + 12/t) + a s^2 b / t elements)
    or TP+SP (all / t) count without dropout, plus the layer norms' 1/std."""
    config = TPConfig(**layout)
    for value in tpm.run(config, "threads").values:
        assert value["block_activation_nbytes"] == tpc.activation_model(config)
        assert value["activation_nbytes"] > value["block_activation_nbytes"]  # embedding, head: outside


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_parameter_bytes_against_layout(tp):
    """A rank holds 1/t of every split matrix and all of the replicated tensors (embedding,
    layer norms, row-parallel biases, output layer); Layout(tp) divides the whole model by t
    (it neglects the replicated ones), so it is short by (1 - 1/t) of their bytes."""
    config = TPConfig(tp=tp, dtype="float32")
    model, values = config.model(), tpm.run(config, "threads").values
    split = sum(ref.size for name, ref in tpm.unsplit_run(config)["params"].items() if values[0]["how"][name])
    replicated = model.params.size - split
    layout = Layout(model.params.size, ranks=tp, tp=tp, precision="fp32", optimizer="sgd-plain")
    for value in values:
        assert value["parameter_nbytes"] == 4 * (split // tp + replicated)
        assert value["parameter_nbytes"] - layout.bytes()["parameters"] == pytest.approx(4 * replicated * (1 - 1 / tp))


@pytest.mark.parametrize("layout", LAYOUTS, ids=ids)
def test_communication_against_closed_forms(layout):
    """Bytes on the wire in one step, and the collectives rank 0 ran, read from the trace:
    a ring all-reduce is a reduce-scatter phase then an all-gather phase, so rank 0's first
    message of each phase counts one collective of that kind."""
    config = TPConfig(**layout)
    result = tpm.run(config, "threads")
    closed = tpc.bytes_per_step(config)
    assert sum(m.nbytes for m in result.trace.messages) == closed["tp"] + closed["dp"]
    grid = config.check()
    started = {
        phase: sum(
            1
            for m in result.trace.messages
            if m.src == 0 and m.phase == phase and m.step == 0 and m.dst in grid.tp_members(0)
        )
        for phase in ("reduce-scatter", "allgather")
    }
    counts = tpc.collectives_per_step(config)
    allreduces = sum(c for k, c in counts.items() if k.endswith("allreduce"))
    assert started["reduce-scatter"] == allreduces + sum(c for k, c in counts.items() if k.endswith("reduce_scatter"))
    assert started["allgather"] == allreduces + sum(c for k, c in counts.items() if k.endswith("allgather"))


def test_per_layer_counts():
    """TP: 2 all-reduces a layer forward, 2 backward. SP forward: an all-gather and a
    reduce-scatter where TP has an all-reduce (the same bytes), plus the gather into the
    replicated output layer; backward 2 more all-gathers a layer (the column-parallel inputs)."""
    assert tpc.collectives_per_step(TPConfig(tp=4, layers=3)) == {"forward allreduce": 6, "backward allreduce": 6}
    assert tpc.collectives_per_step(TPConfig(tp=4, layers=3, sequence_parallel=True)) == {
        "forward allgather": 7,
        "forward reduce_scatter": 6,
        "backward allgather": 13,
        "backward reduce_scatter": 6,
        "backward allreduce": 1,
    }
    assert tpc.collectives_per_step(TPConfig(tp=1)) == {}


@pytest.mark.parametrize("backend", ["processes", "mpi"])
@pytest.mark.parametrize("layout", [dict(tp=2), dict(tp=2, sequence_parallel=True)], ids=ids)
def test_trace_identical_on_every_backend(layout, backend):
    if backend == "mpi" and mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    config = TPConfig(**layout)
    on_threads, other = tpm.run(config, "threads"), tpm.run(config, backend)
    assert make_golden.trace_record(other) == make_golden.trace_record(on_threads)
    assert [make_golden.digest(v["params"]) for v in other.values] == [
        make_golden.digest(v["params"]) for v in on_threads.values
    ]


@pytest.mark.parametrize(
    "layout, message",
    [
        (
            dict(tp=3, heads=4),
            r"tp must divide world size = 3, heads = 4, d_model = 16, d_ff = 64: one of \[1\], got 3",
        ),
        (
            dict(tp=8, heads=4),
            r"tp must divide world size = 8, heads = 4, d_model = 16, d_ff = 64: one of \[1, 2, 4\], got 8",
        ),
        (dict(tp=2, dp=3, batch=4), r"dp must divide the batch 4: one of \[1, 2, 4\], got 3"),
        (dict(tp=4, seq_len=6, sequence_parallel=True), r"seq_len = 6: one of \[1, 2\], got 4"),
        (dict(tp=2, d_model=18, heads=6, d_ff=36), None),
        (dict(dtype="float16"), "dtype must be float32 or float64"),
    ],
)
def test_bad_layouts_refused_before_any_rank_starts(layout, message, monkeypatch):
    monkeypatch.setattr(tpm, "tensor_parallel_program", None)  # a rank starting would fail otherwise
    config = TPConfig(**layout)
    if message is None:
        config.check()
        return
    with pytest.raises(ValueError, match=message):
        tpm.run(config, "threads")


def test_world_size_not_dp_times_tp_refused(monkeypatch):
    monkeypatch.setattr(tpm, "tensor_parallel_program", None)
    with pytest.raises(ValueError, match=r"world_size must be dp x tp = 2 x 2 = 4, got 6"):
        tpm.run(TPConfig(dp=2, tp=2), "threads", world_size=6)


def test_split_layers_follow_megatron():
    """Column-parallel A by columns (and Q, K, V by heads), row-parallel B by rows; shards
    put back together give the unsplit tensor."""
    model = TPConfig().model()
    attn = model.layers[1].layers[1]
    assert isinstance(attn, MultiHeadAttention)
    parts = [tpm.shard_of(attn.params["Wqkv"], "qkv", i, 2) for i in range(2)]
    d = attn.d_model
    np.testing.assert_array_equal(parts[1][:, : d // 2], attn.params["Wqkv"][:, d // 2 : d])  # Q of heads 2, 3
    np.testing.assert_array_equal(tpm.unshard(parts, "qkv"), attn.params["Wqkv"])
    for how in ("columns", "rows"):
        np.testing.assert_array_equal(
            tpm.unshard([tpm.shard_of(attn.params["Wo"], how, i, 4) for i in range(4)], how), attn.params["Wo"]
        )


def _matmul_flops(config: TPConfig) -> int:
    """The split layers' products in one step of the unsplit model, forward and backward:
    per layer QKV (h x 3h), the scores and the context (s x s per head), the projection
    (h x h), fc1 and fc2 (h x d_ff), 2 m k n FLOPs each, backward twice forward."""
    tokens, h, s = config.batch // config.dp * config.seq_len, config.d_model, config.seq_len
    forward = 2 * tokens * (3 * h * h + h * h + 2 * h * config.d_ff) + 2 * 2 * tokens * s * h
    return 3 * config.layers * forward


@pytest.mark.parametrize("layout", [dict(tp=1), dict(tp=2), dict(tp=4, sequence_parallel=True), dict(dp=2, tp=2)])
def test_split_layers_charge_their_share_of_the_flops_before_communicating(layout):
    """Each rank computes 1/t of the split layers' products (the virtual compute time), and
    the step takes that compute plus the communication it cannot hide."""
    config = TPConfig(**layout)
    result = tpm.run(config, "threads", node="a100")
    node = result.nodes[0]
    for rank in range(result.world_size):
        spans = [s for s in result.trace.spans if s.rank == rank and s.kind == "compute"]
        compute_s = sum(s.end_s - s.start_s for s in spans)
        assert compute_s == pytest.approx(node.compute_s(_matmul_flops(config) / config.tp), rel=1e-9)
        assert result.clocks_s[rank] >= compute_s
    assert result.virtual_time_s > compute_s if config.tp > 1 or config.dp > 1 else result.virtual_time_s == compute_s
