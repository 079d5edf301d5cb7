import time

import numpy as np
import pytest

from dlsys.learn import data, nn, optim

RNG = np.random.default_rng(99)


class Slice:
    def __init__(self, offset, size):
        self.offset, self.size = offset, size


SLICES = [Slice(0, 6), Slice(6, 3), Slice(9, 5)]
SIZE = 14


def random_grads(steps, size=SIZE):
    return [RNG.standard_normal(size) for _ in range(steps)]


def run(opt, grads):
    for g in grads:
        opt.grads[...] = g
        opt.step()
    return opt.params


@pytest.mark.parametrize(
    "momentum, weight_decay, nesterov", [(0.0, 0.0, False), (0.9, 0.0, False), (0.9, 1e-2, False), (0.8, 1e-3, True)]
)
def test_sgd_matches_a_per_element_loop(momentum, weight_decay, nesterov):
    w0, grads, lr = RNG.standard_normal(SIZE), random_grads(5), 0.1
    opt = optim.SGD(w0.copy(), np.zeros(SIZE), lr, momentum, weight_decay, nesterov)
    w, v = w0.copy(), np.zeros(SIZE)
    for g in grads:  # PyTorch's torch.optim.SGD, element by element
        for i in range(SIZE):
            d = g[i] + weight_decay * w[i]
            v[i] = momentum * v[i] + d
            w[i] -= lr * (d + momentum * v[i] if nesterov else v[i])
    np.testing.assert_allclose(run(opt, grads), w, rtol=1e-13, atol=1e-15)


def test_lars_trust_ratio_is_the_closed_formula():
    w, g = RNG.standard_normal(SIZE), RNG.standard_normal(SIZE)
    opt = optim.LARS(w, g, lr=1.0, slices=SLICES, weight_decay=5e-4, trust_coefficient=0.001)
    expected = [
        0.001
        * np.linalg.norm(w[s.offset : s.offset + s.size])
        / (np.linalg.norm(g[s.offset : s.offset + s.size]) + 5e-4 * np.linalg.norm(w[s.offset : s.offset + s.size]))
        for s in SLICES
    ]
    np.testing.assert_allclose(opt.local_lr(), expected, rtol=1e-14)
    w[:6] = 0.0  # zero weights: trust ratio 1
    assert opt.local_lr()[0] == 1.0


def test_lars_matches_a_per_layer_reference():
    w0, grads, lr, m, beta, eta = RNG.standard_normal(SIZE), random_grads(4), 2.0, 0.9, 1e-3, 0.01
    opt = optim.LARS(w0.copy(), np.zeros(SIZE), lr, SLICES, m, beta, eta)
    w, v = w0.copy(), np.zeros(SIZE)
    for g in grads:  # You, Gitman & Ginsburg 2017, Algorithm 1
        for s in SLICES:
            l = slice(s.offset, s.offset + s.size)
            local = eta * np.linalg.norm(w[l]) / (np.linalg.norm(g[l]) + beta * np.linalg.norm(w[l]))
            v[l] = m * v[l] + lr * local * (g[l] + beta * w[l])
            w[l] -= v[l]
    np.testing.assert_allclose(run(opt, grads), w, rtol=1e-12)


def test_lamb_matches_a_per_layer_reference():
    w0, grads, lr, (b1, b2), eps, lam = RNG.standard_normal(SIZE), random_grads(4), 0.01, (0.9, 0.99), 1e-6, 0.01
    opt = optim.LAMB(w0.copy(), np.zeros(SIZE), lr, SLICES, (b1, b2), eps, lam)
    w, m, v = w0.copy(), np.zeros(SIZE), np.zeros(SIZE)
    for t, g in enumerate(grads, start=1):  # You et al. 2019, Algorithm 2
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        r = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        for s in SLICES:
            l = slice(s.offset, s.offset + s.size)
            u = r[l] + lam * w[l]
            w[l] -= lr * np.linalg.norm(w[l]) / np.linalg.norm(u) * u
    np.testing.assert_allclose(run(opt, grads), w, rtol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda p, g, s: optim.SGD(p, g, 0.05, momentum=0.9, weight_decay=1e-4, nesterov=True),
        lambda p, g, s: optim.LARS(p, g, 1.0, s),
        lambda p, g, s: optim.LAMB(p, g, 0.01, s),
    ],
)
def test_state_dict_round_trip_is_bit_identical(make):
    model = nn.mlp([8, 6, 3], seed=0)
    slices = model.param_slices()
    grads = [RNG.standard_normal(model.params.size).astype(np.float32) for _ in range(6)]
    opt = make(model.params, model.grads, slices)
    run(opt, grads[:3])
    state, params = opt.state_dict(), model.params.copy()
    expected = run(opt, grads[3:]).copy()
    assert state["steps"] == 3 and not any(
        np.shares_memory(a, model.params) for a in state.values() if isinstance(a, np.ndarray)
    )
    fresh = nn.mlp([8, 6, 3], seed=5)
    fresh.params[...] = params
    restored = make(fresh.params, fresh.grads, slices)
    restored.load_state_dict(state)
    assert np.array_equal(run(restored, grads[3:]), expected)


