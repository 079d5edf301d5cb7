"""The replay (dlsys/comm/replay/plain.py): without sharing it gives the run's times bit for bit
(every collective algorithm, every golden trace); with sharing, the closed cases of the
flow model (k messages on one link, an incast, a ring on a full-bisection fat tree), the
max-min properties, times pinned exactly, the fast path (dlsys/comm/replay/fast_path.py) equal
to the plain loop, the same results on every backend, and bad input refused."""

import gzip
import json
import math
import sys

import make_golden  # noqa: E402
import numpy as np
import pytest

import dlsys
from dlsys import collectives, schedule
from dlsys.comm.backends.mpi import mpi_unavailable
from dlsys.comm.replay import OpLog, link_load, replay
from dlsys.comm.supervise import RunSpec
from dlsys.experiments import collective_program, simulate_collective
from dlsys.experiments.schedule import make_job
from dlsys.machine.net import LinkModel
from dlsys.machine.topology import TOPOLOGY_PRESETS, fat_tree, flat, get_network, placed, two_level

LAUNCH = sys.modules["dlsys.comm.launch"]


@pytest.fixture
def logged(monkeypatch):
    """Every launch in the test keeps its ranks' operations (result.ops) beside its trace."""
    monkeypatch.setattr(LAUNCH, "RunSpec", lambda *fields: RunSpec(*fields[:10], True))


def assert_replays_the_run(result):
    again = replay(result.ops, result.network, result.nodes)
    assert again.trace.messages == result.trace.messages
    assert again.trace.spans == result.trace.spans
    assert again.clocks_s == result.clocks_s


# --- sharing off: the run's times, bit for bit ------------------------------------------

ALGORITHMS = [(c, a) for c, names in collectives.ALGORITHMS.items() for a in names]


@pytest.mark.parametrize("collective,algorithm", ALGORITHMS, ids="/".join)
def test_without_sharing_the_replay_gives_the_run_bit_for_bit(logged, collective, algorithm):
    for ranks in (2, 3, 5, 8):
        for network in ("tcp-10gbe", two_level("rdma-edr", 2, 4.0)):
            result = dlsys.launch(
                collective_program,
                ranks,
                "threads",
                topology=network,
                seed=1,
                args=(collective, algorithm, 1001, "float32", "sum", 1),
                charge_reductions=True,
                sharing=False,  # the per-pair clock, by name on the tree (its default there is shared links)
            )
            assert_replays_the_run(result)


with gzip.open(make_golden.PATH, "rt") as f:
    GOLDEN = json.load(f)


def assert_replays_the_golden(name, result):
    again = replay(result.ops, result.network, result.nodes)
    replayed = LAUNCH.LaunchResult(result.values, again.trace, again.clocks_s, 0.0, "", result.network, result.nodes)
    got = json.loads(json.dumps(make_golden.trace_record(replayed)))
    assert got == {k: GOLDEN[name][k] for k in ("messages", "spans", "clocks_s")}, name


def test_without_sharing_the_replay_gives_every_golden_collective_trace(logged):
    for name, collective, algorithm, ranks in make_golden.collective_cases():
        assert_replays_the_golden(name, make_golden.run_collective(collective, algorithm, ranks))


@pytest.mark.parametrize("strategy", make_golden.TRAIN_STRATEGIES)
def test_without_sharing_the_replay_gives_every_golden_training_trace(logged, strategy):
    """ps-asp and ps-ssp receive from any source (recv_any): the replay keeps the run's choices."""
    result, _ = make_golden.run_train(strategy)
    assert_replays_the_golden(f"train/{strategy}", result)


# --- sharing on: the closed cases -------------------------------------------------------

BARE = LinkModel("bare", 1e-6, 1e9)  # no CPU overheads: every send of a rank is ready at once
N = 3 * 2**20


def fan_out(comm, k):
    """Rank 0 sends one message to each of ranks 1..k at once."""
    if comm.rank == 0:
        for dst in range(1, k + 1):
            comm.send(np.zeros(N, np.uint8), dst)
    elif comm.rank <= k:
        comm.recv(source=0)


