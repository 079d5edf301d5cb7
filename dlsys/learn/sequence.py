"""A generated sequence task for the transformer: reverse a string of digits.

    python -m dlsys.learn.sequence      # train the default model, print accuracy and time

A sample is ``a_1 .. a_L SEP a_L .. a_1`` (digits 0..vocab-2, SEP = vocab-1). The causal
model reads the sample without its last token and predicts the next token at every
position; the loss and the accuracy count only the L positions that predict the reversed
half (the first half is random, there is nothing to learn there). A sequence is right when
its L predictions all are: with teacher forcing that is exactly greedy decoding's result,
since a decoder whose every step is right feeds itself the same prefix.

Reversal needs attention (position L + i must find position L + 1 - i), which an MLP on
one position cannot do: the task tests the attention layer, not only the embeddings.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits

from . import nn, optim
from .transformer import transformer


class Reversal(NamedTuple):
    """Inputs (n, 2L) tokens and targets (n, L): the next tokens of the answer positions."""

    inputs: np.ndarray
    targets: np.ndarray
    length: int
    vocab: int


def reversal(n: int, length: int = 6, digits: int = 10, seed: int = 0) -> Reversal:
    """n samples of `length` random digits in 0..digits-1 and their reversal."""
    if n < 1 or length < 1 or digits < 2:
        raise ValueError(f"n and length must be >= 1 and digits >= 2, got n={n}, length={length}, digits={digits}")
    a = np.random.default_rng(seed).integers(0, digits, (n, length))
    sep = np.full((n, 1), digits)
    full = np.concatenate([a, sep, a[:, ::-1]], axis=1)
    return Reversal(full[:, :-1], a[:, ::-1].copy(), length, digits + 1)


def answer_loss(logits: np.ndarray, task: Reversal) -> tuple[float, np.ndarray]:
    """Cross-entropy over the answer positions L..2L-1 only, and d loss / d logits (zero elsewhere)."""
    n, length = len(logits), task.length
    answer = logits[:, length:]
    loss, danswer = nn.softmax_cross_entropy(answer.reshape(n * length, -1), task.targets[:n].reshape(-1))
    dlogits = np.zeros_like(logits)
    dlogits[:, length:] = danswer.reshape(answer.shape)
    return loss, dlogits


def accuracy(model: nn.Sequential, task: Reversal) -> tuple[float, float]:
    """(token accuracy, sequence accuracy) over the answer positions."""
    right = model.forward(task.inputs)[:, task.length :].argmax(axis=-1) == task.targets
    return float(right.mean()), float(right.all(axis=1).mean())


class Result(NamedTuple):
    token_accuracy: float
    sequence_accuracy: float
    steps: int
    wall_s: float
    losses: list[float]


def train_reversal(
    length: int = 8,
    d_model: int = 32,
    heads: int = 4,
    layers: int = 2,
    steps: int = 150,
    batch: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    n_test: int = 1000,
) -> tuple[nn.Sequential, Result]:
    """Adam on fresh batches of the reversal task; accuracy on `n_test` held-out samples.

    BLAS runs on one thread: these matrices are small, and on a shared 2-core machine
    OpenBLAS's second thread made a step some 50x slower (it waits for a core)."""
    model = transformer(vocab=11, seq_len=2 * length, d_model=d_model, heads=heads, layers=layers, seed=seed)
    opt = optim.Adam(model.params, model.grads, lr)
    test = reversal(n_test, length, seed=seed + 1)
    rng = np.random.default_rng(seed)
    losses = []
    start = time.perf_counter()
    with threadpool_limits(1, user_api="blas"):
        for _ in range(steps):
            task = reversal(batch, length, seed=int(rng.integers(2**31)))
            loss, dlogits = answer_loss(model.forward(task.inputs), task)
            model.backward(dlogits)
            opt.step()
            losses.append(loss)
        wall_s = time.perf_counter() - start
        return model, Result(*accuracy(model, test), steps, wall_s, losses)


if __name__ == "__main__":
    _, result = train_reversal()
    print(
        f"reversal of 8 digits, 2 blocks of width 32, {result.steps} Adam steps of 64 samples: "
        f"token accuracy {result.token_accuracy:.4f}, sequence accuracy {result.sequence_accuracy:.4f} "
        f"on 1000 held-out samples, {result.wall_s:.1f} s"
    )
