"""Graded: exercise lars_local_lr (dlsys/learn/optim.py: ``trust_ratio`` and ``LARS.local_lr``),
held to norms computed by hand and to an independent numpy LARS step (You et al. 2017)."""

from types import SimpleNamespace

import numpy as np
import pytest

from dlsys.learn.optim import LARS, trust_ratio

pytestmark = pytest.mark.ex_lars_local_lr


def layers(*sizes):
    """Slices (offset, size) tiling a flat buffer, as model.param_slices() gives them."""
    offsets = np.cumsum((0,) + sizes[:-1])
    return [SimpleNamespace(offset=int(o), size=s) for o, s in zip(offsets, sizes)]


def lars(w, g, **kwargs):
    params, grads = np.array(w, np.float64), np.array(g, np.float64)
    return LARS(params, grads, 1.0, layers(2, 2), **kwargs)


def test_two_layers_by_hand():
    # layer 0: w = (3, 4), ||w|| = 5, g = (0, 1), ||g|| = 1; layer 1: w = (1, 0), g = (6, 8), ||g|| = 10
    opt = lars([3, 4, 1, 0], [0, 1, 6, 8], weight_decay=0.0, trust_coefficient=0.001)
    assert opt.local_lr() == pytest.approx([0.001 * 5 / 1, 0.001 * 1 / 10]), "eta ||w|| / ||g|| per layer"


def test_the_weight_decay_term():
    # eta ||w|| / (||g|| + beta ||w||) with beta = 0.5: 5 / (1 + 2.5) and 1 / (10 + 0.5)
    opt = lars([3, 4, 1, 0], [0, 1, 6, 8], weight_decay=0.5, trust_coefficient=0.01)
    assert opt.local_lr() == pytest.approx([0.01 * 5 / 3.5, 0.01 * 1 / 10.5]), "beta ||w|| in the denominator"


def test_zero_norm_layers_get_ratio_one():
    # a zero-initialised layer (||w|| = 0) and a layer without gradient (||g|| = 0, no decay)
    opt = lars([0, 0, 1, 0], [6, 8, 0, 0], weight_decay=0.0)
    assert np.all(np.isfinite(opt.local_lr())), "no division by zero"
    assert opt.local_lr() == pytest.approx([1.0, 1.0]), "the guard's ratio is 1"
    assert trust_ratio(np.array([0.0, 2.0]), np.array([1.0, 0.0]), 0.5) == pytest.approx([1.0, 1.0])


def test_trust_ratio_scales_with_eta():
    got = trust_ratio(np.array([2.0, 9.0]), np.array([4.0, 3.0]), 0.1)
    assert got == pytest.approx([0.1 * 2 / 4, 0.1 * 9 / 3])


def test_steps_match_an_independent_numpy_lars():
    rng = np.random.default_rng(0)
    w, eta, beta, mu, lr = rng.normal(size=7), 0.002, 0.01, 0.9, 3.0
    sizes = (3, 4)
    params, grads = w.copy(), np.zeros(7)
    opt = LARS(params, grads, lr, layers(*sizes), momentum=mu, weight_decay=beta, trust_coefficient=eta)
    expect, v = w.copy(), np.zeros(7)
    for _ in range(3):
        g = rng.normal(size=7) * np.array([100.0] * 3 + [0.01] * 4)  # norms orders of magnitude apart
        grads[...] = g
        opt.step()
        for lo, hi in ((0, 3), (3, 7)):
            local = eta * np.linalg.norm(expect[lo:hi]) / (np.linalg.norm(g[lo:hi]) + beta * np.linalg.norm(expect[lo:hi]))
            v[lo:hi] = mu * v[lo:hi] + lr * local * (g[lo:hi] + beta * expect[lo:hi])
        expect -= v
    assert params == pytest.approx(expect, rel=1e-12)
