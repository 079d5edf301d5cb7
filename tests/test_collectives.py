"""Every collective equals numpy's answer and its closed form."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlsys
from dlsys import collectives
from dlsys.experiments import collective_program, expected_values, simulate_collective
from dlsys.net import LinkModel, NodeModel, closed_form

CASES = [(c, a) for c, algos in collectives.ALGORITHMS.items() for a in algos]


def check_values(got, want, dtype):
    tol = 1e-4 if dtype == "float32" else 1e-10
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            assert g.shape == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), ranks=st.integers(1, 9), count=st.sampled_from([0, 1, 2, 3, 7, 8, 17, 64]),
       dtype=st.sampled_from(["float32", "float64"]), op=st.sampled_from(collectives.OPS))
def test_every_collective_matches_numpy_on_threads(case, ranks, count, dtype, op):
    collective, algorithm = case
    result = dlsys.launch(collective_program, ranks, "threads", args=(collective, algorithm, count, dtype, op, 7))
    check_values(result.values, expected_values(collective, ranks, count, dtype, op, 7), dtype)


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_every_collective_matches_numpy_on_processes(collective, algorithm):
    ranks, count = (5, 11) if collective != "allreduce" else (6, 13)
    result = dlsys.launch(collective_program, ranks, "processes", args=(collective, algorithm, count, "float32", "sum", 3))
    check_values(result.values, expected_values(collective, ranks, count, "float32", "sum", 3), "float32")


LINKS = {
    "latency-only": LinkModel("latency-only", 5e-6, math.inf, 1e-6),
    "bandwidth-only": LinkModel("bandwidth-only", 0.0, 1e9, 0.0, 1, 4e9),
    "mixed": LinkModel("mixed", 3e-6, 2e9, 1e-6, 1, 5e9),
}
NODE = NodeModel("test-node", 1e12, 0.5, 50e9)


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("collective,algorithm", CASES)
@pytest.mark.parametrize("gamma", [False, True])
def test_makespan_equals_closed_form_at_powers_of_two(collective, algorithm, link, gamma):
    for ranks in (1, 2, 4, 8, 16):
        record = simulate_collective(collective, algorithm, ranks, 4 * 16 * 48, LINKS[link], NODE,
                                     charge_reductions=gamma)
        assert record["virtual_time_s"] == pytest.approx(record["closed_form_s"], rel=1e-9, abs=1e-18), ranks


@pytest.mark.parametrize("collective,algorithm", [("allreduce", "ring"), ("reduce_scatter", "ring"),
                                                  ("allgather", "ring"), ("barrier", "dissemination"),
                                                  ("allgather", "recursive_doubling"),
                                                  ("reduce_scatter", "recursive_halving")])
@pytest.mark.parametrize("ranks", [3, 5, 6, 7, 9, 12])
def test_ring_algorithms_equal_closed_form_at_any_rank_count(collective, algorithm, ranks):
    record = simulate_collective(collective, algorithm, ranks, 8 * 9 * 7 * 5 * 4, LINKS["mixed"], NODE,
                                 charge_reductions=True)
    assert record["virtual_time_s"] == pytest.approx(record["closed_form_s"], rel=1e-9)


@pytest.mark.parametrize("ranks", [2, 3, 5, 8, 16])
def test_ring_allreduce_sends_2_p_minus_1_over_p_of_the_buffer(ranks):
    nbytes = 4 * 240 * 16
    record = simulate_collective("allreduce", "ring", ranks, nbytes, "tcp-10gbe")
    assert record["bytes_sent_per_rank"] == [2 * (ranks - 1) * nbytes // ranks] * ranks


def test_ring_time_stops_depending_on_p_for_large_messages():
    link = LinkModel("bw", 0.0, 1e9)
    times = [closed_form("allreduce", "ring", p, 1e9, link) for p in (64, 128, 256)]
    assert times[-1] / times[0] == pytest.approx(1.0, rel=0.02)
    assert times[0] < 2.0  # 2 (p-1)/p n / B -> 2 s


def test_parameter_server_incast_costs_p_n_over_b_at_the_server():
    link = LinkModel("bw", 0.0, 1e9)
    nbytes = 1_000_000

    def ps(comm):
        if comm.rank == 0:
            for src in range(1, comm.size):
                comm.recv(src)
        else:
            comm.send(np.zeros(nbytes // 8), 0)
    result = dlsys.launch(ps, 9, "threads", link=link)
    assert result.clocks_s[0] == pytest.approx(8 * nbytes / 1e9, rel=1e-12)


def test_results_are_identical_across_ranks_for_allreduce():
    def program(comm):
        x = comm.rng.standard_normal(1001).astype(np.float32)
        return collectives.allreduce(comm, x, algorithm="rabenseifner")
    values = dlsys.launch(program, 6, "threads").values
    for v in values[1:]:
        assert np.array_equal(v, values[0])


@pytest.mark.parametrize("bad,match", [
    (dict(collective="allreduce", algorithm="bogus"), "valid: ring"),
    (dict(collective="teleport", algorithm="ring"), "valid: barrier"),
    (dict(op="median"), "valid: sum"),
    (dict(dtype="int8"), "dtype"),
    (dict(size="-3"), "size"),
    (dict(size="12 parsecs"), "size"),
    (dict(link="carrier-pigeon"), "valid: tcp-1gbe"),
    (dict(node="abacus"), "valid: sw26010"),
])
def test_bad_input_is_rejected_before_any_rank_starts(bad, match):
    args = dict(collective="allreduce", algorithm="ring", ranks=4, size=1024) | bad
    with pytest.raises(ValueError, match=match):
        simulate_collective(**args)


def test_mismatched_shapes_across_ranks_name_the_argument():
    def program(comm):
        return collectives.allreduce(comm, np.ones(10 + comm.rank))
    with pytest.raises(dlsys.RankFailed, match=r"x: rank \d sent \d+ elements"):
        dlsys.launch(program, 3, "threads")


def test_mismatched_dtypes_across_ranks_name_the_argument():
    def program(comm):
        return collectives.allreduce(comm, np.ones(12, dtype=np.float32 if comm.rank else np.float64))
    with pytest.raises(dlsys.RankFailed, match="x: rank"):
        dlsys.launch(program, 2, "threads")


def test_non_numeric_arrays_are_rejected():
    def program(comm):
        return collectives.allreduce(comm, np.array(["a", "b"]))
    with pytest.raises(dlsys.RankFailed, match="x must be a numeric array"):
        dlsys.launch(program, 2, "threads")
