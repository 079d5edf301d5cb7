"""Graded: exercise lars_local_lr (dlsys/learn/optim.py: ``trust_ratio`` and ``LARS.local_lr``),
held to norms computed by hand and to an independent numpy LARS step (You et al. 2017)."""

import numpy as np
import pytest

pytestmark = pytest.mark.ex_lars_local_lr


def observe_lars(w, g, sizes=(2, 2), lr=1.0, steps=(), **options):
    """Runs in the untrusted child: LARS over layers of ``sizes`` on weights w and gradient g:
    its local_lr(), then the weights after a step on each gradient of ``steps``."""
    from types import SimpleNamespace

    from dlsys.learn.optim import LARS

    offsets = np.cumsum((0,) + tuple(sizes[:-1]))
    layers = [SimpleNamespace(offset=int(o), size=s) for o, s in zip(offsets, sizes)]  # as model.param_slices()
    params, grads = np.array(w, np.float64), np.array(g, np.float64)
    opt = LARS(params, grads, lr, layers, **options)
    local = np.asarray(opt.local_lr(), np.float64)
    for step in steps:
        grads[...] = step
        opt.step()
    return {"local_lr": local, "params": params}


def test_two_layers_by_hand(student):
    # layer 0: w = (3, 4), ||w|| = 5, g = (0, 1), ||g|| = 1; layer 1: w = (1, 0), g = (6, 8), ||g|| = 10
    got = student.run(observe_lars, w=[3, 4, 1, 0], g=[0, 1, 6, 8], weight_decay=0.0, trust_coefficient=0.001)
    want = [0.001 * 5 / 1, 0.001 * 1 / 10]
    assert got["local_lr"] == pytest.approx(want), (
        f"local_lr() gave {got['local_lr']}; eta ||w|| / ||g|| per layer is {want}"
    )


def test_the_weight_decay_term(student):
    # eta ||w|| / (||g|| + beta ||w||) with beta = 0.5: 5 / (1 + 2.5) and 1 / (10 + 0.5)
    got = student.run(observe_lars, w=[3, 4, 1, 0], g=[0, 1, 6, 8], weight_decay=0.5, trust_coefficient=0.01)
    want = [0.01 * 5 / 3.5, 0.01 * 1 / 10.5]
    assert got["local_lr"] == pytest.approx(want), (
        f"local_lr() gave {got['local_lr']}, want {want}: beta ||w|| belongs in the denominator"
    )


def test_zero_norm_layers_get_ratio_one(student):
    # a zero-initialised layer (||w|| = 0) and a layer without gradient (||g|| = 0, no decay)
    got = student.run(observe_lars, w=[0, 0, 1, 0], g=[6, 8, 0, 0], weight_decay=0.0)["local_lr"]
    assert np.all(np.isfinite(got)), f"local_lr() gave {got}: a zero norm must not divide by zero"
    assert got == pytest.approx([1.0, 1.0]), f"local_lr() gave {got}; the guard's ratio is 1"
    (ratio,) = student.calls("dlsys.learn.optim", [("trust_ratio", (np.array([0.0, 2.0]), np.array([1.0, 0.0]), 0.5))])
    assert ratio == pytest.approx([1.0, 1.0]), f"trust_ratio with a zero norm gave {ratio}, want 1 for each"


def test_trust_ratio_scales_with_eta(student):
    (got,) = student.calls("dlsys.learn.optim", [("trust_ratio", (np.array([2.0, 9.0]), np.array([4.0, 3.0]), 0.1))])
    want = [0.1 * 2 / 4, 0.1 * 9 / 3]
    assert got == pytest.approx(want), f"trust_ratio gave {got}, want eta ||w|| / ||g|| = {want}"


def test_steps_match_an_independent_numpy_lars(student):
    rng = np.random.default_rng(0)
    w, eta, beta, mu, lr = rng.normal(size=7), 0.002, 0.01, 0.9, 3.0
    gs = [rng.normal(size=7) * np.array([100.0] * 3 + [0.01] * 4) for _ in range(3)]  # norms orders of magnitude apart
    got = student.run(
        observe_lars,
        w=w,
        g=np.zeros(7),
        sizes=(3, 4),
        lr=lr,
        steps=gs,
        momentum=mu,
        weight_decay=beta,
        trust_coefficient=eta,
    )["params"]
    expect, v = w.copy(), np.zeros(7)
    for g in gs:
        for lo, hi in ((0, 3), (3, 7)):
            local = (
                eta * np.linalg.norm(expect[lo:hi]) / (np.linalg.norm(g[lo:hi]) + beta * np.linalg.norm(expect[lo:hi]))
            )
            v[lo:hi] = mu * v[lo:hi] + lr * local * (g[lo:hi] + beta * expect[lo:hi])
        expect -= v
    assert got == pytest.approx(expect, rel=1e-12), (
        "three LARS steps with momentum differ from an independent numpy LARS"
    )
