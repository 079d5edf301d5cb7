"""Flow-level sharing (dlsys/machine/flows.py) over fabrics (dlsys/machine/fabric.py):
closed cases with sharing, the max-min properties on random fabrics, bad input."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsys.machine.fabric import (
    FABRIC_PRESETS,
    CONNECTX7_Bps,
    FabricLink,
    NVLINK4_Bps,
    TAIHULIGHT_UPLINK_Bps,
    explicit,
    fat_tree,
    flat,
    get_fabric,
    gpu_cluster,
    taihulight,
    two_level,
)
from dlsys.machine.flows import Flow, FlowNetwork, max_min_rates, simulate_flows
from dlsys.machine.net import LinkModel, get_link

EDR = get_link("rdma-edr")
N = 48 * 2**20


def finish(fabric, flows):
    return simulate_flows(fabric, flows).finish_s


# --- closed cases -------------------------------------------------------------------


@pytest.mark.parametrize("link", ["tcp-10gbe", "rdma-edr", "sw26010"])
@pytest.mark.parametrize("ready", [0.0, 0.37, 1e-3 / 3])
def test_a_lone_message_costs_latency_plus_n_over_B_bit_for_bit(link, ready):
    model = get_link(link)
    for fabric in (flat(link, 4), two_level(link, 2, oversubscription=1.0, nodes=4)):
        for dst in (1, 3):
            (t,) = finish(fabric, [Flow(0, dst, N, ready)])
            assert t == ready + model.latency_s + N / model.bandwidth_Bps  # DESIGN.md's depart + latency + n / B


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_k_messages_on_one_link_each_take_k_times_longer(k):
    fabric = flat(EDR, k + 1)
    times = finish(fabric, [Flow(0, 1 + i, N) for i in range(k)])  # k messages share node 0's egress
    wire = N / EDR.bandwidth_Bps
    assert times == pytest.approx([EDR.latency_s + k * wire] * k, rel=1e-13)
    assert len(set(times)) == 1  # they finish in one event


def test_k_messages_on_one_link_exact_with_dyadic_numbers():
    fabric = explicit(
        "one link", 2, [FabricLink("l", 2.0**30), FabricLink("back", 2.0**30)], {(0, 1): (0,), (1, 0): (1,)}
    )
    assert finish(fabric, [Flow(0, 1, 2**20)] * 4) == (4 * 2.0**-10,) * 4


@pytest.mark.parametrize("p", [2, 4, 7, 16])
def test_an_incast_of_p_messages_costs_p_n_over_B_at_the_receiver(p):
    fabric = flat(EDR, p + 1)
    times = finish(fabric, [Flow(1 + i, 0, N) for i in range(p)])
    assert times == pytest.approx([EDR.latency_s + p * N / EDR.bandwidth_Bps] * p, rel=1e-13)


def test_staggered_messages_share_then_speed_up():
    """Two messages of n bytes on one link, the second ready when the first is half done:
    the first ends at 1.5 n/B (half alone, half shared), the second at 2 n/B."""
    fabric = flat(EDR, 3)
    wire = N / EDR.bandwidth_Bps
    a, b = finish(fabric, [Flow(0, 1, N, 0.0), Flow(0, 2, N, wire / 2)])
    assert a == pytest.approx(EDR.latency_s + 1.5 * wire, rel=1e-13)
    assert b == pytest.approx(EDR.latency_s + 2 * wire, rel=1e-13)


@pytest.mark.parametrize("k", [4, 6])
@pytest.mark.parametrize("shift", [1, 3])
def test_a_ring_step_on_a_full_bisection_fat_tree_equals_alpha_plus_n_over_B(k, shift):
    fabric = fat_tree(k, 1.0, EDR)
    p = fabric.nodes
    times = finish(fabric, [Flow(r, (r + shift) % p, N) for r in range(p)])
    assert times == (EDR.latency_s + N / EDR.bandwidth_Bps,) * p  # one flow per link: bit for bit


def test_an_oversubscribed_fat_tree_slows_what_leaves_the_edge_switch():
    fabric = fat_tree(4, 4.0, EDR)
    upper = EDR.bandwidth_Bps / 4
    (inside,) = finish(fabric, [Flow(0, 1, N)])  # same edge switch: host links only
    (across,) = finish(fabric, [Flow(0, 15, N)])  # across pods: limited by B / 4
    assert inside == EDR.latency_s + N / EDR.bandwidth_Bps
    assert across == EDR.latency_s + N / upper
    # Both hosts of edge switch 0 send to pod 3 through distinct aggregation switches (D-mod-k): no sharing.
    assert finish(fabric, [Flow(0, 14, N), Flow(1, 15, N)]) == (across, across)


def test_a_two_level_upper_link_is_shared_not_statically_divided():
    """topology.two_level charges every crossing message B / oversubscription; here a lone
    message across gets the whole link and four at once share the uplink of 2 B."""
    fabric = two_level(EDR, 4, oversubscription=2.0, nodes=8)
    wire = N / EDR.bandwidth_Bps
    assert finish(fabric, [Flow(0, 4, N)]) == (EDR.latency_s + wire,)
    four = finish(fabric, [Flow(i, 4 + i, N) for i in range(4)])
    assert four == pytest.approx([EDR.latency_s + 2 * wire] * 4, rel=1e-13)


def test_taihulight_upper_level_from_the_bisection():
    fabric = taihulight(512)
    assert TAIHULIGHT_UPLINK_Bps == 875e9 == 256 * 14e9 / (20_480 * 14e9 / 70e12)
    assert (fabric.nodes, len(fabric.links)) == (512, 2 * 512 + 4)
    assert fabric.latency_s(0, 511) == fabric.latency_s(0, 1) == get_link("sw26010").latency_s
    assert fabric.bandwidth_Bps(0, 511) == 14e9
    # All 256 nodes of supernode 0 send across at once: 875 GB/s / 256 each, not 14 GB/s.
    times = finish(fabric, [Flow(i, 256 + i, 10**9) for i in range(256)])
    assert times == pytest.approx([1e-6 + 10**9 / (875e9 / 256)] * 256, rel=1e-12)
    assert taihulight().nodes == 40_960


def test_gpu_cluster_nvlink_inside_an_island_infiniband_across():
    fabric = gpu_cluster(16)
    assert fabric.bandwidth_Bps(0, 7) == NVLINK4_Bps == 450e9
    assert fabric.bandwidth_Bps(0, 8) == CONNECTX7_Bps == 400e9 / 8
    # GPU 0 sends to every other GPU: its NVLink carries 7 messages, its NIC 8.
    times = finish(fabric, [Flow(0, d, N) for d in range(1, 16)])
    assert times[:7] == pytest.approx([2e-6 + 7 * N / NVLINK4_Bps] * 7, rel=1e-13)
    assert times[7:] == pytest.approx([3e-6 + 8 * N / CONNECTX7_Bps] * 8, rel=1e-13)


def test_messages_on_one_connection_follow_each_other():
    """With ``connections`` a src->dst pair is one stream: the second of two messages posted
    together moves after the first (clock.py's egress order: n/B, then 2n/B), and a
    message to another peer shares the egress with the connection's current one (max-min
    per connection: a and c at half rate end at 2n/B, then b alone at 3n/B)."""
    fabric = flat(LinkModel("dyadic", 0.0, 2.0**30), 3)  # no latency: exact times
    net = FlowNetwork(fabric, connections=True)
    a, b = net.inject(0, 1, 2**20, 0.0), net.inject(0, 1, 2**20, 0.0)
    finished = {}
    while (event := net.advance())[0] < math.inf:
        finished.update((flow, event[0]) for flow in event[1])
    assert (finished[a], finished[b]) == (2.0**-10, 2 * 2.0**-10)
    net = FlowNetwork(fabric, connections=True)
    a, b, c = net.inject(0, 1, 2**20, 0.0), net.inject(0, 1, 2**20, 0.0), net.inject(0, 2, 2**20, 0.0)
    finished = {}
    while (event := net.advance())[0] < math.inf:
        finished.update((flow, event[0]) for flow in event[1])
    assert (finished[a], finished[c], finished[b]) == (2 * 2.0**-10, 2 * 2.0**-10, 3 * 2.0**-10)


def test_a_late_flow_may_start_now_only_if_it_crosses_no_link():
    """A replay's sender may run up to a latency behind the network (dlsys.comm.replay):
    a flow whose start would be in the settled past is refused, unless it has no link."""
    net = FlowNetwork(flat(EDR, 2))
    net.inject(0, 1, N, 0.0)
    net.advance()
    assert net.now_s == EDR.latency_s
    with pytest.raises(ValueError, match="past is settled"):
        net.inject(0, 1, N, -1e-9)
    loop = net.inject(1, 1, N, 0.0)
    assert net.advance() == (EDR.latency_s, [loop])


def test_zero_bytes_and_self_messages_cost_the_latency_only():
    fabric = flat(EDR, 2)
    assert finish(fabric, [Flow(0, 1, 0, 1.0), Flow(1, 1, N, 2.0)]) == (1.0 + EDR.latency_s, 2.0)


def test_max_min_rates_textbook_example():
    """Bertsekas & Gallager's example: links of 1; flow 0 crosses both, flows 1 and 2 one each,
    flow 3 link 1 too: link 1 (three flows) fixes 1/3, then flow 1 takes the rest of link 0."""
    rates = max_min_rates([(0, 1), (0,), (1,), (1,)], [1.0, 1.0])
    assert rates == pytest.approx([1 / 3, 2 / 3, 1 / 3, 1 / 3])
    assert max_min_rates([(0,), (0,)], [3.0], weights=[1.0, 2.0]) == pytest.approx([1.0, 2.0])
    assert max_min_rates([()], [1.0]) == [math.inf]


def test_the_event_simulation_is_deterministic():
    fabric = fat_tree(4, 2.0, EDR)
    flows = [Flow(s, d, N // (1 + (s + d) % 3), (s * 7 % 5) * 1e-4) for s in range(16) for d in range(16) if s != d]
    assert simulate_flows(fabric, flows) == simulate_flows(fabric, flows)


# --- max-min properties on random fabrics --------------------------------------------


@st.composite
def random_network(draw):
    nodes = draw(st.integers(2, 6))
    nlinks = draw(st.integers(1, 8))
    capacities = draw(st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0, 0.7, 10.0]), min_size=nlinks, max_size=nlinks))
    links = [FabricLink(f"l{i}", c * 1e9, draw(st.sampled_from([0.0, 1e-6]))) for i, c in enumerate(capacities)]
    routes = {
        (s, d): tuple(draw(st.lists(st.integers(0, nlinks - 1), min_size=1, max_size=4, unique=True)))
        for s in range(nodes)
        for d in range(nodes)
        if s != d
    }
    fabric = explicit("random", nodes, links, routes)
    pairs = sorted(routes)
    flows = [
        Flow(*draw(st.sampled_from(pairs)), draw(st.integers(1, 10**8)), draw(st.sampled_from([0.0, 1e-3, 0.05])))
        for _ in range(draw(st.integers(1, 12)))
    ]
    return fabric, flows


@settings(max_examples=150, deadline=None)
@given(random_network(), st.randoms(use_true_random=False))
def test_remembered_rates_are_the_solvers_own_floats_in_any_order(network, rng):
    """FlowNetwork._unweighted gives max_min_rates' floats, whatever the routes' order, fresh
    or remembered: an unweighted rate depends on the route and the multiset beside it."""
    fabric, flows = network
    routes = [fabric.route(f.src, f.dst) for f in flows]
    capacity = [link.capacity_Bps for link in fabric.links]
    remembering = FlowNetwork(fabric)
    for _ in range(3):
        rng.shuffle(routes)
        assert remembering._unweighted(routes) == max_min_rates(routes, capacity)


@settings(max_examples=150, deadline=None)
@given(random_network())
def test_max_min_rates_saturate_a_bottleneck_of_every_flow(network):
    fabric, flows = network
    routes = [fabric.route(f.src, f.dst) for f in flows]
    capacity = [link.capacity_Bps for link in fabric.links]
    rates = max_min_rates(routes, capacity)
    load = [math.fsum(r for r, route in zip(rates, routes) if link in route) for link in range(len(capacity))]
    for link, c in enumerate(capacity):
        assert load[link] <= c * (1 + 1e-12), "no link above its capacity"
    for i, route in enumerate(routes):
        assert rates[i] > 0
        assert any(
            load[l] >= capacity[l] * (1 - 1e-12)
            and all(rates[i] >= rates[j] * (1 - 1e-12) for j, other in enumerate(routes) if l in other)
            for l in route
        ), f"flow {i} has no saturated link on which its rate is the largest"


@settings(max_examples=100, deadline=None)
@given(random_network())
def test_every_flow_moves_its_bytes_no_faster_than_its_route_allows(network):
    fabric, flows = network
    times = simulate_flows(fabric, flows)
    for f, start, end in zip(flows, times.start_s, times.finish_s):
        assert start == f.ready_s + fabric.latency_s(f.src, f.dst)
        assert end >= (start + f.nbytes / fabric.bandwidth_Bps(f.src, f.dst)) * (1 - 1e-12)
    # Work conservation on one link: everything crossing it takes at least its bytes / capacity.
    for link, spec in enumerate(fabric.links):
        on = [i for i, f in enumerate(flows) if link in fabric.route(f.src, f.dst)]
        if on:
            first = min(times.start_s[i] for i in on)
            last = max(times.finish_s[i] for i in on)
            assert last >= (first + sum(flows[i].nbytes for i in on) / spec.capacity_Bps) * (1 - 1e-12)


def reference_finish(fabric, flows):
    """The model by its definition: at every event, re-solve every flow in the network and
    advance every flow's bytes (no components, no lazy update)."""
    routes = [fabric.route(f.src, f.dst) for f in flows]
    capacity = [link.capacity_Bps for link in fabric.links]
    start = [f.ready_s + fabric.latency_s(f.src, f.dst) for f in flows]
    left = {i: float(f.nbytes) for i, f in enumerate(flows)}
    done, now, active = {}, 0.0, []
    while left:
        rates = dict(zip(active, max_min_rates([routes[i] for i in active], capacity))) if active else {}
        due = {i: now + left[i] / rates[i] for i in active}
        t = min([*due.values(), *(start[i] for i in left if i not in due)])
        for i in active:
            left[i] -= rates[i] * (t - now)
            if due[i] == t or left[i] <= flows[i].nbytes * 1e-12:
                done[i] = t
                del left[i]
        now = t
        for i in [i for i in left if i not in due and start[i] == t and (flows[i].nbytes == 0 or not routes[i])]:
            done[i] = t
            del left[i]
        active = sorted(i for i in left if start[i] <= now)
    return [done[i] for i in range(len(flows))]