def incast(comm):
    if comm.rank == 0:
        for src in range(1, comm.size):
            comm.recv(source=src)
    else:
        comm.send(np.zeros(N, np.uint8), 0)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_k_messages_on_one_link_each_take_k_times_longer(k):
    wire_s = N / BARE.bandwidth_Bps
    shared = dlsys.launch(fan_out, k + 1, "threads", link=BARE, args=(k,), sharing=True)
    assert [m.arrive_s for m in shared.trace.messages] == pytest.approx([BARE.latency_s + k * wire_s] * k, rel=1e-13)
    fifo = dlsys.launch(fan_out, k + 1, "threads", link=BARE, args=(k,))  # DESIGN.md: one after the other
    assert [m.arrive_s for m in fifo.trace.messages] == pytest.approx(
        [BARE.latency_s + (i + 1) * wire_s for i in range(k)], rel=1e-13
    )


@pytest.mark.parametrize("p", [2, 4, 7])
def test_an_incast_of_p_messages_costs_p_n_over_B_at_the_receiver(p):
    shared = dlsys.launch(incast, p + 1, "threads", link=BARE, sharing=True)
    assert shared.virtual_time_s == pytest.approx(BARE.latency_s + p * N / BARE.bandwidth_Bps, rel=1e-13)
    assert dlsys.launch(incast, p + 1, "threads", link=BARE).virtual_time_s == pytest.approx(shared.virtual_time_s)


def test_a_ring_on_a_full_bisection_fat_tree_equals_the_closed_form():
    """One flow per link: the flat closed form 2(p-1)(alpha + n/(pB)), bit for bit the flat run."""
    tree = fat_tree(4, 1.0, "rdma-edr")
    shared = simulate_collective("allreduce", "ring", 16, "16MiB", topology=tree, sharing=True)
    flat = simulate_collective("allreduce", "ring", 16, "16MiB", link="rdma-edr")
    assert shared["virtual_time_s"] == flat["virtual_time_s"]
    assert shared["virtual_time_s"] == pytest.approx(flat["closed_form_s"], rel=1e-12)


def test_sharing_gives_a_lone_crossing_message_the_whole_link():
    """On a two-level tree whose upper level is 4:1 oversubscribed, a ring sends one message
    across each supernode boundary: the static model charges it a quarter of the link,
    sharing gives it the whole link (the uplink, 4 B / 4 = B, carries one message)."""
    tree = two_level("rdma-edr", 4, 4.0)
    static = simulate_collective("allreduce", "ring", 8, "16MiB", topology=tree, sharing=False)
    shared = simulate_collective("allreduce", "ring", 8, "16MiB", topology=tree, sharing=True)
    flat = simulate_collective("allreduce", "ring", 8, "16MiB", link="rdma-edr")
    assert shared["virtual_time_s"] == flat["virtual_time_s"] < static["virtual_time_s"] / 2
    assert shared["closed_form_s"] is None and shared["sharing"]


def all_to_all(comm):
    """Every rank sends 64 KiB to every other, staggered by rank, then receives them all."""
    comm.compute(seconds=1e-5 * comm.rank)
    for shift in range(1, comm.size):
        comm.send(np.zeros(1 << 16, np.uint8), (comm.rank + shift) % comm.size)
    for shift in range(1, comm.size):
        comm.recv(source=(comm.rank - shift) % comm.size)


def test_max_min_no_link_carries_more_than_its_capacity():
    """All-to-all on a 2:1 fat tree: per time bin, no link carries more than capacity x bin width."""
    tree = fat_tree(4, 2.0, "rdma-edr")
    result = dlsys.launch(all_to_all, 16, "threads", topology=tree, sharing=True)
    fabric = tree.fabric(16)
    rows = link_load(result, bins=40)
    assert rows and sum(r["nbytes"] for r in rows if r["link"].startswith("egress")) == pytest.approx(
        sum(m.nbytes for m in result.trace.messages if m.src != m.dst), rel=1e-9
    )
    for r in rows:
        assert r["nbytes"] <= fabric.links[r["link_id"]].capacity_Bps * (r["end_s"] - r["start_s"]) * (1 + 1e-9)
    saturated = [
        r for r in rows if r["nbytes"] >= 0.99 * fabric.links[r["link_id"]].capacity_Bps * (r["end_s"] - r["start_s"])
    ]
    assert saturated  # max-min fills its bottlenecks


