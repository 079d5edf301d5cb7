"""dlsys.machine.netstack: the stages of a message add up to the link's alpha and beta; the
protocols' extra costs; library presets; the alpha-beta fit; the real transports bench."""

import json

import numpy as np
import pytest

from dlsys.cli import main
from dlsys.collectives import REGISTRY
from dlsys.experiments import choice_changes, library_choice, wallclock
from dlsys.machine import netstack
from dlsys.machine.net import LINK_PRESETS, get_link

SIZES = [0, 8, 4096, 1 << 20, 64 << 20]


@pytest.mark.parametrize("name", sorted(LINK_PRESETS))
@pytest.mark.parametrize("nbytes", SIZES)
def test_stages_add_up_to_alpha_plus_n_beta(name, nbytes):
    link = get_link(name)
    stages = netstack.stages(link, nbytes)
    assert sum(s.time_s(nbytes) for s in stages) == pytest.approx(
        link.alpha_s + nbytes * link.beta_s_per_byte, rel=1e-12
    )
    fixed = sum(s.fixed_s for s in stages)
    per_byte = sum(s.per_byte_s for s in stages)
    assert fixed == pytest.approx(link.alpha_s, rel=1e-12) and per_byte == pytest.approx(
        link.beta_s_per_byte, rel=1e-12
    )
    assert {s.side for s in stages} <= set(netstack.SIDES) and all(s.source for s in stages)


def test_tcp_pays_copies_syscalls_and_wake_ups_rdma_none():
    tcp = {s.name for s in netstack.stages("tcp-10gbe")}
    rdma = {s.name for s in netstack.stages("rdma-edr")}
    assert any("copy" in n for n in tcp) and any("wake-up" in n for n in tcp)
    assert not any("copy" in n or "system call" in n or "interrupt" in n for n in rdma)


def test_rendezvous_adds_a_round_trip_and_eager_adds_copies():
    link, n = get_link("rdma-edr"), 1 << 20
    total = {p: sum(s.time_s(n) for s in netstack.stages(link, n, p)) for p in ("basic", "eager", "rendezvous")}
    assert total["rendezvous"] - total["basic"] == pytest.approx(2 * (link.latency_s + 2 * link.overhead_s))
    assert total["eager"] - total["basic"] == pytest.approx(2 * n / netstack.MEMCPY_BANDWIDTH_BPS)
    assert netstack.protocol_for(64) == "eager" and netstack.protocol_for(1 << 20) == "rendezvous"
    with pytest.raises(ValueError, match="protocol"):
        netstack.stages(link, n, "carrier-pigeon")


def test_mpich_picks_by_size_and_by_elements_per_rank():
    """MPICH 3.2 src/mpi/coll/allreduce.c lines 398-400."""
    mpich = netstack.LIBRARIES["mpich"]
    assert mpich.algorithm(2048, 4) == "recursive_doubling"
    assert mpich.algorithm(2052, 4) == "rabenseifner_distance_doubling"
    assert mpich.algorithm(60_970_000, 512) == "rabenseifner_distance_doubling"
    assert mpich.algorithm(4096, 2048) == "recursive_doubling"  # 1024 elements, fewer than the 2048 ranks
    assert mpich.algorithm(4096, 2048, itemsize=1) == "rabenseifner_distance_doubling"


@pytest.mark.parametrize(
    "ranks, nbytes, algorithm",
    [  # coll_tuned_decision_fixed.c, v5.0.0, lines 120-215
        (2, 4, "ring"),
        (2, 4095, "recursive_doubling"),
        (3, 200_000, "ring"),
        (3, 262144, "rabenseifner_distance_doubling"),
        (8, 8191, "recursive_doubling"),
        (16, 63, "ring"),
        (64, 1 << 17, "recursive_doubling"),
        (128, 1 << 16, "reduce_broadcast"),
        (256, 4095, "reduce_broadcast"),
        (256, 4096, "rabenseifner_distance_doubling"),
        (512, 8192, "recursive_doubling"),
        (4096, 8192, "ring"),
        (4096, 1 << 20, "rabenseifner_distance_doubling"),
    ],
)
def test_openmpi_picks_by_rank_band_and_size(ranks, nbytes, algorithm):
    assert netstack.LIBRARIES["openmpi"].algorithm(nbytes, ranks) == algorithm


