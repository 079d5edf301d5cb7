"""Every collective equals numpy's answer and its closed form; the fast ring equals the
reading ring; the registry is complete."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlsys
from dlsys import collectives
from dlsys.collectives import REGISTRY, closed_form, textbook_form
from dlsys.collectives.registry import EVERY_P, POWERS_OF_TWO
from dlsys.experiments import collective_plan, collective_program, expected_values, simulate_collective
from dlsys.machine.net import LINK_PRESETS, NODE_PRESETS, LinkModel, NodeModel

CASES = list(REGISTRY)


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
@given(
    case=st.sampled_from(CASES),
    ranks=st.integers(1, 9),
    count=st.sampled_from([0, 1, 2, 3, 7, 8, 17, 64]),
    dtype=st.sampled_from(["float32", "float64"]),
    op=st.sampled_from(collectives.OPS),
)
def test_every_collective_matches_numpy_on_threads(case, ranks, count, dtype, op):
    collective, algorithm = case
    result = dlsys.launch(collective_program, ranks, "threads", args=(collective, algorithm, count, dtype, op, 7))
    check_values(result.values, expected_values(collective, ranks, count, dtype, op, 7), dtype)


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_every_collective_matches_numpy_on_processes(collective, algorithm):
    ranks, count = (5, 11) if collective != "allreduce" else (6, 13)
    result = dlsys.launch(
        collective_program, ranks, "processes", args=(collective, algorithm, count, "float32", "sum", 3)
    )
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
        record = simulate_collective(
            collective, algorithm, ranks, 4 * 16 * 48, LINKS[link], NODE, charge_reductions=gamma
        )
        assert record["virtual_time_s"] == pytest.approx(record["closed_form_s"], rel=1e-9, abs=1e-18), ranks


def rank_counts(entry):
    """Where ``entry``'s closed form is exact: every p, or powers of two (else its fallback's)."""
    if entry.exact == EVERY_P or (entry.fallback and REGISTRY[(entry.collective, entry.fallback)].exact == EVERY_P):
        return range(2, 18)
    assert entry.exact == POWERS_OF_TWO
    return (2, 4, 8, 16)


UNEVEN_CASES = [(c, a, p) for (c, a), entry in REGISTRY.items() for p in rank_counts(entry)]
UNEVEN_COUNT = 1001  # float32 elements per rank: uneven blocks at every p in 2..17 but 7, 11, 13


@pytest.mark.parametrize("gamma", [False, True])
@pytest.mark.parametrize("collective,algorithm,ranks", UNEVEN_CASES, ids=lambda v: str(v))
def test_closed_form_is_exact_for_uneven_blocks_or_bounds_them(collective, algorithm, ranks, gamma):
    """Exact where the registry says so, at an uneven size; where uneven blocks meet in one
    step (``uneven == "bound"``), between the forms with every block the smallest and the
    largest, and exact when p divides the length."""
    entry, link = REGISTRY[(collective, algorithm)], LINKS["mixed"]
    record = simulate_collective(collective, algorithm, ranks, 4 * UNEVEN_COUNT, link, NODE, charge_reductions=gamma)
    t = record["virtual_time_s"]
    if entry.uneven == "exact" or (ranks & (ranks - 1) and entry.fallback):  # a fallback ring is exact
        assert t == pytest.approx(record["closed_form_s"], rel=1e-9, abs=1e-18)
        return
    gamma_s = NODE.gamma_s_per_byte if gamma else 0.0
    smallest = entry.cost(
        ranks,
        4 * UNEVEN_COUNT,
        lambda k: UNEVEN_COUNT // k * 4,
        link.alpha_s,
        link.beta_s_per_byte,
        gamma_s,
        (ranks - 1).bit_length(),
        link.send_overhead_s,
        link.wire_s,
    )
    assert smallest * (1 - 1e-9) <= t <= record["closed_form_s"] * (1 + 1e-9)
    assert smallest < record["closed_form_s"] or UNEVEN_COUNT % ranks == 0  # p | 1001: the all-to-alls' blocks are even


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("gamma", [False, True])
def test_rabenseifner_after_a_fold_is_exact_at_every_rank_count(link, gamma):
    """dlsys.collectives.registry.fold; even blocks (16 divides the length)."""
    for ranks in range(2, 18):
        record = simulate_collective(
            "allreduce", "rabenseifner", ranks, 4 * 16 * 105, LINKS[link], NODE, charge_reductions=gamma
        )
        assert record["virtual_time_s"] == pytest.approx(record["closed_form_s"], rel=1e-9), ranks


@pytest.mark.parametrize("ranks", [3, 5, 6, 7, 9, 12, 13, 15, 17])
def test_recursive_doubling_after_a_fold_is_bounded_and_exact_when_most_ranks_fold(ranks):
    """dlsys.collectives.registry.fold: exact iff 2 (p - p2) > p2, else an upper bound."""
    record = simulate_collective(
        "allreduce", "recursive_doubling", ranks, 4 * UNEVEN_COUNT, LINKS["mixed"], NODE, charge_reductions=True
    )
    p2 = 1 << (ranks.bit_length() - 1)
    if 2 * (ranks - p2) > p2:
        assert record["virtual_time_s"] == pytest.approx(record["closed_form_s"], rel=1e-9)
    else:
        assert record["virtual_time_s"] < record["closed_form_s"]


@pytest.mark.parametrize("ranks", [3, 8])
def test_a_ring_with_fewer_elements_than_ranks_meets_its_closed_form(ranks):
    record = simulate_collective("allreduce", "ring", ranks, 4 * 5, LINKS["mixed"], NODE, charge_reductions=True)
    assert record["virtual_time_s"] == pytest.approx(record["closed_form_s"], rel=1e-9)


def test_dlsys_simulate_ring_on_3_ranks_is_exact():
    """8 MiB of float32 on 3 ranks: blocks of 699051 and 699050 elements (issue 10)."""
    record = simulate_collective("allreduce", "ring", 3, "8MiB", "tcp-10gbe", real=True)
    assert record["relative_error"] < 1e-12
    assert textbook_form("allreduce", "ring", 3, 8 * 2**20, "tcp-10gbe") < record["closed_form_s"]


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
                comm.recv(source=src)
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


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(collective="allreduce", algorithm="bogus"), "valid: ring"),
        (dict(collective="teleport", algorithm="ring"), "valid: barrier"),
        (dict(op="median"), "valid: sum"),
        (dict(dtype="int8"), "dtype"),
        (dict(size="-3"), "size"),
        (dict(size="12 parsecs"), "size"),
        (dict(link="carrier-pigeon"), "valid: tcp-1gbe"),
        (dict(node="abacus"), "valid: sw26010"),
    ],
)
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


# --- the fast ring equals the reading ring ------------------------------------------------


def _ring(comm, count, op, fast, in_place):
    x = np.random.default_rng([5, comm.rank]).standard_normal(count).astype(np.float32)
    if not fast:
        return collectives.allreduce(comm, x, op=op, algorithm="ring")
    out = comm.alloc(count, np.float32)  # shared memory on processes: the ring lends it
    if in_place:
        out[...] = x
    result = collectives.allreduce(comm, out if in_place else x, op=op, algorithm="ring", out=out)
    assert result is out
    return out.copy()


@pytest.mark.parametrize(
    "backend,ranks,count",
    [
        ("threads", 2, 7),
        ("threads", 5, 1001),
        ("threads", 7, 3),
        ("processes", 3, 3 * 2**18 + 2),
        ("processes", 4, 1001),
    ],
)
@pytest.mark.parametrize("op,in_place", [("sum", False), ("mean", True), ("max", False)])
def test_fast_ring_gives_the_reading_rings_values_and_trace(backend, ranks, count, op, in_place):
    """Blocks of 1 MiB and more (processes, 3 ranks) are lent, not copied."""
    kwargs = dict(link="tcp-10gbe", charge_reductions=True)
    reading = dlsys.launch(_ring, ranks, backend, args=(count, op, False, False), **kwargs)
    fast = dlsys.launch(_ring, ranks, backend, args=(count, op, True, in_place), **kwargs)
    for a, b in zip(reading.values, fast.values):
        assert np.array_equal(a, b)
    assert fast.trace.messages == reading.trace.messages and fast.trace.spans == reading.trace.spans
    assert fast.clocks_s == reading.clocks_s


def _lean(comm, kind, op, fast):
    from dlsys.comm.logical import LogicalArray, per_block

    rng = np.random.default_rng([6, comm.rank])
    x = {
        "float32": lambda: rng.standard_normal(11).astype(np.float32),
        "int64": lambda: rng.integers(-9, 9, (3, 5)),
        "logical": lambda: LogicalArray(rng.standard_normal(12).astype(np.float32), 1000),
        "per_block": lambda: per_block(
            rng.standard_normal(comm.size).astype(np.float32), [29_771 if i % 3 else 29_770 for i in range(comm.size)]
        ),
    }[kind]()
    return collectives.allreduce(comm, x, op=op, algorithm="ring", fast=fast)


@pytest.mark.parametrize("backend,ranks", [("threads", 2), ("threads", 5), ("processes", 3)])
@pytest.mark.parametrize("kind", ["float32", "int64", "logical", "per_block"])
@pytest.mark.parametrize("op,charge", [("sum", False), ("mean", True), ("max", False)])
def test_lean_ring_gives_the_reading_rings_values_and_trace(backend, ranks, kind, op, charge):
    """``fast=True`` (dlsys simulate): one sendrecv per step, sums on plain views."""
    kwargs = dict(link="sw26010", charge_reductions=charge)
    reading = dlsys.launch(_lean, ranks, backend, args=(kind, op, False), **kwargs)
    lean = dlsys.launch(_lean, ranks, backend, args=(kind, op, True), **kwargs)
    for a, b in zip(reading.values, lean.values):
        assert type(a) is type(b) and a.shape == b.shape and np.array_equal(a, b)
    assert lean.trace.messages == reading.trace.messages and lean.trace.spans == reading.trace.spans
    assert lean.clocks_s == reading.clocks_s


@pytest.mark.parametrize("ranks", [2, 3, 6])
def test_lean_rings_hand_over_no_array_a_caller_writes(ranks):
    """On threads the lean ring passes its blocks without copies (Transport.hand_over): a
    rank that writes its input and its result afterwards changes nobody else's result."""

    def program(comm):
        x = np.arange(7.0) + comm.rank
        result = collectives.allreduce(comm, x, algorithm="ring", fast=True)
        x[:] = -1e9
        kept = result.copy()
        result[:] = -1e9
        collectives.barrier(comm)  # every rank has written before anyone compares
        return kept

    want = sum(np.arange(7.0) + r for r in range(ranks))
    for got in dlsys.launch(program, ranks, "threads").values:
        assert np.array_equal(got, want)


