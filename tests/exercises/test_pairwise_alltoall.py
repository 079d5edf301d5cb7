"""Graded: exercise pairwise_alltoall (dlsys.collectives.exchange.pairwise_exchange)."""

import numpy as np
import pytest

from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_pairwise_alltoall


def send_buffer(rank, p, k=4):
    """Rank r's row d is 100 r + d (k copies): every value names its source and destination."""
    return 100.0 * rank + np.repeat(np.arange(p, dtype=np.float64), k).reshape(p, k)


def expected(rank, p, k=4):
    return np.stack([np.full(k, 100.0 * s + rank) for s in range(p)])


def observe_alltoall(p, k=4, link="tcp-10gbe"):
    """Runs in the untrusted child: alltoall(algorithm="pairwise") of send_buffer(r, p, k) on p ranks."""
    from dlsys import launch
    from dlsys.collectives import alltoall
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.grading.untrusted import trace_summary

    return trace_summary(
        launch(
            lambda comm: alltoall(comm, send_buffer(comm.rank, p, k), algorithm="pairwise"),
            p,
            "threads",
            link=link,
            timeout_s=LAUNCH_TIMEOUT_S,
        )
    )


def observe_uneven(count, p):
    """Runs in the untrusted child: alltoall of arange(count) + 1000 r, cut by np.array_split."""
    from dlsys import launch
    from dlsys.collectives import alltoall
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S

    return launch(
        lambda comm: alltoall(comm, np.arange(float(count)) + 1000 * comm.rank),
        p,
        "threads",
        timeout_s=LAUNCH_TIMEOUT_S,
    ).values


@pytest.mark.parametrize("p", [4, 5])
def test_rank_r_gets_block_r_of_every_rank(student, p):
    for r, value in enumerate(student.run(observe_alltoall, p=p)["values"]):
        want = expected(r, p)
        assert np.shape(value) == want.shape and np.array_equal(value, want), (
            f"rank {r} ended with rows {np.asarray(value)[:, 0].tolist()}; row s must be rank s's block {r}: "
            f"{want[:, 0].tolist()}"
        )


def test_uneven_blocks_land_in_their_slots(student):
    """13 elements on 5 ranks: blocks of 3, 3, 3, 2, 2 elements."""
    p, count = 5, 13
    for r, value in enumerate(student.run(observe_uneven, count=count, p=p)):
        want = np.stack([np.array_split(np.arange(float(count)) + 1000 * s, p)[r] for s in range(p)])
        assert np.shape(value) == want.shape and np.array_equal(value, want), (
            f"rank {r} got {np.asarray(value).tolist()}, not block {r} of every rank: {want.tolist()}"
        )


def test_one_block_to_every_other_rank(student):
    p, k = 6, 16
    messages = student.run(observe_alltoall, p=p, k=k)["messages"]
    for r in range(p):
        sent = sorted(m[1] for m in messages if m[0] == r)
        assert sent == [d for d in range(p) if d != r], (
            f"rank {r} sent to ranks {sent}; it must send exactly one message to each other rank"
        )
        assert all(m[2] == k * 8 for m in messages if m[0] == r), (
            f"rank {r} sent {[m[2] for m in messages if m[0] == r]} bytes; each message is one block of {k * 8} bytes"
        )


def test_time_is_p_minus_1_steps_of_one_block(student):
    p, k = 6, 512
    t = student.run(observe_alltoall, p=p, k=k)["time_s"]
    want = closed_form("alltoall", "pairwise", p, p * k * 8, "tcp-10gbe")
    assert t == pytest.approx(want, rel=1e-9), (
        f"it took {t:.6g} s; p-1 steps, each a send and then a receive of one block: "
        f"(p-1)(alpha + n/p beta) = {want:.6g} s"
    )


def test_one_rank_keeps_its_own_block(student):
    result = student.run(observe_alltoall, p=1)
    assert result["messages"] == [], "one rank has nobody to send to"
    assert np.array_equal(result["values"][0], expected(0, 1)), "one rank returns its own block"
