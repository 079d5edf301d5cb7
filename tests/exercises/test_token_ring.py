"""Graded: exercise token_ring (dlsys/exercises/token_ring.py)."""

import numpy as np
import pytest

from dlsys.machine.net import get_link

pytestmark = pytest.mark.ex_token_ring


def observe_ring(p, token, link="tcp-10gbe"):
    """Runs in the untrusted child: the student's token ring on p threads."""
    from dlsys import launch
    from dlsys.exercises.token_ring import token_ring
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S

    run = launch(token_ring, p, "threads", link=link, args=(token,), timeout_s=LAUNCH_TIMEOUT_S)
    return {"values": run.values, "hops": [[m.src, m.dst] for m in run.trace.messages], "time_s": run.virtual_time_s}


@pytest.mark.parametrize("p", [2, 5])
def test_each_rank_returns_the_token_it_received(student, p):
    token = np.array([10.0, -1.0])
    values = student.run(observe_ring, p=p, token=token)["values"]
    assert np.array_equal(values[0], token + p), (
        f"rank 0 returned {values[0]}; after one lap it must get token + p = {token + p}"
    )
    for r in range(1, p):
        assert np.array_equal(values[r], token + r), f"rank {r} returned {values[r]}, want token + {r} = {token + r}"


def test_the_token_goes_once_around_neighbour_to_neighbour(student):
    p = 6
    hops = [tuple(h) for h in student.run(observe_ring, p=p, token=np.zeros(4))["hops"]]
    want = [(r, (r + 1) % p) for r in range(p)]
    assert hops == want, f"the messages went {hops}; one lap is 0->1, 1->2, ..., p-1->0, in that order"


def test_one_lap_costs_p_messages_one_after_the_other(student):
    p, token, link = 4, np.zeros(1000), get_link("tcp-1gbe")
    got = student.run(observe_ring, p=p, token=token, link="tcp-1gbe")["time_s"]
    want = p * link.message_s(token.nbytes)
    assert got == pytest.approx(want, rel=1e-9), (
        f"the lap took {got:.6g} s of virtual time; p messages one after the other take p (alpha + n beta) = {want:.6g} s"
    )


def test_keeps_dtype_and_shape(student):
    token = np.arange(6, dtype=np.int32).reshape(2, 3)
    for r, value in enumerate(student.run(observe_ring, p=3, token=token)["values"]):
        assert value.dtype == np.int32 and value.shape == (2, 3), (
            f"rank {r} returned {value.dtype} {value.shape}; the token is int32 (2, 3)"
        )
