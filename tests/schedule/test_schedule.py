"""Overlap and scheduling: the same numbers under every policy, closed forms for FIFO and
WFBP, P3 <= WFBP <= FIFO where the network is the bottleneck, priorities in the trace,
identical traces on threads and processes, bad inputs."""

import math
from dataclasses import replace

import numpy as np
import pytest

from dlsys import schedule
from dlsys.comm import SIGNAL, launch
from dlsys.comm.replay import link_load
from dlsys.experiments import p3_paper, train
from dlsys.experiments import schedule as ex
from dlsys.machine.net import LinkModel, get_link, get_node
from dlsys.machine.topology import flat, placed
from dlsys.train import TrainConfig

SMALL = {
    "p3": {"slice_params": 1000},
    "bytescheduler": {"partition_params": 1000, "credit_bytes": 8000},
    "fusion": {"bucket_mb": 0.02},
}  # the digits MLP's layers are 4,160 parameters: make the policies cut them


@pytest.fixture(scope="module")
def bsp():
    return train("ps-bsp", TrainConfig(epochs=1), 2)


@pytest.mark.parametrize("policy", ["fifo", "wfbp", "p3", "bytescheduler", "fusion"])
def test_scheduling_changes_time_not_numbers(policy, bsp):
    record = ex.train_schedule(policy, TrainConfig(epochs=1), 2, options=SMALL.get(policy))
    assert np.array_equal(record["params"], bsp["params"])
    assert record["test_accuracy"] == bsp["test_accuracy"]


@pytest.mark.parametrize("policy", ["wfbp", "p3", "fusion"])
def test_allreduce_scheme_reaches_the_same_weights(policy, bsp):
    record = ex.train_schedule(policy, TrainConfig(epochs=1), 2, scheme="allreduce", options=SMALL.get(policy))
    np.testing.assert_allclose(record["params"], bsp["params"], rtol=1e-5, atol=1e-6)


def test_odsgd_changes_the_numbers_and_still_learns():
    config = TrainConfig(epochs=5)
    record = ex.train_schedule("odsgd", config, 4)
    assert record["test_accuracy"] >= 0.95
    assert not np.array_equal(record["params"], train("ps-bsp", config, 4)["params"])


def test_odsgd_on_several_servers_takes_replies_that_overtake_each_other():
    """The next step's reply from one server may arrive before this step's from another:
    the receiver still hands every layer's weights over once per step (it deadlocked)."""
    record = ex.simulate_schedule("odsgd", "alexnet", 2, "1Gbps", servers=2)
    assert record["iteration_s"] < ex.simulate_schedule("wfbp", "alexnet", 2, "1Gbps", servers=2)["iteration_s"]


# --- closed forms: one worker, one server, an emulated chain of layers ------------------------


def chain_iteration_s(layers, release, link: LinkModel, node) -> float:
    """The clock rules by hand for one worker and one server: the sender posts each item at
    its release (FIFO: all at the end of backward), the server replies at once, the last
    reply ends the communication; then the next iteration computes forward and backward."""
    items = [l for l in reversed(layers) if l.params]  # backprop order
    compute_s = [3 * node.compute_s(l.flops) for l in layers]
    backward_end = sum(compute_s)  # any origin: only differences count
    t_sender = egress = ingress_server = t_server = egress_server = ingress_worker = t_receiver = 0.0
    for layer in items:
        n = 4 * (layer.params + 1)  # the item index travels with the values
        t_sender = max(t_sender, release(layer, backward_end)) + link.send_overhead_s(n)
        depart = max(t_sender, egress)
        egress = depart + link.wire_s(n)
        arrive = ingress_server = max(depart + link.latency_s + link.wire_s(n), ingress_server + link.wire_s(n))
        t_server = max(t_server, arrive) + link.recv_overhead_s(n)
        t_server += node.compute_s(4 * layer.params) + link.send_overhead_s(n)
        reply = max(t_server, egress_server)
        egress_server = reply + link.wire_s(n)
        back = ingress_worker = max(reply + link.latency_s + link.wire_s(n), ingress_worker + link.wire_s(n))
        t_receiver = max(t_receiver, back) + link.recv_overhead_s(n)
    return max(t_receiver, backward_end) - backward_end + sum(compute_s)


