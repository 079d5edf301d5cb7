"""Data sets, train/test splits, sharding across workers and minibatches (pure numpy).

Everything is deterministic given a seed: every worker can compute its own shard
locally, with no communication, and all workers agree on the partition.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

DIGITS_PATH = Path(__file__).resolve().parent.parent / "datasets" / "digits.npz"


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    """Return `value` as an int, or raise ValueError naming the accepted range."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < low or (high is not None and value > high):
        accepted = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {accepted}, got {value!r}")
    return int(value)


def load_digits(shape: str = "flat", path: str | Path = DIGITS_PATH) -> tuple[np.ndarray, np.ndarray]:
    """The 1797 UCI 8x8 handwritten digits shipped in datasets/digits.npz.

    Returns X as float32 in [0, 1] (pixel counts 0..16 divided by 16), of shape
    (N, 64) for shape="flat" or (N, 1, 8, 8) for shape="image", and y as int64 in 0..9."""
    if shape not in ("flat", "image"):
        raise ValueError(f"shape must be 'flat' or 'image', got {shape!r}")
    with np.load(path) as data:
        X = data["X"].astype(np.float32) / 16.0
        y = data["y"].astype(np.int64)
    return (X if shape == "flat" else X.reshape(-1, 1, 8, 8)), y


def train_test_split(X: np.ndarray, y: np.ndarray, test_fraction: float = 0.25, seed: int = 0):
    """Stratified split: each class puts round(test_fraction * its count) samples in test.

    Returns X_train, X_test, y_train, y_test (scikit-learn's order); both parts keep
    the original sample order."""
    if len(X) != len(y):
        raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y)}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    rng = np.random.default_rng(seed)
    is_test = np.zeros(len(y), bool)
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        is_test[members[:round(test_fraction * len(members))]] = True
    return X[~is_test], X[is_test], y[~is_test], y[is_test]


def synthetic_classification(n: int, features: int, classes: int, seed: int = 0,
                             separation: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs: class c has centre mu_c ~ N(0, separation^2 I), x = mu_y + N(0, I).

    Classes are balanced (sample i has label i mod classes, then shuffled).
    Returns X float32 (n, features) and y int64 (n,)."""
    n = _check_int("n", n, 1)
    features = _check_int("features", features, 1)
    classes = _check_int("classes", classes, 2)
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, separation, (classes, features))
    y = rng.permutation(np.arange(n) % classes)
    X = centres[y] + rng.standard_normal((n, features))
    return X.astype(np.float32), y.astype(np.int64)


def shard_iid(n_or_indices, workers: int, rank: int, seed: int = 0) -> np.ndarray:
    """Indices of worker `rank`'s shard: shuffle once with `seed`, cut into `workers` parts.

    The shards partition the data and differ in size by at most one sample."""
    indices = np.arange(_check_int("n_or_indices", n_or_indices, 1)) if np.ndim(n_or_indices) == 0 \
        else np.asarray(n_or_indices)
    workers = _check_int("workers", workers, 1, len(indices))
    rank = _check_int("rank", rank, 0, workers - 1)
    shuffled = np.random.default_rng(seed).permutation(indices)
    return np.array_split(shuffled, workers)[rank]


def shard_noniid(labels: np.ndarray, workers: int, rank: int, classes_per_worker: int = 2,
                 seed: int = 0) -> np.ndarray:
    """Label-skewed shard: worker `rank` holds exactly `classes_per_worker` labels.

    The labels, in an order shuffled by `seed`, are dealt round-robin into
    workers * classes_per_worker slots (worker w gets slots w*cpw .. w*cpw + cpw - 1);
    each label's samples are split evenly among the workers holding it. Shards partition
    the data, so every label must be dealt at least once: classes_per_worker >=
    ceil(classes / workers). The skew of McMahan et al. 2017's non-IID split (FedAvg)."""
    labels = np.asarray(labels)
    classes = np.unique(labels)
    workers = _check_int("workers", workers, 1)
    rank = _check_int("rank", rank, 0, workers - 1)
    cpw = _check_int("classes_per_worker", classes_per_worker, -(-len(classes) // workers),
                     len(classes))
    rng = np.random.default_rng(seed)
    slots = rng.permutation(classes)[np.arange(workers * cpw) % len(classes)].reshape(workers, cpw)
    shuffled = rng.permutation(len(labels))
    parts = []
    for label in slots[rank]:
        holders = np.flatnonzero((slots == label).any(axis=1))
        members = shuffled[labels[shuffled] == label]
        parts.append(np.array_split(members, len(holders))[np.searchsorted(holders, rank)])
    return np.sort(np.concatenate(parts))


def batches(X: np.ndarray, y: np.ndarray, batch_size: int, seed: int = 0, epoch: int = 0,
            drop_last: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Minibatches (X_b, y_b) of one epoch in an order drawn from (seed, epoch).

    Every epoch gets a fresh but reproducible permutation; the last batch is smaller
    unless drop_last."""
    if len(X) != len(y):
        raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y)}")
    batch_size = _check_int("batch_size", batch_size, 1)
    order = np.random.default_rng([_check_int("seed", seed, 0),
                                   _check_int("epoch", epoch, 0)]).permutation(len(X))
    stop = len(X) - len(X) % batch_size if drop_last else len(X)
    for start in range(0, stop, batch_size):
        idx = order[start:start + batch_size]
        yield X[idx], y[idx]