@settings(max_examples=100, deadline=None)
@given(random_network())
def test_the_event_simulation_equals_re_solving_everything_at_every_event(network):
    fabric, flows = network
    assert simulate_flows(fabric, flows).finish_s == pytest.approx(reference_finish(fabric, flows), rel=1e-9)


def plain_finish(fabric, flows, weights=None):
    """FlowNetwork's rules written plainly, the reference its bookkeeping (completions in
    batches, components by set operations, remembered rates) is held to bit for bit: at
    every event, flows due then finish, flows starting then join, and every component
    with a link whose flows changed is re-solved by max_min_rates (a lone flow gets its
    narrowest link); a flow whose rate changed counts its bytes left and is due at
    t + left / rate; a rounding residue (a 2**-40 share of its size) means done."""
    routes = [fabric.route(f.src, f.dst) for f in flows]
    capacity = [link.capacity_Bps for link in fabric.links]
    start = [f.ready_s + fabric.latency_s(f.src, f.dst) for f in flows]
    waiting = sorted(range(len(flows)), key=lambda i: (start[i], i))
    active: dict[int, list] = {}  # flow -> [bytes left, counted at, rate]
    due: dict[int, float] = {}
    finished = [math.nan] * len(flows)
    while waiting or active:
        t = min([start[waiting[0]]] if waiting else [], default=math.inf)
        t = min(t, min(due.values(), default=math.inf))
        touched: set[int] = set()
        for i in sorted(i for i in due if due[i] == t):
            del active[i], due[i]
            finished[i] = t
            touched.update(routes[i])
        while waiting and start[waiting[0]] == t:
            i = waiting.pop(0)
            if flows[i].nbytes == 0 or not routes[i]:
                finished[i] = t
            else:
                active[i] = [float(flows[i].nbytes), t, 0.0]
                touched.update(routes[i])
        left_over = set(active)
        for link in sorted(touched):
            component = {i for i in left_over if link in routes[i]}
            grown = set()
            while component != grown:
                grown = set(component)
                component |= {j for j in left_over if any(set(routes[j]) & set(routes[i]) for i in grown)}
            left_over -= component
            members = []
            for i in sorted(component):
                left, counted, rate = active[i]
                if rate and left - rate * (t - counted) <= flows[i].nbytes * 2.0**-40:
                    del active[i], due[i]
                    finished[i] = t
                else:
                    members.append(i)
            if len(members) == 1:
                rates = [min(capacity[link] for link in routes[members[0]])]
            else:
                rates = max_min_rates(
                    [routes[i] for i in members], capacity, None if weights is None else [weights[i] for i in members]
                )
            for i, rate in zip(members, rates):
                state = active[i]
                if rate != state[2]:
                    state[0] -= state[2] * (t - state[1])
                    state[1], state[2] = t, rate
                    due[i] = t + state[0] / rate
    return finished