@pytest.mark.parametrize("policy", ["fifo", "wfbp"])
def test_fifo_and_wfbp_equal_their_closed_form(policy):
    layers = ex.layers("alexnet", 32)
    node, link = get_node("v100"), get_link("tcp-10gbe")
    backward = {l.name: 2 * node.compute_s(l.flops) for l in layers}

    def release(layer, backward_end):
        if policy == "fifo":
            return backward_end
        after = [l for l in layers[layers.index(layer) :]]  # its own backward and those above it
        return backward_end - sum(backward[l.name] for l in layers) + sum(backward[l.name] for l in after)

    record = ex.simulate_schedule(policy, "alexnet", 1, "tcp-10gbe", "v100", servers=1)
    assert record["iteration_s"] == pytest.approx(chain_iteration_s(layers, release, link, node), rel=1e-9)


def test_fifo_has_no_overlap_and_wfbp_some():
    fifo = ex.simulate_schedule("fifo", "resnet50", 2, "10Gbps")
    wfbp = ex.simulate_schedule("wfbp", "resnet50", 2, "10Gbps")
    assert fifo["overlap"] == 0 and wfbp["overlap"] > 0.3


def test_p3_beats_wfbp_beats_fifo_when_the_network_is_the_bottleneck():
    times = {p: ex.simulate_schedule(p, "alexnet", 2, "10Gbps")["iteration_s"] for p in ("fifo", "wfbp", "p3")}
    assert times["p3"] < times["wfbp"] < times["fifo"]


def test_every_policy_is_compute_alone_on_an_ideal_link():
    """No latency, no overhead, infinite bandwidth: what is left beyond compute is at most the
    servers' updates (4 flops per parameter), whatever the policy."""
    ideal, node = LinkModel("ideal", 0.0, math.inf), get_node("v100")
    updates_s = node.compute_s(4 * sum(l.params for l in ex.layers("googlenet", 32)))
    for policy in schedule.POLICIES:
        record = ex.simulate_schedule(policy, "googlenet", 2, ideal)
        assert record["compute_s"] - 1e-12 <= record["iteration_s"] <= record["compute_s"] + updates_s, policy


class EgressP3(schedule.P3):
    socket_hwm = None  # credit 0 on the whole egress, as P3 paces in the allreduce scheme


def test_a_lower_priority_item_never_departs_while_a_higher_one_waits():
    """Credit 0 on the egress: when a slice is posted, every released slice of higher priority has gone."""
    job = ex.make_job("p3", "alexnet", 2, options={"slice_params": 200_000})
    job = replace(job, policy=EgressP3(200_000))
    network = placed(flat(ex.parse_link("10Gbps")), job.machine_of)
    result = launch(schedule.program, job.ranks, "threads", topology=network, node="v100", args=(job,))
    items = job.policy.items(list(job.layers))
    sender, compute = job.rank_of("sender", 0), job.rank_of("compute", 0)
    ready = {}  # layer name -> backward end times, one per iteration
    for s in result.trace.spans:
        if s.rank == compute and s.label.startswith("backward "):
            ready.setdefault(s.label[len("backward ") :], []).append(s.end_s)
    pushes = [m for m in result.trace.messages if m.src == sender and m.phase != SIGNAL]
    per_iteration = len(items)
    assert len(pushes) == per_iteration * 3
    for it in range(3):
        batch = pushes[it * per_iteration : (it + 1) * per_iteration]
        order = [int(m.label.rsplit("[item ", 1)[1].rstrip("]")) for m in batch]  # "push conv3 slice 2 of 5 [item 17]"
        # credit 0: a slice is posted onto an idle link, so it departs one send overhead later
        post = {k: m.depart_s - ex.parse_link("10Gbps").send_overhead_s(m.nbytes) for k, m in zip(order, batch)}
        for k in order:
            released_before = [
                j
                for j in order
                if items[j].priority < items[k].priority
                and ready[job.layers[items[j].layers[0]].name][it] <= post[k] - 1e-12
            ]
            assert all(post[j] <= post[k] for j in released_before), (it, k)


