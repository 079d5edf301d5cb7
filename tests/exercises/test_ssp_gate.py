"""Graded: exercise ssp_gate (dlsys.ps.server.KVServer.slowest and may_read)."""

import pytest

pytestmark = pytest.mark.ex_ssp_gate

WORKERS = 4  # ranks 1..4 behind one server (rank 0)


def observe_gate(consistency: str, staleness: int, clocks: list, left=()):
    """Runs in the untrusted child: a server of 4 workers at these clocks; slowest() and
    may_read(r) for every worker r, before and after the workers of ranks ``left`` leave."""
    from types import SimpleNamespace

    import numpy as np

    from dlsys.ps import KeyLayout, KVServer
    from dlsys.train import TrainConfig

    s = KVServer(
        SimpleNamespace(rank=0),
        KeyLayout([10], 1),
        TrainConfig(),
        WORKERS,
        consistency,
        staleness,
        budget=100,
        initial=np.zeros(10),
    )
    s.clock = dict(zip(s.workers, clocks))
    answers = []
    for gone in (None, *left):
        if gone is not None:
            s.active.discard(gone)
        answers.append({"slowest": int(s.slowest()), "may_read": {str(r): bool(s.may_read(r)) for r in s.workers}})
    return answers


def test_slowest_is_the_smallest_clock_of_the_active_workers(student):
    before, after = student.run(observe_gate, consistency="ssp", staleness=2, clocks=[5, 3, 7, 4], left=[2])
    assert before["slowest"] == 3, f"clocks 5, 3, 7, 4: slowest() gave {before['slowest']}, want 3"
    assert after["slowest"] == 4, (
        f"after the worker at clock 3 left, slowest() gave {after['slowest']}, want 4: it no longer holds anybody back"
    )


@pytest.mark.parametrize("staleness", [0, 1, 3])
def test_ssp_lets_a_worker_read_only_within_s_clocks_of_the_slowest(student, staleness):
    clocks = [2, 2 + staleness, 3 + staleness, 2]
    may = student.run(observe_gate, consistency="ssp", staleness=staleness, clocks=clocks)[0]["may_read"]
    assert may["1"] and may["4"], "the slowest workers (ranks 1 and 4) were refused; they may always read"
    assert may["2"], f"rank 2 was refused: c - slowest = {staleness} <= s = {staleness}, it may read"
    assert not may["3"], f"rank 3 may read: c - slowest = {staleness + 1} > s = {staleness}, it must wait"


def test_bsp_is_ssp_with_zero_staleness(student):
    may = student.run(observe_gate, consistency="bsp", staleness=5, clocks=[4, 4, 5, 4])[0]["may_read"]
    assert may["1"] and not may["3"], (
        f"under BSP (whatever s) rank 1 at clock 4 may read: {may['1']}, rank 3 at clock 5 may not: {may['3']}"
    )


def test_asp_never_waits(student):
    may = student.run(observe_gate, consistency="asp", staleness=0, clocks=[0, 1000, 3, 0])[0]["may_read"]
    assert all(may.values()), f"under ASP every worker may read; refused: {[r for r, ok in may.items() if not ok]}"


def test_a_worker_that_left_no_longer_holds_the_others_back(student):
    before, after = student.run(observe_gate, consistency="ssp", staleness=1, clocks=[0, 3, 3, 3], left=[1])
    assert not before["may_read"]["2"], "rank 2 at clock 3 may read while rank 1 is at clock 0 (s = 1)"
    assert after["may_read"]["2"], "rank 2 is still refused after rank 1 (the slowest) left"
