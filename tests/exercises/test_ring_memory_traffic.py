"""Graded: exercise ring_memory_traffic (dlsys/machine/datapath.py), held to values counted by hand,
to the reference ring's trace, and to the bound's definition (nccl-tests' busbw)."""

import math

import numpy as np
import pytest

from dlsys import collectives, launch
from dlsys.grading.testing import LAUNCH_TIMEOUT_S

pytestmark = pytest.mark.ex_ring_memory_traffic

MODULE = "dlsys.machine.datapath"
MiB = 2**20


def traffic(student, cases):
    """ring_allreduce_traffic_bytes(p, nbytes, lent) of the student's, for each (p, nbytes, lent)."""
    return student.calls(MODULE, [("ring_allreduce_traffic_bytes", case) for case in cases])


def bound(student, cases):
    """memcpy_ratio_bound(p, lent[, speedup]) of the student's, for each case."""
    return student.calls(MODULE, [("memcpy_ratio_bound", case) for case in cases])


def counted_step_by_step(p, nbytes, lent):
    """Walk the ring's 2(p-1) steps and add up what one rank reads and writes."""
    block, total = nbytes / p, 0.0
    for _ in range(p - 1):  # reduce-scatter: read my block and the peer's, write the sum
        total += block + block + block
        if not lent:  # the block I send is first copied into shared memory
            total += block + block
    for _ in range(p - 1):  # all-gather: read the peer's block, write it into my result
        total += block + block
        if not lent:
            total += block + block
    return total


