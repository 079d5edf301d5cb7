"""Graded: exercise ps_aggregation (dlsys.ps.server.KVServer.aggregate)."""

import numpy as np
import pytest

pytestmark = pytest.mark.ex_ps_aggregation

N = 10


def gradients(count: int) -> list:
    return [np.random.default_rng([3, k]).standard_normal(N) for k in range(count)]


def observe_aggregate(consistency: str, workers: int, pushes: list, leftover=None):
    """Runs in the untrusted child: a server of a 1-server group over 10 parameters (no
    communication needed here) gets each push (keys, gradient); after each, whether it is
    ready to update and its grad buffer."""
    from types import SimpleNamespace

    from dlsys.ps import KeyLayout, KVServer
    from dlsys.train import TrainConfig

    s = KVServer(
        SimpleNamespace(rank=0),
        KeyLayout([N], 1),
        TrainConfig(lr=1.0, momentum=0.0, dtype="float64"),
        workers,
        consistency,
        staleness=2,
        budget=100,
        initial=np.zeros(N),
    )
    if leftover is not None:
        s.grad[...] = leftover  # left over from an earlier update
    answers = []
    for keys, g in pushes:
        ready = s.aggregate(keys, g)
        answers.append({"ready": ready if type(ready) is bool else repr(ready), "grad": np.array(s.grad)})
    return answers


def ratio(got, want) -> str:
    """'4x the reference' when got is a multiple of want, else the largest difference."""
    scale = np.dot(got, want) / np.dot(want, want)
    if np.allclose(got, scale * want) and not np.isclose(scale, 1):
        return f"{scale:.3g}x the reference"
    return f"off by up to {np.max(np.abs(got - want)):.3g}"


def test_bsp_waits_for_all_w_gradients_then_holds_their_mean(student):
    gs = gradients(3)
    answers = student.run(observe_aggregate, consistency="bsp", workers=3, pushes=[(np.arange(N), g) for g in gs])
    readies = [a["ready"] for a in answers]
    assert readies == [False, False, True], (
        f"aggregate returned {readies} for the 3 gradients of a round; want [False, False, True]: ready after the W-th"
    )
    got, want = answers[-1]["grad"], np.mean(gs, axis=0)
    assert np.allclose(got, want), (
        f"the round's update is {ratio(got, want)}: BSP applies (1/W) x the sum of the round; did you average over the workers?"
    )


def test_every_bsp_round_starts_from_zero(student):
    gs = gradients(4)
    answers = student.run(observe_aggregate, consistency="bsp", workers=2, pushes=[(np.arange(N), g) for g in gs])
    readies = [a["ready"] for a in answers]
    assert readies == [False, True, False, True], (
        f"aggregate returned {readies} over two rounds of 2; want [False, True, False, True]"
    )
    got, want = answers[-1]["grad"], (gs[2] + gs[3]) / 2
    if np.allclose(got, (gs[0] + gs[1] + gs[2] + gs[3]) / 2) or np.allclose(got, np.mean(gs, axis=0)):
        pytest.fail("the second round's update includes the first round's gradients: reset the sum when a round ends")
    assert np.allclose(got, want), f"the second round's update is {ratio(got, want)}: the mean of the round's gradients"


@pytest.mark.parametrize("consistency", ["asp", "ssp"])
def test_asynchronous_servers_apply_each_gradient_alone_scaled_by_1_over_w(student, consistency):
    gs = gradients(2)
    answers = student.run(observe_aggregate, consistency=consistency, workers=4, pushes=[(np.arange(N), g) for g in gs])
    assert [a["ready"] for a in answers] == [True, True], (
        f"aggregate returned {[a['ready'] for a in answers]}; {consistency.upper()} updates at once: [True, True]"
    )
    for k, (g, answer) in enumerate(zip(gs, answers)):
        assert np.allclose(answer["grad"], g / 4), (
            f"update {k + 1} is {ratio(answer['grad'], g / 4)}: each update holds only the newest gradient, "
            "divided by the W = 4 workers"
        )


def test_a_gradient_for_some_elements_leaves_the_others_zero(student):
    local = np.array([1, 4, 5])
    (answer,) = student.run(
        observe_aggregate, consistency="asp", workers=2, leftover=7.0, pushes=[(local, np.array([2.0, 4.0, 6.0]))]
    )
    want = np.zeros(N)
    want[local] = [1.0, 2.0, 3.0]
    assert answer["ready"] is True, f"aggregate returned {answer['ready']}; ASP updates at once"
    assert np.allclose(answer["grad"], want), (
        f"grad is {answer['grad'].tolist()}, want {want.tolist()}: the pushed elements divided by W = 2, "
        "every other element 0 (not what an earlier update left)"
    )
