"""Graded: exercise zero2_step (dlsys.train.zero.Sharded: _reduce_scatter, _update, _allgather).

A ZeRO-2 step on a small MLP (Linear(5, 7), ReLU, Linear(7, 3): units of 42 and 24
parameters, padded to a multiple of P) on 2 and 4 ranks, SGD without momentum, judged
against plain data parallelism computed here with numpy: every rank's gradient on its own
batch, their mean, w <- w - lr mean."""

import numpy as np
import pytest

pytestmark = pytest.mark.ex_zero2_step

SIZES, BATCH, LR, STEPS = [5, 7, 3], 6, 0.5, 3


def batch(rank: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([11, rank])
    return rng.standard_normal((BATCH, SIZES[0])), rng.integers(0, SIZES[-1], BATCH)


def observe_zero2(world: int, steps: int, batches: list):
    """Runs in the untrusted child: ``steps`` ZeRO-2 steps on ``world`` ranks; after each,
    every rank's loss, gradient and parameter shards and its whole model.params; and the
    messages (src, dst, nbytes) of the run."""
    from dlsys import launch
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.learn import nn, optim
    from dlsys.train.zero import Sharded

    def program(comm):
        model = nn.mlp(SIZES, seed=3, dtype=np.float64)
        sharded = Sharded(comm, model, 2, lambda w, g: optim.SGD(w, g, LR))
        x, y = batches[comm.rank]
        out = []
        for _ in range(steps):
            loss = sharded.step(x, lambda logits: nn.softmax_cross_entropy(logits, y))
            out.append(
                {
                    "loss": float(loss),
                    "g": [g.copy() for g in sharded.g],
                    "w": [w.copy() for w in sharded.w],
                    "params": model.params.copy(),
                }
            )
        return out

    run = launch(program, world, "threads", timeout_s=LAUNCH_TIMEOUT_S)
    return {"values": run.values, "messages": [[m.src, m.dst, m.nbytes] for m in run.trace.messages]}


def data_parallel(world: int, steps: int) -> list[dict]:
    """The oracle, step by step: the losses on each rank's batch, the mean gradient, the weights after."""
    from dlsys.learn import nn

    model = nn.mlp(SIZES, seed=3, dtype=np.float64)
    out = []
    for _ in range(steps):
        losses, grads = [], []
        for r in range(world):
            x, y = batch(r)
            loss, dlogits = nn.softmax_cross_entropy(model.forward(x), y)
            model.backward(dlogits)
            losses.append(loss)
            grads.append(model.grads.copy())
        mean = np.mean(grads, axis=0)
        model.params -= LR * mean
        out.append({"losses": losses, "grad": mean, "params": model.params.copy()})
    return out


def shards(flat: np.ndarray, world: int) -> list[list[np.ndarray]]:
    """shards(flat, P)[r][k]: rank r's real elements of unit k (the layers Linear(5, 7) and Linear(7, 3))."""
    bounds = [(0, 42), (42, 66)]
    out = []
    for r in range(world):
        mine = []
        for start, stop in bounds:
            shard = -(-(stop - start) // world)
            mine.append(flat[min(start + r * shard, stop) : min(start + (r + 1) * shard, stop)])
        out.append(mine)
    return out


def ratio(got, want) -> str:
    """'0.5x the mean' when got is a multiple of want, else the largest difference."""
    scale = np.dot(got, want) / np.dot(want, want)
    if np.allclose(got, scale * want) and not np.isclose(scale, 1):
        return f"{scale:.3g}x the mean over the ranks"
    return f"off by up to {np.max(np.abs(got - want)):.3g}"


@pytest.mark.parametrize("world", [2, 4])
def test_each_rank_keeps_its_shard_of_the_mean_gradient(student, world):
    answer = student.run(observe_zero2, world=world, steps=1, batches=[batch(r) for r in range(world)])
    want = shards(data_parallel(world, 1)[0]["grad"], world)
    for r, value in enumerate(answer["values"]):
        for k, (got, expected) in enumerate(zip(value[0]["g"], want[r])):
            got = np.asarray(got)
            assert got.shape == expected.shape, (
                f"rank {r} kept {got.shape[0]} gradient elements of unit {k}; its shard has {expected.shape[0]} "
                f"(unit padded to a multiple of P = {world}, padding not kept)"
            )
            assert np.allclose(got, expected), (
                f"rank {r}'s gradient shard of unit {k} is {ratio(got, expected)}: reduce-scatter with op='mean' "
                f"gives (1/P) sum_r g_r once; did you divide by P twice, or not at all?"
            )


@pytest.mark.parametrize("world", [2, 4])
def test_the_update_moves_the_own_shard_by_sgd_on_it(student, world):
    """Judged on the student's own gradient shard, so a wrong gradient costs only the test above."""
    answer = student.run(observe_zero2, world=world, steps=1, batches=[batch(r) for r in range(world)])
    from dlsys.learn import nn

    before = shards(nn.mlp(SIZES, seed=3, dtype=np.float64).params, world)
    for r, value in enumerate(answer["values"]):
        for k, (w, g) in enumerate(zip(value[0]["w"], value[0]["g"])):
            want = before[r][k] - LR * np.asarray(g)
            assert np.allclose(w, want), (
                f"rank {r}'s parameter shard of unit {k} is off by up to {np.max(np.abs(w - want)):.3g} from "
                f"w - lr g on its own gradient shard: each unit's optimizer steps once per step"
            )


@pytest.mark.parametrize("world", [2, 4])
def test_after_a_step_every_rank_holds_every_ranks_updated_shard(student, world):
    """Judged on the student's own shards: model.params must be every rank's w, in rank order."""
    answer = student.run(observe_zero2, world=world, steps=1, batches=[batch(r) for r in range(world)])
    values = answer["values"]
    for r, value in enumerate(values):
        params = np.asarray(value[0]["params"])
        got = shards(params, world)
        for owner in range(world):
            for k in range(2):
                if not np.allclose(got[owner][k], values[owner][0]["w"][k]):
                    stale = owner != r
                    pytest.fail(
                        f"after the step, rank {r}'s model holds {'an old' if stale else 'a wrong'} copy of "
                        f"rank {owner}'s shard of unit {k}: all-gather every unit's updated shards into "
                        f"model.params before the next forward, or its ranks compute on stale weights"
                    )


@pytest.mark.parametrize("world", [2, 4])
def test_losses_and_weights_equal_plain_data_parallel(student, world):
    answer = student.run(observe_zero2, world=world, steps=STEPS, batches=[batch(r) for r in range(world)])
    oracle = data_parallel(world, STEPS)
    for step, want in enumerate(oracle):
        for r, value in enumerate(answer["values"]):
            got = value[step]
            assert got["loss"] == pytest.approx(want["losses"][r], rel=1e-9), (
                f"rank {r}'s loss at step {step + 1} is {got['loss']:.6g}, data parallelism's {want['losses'][r]:.6g}: "
                "the forward saw other weights than DDP's (a stale or wrongly scaled update earlier)"
            )
            assert np.allclose(got["params"], want["params"]), (
                f"rank {r}'s weights after step {step + 1} are off by up to "
                f"{np.max(np.abs(np.asarray(got['params']) - want['params'])):.3g} from data parallelism's "
                "(w - lr x the mean gradient)"
            )


@pytest.mark.parametrize("world", [2, 4])
def test_each_rank_sends_2_p_minus_1_over_p_of_the_model_per_step(student, world):
    answer = student.run(observe_zero2, world=world, steps=1, batches=[batch(r) for r in range(world)])
    padded_nbytes = sum(-(-n // world) * world for n in (42, 66 - 42)) * 8
    want = 2 * (world - 1) * padded_nbytes // world
    for r in range(world):
        sent = sum(m[2] for m in answer["messages"] if m[0] == r)
        assert sent == want, (
            f"rank {r} sent {sent} bytes in a step; a reduce-scatter of the (padded) gradient and an all-gather of "
            f"the parameters send (P-1)/P of the model each, 2 (P-1)/P x {padded_nbytes} B = {want} B "
            "(ZeRO section 7.2): no all-reduce, and no all-gather missed"
        )