@pytest.mark.parametrize("name", sorted(netstack.LIBRARIES))
def test_every_library_picks_a_registered_algorithm_everywhere(name):
    lib = netstack.LIBRARIES[name]
    for ranks in (1, 2, 3, 7, 8, 255, 256, 512, 5000):
        for nbytes in (0, 8, 2048, 5000, 1 << 20, 1 << 30):
            algorithm = lib.algorithm(nbytes, ranks)
            assert algorithm == "ps" or ("allreduce", algorithm) in REGISTRY
    for collective, algorithm in lib.rooted:
        assert (collective, algorithm) in REGISTRY


def test_the_taihulight_mpi_takes_the_latency_optimal_algorithms_at_every_size():
    lib = netstack.LIBRARIES["taihulight-mpi"]
    assert {lib.algorithm(n, p) for n in (8, 60_970_000) for p in (2, 512)} == {"recursive_doubling"}
    assert lib.rooted_algorithm("reduce") == lib.rooted_algorithm("broadcast") == "binomial"
    with pytest.raises(ValueError, match="library: mpich has no reduce algorithm here; .*taihulight-mpi"):
        netstack.LIBRARIES["mpich"].rooted_algorithm("reduce")


@pytest.mark.parametrize("name", sorted(netstack.LIBRARIES))
def test_library_transports_add_their_own_costs(name):
    lib = netstack.LIBRARIES[name]
    link, transport = get_link(lib.link), lib.transport()
    assert transport.alpha_s == pytest.approx(link.alpha_s + 2 * lib.per_message_s)
    assert transport.beta_s_per_byte == pytest.approx(link.beta_s_per_byte + 2 * lib.per_byte_s)
    assert lib.source


def test_fit_recovers_known_alpha_and_beta_from_noisy_timings():
    rng = np.random.default_rng(0)
    sizes = np.array([8, 64, 512, 4096, 32768, 1 << 18, 1 << 21, 1 << 24], float)
    alpha, beta = 12e-6, 1 / 3e9
    times = (alpha + sizes * beta) * (1 + 0.01 * rng.standard_normal(sizes.size))
    a, b = netstack.fit_alpha_beta(sizes, times)
    assert a == pytest.approx(alpha, rel=0.05) and b == pytest.approx(beta, rel=0.05)


def test_fit_rejects_what_it_cannot_fit():
    with pytest.raises(ValueError, match="two different sizes"):
        netstack.fit_alpha_beta([8, 8], [1e-6, 1e-6])
    with pytest.raises(ValueError, match="> 0"):
        netstack.fit_alpha_beta([8, 16], [1e-6, 0])


def test_stack_bench_measures_real_transports_large_messages_too():
    record = wallclock.stack_bench([8, 1 << 20], ["pipe", "tcp-nodelay", "shared-memory"])
    assert {r["transport"] for r in record["rows"]} == {"pipe", "tcp-nodelay", "shared-memory"}
    assert all(r["one_way_s"] > 0 for r in record["rows"])
    big = {r["transport"]: r["one_way_s"] for r in record["rows"] if r["nbytes"] == 1 << 20}
    small = {r["transport"]: r["one_way_s"] for r in record["rows"] if r["nbytes"] == 8}
    assert all(big[t] > small[t] for t in big)  # a megabyte takes longer than eight bytes, everywhere
    with pytest.raises(ValueError, match="transports"):
        wallclock.stack_bench([8], ["smoke-signals"])


def test_cli_presets_stack_and_libraries(capsys):
    assert main(["presets", "--stack", "tcp-10gbe", "--size", "64KiB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    link = get_link("tcp-10gbe")
    assert sum(r["time_s"] for r in out["stages"]) == pytest.approx(link.message_s(65536))
    assert main(["presets", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["libraries"]) == set(netstack.LIBRARIES)
    assert main(["presets", "--stack", "warp-drive"]) == 2


def test_the_cost_model_reads_a_library_s_choice():
    rows = library_choice("mpich", "rdma-edr", [8], [1024, 2048, 4096, 1 << 20])
    assert [r["algorithm"] for r in rows] == ["recursive_doubling"] * 2 + ["rabenseifner_distance_doubling"] * 2
    assert choice_changes(rows) == [
        {"nbytes": 4096, "from": "recursive_doubling", "to": "rabenseifner_distance_doubling"}
    ]
    by_ranks = library_choice("openmpi", "rdma-edr", [32, 64, 128], [100_000])
    assert [r["algorithm"] for r in by_ranks] == [
        "rabenseifner_distance_doubling",
        "recursive_doubling",
        "reduce_broadcast",
    ]
    with pytest.raises(ValueError, match="library: unknown library 'lam'"):
        library_choice("lam")