def bytes_sent_per_rank(p, nbytes):
    """What the reference ring all-reduce really sends, from its trace (emulated here, trusted)."""
    x = np.ones(nbytes // 4, np.float32)
    run = launch(
        lambda comm: collectives.allreduce(comm, x, algorithm="ring"), p, "threads", timeout_s=LAUNCH_TIMEOUT_S
    )
    return run.trace.bytes_sent_per_rank()


def test_two_and_four_ranks_by_hand(student):
    # p = 2, 64 MiB: one step of each phase on 32 MiB blocks; 3 + 2 passes, + 4 when copied
    # p = 4, 4 MiB: three steps of each phase on 1 MiB blocks
    cases = {
        "p=2, 64 MiB, lent": ((2, 64 * MiB, True), 160 * MiB),
        "p=2, 64 MiB, copied": ((2, 64 * MiB, False), 288 * MiB),
        "p=4, 4 MiB, lent": ((4, 4 * MiB, True), 15 * MiB),
        "p=4, 4 MiB, copied": ((4, 4 * MiB, False), 27 * MiB),
    }
    for (what, (_, want)), got in zip(cases.items(), traffic(student, [case for case, _ in cases.values()])):
        assert got == pytest.approx(want), f"{what}: {got / MiB:g} MiB, want {want / MiB:g} MiB"


def test_matches_the_count_step_by_step(student):
    cases = [(p, nbytes, lent) for p in (2, 3, 5, 8, 64) for nbytes in (1000, 3 * MiB, 1e9) for lent in (True, False)]
    for (p, nbytes, lent), got in zip(cases, traffic(student, cases)):
        want = counted_step_by_step(p, nbytes, lent)
        assert got == pytest.approx(want, rel=1e-12), (
            f"p={p}, {nbytes} bytes, lent={lent}: {got:g} bytes, want {want:g}"
        )


def test_linear_in_the_buffer_and_nothing_on_one_rank(student):
    for lent in (True, False):
        alone, empty, one, *scaled = traffic(
            student,
            [(1, 64 * MiB, lent), (8, 0, lent), (6, MiB, lent), *((6, factor * MiB, lent) for factor in (2, 10, 1000))],
        )
        assert alone == 0, f"one rank: nothing to all-reduce, got {alone:g} bytes (lent={lent})"
        assert empty == 0, f"an empty buffer moves nothing, got {empty:g} bytes (lent={lent})"
        for factor, got in zip((2, 10, 1000), scaled):
            assert got == pytest.approx(factor * one), (
                f"{factor} x the buffer gives {got / one:g} x the traffic, lent={lent}"
            )


def test_lending_saves_a_read_and_a_write_of_every_byte_sent(student):
    cases = [(2, 4096), (4, 4096), (6, 6 * 1000)]
    answers = traffic(student, [(p, nbytes, lent) for p, nbytes in cases for lent in (False, True)])
    for i, (p, nbytes) in enumerate(cases):
        sent, copied, lent = bytes_sent_per_rank(p, nbytes)[0], answers[2 * i], answers[2 * i + 1]
        assert lent < copied, f"p={p}: lending must save traffic, got {lent:g} lent vs {copied:g} copied"
        assert copied - lent == pytest.approx(2 * sent), (
            f"p={p}: lending saves {copied - lent:g} bytes; the trace shows {sent} bytes sent per rank, "
            f"each copied (read + write) unless lent: {2 * sent}"
        )


def test_tends_to_5n_lent_and_9n_copied_for_many_ranks(student):
    n = 1e9
    lent, copied = traffic(student, [(10**6, n, True), (10**6, n, False)])
    assert lent == pytest.approx(5 * n, rel=1e-5), f"lent, 10^6 ranks: {lent / n:g} n, want 5 n"
    assert copied == pytest.approx(9 * n, rel=1e-5), f"copied, 10^6 ranks: {copied / n:g} n, want 9 n"
    for lent in (True, False):
        got = traffic(student, [(p, n, lent) for p in (2, 4, 8, 16)])
        assert got == sorted(got), f"p = 2, 4, 8, 16 give {got}: it must grow with p towards its limit, lent={lent}"


def test_bound_at_two_ranks_on_this_machine(student):
    # two cores stream 1.35 x one core's memory bandwidth (docs/performance.md)
    got = bound(student, [(2, True), (2, False), (2, True, 1.0)])
    for what, value, want in zip(
        ("p=2, s=1.35 (the default), lent", "p=2, s=1.35 (the default), copied", "p=2, s=1, lent"),
        got,
        (0.54, 0.30, 0.40),
    ):
        assert value == pytest.approx(want), f"{what}: {value:g}, want {want}"


def test_bound_is_4s_over_kp_and_falls_with_p(student):
    ps = (2, 3, 4, 8, 64, 1024)
    for s in (1.0, 1.35, 2.0, 8.0):
        for lent, k in ((True, 5), (False, 9)):
            bounds = bound(student, [(p, lent, s) for p in ps])
            assert bounds == pytest.approx([4 * s / (k * p) for p in ps], rel=1e-12), (
                f"s={s}, lent={lent}: {bounds}, want 4 s / (k p) with k = {k}"
            )
            assert all(a > b for a, b in zip(bounds, bounds[1:])), f"s={s}, lent={lent}: more ranks, same memory"
    twice, once = bound(student, [(4, True, 2.7), (4, True, 1.35)])
    assert twice == pytest.approx(2 * once), "twice the memory bandwidth, twice the bound"


def test_bound_follows_from_the_traffic(student):
    """busbw = (n / t) 2(p-1)/p with t = p traffic / (s BW), against memcpy's n / (2n / BW)."""
    bw, n = 1e10, 64 * MiB
    cases = [(p, s, lent) for p in (2, 3, 8, 100) for s in (1.0, 1.35, 3.0) for lent in (True, False)]
    traffics = traffic(student, [(p, n, lent) for p, _, lent in cases])
    bounds = bound(student, [(p, lent, s) for p, s, lent in cases])
    for (p, s, lent), moved, got in zip(cases, traffics, bounds):
        allreduce_s = p * moved / (s * bw)
        busbw = n / allreduce_s * 2 * (p - 1) / p
        memcpy = n / (2 * n / bw)
        assert got == pytest.approx(busbw / memcpy, rel=1e-12), (
            f"p={p}, s={s}, lent={lent}: bound {got:g}, but your traffic implies busbw/memcpy = {busbw / memcpy:g}"
        )
    lent8, copied8 = bound(student, [(8, True), (8, False)])
    moved_copied, moved_lent = traffic(student, [(8, n, False), (8, n, True)])
    assert lent8 / copied8 == pytest.approx(moved_copied / moved_lent), (
        "the bound is inversely proportional to the traffic"
    )


def test_valid_input_accepted_bad_input_rejected_by_name(student):
    ok = student.calls(
        MODULE,
        [
            ("ring_allreduce_traffic_bytes", (1, 0, True)),
            ("ring_allreduce_traffic_bytes", (3, 1000.0, False)),
            ("ring_allreduce_traffic_bytes", (4, np.int64(4096), True)),
            ("memcpy_ratio_bound", (2, True, 0.5)),
        ],
    )
    assert ok[0] == 0 and ok[1] > 0, f"p=1 gives {ok[0]}, p=3 gives {ok[1]}: valid input must give a traffic"
    assert not isinstance(ok[2], dict) and ok[2] > 0, f"numpy sizes are sizes too: got {ok[2]}"
    assert not isinstance(ok[3], dict) and math.isfinite(ok[3]), f"speedup=0.5 is valid: got {ok[3]}"
    bad = (
        [("ring_allreduce_traffic_bytes", (p, MiB, True), "p") for p in (0, -2, 2.0, True, "2")]
        + [("ring_allreduce_traffic_bytes", (4, nbytes, True), "nbytes") for nbytes in (-1, -0.5, math.nan)]
        + [("memcpy_ratio_bound", (p, True), "p") for p in (1, 0, 3.5)]
        + [("memcpy_ratio_bound", (2, False, speedup), "speedup") for speedup in (0, -1.35, math.nan)]
    )
    for (name, args, argument), got in zip(bad, student.calls(MODULE, [(name, args) for name, args, _ in bad])):
        assert isinstance(got, dict) and got["message"].startswith(f"{argument} must"), (
            f"{name}{args!r} returned {got!r}; it must raise ValueError('{argument} must ...')"
        )
