"""Graded: exercise topk_error_feedback (dlsys.compress.topk.TopKCompressor.compress and
dlsys.compress.compressor.ResidualMemory), held to a full sort, to the byte formula
k (4 + itemsize) and to error feedback's identity sum(transmitted) + residual = sum(gradients)."""

import math

import numpy as np
import pytest

pytestmark = pytest.mark.ex_topk_error_feedback


def distinct(n, seed=0, dtype=np.float32):
    """n entries of distinct magnitudes 1..n, random signs, in random order."""
    rng = np.random.default_rng(seed)
    return ((rng.permutation(n) + 1) * rng.choice([-1, 1], n)).astype(dtype)


def integer_gradient(n, seed):
    """Integer-valued float64 entries: every sum below is exact, so equality is exact."""
    return np.random.default_rng(seed).integers(-1000, 1000, n).astype(np.float64)


def observe_compress(cases):
    """Runs in the untrusted child: for each (gradient, ratio), TopKCompressor(ratio)'s
    payload (indices, values), its bytes, encoded_nbytes and the decompressed gradient."""
    from dlsys.compress import payload_nbytes
    from dlsys.compress.topk import TopKCompressor

    answers = []
    for g, ratio in cases:
        c = TopKCompressor(ratio)
        payload, ctx = c.compress(g, "w")
        indices, values = payload
        answers.append(
            {
                "indices": np.asarray(indices),
                "values": np.asarray(values),
                "nbytes": int(payload_nbytes(payload)),
                "encoded_nbytes": int(c.encoded_nbytes(g.size, g.dtype.itemsize)),
                "decoded": c.decompress(payload, ctx),
            }
        )
    return answers


def observe_error_feedback(ratio, steps):
    """Runs in the untrusted child: error-feedback steps (name, gradient) of one ResidualMemory
    and TopKCompressor(ratio); after each, what the receivers decode, the residuals, and what
    compensate(gradient, name) gives before the step."""
    from dlsys.compress.compressor import ResidualMemory
    from dlsys.compress.topk import TopKCompressor

    memory, c = ResidualMemory(), TopKCompressor(ratio)
    answers = []
    for name, g in steps:
        compensated = memory.compensate(g, name)
        payload, ctx = c.compress(compensated, name)
        memory.update(compensated, name, c, payload, ctx)
        answers.append(
            {
                "compensated": compensated,
                "sent": c.decompress(payload, ctx),
                "residuals": {k: np.asarray(v) for k, v in memory.residuals.items()},
            }
        )
    return answers


@pytest.mark.parametrize("n", [1, 10, 999])
def test_keeps_exactly_the_k_largest_magnitudes(student, n):
    g = distinct(n, seed=n)
    ratios = (0.001, 0.01, 0.1, 0.5, 1.0)
    for ratio, answer in zip(ratios, student.run(observe_compress, cases=[(g, r) for r in ratios])):
        indices, values = answer["indices"], answer["values"]
        k = min(n, max(1, math.ceil(ratio * n)))
        largest = np.argsort(-np.abs(g))[:k]  # the oracle: a full sort by magnitude
        assert sorted(indices.tolist()) == sorted(largest.tolist()), (
            f"n={n}, ratio={ratio}: kept {indices.size} indices, not the {k} of largest |g| "
            "(negative entries count by magnitude)"
        )
        assert np.array_equal(values, g[indices]), "the values sent are not g at those indices, sign included"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_payload_is_int32_indices_and_values_in_the_gradients_dtype(student, dtype):
    itemsize = np.dtype(dtype).itemsize
    cases = ((1000, 0.01), (1003, 0.1), (5, 1.0))
    answers = student.run(observe_compress, cases=[(distinct(n, dtype=dtype), ratio) for n, ratio in cases])
    for (n, ratio), answer in zip(cases, answers):
        k = math.ceil(ratio * n)
        assert answer["nbytes"] == k * (4 + itemsize), (
            f"n={n}, ratio={ratio}, {np.dtype(dtype).name}: the payload takes {answer['nbytes']} bytes, "
            f"want k (4 + {itemsize}) = {k * (4 + itemsize)}: int32 indices, values in the gradient's dtype"
        )
        assert answer["encoded_nbytes"] == answer["nbytes"], (
            f"encoded_nbytes says {answer['encoded_nbytes']}, the payload takes {answer['nbytes']}"
        )


def test_decodes_to_the_kept_entries_and_zeros_elsewhere(student):
    g = distinct(60, seed=3, dtype=np.float64).reshape(3, 4, 5)
    decoded = student.run(observe_compress, cases=[(g, 0.1)])[0]["decoded"]
    assert decoded.shape == g.shape and decoded.dtype == g.dtype, (
        f"decoded to {decoded.dtype} {decoded.shape}, not the gradient's {g.dtype} {g.shape}"
    )
    want = np.where(np.abs(g) > 54, g, 0)  # the 6 largest of |g| = 1..60
    assert np.array_equal(decoded, want), "decoded is not the 6 largest entries of |g| in place and zeros elsewhere"


def test_error_feedback_loses_nothing(student):
    gs = [integer_gradient(200, seed=t) for t in range(30)]
    answers = student.run(observe_error_feedback, ratio=0.05, steps=[("w", g) for g in gs])
    transmitted, total = np.zeros(200), np.zeros(200)
    for t, (g, answer) in enumerate(zip(gs, answers)):
        transmitted += answer["sent"]
        total += g
        assert np.array_equal(transmitted + answer["residuals"]["w"], total), (
            f"step {t}: sum(transmitted) + residual differs from sum(gradients): error feedback lost something"
        )


def test_the_residual_drains_once_the_gradients_stop(student):
    g = integer_gradient(50, seed=7)
    answers = student.run(observe_error_feedback, ratio=0.1, steps=[("w", g)] + [("w", np.zeros(50))] * 9)
    assert np.count_nonzero(answers[0]["sent"]) == 5, (
        f"the first step sent {np.count_nonzero(answers[0]['sent'])} entries; it sends only the top 10%: 5"
    )
    transmitted = sum(a["sent"] for a in answers)
    assert np.array_equal(transmitted, g), (
        "after nine zero gradients, what was sent is not the gradient: what was held back must be sent later"
    )
    assert not answers[-1]["residuals"]["w"].any(), "the residual is not empty once everything is sent"


def test_first_step_compensates_nothing_and_each_name_has_its_own_residual(student):
    a, b = integer_gradient(8, seed=1), integer_gradient(12, seed=2).reshape(3, 4)
    first_a, first_b, again_a, again_b = student.run(
        observe_error_feedback, ratio=0.25, steps=[("a", a), ("b", b), ("a", a), ("b", b)]
    )
    assert np.array_equal(first_a["compensated"], a), "no residual yet: compensate must give the gradient itself"
    sent_a, sent_b = first_a["sent"], first_b["sent"]
    residuals = first_b["residuals"]
    assert np.array_equal(residuals["a"], a - sent_a) and np.array_equal(residuals["b"], b - sent_b), (
        "each name's residual is its gradient minus what was sent"
    )
    assert np.array_equal(again_a["compensated"], a + a - sent_a), "the next step adds what was held back"
    assert np.shape(again_b["compensated"]) == (3, 4), (
        f"compensate gave shape {np.shape(again_b['compensated'])}, not the gradient's (3, 4)"
    )