def test_identical_traces_on_threads_and_processes():
    runs = [
        ex.simulate_schedule(
            "bytescheduler",
            "alexnet",
            2,
            "10Gbps",
            backend=b,
            options={"partition_params": 4_000_000, "credit_bytes": 32e6},
        )
        for b in ("threads", "processes")
    ]
    assert runs[0]["result"].trace == runs[1]["result"].trace


def test_policies_cut_the_gradient_into_items_that_tile_it():
    layers = ex.layers("resnet50", 32)
    total = sum(l.params for l in layers)
    for name in schedule.POLICIES:
        items = schedule.make(name).items(list(layers))
        covered = sorted((i.lo, i.hi) for i in items)
        assert covered[0][0] == 0 and covered[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:])), name


def test_ddp_buckets_are_at_most_the_cap_unless_one_layer_is_bigger():
    layers = ex.layers("vgg19", 32)
    for item in schedule.make("fusion", bucket_mb=25).items(list(layers)):
        assert 4 * item.size <= 25e6 or len(item.layers) == 1


@pytest.mark.parametrize(
    "policy, options, message",
    [
        ("p3", {"slice_params": 0}, "slice_params"),
        ("bytescheduler", {"partition_params": 1000, "credit_bytes": 100}, "credit_bytes"),
        ("fusion", {"bucket_mb": 0}, "bucket_mb"),
        ("gossip", {}, "unknown policy"),
        ("wfbp", {"slice_params": 5}, "unknown option"),
    ],
)
def test_bad_policies_fail_before_any_rank_starts(policy, options, message):
    with pytest.raises(ValueError, match=message):
        ex.make_job(policy, "alexnet", 2, options=options)


def test_bad_jobs_fail_before_any_rank_starts():
    with pytest.raises(ValueError, match="model"):
        ex.make_job("wfbp", "lenet9000", 2)
    with pytest.raises(ValueError, match="OD-SGD"):
        ex.make_job("odsgd", "alexnet", 2, scheme="allreduce")
    with pytest.raises(ValueError, match="link"):
        ex.parse_link("fast")
    with pytest.raises(ValueError, match="workers"):
        ex.make_job("wfbp", "alexnet", 0)


