"""Compressed communication: allgatherv, the compressed all-reduce's values and honest bytes,
the charged compute, training with every method (all-reduce and parameter server)."""

import math

import numpy as np
import pytest

from dlsys import collectives, launch
from dlsys.collectives.compressed import compressed_allreduce
from dlsys.comm import RankFailed
from dlsys.compress import COMPRESSORS, ResidualMemory, frame, make, payload_nbytes, unframe
from dlsys.experiments import train
from dlsys.machine.net import get_node
from dlsys.train import Compression, TrainConfig

N = 1000


def local_gradient(rank, n=N):
    return np.random.default_rng([3, rank]).standard_normal(n).astype(np.float32)


def options(name):
    return {"ratio": 0.05} if name in ("topk", "randomk", "dropping", "dgc") else {}


def compressed_program(comm, name, steps=1):
    compressor = make(name, seed=11, rank=comm.rank, **options(name))
    memory = ResidualMemory()
    outs = [compressed_allreduce(comm, local_gradient(comm.rank), compressor, memory, "w") for _ in range(steps)]
    return outs, memory.residuals["w"]


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_allgatherv_of_uneven_and_empty_blocks(backend):
    def program(comm):
        return collectives.allgatherv(comm, np.arange(comm.rank * 3, dtype=np.float64) + comm.rank)

    result = launch(program, 4, backend)
    expected = [np.arange(r * 3, dtype=np.float64) + r for r in range(4)]
    for got in result.values:
        assert [g.tolist() for g in got] == [e.tolist() for e in expected]
    assert 0 in [m.nbytes for m in result.trace.messages]  # rank 0's empty block travels as an empty message


def test_allgatherv_checks_its_arguments():
    with pytest.raises(RankFailed, match="1-D"):
        launch(lambda comm: collectives.allgatherv(comm, np.zeros((2, 2))), 2, "threads")
    with pytest.raises(RankFailed, match="max_elements"):
        launch(lambda comm: collectives.allgatherv(comm, np.zeros(comm.rank * 5), max_elements=4), 2, "threads")


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_every_rank_gets_the_same_mean_of_the_decoded_payloads(name):
    p = 4
    result = launch(compressed_program, p, "threads", args=(name,))
    outs = [v[0][0] for v in result.values]
    assert all(np.array_equal(outs[0], o) for o in outs)
    # oracle: each rank's own decode (its gradient minus its residual) averaged in numpy
    decoded = [local_gradient(r) - v[1] for r, v in enumerate(result.values)]
    # fp16 payloads are summed in half precision (as Horovod's fp16 all-reduce does): ulp 2**-8 near 4
    assert np.allclose(outs[0], np.mean(decoded, axis=0), rtol=1e-5, atol=1e-2 if name == "fp16" else 1e-6)


def test_no_compression_equals_the_plain_allreduce():
    def program(comm):
        g = local_gradient(comm.rank)
        return compressed_allreduce(comm, g, make("none")), collectives.allreduce(comm, g, op="mean")

    for compressed, plain in launch(program, 4, "threads").values:
        assert np.array_equal(compressed, plain)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_messages_carry_the_encoded_bytes(name):
    """Byte oracle per communication pattern, with each rank's payload rebuilt outside the run."""
    p = 4
    result = launch(compressed_program, p, "threads", args=(name,))
    compressor = COMPRESSORS[name]
    payload_sizes = []
    for r in range(p):  # the same compressor state as inside the run: same seed, same first call
        c = make(name, seed=11, rank=r, **options(name))
        scale = {}
        if c.shares_scale:
            scale["scale"] = float(max(np.float32(c.local_scale(local_gradient(q))) for q in range(p)))
        payload_sizes.append([a.nbytes for a in c.compress(local_gradient(r), "w", **scale)[0]])
    total = sum(m.nbytes for m in result.trace.messages)
    if compressor.communication == "allreduce":  # a ring all-reduce per part: 2 (p - 1) n / p per rank
        expected = sum(2 * (p - 1) * nbytes for nbytes in payload_sizes[0])
    else:
        payload_total = sum(sum(sizes) for sizes in payload_sizes)
        expected = (p - 1) * payload_total  # every payload passes p - 1 links
        if compressor.communication == "allgatherv":  # the part lengths first: int64 per part
            expected += p * (p - 1) * 8 * len(payload_sizes[0])
    if compressor.shares_scale:  # TernGrad's scaler agreement: a float32 all-reduce (max)
        expected += 2 * (p - 1) * 4
    assert total == expected


def test_terngrad_ranks_share_the_largest_scaler():
    def program(comm):
        c = make("terngrad", seed=0, rank=comm.rank)
        g = local_gradient(comm.rank) * (comm.rank + 1)
        return compressed_allreduce(comm, g, c)

    outs = launch(program, 3, "threads").values
    s = np.float32(max(np.abs(local_gradient(r) * (r + 1)).max() for r in range(3)))
    # every decoded entry is a multiple of s / 3 (a sum of three codes in {-s, 0, s}, over 3)
    multiples = outs[0] / (s / 3)
    assert np.allclose(multiples, np.round(multiples), atol=1e-4)


