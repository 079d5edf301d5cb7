"""Graded: exercise ps_aggregation (dlsys.ps.server.KVServer.aggregate)."""

from types import SimpleNamespace

import numpy as np
import pytest

from dlsys.ps import KeyLayout, KVServer
from dlsys.train import TrainConfig

pytestmark = pytest.mark.ex_ps_aggregation

CONFIG = TrainConfig(lr=1.0, momentum=0.0, dtype="float64")
N = 10


def server(consistency: str, workers: int) -> KVServer:
    """A server of a 1-server group over 10 parameters (no communication needed here)."""
    return KVServer(SimpleNamespace(rank=0), KeyLayout([N], 1), CONFIG, workers, consistency,
                    staleness=2, budget=100, initial=np.zeros(N))


def gradients(count: int) -> list:
    return [np.random.default_rng([3, k]).standard_normal(N) for k in range(count)]


def test_bsp_waits_for_all_w_gradients_then_holds_their_mean():
    s, gs = server("bsp", 3), gradients(3)
    everything = np.arange(N)
    assert s.aggregate(everything, gs[0]) is False, "after 1 of 3 gradients: not ready"
    assert s.aggregate(everything, gs[1]) is False, "after 2 of 3 gradients: not ready"
    assert s.aggregate(everything, gs[2]) is True, "after the W-th gradient: ready"
    assert np.allclose(s.grad, np.mean(gs, axis=0)), "BSP applies (1/W) * the sum of the round"


def test_every_bsp_round_starts_from_zero():
    s, gs = server("bsp", 2), gradients(4)
    everything = np.arange(N)
    for g in gs[:2]:
        ready = s.aggregate(everything, g)
    assert ready
    assert s.aggregate(everything, gs[2]) is False
    assert s.aggregate(everything, gs[3]) is True
    assert np.allclose(s.grad, (gs[2] + gs[3]) / 2), "the second round must not include the first round"


@pytest.mark.parametrize("consistency", ["asp", "ssp"])
def test_asynchronous_servers_apply_each_gradient_alone_scaled_by_1_over_w(consistency):
    s, gs = server(consistency, 4), gradients(2)
    assert s.aggregate(np.arange(N), gs[0]) is True, "SSP/ASP update at once"
    assert np.allclose(s.grad, gs[0] / 4)
    assert s.aggregate(np.arange(N), gs[1]) is True
    assert np.allclose(s.grad, gs[1] / 4), "each update holds only the newest gradient"


def test_a_gradient_for_some_elements_leaves_the_others_zero():
    s = server("asp", 2)
    s.grad[...] = 7.0  # left over from an earlier update
    local = np.array([1, 4, 5])
    assert s.aggregate(local, np.array([2.0, 4.0, 6.0]))
    want = np.zeros(N)
    want[local] = [1.0, 2.0, 3.0]
    assert np.allclose(s.grad, want)
