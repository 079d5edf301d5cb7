"""VirtualClock states DESIGN.md's virtual-time rules; runs of the Communicator obey them."""

from collections import defaultdict

import numpy as np
import pytest

import dlsys
from dlsys.comm import fast
from dlsys.comm.clock import VirtualClock
from dlsys.machine.net import LinkModel, get_node
from dlsys.machine.topology import flat, two_level

LINK = LinkModel("test", latency_s=2e-6, bandwidth_Bps=1e9, overhead_s=1e-6, kernel_copies=1, copy_bandwidth_Bps=4e9)
NODE = get_node("v100")


def clock(record=True):
    return VirtualClock(0, flat(LINK), NODE, record)


def test_send_charges_the_overhead_and_back_to_back_sends_share_the_egress():
    c, n = clock(), 10_000
    first = c.send(n)
    assert c.t == first == pytest.approx(LINK.send_overhead_s(n))
    second = c.send(n)
    assert c.t == pytest.approx(2 * LINK.send_overhead_s(n))
    assert second == pytest.approx(first + n / LINK.bandwidth_Bps)  # the egress was still busy
    assert c.egress_free == pytest.approx(second + n / LINK.bandwidth_Bps)


def test_receive_waits_for_the_arrival_then_charges_the_overhead():
    c, n = clock(), 10_000
    arrive = c.receive(depart_s=1e-3, nbytes=n, label="m")
    assert arrive == pytest.approx(1e-3 + LINK.latency_s + n / LINK.bandwidth_Bps)
    assert c.ingress_free == arrive
    assert c.t == pytest.approx(arrive + LINK.recv_overhead_s(n))
    assert [(s.kind, s.label) for s in c.spans] == [("wait", "m"), ("recv", "m")]


def test_incast_serializes_on_the_ingress_and_arrival_changes_nothing():
    c, n = clock(), 10_000
    c.receive(0.0, n)
    predicted = c.arrival(0.0, n)
    assert predicted == pytest.approx(c.ingress_free + n / LINK.bandwidth_Bps)
    assert c.ingress_free < predicted  # arrival() only predicts
    assert c.receive(0.0, n) == predicted


def test_a_message_that_arrived_long_ago_costs_only_the_overhead():
    c, n = clock(), 1000
    c.compute(seconds=1.0)
    c.receive(0.0, n)
    assert c.t == pytest.approx(1.0 * NODE.slowdown + LINK.recv_overhead_s(n))
    assert [s.kind for s in c.spans] == ["compute", "recv"]


def test_compute_and_reductions_use_the_node_model():
    c = clock()
    c.compute(flops=1e9)
    assert c.t == pytest.approx(NODE.compute_s(1e9))
    c.reduction(1 << 20)
    assert c.t == pytest.approx(NODE.compute_s(1e9) + (1 << 20) * NODE.gamma_s_per_byte)


def test_without_record_no_span_is_kept():
    c = clock(record=False)
    c.compute(seconds=1.0)
    c.send(10)
    assert c.spans == [] and c.t > 1.0


def mixed(comm):
    """Sends of several sizes, compute, sendrecv, shift, isend/irecv and recv_any."""
    rng = np.random.default_rng(comm.rank)
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    for step in range(4):
        comm.compute(seconds=float(rng.uniform(0, 1e-4)))
        comm.sendrecv(np.zeros(int(rng.integers(1, 50_000)), np.uint8), right, source=left, sendtag=step)
    shift = fast.shift(comm, right, left, tag=7)  # the fast paths' sendrecv
    for step in range(3):
        comm.compute(seconds=float(rng.uniform(0, 1e-4)))
        shift(np.zeros(int(rng.integers(1, 50_000)), np.uint8), "shift", step)
    request = comm.irecv(source=left, tag=9)
    comm.isend(np.ones(3000), right, tag=9)
    request.wait()
    if comm.rank == 0:
        return [comm.recv_any(tag=5)[0] for _ in range(comm.size - 1)]
    comm.send(np.ones(comm.rank * 1000), 0, tag=5)


TREE = two_level(LINK, supernode_size=2, oversubscription=3.0)  # ranks {0, 1} and {2, 3}: the ring crosses twice


@pytest.mark.parametrize("backend, topology", [("threads", None), ("processes", None), ("threads", TREE)])
def test_every_message_of_a_run_obeys_the_clock_rules(backend, topology):
    """With a topology, each message's rules use the link between its two ranks: the
    sender's overhead and egress by its destination, the arrival by its source (the per-pair
    clock, sharing=False: across supernodes the default is the shared-link replay)."""
    result = dlsys.launch(mixed, 4, backend, link=LINK, node="v100", topology=topology, sharing=False)
    network = topology or flat(LINK)
    by_src, by_dst = defaultdict(list), defaultdict(list)
    for m in result.trace.messages:
        by_src[m.src].append(m)
        by_dst[m.dst].append(m)
    for received in by_dst.values():  # the ingress: a = max(d + alpha + n/B, previous a + n/B)
        ingress_free = 0.0
        for m in sorted(received, key=lambda m: m.arrive_s):
            link = network.link_between(m.src, m.dst)
            wire = m.nbytes / link.bandwidth_Bps
            assert m.arrive_s == pytest.approx(max(m.depart_s + link.latency_s + wire, ingress_free + wire), rel=1e-12)
            ingress_free = m.arrive_s
    for rank, sent in by_src.items():  # the egress: d = max(t after o_s, previous d + n/B)
        sends = sorted((s for s in result.trace.spans if s.rank == rank and s.kind == "send"), key=lambda s: s.start_s)
        egress_free = 0.0
        for span, m in zip(sends, sorted(sent, key=lambda m: m.depart_s), strict=True):
            link = network.link_between(m.src, m.dst)
            assert span.end_s - span.start_s == pytest.approx(link.send_overhead_s(m.nbytes), rel=1e-9)
            assert m.depart_s == pytest.approx(max(span.end_s, egress_free), rel=1e-12)
            egress_free = m.depart_s + m.nbytes / link.bandwidth_Bps