def test_terngrad_clip_bounds_the_scaler():
    g = local_gradient(0)
    c = make("terngrad", clip=2.5)
    assert c.local_scale(g) == pytest.approx(min(np.abs(g).max(), 2.5 * g.std()))
    with pytest.raises(ValueError, match="clip"):
        make("terngrad", clip=0)


def test_compression_is_charged_on_the_roofline():
    node = get_node("laptop-cpu")

    def program(comm):
        compressed_allreduce(comm, local_gradient(comm.rank), make("topk", ratio=0.01), name="w")
        return [(s.label, s.end_s - s.start_s) for s in comm.spans if s.kind == "compute"]

    spans = dict(launch(program, 2, "threads", node=node).values[0])
    (cflops, cbytes), (dflops, dbytes) = make("topk").cost(N, 4)
    assert spans["compress w"] == pytest.approx(max(cflops / node.sustained_flops, cbytes / node.memory_bandwidth_Bps))
    assert spans["decompress w"] == pytest.approx(
        max(dflops / node.sustained_flops, dbytes / node.memory_bandwidth_Bps)
    )


def test_frame_round_trip_and_size():
    payload = (np.arange(5, dtype=np.int32), np.linspace(0, 1, 5).astype(np.float32), np.zeros(0, np.uint8))
    buffer = frame(payload)
    assert buffer.nbytes == payload_nbytes(payload) + 8 + 16 * 3
    back = unframe(buffer)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(payload, back))


def test_identical_results_and_traces_on_threads_and_processes():
    runs = [launch(compressed_program, 3, backend, args=("dgc", 2)) for backend in ("threads", "processes")]
    assert runs[0].trace == runs[1].trace
    for a, b in zip(runs[0].values, runs[1].values):
        assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0]))


# --- training ---------------------------------------------------------------------------

TRAINING = {  # method -> options that reach the bar on digits in 10 epochs
    "none": (),
    "fp16": (),
    "int8": (),
    "onebit": (),
    "terngrad": (),
    "qsgd": (("bits", 4),),
    "topk": (("ratio", 0.005),),
    "randomk": (("ratio", 0.25),),  # random-k's variance grows as n / k
    "dropping": (("ratio", 0.01),),
    # DGC at the paper's 0.1%, biases dense as its authors send them (see dlsys.compress.dgc)
    "dgc": (("ratio", 0.001), ("warmup_epochs", 0)),
}


@pytest.fixture(scope="module")
def dense_record():
    return train("allreduce", TrainConfig(epochs=10), 4)


def test_training_covers_every_method():
    assert set(TRAINING) == set(COMPRESSORS)


@pytest.mark.parametrize("name", sorted(TRAINING))
def test_every_method_trains_digits(name, dense_record):
    record = train("allreduce", TrainConfig(epochs=10), 4, compression=Compression(name, TRAINING[name]))
    assert record["test_accuracy"] >= 0.93
    if name in ("topk", "dgc"):
        assert dense_record["bytes_moved"] >= 30 * record["bytes_moved"]
    assert record["compression_ratio"] == 1.0 if name == "none" else record["compression_ratio"] > 1.9


def test_dgc_sends_biases_dense_and_keeps_what_its_rule_gives():
    """Each weight matrix keeps ceil(0.1% of its entries), every bias goes whole: the
    record's kept fraction is that count over the digits MLP's parameters."""
    record = train("allreduce", TrainConfig(epochs=1), 2, compression=Compression("dgc", TRAINING["dgc"]))
    widths = [64, *TrainConfig().hidden, 10]
    kept = sum(math.ceil(0.001 * a * b) + b for a, b in zip(widths, widths[1:]))
    assert record["kept_fraction"] == kept / sum((a + 1) * b for a, b in zip(widths, widths[1:]))


def test_compressed_training_is_identical_on_threads_and_processes():
    records = [
        train(
            "allreduce", TrainConfig(epochs=1), 3, backend=backend, compression=Compression("dgc", (("ratio", 0.01),))
        )
        for backend in ("threads", "processes")
    ]
    assert records[0]["result"].trace == records[1]["result"].trace
    assert np.array_equal(records[0]["params"], records[1]["params"])
    assert records[0]["bytes_per_step"] == records[1]["bytes_per_step"]


def test_parameter_server_decodes_compressed_pushes():
    dense = train("ps-bsp", TrainConfig(epochs=5), 3)
    record = train("ps-bsp", TrainConfig(epochs=5), 3, compression=Compression("qsgd", (("bits", 8),)))
    assert record["test_accuracy"] >= 0.93 and record["compression_ratio"] == pytest.approx(4, rel=0.01)
    assert record["bytes_moved"] < dense["bytes_moved"] and record["decompress_s"] > 0


