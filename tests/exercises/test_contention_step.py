"""Graded: exercise contention_step (dlsys/exercises/contention.py), held to steps worked by
hand and to the emulator's replay with sharing (``launch(..., sharing=True)``), flow for
flow, on a flat switch, an oversubscribed two-level tree and a fat tree."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.machine.net import LinkModel
from dlsys.machine.topology import fat_tree, flat, two_level

pytestmark = pytest.mark.ex_contention_step

MiB = 2**20
LINK = LinkModel("1 GB/s, 10 us, no overheads", 10e-6, 1e9)  # departures at 0: arrive - depart is the flow's time
MODULE = "dlsys.exercises.contention"


def test_two_flows_on_one_link_by_hand(student):
    # 1 MB and 3 MB on a 1 GB/s link: both at 0.5 GB/s until the first is done (2 ms);
    # then the second alone moves its last 2 MB at 1 GB/s (2 ms more)
    rates, finish = student.calls(
        MODULE, [("max_min_rates", ([[0], [0]], [1e9])), ("flow_finish_s", ([[0], [0]], [1e6, 3e6], [1e9], 1e-4))]
    )
    assert rates == pytest.approx([5e8, 5e8]), f"rates {rates}; two flows on one 1 GB/s link get 0.5 GB/s each"
    assert finish == pytest.approx([1e-4 + 2e-3, 1e-4 + 4e-3], rel=1e-12), (
        f"they end at {finish} s; the first at L + 2 ms, the second, alone after it, at L + 4 ms"
    )


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others(student):
    # flows 0 and 1 share link 0 (10 GB/s); flow 1 also crosses link 1 (2 GB/s) with flow 2:
    # flow 1 gets 1 GB/s there, so flow 0 takes the 9 GB/s it leaves on link 0 (not 5)
    (rates,) = student.calls(MODULE, [("max_min_rates", ([[0], [0, 1], [1]], [10e9, 2e9]))])
    assert rates == pytest.approx([9e9, 1e9, 1e9], rel=1e-12), (
        f"rates {rates}; want [9e9, 1e9, 1e9]: what flow 1 cannot use on link 0 goes to flow 0 (max-min fair)"
    )


def test_an_incast_ends_at_latency_plus_all_bytes_over_the_ingress(student):
    p, n = 8, 2e6
    routes = [[2 * s, 1] for s in range(1, p)]  # egress s, ingress of rank 0 (link 1)
    (got,) = student.calls(MODULE, [("step_time_s", (routes, [n] * (p - 1), [1e9] * (2 * p), 5e-6))])
    want = 5e-6 + (p - 1) * n / 1e9
    assert got == pytest.approx(want, rel=1e-12), f"the incast took {got} s; L + (p-1) n / B = {want} s"


def test_empty_and_zero_byte_flows_pay_only_the_latency(student):
    empty, finish = student.calls(
        MODULE, [("step_time_s", ([], [], [1e9], 1e-5)), ("flow_finish_s", ([[0], [0]], [0, 1e6], [1e9], 1e-5))]
    )
    assert empty == 0.0, f"a step without flows took {empty} s, want 0"
    assert finish == pytest.approx([1e-5, 1e-5 + 1e-3], rel=1e-12), (
        f"flows of 0 and 1e6 bytes end at {finish} s; a zero-byte flow pays only the latency"
    )


def emulate(topology, ranks: int, sends):
    """Each (src, dst, nbytes) of ``sends`` sent at time 0 and received, with sharing: each
    message's time on the wire (arrive - depart) from the replay, in the order of ``sends``."""

    def program(comm):
        for src, dst, nbytes in sends:
            if src == comm.rank:
                comm.send(np.zeros(nbytes // 4, np.float32), dst, tag=dst)
        for src, dst, nbytes in sends:
            if dst == comm.rank:
                comm.recv(source=src, tag=dst)

    result = launch(program, ranks, "threads", topology=topology, sharing=True, timeout_s=LAUNCH_TIMEOUT_S)
    times = {}
    for m in result.trace.messages:
        times.setdefault((m.src, m.dst), []).append(m.arrive_s - m.depart_s)
    return [times[(src, dst)].pop(0) for src, dst, _ in sends]


def predicted(student, topology, ranks: int, sends):
    fabric = topology.fabric(ranks)
    return student.calls(
        MODULE,
        [
            (
                "flow_finish_s",
                (
                    [list(fabric.route(s, d)) for s, d, _ in sends],
                    [n for _, _, n in sends],
                    [link.capacity_Bps for link in fabric.links],
                    topology.link.latency_s,
                ),
            )
        ],
    )[0]


STEPS = {
    "incast of unequal pushes on a flat switch": (flat(LINK), 6, [(s, 0, s * MiB) for s in range(1, 6)]),
    "three flows on a shared uplink beside flows inside the supernodes": (
        two_level(LINK, 4, 4.0),
        8,
        [(0, 4, 4 * MiB), (1, 5, 2 * MiB), (2, 6, 1 * MiB), (3, 2, 3 * MiB), (7, 6, 2 * MiB), (5, 4, 1 * MiB)],
    ),
    "a ring step across an oversubscribed tree": (
        two_level(LINK, 2, 4.0),
        8,
        [(r, (r + 1) % 8, 2 * MiB) for r in range(8)],
    ),
    # hosts 0-3 in pod 0, 4-7 in pod 1; no pair sends twice (the replay queues one pair's
    # messages on their connection, one after the other: docs/scheduling.md)
    "a shift across pods and an incast on an oversubscribed fat tree": (
        fat_tree(4, 2.0, LINK),
        8,
        [(r, (r + 3) % 8, MiB) for r in range(8)] + [(s, 0, 2 * MiB) for s in (2, 6, 7)],
    ),
}


@pytest.mark.parametrize("name", STEPS)
def test_equals_the_emulator_flow_for_flow(student, name):
    topology, ranks, sends = STEPS[name]
    mine = predicted(student, topology, ranks, sends)
    want = emulate(topology, ranks, sends)
    assert mine == pytest.approx(want, rel=1e-9), f"{name}: yours {mine}, the emulator's times {want}"


def test_valid_input_accepted_bad_input_rejected_by_name(student):
    bad = [
        (([[0]], [1.0], [0.0], 0.0), "capacities_Bps"),
        (([[1]], [1.0], [1e9], 0.0), "routes"),
        (([[]], [1.0], [1e9], 0.0), "routes"),
        (([[0]], [-1.0], [1e9], 0.0), "nbytes"),
        (([[0]], [1.0, 2.0], [1e9], 0.0), "nbytes"),
        (([[0]], [1.0], [1e9], -1e-6), "latency_s"),
    ]
    ok, *answers = student.calls(
        MODULE, [("step_time_s", ([[0, 1]], [1e6], [1e9, 1e9], 0.0))] + [("step_time_s", args) for args, _ in bad]
    )
    assert ok == pytest.approx(1e-3, rel=1e-12), f"1 MB over two 1 GB/s links took {ok!r}, want 1 ms"
    for (args, name), got in zip(bad, answers):
        assert isinstance(got, dict) and name in got["message"], (
            f"step_time_s{args!r} returned {got!r}; it must raise a ValueError naming {name}"
        )
