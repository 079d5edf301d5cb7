"""The loss landscape around a trained model: a 1-D slice and a sharpness measure (pure numpy).

Keskar et al. 2017 ("On Large-Batch Training for Deep Learning: Generalization Gap and
Sharp Minima") explain why large batches generalize worse: large-batch SGD converges to
sharp minima, small-batch SGD to flat ones. Two of their tools:
- the loss along the line between two solutions (Goodfellow et al. 2015's 1-D plot);
- sharpness: how much the loss can rise inside a small box around the minimum.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .nn import Sequential, softmax_cross_entropy


def loss_at(model: Sequential, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """Mean cross-entropy of ``model`` with weights ``params`` (the model's own weights are
    restored afterwards)."""
    saved = model.params.copy()
    model.params[...] = params
    try:
        return softmax_cross_entropy(model.forward(X), y)[0]
    finally:
        model.params[...] = saved


def loss_along_line(
    model: Sequential, w_a: np.ndarray, w_b: np.ndarray, X: np.ndarray, y: np.ndarray, alphas: Sequence[float]
) -> list[float]:
    """L((1 - alpha) w_a + alpha w_b) for every alpha: alpha = 0 is w_a, 1 is w_b, and values
    outside [0, 1] look past each end (Keskar et al. 2017, Figure 3)."""
    return [loss_at(model, (1 - a) * w_a + a * w_b, X, y) for a in alphas]


def sharpness(
    model: Sequential,
    params: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    epsilon: float = 0.05,
    samples: int = 20,
    seed: int = 0,
) -> float:
    """Keskar et al. 2017's sharpness, with random instead of optimized perturbations:

        100 * max_delta (L(w + delta) - L(w)) / (1 + L(w)),  |delta_i| <= epsilon (|w_i| + 1),

    the max over ``samples`` perturbations drawn uniformly from that box (Keskar et al.
    maximize with L-BFGS; random draws give a lower bound that ranks minima the same way)."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    if not (isinstance(samples, int) and samples >= 1):
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    rng = np.random.default_rng(seed)
    base = loss_at(model, params, X, y)
    box = epsilon * (np.abs(params) + 1)
    rises = [loss_at(model, params + rng.uniform(-box, box).astype(params.dtype), X, y) - base for _ in range(samples)]
    return 100 * max(rises) / (1 + base)
