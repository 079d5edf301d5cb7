"""ZeRO-1/2/3 and FSDP (dlsys.train.zero): the weights of plain data parallelism, the bytes
of the memory model, the communication volume of the paper's closed forms, the same trace
on every backend, bad input refused.

Bitwise: on 1 or 2 ranks (a + b == b + a in IEEE arithmetic, and every update is
elementwise), and under stage 1 when P divides the model (one unit, so its reduce-scatter
cuts the same blocks as DDP's ring all-reduce, which reduce-scatters first: each element is
summed in the same order). Elsewhere a unit's blocks start where DDP's do not, an element
is summed around the ring from another rank, and the weights differ by float32 rounding:
held within 1e-5 of the largest weight. One exception, under Adam: the attention's key bias,
whose true gradient is 0 (softmax is unchanged by adding q . b_k to a row of scores), so
its computed gradient is rounding noise whose sign depends on the order; Adam divides it by
its own magnitude and steps lr (Kingma & Ba 2015, section 2.1: |step| <= about lr).
There the weights agree within steps x lr."""

import json
import subprocess
import sys
from pathlib import Path

import make_golden  # noqa: E402
import numpy as np
import pytest

from dlsys.comm import launch
from dlsys.comm.backends.mpi import mpi_unavailable
from dlsys.experiments import train
from dlsys.experiments.memory import sharded_layout
from dlsys.learn import nn, optim
from dlsys.learn.sequence import answer_loss, reversal
from dlsys.learn.transformer import transformer
from dlsys.train import STRATEGIES, TrainConfig, build_model
from dlsys.train.data_parallel import DistributedOptimizer
from dlsys.train.zero import Sharded, check_sharding, units_of

SHARDED = [name for name, s in STRATEGIES.items() if s.family == "sharded"]
CONFIG = TrainConfig(epochs=1, batch_size=16)
TOLERANCE = 1e-5  # of the largest weight, where the summation order differs from DDP's


def bitwise_expected(stage: int, unit_layers, ranks: int, size: int) -> bool:
    return ranks <= 2 or (stage == 1 and size % ranks == 0)


def assert_same_weights(got, want, bitwise: bool, noise=slice(0), noise_bound: float = 0.0):
    """Equal (bitwise, or within TOLERANCE), but for ``noise``: within ``noise_bound``."""
    if bitwise:
        np.testing.assert_array_equal(got, want)
        return
    diff = np.abs(got - want)
    assert diff[noise].max(initial=0) <= noise_bound
    diff[noise] = 0
    assert diff.max() <= TOLERANCE * np.abs(want).max()


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_digits_mlp_weights_equal_data_parallel(ranks):
    """SGD with momentum, one epoch: 8,970 parameters, so 4 ranks pad (8,970 = 4 x 2,242 + 2)."""
    want = train("allreduce", CONFIG, ranks)["params"]
    size = build_model(CONFIG).params.size
    for name in SHARDED:
        fixed = STRATEGIES[name].fixed
        got = train(name, CONFIG, ranks)["params"]
        assert_same_weights(got, want, bitwise_expected(fixed["stage"], fixed.get("unit_layers"), ranks, size))


def small_transformer():
    return transformer(vocab=11, seq_len=8, d_model=16, heads=2, layers=1, seed=3)


LR = {"sgd": 0.05, "adam": 3e-3}
MAKERS = {
    "sgd": lambda w, g: optim.SGD(w, g, LR["sgd"], momentum=0.9),
    "adam": lambda w, g: optim.Adam(w, g, LR["adam"]),
}
STEPS = 3