# --- sharing on: pinned times, and the fast path equal to the plain loop ----------------


def shared_runs():
    """Runs whose replays with sharing are pinned below: collectives on a 4:1 two-level tree,
    a staggered all-to-all on a 2:1 fat tree (the max-min solver at work), training with
    recv_any (ps-asp) and a pipeline (model-parallel) on a flat network's shared egress."""
    for algorithm in ("ring", "hierarchical"):
        yield (
            f"allreduce/{algorithm}",
            dlsys.launch(
                collective_program,
                6,
                "threads",
                topology=two_level("rdma-edr", 2, 4.0),
                seed=1,
                args=("allreduce", algorithm, 100_001, "float32", "sum", 1),
                charge_reductions=True,
            ),
        )
    yield "all_to_all", dlsys.launch(all_to_all, 16, "threads", topology=fat_tree(4, 2.0, "rdma-edr"))
    for strategy in ("ps-asp", "model-parallel"):
        yield f"train/{strategy}", make_golden.run_train(strategy)[0]


# every rank's clock with sharing, from replay.py's plain loop at 2e8d7a2 (before the fast path);
# the ring's and ps-asp's since a rank's messages to one peer queue on their connection
# (FlowNetwork's connections; p3share): there a message was posted while the previous one to
# the same peer was still moving, and the two shared the link instead of following each other
SHARED_CLOCKS_S = {
    "allreduce/ring": [
        0.00012406898,
        0.00011993553999999999,
        0.00012406834000000002,
        0.00011993489999999999,
        0.00012406834000000002,
        0.00011993553999999999,
    ],
    "allreduce/hierarchical": [
        0.00017363606000000002,
        0.00020653638,
        0.0001736329,
        0.00020653322,
        0.00017363606000000002,
        0.00020653638,
    ],
    "all_to_all": [
        0.00029393130715700387,
        0.0002939318531034044,
        0.000293115685635668,
        0.0002931162315820686,
        0.00029291896949466616,
        0.0002929195154410667,
        0.000292576112351809,
        0.0002925766582982096,
        0.0002921475409232376,
        0.0002921480868696381,
        0.0002916503980660947,
        0.00029165094401249525,
        0.0002910971513128479,
        0.0002910976972592485,
        0.0002732503992966799,
        0.000273406130262143,
    ],
    "train/ps-asp": [0.006084431199999991, 0.006101423199999991, 0.005984521599999993, 0.006117435199999991],
    "train/model-parallel": [0.008390377599999938, 0.008332217599999938, 0.00825381743999994],
}


def test_sharing_on_times_are_pinned_exactly(logged):
    for name, result in shared_runs():
        fabric = result.network.fabric(len(result.ops))
        for fast in (False, True):
            assert (
                replay(result.ops, result.network, result.nodes, fabric, False, fast).clocks_s == SHARED_CLOCKS_S[name]
            ), (name, fast)


def assert_fast_replay_is_the_plain_one(result):
    fabric = result.network.fabric(len(result.ops))
    plain = replay(result.ops, result.network, result.nodes, fabric, record=False)
    fast = replay(result.ops, result.network, result.nodes, fabric, record=False, fast=True)
    assert fast.clocks_s == plain.clocks_s and fast.flow_events == plain.flow_events


@pytest.mark.parametrize("collective,algorithm", ALGORITHMS, ids=[f"{c}/{a}" for c, a in ALGORITHMS])
def test_with_sharing_the_fast_replay_gives_the_plain_loops_times(logged, collective, algorithm):
    for ranks in (3, 8):
        result = dlsys.launch(
            collective_program,
            ranks,
            "threads",
            topology=two_level("rdma-edr", 2, 4.0),
            seed=1,
            args=(collective, algorithm, 1001, "float32", "sum", 1),
            charge_reductions=True,
        )
        assert_fast_replay_is_the_plain_one(result)