def test_lean_ring_names_a_mismatch_like_the_reading_ring():
    def program(comm):
        return collectives.allreduce(comm, np.ones(4 + comm.rank, np.float32), fast=True)

    with pytest.raises(dlsys.RankFailed, match="x: rank"):
        dlsys.launch(program, 2, "threads")


def test_the_reading_ring_keeps_a_logical_array_logical():
    from dlsys.comm.logical import LogicalArray

    def program(comm):
        return collectives.allreduce(comm, LogicalArray(np.full(6, comm.rank, np.float32), 1000))

    result = dlsys.launch(program, 3, "threads")
    assert all(isinstance(v, LogicalArray) and v.scale == 1000 and np.all(v == 3) for v in result.values)
    assert {m.nbytes for m in result.trace.messages} == {2 * 4 * 1000}


def test_every_message_of_a_collective_carries_phase_step_and_block():
    result = dlsys.launch(collective_program, 4, "threads", args=("allreduce", "ring", 10, "float32", "sum", 1))
    rs = [m for m in result.trace.messages if m.phase == "reduce-scatter"]
    assert len(rs) == 4 * 3 and {m.step for m in rs} == {0, 1, 2}
    assert all(m.label == f"reduce-scatter step {m.step} block {m.block}" for m in rs)


# --- the registry and the closed forms ----------------------------------------------------


