"""The Caffe-on-TaihuLight case study: both designs average the same gradients, their
times against the closed forms, and bad input refused before any rank starts."""

import json
import time

import numpy as np
import pytest

from dlsys import collectives
from dlsys.cli import main
from dlsys.experiments import taihulight as study
from dlsys.experiments import taihulight_bounds as bounds
from dlsys.experiments.collectives import simulate_collective
from dlsys.machine.net import get_node
from dlsys.machine.profiles import profile
from dlsys.machine.topology import two_level
from dlsys.train import caffe
from dlsys.viz.links import link_load_figure

POWERS = (2, 4, 8, 16, 32, 64)


@pytest.mark.parametrize("nodes", [3, 4])
@pytest.mark.parametrize("contiguous", [True, False])
def test_every_design_produces_identical_weights(nodes, contiguous):
    ring = study.run_design("alexnet", "ring", nodes, contiguous)
    for design in ("ps", "ps-gather", "ps-reduce"):
        assert np.array_equal(study.run_design("alexnet", design, nodes, contiguous)["weights"], ring["weights"])
    ps = study.run_design("alexnet", "ps", nodes, contiguous)
    start = caffe.Net(profile("alexnet"), ps["scale"]).data
    assert not np.array_equal(start, ring["weights"])  # an update happened
    for rank_value in ring["result"].values:
        assert np.array_equal(rank_value["weights"], ring["weights"])


@pytest.mark.parametrize("design", caffe.DESIGNS)
@pytest.mark.parametrize("model", study.MODELS)
@pytest.mark.parametrize("contiguous", [True, False])
def test_each_design_equals_its_closed_form_at_powers_of_two(design, model, contiguous):
    for nodes in POWERS:
        r = study.run_design(model, design, nodes, contiguous)
        assert r["communication_s"] == pytest.approx(r["closed_communication_s"], rel=1e-9, abs=1e-12)
        assert r["iteration_s"] == pytest.approx(r["closed_iteration_s"], rel=1e-9)


@pytest.mark.parametrize("design", ["ps", "ps-gather", "ps-reduce"])
def test_the_parameter_server_forms_hold_at_other_node_counts_too(design):
    for nodes in (1, 3, 5, 12):
        r = study.run_design("alexnet", design, nodes, False)
        assert r["iteration_s"] == pytest.approx(r["closed_iteration_s"], rel=1e-9)


def test_the_mpi_parameter_server_runs_the_library_s_trees():
    """MPI_Bcast and MPI_Reduce by binomial tree: rank 0 takes lg p messages per layer, not p - 1."""
    layers = len(profile("googlenet"))
    for design, into_rank0 in (("ps", 7 * layers), ("ps-gather", 3 * layers), ("ps-reduce", 3 * layers)):
        trace = study.run_design("googlenet", design, 8, record=True)["result"].trace
        assert sum(m.dst == 0 for m in trace.messages) == into_rank0
        assert {m.phase for m in trace.messages if m.dst == 0} <= {"", "gather", "reduce"}


def test_an_mpi_design_needs_a_library_with_rooted_collectives(monkeypatch):
    monkeypatch.setattr(study, "launch", lambda *a, **k: pytest.fail("a rank started"))
    with pytest.raises(ValueError, match="library: mpich has no broadcast algorithm here; .*taihulight-mpi"):
        study.run_design("alexnet", "ps-reduce", 4, library="mpich")


@pytest.mark.parametrize("model", study.MODELS)
def test_the_parameter_server_grows_with_the_nodes(model):
    comm = [r["communication_s"] for r in study.sweep(model, "ps", POWERS)]
    assert all(a < b for a, b in zip(comm, comm[1:]))


def test_the_ring_stays_nearly_flat_and_the_parameter_server_does_not():
    ring = [r["communication_s"] for r in study.sweep("alexnet", "ring", (4, 256))]
    ps = [r["communication_s"] for r in study.sweep("alexnet", "ps", (4, 256))]
    assert ring[1] / ring[0] < 1.5 and ps[1] / ps[0] > 20


