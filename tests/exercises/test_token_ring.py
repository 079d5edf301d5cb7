"""Graded: exercise token_ring (dlsys/exercises/token_ring.py)."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.exercises.token_ring import token_ring
from dlsys.machine.net import get_link

pytestmark = pytest.mark.ex_token_ring


def run(p, token, link="tcp-10gbe"):
    return launch(token_ring, p, "threads", link=link, args=(token,), timeout_s=LAUNCH_TIMEOUT_S)


@pytest.mark.parametrize("p", [2, 5])
def test_each_rank_returns_the_token_it_received(p):
    token = np.array([10.0, -1.0])
    values = run(p, token).values
    assert np.array_equal(values[0], token + p), "rank 0 must get the token back after one lap: token + p"
    for r in range(1, p):
        assert np.array_equal(values[r], token + r), f"rank {r} must receive token + {r}"


def test_the_token_goes_once_around_neighbour_to_neighbour():
    p = 6
    hops = [(m.src, m.dst) for m in run(p, np.zeros(4)).trace.messages]
    assert hops == [(r, (r + 1) % p) for r in range(p)], "one lap: 0->1, 1->2, ..., p-1->0, in that order"


def test_one_lap_costs_p_messages_one_after_the_other():
    p, token, link = 4, np.zeros(1000), get_link("tcp-1gbe")
    assert run(p, token, link).virtual_time_s == pytest.approx(p * link.message_s(token.nbytes), rel=1e-9)


def test_keeps_dtype_and_shape():
    token = np.arange(6, dtype=np.int32).reshape(2, 3)
    for value in run(3, token).values:
        assert value.dtype == np.int32 and value.shape == (2, 3)
