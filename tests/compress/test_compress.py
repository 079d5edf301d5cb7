"""dlsys.compress: unbiasedness, error feedback, honest bytes, round trips, bad inputs.

Every test that loops over methods reads ``COMPRESSORS``, so a new method is tested
as soon as it is registered (and ``FORMULAS`` demands its byte formula).
"""

import inspect
import math

import numpy as np
import pytest

from dlsys.compress import COMPRESSORS, DGCMemory, NoneMemory, ResidualMemory, make, payload_nbytes
from dlsys.compress.dgc import DGCCompressor, decode_gaps, encode_gaps
from dlsys.compress.dropping import sample_size


def build(name, seed=0, **options):
    """A compressor (``make`` seeds a Generator if its method is stochastic)."""
    return make(name, seed=seed, **options)


def gradient(n, seed=1, dtype=np.float32, shape=None):
    g = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    return g.reshape(shape) if shape else g


# Encoded bytes per method for n entries of a float32 gradient (itemsize 4), as documented;
# the threshold methods send as many (index, value) pairs as pass, so p (the payload) says how many.
FORMULAS = {
    "none": lambda n, c, p: 4 * n,
    "fp16": lambda n, c, p: 2 * n,
    "int8": lambda n, c, p: n + 2 * 4,
    "onebit": lambda n, c, p: math.ceil(n / 8) + 2 * 4,
    "terngrad": lambda n, c, p: math.ceil(n / 4) + 4,
    "qsgd": lambda n, c, p: math.ceil(n * c.bits / 8) + 4 * math.ceil(n / c.bucket),
    "topk": lambda n, c, p: math.ceil(c.ratio * n) * (4 + 4),
    "randomk": lambda n, c, p: math.ceil(c.ratio * n) * 4,
    "dropping": lambda n, c, p: p[0].size * (4 + 4),
    "dgc": lambda n, c, p: p[0].size * 2 + p[1].size * 4,  # 16-bit gaps (and escapes), fp32 values
}


def test_every_method_has_a_byte_formula():
    assert set(FORMULAS) == set(COMPRESSORS)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
@pytest.mark.parametrize("n", [1, 7, 1000, 1003])
def test_encoded_bytes_follow_the_formula(name, n):
    c = build(name)
    payload, _ = c.compress(gradient(n), "w")
    assert payload_nbytes(payload) == FORMULAS[name](n, c, payload)


def test_qsgd_bytes_at_every_bit_width():
    for bits in (2, 4, 8):
        c = build("qsgd", bits=bits, bucket=64)
        payload, _ = c.compress(gradient(1000), "w")
        assert payload_nbytes(payload) == math.ceil(1000 * bits / 8) + 4 * math.ceil(1000 / 64)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_decompress_restores_shape_and_dtype(name):
    c = build(name, **({"ratio": 0.3} if "ratio" in inspect.signature(COMPRESSORS[name]).parameters else {}))
    g = gradient(24, dtype=np.float64, shape=(4, 6))
    out = c.decompress(*c.compress(g, "w"))
    assert out.shape == g.shape and out.dtype == g.dtype


def test_round_trips_within_their_precision():
    g = gradient(1000)
    assert np.array_equal(build("none").decompress(*build("none").compress(g, "w")), g)
    # float16 keeps 11 significant bits: relative error <= 2**-11 in its normal range.
    half = build("fp16")
    assert np.allclose(half.decompress(*half.compress(g, "w")), g, rtol=2**-11, atol=6.1e-5)
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


