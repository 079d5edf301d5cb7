"""Graded: exercise ring_reduce_scatter (dlsys.collectives.ring.reduce_scatter_blocks)."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.collectives import reduce_scatter
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_ring_reduce_scatter


def inputs(p, n, dtype=np.float64):
    return [np.random.default_rng([7, r]).standard_normal(n).astype(dtype) for r in range(p)]


def run(xs, op="sum", link="tcp-10gbe"):
    def program(comm):
        return reduce_scatter(comm, xs[comm.rank], op=op)
    return launch(program, len(xs), "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S)


def check(xs, op, values):
    want = np.array_split({"sum": np.sum, "max": np.max}[op](xs, axis=0), len(xs))
    for r, (got, block) in enumerate(zip(values, want)):
        assert got.shape == block.shape, f"rank {r} must return block {r} ({block.size} elements)"
        assert np.allclose(got, block), f"rank {r} must hold the full reduction of block {r}"


def test_rank_r_gets_the_sum_of_block_r():
    xs = inputs(4, 16)
    check(xs, "sum", run(xs).values)


@pytest.mark.parametrize("p, n, op", [(5, 13, "max"), (4, 3, "sum")])
def test_uneven_and_empty_blocks(p, n, op):
    xs = inputs(p, n)
    check(xs, op, run(xs, op).values)


def test_two_ranks():
    xs = inputs(2, 6)
    check(xs, "sum", run(xs).values)


def test_p_minus_1_blocks_to_the_right_neighbour():
    p, n = 5, 5 * 256
    messages = run(inputs(p, n)).trace.messages
    for r in range(p):
        sent = [m for m in messages if m.src == r]
        assert len(sent) == p - 1, f"rank {r} must send p-1 = {p - 1} messages"
        assert all(m.dst == (r + 1) % p for m in sent), f"rank {r} must send only to rank {(r + 1) % p}"
        assert all(m.nbytes == n // p * 8 for m in sent), "every message is one block: n/p elements"


def test_time_is_the_ring_closed_form():
    xs = inputs(6, 6 * 4096, np.float32)
    t = run(xs).virtual_time_s
    assert t == pytest.approx(closed_form("reduce_scatter", "ring", 6, xs[0].nbytes, "tcp-10gbe"), rel=1e-9), \
        "(p-1) steps, each one block of n/p bytes: (p-1)(alpha + n/p beta)"
