"""The parameter server: key slicing, push/pull, BSP/SSP/ASP consistency, stragglers,
determinism across backends, checkpoint/restore, failures."""

import re
from dataclasses import replace

import numpy as np
import pytest

import dlsys
from dlsys.experiments import train
from dlsys.ps import KeyLayout, KVServer, KVWorker
from dlsys.train import TrainConfig, build_model

CONFIG = TrainConfig(epochs=2)
STRAGGLER = (3, 4.0)  # worker 3 is 4x slower
FAST_LINK = "rdma-edr"  # communication cheap enough that compute (and so the straggler) matters


def test_key_layout_slices_large_tensors_across_servers():
    layout = KeyLayout([5, 3, 4], servers=3)  # flat space 0..11, ranges [0,4) [4,8) [8,12)
    assert layout.bounds == [0, 4, 8, 12]
    parts = layout.parts((0, 2))  # elements 0..4 and 8..11
    assert [p.tolist() for p, _ in parts] == [[0, 1, 2, 3], [4], [5, 6, 7, 8]]
    assert [local.tolist() for _, local in parts] == [[0, 1, 2, 3], [0], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="servers must be in 1..12"):
        KeyLayout([5, 3, 4], servers=13)


def test_push_and_pull_of_a_key_subset_through_two_servers():
    """A worker pushes gradient g for key 1 only; with lr 1 and no momentum the servers
    apply w <- w - g / W, and a pull of keys (1, 0) returns them in that order."""
    config = TrainConfig(lr=1.0, momentum=0.0, dtype="float64")
    model = build_model(config)
    layout = KeyLayout([p.size for p in model.param_slices()], servers=2)
    sizes = [p.size for p in model.param_slices()]

    def program(comm):
        if comm.rank < 2:
            server = KVServer(
                comm, layout, config, workers=1, consistency="asp", staleness=0, budget=2, initial=model.params
            )
            server.serve()
            return server.weights
        kv = KVWorker(comm, layout)
        kv.push((1,), np.ones(sizes[1]))
        clock, values = kv.wait(kv.pull((1, 0)))
        kv.push((0,), np.zeros(sizes[0]))
        assert kv.wait(kv.pull((0,))) is None  # the budget of 2 gradients is spent: stop
        return clock, values

    clock, values = dlsys.launch(program, 3, "threads").values[2]
    w = model.params
    assert clock == 1
    assert np.array_equal(values[: sizes[1]], w[sizes[0] : sizes[0] + sizes[1]] - 1.0)
    assert np.array_equal(values[sizes[1] :], w[: sizes[0]])


def test_bsp_server_aggregation_is_synchronous_sgd():
    """The servers average the W gradients of a round and update once: the same weights as
    all-reduce data parallelism (float64, relative 1e-6), with one or two servers."""
    config = replace(CONFIG, dtype="float64", batch_size=8)
    reference = train("allreduce", config, 4)["params"]
    for servers in (1, 2):
        got = train("ps-bsp", config, 4, servers=servers)["params"]
        assert np.max(np.abs(got - reference)) <= 1e-6 * np.max(np.abs(reference))


def staleness_in_trace(record) -> list[int]:
    """Staleness of every answered pull, read back from the reply labels in the trace."""
    labels = [m.label for m in record["result"].trace.messages if m.label.startswith("pull reply")]
    return [int(c) - int(s) for c, s in (re.findall(r"\d+", label) for label in labels)]


@pytest.mark.parametrize("s", [0, 1, 3])
def test_ssp_never_reads_weights_more_than_s_clocks_stale(s):
    record = train("ps-ssp", CONFIG, 4, staleness=s, straggler=STRAGGLER, link=FAST_LINK)
    reads = record["reads"]
    assert max(r["clock"] - r["slowest"] for r in reads) == record["max_staleness"] == s
    assert max(staleness_in_trace(record)) == s
    assert len(staleness_in_trace(record)) == len(reads)


def test_asp_is_unbounded_and_finishes_before_bsp_with_a_4x_straggler():
    bsp = train("ps-bsp", CONFIG, 4, straggler=STRAGGLER, link=FAST_LINK)
    ssp = train("ps-ssp", CONFIG, 4, staleness=2, straggler=STRAGGLER, link=FAST_LINK)
    asp = train("ps-asp", CONFIG, 4, straggler=STRAGGLER, link=FAST_LINK)
    assert asp["virtual_time_s"] < 0.6 * bsp["virtual_time_s"]
    assert asp["virtual_time_s"] < ssp["virtual_time_s"] <= bsp["virtual_time_s"]
    assert asp["max_staleness"] > 10 and bsp["max_staleness"] == 0
    steps = {r: sum(1 for row in asp["losses"] if row["rank"] == r) for r in range(1, 5)}
    assert steps[4] < steps[1] / 2  # under ASP the straggler (rank 4) simply does less of the work
    assert asp["gradients_applied"] == bsp["gradients_applied"] == 2 * 10 * 4


def test_asynchronous_runs_are_deterministic_on_every_backend():
    kwargs = dict(servers=2, straggler=STRAGGLER, link=FAST_LINK)
    threads = train("ps-asp", replace(CONFIG, epochs=1), 4, **kwargs)
    again = train("ps-asp", replace(CONFIG, epochs=1), 4, **kwargs)
    processes = train("ps-asp", replace(CONFIG, epochs=1), 4, backend="processes", **kwargs)
    for other in (again, processes):
        assert np.array_equal(other["params"], threads["params"])
        assert other["result"].trace == threads["result"].trace


def test_server_checkpoint_and_restore_resume_bit_identically(tmp_path):
    config = replace(CONFIG, epochs=3)
    straight = train("ps-bsp", config, 4, servers=2)
    train("ps-bsp", replace(config, epochs=1), 4, servers=2, checkpoint=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server0.npz", "server1.npz"]
    resumed = train("ps-bsp", config, 4, servers=2, resume=tmp_path)
    assert np.array_equal(resumed["params"], straight["params"])
    assert resumed["gradients_applied"] == straight["gradients_applied"]


def test_restoring_a_checkpoint_for_another_world_is_a_clear_error(tmp_path):
    train("ps-bsp", replace(CONFIG, epochs=1), 4, checkpoint=tmp_path)
    with pytest.raises(dlsys.RankFailed, match="another model, server group or worker count"):
        train("ps-bsp", CONFIG, 3, resume=tmp_path)


def test_under_asp_a_failed_worker_does_not_stop_training():
    record = train("ps-asp", replace(CONFIG, epochs=10), 4, fail=(1, 5))
    assert record["failed"] == [{"worker": 1, "clock": 5, "time_s": pytest.approx(record["failed"][0]["time_s"])}]
    assert record["gradients_applied"] == 10 * 10 * 4  # the others did the failed worker's share
    assert record["test_accuracy"] >= 0.95
    assert sum(1 for row in record["losses"] if row["rank"] == 2) == 5


def test_under_ssp_a_failed_worker_leaves_the_clock_gate():
    record = train("ps-ssp", CONFIG, 4, staleness=1, fail=(0, 3))
    assert record["failed"][0]["worker"] == 0 and record["max_staleness"] <= 1


def test_under_bsp_a_failed_worker_fails_the_run_naming_it():
    with pytest.raises(dlsys.RankFailed, match=r"worker 2 \(rank 3\) failed at clock 4; BSP cannot continue"):
        train("ps-bsp", CONFIG, 4, fail=(2, 4))