@pytest.mark.parametrize("strategy", make_golden.TRAIN_STRATEGIES)
def test_with_sharing_the_fast_replay_gives_the_plain_loops_times_in_training(logged, strategy):
    assert_fast_replay_is_the_plain_one(make_golden.run_train(strategy)[0])


def test_with_sharing_the_fast_replay_takes_signals_and_waits():
    """A scheduler's ranks: a compute thread signals its communication thread, which waits
    until its own times (wait_until); launch without a trace replays on the fast path."""
    job = make_job("p3", "resnet50", 2, iterations=2)
    result = dlsys.launch(
        schedule.program,
        job.ranks,
        "threads",
        link=LinkModel("bare", 1e-6, 1e9),
        node="v100",
        args=(job,),
        sharing=True,
        record=False,
    )
    assert {op[0] for log in result.ops for op in log.table} >= {"signal", "wait_signal", "wait", "compute"}
    fabric = result.network.fabric(job.ranks)
    assert replay(result.ops, result.network, result.nodes, fabric, record=False).clocks_s == result.clocks_s
    assert_fast_replay_is_the_plain_one(result)


@pytest.mark.parametrize("labels", [False, True])
def test_the_op_log_keeps_each_distinct_send_and_receive_once(monkeypatch, labels):
    """A ring's ranks send two sizes to one neighbour and receive from the other: 3 rows.
    With labels (a trace to record) every send is its own row; the log reads the same."""
    monkeypatch.setattr(LAUNCH, "RunSpec", lambda *fields: RunSpec(*fields[:10], True, labels))
    log = dlsys.launch(
        collective_program, 8, "threads", seed=1, args=("allreduce", "ring", 1001, "float32", "sum", 1), record=labels
    ).ops[0]
    sends = [op for op in log if op[0] == "send"]
    assert isinstance(log, OpLog) and len(log) == 2 * len(sends) == 2 * 2 * 7
    assert len(log.table) == (len(sends) + 1 if labels else 3)
    assert all(op[4] for op in sends) == labels


def test_the_lean_rings_log_replays_as_the_reading_rings():
    """simulate_collective runs the lean ring (comm/fast.py logs its messages); without a
    trace its log has no labels and the fast replay times it, with one the plain loop."""
    kwargs = {"topology": two_level("rdma-edr", 2, 4.0), "sharing": True}
    lean = simulate_collective("allreduce", "ring", 8, "1MiB", record=False, **kwargs)
    traced = simulate_collective("allreduce", "ring", 8, "1MiB", **kwargs)
    assert lean["result"].clocks_s == traced["result"].clocks_s
    assert all(len(log.table) == 2 for log in lean["result"].ops)  # equal blocks: one send, one receive


# --- the same on every backend ----------------------------------------------------------


def recv_any_ring(comm):
    """recv_any decides by the run's times; the replay keeps its choices."""
    x = np.arange(4096, dtype=np.float32) + comm.rank
    if comm.rank == 0:
        order = [comm.recv_any(tag=4)[0] for _ in range(comm.size - 1)]
    else:
        order = None
        comm.compute(seconds=1e-3 * (comm.size - comm.rank))
        comm.send(x, 0, tag=4)
    return order, collectives.allreduce(comm, x, algorithm="ring")