@settings(max_examples=150, deadline=None)
@given(random_network(), st.booleans(), st.randoms(use_true_random=False))
def test_the_event_simulation_is_its_plain_rules_bit_for_bit(network, weighted, rng):
    fabric, flows = network
    weights = [rng.choice([0.5, 1.0, 3.0]) for _ in flows] if weighted else None
    assert list(simulate_flows(fabric, flows, weights).finish_s) == plain_finish(fabric, flows, weights)


@pytest.mark.parametrize("nodes", [16, 64])
def test_an_incast_with_staggered_starts_is_its_plain_rules_bit_for_bit(nodes):
    """The case the batches are for: a parameter server's incast, flows joining and leaving
    one shared link at every event."""
    fabric = taihulight(nodes)
    flows = [
        Flow(w, 0, N // 7 * (1 + (w * layer) % 5), layer * 1e-3 + w * 1e-6)
        for w in range(1, nodes)
        for layer in range(4)
    ]
    assert list(finish(fabric, flows)) == plain_finish(fabric, flows)


# --- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: get_fabric("torus"), "unknown fabric 'torus'; valid: " + ", ".join(FABRIC_PRESETS)),
        (lambda: fat_tree(4).check_nodes(17), r"nodes must be an integer in 1..16"),
        (lambda: taihulight(40_961), r"nodes must be an integer 1..40960"),
        (lambda: get_fabric(flat(EDR, 4), nodes=5), r"nodes must be an integer in 1..4"),
        (lambda: fat_tree(4, -2.0), r"oversubscription must be a finite number >= 1"),
        (lambda: two_level(EDR, 4, oversubscription=-1), r"oversubscription must be a finite number >= 1"),
        (lambda: two_level(EDR, 4), r"exactly one of upper_bandwidth_Bps .* and oversubscription"),
        (lambda: two_level(EDR, 4, upper_bandwidth_Bps=0.0), r"upper_bandwidth_Bps must be a finite number > 0"),
        (lambda: two_level(EDR, 0, oversubscription=2), r"supernode_size must be an integer >= 1"),
        (lambda: fat_tree(5), r"k must be an even integer >= 2"),
        (lambda: fat_tree(0), r"k must be an integer >= 2"),
        (lambda: flat(EDR, 0), r"nodes must be an integer >= 1"),
        (lambda: gpu_cluster(2.5), r"nodes must be an integer >= 1"),
        (lambda: FabricLink("x", -1.0), r"capacity_Bps must be a finite number > 0"),
        (lambda: simulate_flows(flat(EDR, 4), [Flow(0, 4, 1)]), r"flows\[0\].dst must be a node .* 0..3"),
        (lambda: simulate_flows(flat(EDR, 4), [Flow(0, 1, -1)]), r"flows\[0\].nbytes must be a finite number >= 0"),
        (lambda: simulate_flows(flat(EDR, 4), [Flow(0, 1, 1, -1.0)]), r"flows\[0\].ready_s must be .* >= 0"),
        (lambda: explicit("x", 2, [FabricLink("l", 1.0)], {(0, 1): (0,)}), r"\(1, 0\) is missing"),
        (lambda: explicit("x", 2, [FabricLink("l", 1.0)], {(0, 1): (0, 0), (1, 0): (0,)}), r"distinct link ids"),
    ],
)
def test_bad_input_is_refused_with_the_accepted_range(build, message):
    with pytest.raises(ValueError, match=message):
        build()
