"""Graded: exercise terngrad_quantizer (dlsys.compress.terngrad: compress and decompress),
held to TernGrad's statistics (mean g, variance |g| (s - |g|), from many seeded draws) and
to the byte formula ceil(n / 4) + 4."""

import math

import numpy as np
import pytest

from dlsys.compress import payload_nbytes
from dlsys.compress.terngrad import TernGradCompressor

pytestmark = pytest.mark.ex_terngrad_quantizer

DRAWS = 2000


def quantizer(seed=0, clip=None):
    return TernGradCompressor(np.random.default_rng(seed), clip=clip)


def gradient(n=300, seed=1, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def draws(g, scale=None, seed=0):
    """DRAWS decompressions of g, one per row (float64)."""
    c = quantizer(seed)
    options = {} if scale is None else {"scale": scale}
    return np.array([c.decompress(*c.compress(g, "w", **options)) for _ in range(DRAWS)], np.float64)


def test_decodes_to_minus_s_zero_or_s_with_the_sign_of_g():
    g = gradient(1001)
    g[[5, 17]] = 0.0
    c = quantizer()
    decoded = c.decompress(*c.compress(g, "w"))
    s = np.float32(np.abs(g).max())
    assert decoded.shape == g.shape and decoded.dtype == g.dtype
    assert set(np.unique(decoded)) <= {-s, np.float32(0), s}, "every entry decodes to -s, 0 or s, s = max |g|"
    assert np.all(decoded * g >= 0), "a kept entry keeps the sign of g"
    assert decoded[np.argmax(np.abs(g))] == np.sign(g[np.argmax(np.abs(g))]) * s, \
        "the largest entry is kept with probability |g| / s = 1"
    assert np.all(decoded[[5, 17]] == 0), "a zero is kept with probability 0"
    zeros = np.zeros(10, np.float32)
    assert np.array_equal(c.decompress(*c.compress(zeros, "w")), zeros), "an all-zero gradient (s = 0) decodes to zeros"


def test_unbiased_the_mean_of_many_draws_is_g():
    g = gradient()
    s = np.abs(g).max()
    sigma = np.sqrt(np.abs(g) * (s - np.abs(g)) / DRAWS) + 1e-12  # the standard error of each entry's mean
    z = (draws(g).mean(axis=0) - g) / sigma
    assert np.abs(z).max() < 5, f"the mean of {DRAWS} draws is {np.abs(z).max():.1f} standard errors away from g"
    assert np.mean(z ** 2) < 1.3, "the means are further from g than TernGrad's variance allows: biased"


def test_variance_is_abs_g_times_s_minus_abs_g():
    g = gradient()
    s = np.abs(g).max()
    want = np.abs(g) * (s - np.abs(g))
    got = draws(g).var(axis=0)
    assert got.sum() == pytest.approx(want.sum(), rel=0.05), \
        "each entry is s sign(g) with probability |g| / s, else 0: its variance is |g| (s - |g|)"


def test_a_shared_scale_larger_or_smaller_than_max_abs_g():
    g = gradient(200, seed=2)
    for scale, what in ((3 * float(np.abs(g).max()), "3 max |g|"), (float(np.abs(g).max()) / 2, "max |g| / 2")):
        c = quantizer(seed=3)
        payload, ctx = c.compress(g, "w", scale=scale)
        assert set(np.unique(np.abs(c.decompress(payload, ctx)))) <= {np.float32(0), np.float32(scale)}, \
            f"scale={what}: entries decode to -scale, 0 or scale"
        want = np.clip(g, -scale, scale)  # entries beyond a smaller shared scale are clipped (always sent)
        sigma = np.sqrt(np.abs(want) * (scale - np.abs(want)) / DRAWS) + 1e-6
        assert np.abs((draws(g, scale, seed=4).mean(axis=0) - want) / sigma).max() < 5, \
            f"scale={what}: the mean of many draws must be g clipped to [-scale, scale]"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_payload_is_2_bit_codes_and_one_float32_scaler(dtype):
    c = quantizer()
    for n in (1, 3, 4, 5, 1000, 1003):
        payload, _ = c.compress(gradient(n, dtype=dtype), "w")
        want = math.ceil(n / 4) + 4
        assert payload_nbytes(payload) == want, \
            f"n={n}, {np.dtype(dtype).name}: {payload_nbytes(payload)} bytes, want ceil(n / 4) + 4 = {want}"
        assert c.encoded_nbytes(n) == want


def test_round_trip_keeps_shape_and_dtype():
    c = quantizer()
    for g in (gradient(60, dtype=np.float64).reshape(3, 4, 5), gradient(7, dtype=np.float16), np.zeros((0, 3), np.float32)):
        decoded = c.decompress(*c.compress(g, "w"))
        assert decoded.shape == g.shape and decoded.dtype == g.dtype, f"shape {g.shape}, {g.dtype}"
        assert np.all(decoded * g >= 0)