def test_cli_schedule(capsys):
    import json

    from dlsys.cli import main

    assert (
        main(["schedule", "--model", "alexnet", "--policy", "p3", "--workers", "2", "--link", "10Gbps", "--json"]) == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert record["policy"] == "p3" and record["iteration_s"] >= record["compute_s"]
    assert main(["schedule", "--policy", "wfbp", "--slice-params", "5"]) == 2
    assert "--slice-params: not an option of --policy wfbp" in capsys.readouterr().err
    assert main(["schedule", "--link", "7furlongs"]) == 2
    assert main(["simulate", "allreduce", "--link", "10Gbps", "--ranks", "2", "--size", "1KiB"]) == 0  # one grammar


def test_cli_schedule_sweep_gives_each_option_to_its_policy_and_refuses_a_single_runs_options(capsys):
    import json

    from dlsys.cli import main

    assert (
        main(
            [
                "schedule",
                "--model",
                "alexnet",
                "--workers",
                "2",
                "--sweep",
                "10Gbps",
                "--slice-params",
                "4000000",
                "--json",
            ]
        )
        == 0
    )
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["p3"]["describe"] == "p3 (slices of 4,000,000 parameters)"
    assert main(["schedule", "--sweep", "10Gbps", "--policy", "p3", "--iterations", "4"]) == 2
    assert "--policy, --iterations: not an option of --sweep" in capsys.readouterr().err


# --- every policy's colour and options reach the CLI, the experiments and the figures ----------


def test_every_policy_has_a_colour_and_describes_each_constructor_option():
    colours = [policy.colour for policy in schedule.POLICIES.values()]
    assert all(c.startswith("#") for c in colours) and len(set(colours)) == len(colours)
    for name, policy in schedule.POLICIES.items():
        assert [o.name for o in policy.options] == schedule.options_of(name), name
        for option in policy.options:
            assert schedule.OPTIONS[option.name] == (name, option)  # one policy per option name
            assert option.kind in ("integer", "number", "size") and option.low <= schedule.default_of(option.name)
            assert option.axis_title.endswith(")") and option.help
    from dlsys.viz import schedule as viz

    rows = [
        {"policy": p, "describe": p, "bandwidth_Bps": b, "iteration_s": 1.0, "compute_s": 0.5}
        for b in (1e9, 2e9)
        for p in schedule.POLICIES
    ]
    lines = {
        trace.legendgroup: trace.line.color for trace in viz.iteration_vs_bandwidth(rows).data if trace.legendgroup
    }
    assert lines == {name: policy.colour for name, policy in schedule.POLICIES.items()}


@pytest.mark.parametrize("option", list(schedule.OPTIONS))
def test_every_policy_option_reaches_the_cli_the_experiments_and_the_figure(option):
    from dlsys.cli import build_parser
    from dlsys.viz import schedule as viz

    policy, described = schedule.OPTIONS[option]
    value = schedule.default_of(option)
    text = str(value) if described.kind == "number" else str(int(value))
    for command in (["schedule"], ["train", "--schedule", policy]):
        args = build_parser(command[0]).parse_args([*command, described.flag, text])
        assert getattr(args, option) == value
    job = ex.make_job(policy, "alexnet", 2, options={option: value})
    assert getattr(job.policy, option) == value
    if not described.swept:
        assert option not in ex.KNOBS
        return
    assert ex.KNOBS[option] == policy
    rows = [
        {
            "option": option,
            "value": value,
            "policy": policy,
            "describe": policy,
            "model": "alexnet",
            "iteration_s": 1.0,
            "compute_s": 0.5,
            "overlap": 0.5,
            "items": 10,
        }
    ]
    fig = viz.option_tradeoff(rows * 2)
    assert fig.layout.xaxis.title.text == described.axis_title
    assert fig.data[0].line.color == schedule.POLICIES[policy].colour
    assert fig.data[0].x[0] == pytest.approx(value * described.axis_factor)


# --- what the app page and lesson 10 draw ----------------------------------------------------


def test_lanes_hold_worker_0s_compute_pushes_and_pulls():
    job = ex.make_job("wfbp", "alexnet", 2, servers=2)
    result = ex.simulate_schedule("wfbp", "alexnet", 2, "10Gbps", servers=2)["result"]
    bars = ex.lanes(job, result)
    with_params = [i for i, l in enumerate(job.layers) if l.params]
    compute = [b for b in bars if b["lane"] == "compute" and b["kind"] != "wait"]
    assert len(compute) == 2 * len(job.layers) * job.iterations
    assert {b["label"] for b in bars if b["kind"] == "wait"} <= {f"wait for {l.name}" for l in job.layers}
    link = ex.parse_link("10Gbps")
    for lane in ("push", "pull"):
        mine = sorted((b for b in bars if b["lane"] == lane), key=lambda b: b["start_s"])
        assert sorted(b["layer"] for b in mine) == sorted(with_params * job.iterations), lane
        for b in mine:  # on the wire for n / B, and one at a time
            layer = job.layers[b["layer"]]
            assert b["end_s"] - b["start_s"] == pytest.approx(link.wire_s(4 * (layer.params + 1)), rel=1e-9)
            assert b["label"].startswith(f"{lane} {layer.name} [item ")
        assert all(a["end_s"] <= b["start_s"] + 1e-12 for a, b in zip(mine, mine[1:])), lane


def test_compare_policies_and_sweeps():
    records = ex.compare_policies(["fifo", "p3"], "alexnet", 2, "10Gbps", options={"p3": {"slice_params": 4_000_000}})
    assert [r["policy"] for r in records] == ["fifo", "p3"] and "result" not in records[0]
    assert records[1]["items"] == len(
        ex.make_job("p3", "alexnet", 2, options={"slice_params": 4_000_000}).policy.items(
            list(ex.layers("alexnet", 32))
        )
    )
    assert records[0]["layers"][0] == ex.layers("alexnet", 32)[0].name
    assert all(r["end_s"] >= max(b["end_s"] for b in r["lanes"]) for r in records)
    rows = ex.option_sweep("bucket_mb", (1.0, 25.0, 1000.0), "alexnet", 2)
    assert [r["items"] for r in rows] == sorted((r["items"] for r in rows), reverse=True) and rows[-1]["items"] == 1
    assert all(r["option"] == "bucket_mb" and r["policy"] == "fusion" for r in rows)
    with pytest.raises(ValueError, match="option"):
        ex.option_sweep("cycle_ms", (1.0,))
    sweep = [
        {"bandwidth_Bps": b, "policy": p, "iteration_s": t}
        for b, p, t in (
            (1, "fifo", 4.0),
            (1, "p3", 3.0),
            (2, "fifo", 2.0),
            (2, "p3", 1.0),
            (3, "fifo", 1.0),
            (3, "p3", 1.0),
        )
    ]
    gap = ex.widest_gap(sweep)
    assert gap["bandwidth_Bps"] == 2 and gap["fastest"]["policy"] == "p3" and gap["slowest"]["policy"] == "fifo"


# --- P3 as its paper ran it: MXNet's KVStore, co-located servers, a per-slice server cost ----


def one_layer_per_size(sizes):
    out, offset = [], 0
    for i, n in enumerate(sizes):
        out.append(schedule.Layer(f"l{i}", n, offset, 1e6))
        offset += n
    return out


def test_mxnet_splits_arrays_from_the_big_array_bound_evenly_over_every_server():
    """kvstore_dist.h EncodeDefaultKey: below 1e6 parameters one server, (key * 9973) mod S;
    from 1e6 on, S parts of round(n/S (i+1)) - round(n/S i), part i on server i."""
    sizes = [999_999, 1_000_000, 1_000_003, 10, 0, 2_500_001]
    layers = one_layer_per_size(sizes)
    placed = schedule.make("mxnet").placed(layers, 4)
    by_layer = {}
    for item, server in placed:
        by_layer.setdefault(item.layers[0], []).append((item.size, server))
    keys = [i for i, n in enumerate(sizes) if n]  # MXNet's keys: the arrays in forward order
    assert by_layer[0] == [(999_999, keys.index(0) * 9973 % 4)] and by_layer[3] == [(10, keys.index(3) * 9973 % 4)]
    assert by_layer[1] == [(250_000, s) for s in range(4)]
    assert by_layer[2] == [(250_001, 0), (250_001, 1), (250_000, 2), (250_001, 3)]  # cuts at 250001, 500002, 750002
    assert [n for n, _ in by_layer[5]] == [625_000, 625_001, 625_000, 625_000] and 4 not in by_layer
    assert [item.index for item, _ in placed] == list(range(len(placed)))  # backprop order: the last layer first
    assert placed[0][0].layers == (5,)
    small_bound = schedule.make("mxnet", bigarray_bound=10).placed(layers, 2)  # 999,999 / 2 = 499,999.5 rounds up
    assert [(item.lo, item.hi, s) for item, s in small_bound if item.layers == (0,)] == [
        (0, 500_000, 0),
        (500_000, 999_999, 1),
    ]


@pytest.mark.parametrize("policy, servers", [("mxnet", 4), ("mxnet", 3), ("p3", 4), ("wfbp", 4), ("fusion", 2)])
def test_every_element_goes_to_exactly_one_server(policy, servers):
    layers = list(ex.layers("vgg19", 32))
    placed = schedule.make(policy).placed(layers, servers)
    covered = sorted((item.lo, item.hi) for item, _ in placed)
    assert covered[0][0] == 0 and covered[-1][1] == sum(l.params for l in layers)
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))
    assert all(0 <= server < servers for _, server in placed)
    loads = [sum(item.size for item, s in placed if s == server) for server in range(servers)]
    if policy in ("mxnet", "p3"):  # fc6 (103M) spread over every server, not on one
        assert max(loads) < 1.2 * sum(loads) / servers, loads


