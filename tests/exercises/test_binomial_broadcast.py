"""Graded: exercise binomial_broadcast (dlsys.collectives.trees.broadcast_binomial)."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.collectives import broadcast
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_binomial_broadcast


def run(p, root, x, link="tcp-10gbe"):
    """Rank ``root`` broadcasts x; every other rank passes zeros of the same shape."""
    def program(comm):
        return broadcast(comm, x if comm.rank == root else np.zeros_like(x), root=root)
    return launch(program, p, "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S)


@pytest.mark.parametrize("p, root", [(8, 0), (6, 4)])
def test_every_rank_gets_the_roots_array(p, root):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    for r, value in enumerate(run(p, root, x).values):
        assert value.shape == x.shape and value.dtype == x.dtype, f"rank {r}: shape or dtype changed"
        assert np.array_equal(value, x), f"rank {r} did not get the root's array"


def test_p_minus_1_messages_every_rank_but_the_root_receives_once():
    p, root = 7, 3
    received = [m.dst for m in run(p, root, np.ones(10)).trace.messages]
    assert sorted(received) == [r for r in range(p) if r != root]


def test_lg_p_rounds_of_alpha_plus_n_beta():
    p, x = 8, np.ones(16384, np.float32)
    t = run(p, 0, x).virtual_time_s
    assert t == pytest.approx(closed_form("broadcast", "binomial", p, x.nbytes, "tcp-10gbe"), rel=1e-9), \
        "a binomial tree finishes in lg p rounds of one message each"
