"""Graded: exercise contention_step (dlsys/exercises/contention.py), held to steps worked by
hand and to the emulator's replay with sharing (``launch(..., sharing=True)``), flow for
flow, on a flat switch, an oversubscribed two-level tree and a fat tree."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.exercises.contention import flow_finish_s, max_min_rates, step_time_s
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.machine.net import LinkModel
from dlsys.machine.topology import fat_tree, flat, two_level

pytestmark = pytest.mark.ex_contention_step

MiB = 2**20
LINK = LinkModel("1 GB/s, 10 us, no overheads", 10e-6, 1e9)  # departures at 0: arrive - depart is the flow's time


def test_two_flows_on_one_link_by_hand():
    # 1 MB and 3 MB on a 1 GB/s link: both at 0.5 GB/s until the first is done (2 ms);
    # then the second alone moves its last 2 MB at 1 GB/s (2 ms more)
    assert max_min_rates([[0], [0]], [1e9]) == pytest.approx([5e8, 5e8])
    assert flow_finish_s([[0], [0]], [1e6, 3e6], [1e9], 1e-4) == pytest.approx([1e-4 + 2e-3, 1e-4 + 4e-3], rel=1e-12)


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others():
    # flows 0 and 1 share link 0 (10 GB/s); flow 1 also crosses link 1 (2 GB/s) with flow 2:
    # flow 1 gets 1 GB/s there, so flow 0 takes the 9 GB/s it leaves on link 0 (not 5)
    assert max_min_rates([[0], [0, 1], [1]], [10e9, 2e9]) == pytest.approx([9e9, 1e9, 1e9], rel=1e-12)


def test_an_incast_ends_at_latency_plus_all_bytes_over_the_ingress():
    p, n = 8, 2e6
    routes = [[2 * s, 1] for s in range(1, p)]  # egress s, ingress of rank 0 (link 1)
    capacities = [1e9] * (2 * p)
    assert step_time_s(routes, [n] * (p - 1), capacities, 5e-6) == pytest.approx(5e-6 + (p - 1) * n / 1e9, rel=1e-12)


def test_empty_and_zero_byte_flows_pay_only_the_latency():
    assert step_time_s([], [], [1e9], 1e-5) == 0.0
    assert flow_finish_s([[0], [0]], [0, 1e6], [1e9], 1e-5) == pytest.approx([1e-5, 1e-5 + 1e-3], rel=1e-12)


def emulate(topology, ranks: int, sends):
    """Each (src, dst, nbytes) of ``sends`` sent at time 0 and received, with sharing: each
    message's time on the wire (arrive - depart) from the replay, in the order of ``sends``."""
    def program(comm):
        for src, dst, nbytes in sends:
            if src == comm.rank:
                comm.send(np.zeros(nbytes // 4, np.float32), dst, tag=dst)
        for src, dst, nbytes in sends:
            if dst == comm.rank:
                comm.recv(src, tag=dst)
    result = launch(program, ranks, "threads", topology=topology, sharing=True, timeout_s=LAUNCH_TIMEOUT_S)
    times = {}
    for m in result.trace.messages:
        times.setdefault((m.src, m.dst), []).append(m.arrive_s - m.depart_s)
    return [times[(src, dst)].pop(0) for src, dst, _ in sends]


def predicted(topology, ranks: int, sends):
    fabric = topology.fabric(ranks)
    return flow_finish_s([list(fabric.route(s, d)) for s, d, _ in sends], [n for _, _, n in sends],
                         [link.capacity_Bps for link in fabric.links], topology.link.latency_s)


STEPS = {
    "incast of unequal pushes on a flat switch": (flat(LINK), 6, [(s, 0, s * MiB) for s in range(1, 6)]),
    "three flows on a shared uplink beside flows inside the supernodes": (
        two_level(LINK, 4, 4.0), 8, [(0, 4, 4 * MiB), (1, 5, 2 * MiB), (2, 6, 1 * MiB), (3, 2, 3 * MiB),
                                     (7, 6, 2 * MiB), (5, 4, 1 * MiB)]),
    "a ring step across an oversubscribed tree": (two_level(LINK, 2, 4.0), 8,
                                                  [(r, (r + 1) % 8, 2 * MiB) for r in range(8)]),
    "a shift across pods and an incast on an oversubscribed fat tree": (  # hosts 0-3 in pod 0, 4-7 in pod 1
        fat_tree(4, 2.0, LINK), 8, [(r, (r + 3) % 8, MiB) for r in range(8)] + [(s, 0, 2 * MiB) for s in (2, 5, 6)]),
}


@pytest.mark.parametrize("name", STEPS)
def test_equals_the_emulator_flow_for_flow(name):
    topology, ranks, sends = STEPS[name]
    mine = predicted(topology, ranks, sends)  # first: a stub fails by raising, before any rank starts
    want = emulate(topology, ranks, sends)
    assert mine == pytest.approx(want, rel=1e-9), f"{name}: the emulator's times {want}"


def test_valid_input_accepted_bad_input_rejected_by_name():
    assert step_time_s([[0, 1]], [1e6], [1e9, 1e9], 0.0) == pytest.approx(1e-3, rel=1e-12)
    for args, name in [(([[0]], [1.0], [0.0], 0.0), "capacities_Bps"), (([[1]], [1.0], [1e9], 0.0), "routes"),
                       (([[]], [1.0], [1e9], 0.0), "routes"), (([[0]], [-1.0], [1e9], 0.0), "nbytes"),
                       (([[0]], [1.0, 2.0], [1e9], 0.0), "nbytes"), (([[0]], [1.0], [1e9], -1e-6), "latency_s")]:
        with pytest.raises(ValueError, match=name):
            step_time_s(*args)
