"""Graded: exercise ring_reduce_scatter (dlsys.collectives.ring.reduce_scatter_blocks)."""

import numpy as np
import pytest

from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_ring_reduce_scatter


def inputs(p, n, dtype=np.float64):
    return [np.random.default_rng([7, r]).standard_normal(n).astype(dtype) for r in range(p)]


def observe_reduce_scatter(xs, op="sum", link="tcp-10gbe"):
    """Runs in the untrusted child: the ring reduce-scatter of xs[r] on each rank r."""
    from dlsys import launch
    from dlsys.collectives import reduce_scatter
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.grading.untrusted import trace_summary

    def program(comm):
        return reduce_scatter(comm, xs[comm.rank], op=op)

    return trace_summary(launch(program, len(xs), "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S))


def check(xs, op, values):
    want = np.array_split({"sum": np.sum, "max": np.max}[op](xs, axis=0), len(xs))
    for r, (got, block) in enumerate(zip(values, want)):
        assert got.shape == block.shape, (
            f"rank {r} returned {got.size} elements; it must return block {r} ({block.size} elements)"
        )
        assert np.allclose(got, block), f"rank {r} returned a block that is not the full {op} of block {r}"


def test_rank_r_gets_the_sum_of_block_r(student):
    xs = inputs(4, 16)
    check(xs, "sum", student.run(observe_reduce_scatter, xs=xs)["values"])


@pytest.mark.parametrize("p, n, op", [(5, 13, "max"), (4, 3, "sum")])
def test_uneven_and_empty_blocks(student, p, n, op):
    xs = inputs(p, n)
    check(xs, op, student.run(observe_reduce_scatter, xs=xs, op=op)["values"])


def test_two_ranks(student):
    xs = inputs(2, 6)
    check(xs, "sum", student.run(observe_reduce_scatter, xs=xs)["values"])


def test_p_minus_1_blocks_to_the_right_neighbour(student):
    p, n = 5, 5 * 256
    messages = student.run(observe_reduce_scatter, xs=inputs(p, n))["messages"]
    for r in range(p):
        sent = [m for m in messages if m[0] == r]
        assert len(sent) == p - 1, f"rank {r} sent {len(sent)} messages; it must send p-1 = {p - 1}"
        assert all(m[1] == (r + 1) % p for m in sent), (
            f"rank {r} sent to ranks {sorted({m[1] for m in sent})}; it must send only to rank {(r + 1) % p}"
        )
        assert all(m[2] == n // p * 8 for m in sent), (
            f"rank {r} sent {[m[2] for m in sent]} bytes; every message is one block: n/p elements, {n // p * 8} bytes"
        )


def test_time_is_the_ring_closed_form(student):
    xs = inputs(6, 6 * 4096, np.float32)
    t = student.run(observe_reduce_scatter, xs=xs)["time_s"]
    want = closed_form("reduce_scatter", "ring", 6, xs[0].nbytes, "tcp-10gbe")
    assert t == pytest.approx(want, rel=1e-9), (
        f"it took {t:.6g} s; (p-1) steps, each one block of n/p bytes: (p-1)(alpha + n/p beta) = {want:.6g} s"
    )