def key_bias(model: nn.Sequential) -> slice:
    """The attention's b_k: the middle third of its bqkv (whose gradient is 0 but for rounding)."""
    (s,) = [s for s in model.param_slices() if s.name.endswith(".bqkv")]
    return slice(s.offset + s.size // 3, s.offset + 2 * s.size // 3)


def transformer_program(comm, stage, unit_layers, prefetch, optimizer, steps=STEPS):
    """``steps`` steps of the reversal task, rank r on its own 8 samples; stage 0: DDP."""
    model = small_transformer()
    if stage == 0:
        opt = DistributedOptimizer(MAKERS[optimizer](model.params, model.grads), comm)
    else:
        sharded = Sharded(comm, model, stage, MAKERS[optimizer], unit_layers, prefetch)
    for step in range(steps):
        task = reversal(8, length=4, seed=step * comm.size + comm.rank)
        if stage == 0:
            _, dlogits = answer_loss(model.forward(task.inputs), task)
            model.backward(dlogits)
            opt.step()
        else:
            sharded.step(task.inputs, lambda logits: answer_loss(logits, task))
    return model.params.copy() if stage == 0 else sharded.params()


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_transformer_weights_equal_data_parallel(optimizer, ranks):
    """3,803 parameters: 2 and 4 ranks pad the units, 3 ranks also the whole model."""
    want = launch(transformer_program, ranks, "threads", args=(0, None, False, optimizer)).values[0]
    model = small_transformer()
    noise = key_bias(model) if optimizer == "adam" else slice(0)
    for stage, unit_layers, prefetch in [(1, None, False), (2, None, False), (3, None, False), (3, 2, True)]:
        got = launch(transformer_program, ranks, "threads", args=(stage, unit_layers, prefetch, optimizer)).values
        for rank_weights in got:  # every rank gathers the same weights
            assert_same_weights(
                rank_weights,
                want,
                bitwise_expected(stage, unit_layers, ranks, model.params.size),
                noise,
                STEPS * LR[optimizer],
            )


def memory_program(comm, stage, unit_layers, prefetch):
    model = nn.mlp([64, 64, 64, 64, 10], seed=0)  # three units of 4,160 and one of 650
    sharded = Sharded(comm, model, stage, MAKERS["adam"], unit_layers, prefetch)
    rng = np.random.default_rng(comm.rank)
    for _ in range(2):
        y = rng.integers(0, 10, 8)
        sharded.step(rng.standard_normal((8, 64)), lambda logits: nn.softmax_cross_entropy(logits, y))
    return comm.memory


@pytest.mark.parametrize("ranks", [3, 4])
@pytest.mark.parametrize(
    "stage,unit_layers,prefetch", [(1, None, False), (2, None, False), (3, None, False), (3, 2, False), (3, 1, True)]
)
def test_measured_bytes_equal_the_memory_model(ranks, stage, unit_layers, prefetch):
    """Rank 0's peak per kind is ``Layout(...).bytes()``'s (Adam, fp32: 4 + 4 + 8 bytes a
    parameter, sharded by stage; padded where sharded; the gathered unit and its gradient)."""
    ledger = launch(memory_program, ranks, "threads", args=(stage, unit_layers, prefetch)).values[0]
    model = nn.mlp([64, 64, 64, 64, 10], seed=0)
    for kind, nbytes in sharded_layout(model, ranks, stage, unit_layers, prefetch, optimizer="adam").items():
        assert ledger.peak_by_kind[kind] == nbytes, kind
    assert ledger.in_use()["buffers"] == 0 and ledger.in_use()["activations"] == 0  # all freed


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_bytes_sent_per_step_are_the_papers_2_and_3_psi(ranks):
    """Per rank and step: 2 (P-1)/P Psi for stages 1-2 (DDP's ring all-reduce), 3 (P-1)/P Psi
    for stage 3 and FSDP (Psi padded, 4-byte elements); the run ends with one more all-gather
    of the weights for rank 0's record."""
    model = build_model(CONFIG)
    for name in SHARDED:
        fixed = STRATEGIES[name].fixed
        record = train(name, CONFIG, ranks)
        steps = len(record["losses"]) // ranks
        padded = (
            sum(u.shard for u in units_of(model, ranks, None if fixed["stage"] == 1 else fixed.get("unit_layers", 1)))
            * ranks
        )
        per_step = (3 if fixed["stage"] == 3 else 2) * (ranks - 1) / ranks * padded * 4
        gather = (ranks - 1) / ranks * padded * 4
        assert record["result"].trace.bytes_sent_per_rank() == [steps * per_step + gather] * ranks, name
    ddp = train("allreduce", CONFIG, ranks)
    ddp_steps = len(ddp["losses"]) // ranks
    sent = ddp["result"].trace.bytes_sent_per_rank()
    broadcast = [m.nbytes for m in ddp["result"].trace.messages if "broadcast" in m.label]
    assert (
        abs(sum(sent) - sum(broadcast) - ranks * ddp_steps * 2 * (ranks - 1) / ranks * model.params.size * 4)
        <= ranks * ddp_steps * 4 * ranks
    )  # unpadded blocks: within an element a block of the padded figure


@pytest.mark.parametrize(
    "backend",
    [
        "processes",
        pytest.param("mpi", marks=pytest.mark.skipif(mpi_unavailable() is not None, reason=str(mpi_unavailable()))),
    ],
)
@pytest.mark.parametrize("strategy", SHARDED)
def test_same_trace_and_weights_on_every_backend(strategy, backend):
    config = TrainConfig(epochs=1, batch_size=64)
    on_threads, elsewhere = (train(strategy, config, 3, backend=b, straggler=(2, 3.0)) for b in ("threads", backend))
    assert make_golden.trace_record(elsewhere["result"]) == make_golden.trace_record(on_threads["result"])
    assert make_golden.digest(elsewhere["params"]) == make_golden.digest(on_threads["params"])


def test_stage_3_drops_what_it_did_not_gather():
    """Outside its gathered units a stage-3 rank's weights are NaN: a forward without its
    all-gather cannot pass unnoticed."""

    def program(comm):
        model = small_transformer()
        Sharded(comm, model, 3, MAKERS["sgd"])
        return np.isnan(model.params).all() and np.isnan(model.forward(np.zeros((1, 8), int))).all()

    assert launch(program, 2, "threads").values == [True, True]


def test_bad_input_is_refused_before_any_rank_starts():
    with pytest.raises(ValueError, match="stage must be a ZeRO stage 1, 2 or 3"):
        check_sharding(0)
    with pytest.raises(ValueError, match="stage must be"):
        check_sharding(4)
    with pytest.raises(ValueError, match="prefetch .* needs stage 3 with unit_layers"):
        check_sharding(2, prefetch=True)
    with pytest.raises(ValueError, match="prefetch"):
        check_sharding(3, None, prefetch=True)
    with pytest.raises(ValueError, match="unit_layers must be an integer >= 1"):
        check_sharding(3, 0)
    with pytest.raises(ValueError, match="optimizer is not an option of zero2"):
        train("zero2", TrainConfig(epochs=1, optimizer="lars"), 2)
    with pytest.raises(ValueError, match="staleness is not an option of fsdp"):
        train("fsdp", CONFIG, 2, staleness=1)


def test_a_16_rank_zero3_step_of_the_transformer_in_seconds():
    """benchmarks/zero_step.py, as docs/performance.md runs it; every collective is a ring
    of P (P - 1) messages."""
    out = subprocess.run(
        [sys.executable, "benchmarks/zero_step.py", "--json"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=True,
    )
    record = json.loads(out.stdout)
    assert record["ranks"] == 16 and record["wall_s"] < record["target_s"] == 10.0
    assert record["messages"] % (16 * 15) == 0
