"""Graded: exercise ring_memory_traffic (dlsys/machine/datapath.py), held to values counted by hand,
to the reference ring's trace, and to the bound's definition (nccl-tests' busbw)."""

import math

import numpy as np
import pytest

from dlsys import launch
from dlsys.machine.datapath import memcpy_ratio_bound, ring_allreduce_traffic_bytes
from dlsys.grading.testing import LAUNCH_TIMEOUT_S, load_reference

pytestmark = pytest.mark.ex_ring_memory_traffic

MiB = 2**20


def counted_step_by_step(p, nbytes, lent):
    """Walk the ring's 2(p-1) steps and add up what one rank reads and writes."""
    block, total = nbytes / p, 0.0
    for _ in range(p - 1):           # reduce-scatter: read my block and the peer's, write the sum
        total += block + block + block
        if not lent:                 # the block I send is first copied into shared memory
            total += block + block
    for _ in range(p - 1):           # all-gather: read the peer's block, write it into my result
        total += block + block
        if not lent:
            total += block + block
    return total


def bytes_sent_per_rank(p, nbytes):
    """What the reference ring all-reduce really sends, from its trace (emulated)."""
    collectives = load_reference("dlsys.collectives")
    x = np.ones(nbytes // 4, np.float32)
    run = launch(lambda comm: collectives.allreduce(comm, x, algorithm="ring"), p, "threads",
                 timeout_s=LAUNCH_TIMEOUT_S)
    return run.trace.bytes_sent_per_rank()


def test_two_and_four_ranks_by_hand():
    # p = 2, 64 MiB: one step of each phase on 32 MiB blocks; 3 + 2 passes, + 4 when copied
    assert ring_allreduce_traffic_bytes(2, 64 * MiB, lent=True) == pytest.approx(160 * MiB), "p=2, 64 MiB, lent"
    assert ring_allreduce_traffic_bytes(2, 64 * MiB, lent=False) == pytest.approx(288 * MiB), "p=2, 64 MiB, copied"
    # p = 4, 4 MiB: three steps of each phase on 1 MiB blocks
    assert ring_allreduce_traffic_bytes(4, 4 * MiB, lent=True) == pytest.approx(15 * MiB), "p=4, 4 MiB, lent"
    assert ring_allreduce_traffic_bytes(4, 4 * MiB, lent=False) == pytest.approx(27 * MiB), "p=4, 4 MiB, copied"


def test_matches_the_count_step_by_step():
    for p in (2, 3, 5, 8, 64):
        for nbytes in (1000, 3 * MiB, 1e9):
            for lent in (True, False):
                assert ring_allreduce_traffic_bytes(p, nbytes, lent) == pytest.approx(
                    counted_step_by_step(p, nbytes, lent), rel=1e-12), f"p={p}, {nbytes} bytes, lent={lent}"


def test_linear_in_the_buffer_and_nothing_on_one_rank():
    for lent in (True, False):
        assert ring_allreduce_traffic_bytes(1, 64 * MiB, lent) == 0, "one rank: nothing to all-reduce"
        assert ring_allreduce_traffic_bytes(8, 0, lent) == 0, "an empty buffer moves nothing"
        one = ring_allreduce_traffic_bytes(6, MiB, lent)
        for factor in (2, 10, 1000):
            assert ring_allreduce_traffic_bytes(6, factor * MiB, lent) == pytest.approx(factor * one), \
                f"{factor} x the buffer, lent={lent}"


def test_lending_saves_a_read_and_a_write_of_every_byte_sent():
    for p, nbytes in [(2, 4096), (4, 4096), (6, 6 * 1000)]:
        sent = bytes_sent_per_rank(p, nbytes)[0]
        copied = ring_allreduce_traffic_bytes(p, nbytes, lent=False)
        lent = ring_allreduce_traffic_bytes(p, nbytes, lent=True)
        assert lent < copied, f"p={p}: lending must save traffic"
        assert copied - lent == pytest.approx(2 * sent), \
            f"p={p}: the trace shows {sent} bytes sent per rank, each copied (read + write) unless lent"


def test_tends_to_5n_lent_and_9n_copied_for_many_ranks():
    n = 1e9
    assert ring_allreduce_traffic_bytes(10**6, n, lent=True) == pytest.approx(5 * n, rel=1e-5)
    assert ring_allreduce_traffic_bytes(10**6, n, lent=False) == pytest.approx(9 * n, rel=1e-5)
    for lent in (True, False):
        traffic = [ring_allreduce_traffic_bytes(p, n, lent) for p in (2, 4, 8, 16)]
        assert traffic == sorted(traffic), f"grows with p towards its limit, lent={lent}"


def test_bound_at_two_ranks_on_this_machine():
    # two cores stream 1.35 x one core's memory bandwidth (docs/performance.md)
    assert memcpy_ratio_bound(2, lent=True) == pytest.approx(0.54), "p=2, s=1.35 (the default), lent"
    assert memcpy_ratio_bound(2, lent=False) == pytest.approx(0.30), "p=2, s=1.35 (the default), copied"
    assert memcpy_ratio_bound(2, lent=True, speedup=1.0) == pytest.approx(0.40), "p=2, s=1, lent"


def test_bound_is_4s_over_kp_and_falls_with_p():
    for s in (1.0, 1.35, 2.0, 8.0):
        for lent, k in ((True, 5), (False, 9)):
            bounds = [memcpy_ratio_bound(p, lent, s) for p in (2, 3, 4, 8, 64, 1024)]
            assert bounds == pytest.approx([4 * s / (k * p) for p in (2, 3, 4, 8, 64, 1024)], rel=1e-12), \
                f"s={s}, lent={lent}"
            assert all(a > b for a, b in zip(bounds, bounds[1:])), f"s={s}, lent={lent}: more ranks, same memory"
    assert memcpy_ratio_bound(4, True, 2.7) == pytest.approx(2 * memcpy_ratio_bound(4, True, 1.35)), \
        "twice the memory bandwidth, twice the bound"


def test_bound_follows_from_the_traffic():
    """busbw = (n / t) 2(p-1)/p with t = p traffic / (s BW), against memcpy's n / (2n / BW)."""
    bw, n = 1e10, 64 * MiB
    for p in (2, 3, 8, 100):
        for s in (1.0, 1.35, 3.0):
            for lent in (True, False):
                allreduce_s = p * ring_allreduce_traffic_bytes(p, n, lent) / (s * bw)
                busbw = n / allreduce_s * 2 * (p - 1) / p
                memcpy = n / (2 * n / bw)
                assert memcpy_ratio_bound(p, lent, s) == pytest.approx(busbw / memcpy, rel=1e-12), \
                    f"p={p}, s={s}, lent={lent}"
    assert memcpy_ratio_bound(8, True) / memcpy_ratio_bound(8, False) == pytest.approx(
        ring_allreduce_traffic_bytes(8, n, False) / ring_allreduce_traffic_bytes(8, n, True)), \
        "the bound is inversely proportional to the traffic"


def test_valid_input_accepted_bad_input_rejected_by_name():
    assert ring_allreduce_traffic_bytes(1, 0, lent=True) == 0
    assert ring_allreduce_traffic_bytes(3, 1000.0, lent=False) > 0
    assert ring_allreduce_traffic_bytes(4, np.int64(4096), lent=True) > 0, "numpy sizes are sizes too"
    assert math.isfinite(memcpy_ratio_bound(2, lent=True, speedup=0.5))
    for p in (0, -2, 2.0, True, "2"):
        with pytest.raises(ValueError, match=r"^p must"):
            ring_allreduce_traffic_bytes(p, MiB, True)
    for nbytes in (-1, -0.5, math.nan):
        with pytest.raises(ValueError, match=r"^nbytes must"):
            ring_allreduce_traffic_bytes(4, nbytes, True)
    for p in (1, 0, 3.5):
        with pytest.raises(ValueError, match=r"^p must"):
            memcpy_ratio_bound(p, True)
    for speedup in (0, -1.35, math.nan):
        with pytest.raises(ValueError, match=r"^speedup must"):
            memcpy_ratio_bound(2, False, speedup)