def test_every_registry_entry_is_complete():
    for (collective, algorithm), entry in REGISTRY.items():
        assert (entry.collective, entry.name) == (collective, algorithm)
        assert callable(entry.run) and entry.latex and len(entry.citation) > 10 and entry.color.startswith("#")
        assert entry.exact in (EVERY_P, POWERS_OF_TWO) and entry.uneven in ("exact", "bound")
        assert entry.fallback is None or (collective, entry.fallback) in REGISTRY
        assert algorithm in collectives.ALGORITHMS[collective]
    assert sum(map(len, collectives.ALGORITHMS.values())) == len(REGISTRY)


@pytest.mark.parametrize("key", [k for k, e in REGISTRY.items() if e.variant_of])
def test_a_step_order_variant_sends_what_its_original_sends_in_another_order(key):
    """Same closed form, same bytes per rank, same result; other partners at each step."""
    collective, algorithm = key
    original = REGISTRY[collective, REGISTRY[key].variant_of]
    for p in (2, 5, 8, 12):
        for n in (0, 4 * 1001, 2**20):
            assert closed_form(collective, algorithm, p, n, LINKS["mixed"]) == closed_form(
                collective, original.name, p, n, LINKS["mixed"]
            )
    runs = {
        a: simulate_collective(collective, a, 8, 4 * 1001, LINKS["mixed"], NODE) for a in (algorithm, original.name)
    }
    first = {
        a: {(m.src, m.dst) for m in r["result"].trace.messages if (m.phase, m.step) == ("reduce-scatter", 0)}
        for a, r in runs.items()
    }
    assert first[algorithm] != first[original.name]
    assert runs[algorithm]["virtual_time_s"] == pytest.approx(runs[original.name]["virtual_time_s"], rel=1e-12)