def test_p3_keeps_its_slices_priorities_and_deals_them_round_robin():
    layers = list(ex.layers("alexnet", 32))
    p3 = schedule.make("p3")
    assert [item for item, _ in p3.placed(layers, 4)] == p3.items(layers)
    assert [server for _, server in p3.placed(layers, 4)] == [k % 4 for k in range(len(p3.items(layers)))]
    assert all(item.priority == (item.layers[0], item.lo) for item in p3.items(layers))


def test_colocated_servers_share_each_machines_link_by_hand():
    """Two machines, each a worker and a server, one layer of n parameters (server 0's), a
    link of latency L and bandwidth B. Worker 0's push to its own server takes the loopback
    (no link, no time); worker 1's crosses alone (w = 4 (n + 1) / B, the whole link); server
    0 updates (u), pays its per-slice cost (c) and replies, to worker 1 alone on its link:
    the period is T = 3f + L + w + u + c + L + w, and no byte of worker 0 <-> server 0
    crosses a link (no hairpin)."""
    n, flops, c = 1_000_000, 2e9, 25e-6
    link, node = LinkModel("10 Gbit/s, no overheads", 25e-6, 1.25e9), get_node("v100")
    job = schedule.Job(
        (schedule.Layer("fc", n, 0, flops),), schedule.make("wfbp"), "ps", 2, 2, 4, colocated=True, server_slice_s=c
    )
    assert job.machine_of == (0, 1, 0, 0, 0, 1, 1, 1)
    network = placed(flat(link), job.machine_of)
    w = 4 * (n + 1) / link.bandwidth_Bps
    hand_s = 3 * node.compute_s(flops) + 2 * link.latency_s + 2 * w + node.compute_s(4 * n) + c
    assert ex.shared_record(job, network, "v100", 32)["iteration_s"] == pytest.approx(hand_s, rel=1e-9)
    result = launch(schedule.program, job.ranks, "threads", topology=network, node="v100", args=(job,), sharing=True)
    pushes = [m for m in result.trace.messages if m.src == job.rank_of("sender", 0) and m.dst == 0]
    assert pushes and all(m.arrive_s == m.depart_s for m in pushes)
    crossing = sum(m.nbytes for m in result.trace.messages if job.machine_of[m.src] != job.machine_of[m.dst])
    assert sum(row["nbytes"] for row in link_load(result)) == pytest.approx(2 * crossing)  # egress + ingress
    assert crossing == job.iterations * 2 * 4 * (n + 1)  # worker 1's push and server 0's reply to it