def test_the_compute_is_the_profile_through_the_sw26010():
    r = study.run_design("resnet50", "ring", 2)
    node = get_node("sw26010")
    want = sum(3 * node.compute_s(study.BATCH * layer.fwd_flops) for layer in profile("resnet50"))
    assert r["compute_s"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("design", caffe.DESIGNS)
def test_contiguous_gradients_are_never_slower(design):
    for nodes in (2, 3, 8):
        fast = study.run_design("googlenet", design, nodes, True)
        slow = study.run_design("googlenet", design, nodes, False)
        assert fast["iteration_s"] <= slow["iteration_s"] and fast["pack_s"] == 0 < slow["pack_s"]


def test_a_packing_copy_reads_and_writes_the_gradient_at_memory_bandwidth():
    r = study.run_design("alexnet", "ring", 2, contiguous=False)
    assert r["pack_s"] == pytest.approx(2 * 2 * r["gradient_nbytes"] / get_node("sw26010").memory_bandwidth_Bps)


def test_a_contiguous_net_shares_one_buffer_and_a_scattered_one_packs():
    net = caffe.Net(profile("alexnet"), scale=1000)
    net.layers[2].blob.diff[:] = 7
    assert np.shares_memory(net.layers[2].blob.diff, net.diff) and net.flat("diff") is net.diff
    scattered = caffe.Net(profile("alexnet"), scale=1000, contiguous=False)
    assert np.array_equal(scattered.flat("data"), net.data) and not np.shares_memory(
        scattered.flat("data"), scattered.layers[0].blob.data
    )


def test_sweeps_to_512_nodes_finish_in_seconds():
    start = time.perf_counter()
    for design in caffe.DESIGNS:
        if design != "ps":
            study.sweep("googlenet", design, (512,))
    assert time.perf_counter() - start < 60  # about 13 s here, on a shared machine, links shared
    # the direct-send PS under the default's shared links: 511 pushes a layer into rank 0's
    # ingress, one component re-solved per event (machine/flows.py): about 50 s on a loaded
    # 2-core machine, 2.7 s with sharing=False (issue 35: to make faster)
    start = time.perf_counter()
    study.sweep("googlenet", "ps", (512,))
    assert time.perf_counter() - start < 240


def test_ring_vs_mpi_rows_match_their_closed_forms_on_one_supernode():
    rows = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (2, 8), library="mpich")
    assert {r["algorithm"] for r in rows} == {"ring", "rabenseifner_distance_doubling"}
    for r in rows:
        assert r["virtual_time_s"] == pytest.approx(r["closed_form_s"], rel=1e-9)


def test_the_paper_s_mpi_falls_behind_the_ring_as_the_nodes_grow():
    """The TaihuLight MPI's recursive doubling sends the whole message lg p times: on one
    supernode it is lg p p / (2 (p-1)) times the ring's time in the bandwidth term."""
    rows = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (2, 16, 256))
    ratio = [mpi["virtual_time_s"] / ring["virtual_time_s"] for ring, mpi in zip(rows[::2], rows[1::2])]
    assert {r["algorithm"] for r in rows[1::2]} == {"recursive_doubling"}
    assert ratio[0] == pytest.approx(1.0, rel=1e-3) and ratio[0] < ratio[1] < ratio[2]
    for r in rows:
        assert r["virtual_time_s"] == pytest.approx(r["closed_form_s"], rel=1e-9)


def test_mpich_s_step_order_keeps_its_big_halves_inside_a_supernode():
    """At 512 nodes on the TaihuLight, ours sends half the vector across supernodes first;
    MPICH's (distance 1 first) sends only 1/512 of it across, at its last step."""
    rows = {r["algorithm"]: r for r in study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (512,), library="mpich")}
    ours = simulate_collective(
        "allreduce",
        "rabenseifner",
        512,
        rows["ring"]["nbytes"],
        record=False,
        topology="taihulight",
        max_memory_bytes=study.MAX_MEMORY_BYTES,
    )
    assert rows["rabenseifner_distance_doubling"]["virtual_time_s"] < ours["virtual_time_s"]


def test_versus_mpi_refuses_an_unknown_library():
    with pytest.raises(ValueError, match="library: unknown MPI library 'lam'; valid: mpich, openmpi, taihulight-mpi"):
        study.ring_vs_mpi(library="lam")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(nodes=0), r"nodes must be an integer in 1\.\.40960 \(the taihulight topology holds 40960 nodes\), got 0"),
        (dict(nodes=50_000), r"nodes must be an integer in 1\.\.40960"),
        (dict(model="vgg"), r"model: unknown model 'vgg'; valid: alexnet, googlenet, resnet50"),
        (dict(design="async"), r"design: unknown design 'async'; valid: ps, ps-gather, ps-reduce, ring"),
        (dict(library="lam"), r"library: unknown MPI library 'lam'; valid: mpich, openmpi, taihulight-mpi"),
        (
            dict(nodes=9, topology=two_level("sw26010", 4, 4.0, supernodes=2)),
            r"nodes must be an integer in 1\.\.8 \(the two-level topology holds 8 nodes\), got 9",
        ),
    ],
)
def test_bad_input_is_refused_before_any_rank_starts(kwargs, message, monkeypatch):
    monkeypatch.setattr(study, "launch", lambda *a, **k: pytest.fail("a rank started"))
    with pytest.raises(ValueError, match=message):
        study.run_design(**({"model": "alexnet", "design": "ring", "nodes": 4} | kwargs))