def test_slices_must_tile_the_buffer():
    w, g = np.zeros(SIZE), np.zeros(SIZE)
    for bad in ([Slice(0, 6), Slice(7, 7)], [Slice(0, 6)], [], [Slice(0, 14), Slice(14, 0)]):
        with pytest.raises(ValueError, match="slices must tile"):
            optim.LARS(w, g, 1.0, bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(lr=0.0), "lr"),
        (dict(lr=0.1, momentum=1.0), "momentum"),
        (dict(lr=0.1, weight_decay=-1.0), "weight_decay"),
        (dict(lr=0.1, nesterov=True), "nesterov"),
    ],
)
def test_sgd_rejects_bad_hyperparameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        optim.SGD(np.zeros(3), np.zeros(3), **kwargs)
    with pytest.raises(ValueError, match="1-D buffers"):
        optim.SGD(np.zeros((3, 1)), np.zeros((3, 1)), 0.1)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda w, g: optim.LARS(w, g, 1.0, SLICES, momentum=-0.1), "momentum"),
        (lambda w, g: optim.LARS(w, g, 1.0, SLICES, trust_coefficient=0.0), "trust_coefficient"),
        (lambda w, g: optim.LAMB(w, g, 1.0, SLICES, betas=(0.9, 1.0)), r"betas\[1\]"),
        (lambda w, g: optim.LAMB(w, g, 1.0, SLICES, eps=-1.0), "eps"),
    ],
)
def test_layerwise_optimizers_reject_bad_hyperparameters(make, message):
    with pytest.raises(ValueError, match=message):
        make(np.zeros(SIZE), np.zeros(SIZE))


def test_learning_rate_schedules():
    assert optim.scale_lr(0.1, 8192, 256) == pytest.approx(3.2)
    assert optim.scale_lr(0.1, 1024, 256, rule="sqrt") == pytest.approx(0.2)
    assert [optim.warmup_lr(s, 4, 0.1, 0.5) for s in range(6)] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.5])
    assert [optim.step_decay_lr(s, 1.0, [2, 4]) for s in range(5)] == pytest.approx([1, 1, 0.1, 0.1, 0.01])
    schedule = optim.goyal_schedule(0.1, k=32, warmup_steps=5, milestones=[30, 60])
    assert [schedule(s) for s in (0, 5, 29, 30, 60)] == pytest.approx([0.1, 3.2, 3.2, 0.32, 0.032])
    w, g = np.zeros(1), np.ones(1)
    opt = optim.SGD(w, g, schedule)
    for _ in range(3):
        opt.step()
    assert w[0] == pytest.approx(-(0.1 + 0.72 + 1.34)) and opt.current_lr() == pytest.approx(1.96)
    with pytest.raises(ValueError, match="rule"):
        optim.scale_lr(0.1, 512, 256, rule="cube")


def test_mlp_with_sgd_learns_digits_to_95_percent():
    start = time.perf_counter()
    X, y = data.load_digits()
    X_train, X_test, y_train, y_test = data.train_test_split(X, y, 0.25, seed=0)
    model = nn.mlp([64, 64, 10], seed=0)
    opt = optim.SGD(model.params, model.grads, lr=0.1, momentum=0.9, weight_decay=1e-4)
    for epoch in range(20):
        for xb, yb in data.batches(X_train, y_train, 32, seed=0, epoch=epoch):
            _, dlogits = nn.softmax_cross_entropy(model(xb), yb)
            model.backward(dlogits)
            opt.step()
    accuracy = np.mean(model(X_test).argmax(axis=1) == y_test)
    assert accuracy >= 0.95
    assert time.perf_counter() - start < 10
