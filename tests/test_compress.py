"""dlsys.compress: unbiasedness, error feedback, honest bytes, round trips, bad inputs.

Every test that loops over methods reads ``COMPRESSORS``, so a new method is tested
as soon as it is registered (and ``FORMULAS`` demands its byte formula).
"""
import inspect
import math

import numpy as np
import pytest

from dlsys.compress import COMPRESSORS, NoneMemory, ResidualMemory, make, payload_nbytes


def build(name, seed=0, **options):
    """A compressor, given a seeded Generator if its method is stochastic."""
    if "rng" in inspect.signature(COMPRESSORS[name]).parameters:
        options["rng"] = np.random.default_rng(seed)
    return make(name, **options)


def gradient(n, seed=1, dtype=np.float32, shape=None):
    g = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    return g.reshape(shape) if shape else g


# Encoded bytes per method for n entries of a float32 gradient (itemsize 4), as documented.
FORMULAS = {
    "none": lambda n, c: 4 * n,
    "fp16": lambda n, c: 2 * n,
    "int8": lambda n, c: n + 2 * 4,
    "onebit": lambda n, c: math.ceil(n / 8) + 2 * 4,
    "terngrad": lambda n, c: math.ceil(n / 4) + 4,
    "qsgd": lambda n, c: math.ceil(n * c.bits / 8) + 4 * math.ceil(n / c.bucket),
    "topk": lambda n, c: math.ceil(c.ratio * n) * (4 + 4),
    "randomk": lambda n, c: math.ceil(c.ratio * n) * 4,
}


def test_every_method_has_a_byte_formula():
    assert set(FORMULAS) == set(COMPRESSORS)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
@pytest.mark.parametrize("n", [1, 7, 1000, 1003])
def test_encoded_bytes_follow_the_formula(name, n):
    c = build(name)
    payload, _ = c.compress(gradient(n), "w")
    assert payload_nbytes(payload) == FORMULAS[name](n, c)


def test_qsgd_bytes_at_every_bit_width():
    for bits in (2, 4, 8):
        c = build("qsgd", bits=bits, bucket=64)
        payload, _ = c.compress(gradient(1000), "w")
        assert payload_nbytes(payload) == math.ceil(1000 * bits / 8) + 4 * math.ceil(1000 / 64)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_decompress_restores_shape_and_dtype(name):
    c = build(name, **({"ratio": 0.3} if name in ("topk", "randomk") else {}))
    g = gradient(24, dtype=np.float64, shape=(4, 6))
    out = c.decompress(*c.compress(g, "w"))
    assert out.shape == g.shape and out.dtype == g.dtype


def test_round_trips_within_their_precision():
    g = gradient(1000)
    assert np.array_equal(build("none").decompress(*build("none").compress(g, "w")), g)
    # float16 keeps 11 significant bits: relative error <= 2**-11 in its normal range.
    half = build("fp16")
    assert np.allclose(half.decompress(*half.compress(g, "w")), g, rtol=2 ** -11, atol=6.1e-5)
    # 8-bit linear: rounding to the nearest of 256 levels errs by at most half a step.
    c = build("int8")
    payload, ctx = c.compress(g, "w")
    step = (g.max() - g.min()) / 255
    assert np.abs(c.decompress(payload, ctx) - g).max() <= step / 2 * (1 + 1e-5)


def test_onebit_decodes_each_sign_to_its_group_mean():
    g = gradient(101)
    c = build("onebit")
    out = c.decompress(*c.compress(g, "w"))
    assert np.allclose(out[g >= 0], g[g >= 0].mean()) and np.allclose(out[g < 0], g[g < 0].mean())


def test_topk_keeps_exactly_the_k_largest_magnitudes():
    g = gradient(1000)  # continuous draws: magnitudes are distinct, so the top k is unique
    c = build("topk", ratio=0.05)
    out = c.decompress(*c.compress(g, "w"))
    largest = np.argsort(np.abs(g))[-50:]
    assert set(np.flatnonzero(out)) == set(largest)
    assert np.array_equal(out[largest], g[largest])