def test_every_registry_entry_counts_its_blocks_and_a_scaled_run_keeps_them_whole():
    """``collective_plan`` reads how many blocks an algorithm cuts a buffer into from its
    registry entry (a new algorithm without ``blocks`` fails here): a scaled run's real
    length is a multiple of them, or, for a ring (``block_scales``), one element per block."""
    logical = 2**28 * 3 * 5  # 15 GiB of float32, a multiple of every p below: every algorithm scales
    for (collective, algorithm), entry in REGISTRY.items():
        for p in (1, 2, 5, 8, 12):
            blocks = entry.blocks(p, 1)
            assert isinstance(blocks, int) and 1 <= blocks <= p, (collective, algorithm, p)
            plan = collective_plan(collective, algorithm, p, logical, max_memory_bytes=2**20)
            if collective != "barrier" and not plan.per_block:
                assert plan.real_count % blocks == 0 and plan.real_count < logical, (collective, algorithm, p)
            assert plan.per_block <= entry.block_scales
    assert REGISTRY["allreduce", "hierarchical"].blocks(512, 2) == 2  # one per supernode
    assert REGISTRY["allreduce", "rabenseifner"].blocks(12, 1) == 8  # the ranks left after the fold


def test_every_closed_form_is_zero_for_one_rank_and_positive_otherwise():
    link = LINK_PRESETS["tcp-1gbe"]
    for collective, algorithm in REGISTRY:
        assert closed_form(collective, algorithm, 1, 1e6, link) == 0
        assert closed_form(collective, algorithm, 8, 1e6, link) > 0
    assert math.isfinite(closed_form("allreduce", "ring", 512, 244e6, "sw26010"))


