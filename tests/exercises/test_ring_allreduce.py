"""Graded: exercise ring_allreduce (dlsys.collectives.ring.allreduce_ring).

It builds on the ring reduce-scatter and all-gather: graded on the reference's of those,
so a mistake there costs only their exercises.
"""

import numpy as np
import pytest

from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_ring_allreduce


def inputs(p, shape, dtype=np.float64):
    return [np.random.default_rng([3, r]).standard_normal(shape).astype(dtype) for r in range(p)]


def observe_allreduce(xs, op="sum", link="tcp-10gbe"):
    """Runs in the untrusted child: the ring all-reduce of xs[r] on each rank r."""
    from dlsys import launch
    from dlsys.collectives import allreduce
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.grading.untrusted import trace_summary

    def program(comm):
        return allreduce(comm, xs[comm.rank], op=op, algorithm="ring")

    return trace_summary(launch(program, len(xs), "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S))


@pytest.mark.parametrize("p, shape, op", [(4, (3, 8), "sum"), (5, (11,), "mean"), (3, (7,), "max")])
def test_every_rank_gets_the_reduction(student, p, shape, op):
    xs = inputs(p, shape)
    want = {"sum": np.sum, "mean": np.mean, "max": np.max}[op](xs, axis=0)
    for r, value in enumerate(student.run(observe_allreduce, xs=xs, op=op)["values"]):
        assert np.shape(value) == want.shape, f"rank {r} returned shape {np.shape(value)}, not the input's {want.shape}"
        assert np.allclose(value, want), (
            f"rank {r} returned a wrong {op} (largest error {np.max(np.abs(value - want)):.3g})"
        )


def test_each_rank_sends_2_p_minus_1_blocks_to_its_right_neighbour(student):
    p, n = 4, 4 * 512
    xs = inputs(p, n)
    messages = student.run(observe_allreduce, xs=xs)["messages"]
    for r in range(p):
        sent = [m for m in messages if m[0] == r]
        assert all(m[1] == (r + 1) % p for m in sent), (
            f"rank {r} sent to ranks {sorted({m[1] for m in sent})}; it must send only to rank {(r + 1) % p}"
        )
        assert len(sent) == 2 * (p - 1), (
            f"rank {r} sent {len(sent)} messages; p-1 reduce-scatter steps + p-1 all-gather steps = {2 * (p - 1)}"
        )
        assert sum(m[2] for m in sent) == 2 * (p - 1) * xs[0].nbytes // p, (
            f"rank {r} sent {sum(m[2] for m in sent)} bytes; each rank sends 2(p-1)/p n = "
            f"{2 * (p - 1) * xs[0].nbytes // p} bytes: blocks, never whole buffers"
        )


def test_time_is_the_ring_closed_form(student):
    xs = inputs(8, 8 * 2048, np.float32)
    t = student.run(observe_allreduce, xs=xs)["time_s"]
    want = closed_form("allreduce", "ring", 8, xs[0].nbytes, "tcp-10gbe")
    assert t == pytest.approx(want, rel=1e-9), (
        f"it took {t:.6g} s; 2(p-1) steps of one block: 2(p-1)(alpha + n/p beta) = {want:.6g} s"
    )
