"""Graded: exercise ring_allreduce_cost (dlsys/exercises/ring_cost.py), held to the emulator."""

import math

import numpy as np
import pytest

from dlsys import launch
from dlsys.exercises.ring_cost import (ring_allreduce_bytes_sent_per_rank, ring_allreduce_time_s,
                                   ring_vs_doubling_crossover_nbytes)
from dlsys.grading.testing import LAUNCH_TIMEOUT_S, load_reference
from dlsys.collectives import textbook_form
from dlsys.machine.net import LinkModel, get_link

pytestmark = pytest.mark.ex_ring_allreduce_cost


def emulate(algorithm, p, nbytes, link):
    """The reference all-reduce of a float32 buffer of nbytes on p ranks, emulated."""
    collectives = load_reference("dlsys.collectives")
    x = np.ones(nbytes // 4, np.float32)
    return launch(lambda comm: collectives.allreduce(comm, x, algorithm=algorithm), p, "threads",
                  link=link, timeout_s=LAUNCH_TIMEOUT_S)


def test_time_matches_the_emulated_ring():
    for p, nbytes, link in [(2, 4096, "tcp-10gbe"), (5, 5 * 4000, "rdma-edr"), (8, 8 * 8192, "tcp-1gbe")]:
        link = get_link(link)
        want = emulate("ring", p, nbytes, link).virtual_time_s
        assert ring_allreduce_time_s(p, nbytes, link.alpha_s, link.beta_s_per_byte) == pytest.approx(want, rel=1e-9), \
            f"p={p}, {nbytes} bytes on {link.name}"


def test_latency_term_and_bandwidth_term():
    alpha_s, beta_s_per_byte = 1e-5, 1e-9
    assert ring_allreduce_time_s(8, 0, alpha_s, beta_s_per_byte) == pytest.approx(14 * alpha_s), "n = 0: 2(p-1) alphas"
    assert ring_allreduce_time_s(8, 8e6, 0.0, beta_s_per_byte) == pytest.approx(14e6 * beta_s_per_byte), \
        "alpha = 0: 2(p-1)/p n beta"
    assert ring_allreduce_time_s(10**6, 1e9, 0.0, beta_s_per_byte) == pytest.approx(2.0, rel=1e-5), \
        "for large p the bandwidth term tends to 2 n beta"


def test_one_rank_costs_nothing():
    assert ring_allreduce_time_s(1, 1e6, 1e-5, 1e-9) == 0
    assert ring_allreduce_bytes_sent_per_rank(1, 1e6) == 0


def test_bytes_sent_per_rank_match_the_trace():
    for p, nbytes in [(4, 4096), (6, 6 * 1000)]:
        sent = emulate("ring", p, nbytes, "tcp-10gbe").trace.bytes_sent_per_rank()
        assert sent == [pytest.approx(ring_allreduce_bytes_sent_per_rank(p, nbytes))] * p


def test_crossover_equalises_the_closed_forms():
    alpha_s, beta_s_per_byte = 3e-5, 1e-9
    link = LinkModel("test", alpha_s, 1 / beta_s_per_byte)
    assert ring_vs_doubling_crossover_nbytes(2, alpha_s, beta_s_per_byte) == math.inf, \
        "on 2 ranks the ring sends as many bytes as recursive doubling and more messages"
    for p in (4, 8, 64):
        n = ring_vs_doubling_crossover_nbytes(p, alpha_s, beta_s_per_byte)
        assert textbook_form("allreduce", "ring", p, n, link) == pytest.approx(
            textbook_form("allreduce", "recursive_doubling", p, n, link), rel=1e-9), f"p={p}"


def test_crossover_separates_the_emulated_winners():
    p, link = 8, get_link("tcp-10gbe")
    n = ring_vs_doubling_crossover_nbytes(p, link.alpha_s, link.beta_s_per_byte)
    for factor, winner in [(0.25, "recursive_doubling"), (4.0, "ring")]:
        nbytes = int(n * factor) // (4 * p) * 4 * p
        times = {a: emulate(a, p, nbytes, link).virtual_time_s for a in ("ring", "recursive_doubling")}
        assert min(times, key=times.get) == winner, f"at {factor} x the crossover ({nbytes} bytes), {times}"