def test_the_per_slice_server_cost_is_charged_once_per_slice():
    options = {"slice_params": 200_000}
    job = ex.make_job("p3", "alexnet", 2, servers=2, options=options, server_slice_s=1e-4)
    record = ex.simulate_schedule("p3", "alexnet", 2, "10Gbps", servers=2, options=options, server_slice_s=1e-4)
    spans = [s for s in record["result"].trace.spans if s.label.startswith("server's per-slice cost")]
    assert len(spans) == len(job.items) * job.iterations
    assert all(s.end_s - s.start_s == pytest.approx(1e-4) and job.role(s.rank)[0] == "server" for s in spans)
    assert len({s.label for s in spans}) == len(job.items)


def test_colocation_and_the_server_cost_refuse_what_they_cannot_model():
    with pytest.raises(ValueError, match="colocated"):
        ex.make_job("p3", "alexnet", 4, servers=2, colocated=True)
    with pytest.raises(ValueError, match="colocated"):
        ex.make_job("p3", "alexnet", 2, scheme="allreduce", colocated=True)
    with pytest.raises(ValueError, match="server_slice_s"):
        ex.make_job("p3", "alexnet", 2, server_slice_s=-1.0)
    with pytest.raises(ValueError, match="bigarray_bound"):
        ex.make_job("mxnet", "alexnet", 2, options={"bigarray_bound": 0})