@pytest.mark.parametrize("ratio", [0.1, 0.01, 0.001])
@pytest.mark.parametrize("n", [10, 100, 640, 1000, 10_000, 100_000, 1_000_000])
def test_dropping_keeps_the_asked_fraction_at_every_size(n, ratio):
    # Within 10% of k = ceil(ratio * n) (the 1-entry minimum included), counting the
    # entries tied with the threshold; up to PER_KEPT / ratio entries the threshold is exact.
    g = gradient(n, seed=n)
    c = build("dropping", seed=n, ratio=ratio)
    indices, values = c.compress(g, "w")[0]
    k = math.ceil(ratio * n)
    assert c.kept((indices, values), n) == indices.size
    threshold = np.abs(values).min()
    if sample_size(n, ratio, c.sample) == n:
        assert indices.size == k  # continuous draws: no ties
    assert abs(indices.size - k) <= 0.1 * k
    assert threshold >= np.abs(np.delete(g, indices)).max()  # a threshold: the sent dominate


def test_dropping_counts_entries_tied_with_the_threshold():
    g = np.repeat(np.float32([3, 2, 1]), [1, 4, 995])  # the 2nd largest |g| is tied with 3 others
    indices, _ = build("dropping", ratio=0.002).compress(g, "w")[0]
    assert indices.size == 5


def test_dgc_sends_at_most_k_of_the_largest():
    g = gradient(10_000)
    c = build("dgc", ratio=0.01, sample=0.01)
    c.set_epoch(10)
    payload = c.compress(g, "w")[0]
    indices, values = c.indices(payload), payload[1]
    assert indices.size == values.size == 100 == c.kept(payload, g.size)
    assert np.array_equal(values, g[indices])
    assert np.abs(values).min() >= np.abs(np.delete(g, indices)).max()