BACKENDS = [
    "processes",
    pytest.param("mpi", marks=pytest.mark.skipif(mpi_unavailable() is not None, reason=str(mpi_unavailable()))),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sharing_gives_the_same_times_on_every_backend(backend):
    kwargs = {"topology": two_level("rdma-edr", 2, 4.0), "seed": 3, "sharing": True}
    here = dlsys.launch(recv_any_ring, 4, "threads", **kwargs)
    there = dlsys.launch(recv_any_ring, 4, backend, **kwargs)
    assert here.values[0][0] == there.values[0][0] == [3, 2, 1]
    assert there.trace == here.trace and there.clocks_s == here.clocks_s and there.sharing


# --- bad input --------------------------------------------------------------------------


def test_every_topology_preset_has_a_fabric_that_holds_its_ranks():
    for name in TOPOLOGY_PRESETS:
        network = get_network(name)
        fabric = network.fabric(min(64, network.max_nodes))
        assert fabric.nodes >= min(64, network.max_nodes)


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda: dlsys.launch(incast, 4, "threads", topology="torus", sharing=True),
            r"topology: unknown topology 'torus'; valid: .*flat.*two-level.*taihulight.*fat-tree.*gpu-cluster",
        ),
        (
            lambda: dlsys.launch(incast, 20, "threads", topology=fat_tree(4), sharing=True),
            r"world_size must be an integer in 1\.\.16 \(the fat-tree topology holds 16 nodes\), got 20",
        ),
        (lambda: fat_tree(4, -2.0), r"oversubscription must be a finite number >= 1"),
        (lambda: two_level("rdma-edr", 4, 0.5), r"oversubscription must be a finite number >= 1"),
        (lambda: fat_tree(5), r"k must be an even integer >= 2"),
        (
            lambda: dlsys.launch(incast, 4, "threads", sharing="yes"),
            r"sharing must be None \(the network's own model.*True or False",
        ),
    ],
)
def test_bad_input_is_refused_before_any_rank_starts(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_cli_simulates_with_sharing(capsys):
    from dlsys.cli import main

    assert main(["simulate", "allreduce", "--ranks", "64", "--size", "1MiB", "--topology", "two-level"]) == 0
    out = capsys.readouterr().out
    assert "messages share links" in out and "none with shared links" in out  # the default across supernodes
    assert main(["simulate", "allreduce", "--ranks", "8", "--size", "1MiB", "--topology", "two-level"]) == 0
    out = capsys.readouterr().out
    assert "messages share links" not in out and "relative error" in out  # 8 ranks: one supernode, per pair
    assert main(["simulate", "allreduce", "--topology", "torus"]) == 2  # argparse's usage error
    assert "invalid choice: 'torus'" in capsys.readouterr().err
    assert main(["simulate", "allreduce", "--sharing"]) == 2  # the default now: no flag to remember
    assert "--sharing: not an option" in capsys.readouterr().err


def _two_per_machine(comm, pairs):
    """Rank src sends 1e6 bytes to rank dst for each (src, dst) in pairs, all at t = 0."""
    for src, dst in pairs:
        if comm.rank == src:
            comm.send(np.zeros(250_000, np.float32), dst, 7)
    return [comm.recv(source=src, tag=7).nbytes for src, dst in pairs if comm.rank == dst]


@pytest.mark.parametrize(
    "pairs, arrive_s",
    [
        ([(0, 2)], 1e-6 + 1e-3),  # a lone stream gets its machine's whole link
        ([(0, 2), (1, 3)], 1e-6 + 2e-3),  # machine 0's two ranks share its egress: half each
        ([(0, 1)], 0.0),  # one machine: the loopback, no link, no time
    ],
)
def test_ranks_placed_on_machines_share_the_machines_links(pairs, arrive_s):
    network = placed(flat(LinkModel("bare", 1e-6, 1e9)), [0, 0, 1, 1])
    assert network.link_between(0, 1).bandwidth_Bps == math.inf and network.link_between(0, 2).bandwidth_Bps == 1e9
    result = dlsys.launch(_two_per_machine, 4, "threads", topology=network, args=(pairs,), sharing=True)
    assert [m.arrive_s for m in result.trace.messages] == [pytest.approx(arrive_s, rel=1e-12)] * len(pairs)
    fabric = network.fabric(4)
    assert fabric.route(0, 1) == () and fabric.route(1, 2) == fabric.route(0, 2) == (0, 3)


def test_placed_refuses_machines_the_topology_lacks():
    with pytest.raises(ValueError, match="machine_of"):
        placed(flat("tcp-10gbe", max_nodes=2), [0, 2])
    with pytest.raises(ValueError, match="machine_of"):
        placed(flat("tcp-10gbe"), [])
