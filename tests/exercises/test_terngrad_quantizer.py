"""Graded: exercise terngrad_quantizer (dlsys.compress.terngrad: compress and decompress),
held to TernGrad's statistics (mean g, variance |g| (s - |g|), from many seeded draws) and
to the byte formula ceil(n / 4) + 4."""

import math

import numpy as np
import pytest

pytestmark = pytest.mark.ex_terngrad_quantizer

DRAWS = 2000


def gradient(n=300, seed=1, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def observe_round_trips(gradients, seed=0, scale=None, draws=1):
    """Runs in the untrusted child: ``draws`` decompressions of each gradient by one
    TernGradCompressor (seeded), and each first payload's bytes and encoded_nbytes."""
    from dlsys.compress import payload_nbytes
    from dlsys.compress.terngrad import TernGradCompressor

    c = TernGradCompressor(np.random.default_rng(seed))
    options = {} if scale is None else {"scale": scale}
    answers = []
    for g in gradients:
        decoded, nbytes = [], None
        for _ in range(draws):
            payload, ctx = c.compress(g, "w", **options)
            nbytes = payload_nbytes(payload) if nbytes is None else nbytes
            decoded.append(c.decompress(payload, ctx))
        answers.append(
            {
                "decoded": decoded[0] if draws == 1 else np.array(decoded, np.float64),
                "nbytes": int(nbytes),
                "encoded_nbytes": int(c.encoded_nbytes(g.size)),
            }
        )
    return answers


def draws(student, g, scale=None, seed=0):
    """DRAWS decompressions of g, one per row (float64)."""
    return student.run(observe_round_trips, gradients=[g], seed=seed, scale=scale, draws=DRAWS)[0]["decoded"]


def test_decodes_to_minus_s_zero_or_s_with_the_sign_of_g(student):
    g = gradient(1001)
    g[[5, 17]] = 0.0
    zeros = np.zeros(10, np.float32)
    decoded, decoded_zeros = (a["decoded"] for a in student.run(observe_round_trips, gradients=[g, zeros]))
    s = np.float32(np.abs(g).max())
    assert decoded.shape == g.shape and decoded.dtype == g.dtype, (
        f"decoded to {decoded.dtype} {decoded.shape}, not the gradient's {g.dtype} {g.shape}"
    )
    assert set(np.unique(decoded)) <= {-s, np.float32(0), s}, (
        f"decoded values {np.unique(decoded)[:5]}...; every entry decodes to -s, 0 or s, s = max |g| = {s}"
    )
    assert np.all(decoded * g >= 0), "an entry decoded with the opposite sign of g; a kept entry keeps the sign of g"
    assert decoded[np.argmax(np.abs(g))] == np.sign(g[np.argmax(np.abs(g))]) * s, (
        "the largest entry was dropped or changed; it is kept with probability |g| / s = 1"
    )
    assert np.all(decoded[[5, 17]] == 0), "a zero entry decoded to non-zero; a zero is kept with probability 0"
    assert np.array_equal(decoded_zeros, zeros), f"an all-zero gradient (s = 0) decoded to {decoded_zeros}, not zeros"


def test_unbiased_the_mean_of_many_draws_is_g(student):
    g = gradient()
    s = np.abs(g).max()
    sigma = np.sqrt(np.abs(g) * (s - np.abs(g)) / DRAWS) + 1e-12  # the standard error of each entry's mean
    z = (draws(student, g).mean(axis=0) - g) / sigma
    assert np.abs(z).max() < 5, (
        f"the mean of {DRAWS} draws is {np.abs(z).max():.1f} standard errors away from g: biased"
    )
    assert np.mean(z**2) < 1.3, "the means are further from g than TernGrad's variance allows: biased"


def test_variance_is_abs_g_times_s_minus_abs_g(student):
    g = gradient()
    s = np.abs(g).max()
    want = np.abs(g) * (s - np.abs(g))
    got = draws(student, g).var(axis=0)
    assert got.sum() == pytest.approx(want.sum(), rel=0.05), (
        f"the draws' total variance is {got.sum():.4g}; each entry is s sign(g) with probability |g| / s, "
        f"else 0: its variance is |g| (s - |g|), {want.sum():.4g} in all"
    )


def test_a_shared_scale_larger_or_smaller_than_max_abs_g(student):
    g = gradient(200, seed=2)
    for scale, what in ((3 * float(np.abs(g).max()), "3 max |g|"), (float(np.abs(g).max()) / 2, "max |g| / 2")):
        decoded = student.run(observe_round_trips, gradients=[g], seed=3, scale=scale)[0]["decoded"]
        assert set(np.unique(np.abs(decoded))) <= {np.float32(0), np.float32(scale)}, (
            f"scale={what}: entries decoded to {np.unique(np.abs(decoded))[:4]}; they decode to -scale, 0 or scale"
        )
        want = np.clip(g, -scale, scale)  # entries beyond a smaller shared scale are clipped (always sent)
        sigma = np.sqrt(np.abs(want) * (scale - np.abs(want)) / DRAWS) + 1e-6
        assert np.abs((draws(student, g, scale, seed=4).mean(axis=0) - want) / sigma).max() < 5, (
            f"scale={what}: the mean of many draws must be g clipped to [-scale, scale]"
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_payload_is_2_bit_codes_and_one_float32_scaler(student, dtype):
    sizes = (1, 3, 4, 5, 1000, 1003)
    answers = student.run(observe_round_trips, gradients=[gradient(n, dtype=dtype) for n in sizes])
    for n, answer in zip(sizes, answers):
        want = math.ceil(n / 4) + 4
        assert answer["nbytes"] == want, (
            f"n={n}, {np.dtype(dtype).name}: the payload takes {answer['nbytes']} bytes, want ceil(n / 4) + 4 = {want}"
        )
        assert answer["encoded_nbytes"] == want, f"n={n}: encoded_nbytes says {answer['encoded_nbytes']}, want {want}"


def test_round_trip_keeps_shape_and_dtype(student):
    gs = (gradient(60, dtype=np.float64).reshape(3, 4, 5), gradient(7, dtype=np.float16), np.zeros((0, 3), np.float32))
    for g, answer in zip(gs, student.run(observe_round_trips, gradients=gs)):
        decoded = answer["decoded"]
        assert decoded.shape == g.shape and decoded.dtype == g.dtype, (
            f"a {g.dtype} {g.shape} gradient decoded to {decoded.dtype} {decoded.shape}"
        )
        assert np.all(decoded * g >= 0), "an entry decoded with the opposite sign of g"