def test_ring_allreduce_closed_form_by_hand():
    link = LinkModel("l", latency_s=10e-6, bandwidth_Bps=1e9)
    assert closed_form("allreduce", "ring", 4, 4e6, link) == pytest.approx(2 * 3 * (10e-6 + 1e6 / 1e9))
    # 10 bytes on 4 ranks: blocks of 3, 3, 2, 2 bytes; the 3-byte blocks set every step
    assert closed_form("allreduce", "ring", 4, 10, link) == pytest.approx(2 * 3 * (10e-6 + 3 / 1e9))
    assert textbook_form("allreduce", "ring", 4, 10, link) == pytest.approx(2 * 3 * (10e-6 + 2.5 / 1e9))
    # 10 float32 on 4 ranks: blocks of 3 elements, 12 bytes
    assert closed_form("allreduce", "ring", 4, 40, link, itemsize=4) == pytest.approx(2 * 3 * (10e-6 + 12 / 1e9))


def test_recursive_doubling_beats_ring_for_small_messages_and_loses_for_large():
    link = LINK_PRESETS["tcp-10gbe"]
    assert closed_form("allreduce", "recursive_doubling", 64, 1024, link) < closed_form(
        "allreduce", "ring", 64, 1024, link
    )
    assert closed_form("allreduce", "recursive_doubling", 64, 2**28, link) > closed_form(
        "allreduce", "ring", 64, 2**28, link
    )


def test_gamma_term_needs_a_node():
    link = LINK_PRESETS["rdma-edr"]
    base = closed_form("allreduce", "ring", 8, 1e8, link)
    with_gamma = closed_form("allreduce", "ring", 8, 1e8, link, NODE_PRESETS["v100"], reduce=True)
    assert with_gamma - base == pytest.approx(7 / 8 * 1e8 * 3 / 900e9)


def test_closed_form_errors():
    with pytest.raises(ValueError, match="valid: ring"):
        closed_form("allreduce", "magic", 4, 1, "tcp-1gbe")
    with pytest.raises(ValueError, match="p must be an int >= 1"):
        closed_form("allreduce", "ring", 0, 1, "tcp-1gbe")


def test_the_self_check_tolerance_is_the_rounding_bound_of_p_terms():
    """Float32 sums of 2048 ranks' data in orders the algorithms use (sequential, as a ring
    accumulates, and pairwise, as a tree does) stay inside ``rounding_bounds``, which stays small
    enough to catch a wrong block. The old fixed 1e-4 failed such sums at 2048 ranks."""
    from dlsys.experiments.collectives import rounding_bounds

    ranks, count = 2048, 64
    xs = np.stack([np.random.default_rng([0, r]).standard_normal(count).astype(np.float32) for r in range(ranks)])
    exact = xs.sum(axis=0, dtype=np.float64)
    bound = rounding_bounds("allreduce", ranks, count, "float32", "sum", 0)[0]
    sequential = np.zeros(count, np.float32)
    for x in xs:
        sequential += x
    pairwise = xs
    while len(pairwise) > 1:
        pairwise = pairwise[0::2] + pairwise[1::2]
    for computed in (sequential, pairwise[0]):
        assert np.all(np.abs(computed.astype(np.float64) - exact) <= bound)
    for r in range(0, ranks, 97):  # a sum that lost any one rank's contribution is caught
        assert np.any(np.abs(exact - xs[r] - exact) > bound)
    assert rounding_bounds("allreduce", ranks, count, "float32", "max", 0) == [0.0] * ranks
    assert rounding_bounds("broadcast", 4, count, "float32", "sum", 0) == [0.0] * 4


REDUCING = [(c, a) for (c, a) in CASES if c in ("allreduce", "reduce", "reduce_scatter")]


@pytest.mark.parametrize("op", ["min", "prod"])
@pytest.mark.parametrize("collective,algorithm", REDUCING)
def test_min_and_prod_are_exact_for_every_reducing_algorithm(collective, algorithm, op):
    for ranks in (3, 8):
        result = dlsys.launch(collective_program, ranks, "threads", args=(collective, algorithm, 13, "float32", op, 5))
        for got, want in zip(result.values, expected_values(collective, ranks, 13, "float32", op, 5)):
            assert (got is None and want is None) or np.array_equal(got, want)
    record = simulate_collective(collective, algorithm, 8, "1KiB", op=op)  # its self-check is exact for them
    assert record["op"] == op
