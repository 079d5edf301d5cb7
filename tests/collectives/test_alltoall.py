"""All-to-all and all-to-all-v: values against numpy on every backend, closed forms, bad input.
(The registry-driven tests in test_collectives.py also hold both algorithms to numpy and to
their closed forms at every rank count, even and uneven blocks.)"""

import numpy as np
import pytest

import dlsys
from dlsys import collectives
from dlsys.collectives import closed_form, exchange
from dlsys.machine.net import LinkModel

LINK = LinkModel("mixed", 3e-6, 2e9, 1e-6, 1, 5e9)


def tagged(comm, k=3):
    """Row d of rank r's buffer holds 100 r + d (and k columns): a value names its source and destination."""
    return 100.0 * comm.rank + np.repeat(np.arange(comm.size, dtype=np.float64), k).reshape(comm.size, k)


def _alltoall(comm, algorithm):
    return collectives.alltoall(comm, tagged(comm), algorithm=algorithm)


@pytest.mark.parametrize("backend", ["threads", "processes"])
@pytest.mark.parametrize("algorithm", collectives.ALGORITHMS["alltoall"])
@pytest.mark.parametrize("ranks", [1, 3, 4, 6])
def test_row_d_goes_to_rank_d(backend, algorithm, ranks):
    result = dlsys.launch(_alltoall, ranks, backend, args=(algorithm,))
    for r, got in enumerate(result.values):
        want = np.stack([100.0 * s + np.full(3, r) for s in range(ranks)])
        assert np.array_equal(got, want)


@pytest.mark.parametrize("ranks", [2, 4, 8, 16])
def test_closed_forms_by_hand_at_powers_of_two(ranks):
    n = 4 * 16 * 64  # even blocks
    a, b = LINK.alpha_s, LINK.beta_s_per_byte
    assert closed_form("alltoall", "pairwise", ranks, n, LINK) == pytest.approx((ranks - 1) * (a + n / ranks * b))
    lg = ranks.bit_length() - 1
    assert closed_form("alltoall", "bruck", ranks, n, LINK) == pytest.approx(lg * (a + n / 2 * b))


def test_bruck_counts_step_sizes_at_any_p():
    assert exchange.bruck_counts(8) == [4, 4, 4]
    assert exchange.bruck_counts(5) == [2, 2, 1]  # positions 1..4: bit 0 in 1,3; bit 1 in 2,3; bit 2 in 4
    assert exchange.bruck_counts(6) == [3, 2, 2]


def test_bruck_wins_for_small_blocks_and_pairwise_for_large():
    link = "rdma-edr"
    assert closed_form("alltoall", "bruck", 64, 64 * 8, link) < closed_form("alltoall", "pairwise", 64, 64 * 8, link)
    assert closed_form("alltoall", "bruck", 64, 64 * 2**20, link) > closed_form(
        "alltoall", "pairwise", 64, 64 * 2**20, link
    )


def test_pairwise_sends_p_minus_1_blocks_one_per_step():
    result = dlsys.launch(_alltoall, 5, "threads", args=("pairwise",))
    for r in range(5):
        sent = sorted((m.step, m.dst, m.block) for m in result.trace.messages if m.src == r)
        assert sent == [(k - 1, (r + k) % 5, (r + k) % 5) for k in range(1, 5)]


def _alltoallv(comm, counts_of):
    counts = counts_of(comm.rank, comm.size)
    x = np.concatenate([np.full(c, 10.0 * comm.rank + d) for d, c in enumerate(counts)])
    return collectives.alltoallv(comm, x, counts)


def uneven(r, p):
    return [(r + 2 * d) % 4 for d in range(p)]


@pytest.mark.parametrize("backend", ["threads", "processes"])
@pytest.mark.parametrize("ranks", [1, 2, 5])
def test_alltoallv_delivers_uneven_blocks(backend, ranks):
    result = dlsys.launch(_alltoallv, ranks, backend, args=(uneven,))
    for r, got in enumerate(result.values):
        assert len(got) == ranks
        for s, block in enumerate(got):
            assert np.array_equal(block, np.full(uneven(s, ranks)[r], 10.0 * s + r))


def even(r, p):
    return [6] * p


def test_alltoallv_time_is_the_counts_exchange_plus_the_pairwise_bound():
    """Even counts: exact, (p-1)(alpha + 8 p/p beta) for the counts then (p-1)(alpha + 6 * 8 beta)."""
    p = 4
    t = dlsys.launch(_alltoallv, p, "threads", args=(even,), link=LINK).virtual_time_s
    want = closed_form("alltoall", "pairwise", p, 8 * p, LINK) + closed_form("alltoall", "pairwise", p, 8 * 6 * p, LINK)
    assert t == pytest.approx(want, rel=1e-9)
    t = dlsys.launch(_alltoallv, p, "threads", args=(uneven,), link=LINK).virtual_time_s
    assert t <= closed_form("alltoall", "pairwise", p, 8 * p, LINK) + closed_form(
        "alltoall", "pairwise", p, 8 * 3 * p, LINK
    ) * (1 + 1e-9)


