"""Graded: exercise ring_allreduce (dlsys.collectives.ring.allreduce_ring).

It builds on your ring reduce-scatter and ring all-gather.
"""

import numpy as np
import pytest

from dlsys import launch
from dlsys.collectives import allreduce
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_ring_allreduce


def inputs(p, shape, dtype=np.float64):
    return [np.random.default_rng([3, r]).standard_normal(shape).astype(dtype) for r in range(p)]


def run(xs, op="sum", link="tcp-10gbe"):
    def program(comm):
        return allreduce(comm, xs[comm.rank], op=op, algorithm="ring")
    return launch(program, len(xs), "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S)


@pytest.mark.parametrize("p, shape, op", [(4, (3, 8), "sum"), (5, (11,), "mean"), (3, (7,), "max")])
def test_every_rank_gets_the_reduction(p, shape, op):
    xs = inputs(p, shape)
    want = {"sum": np.sum, "mean": np.mean, "max": np.max}[op](xs, axis=0)
    for r, value in enumerate(run(xs, op).values):
        assert value.shape == want.shape, f"rank {r}: the result must have the input's shape"
        assert np.allclose(value, want), f"rank {r} got a wrong {op}"


def test_each_rank_sends_2_p_minus_1_blocks_to_its_right_neighbour():
    p, n = 4, 4 * 512
    xs = inputs(p, n)
    messages = run(xs).trace.messages
    for r in range(p):
        sent = [m for m in messages if m.src == r]
        assert all(m.dst == (r + 1) % p for m in sent), f"rank {r} must send only to rank {(r + 1) % p}"
        assert len(sent) == 2 * (p - 1), "p-1 reduce-scatter steps + p-1 all-gather steps"
        assert sum(m.nbytes for m in sent) == 2 * (p - 1) * xs[0].nbytes // p, \
            "each rank sends 2(p-1)/p n bytes: blocks, never whole buffers"


def test_time_is_the_ring_closed_form():
    xs = inputs(8, 8 * 2048, np.float32)
    t = run(xs).virtual_time_s
    assert t == pytest.approx(closed_form("allreduce", "ring", 8, xs[0].nbytes, "tcp-10gbe"), rel=1e-9), \
        "2(p-1) steps of one block: 2(p-1)(alpha + n/p beta)"
