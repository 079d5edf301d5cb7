"""Data sets, train/test splits, sharding across workers and minibatches (pure numpy).

Everything is deterministic given a seed: every worker can compute its own shard
locally, with no communication, and all workers agree on the partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

DIGITS_PATH = Path(__file__).resolve().parents[2] / "datasets" / "digits.npz"


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


def warp_images(
    images: np.ndarray,
    size: int,
    seed: int = 0,
    max_rotation_deg: float = 12.0,
    scale_range: tuple[float, float] = (0.9, 1.1),
    max_shear: float = 0.15,
    max_shift: float = 0.6,
    noise: float = 0.05,
) -> np.ndarray:
    """Random affine deformations of (N, h, w) images, resampled onto a size x size grid.

    Output pixel p (centred coordinates, in units of the input grid) reads the input at
    A_i p + t_i, bilinearly, 0 outside: A_i = R(theta) S(s_x, s_y) H(shear), theta, s,
    shear and the shift t_i drawn uniformly per image. Simard, Steinkraus & Platt 2003
    grew MNIST this way ("distortions"); here it grows the 1,797 UCI digits. Adds
    N(0, noise^2) pixel noise, clipped to [0, 1]."""
    n, h, w = images.shape
    rng = np.random.default_rng(seed)
    theta = np.deg2rad(rng.uniform(-max_rotation_deg, max_rotation_deg, n))
    sx, sy = rng.uniform(*scale_range, (2, n))
    shear = rng.uniform(-max_shear, max_shear, n)
    shift = rng.uniform(-max_shift, max_shift, (n, 2))
    theta, sx, sy, shear, shift = (x.astype(np.float32) for x in (theta, sx, sy, shear, shift))
    cos, sin = np.cos(theta), np.sin(theta)
    centre = ((np.arange(size) + 0.5) * (h / size) - h / 2).astype(np.float32)
    u, v = centre[:, None].repeat(size, 1).ravel(), centre[None, :].repeat(size, 0).ravel()
    # inverse map, output (u, v) -> input (r, c) = R S H (u, v) + shift, in pixel indices
    a, b = (cos * sx)[:, None], (cos * sx * shear - sin * sy)[:, None]
    c, d = (sin * sx)[:, None], (sin * sx * shear + cos * sy)[:, None]
    r = a * u + b * v + (shift[:, :1] + np.float32(h / 2 - 0.5))
    c = c * u + d * v + (shift[:, 1:] + np.float32(w / 2 - 0.5))
    r0, c0 = np.floor(r), np.floor(c)
    fr, fc = (r - r0).astype(np.float32), (c - c0).astype(np.float32)
    # two rows/columns of zeros around each image: every clipped index then reads zeros
    padded = np.pad(images.astype(np.float32), ((0, 0), (2, 2), (2, 2)))
    ph, pw = h + 4, w + 4
    flat = (
        np.arange(n)[:, None] * (ph * pw)
        + (np.clip(r0, -2, h).astype(np.int64) + 2) * pw
        + np.clip(c0, -2, w).astype(np.int64)
        + 2
    )
    take = padded.ravel().take
    out = (1 - fr) * ((1 - fc) * take(flat) + fc * take(flat + 1)) + fr * (
        (1 - fc) * take(flat + pw) + fc * take(flat + pw + 1)
    )
    out += noise * rng.standard_normal(out.shape, dtype=np.float32)
    return np.clip(out, 0.0, 1.0, out=out).reshape(n, size, size)


def augmented_digits(n_train: int = 40_000, n_test: int = 8_000, size: int = 16, seed: int = 0):
    """An MNIST-sized data set generated offline from the shipped UCI digits: split the
    1,797 originals 75/25 (stratified, `train_test_split`), then draw n_train deformed
    copies of the training originals and n_test of the test originals (`warp_images`),
    so test accuracy is measured on writers the model never saw.

    Returns X_train, X_test as float32 (N, size * size) in [0, 1], y_train, y_test int64."""
    n_train = _check_int("n_train", n_train, 1)
    n_test = _check_int("n_test", n_test, 1)
    size = _check_int("size", size, 4, 64)
    X, y = load_digits("image")
    X_train, X_test, y_train, y_test = train_test_split(X[:, 0], y, 0.25, seed=seed)
    parts = []
    for i, (base, labels, n) in enumerate(((X_train, y_train, n_train), (X_test, y_test, n_test))):
        pick = np.random.default_rng([seed, i]).integers(0, len(base), n)
        parts.append((warp_images(base[pick], size, seed=seed * 2 + i + 1).reshape(n, -1), labels[pick]))
    (X_train, y_train), (X_test, y_test) = parts
    return X_train, X_test, y_train, y_test


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
        is_test[members[: round(test_fraction * len(members))]] = True
    return X[~is_test], X[is_test], y[~is_test], y[is_test]


def synthetic_classification(
    n: int, features: int, classes: int, seed: int = 0, separation: float = 3.0
) -> tuple[np.ndarray, np.ndarray]:
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
    indices = (
        np.arange(_check_int("n_or_indices", n_or_indices, 1))
        if np.ndim(n_or_indices) == 0
        else np.asarray(n_or_indices)
    )
    workers = _check_int("workers", workers, 1, len(indices))
    rank = _check_int("rank", rank, 0, workers - 1)
    shuffled = np.random.default_rng(seed).permutation(indices)
    return np.array_split(shuffled, workers)[rank]


def shard_noniid(labels: np.ndarray, workers: int, rank: int, classes_per_worker: int = 2, seed: int = 0) -> np.ndarray:
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
    cpw = _check_int("classes_per_worker", classes_per_worker, -(-len(classes) // workers), len(classes))
    rng = np.random.default_rng(seed)
    slots = rng.permutation(classes)[np.arange(workers * cpw) % len(classes)].reshape(workers, cpw)
    shuffled = rng.permutation(len(labels))
    parts = []
    for label in slots[rank]:
        holders = np.flatnonzero((slots == label).any(axis=1))
        members = shuffled[labels[shuffled] == label]
        parts.append(np.array_split(members, len(holders))[np.searchsorted(holders, rank)])
    return np.sort(np.concatenate(parts))


def batches(
    X: np.ndarray, y: np.ndarray, batch_size: int, seed: int = 0, epoch: int = 0, drop_last: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Minibatches (X_b, y_b) of one epoch in an order drawn from (seed, epoch).

    Every epoch gets a fresh but reproducible permutation; the last batch is smaller
    unless drop_last."""
    if len(X) != len(y):
        raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y)}")
    batch_size = _check_int("batch_size", batch_size, 1)
    order = np.random.default_rng([_check_int("seed", seed, 0), _check_int("epoch", epoch, 0)]).permutation(len(X))
    stop = len(X) - len(X) % batch_size if drop_last else len(X)
    for start in range(0, stop, batch_size):
        idx = order[start : start + batch_size]
        yield X[idx], y[idx]
