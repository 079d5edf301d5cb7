"""Graded: exercise ssp_gate (dlsys.ps.server.KVServer.slowest and may_read)."""

from types import SimpleNamespace

import numpy as np
import pytest

from dlsys.ps import KeyLayout, KVServer
from dlsys.train import TrainConfig

pytestmark = pytest.mark.ex_ssp_gate

WORKERS = 4  # ranks 1..4 behind one server (rank 0)


def server(consistency: str, staleness: int, clocks: list[int]) -> KVServer:
    s = KVServer(SimpleNamespace(rank=0), KeyLayout([10], 1), TrainConfig(), WORKERS, consistency,
                 staleness, budget=100, initial=np.zeros(10))
    s.clock = dict(zip(s.workers, clocks))
    return s


def test_slowest_is_the_smallest_clock_of_the_active_workers():
    s = server("ssp", 2, [5, 3, 7, 4])
    assert s.slowest() == 3
    s.active.discard(2)  # worker 1 (rank 2) left: it no longer holds anybody back
    assert s.slowest() == 4


@pytest.mark.parametrize("staleness", [0, 1, 3])
def test_ssp_lets_a_worker_read_only_within_s_clocks_of_the_slowest(staleness):
    clocks = [2, 2 + staleness, 3 + staleness, 2]
    s = server("ssp", staleness, clocks)
    assert s.may_read(1) and s.may_read(4), "the slowest workers may always read"
    assert s.may_read(2), f"c - slowest = {staleness} <= s: may read"
    assert not s.may_read(3), f"c - slowest = {staleness + 1} > s: must wait"


def test_bsp_is_ssp_with_zero_staleness():
    s = server("bsp", 5, [4, 4, 5, 4])
    assert s.may_read(1) and not s.may_read(3), "under BSP nobody starts clock c+1 before all finish c"


def test_asp_never_waits():
    s = server("asp", 0, [0, 1000, 3, 0])
    assert all(s.may_read(r) for r in s.workers)


def test_a_worker_that_left_no_longer_holds_the_others_back():
    s = server("ssp", 1, [0, 3, 3, 3])
    assert not s.may_read(2)
    s.active.discard(1)
    assert s.may_read(2)
