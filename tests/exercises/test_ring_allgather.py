"""Graded: exercise ring_allgather (dlsys.collectives.ring.allgather_blocks)."""

import numpy as np
import pytest

from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_ring_allgather


def own_block(rank, n=8):
    return np.full(n, rank, np.float32) + np.arange(n, dtype=np.float32) / 100


def observe_allgather(p, n=8, link="tcp-10gbe"):
    """Runs in the untrusted child: the all-gather of own_block(r, n) from every rank r."""
    from dlsys import launch
    from dlsys.collectives import allgather
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.grading.untrusted import trace_summary

    return trace_summary(
        launch(
            lambda comm: allgather(comm, own_block(comm.rank, n)), p, "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S
        )
    )


def observe_scatter_allgather_broadcast(x, p):
    """Runs in the untrusted child: broadcast(algorithm="scatter_allgather") of x from rank 0."""
    from dlsys import launch
    from dlsys.collectives import broadcast
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S

    program = lambda comm: broadcast(comm, x if comm.rank == 0 else np.zeros_like(x), algorithm="scatter_allgather")
    return launch(program, p, "threads", timeout_s=LAUNCH_TIMEOUT_S).values


@pytest.mark.parametrize("p", [4, 7])
def test_every_rank_gets_every_ranks_block(student, p):
    want = np.stack([own_block(r) for r in range(p)])
    for r, value in enumerate(student.run(observe_allgather, p=p)["values"]):
        assert np.shape(value) == want.shape and np.array_equal(value, want), (
            f"rank {r} ended with {np.shape(value)}, not block q from rank q for every q ({want.shape})"
        )


def test_uneven_blocks_in_a_scatter_allgather_broadcast(student):
    """broadcast(algorithm="scatter_allgather") scatters 13 elements into blocks of 3,3,3,2,2."""
    x = np.arange(13.0)
    for r, value in enumerate(student.run(observe_scatter_allgather_broadcast, x=x, p=5)):
        assert np.shape(value) == x.shape and np.array_equal(value, x), (
            f"rank {r} reassembled {value}, not the buffer 0..12 (blocks of 3,3,3,2,2)"
        )


def test_p_minus_1_blocks_to_the_right_neighbour(student):
    p, n = 5, 64
    messages = student.run(observe_allgather, p=p, n=n)["messages"]
    for r in range(p):
        sent = [m for m in messages if m[0] == r]
        assert len(sent) == p - 1, f"rank {r} sent {len(sent)} messages; it must send p-1 = {p - 1}"
        assert all(m[1] == (r + 1) % p for m in sent), (
            f"rank {r} sent to ranks {sorted({m[1] for m in sent})}; it must send only to rank {(r + 1) % p}"
        )
        assert all(m[2] == n * 4 for m in sent), (
            f"rank {r} sent {[m[2] for m in sent]} bytes; every message is one block of {n * 4} bytes"
        )


def test_time_is_the_ring_closed_form(student):
    p, n = 6, 4096
    t = student.run(observe_allgather, p=p, n=n)["time_s"]
    want = closed_form("allgather", "ring", p, p * n * 4, "tcp-10gbe")
    assert t == pytest.approx(want, rel=1e-9), (
        f"it took {t:.6g} s; (p-1) steps, each one block: (p-1)(alpha + n/p beta) = {want:.6g} s"
    )