def test_dgc_warmup_follows_the_paper():
    c = make("dgc", ratio=0.001)
    sparsities = []
    for epoch in range(6):
        c.set_epoch(epoch)
        sparsities.append(1 - c.ratio)
    assert sparsities == pytest.approx([0.75, 0.9375, 0.984375, 0.99609375, 0.999, 0.999])


def test_bad_compression_fails_before_any_rank_starts():
    with pytest.raises(ValueError, match="unknown compressor"):
        Compression("gzip")
    with pytest.raises(ValueError, match="ratio"):
        Compression("topk", (("ratio", 2.0),))
    with pytest.raises(ValueError, match="bits"):
        Compression("qsgd", (("bits", 3),))
    with pytest.raises(ValueError, match="unknown option"):
        Compression("fp16", (("ratio", 0.1),))
    with pytest.raises(ValueError, match="memory"):
        Compression("topk", memory="forgetful")
    with pytest.raises(ValueError, match="parameter server"):
        train("ps-bsp", TrainConfig(epochs=1), 2, compression=Compression("randomk"))
    with pytest.raises(ValueError, match="allreduce and the parameter-server"):
        train("local-sgd", TrainConfig(epochs=1), 2, compression=Compression("topk"))


# --- experiments, command line ----------------------------------------------------------


def test_the_cached_pareto_is_what_a_fresh_run_gives():
    from dlsys.experiments import compression as ex

    cached = {r["method"]: r for r in ex.cached_pareto()}
    assert set(cached) == set(COMPRESSORS)
    fresh = ex.train_row("topk", ex.SETTINGS["topk"], cached["topk"]["epochs"], cached["topk"]["workers"])
    assert fresh == cached["topk"]  # deterministic: stale only if the code changed (then rewrite the cache)


def test_model_bytes_follow_the_real_payloads():
    """The per-model table uses the formulas; a real payload of a layer's size has those bytes."""
    from dlsys.experiments import compression as ex

    table = ex.model_bytes("alexnet", "onebit")
    layer = min(table["layers"], key=lambda r: r["params"])
    payload, _ = make("onebit").compress(np.ones(layer["params"], np.float32), "w")
    assert payload_nbytes(payload) == layer["encoded_nbytes"]
    assert table["dense_nbytes"] == 4 * sum(r["params"] for r in table["layers"])


def test_dgc_ratios_differ_by_model_as_the_paper_counts():
    """DGC per model (1-D tensors dense, 6 bytes a kept entry), beside the paper's Table 2.
    AlexNet: 599x against 597x, because ours is torchvision's (61.1M parameters, 10,344 in
    biases) and the paper's Caffe's (60.97M, 10,568); ResNet-50 is the same network: 276.5x
    against 277x. The models the paper did not train get their own ratios by the same rule."""
    from dlsys.experiments import compression as ex

    rows = {r["model"]: r for r in ex.dgc_ratios()}
    print("\n".join(f"{m:<13} {r['ratio']:6.1f}x  paper {r['published'] or '-'}" for m, r in rows.items()))
    assert rows["alexnet"]["ratio"] == pytest.approx(597, rel=0.005)
    assert rows["resnet50"]["ratio"] == pytest.approx(277, rel=0.005)
    assert rows["resnet50"]["dense_vectors"] == 54_120 and rows["alexnet"]["dense_vectors"] == 10_344
    assert len({round(r["ratio"]) for r in rows.values()}) == len(rows)  # by model, from the rule
    assert all(r["ratio"] < 1000 for r in rows.values())  # never the 1 / 0.001 a flat count would promise


def test_compression_on_a_fast_link_can_cost_more_than_it_saves():
    from dlsys.experiments import compression as ex

    sparse = {(r["link"], r["method"]): r for r in ex.iteration_split("topk", {"ratio": 0.01})}
    assert sparse[("tcp-1gbe", "topk")]["iteration_s"] < sparse[("tcp-1gbe", "none")]["iteration_s"] / 2
    ternary = {(r["link"], r["method"]): r for r in ex.iteration_split("terngrad")}
    assert ternary[("rdma-edr", "terngrad")]["compression_s"] > 0
    assert ternary[("rdma-edr", "terngrad")]["iteration_s"] > ternary[("rdma-edr", "none")]["iteration_s"]


def test_cli_compress_and_train(capsys):
    import json

    from dlsys.cli import main

    assert main(["compress", "--model", "resnet50", "--method", "dgc", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["ratio"] == pytest.approx(277, rel=0.01)  # the paper's ResNet-50 (Lin et al. 2018, Table 2)
    assert main(["train", "--compress", "topk", "--ratio", "0.01", "--epochs", "1", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["compression"] == "topk" and record["compression_ratio"] > 40
    for argv, message in (
        (["train", "--compress", "qsgd", "--bits", "3"], "bits"),
        (["train", "--compress", "topk", "--bits", "4"], "unknown option bits"),
        (["train", "--ratio", "0.1"], "need --compress"),
        (["train", "--compress", "topk", "--ratio", "1.5"], "--ratio"),
        (["train", "--compress", "gzip"], "invalid choice"),
    ):
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv
