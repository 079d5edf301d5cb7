import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsys.learn import data


def test_load_digits_shapes_types_and_range():
    X, y = data.load_digits()
    assert X.shape == (1797, 64) and X.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert X.min() == 0.0 and X.max() == 1.0
    assert set(np.unique(y)) == set(range(10))
    images, y2 = data.load_digits("image")
    assert images.shape == (1797, 1, 8, 8) and np.array_equal(images.reshape(1797, 64), X)
    assert np.array_equal(y, y2)
    with pytest.raises(ValueError, match="shape"):
        data.load_digits("square")


def test_train_test_split_is_stratified_disjoint_and_deterministic():
    X, y = data.load_digits()
    X_train, X_test, y_train, y_test = data.train_test_split(X, y, 0.25, seed=0)
    assert len(X_train) + len(X_test) == len(X) and len(y_test) == len(X_test)
    for label in range(10):
        n = np.sum(y == label)
        assert np.sum(y_test == label) == round(0.25 * n)
    rows = {row.tobytes() for row in np.concatenate([X_train, X_test])}
    assert len(rows) == len({row.tobytes() for row in X})  # nothing lost or duplicated
    again = data.train_test_split(X, y, 0.25, seed=0)
    assert np.array_equal(again[1], X_test)
    assert not np.array_equal(data.train_test_split(X, y, 0.25, seed=1)[1], X_test)
    with pytest.raises(ValueError, match="test_fraction"):
        data.train_test_split(X, y, 1.0)
    with pytest.raises(ValueError, match="same length"):
        data.train_test_split(X, y[:-1])


def test_synthetic_classification_is_balanced_and_seeded():
    X, y = data.synthetic_classification(300, 5, 3, seed=4)
    assert X.shape == (300, 5) and X.dtype == np.float32 and y.dtype == np.int64
    assert np.array_equal(np.bincount(y), [100, 100, 100])
    X2, y2 = data.synthetic_classification(300, 5, 3, seed=4)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert not np.array_equal(X, data.synthetic_classification(300, 5, 3, seed=5)[0])
    with pytest.raises(ValueError, match=r"classes must be an integer >= 2"):
        data.synthetic_classification(10, 2, 1)
    with pytest.raises(ValueError, match="n must be"):
        data.synthetic_classification(0, 2, 2)


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 500), workers=st.integers(1, 16), seed=st.integers(0, 2**32 - 1))
def test_iid_shards_partition_the_data(n, workers, seed):
    workers = min(workers, n)
    shards = [data.shard_iid(n, workers, rank, seed) for rank in range(workers)]
    assert np.array_equal(np.sort(np.concatenate(shards)), np.arange(n))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert np.array_equal(shards[0], data.shard_iid(n, workers, 0, seed))


def test_iid_shards_of_given_indices():
    indices = np.arange(100, 200)
    shards = [data.shard_iid(indices, 3, r, seed=0) for r in range(3)]
    assert np.array_equal(np.sort(np.concatenate(shards)), indices)


def label_fractions(y, shard):
    return np.bincount(y[shard], minlength=10) / len(shard)


@pytest.mark.parametrize("workers, classes_per_worker", [(10, 1), (5, 2), (4, 3), (7, 2), (2, 10)])
def test_noniid_shards_partition_and_hold_few_labels(workers, classes_per_worker):
    _, y = data.load_digits()
    shards = [data.shard_noniid(y, workers, r, classes_per_worker, seed=3) for r in range(workers)]
    assert np.array_equal(np.sort(np.concatenate(shards)), np.arange(len(y)))
    for shard in shards:
        assert len(np.unique(y[shard])) == classes_per_worker
    assert shards[0].tolist() == data.shard_noniid(y, workers, 0, classes_per_worker, seed=3).tolist()
    other_seed = [data.shard_noniid(y, workers, r, classes_per_worker, seed=4) for r in range(workers)]
    assert any(not np.array_equal(a, b) for a, b in zip(shards, other_seed))


def test_noniid_shards_are_balanced_when_labels_divide_evenly():
    _, y = data.load_digits()
    sizes = [len(data.shard_noniid(y, 5, r, 4, seed=0)) for r in range(5)]  # every label twice
    assert max(sizes) - min(sizes) <= 0.05 * len(y) / 5


def test_iid_shards_are_not_skewed():
    _, y = data.load_digits()
    for rank in range(4):
        assert label_fractions(y, data.shard_iid(len(y), 4, rank, seed=0)).max() < 0.2


def test_batches_cover_an_epoch_once_in_a_seeded_order():
    X, y = np.arange(10).reshape(10, 1), np.arange(10)
    epoch0 = list(data.batches(X, y, 4, seed=1, epoch=0))
    assert [len(b) for b, _ in epoch0] == [4, 4, 2]
    seen = np.concatenate([yb for _, yb in epoch0])
    assert np.array_equal(np.sort(seen), np.arange(10))
    assert all(np.array_equal(xb[:, 0], yb) for xb, yb in epoch0)
    assert np.array_equal(seen, np.concatenate([yb for _, yb in data.batches(X, y, 4, 1, 0)]))
    assert not np.array_equal(seen, np.concatenate([yb for _, yb in data.batches(X, y, 4, 1, 1)]))
    assert [len(b) for b, _ in data.batches(X, y, 4, 1, 0, drop_last=True)] == [4, 4]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda y: data.shard_iid(10, 0, 0), r"workers must be an integer \[1, 10\]"),
        (lambda y: data.shard_iid(10, 11, 0), r"workers must be an integer \[1, 10\]"),
        (lambda y: data.shard_iid(10, 2, 2), r"rank must be an integer \[0, 1\]"),
        (lambda y: data.shard_iid(2.5, 2, 0), "n_or_indices"),
        (lambda y: data.shard_noniid(y, 4, -1), r"rank must be an integer \[0, 3\]"),
        (lambda y: data.shard_noniid(y, 4, 0, 0), "classes_per_worker"),
        (lambda y: data.shard_noniid(y, 4, 0, 2), r"classes_per_worker must be an integer \[3, 10\]"),
        (lambda y: data.shard_noniid(y, 4, 0, 11), r"classes_per_worker must be an integer \[3, 10\]"),
        (lambda y: list(data.batches(y, y, 0)), "batch_size"),
        (lambda y: list(data.batches(y, y, 2, epoch=-1)), "epoch"),
        (lambda y: list(data.batches(y, y[:-1], 2)), "same length"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    _, y = data.load_digits()
    with pytest.raises(ValueError, match=message):
        call(y)
