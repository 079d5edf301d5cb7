"""Graded: exercise alpha_beta_fit (dlsys/machine/netstack.py): Hockney's alpha and beta fitted to
measured one-way times, and a ring all-reduce predicted from them, held to the emulator."""

import numpy as np
import pytest

from dlsys import collectives, launch
from dlsys.grading.testing import LAUNCH_TIMEOUT_S
from dlsys.machine.net import LinkModel

pytestmark = pytest.mark.ex_alpha_beta_fit

SIZES = np.array([8, 64, 1024, 16384, 1 << 18, 1 << 20, 1 << 24, 1 << 26], float)
MODULE = "dlsys.machine.netstack"


def fits(student, *times):
    """The student's fit_alpha_beta(SIZES, t) for each t of ``times``: [(alpha, beta), ...]."""
    return student.calls(MODULE, [("fit_alpha_beta", (SIZES, t)) for t in times])


def test_exact_timings_give_back_alpha_and_beta(student):
    cases = [(10e-6, 1 / 1.25e9), (1e-6, 1 / 12.5e9), (50e-6, 1 / 125e6)]
    for (alpha_s, beta_s_per_byte), (alpha, beta) in zip(cases, fits(student, *(a + SIZES * b for a, b in cases))):
        assert alpha == pytest.approx(alpha_s, rel=1e-6) and beta == pytest.approx(beta_s_per_byte, rel=1e-6), (
            f"exact times of alpha = {alpha_s:g} s, beta = {beta_s_per_byte:g} s/B fitted to {alpha:g}, {beta:g}"
        )


def test_noisy_timings_within_a_few_percent(student):
    rng = np.random.default_rng(7)
    alpha_s, beta_s_per_byte = 20e-6, 1 / 3e9
    times = (alpha_s + SIZES * beta_s_per_byte) * (1 + 0.02 * rng.standard_normal(SIZES.size))
    ((alpha, beta),) = fits(student, times)
    assert alpha == pytest.approx(alpha_s, rel=0.1) and beta == pytest.approx(beta_s_per_byte, rel=0.05), (
        f"2 % noise: fitted alpha {alpha:g} s (want {alpha_s:g} within 10 %), beta {beta:g} s/B (want {beta_s_per_byte:g} within 5 %)"
    )


def test_small_messages_decide_alpha_even_beside_huge_ones(student):
    """A 64 MiB message's 1 % noise is ~200 us, twenty alphas: weigh each row by 1 / t."""
    alpha_s, beta_s_per_byte = 10e-6, 1 / 3e9
    noise = np.array([1, 1, 1, 1, 1, 1, 0.99, 1.01])  # only the two largest messages are off
    ((alpha, _),) = fits(student, (alpha_s + SIZES * beta_s_per_byte) * noise)
    assert alpha == pytest.approx(alpha_s, rel=0.2), (
        f"fitted alpha {alpha:g} s, want {alpha_s:g}: the largest messages' 1 % noise decided alpha; weigh each row by 1 / t"
    )


def test_prediction_is_the_emulated_ring(student):
    alpha_s, beta_s_per_byte = 15e-6, 1 / 2e9
    link = LinkModel("fitted", alpha_s, 1 / beta_s_per_byte)
    cases = [(2, 2 * 4000), (4, 4 * 1024), (8, 8 * 8192)]
    predictions = student.calls(
        MODULE, [("predict_ring_allreduce_s", (p, n, alpha_s, beta_s_per_byte)) for p, n in cases]
    )
    for (p, n), got in zip(cases, predictions):
        x = np.ones(n // 4, np.float32)
        want = launch(
            lambda comm: collectives.allreduce(comm, x), p, "threads", link=link, timeout_s=LAUNCH_TIMEOUT_S
        ).virtual_time_s
        assert got == pytest.approx(want, rel=1e-9), (
            f"p={p}, {n} bytes: predicted {got:g} s, the emulated ring took {want:g} s"
        )


def test_one_rank_costs_nothing(student):
    (got,) = student.calls(MODULE, [("predict_ring_allreduce_s", (1, 1e6, 1e-5, 1e-9))])
    assert got == 0, f"one rank: predicted {got} s, want 0"
