"""Graded: exercise alpha_beta_fit (dlsys/machine/netstack.py): Hockney's alpha and beta fitted to
measured one-way times, and a ring all-reduce predicted from them, held to the emulator."""

import numpy as np
import pytest

from dlsys import launch
from dlsys.grading.testing import LAUNCH_TIMEOUT_S, load_reference
from dlsys.machine.net import LinkModel
from dlsys.machine.netstack import fit_alpha_beta, predict_ring_allreduce_s

pytestmark = pytest.mark.ex_alpha_beta_fit

SIZES = np.array([8, 64, 1024, 16384, 1 << 18, 1 << 20, 1 << 24, 1 << 26], float)


def test_exact_timings_give_back_alpha_and_beta():
    for alpha_s, beta_s_per_byte in [(10e-6, 1 / 1.25e9), (1e-6, 1 / 12.5e9), (50e-6, 1 / 125e6)]:
        alpha, beta = fit_alpha_beta(SIZES, alpha_s + SIZES * beta_s_per_byte)
        assert alpha == pytest.approx(alpha_s, rel=1e-6) and beta == pytest.approx(beta_s_per_byte, rel=1e-6)


def test_noisy_timings_within_a_few_percent():
    rng = np.random.default_rng(7)
    alpha_s, beta_s_per_byte = 20e-6, 1 / 3e9
    times = (alpha_s + SIZES * beta_s_per_byte) * (1 + 0.02 * rng.standard_normal(SIZES.size))
    alpha, beta = fit_alpha_beta(SIZES, times)
    assert alpha == pytest.approx(alpha_s, rel=0.1) and beta == pytest.approx(beta_s_per_byte, rel=0.05)


def test_small_messages_decide_alpha_even_beside_huge_ones():
    """A 64 MiB message's 1 % noise is ~200 us, twenty alphas: weigh each row by 1 / t."""
    alpha_s, beta_s_per_byte = 10e-6, 1 / 3e9
    noise = np.array([1, 1, 1, 1, 1, 1, 0.99, 1.01])  # only the two largest messages are off
    alpha, _ = fit_alpha_beta(SIZES, (alpha_s + SIZES * beta_s_per_byte) * noise)
    assert alpha == pytest.approx(alpha_s, rel=0.2)


def test_prediction_is_the_emulated_ring():
    collectives = load_reference("dlsys.collectives")
    alpha_s, beta_s_per_byte = 15e-6, 1 / 2e9
    link = LinkModel("fitted", alpha_s, 1 / beta_s_per_byte)
    for p, n in [(2, 2 * 4000), (4, 4 * 1024), (8, 8 * 8192)]:
        x = np.ones(n // 4, np.float32)
        want = launch(lambda comm: collectives.allreduce(comm, x), p, "threads", link=link,
                      timeout_s=LAUNCH_TIMEOUT_S).virtual_time_s
        assert predict_ring_allreduce_s(p, n, alpha_s, beta_s_per_byte) == pytest.approx(want, rel=1e-9), (p, n)


def test_one_rank_costs_nothing():
    assert predict_ring_allreduce_s(1, 1e6, 1e-5, 1e-9) == 0
