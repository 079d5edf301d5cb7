"""The small causal transformer that tensor parallelism, the pipelines and the 3-D grid
train: one configuration of its shape and training, with the checks every layout shares.

``TransformerConfig`` holds the model (``learn.transformer.transformer``) and the SGD run;
each layout subclasses it with its own degrees and batch (``TPConfig``, ``PipelineConfig``,
``GridConfig``). The shared fields are keyword-only, so a layout's own fields keep their
positions (``PipelineConfig("1f1b", 4, 8)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..learn import nn
from ..learn.transformer import transformer


@dataclass(frozen=True, kw_only=True)
class TransformerConfig:
    """``layers`` pre-norm blocks of width ``d_model`` (``heads`` heads, an MLP of ``d_ff``,
    4 d_model when None) over ``vocab`` tokens and ``seq_len`` positions, trained ``steps``
    SGD steps of rate ``lr``; ``seed`` draws the weights and the data."""

    vocab: int = 11
    seq_len: int = 8
    d_model: int = 16
    heads: int = 4
    layers: int = 4
    d_ff: int | None = None
    steps: int = 1
    lr: float = 0.1
    seed: int = 0
    dtype: str = "float64"

    # the integer fields that must be >= 1; a layout adds its own
    POSITIVE = ("vocab", "seq_len", "d_model", "heads", "layers", "steps")

    @property
    def ffn(self) -> int:
        """The MLP's width: ``d_ff``, or 4 d_model."""
        return self.d_ff or 4 * self.d_model

    def check_model(self, positive: tuple[str, ...] = ()) -> None:
        """A ValueError naming the argument and its accepted range, or nothing: dtype, every
        size of ``POSITIVE`` and ``positive`` an integer >= 1, heads dividing d_model."""
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype!r}")
        for name in (*positive, *self.POSITIVE, *(("d_ff",) if self.d_ff is not None else ())):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.d_model % self.heads:
            raise ValueError(f"heads must divide d_model = {self.d_model}, got heads = {self.heads}")

    def model(self) -> nn.Sequential:
        """The unsplit transformer, its weights drawn from ``seed``."""
        return transformer(
            self.vocab,
            self.seq_len,
            self.d_model,
            self.heads,
            self.layers,
            self.d_ff,
            seed=self.seed,
            dtype=np.dtype(self.dtype),
        )


def loss_and_grad(logits: np.ndarray, targets: np.ndarray, micro_batches: int = 1) -> tuple[float, np.ndarray]:
    """One micro-batch's share of the step's loss, the mean cross-entropy over every position
    of the whole batch: its own mean / m, and dloss/dlogits in the logits' shape."""
    loss, dlogits = nn.softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.ravel())
    return loss / micro_batches, dlogits.reshape(logits.shape) / micro_batches