def test_randomk_indices_are_rebuilt_from_the_shared_seed():
    # Two ranks seeded alike draw the same indices, so only values need to travel.
    sender, receiver = build("randomk", seed=5, ratio=0.1), build("randomk", seed=5, ratio=0.1)
    g = gradient(200)
    for _ in range(3):
        payload, ctx = sender.compress(g, "w")
        _, receiver_ctx = receiver.compress(np.zeros_like(g), "w")
        assert np.array_equal(sender.decompress(payload, ctx), receiver.decompress(payload, receiver_ctx))


# Unbiasedness: the mean of N independent decodings has per-entry standard error
# sqrt(Var / N). Each test derives Var from the method's formula and allows 5 standard
# errors (a miss per entry has probability < 6e-7, so < 1e-4 over 100 entries), plus a
# float32 rounding allowance for entries whose variance is zero.
TRIALS = 4000


def mean_of_decodings(c, g):
    return np.mean([c.decompress(*c.compress(g, "w")) for _ in range(TRIALS)], axis=0, dtype=np.float64)


def assert_unbiased(mean, g, var):
    g = g.astype(np.float64)
    bound = 5 * np.sqrt(var / TRIALS) + 1e-6 * np.abs(g)
    assert np.all(np.abs(mean - g) <= bound), np.max(np.abs(mean - g) - bound)


def test_terngrad_is_unbiased():
    g = gradient(100)
    a, s = np.abs(g.astype(np.float64)), np.abs(g).max()
    assert_unbiased(mean_of_decodings(build("terngrad"), g), g, a * (s - a))  # s^2 p (1 - p), p = |g| / s


@pytest.mark.parametrize("bits", [2, 4])
def test_qsgd_is_unbiased(bits):
    bucket = 16  # 100 entries: six full buckets and an uneven last one
    c = build("qsgd", bits=bits, bucket=bucket)
    g = gradient(100)
    v = g.astype(np.float64)
    norms = np.repeat([np.linalg.norm(v[i:i + bucket]) for i in range(0, 100, bucket)], bucket)[:100]
    r = c.levels * np.abs(v) / norms
    p = r - np.floor(r)
    assert_unbiased(mean_of_decodings(c, g), g, (norms / c.levels) ** 2 * p * (1 - p))


def test_randomk_is_unbiased():
    g = gradient(100)
    ratio = 0.2  # each entry sent with probability k / n as (n / k) g: Var = g^2 (n / k - 1)
    assert_unbiased(mean_of_decodings(build("randomk", ratio=ratio), g), g, g.astype(np.float64) ** 2 * (1 / ratio - 1))


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_error_feedback_loses_nothing(name):
    # e_t = g_t + e_{t-1} - sent_t telescopes: sum(sent) + e_T = sum(g), whatever the method.
    c, memory = build(name), ResidualMemory()
    sent = total = 0
    for step in range(6):
        g = gradient(257, seed=step)
        total = total + g.astype(np.float64)
        compensated = memory.compensate(g, "w")
        payload, ctx = c.compress(compensated, "w")
        memory.update(compensated, "w", c, payload, ctx)
        sent = sent + c.decompress(payload, ctx).astype(np.float64)
    assert np.allclose(sent + memory.residuals["w"], total, rtol=0, atol=1e-5 * np.abs(total).max())


def test_none_memory_passes_the_gradient_through():
    g = gradient(10)
    assert NoneMemory().compensate(g, "w") is g


def test_aggregate_is_the_mean():
    parts = [gradient(10, seed=s) for s in range(3)]
    assert np.allclose(build("none").aggregate(parts), np.mean(parts, axis=0))


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(ValueError, match="method") as error:
        make("gzip")
    assert all(name in str(error.value) for name in COMPRESSORS)


@pytest.mark.parametrize("name", ["topk", "randomk"])
@pytest.mark.parametrize("ratio", [0, -0.1, 1.5])
def test_ratio_outside_zero_one(name, ratio):
    with pytest.raises(ValueError, match=r"ratio.*\(0, 1\]"):
        build(name, ratio=ratio)


@pytest.mark.parametrize("bits", [1, 3, 16])
def test_qsgd_bits_outside_the_supported_set(bits):
    with pytest.raises(ValueError, match=r"bits.*\(2, 4, 8\)"):
        build("qsgd", bits=bits)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_non_float_input(name):
    with pytest.raises(ValueError, match="tensor.*float"):
        build(name).compress(np.arange(10), "w")
