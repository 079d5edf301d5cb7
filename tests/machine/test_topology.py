"""Topologies: flat reproduces today's model bit for bit; on a two-level tree the
hierarchical all-reduce equals its closed form."""

import numpy as np
import pytest

import dlsys
from dlsys import collectives
from dlsys.experiments import simulate_collective
from dlsys.experiments.collectives import collective_program
from dlsys.machine.net import get_link
from dlsys.machine.topology import flat, get_network, taihulight, two_level

TREE = two_level("rdma-edr", supernode_size=4, oversubscription=4.0)


def test_taihulight_preset_numbers():
    t = taihulight()
    assert (t.max_nodes, t.supernode_size, t.link.bandwidth_Bps) == (40_960, 256, 14e9)
    oversubscription = t.link.bandwidth_Bps / t.uplink.bandwidth_Bps
    assert oversubscription == pytest.approx(20_480 * 14e9 / 70e12) and 4 < oversubscription < 4.2
    assert t.link_between(0, 255) is t.link and t.link_between(255, 256) is t.uplink
    assert "Fu et al." in t.source and "Dongarra" in t.source


def test_supernodes_group_consecutive_ranks():
    assert TREE.supernodes(10) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert flat().supernodes(5) == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize("algorithm", collectives.ALGORITHMS["allreduce"])
def test_a_flat_topology_gives_the_trace_of_no_topology(algorithm):
    args = ("allreduce", algorithm, 13, "float32", "sum", 0)
    runs = [
        dlsys.launch(collective_program, 6, "threads", link="tcp-10gbe", args=args, **extra)
        for extra in ({}, {"topology": "flat"}, {"topology": flat("tcp-10gbe")})
    ]
    for run in runs[1:]:
        assert run.trace.messages == runs[0].trace.messages and run.trace.spans == runs[0].trace.spans
        assert run.clocks_s == runs[0].clocks_s


@pytest.mark.parametrize("ranks", [4, 8, 16, 32])
@pytest.mark.parametrize("gamma", [False, True])
def test_hierarchical_allreduce_equals_its_closed_form_on_a_two_level_tree(ranks, gamma):
    record = simulate_collective(  # the tiered forms charge each pair its link: the static shares, by name
        "allreduce", "hierarchical", ranks, 4 * 1000, topology=TREE, charge_reductions=gamma, sharing=False
    )
    assert record["relative_error"] < 1e-9


def test_on_the_tree_crossing_supernodes_costs_the_uplink():
    def ping(comm):
        if comm.rank == 0:
            for dst in (1, 4):
                comm.send(np.zeros(1000, np.uint8), dst)
        elif comm.rank in (1, 4):
            comm.recv(source=0)
            return comm.clock

    clocks = dlsys.launch(ping, 5, "threads", topology=TREE).values
    inside, across = TREE.link, TREE.uplink
    assert clocks[1] == pytest.approx(inside.message_s(1000))
    assert clocks[4] == pytest.approx(
        inside.send_overhead_s(1000) * 2 + across.latency_s + 1000 / across.bandwidth_Bps + across.recv_overhead_s(1000)
    )


def test_the_ring_is_slower_on_the_tree_and_has_no_closed_form_there():
    """Under the static shares (sharing=False): every crossing message gets a quarter link."""
    flat_run = simulate_collective("allreduce", "ring", 8, 4 * 8000, "rdma-edr")
    tree_run = simulate_collective("allreduce", "ring", 8, 4 * 8000, "rdma-edr", topology=TREE, sharing=False)
    assert tree_run["virtual_time_s"] > flat_run["virtual_time_s"] and tree_run["closed_form_s"] is None
    with pytest.raises(ValueError, match="no closed form on the two-level topology"):
        collectives.closed_form("allreduce", "ring", 8, 1000, "rdma-edr", topology=TREE)


def test_bad_topologies_are_refused_before_any_rank_starts():
    with pytest.raises(ValueError, match="world_size must be an integer in 1..8"):
        dlsys.launch(lambda comm: None, 9, "threads", topology=two_level("rdma-edr", 4, 2.0, supernodes=2))
    with pytest.raises(ValueError, match="topology: unknown topology 'torus'; valid: tcp-1gbe"):
        get_network("torus", argument="topology")
    with pytest.raises(ValueError, match="oversubscription must be a finite number >= 1"):
        two_level("rdma-edr", 4, 0.5)


def test_get_network_resolves_each_way_to_name_a_network():
    edr = get_link("rdma-edr")
    assert get_network() == flat("tcp-10gbe")  # None: flat on the default link
    assert get_network("rdma-edr") == get_network(edr) == flat(edr)  # a link preset or a LinkModel
    assert get_network(None, "rdma-edr") == get_network("flat", edr) == flat(edr)  # flat on ``link``
    assert get_network("taihulight") == taihulight()  # a topology preset (its own links)
    assert get_network(TREE, "tcp-1gbe") is TREE  # a Topology: itself
    assert get_network("TaihuLight") == taihulight() and get_network("RDMA-EDR") == flat(edr)  # any case
    assert get_network("10Gbps") == flat(get_link("10Gbps")) == get_network(None, "10Gbps")  # a bandwidth


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: get_network("torus", argument="topology"),
            r"topology: unknown topology 'torus'; valid: tcp-1gbe, .* "
            r"\(links\), flat, two-level, taihulight, fat-tree, gpu-cluster \(topologies\)",
        ),
        (lambda: get_network(None, "wifi"), r"link: unknown link preset 'wifi'; valid: tcp-1gbe"),
        (lambda: get_network(3.0), r"network: unknown network 3\.0; valid"),
        (
            lambda: dlsys.launch(lambda comm: None, 2, "threads", topology="torus"),
            r"topology: unknown topology 'torus'",
        ),
        (
            lambda: simulate_collective("allreduce", "ring", 2, 64, topology=["flat"]),
            r"topology: unknown topology \['flat'\]",
        ),
    ],
)
def test_a_bad_network_names_the_argument_and_the_accepted_names(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_run_carries_one_network_object():
    result = dlsys.launch(lambda comm: comm.network, 3, "threads", topology=TREE)
    assert result.network is TREE and all(value == TREE for value in result.values)