def test_p3_reproduction_rows_and_cli(capsys):
    import json

    from dlsys.cli import main

    rows = p3_paper.p3_reproduction("digits", ["10Gbps"], workers=2)  # the shared-link replay: a small model
    assert rows[0]["gain"] == pytest.approx(rows[0]["mxnet_s"] / rows[0]["p3_s"] - 1)
    assert rows[0]["p3_s"] >= rows[0]["compute_s"] and rows[0]["paper_max_gain"] is None and rows[0]["sharing"]
    assert rows[0]["ceiling_gain"] == pytest.approx(
        rows[0]["mxnet_s"] / max(rows[0]["compute_s"], rows[0]["bound_s"]) - 1
    )
    assert p3_paper.P3_PAPER_MAX_GAIN == {"resnet50": 0.25, "vgg19": 0.66}
    assert main(["schedule", "--model", "digits", "--workers", "2", "--p3-paper", "--sweep", "10Gbps"]) == 0
    assert f"(at most {rows[0]['ceiling_gain']:+.0%} by the bound)" in capsys.readouterr().out
    assert main(["schedule", "--model", "digits", "--workers", "2", "--p3-paper", "--sweep", "10Gbps", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["mxnet_s"] == pytest.approx(rows[0]["mxnet_s"])
    assert main(["schedule", "--p3-paper"]) == 2
    assert "--sweep" in capsys.readouterr().err
    assert main(["schedule", "--p3-paper", "--sweep", "1Gbps", "--slice-params", "5"]) == 2
    assert "--slice-params: not an option of --p3-paper" in capsys.readouterr().err
    assert main(["schedule", "--model", "digits", "--workers", "2", "--colocated", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["colocated"] is True


def test_p3s_server_takes_the_first_layer_first():
    """P3's server handles the pushes it has in by priority (its ps-lite's receive queue,
    ``P3.server_priority``): the first layer's update comes back sooner than from a
    server that takes them as they come."""
    from dataclasses import replace

    from dlsys.schedule.p3 import P3

    class FirstComeP3(P3):
        server_priority = False

    job = ex.make_job("p3", "alexnet", 2, servers=2, iterations=2, colocated=True, options={"slice_params": 200_000})
    network = placed(flat(ex.parse_link("10Gbps")), job.machine_of)
    runs = {
        name: launch(schedule.program, job.ranks, "threads", topology=network, node="v100", args=(j,))
        for name, j in (("priority", job), ("first come", replace(job, policy=FirstComeP3(200_000))))
    }
    compute = job.rank_of("compute", 0)
    first = f"wait for {next(layer.name for layer in job.layers if layer.params)}"

    def first_forward_wait(result):
        return [s.end_s - s.start_s for s in result.trace.spans if s.rank == compute and s.label == first][-1]

    assert first_forward_wait(runs["priority"]) < first_forward_wait(runs["first come"])


@pytest.mark.slow
def test_the_anatomy_of_resnet50_under_p3():
    """docs/scheduling.md's anatomy (``p3_anatomy``), the facts the P3 claim's why rests
    on: with each rank's links its own, P3's server hands conv1's update back as soon as
    its pushes are in while MXNet's holds it behind the pushes queued before it, and P3
    gains over a fifth at 10 Gb/s; in the shared replay at 6 Gb/s P3's server holds it
    far longer, most of that waiting for pushes the run took first, and its senders post
    conv1's pushes long after MXNet's (the replay keeps the run's orders)."""
    apart = {r["policy"]: r for r in p3_paper.p3_anatomy("resnet50", "10Gbps", sharing=False)}
    assert apart["p3"]["held_s"] < 0.1 * apart["mxnet"]["held_s"]
    assert apart["mxnet"]["iteration_s"] / apart["p3"]["iteration_s"] - 1 > 0.2
    shared = {r["policy"]: r for r in p3_paper.p3_anatomy("resnet50", "6Gbps")}
    assert shared["p3"]["held_s"] > shared["mxnet"]["held_s"]
    assert shared["p3"]["kept_wait_s"] > 0.5 * shared["p3"]["held_s"]
    assert shared["p3"]["first_wait_s"] >= shared["p3"]["reply_s"]
    assert shared["p3"]["posted_s"] > 10 * shared["mxnet"]["posted_s"]  # its sender's backlog, in the run's order


def test_colocated_shared_runs_are_the_same_on_threads_and_processes():
    """The servers' and receivers' recv_any and the shared-link replay are deterministic."""
    runs = [
        ex.simulate_schedule(
            "p3",
            "alexnet",
            2,
            "10Gbps",
            servers=2,
            iterations=2,
            backend=backend,
            colocated=True,
            options={"slice_params": 2_000_000},
            server_slice_s=schedule.MXNET_SERVER_SLICE_S,
        )
        for backend in ("threads", "processes")
    ]
    assert runs[0]["result"].clocks_s == runs[1]["result"].clocks_s


def test_the_shared_replay_keeps_p3s_sockets_at_their_high_water_mark():
    """Co-located, the worker's pushes share its machine's egress with its server's replies,
    so they go slower than the run thought; P3's sender (and server) still posts a slice to
    a peer only while that peer's socket holds at most the message on its wire and one
    queued (ZMQ_SNDHWM = 1): slice i + 2 to a peer leaves once slice i's last byte has left
    (its flow's completion minus the route's latency: Communicator.wait_left, resolved on
    the replay's flows), and the fast replay gives the reading replay's clocks."""
    job = ex.make_job(
        "p3",
        "alexnet",
        2,
        servers=2,
        iterations=2,
        options={"slice_params": 2_000_000},
        colocated=True,
        server_slice_s=schedule.MXNET_SERVER_SLICE_S,
    )
    network = placed(flat(ex.parse_link("10Gbps")), job.machine_of)
    result = launch(schedule.program, job.ranks, "threads", topology=network, node="v100", args=(job,), sharing=True)
    latency_s = network.link.latency_s
    paced = [job.rank_of("sender", w) for w in range(job.workers)] + list(range(job.servers))
    sent = [m for m in result.trace.messages if m.src in paced and m.phase != SIGNAL]
    assert len(sent) == 2 * job.iterations * len(job.items) * job.workers
    for src, dst in {(m.src, m.dst) for m in sent}:
        on_socket = sorted((m for m in sent if (m.src, m.dst) == (src, dst)), key=lambda m: m.depart_s)
        remote = job.machine_of[dst] != job.machine_of[src]
        left = [m.arrive_s - (latency_s if remote else 0.0) for m in on_socket]
        assert all(b.depart_s >= a_left - 1e-12 for a_left, b in zip(left, on_socket[2:])), (src, dst)
    fast = launch(
        schedule.program, job.ranks, "threads", topology=network, node="v100", args=(job,), sharing=True, record=False
    )
    assert fast.clocks_s == result.clocks_s


def test_overlap_by_bisection_is_the_sum_over_every_pair():
    """experiments.schedule_record._overlap_s skips the pairs that cannot meet: the same float as
    the sum over every pair, for ordered spans and for any others."""
    from dlsys.experiments.schedule_record import _overlap_s

    rng = np.random.default_rng(3)
    for _ in range(50):
        cuts = np.sort(rng.random(2 * 30)).tolist()
        computing = list(zip(cuts[::2], cuts[1::2]))
        busy = sorted((a, a + w) for a, w in zip(rng.random(20).tolist(), (rng.random(20) / 10).tolist()))
        for spans in (computing, computing[::-1]):
            every = sum(max(0.0, min(b, d) - max(a, c)) for a, b in busy for c, d in spans)
            assert _overlap_s(busy, spans) == every