@pytest.mark.parametrize("indices", [[], [0], [65534, 65535, 65536], [3, 200_000, 1_000_000, 1_000_001]])
def test_dgc_gaps_round_trip_with_escapes(indices):
    codes = encode_gaps(np.array(indices, np.int64))
    assert codes.dtype == np.uint16 and np.array_equal(decode_gaps(codes), indices)
    # one code per index, plus an escape per 65535 positions a gap exceeds 65535 by
    gaps = np.diff(np.array(indices, np.int64), prepend=-1)
    assert codes.size == len(indices) + int(np.sum((gaps - 1) // 65535))


def test_dgc_compresses_only_tensors_of_two_or_more_dimensions():
    assert not DGCCompressor.compresses(1) and DGCCompressor.compresses(2) and DGCCompressor.compresses(4)
    assert all(COMPRESSORS[name].compresses(1) for name in COMPRESSORS if name != "dgc")


# The DGC paper's published gradient sizes (Lin et al. 2018, Tables 2 and 3 and the
# abstract), and its models' tensors: (sizes of the tensors of 2+ dimensions, parameters in
# 1-D tensors). Caffe's AlexNet (grouped conv2, conv4, conv5); the PTB LSTM: 2 layers of
# 1500, a 10,000-word vocabulary, the decoder tied to the embedding, two biases per layer.
PAPER_MODELS = {
    "alexnet": (
        [
            96 * 3 * 121,
            256 * 48 * 25,
            384 * 256 * 9,
            384 * 192 * 9,
            256 * 192 * 9,
            9216 * 4096,
            4096 * 4096,
            4096 * 1000,
        ],
        96 + 256 + 384 + 384 + 256 + 4096 + 4096 + 1000,
        232.56,
        597,
    ),
    "lstm": ([10_000 * 1500] + [6000 * 1500] * 4, 4 * 6000 + 10_000, 194.68, 462),
}


@pytest.mark.parametrize("model", sorted(PAPER_MODELS))
def test_dgc_bytes_give_the_papers_ratios_on_its_own_models(model):
    matrices, vectors, mib, published = PAPER_MODELS[model]
    c = build("dgc")
    c.set_epoch(10)
    dense = 4 * (sum(matrices) + vectors)
    assert dense / 2**20 == pytest.approx(mib, abs=0.005)  # the paper's "MB" is MiB
    encoded = sum(c.encoded_nbytes(n) for n in matrices) + 4 * vectors
    assert dense / encoded == pytest.approx(published, rel=0.002)


def test_dgc_memory_without_momentum_is_error_feedback():
    dgc, plain = build("dgc", ratio=0.05), build("dgc", ratio=0.05)
    momentum_free, residual = DGCMemory(momentum=0), ResidualMemory()
    for step in range(4):
        g = gradient(300, seed=step)
        a, b = momentum_free.compensate(g, "w"), residual.compensate(g, "w")
        assert np.allclose(a, b)
        pa, pb = dgc.compress(a, "w"), plain.compress(b, "w")
        momentum_free.update(a, "w", dgc, *pa)
        residual.update(b, "w", plain, *pb)


def test_dgc_memory_corrects_momentum_and_masks_what_was_sent():
    c, memory = build("dgc", ratio=0.05), DGCMemory(momentum=0.9)
    g1, g2 = gradient(300, seed=1), gradient(300, seed=2)
    v = memory.compensate(g1, "w")
    payload, ctx = c.compress(v, "w")
    memory.update(v, "w", c, payload, ctx)
    sent = c.indices(payload)
    assert np.all(memory.velocities["w"].flat[sent] == 0) and np.all(memory.accumulated["w"].flat[sent] == 0)
    # Unsent entries carry u = 0.9 g1 + g2 on top of the accumulated g1; sent ones start again from g2.
    v2 = memory.compensate(g2, "w")
    unsent = np.setdiff1d(np.arange(300), sent)
    assert np.allclose(v2[unsent], (g1 + 0.9 * g1 + g2)[unsent]) and np.allclose(v2[sent], g2[sent])


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
    norms = np.repeat([np.linalg.norm(v[i : i + bucket]) for i in range(0, 100, bucket)], bucket)[:100]
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


@pytest.mark.parametrize("name", [n for n, c in COMPRESSORS.items() if "ratio" in inspect.signature(c).parameters])
@pytest.mark.parametrize("ratio", [0, -0.1, 1.5])
def test_ratio_outside_zero_one(name, ratio):
    with pytest.raises(ValueError, match=r"ratio.*\(0, 1\]"):
        build(name, ratio=ratio)


@pytest.mark.parametrize("name", ["dropping", "dgc"])
def test_sample_outside_zero_one(name):
    with pytest.raises(ValueError, match=r"sample.*\(0, 1\]"):
        build(name, sample=2)


def test_dgc_momentum_outside_zero_one():
    with pytest.raises(ValueError, match=r"momentum.*\[0, 1\)"):
        DGCMemory(momentum=1)


@pytest.mark.parametrize("bits", [1, 3, 16])
def test_qsgd_bits_outside_the_supported_set(bits):
    with pytest.raises(ValueError, match=r"bits.*\(2, 4, 8\)"):
        build("qsgd", bits=bits)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_non_float_input(name):
    with pytest.raises(ValueError, match="tensor.*float"):
        build(name).compress(np.arange(10), "w")


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_an_empty_tensor_travels_as_an_empty_payload(name):
    compressor = build(name)
    payload, ctx = compressor.compress(np.zeros(0, np.float32), "empty")
    out = compressor.decompress(payload, ctx)
    assert out.shape == (0,) and out.dtype == np.float32


def test_each_method_declares_an_option_per_constructor_keyword_and_the_cli_refuses_its_range(capsys):
    """The Options are the constructors' keywords (but the Generator); dlsys compress refuses
    a value outside an Option's range by its flag, naming the range."""
    from dlsys.checks import options_of
    from dlsys.cli import main

    for name, cls in COMPRESSORS.items():
        assert [o.name for o in cls.options] == options_of(cls, hidden=("rng",)), name
        for option in cls.options:
            bad = option.high * 2 if option.high != float("inf") else -1
            assert main(["compress", "--model", "alexnet", "--method", name, option.flag, str(bad)]) == 2
            assert f"{option.flag} must be " in capsys.readouterr().err
