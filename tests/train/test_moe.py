"""The mixture-of-experts layer: expert parallelism equals one rank (outputs, input
gradients, weights after SGD steps) for ep = 1, 2, 4 on threads and processes; the gates'
gradient against finite differences; capacity and dropping; bad input refused by name."""

from math import ceil

import numpy as np
import pytest

from dlsys.train.moe import MoE, MoEConfig, check_moe, init_params, route, train_expert_parallel, train_single

TOL = 1e-12  # float64; the expert rows meet the same weights in the same order, sums differ only in rounding


def gathered(values, name):
    if name == "router":
        return values[0]["params"]["router"]
    return np.concatenate([v["params"][name] for v in values])


GATINGS = [(1, 1.0), (2, 1.25), (1, 0.5), (2, 8.0)]  # (top_k, capacity factor): drops in the first three
CASES = (
    [("threads", ep, *g) for ep in (1, 2, 4) for g in GATINGS]
    + [("processes", ep, 2, 1.25) for ep in (2, 4)]
    + [("mpi", 2, 2, 1.25)]
)


@pytest.mark.parametrize("backend,ep,top_k,capacity_factor", CASES)
def test_expert_parallel_equals_one_rank(backend, ep, top_k, capacity_factor):
    from dlsys.comm.backends.mpi import mpi_unavailable

    if backend == "mpi" and mpi_unavailable() is not None:
        pytest.skip(str(mpi_unavailable()))
    config = MoEConfig(top_k=top_k, capacity_factor=capacity_factor)
    result = train_expert_parallel(config, ep, steps=3, backend=backend)
    single = train_single(config, groups=ep, steps=3)
    np.testing.assert_allclose(np.concatenate([v["y"] for v in result.values]), single["y"], rtol=0, atol=TOL)
    np.testing.assert_allclose(np.concatenate([v["dx"] for v in result.values]), single["dx"], rtol=0, atol=TOL)
    for name, w in single["params"].items():
        np.testing.assert_allclose(gathered(result.values, name), w, rtol=0, atol=TOL, err_msg=name)
    assert all(v["params"]["router"].tobytes() == result.values[0]["params"]["router"].tobytes() for v in result.values)


def test_without_drops_the_grouping_does_not_matter():
    config = MoEConfig(top_k=2, capacity_factor=100.0)
    x = np.random.default_rng(1).standard_normal((32, 8))
    ys = [MoE(init_params(config), config).forward(x, groups=g) for g in (1, 2, 4)]
    np.testing.assert_allclose(ys[1], ys[0], atol=TOL)
    np.testing.assert_allclose(ys[2], ys[0], atol=TOL)


@pytest.mark.parametrize("top_k", [1, 2])
def test_gradients_match_finite_differences(top_k):
    config = MoEConfig(top_k=top_k, capacity_factor=100.0, tokens=6)
    rng = np.random.default_rng(3)
    x, target = rng.standard_normal((6, 8)), rng.standard_normal((6, 8))
    layer = MoE(init_params(config), config)

    def loss():
        return 0.5 * ((layer.forward(x) - target) ** 2).sum()

    loss()
    layer.backward(layer.forward(x) - target)
    eps = 1e-6
    for name in ("router", "W1", "b2"):
        w = layer.params[name]
        for index in [(0, 0), (1, 2)] if w.ndim == 2 else [(0, 1, 2), (3, 0, 1)]:
            if index[0] >= w.shape[0]:
                continue
            keep = w[index]
            w[index] = keep + eps
            up = loss()
            w[index] = keep - eps
            down = loss()
            w[index] = keep
            assert layer.grads[name][index] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-8), name


def test_capacity_drops_the_tokens_over_it_first_choices_first():
    router = np.zeros((2, 4))
    router[0, 0] = 10.0  # every token prefers expert 0
    x = np.tile([1.0, 0.0], (8, 1))
    r = route(x, router, top_k=1, capacity_factor=1.0)
    assert r.capacity == ceil(1.0 * 8 * 1 / 4) == 2
    assert r.keep[:, 0].tolist() == [True, True] + [False] * 6  # tokens in order
    assert r.wanted.tolist() == [8, 0, 0, 0] and r.load.tolist() == [2, 0, 0, 0]
    r2 = route(x, router, top_k=2, capacity_factor=1.0)  # capacity 4; second choices after every first
    assert r2.capacity == 4 and r2.keep[:, 0].sum() == 4
    np.testing.assert_allclose(r2.gates.sum(axis=1), 1.0)  # GShard renormalises the top 2


def test_a_dropped_token_gets_zero_output():
    config = MoEConfig(top_k=1, capacity_factor=0.25, tokens=16)
    layer = MoE(init_params(config), config)
    x = np.random.default_rng(0).standard_normal((16, 8))
    y = layer.forward(x)
    dropped = ~layer.routings[0].keep[:, 0]
    assert dropped.any() and np.all(y[dropped] == 0) and np.all(np.abs(y[~dropped]).sum(axis=1) > 0)


def test_the_record_counts_tokens_per_expert_and_drops():
    result = train_expert_parallel(MoEConfig(capacity_factor=0.5), 2, steps=2)
    for v in result.values:
        for s in v["stats"]:
            assert s["wanted"].sum() == 16 and s["kept"].sum() + s["dropped"] == 16
            assert s["kept"].max() <= s["capacity"] == ceil(0.5 * 16 / 4)


@pytest.mark.parametrize(
    "bad,ep,match",
    [
        (dict(experts=6), 4, r"ep must divide experts = 6: one of \[1, 2, 3, 6\], got 4"),
        (dict(top_k=5), 1, "top_k must be in 1..experts = 4"),
        (dict(capacity_factor=0.0), 1, "capacity_factor must be > 0"),
        (dict(capacity_factor=-1.0), 2, "capacity_factor must be > 0"),
    ],
)
def test_bad_input_is_refused_by_name_before_any_rank_starts(bad, ep, match):
    with pytest.raises(ValueError, match=match):
        train_expert_parallel(MoEConfig(**bad), ep, backend="processes")
    with pytest.raises(ValueError, match=match):
        check_moe(MoEConfig(**bad), ep)


def test_expert_load_record_and_figures():
    from dlsys.experiments import experts
    from dlsys.viz import experts as figures

    rows = experts.expert_load(capacity_factors=(0.5, 1.0, 4.0), top_ks=(1, 2), ep=2, experts=4, tokens=32)
    fractions = experts.dropped_fraction(rows)
    for k in (1, 2):
        mine = [f["dropped_fraction"] for f in fractions if f["top_k"] == k]
        assert mine == sorted(mine, reverse=True) and mine[-1] == 0 and mine[0] > 0
    for r in rows:
        assert r["kept"] <= min(r["wanted"], r["capacity"])
    assert figures.expert_load_figure(rows, 1, 1.0).data and figures.dropped_figure(fractions).data
