"""Graded: exercise ring_allreduce_cost (dlsys/exercises/ring_cost.py), held to the emulator."""

import math

import numpy as np
import pytest

from dlsys import collectives, launch
from dlsys.collectives import textbook_form
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.machine.net import LinkModel, get_link

pytestmark = pytest.mark.ex_ring_allreduce_cost

MODULE = "dlsys.exercises.ring_cost"


def ask(student, name, *cases):
    """The student's ``name``(*args) for each args of ``cases``."""
    return student.calls(MODULE, [(name, args) for args in cases])


def emulate(algorithm, p, nbytes, link):
    """The reference all-reduce of a float32 buffer of nbytes on p ranks, emulated (here, trusted)."""
    x = np.ones(nbytes // 4, np.float32)
    return launch(
        lambda comm: collectives.allreduce(comm, x, algorithm=algorithm),
        p,
        "threads",
        link=link,
        timeout_s=LAUNCH_TIMEOUT_S,
    )


def test_time_matches_the_emulated_ring(student):
    cases = [(2, 4096, get_link("tcp-10gbe")), (5, 5 * 4000, get_link("rdma-edr")), (8, 8 * 8192, get_link("tcp-1gbe"))]
    got = ask(student, "ring_allreduce_time_s", *((p, n, link.alpha_s, link.beta_s_per_byte) for p, n, link in cases))
    for (p, nbytes, link), mine in zip(cases, got):
        want = emulate("ring", p, nbytes, link).virtual_time_s
        assert mine == pytest.approx(want, rel=1e-9), (
            f"p={p}, {nbytes} bytes on {link.name}: yours {mine:g} s, the emulated ring {want:g} s"
        )


def test_latency_term_and_bandwidth_term(student):
    alpha_s, beta_s_per_byte = 1e-5, 1e-9
    empty, free, many = ask(
        student,
        "ring_allreduce_time_s",
        (8, 0, alpha_s, beta_s_per_byte),
        (8, 8e6, 0.0, beta_s_per_byte),
        (10**6, 1e9, 0.0, beta_s_per_byte),
    )
    assert empty == pytest.approx(14 * alpha_s), (
        f"n = 0 on 8 ranks: {empty:g} s, want 2(p-1) alphas = {14 * alpha_s:g} s"
    )
    assert free == pytest.approx(14e6 * beta_s_per_byte), (
        f"alpha = 0: {free:g} s, want 2(p-1)/p n beta = {14e6 * beta_s_per_byte:g} s"
    )
    assert many == pytest.approx(2.0, rel=1e-5), (
        f"10^6 ranks: {many:g} s; for large p the bandwidth term tends to 2 n beta = 2 s"
    )


def test_one_rank_costs_nothing(student):
    (time_s,) = ask(student, "ring_allreduce_time_s", (1, 1e6, 1e-5, 1e-9))
    (sent,) = ask(student, "ring_allreduce_bytes_sent_per_rank", (1, 1e6))
    assert time_s == 0 and sent == 0, f"one rank: {time_s} s and {sent} bytes, want 0 and 0"


def test_bytes_sent_per_rank_match_the_trace(student):
    cases = [(4, 4096), (6, 6 * 1000)]
    for (p, nbytes), mine in zip(cases, ask(student, "ring_allreduce_bytes_sent_per_rank", *cases)):
        sent = emulate("ring", p, nbytes, "tcp-10gbe").trace.bytes_sent_per_rank()
        assert sent == [pytest.approx(mine)] * p, (
            f"p={p}, {nbytes} bytes: yours {mine:g}, the trace shows {sent[0]} per rank"
        )


def test_crossover_equalises_the_closed_forms(student):
    alpha_s, beta_s_per_byte = 3e-5, 1e-9
    link = LinkModel("test", alpha_s, 1 / beta_s_per_byte)
    two, *crossovers = ask(
        student, "ring_vs_doubling_crossover_nbytes", *((p, alpha_s, beta_s_per_byte) for p in (2, 4, 8, 64))
    )
    assert two == math.inf, (
        f"on 2 ranks: {two}, want inf: the ring sends as many bytes as recursive doubling and more messages"
    )
    for p, n in zip((4, 8, 64), crossovers):
        ring, doubling = (textbook_form("allreduce", a, p, n, link) for a in ("ring", "recursive_doubling"))
        assert ring == pytest.approx(doubling, rel=1e-9), (
            f"p={p}: at your {n:g} bytes the ring takes {ring:g} s, doubling {doubling:g} s"
        )


def test_crossover_separates_the_emulated_winners(student):
    p, link = 8, get_link("tcp-10gbe")
    (n,) = ask(student, "ring_vs_doubling_crossover_nbytes", (p, link.alpha_s, link.beta_s_per_byte))
    for factor, winner in [(0.25, "recursive_doubling"), (4.0, "ring")]:
        nbytes = int(n * factor) // (4 * p) * 4 * p
        times = {a: emulate(a, p, nbytes, link).virtual_time_s for a in ("ring", "recursive_doubling")}
        assert min(times, key=times.get) == winner, (
            f"at {factor} x your crossover ({nbytes} bytes) {winner} must win: {times}"
        )
