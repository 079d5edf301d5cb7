"""The transformer's layers: gradients by finite differences (float64), shapes, flops, and
the activations they keep against Korthikanti et al.'s count."""

import numpy as np
import pytest

from dlsys.learn import nn, optim
from dlsys.learn.sequence import answer_loss, reversal, train_reversal
from dlsys.learn.transformer import GELU, Embedding, LayerNorm, MultiHeadAttention, Residual, transformer
from dlsys.machine.memory import Transformer, activation_bytes


def numeric_check(model: nn.Sequential, x: np.ndarray, check_input: bool = True, entries: int = 25):
    """Compare backward's gradients of L = sum(w * model(x)) with central differences."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((len(x),) + model.output_shape)

    def loss():
        return float((w * model.forward(x)).sum())

    model.forward(x)
    dx = model.backward(w)
    analytic = model.grads.copy()
    eps = 1e-6
    for i in rng.choice(model.params.size, min(entries, model.params.size), replace=False):
        keep = model.params[i]
        model.params[i] = keep + eps
        up = loss()
        model.params[i] = keep - eps
        down = loss()
        model.params[i] = keep
        assert (up - down) / (2 * eps) == pytest.approx(analytic[i], rel=1e-5, abs=1e-7), model.param_slices()
    if check_input:
        flat = x.reshape(-1)
        for i in rng.choice(flat.size, min(entries, flat.size), replace=False):
            keep = flat[i]
            flat[i] = keep + eps
            up = loss()
            flat[i] = keep - eps
            down = loss()
            flat[i] = keep
            assert (up - down) / (2 * eps) == pytest.approx(dx.reshape(-1)[i], rel=1e-5, abs=1e-7)


def seq_input(n=3, s=5, d=8, seed=0):
    return np.random.default_rng(seed).standard_normal((n, s, d))


@pytest.mark.parametrize(
    "layer",
    [
        LayerNorm(8),
        GELU(),
        nn.Linear(8, 6),
        MultiHeadAttention(8, 2),
        MultiHeadAttention(8, 4, causal=False),
        Residual(LayerNorm(8), nn.Linear(8, 16), GELU(), nn.Linear(16, 8)),
    ],
    ids=["layernorm", "gelu", "linear-seq", "attention", "attention-full", "residual-mlp"],
)
def test_layer_gradients_match_finite_differences(layer):
    model = nn.Sequential([layer], (5, 8), seed=3, dtype=np.float64)
    if isinstance(layer, LayerNorm):  # g = 1, b = 0 at init: perturb them so their gradients matter
        model.params[...] += np.random.default_rng(2).standard_normal(model.params.size) * 0.3
    numeric_check(model, seq_input())


def test_embedding_and_whole_transformer_gradients():
    tokens = np.random.default_rng(0).integers(0, 7, (4, 6)).astype(np.float64)
    numeric_check(nn.Sequential([Embedding(7, 8, 6)], (6,), dtype=np.float64), tokens, check_input=False)
    model = transformer(vocab=7, seq_len=6, d_model=8, heads=2, layers=2, seed=1, dtype=np.float64)
    numeric_check(model, tokens, check_input=False, entries=60)


def test_attention_is_causal():
    model = nn.Sequential([MultiHeadAttention(8, 2)], (5, 8), dtype=np.float64)
    x = seq_input()
    y = model.forward(x)
    x[:, 3:] += 1.0  # later positions change; earlier outputs must not
    assert np.array_equal(model.forward(x)[:, :3], y[:, :3])


def test_transformer_shapes_parameters_and_flops():
    v, s, d, a, layers = 11, 9, 16, 4, 2
    model = transformer(vocab=v, seq_len=s, d_model=d, heads=a, layers=layers)
    assert model.output_shape == (s, v)
    per_block = 4 * d * d + 4 * d + 2 * 4 * d * d + 4 * d + d + 2 * 2 * d  # attention, MLP, two layer norms
    assert model.params.size == v * d + s * d + layers * per_block + 2 * d + d * v + v
    flops = model.flops(2)
    assert flops[-1] == 2 * s * (2 * d + 1) * v  # the output layer, per position
    attention = model.layers[1].layers[1]
    assert attention.flops(1) == s * (2 * d + 1) * 4 * d + 4 * s * s * d + 5 * a * s * s


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="heads must divide"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="tokens must be integers in 0..6"):
        transformer(vocab=7, seq_len=4, d_model=8, heads=2, layers=1).forward(np.full((1, 4), 7.0))
    with pytest.raises(ValueError, match="S in 1..4"):
        nn.Sequential([Embedding(7, 8, 4)], (5,))


def test_activation_bytes_match_korthikanti_count():
    """Our blocks keep, per layer, exactly the tensors section 4.1 counts without dropout
    (16 s b h + a s^2 b elements) plus the layer norms' 1/std per row (2 s b); the embedding's
    token indices and the final layer norm and output layer are outside the formula."""
    s, b, h, a, layers = 12, 3, 16, 4, 2
    model = transformer(vocab=10, seq_len=s, d_model=h, heads=a, layers=layers)
    model.forward(np.random.default_rng(0).integers(0, 10, (b, s)))
    blocks = sum(a_.nbytes for layer in model.layers[1 : 1 + 2 * layers] for a_ in layer.saved().values())
    formula = activation_bytes(Transformer(layers, h, a, s, b), element_nbytes=4, dropout=False)
    assert blocks == formula + layers * 2 * s * b * 4
    assert nn.activation_nbytes(model) > blocks


def test_reversal_task_and_its_loss():
    task = reversal(5, length=3, digits=4, seed=0)
    assert task.inputs.shape == (5, 6) and task.vocab == 5 and (task.inputs[:, 3] == 4).all()
    assert np.array_equal(task.targets, task.inputs[:, 2::-1])
    assert np.array_equal(task.inputs[:, 4:], task.targets[:, :2])  # teacher forcing: the answer so far
    logits = np.random.default_rng(0).standard_normal((5, 6, 5))
    _, dlogits = answer_loss(logits, task)
    assert not dlogits[:, :3].any() and dlogits[:, 3:].any()


def test_small_transformer_learns_reversal_deterministically():
    """Reduced size: 4 digits, one block of width 16, 100 steps (well under a second alone)."""
    kwargs = dict(length=4, d_model=16, layers=1, batch=32, steps=100, n_test=500)
    _, result = train_reversal(**kwargs)
    assert result.sequence_accuracy >= 0.99 and result.losses[-1] < 0.05 < result.losses[0]
    assert train_reversal(**kwargs)[1].losses == result.losses


def test_adam_first_step_moves_every_weight_by_lr_against_its_gradient_sign():
    params, grads = np.zeros(4), np.array([0.5, -2.0, 1e-3, -1e-3])
    opt = optim.Adam(params, grads, lr=0.1)
    opt.step()
    assert params == pytest.approx(-0.1 * np.sign(grads), rel=1e-4)
    assert {name: a.nbytes for name, a in opt.state_dict().items() if name != "steps"} == {"m": 32, "v": 32}
