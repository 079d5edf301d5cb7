"""Graded: exercise topk_error_feedback (dlsys.compress.topk.TopKCompressor.compress and
dlsys.compress.compressor.ResidualMemory), held to a full sort, to the byte formula
k (4 + itemsize) and to error feedback's identity sum(transmitted) + residual = sum(gradients)."""

import math

import numpy as np
import pytest

from dlsys.compress import payload_nbytes
from dlsys.compress.compressor import ResidualMemory
from dlsys.compress.topk import TopKCompressor

pytestmark = pytest.mark.ex_topk_error_feedback


def distinct(n, seed=0, dtype=np.float32):
    """n entries of distinct magnitudes 1..n, random signs, in random order."""
    rng = np.random.default_rng(seed)
    return ((rng.permutation(n) + 1) * rng.choice([-1, 1], n)).astype(dtype)


def integer_gradient(n, seed):
    """Integer-valued float64 entries: every sum below is exact, so equality is exact."""
    return np.random.default_rng(seed).integers(-1000, 1000, n).astype(np.float64)


def step(memory, compressor, g, name="w"):
    """One error-feedback step: what the receivers decode."""
    compensated = memory.compensate(g, name)
    payload, ctx = compressor.compress(compensated, name)
    memory.update(compensated, name, compressor, payload, ctx)
    return compressor.decompress(payload, ctx)


@pytest.mark.parametrize("n", [1, 10, 999])
def test_keeps_exactly_the_k_largest_magnitudes(n):
    g = distinct(n, seed=n)
    for ratio in (0.001, 0.01, 0.1, 0.5, 1.0):
        (indices, values), _ = TopKCompressor(ratio).compress(g, "w")
        k = min(n, max(1, math.ceil(ratio * n)))
        largest = np.argsort(-np.abs(g))[:k]  # the oracle: a full sort by magnitude
        assert sorted(indices.tolist()) == sorted(largest.tolist()), \
            f"n={n}, ratio={ratio}: the {k} indices of largest |g| (negative entries count by magnitude)"
        assert np.array_equal(values, g[indices]), "values are g at those indices, sign included"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_payload_is_int32_indices_and_values_in_the_gradients_dtype(dtype):
    itemsize = np.dtype(dtype).itemsize
    for n, ratio in ((1000, 0.01), (1003, 0.1), (5, 1.0)):
        c = TopKCompressor(ratio)
        payload, _ = c.compress(distinct(n, dtype=dtype), "w")
        k = math.ceil(ratio * n)
        assert payload_nbytes(payload) == k * (4 + itemsize), \
            f"n={n}, ratio={ratio}, {np.dtype(dtype).name}: {payload_nbytes(payload)} bytes, want k (4 + {itemsize})"
        assert c.encoded_nbytes(n, itemsize) == payload_nbytes(payload)


def test_decodes_to_the_kept_entries_and_zeros_elsewhere():
    g = distinct(60, seed=3, dtype=np.float64).reshape(3, 4, 5)
    c = TopKCompressor(0.1)
    decoded = c.decompress(*c.compress(g, "w"))
    assert decoded.shape == g.shape and decoded.dtype == g.dtype
    want = np.where(np.abs(g) > 54, g, 0)  # the 6 largest of |g| = 1..60
    assert np.array_equal(decoded, want)


def test_error_feedback_loses_nothing():
    memory, c = ResidualMemory(), TopKCompressor(0.05)
    transmitted, total = np.zeros(200), np.zeros(200)
    for t in range(30):
        g = integer_gradient(200, seed=t)
        transmitted += step(memory, c, g)
        total += g
        assert np.array_equal(transmitted + memory.residuals["w"], total), \
            f"step {t}: sum(transmitted) + residual must equal sum(gradients)"


def test_the_residual_drains_once_the_gradients_stop():
    memory, c = ResidualMemory(), TopKCompressor(0.1)
    g = integer_gradient(50, seed=7)
    transmitted = step(memory, c, g)
    assert np.count_nonzero(transmitted) == 5, "the first step sends only the top 10%"
    for _ in range(9):
        transmitted += step(memory, c, np.zeros(50))
    assert np.array_equal(transmitted, g), "what was held back is sent in later steps, so nothing is lost"
    assert not memory.residuals["w"].any()


def test_first_step_compensates_nothing_and_each_name_has_its_own_residual():
    memory, c = ResidualMemory(), TopKCompressor(0.25)
    a, b = integer_gradient(8, seed=1), integer_gradient(12, seed=2).reshape(3, 4)
    assert np.array_equal(memory.compensate(a, "a"), a), "no residual yet: the gradient itself"
    sent_a, sent_b = step(memory, c, a, "a"), step(memory, c, b, "b")
    assert np.array_equal(memory.residuals["a"], a - sent_a) and np.array_equal(memory.residuals["b"], b - sent_b)
    assert np.array_equal(memory.compensate(a, "a"), a + a - sent_a), "the next step adds what was held back"
    assert memory.compensate(b, "b").shape == (3, 4)
