import numpy as np
import pytest

from dlsys.learn import nn
from dlsys.learn.transformer import Residual, transformer

RNG = np.random.default_rng(1234)


def numerical_grad(f, x, eps=1e-6):
    """Central finite differences of the scalar f() with respect to every entry of x."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f()
        x[i] = old - eps
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def check_model_gradients(model, x):
    """Loss = sum(R * model(x)) for a fixed random R, so dloss/doutput = R."""
    r = RNG.standard_normal((len(x),) + model.output_shape)
    loss = lambda: float(np.sum(r * model(x)))
    model(x)
    dx = model.backward(r)
    np.testing.assert_allclose(model.grads, numerical_grad(loss, model.params), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dx, numerical_grad(loss, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "layer, in_shape",
    [
        (nn.Linear(5, 3), (5,)),
        (nn.ReLU(), (7,)),
        (nn.Flatten(), (2, 3, 3)),
        (nn.Conv2d(2, 3, 3, padding=1), (2, 5, 5)),
        (nn.Conv2d(2, 2, 3, stride=2), (2, 7, 6)),
        (nn.MaxPool2d(2), (2, 4, 6)),
        (nn.MaxPool2d(3, stride=2), (1, 7, 7)),
        (nn.AvgPool2d(2), (3, 4, 4)),
    ],
)
def test_layer_gradients_match_finite_differences(layer, in_shape):
    model = nn.Sequential([layer], in_shape, seed=3, dtype=np.float64)
    model.params[...] = RNG.standard_normal(model.params.size)  # nonzero biases too
    check_model_gradients(model, RNG.standard_normal((3,) + in_shape))


@pytest.mark.parametrize(
    "make, in_shape",
    [
        (lambda: nn.mlp([6, 5, 4], seed=0, dtype=np.float64), (6,)),
        (lambda: nn.cnn(seed=0, dtype=np.float64), (1, 8, 8)),
    ],
)
def test_whole_model_with_cross_entropy_matches_finite_differences(make, in_shape):
    model = make()
    x = RNG.standard_normal((4,) + in_shape)
    y = RNG.integers(0, model.output_shape[0], 4)
    loss = lambda: nn.softmax_cross_entropy(model(x), y)[0]
    _, dlogits = nn.softmax_cross_entropy(model(x), y)
    model.backward(dlogits)
    np.testing.assert_allclose(model.grads, numerical_grad(loss, model.params), rtol=1e-5, atol=1e-8)


def test_softmax_cross_entropy_value_and_gradient():
    logits = RNG.standard_normal((5, 4))
    y = np.array([0, 3, 1, 1, 2])
    loss, d = nn.softmax_cross_entropy(logits, y)
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert loss == pytest.approx(-np.mean(np.log(p[np.arange(5), y])))
    np.testing.assert_allclose(
        d, numerical_grad(lambda: nn.softmax_cross_entropy(logits, y)[0], logits), rtol=1e-6, atol=1e-9
    )
    big, _ = nn.softmax_cross_entropy(np.array([[1000.0, 0.0]]), np.array([1]))
    assert big == pytest.approx(1000.0)  # no overflow


def test_parameters_and_gradients_are_views_of_the_flat_buffers():
    model = nn.cnn(seed=0)
    assert model.params.ndim == model.grads.ndim == 1
    assert model.params.size == sum(s.size for s in model.param_slices())
    for layer in model.layers:
        for name in layer.params:
            assert np.shares_memory(layer.params[name], model.params)
            assert np.shares_memory(layer.grads[name], model.grads)
    model.params[...] = 0.5
    assert np.all(model.layers[0].params["W"] == 0.5)
    model.layers[-1].params["b"][...] = 2.0
    s = model.param_slices()[-1]
    assert s.name == "linear7.b" and np.all(model.params[s.offset : s.offset + s.size] == 2.0)
    x = RNG.standard_normal((2, 1, 8, 8))
    model.backward(model(x) - 1.0)
    for layer_slice in model.layer_slices():
        layer = model.layers[layer_slice.layer]
        flat = np.concatenate([g.ravel() for g in layer.grads.values()])
        assert np.array_equal(model.grads[layer_slice.offset : layer_slice.offset + layer_slice.size], flat)


def test_slices_tile_the_buffer_in_order():
    model = nn.mlp([4, 3, 2])
    assert [(s.name, s.offset, s.size) for s in model.param_slices()] == [
        ("linear0.W", 0, 12),
        ("linear0.b", 12, 3),
        ("linear2.W", 15, 6),
        ("linear2.b", 21, 2),
    ]
    assert [(s.layer, s.name, s.offset, s.size) for s in model.layer_slices()] == [
        (0, "linear0", 0, 15),
        (2, "linear2", 15, 8),
    ]


def test_grad_hook_fires_last_layer_first_before_earlier_backward():
    model = nn.cnn(seed=0)
    events = []
    for i, layer in enumerate(model.layers):
        original = layer.backward
        layer.backward = lambda dy, i=i, original=original: (events.append(("backward", i)), original(dy))[1]

    def hook(i, name, grad):
        assert np.shares_memory(grad, model.grads) and grad.ndim == 1
        events.append(("ready", i, name, grad.copy()))

    model.backward(model(RNG.standard_normal((3, 1, 8, 8))), on_grad_ready=hook)
    order = [e[:2] for e in events]
    assert order == [
        ("backward", 7),
        ("ready", 7),
        ("backward", 6),
        ("backward", 5),
        ("backward", 4),
        ("backward", 3),
        ("ready", 3),
        ("backward", 2),
        ("backward", 1),
        ("backward", 0),
        ("ready", 0),
    ]
    for _, i, name, grad in (e for e in events if e[0] == "ready"):
        s = next(s for s in model.layer_slices() if s.layer == i)
        assert name == s.name and np.array_equal(grad, model.grads[s.offset : s.offset + s.size])


def test_seeded_initialisation_is_deterministic():
    assert np.array_equal(nn.cnn(seed=7).params, nn.cnn(seed=7).params)
    assert not np.array_equal(nn.cnn(seed=7).params, nn.cnn(seed=8).params)
    a, b = nn.mlp([64, 32, 10], seed=1), nn.mlp([64, 32, 10], seed=1)
    x = RNG.standard_normal((5, 64))
    assert np.array_equal(a(x), b(x))
    assert a.params.dtype == np.float32


def test_flops_follow_the_formulas():
    model = nn.cnn()
    conv, linear = model.layers[0], model.layers[-1]
    assert conv.flops(2) == 2 * (8 * 8 * 8) * (2 * 1 * 9 + 1)
    assert linear.flops(3) == 3 * (2 * 64 + 1) * 10
    assert model.flops(1)[6] == 0  # Flatten
    assert len(model.flops(4)) == len(model.layers)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="Linear"):
        nn.Sequential([nn.Linear(3, 4)], (5,))
    with pytest.raises(ValueError, match="Conv2d"):
        nn.Sequential([nn.Conv2d(1, 2, 5)], (1, 3, 3))
    with pytest.raises(ValueError, match="Conv2d"):
        nn.Sequential([nn.Conv2d(3, 2, 1)], (1, 3, 3))
    with pytest.raises(ValueError, match="MaxPool2d"):
        nn.Sequential([nn.MaxPool2d(2)], (6,))
    with pytest.raises(ValueError, match="x must have shape"):
        nn.mlp([4, 2])(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="labels"):
        nn.softmax_cross_entropy(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="logits"):
        nn.softmax_cross_entropy(np.zeros((2, 3)), np.array([0]))
    with pytest.raises(ValueError, match="sizes"):
        nn.mlp([10])


def test_a_replica_shares_the_weights_and_keeps_its_own_forward_like_a_deepcopy():
    import copy

    model = transformer(11, 8, d_model=16, heads=4, layers=2, dtype=np.float64)
    shared = {id(a): a for layer in model.layers for a in (*layer.params.values(), *layer.grads.values())}
    copied = copy.deepcopy(model.layers, shared)
    twins = [layer.replica() for layer in model.layers]
    tokens = np.random.default_rng(0).integers(0, 11, (2, 8)).astype(np.float64)
    outputs = []
    for layers in (copied, twins):
        x = tokens
        for layer in layers:
            x = layer.forward(x)
        dy = np.ones_like(x)
        for layer in reversed(layers):
            dy = layer.backward(dy)
        outputs.append((x, model.grads.copy()))
    assert np.array_equal(outputs[0][0], outputs[1][0]) and np.array_equal(outputs[0][1], outputs[1][1])
    for twin, layer in zip(twins, model.layers):
        assert all(twin.params[k] is a for k, a in layer.params.items())
        assert all(twin.grads[k] is a for k, a in layer.grads.items())
    residual = next(layer for layer in twins if isinstance(layer, Residual))
    original = model.layers[twins.index(residual)]
    assert all(a is not b for a, b in zip(residual.layers, original.layers))
    assert original.layers[1].params["Wqkv"] is residual.layers[1].params["Wqkv"]
    assert not hasattr(model.layers[0], "idx") and not hasattr(original.layers[1], "attn")  # no cache of the twins'