def test_cli_one_run_as_json_and_a_table(capsys):
    assert main(["casestudy", "taihulight", "--model", "alexnet", "--design", "ps", "--nodes", "4", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["design"] == "ps" and record["nodes"] == 4 and record["communication_s"] > 0
    assert main(["casestudy", "taihulight", "--design", "ring", "--nodes", "2,4,...,16", "--scattered"]) == 0
    out = capsys.readouterr().out
    assert "scattered gradients" in out and len([line for line in out.splitlines() if line.split()[0].isdigit()]) == 4


def test_cli_versus_a_library_and_the_pss_on_mpi(capsys):
    assert main(["casestudy", "taihulight", "--versus-mpi", "--library", "mpich", "--nodes", "2,8", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["preset"] for r in rows} == {"mpich"} and len(rows) == 8
    assert main(["casestudy", "taihulight", "--design", "ps-reduce", "--nodes", "2,4"]) == 0
    assert "ps-reduce design on taihulight-mpi's collectives" in capsys.readouterr().out
    assert main(["casestudy", "taihulight", "--versus-mpi", "--library", "lam"]) == 2


@pytest.mark.parametrize("design", bounds.PS_DESIGNS)
@pytest.mark.parametrize("model, nodes", [("alexnet", 2), ("googlenet", 8), ("resnet50", 16), ("alexnet", 32)])
def test_the_arithmetic_bounds_bracket_the_emulation(design, model, nodes):
    """Compute free, on the sw26010 link: lo <= PS / ring <= hi, and the any-link bracket holds both."""
    ps, ring = bounds.communication_only(model, design, nodes), bounds.communication_only(model, "ring", nodes)
    bound = bounds.ratio_bounds(design, model, nodes, scale=ring["scale"])
    assert ps["scale"] == ring["scale"]
    emulated = ps["communication_s"] / ring["communication_s"]
    assert bound["lo"] * (1 - 1e-9) <= emulated <= bound["hi"] * (1 + 1e-9)
    assert bound["any_lo"] <= bound["lo"] <= bound["hi"] <= bound["any_hi"]


def test_the_published_figures_against_the_bounds():
    rows = bounds.published_figures()
    verdicts = {v["figure"]: v for v in bounds.verdicts(rows)}
    assert all(r["emulated"] is None for r in rows) and len(rows) == 3 * len(verdicts)
    for figure in ("googlenet: 77x at 32 nodes", "resnet50: 98x at 32 nodes"):  # above max((L+1)/2, p)
        assert verdicts[figure]["here"] == verdicts[figure]["anywhere"] == []
    alexnet = {r["design"]: r for r in rows if r["figure"] == "alexnet: 10x at 256 nodes"}
    assert alexnet["ps-reduce"]["any_hi"] < 10 < alexnet["ps-gather"]["lo"] <= alexnet["ps"]["lo"]
    with pytest.raises(ValueError, match="nodes must be a power of two"):
        bounds.ratio_bounds("ps", "alexnet", 12)
    with pytest.raises(ValueError, match="design: the bounds are for the PS designs"):
        bounds.ratio_bounds("ring", "alexnet", 8)


def test_cli_refuses_bad_nodes_with_the_range(capsys):
    assert main(["casestudy", "taihulight", "--nodes", "2,4,0"]) == 2
    assert "nodes must be an integer in 1..40960" in capsys.readouterr().err
    assert main(["casestudy", "taihulight", "--nodes", "2,x"]) == 2
    assert "doubling range like 2,4,...,512" in capsys.readouterr().err


# --- links that messages share (issue 24) -----------------------------------------------------


def test_with_sharing_the_512_node_ring_is_its_flat_closed_form_and_the_paper_s_mpi_is_slower():
    """Two supernodes: the ring's two crossing messages a step get the whole link (no static
    quarter share), so it equals 2(p-1)(alpha + n/(pB)) on the sw26010 link; recursive
    doubling's last step sends every node across at once (``recursive_doubling_form_s``)."""
    rows = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (512,), sharing=True)
    ring, mpi = rows
    assert ring["sharing"] and ring["algorithm"] == "ring" and mpi["algorithm"] == "recursive_doubling"
    flat = collectives.closed_form("allreduce", "ring", 512, ring["nbytes"], "sw26010")
    assert ring["virtual_time_s"] == pytest.approx(flat, rel=1e-9) and ring["closed_form_s"] == flat
    assert mpi["virtual_time_s"] == pytest.approx(mpi["closed_form_s"], rel=1e-9)
    assert mpi["virtual_time_s"] / ring["virtual_time_s"] > 1
    static = study.ring_vs_mpi((study.PAPER_MESSAGE_BYTES,), (512,), sharing=False)[0]
    assert static["virtual_time_s"] > 3 * ring["virtual_time_s"]  # the static quarter share slowed every step


def test_the_mpi_ratio_s_bounds_bracket_the_paper_s_range_by_message_size():
    bound = study.mpi_ratio_bounds()
    assert bound["latency_ratio"] == pytest.approx(9 / 1022)  # lg p alphas against 2(p-1)
    assert bound["latency_ratio"] < bound["ratio"] < bound["bandwidth_ratio"]
    small, large = (bound["nbytes_for_ratio"][r] for r in study.PAPER_MPI_RATIOS)
    for nbytes, ratio in ((small, study.PAPER_MPI_RATIOS[0]), (large, study.PAPER_MPI_RATIOS[1])):
        assert study.mpi_ratio_bounds(nbytes=nbytes)["ratio"] == pytest.approx(ratio, rel=1e-4)  # whole float32 blocks
    flat = study.mpi_ratio_bounds(topology="flat")
    assert flat["bandwidth_ratio"] == pytest.approx(9 * 512 / 1022)
    with pytest.raises(ValueError, match="nodes: the ring has no closed form on 512 nodes of taihulight"):
        study.mpi_ratio_bounds(sharing=False)


def test_with_sharing_the_ring_design_keeps_its_flat_form_and_the_ps_designs_run():
    for nodes in (8, 512):
        r = study.run_design("googlenet", "ring", nodes, sharing=True)
        assert r["sharing"] and r["closed_communication_s"] is not None
        # blocks of whole real elements differ by one: the replay's eager sends overlap a little
        assert r["communication_s"] == pytest.approx(r["closed_communication_s"], rel=0.1)
    off = study.run_design("googlenet", "ring", 512, sharing=False)
    assert off["communication_s"] > 2 * r["communication_s"]
    for design in bounds.PS_DESIGNS:
        shared = study.run_design("googlenet", design, 8, sharing=True)
        assert shared["closed_communication_s"] is None and shared["communication_s"] > 0
        assert np.array_equal(shared["weights"], study.run_design("googlenet", design, 8)["weights"])


def test_sharing_is_refused_unless_a_bool(monkeypatch):
    monkeypatch.setattr(study, "launch", lambda *a, **k: pytest.fail("a rank started"))
    for call in (
        lambda: study.run_design("alexnet", "ring", 4, sharing="yes"),
        lambda: study.sweep("alexnet", "ring", (2, 4), sharing=1),
        lambda: study.ring_vs_mpi(nodes=(2,), sharing="no"),
        lambda: study.recursive_doubling_form_s(8, 1e6, sharing="on"),
    ):
        with pytest.raises(ValueError, match="sharing must be .*True or False"):
            call()
    with pytest.raises(ValueError, match="nodes must be a power of two >= 2, got 12"):
        study.recursive_doubling_form_s(12, 1e6)


def test_link_load_rows_show_the_ring_s_crossing_links_nearly_idle():
    rows = study.link_load_rows("recursive_doubling", 512, True, bins=8)
    assert {r["series"] for r in rows} == {"recursive_doubling, links shared"}
    peak = max(r["nbytes"] / (r["end_s"] - r["start_s"]) / r["capacity_Bps"] for r in rows if r["link"] == "up0")
    assert peak == pytest.approx(1.0, rel=1e-6)  # its last step fills the uplink
    assert study.boundary_links(512) == [
        "egress0",
        "ingress0",
        "egress255",
        "ingress255",
        "up0",
        "down0",
        "egress256",
        "ingress256",
        "egress511",
        "ingress511",
        "up1",
        "down1",
    ]
    fig = link_load_figure(rows, links=study.boundary_links(512))
    assert list(fig.data[0].y) == study.boundary_links(512) and max(map(max, fig.data[0].z)) <= 100 + 1e-6
    assert "no bytes" in link_load_figure([]).layout.annotations[0].text


def test_cli_sharing_is_the_default_across_supernodes(capsys):
    """One supernode (256): the per-pair clock; two (512): links shared, no flag to type."""
    assert main(["casestudy", "taihulight", "--versus-mpi", "--nodes", "256,512", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["sharing"] for r in rows[:4]] == [False, False, True, True]
    assert rows[1]["virtual_time_s"] > rows[0]["virtual_time_s"]
    assert main(["casestudy", "taihulight", "--design", "ps-reduce", "--nodes", "4"]) == 0
    assert "a link per pair" in capsys.readouterr().out
    assert main(["casestudy", "taihulight", "--design", "ps-reduce", "--nodes", "4", "--static-shares"]) == 2
    assert "--static-shares: no link above the nodes on 4 ranks" in capsys.readouterr().err
    assert main(["casestudy", "taihulight", "--nodes", "4", "--sharing"]) == 2  # no flag to remember
