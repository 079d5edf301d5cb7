"""Graded: exercise binomial_broadcast (dlsys.collectives.trees.broadcast_binomial)."""

import numpy as np
import pytest

from dlsys.collectives import closed_form

pytestmark = pytest.mark.ex_binomial_broadcast


def observe_broadcast(p, root, x, link="tcp-10gbe"):
    """Runs in the untrusted child: rank ``root`` broadcasts x; every other rank passes zeros."""
    from dlsys import launch
    from dlsys.collectives import broadcast
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.grading.untrusted import trace_summary

    def program(comm):
        return broadcast(comm, x if comm.rank == root else np.zeros_like(x), root=root)

    return trace_summary(launch(program, p, "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S))


@pytest.mark.parametrize("p, root", [(8, 0), (6, 4)])
def test_every_rank_gets_the_roots_array(student, p, root):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    for r, value in enumerate(student.run(observe_broadcast, p=p, root=root, x=x)["values"]):
        assert value.shape == x.shape and value.dtype == x.dtype, (
            f"rank {r} returned {value.dtype} {value.shape}; the root's array is {x.dtype} {x.shape}"
        )
        assert np.array_equal(value, x), f"rank {r} returned {value.ravel()[:4]}..., not the root's array"


def test_p_minus_1_messages_every_rank_but_the_root_receives_once(student):
    p, root = 7, 3
    received = sorted(m[1] for m in student.run(observe_broadcast, p=p, root=root, x=np.ones(10))["messages"])
    want = [r for r in range(p) if r != root]
    assert received == want, f"the messages went to ranks {received}; every rank but the root receives once: {want}"


def test_lg_p_rounds_of_alpha_plus_n_beta(student):
    p, x = 8, np.ones(16384, np.float32)
    t = student.run(observe_broadcast, p=p, root=0, x=x)["time_s"]
    want = closed_form("broadcast", "binomial", p, x.nbytes, "tcp-10gbe")
    assert t == pytest.approx(want, rel=1e-9), (
        f"the broadcast took {t:.6g} s; a binomial tree finishes in lg p rounds of one message: {want:.6g} s"
    )
