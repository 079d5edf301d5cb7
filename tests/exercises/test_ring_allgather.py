"""Graded: exercise ring_allgather (dlsys.collectives.ring.allgather_blocks)."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.collectives import allgather, broadcast
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_ring_allgather


def run(program, p, link="tcp-10gbe"):
    return launch(program, p, "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S)


def own_block(rank, n=8):
    return np.full(n, rank, np.float32) + np.arange(n, dtype=np.float32) / 100


@pytest.mark.parametrize("p", [4, 7])
def test_every_rank_gets_every_ranks_block(p):
    want = np.stack([own_block(r) for r in range(p)])
    for r, value in enumerate(run(lambda comm: allgather(comm, own_block(comm.rank)), p).values):
        assert np.array_equal(value, want), f"rank {r} must end with block q from rank q, for every q"


def test_uneven_blocks_in_a_scatter_allgather_broadcast():
    """broadcast(algorithm="scatter_allgather") scatters 13 elements into blocks of 3,3,3,2,2."""
    x = np.arange(13.0)
    program = lambda comm: broadcast(comm, x if comm.rank == 0 else np.zeros(13), algorithm="scatter_allgather")
    for r, value in enumerate(run(program, 5).values):
        assert np.array_equal(value, x), f"rank {r} did not reassemble the buffer"


def test_p_minus_1_blocks_to_the_right_neighbour():
    p, n = 5, 64
    messages = run(lambda comm: allgather(comm, own_block(comm.rank, n)), p).trace.messages
    for r in range(p):
        sent = [m for m in messages if m.src == r]
        assert len(sent) == p - 1, f"rank {r} must send p-1 = {p - 1} messages"
        assert all(m.dst == (r + 1) % p for m in sent), f"rank {r} must send only to rank {(r + 1) % p}"
        assert all(m.nbytes == n * 4 for m in sent), "every message is one block"


def test_time_is_the_ring_closed_form():
    p, n = 6, 4096
    t = run(lambda comm: allgather(comm, own_block(comm.rank, n)), p).virtual_time_s
    assert t == pytest.approx(closed_form("allgather", "ring", p, p * n * 4, "tcp-10gbe"), rel=1e-9), \
        "(p-1) steps, each one block: (p-1)(alpha + n/p beta) for a result of n bytes"