@pytest.mark.parametrize(
    "counts,match",
    [
        ([1, 1], "send_counts: .* summing to x.size = 3"),
        ([4, -1], "non-negative"),
        ([3], "2 non-negative ints"),
        ([1.5, 1.5], "ints"),
    ],
)
def test_alltoallv_refuses_counts_that_do_not_sum(counts, match):
    def program(comm):
        return collectives.alltoallv(comm, np.zeros(3), counts)

    with pytest.raises(dlsys.RankFailed, match=match):
        dlsys.launch(program, 2, "threads")


def test_unknown_alltoall_algorithm_is_named():
    with pytest.raises(ValueError, match="valid: pairwise, bruck"):
        collectives.check_algorithm("alltoall", "scattered")


# --- the experiment and figures the page and lesson 15 draw ----------------------------------


def test_steps_record_says_which_blocks_move_and_ends_where_the_run_ended():
    from dlsys.experiments import experts

    for algorithm, steps in (("pairwise", 4), ("bruck", 3)):
        rows = experts.alltoall_steps(5, algorithm)
        assert sorted({r["step"] for r in rows}) == list(range(steps))
        assert all(r["nbytes"] == 8 * len(r["blocks"]) for r in rows)
    bruck = experts.alltoall_steps(5, "bruck")
    assert [len([r for r in bruck if r["step"] == k][0]["blocks"]) for k in range(3)] == exchange.bruck_counts(5)


def test_cost_record_meets_the_closed_forms_and_mpichs_threshold():
    from dlsys.experiments import experts

    rows = experts.alltoall_costs(ranks=8, block_sizes=(64, 256, 512, 4096))
    assert all(r["time_s"] == pytest.approx(r["closed_form_s"], rel=1e-9) for r in rows)
    assert [r["mpich"] for r in rows if r["algorithm"] == "bruck"] == ["bruck", "bruck", "pairwise", "pairwise"]
    assert experts.mpich_alltoall_algorithm(8, 4) == "pairwise"  # MPICH: Bruck only from 8 ranks
    crossover = experts.bruck_crossover_block_nbytes(16)
    assert closed_form("alltoall", "bruck", 16, 16 * crossover * 0.9, "rdma-edr") < closed_form(
        "alltoall", "pairwise", 16, 16 * crossover * 0.9, "rdma-edr"
    )


def test_figures_build():
    from dlsys.experiments import experts
    from dlsys.viz import experts as figures

    for algorithm in ("pairwise", "bruck"):
        assert figures.alltoall_steps_figure(experts.alltoall_steps(4, algorithm), algorithm).data
    assert figures.alltoall_cost_figure(experts.alltoall_costs(ranks=4, block_sizes=(64, 4096))).data


@pytest.mark.parametrize("backend", ["threads", "processes", "mpi"])
@pytest.mark.parametrize("algorithm", collectives.ALGORITHMS["alltoall"])
def test_values_and_closed_form_on_every_backend(backend, algorithm):
    """The issue's "all-to-all values and closed forms on every backend": each backend's
    run delivers row d to rank d and ends at the closed form (even blocks)."""
    from dlsys.comm.backends.mpi import mpi_unavailable

    if backend == "mpi" and mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    p = 4
    result = dlsys.launch(_alltoall, p, backend, args=(algorithm,), link=LINK)
    for r, got in enumerate(result.values):
        assert np.array_equal(got, np.stack([100.0 * s + np.full(3, r) for s in range(p)]))
    assert result.virtual_time_s == pytest.approx(closed_form("alltoall", algorithm, p, p * 3 * 8, LINK), rel=1e-12)


@pytest.mark.parametrize("backend", ["processes", "mpi"])
def test_alltoallv_on_other_backends(backend):
    from dlsys.comm.backends.mpi import mpi_unavailable

    if backend == "mpi" and mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    p = 3
    result = dlsys.launch(_alltoallv, p, backend, args=(uneven,), link=LINK)
    for r, got in enumerate(result.values):
        for s, block in enumerate(got):
            assert np.array_equal(block, np.full(uneven(s, p)[r], 10.0 * s + r))
    assert result.trace == dlsys.launch(_alltoallv, p, "threads", args=(uneven,), link=LINK).trace
    even_run = dlsys.launch(_alltoallv, p, backend, args=(even,), link=LINK)
    want = closed_form("alltoall", "pairwise", p, 8 * p, LINK) + closed_form("alltoall", "pairwise", p, 8 * 6 * p, LINK)
    assert even_run.virtual_time_s == pytest.approx(want, rel=1e-9)
