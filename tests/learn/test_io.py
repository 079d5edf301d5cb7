"""The data loader (dlsys.learn.loader) and the IO model (dlsys.machine.storage)."""

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from test_comm_leaks import poll, stop

from dlsys.learn import data
from dlsys.learn.loader import Loader, LoaderWorkerError
from dlsys.machine.storage import STORAGE_PRESETS, IOModel, LoaderTimeline, io_timeline
from dlsys.train import batch_indices

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X, Y = data.synthetic_classification(203, 5, 3, seed=1)


def double(x):
    """A transform the workers import from this module."""
    x *= 2


def fail_on_negative_first_feature(x):
    if (x[:, 0] < -100).any():
        raise ArithmeticError("a sample the decoder cannot read")


def loader_workers() -> list:
    """Live loader worker processes started by this process (their command line names them)."""
    marker = f"dlsys-{os.getpid()}-loader"
    return [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["status"] != psutil.STATUS_ZOMBIE and any(a.startswith(marker) for a in p.info["cmdline"] or [])
    ]


def segments(pid: int) -> list:
    return [f for f in os.listdir("/dev/shm") if f.startswith(f"dlsys-{pid}-loader")]


def assert_nothing_left(pid: int = os.getpid()) -> None:
    """No loader worker of this process and no segment of ``pid``'s loaders remains."""
    poll(lambda: not loader_workers() and not segments(pid), 10, f"loader workers or segments of {pid} remain")


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_the_loader_delivers_the_plain_loaders_batches_in_order(workers):
    for seed, batch_size, prefetch, drop_last in [(0, 16, 1, False), (7, 50, 3, True)]:
        with Loader(X, Y, batch_size, workers=workers, prefetch=prefetch, seed=seed, drop_last=drop_last) as loader:
            for epoch in (0, 1):
                got = [(x.copy(), y.copy()) for x, y in loader.epoch(epoch)]
                want = list(data.batches(X, Y, batch_size, seed, epoch, drop_last))
                assert len(got) == len(want) == loader.steps_per_epoch
                for (x, y), (x_ref, y_ref) in zip(got, want):
                    np.testing.assert_array_equal(x, x_ref)
                    np.testing.assert_array_equal(y, y_ref)
    assert_nothing_left()


def test_a_rank_gets_the_training_plans_batches_and_the_transform_runs_in_the_workers():
    with Loader(X, Y, 8, workers=2, prefetch=2, seed=3, rank=1, world=4, drop_last=True, transform=double) as loader:
        for step, (x, y) in enumerate(loader.epoch(1)):
            idx = batch_indices(len(X), loader.steps_per_epoch + step, 1, 4, 8, 3)
            np.testing.assert_array_equal(x, 2 * X[idx])
            np.testing.assert_array_equal(y, Y[idx])


def test_batches_are_views_of_the_pool_not_copies():
    with Loader(X, Y, 10, workers=2, prefetch=2) as loader:
        bases = {
            x.base is not None and np.shares_memory(x, loader.layout.slot(loader.pool, s % loader.layout.slots)[0])
            for s, (x, _) in zip(range(5), loader.epoch(0))
        }
    assert bases == {True}


@pytest.mark.parametrize("prefetch", [1, 2, 5])
def test_the_queue_never_holds_more_than_prefetch_batches(prefetch):
    with Loader(X, Y, 10, workers=3, prefetch=prefetch) as loader:
        for _ in loader.epoch(0):
            time.sleep(0.002)  # a slow trainer: the workers run ahead as far as they may
        assert loader.max_queued == prefetch


def test_an_epoch_left_early_does_not_disturb_the_next():
    with Loader(X, Y, 10, workers=2, prefetch=3, seed=2) as loader:
        next(iter(loader.epoch(0)))
        x, _ = next(iter(loader.epoch(1)))
        np.testing.assert_array_equal(x, next(data.batches(X, Y, 10, 2, 1))[0])


def test_a_worker_that_raises_fails_the_epoch_with_its_traceback_and_leaves_nothing():
    bad = X.copy()
    bad[np.random.default_rng([0, 0]).permutation(len(X))[25], 0] = -1e6  # in batch 2
    loader = Loader(bad, Y, 10, workers=2, prefetch=2, transform=fail_on_negative_first_feature)
    with pytest.raises(LoaderWorkerError, match=r"(?s)worker 0.*fail_on_negative_first_feature.*ArithmeticError"):
        list(loader.epoch(0))
    assert_nothing_left()
    with pytest.raises(ValueError, match="closed"):
        next(loader.epoch(0))


def test_a_worker_that_dies_is_named_with_its_exit_code():
    with Loader(X, Y, 10, workers=2, prefetch=1) as loader:
        os.kill(loader._procs[1].pid, signal.SIGKILL)
        with pytest.raises(LoaderWorkerError, match=r"worker 1: died \(exit code -9\)"):
            list(loader.epoch(0))
    assert_nothing_left()


TRAINER = """
import sys, time, numpy as np
from dlsys.learn.loader import Loader
with Loader(np.zeros((1000, 4)), np.zeros(1000), 10, workers=2, prefetch=2) as loader:
    print("started", flush=True)
    while True:
        for _ in loader.epoch(0):
            time.sleep(0.01)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["Ctrl-C", "SIGKILL"])
def test_stopping_the_trainer_leaves_no_worker_and_no_segment(sig):
    trainer = subprocess.Popen(
        [sys.executable, "-c", TRAINER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert trainer.stdout.readline() == "started\n"
    workers = psutil.Process(trainer.pid).children()
    assert len(workers) == 2 and len(segments(trainer.pid)) == 2
    stderr = stop(trainer, sig)
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr
    psutil.wait_procs(workers, timeout=10)
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert_nothing_left(trainer.pid)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"workers": -1}, r"workers \(loader workers\) must be an integer in 0\.\.64"),
        ({"workers": 65}, r"workers \(loader workers\) must be an integer in 0\.\.64"),
        ({"prefetch": 0}, r"prefetch \(batches in the queue\) must be an integer in 1\.\."),
        ({"batch_size": 0}, "batch_size must be an integer in 1..203"),
        ({"world": 2}, "drop_last must be True"),
        ({"transform": lambda x: x}, "transform must be picklable"),
        ({"y": np.array([None] * 203)}, "X and y must hold numbers"),
        ({"prefetch": 1000, "batch_size": 200}, r"prefetch: 1000 \+ 1 slots of 1601600 bytes exceed"),
    ],
)
def test_bad_loader_arguments_fail_before_any_process_starts(kwargs, message):
    kwargs = {"X": np.zeros((len(Y), 1000)), "y": Y, "batch_size": 10, "workers": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        Loader(**kwargs)
    assert not loader_workers() and not segments(os.getpid())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"storage": "floppy"}, "storage: unknown preset 'floppy'; valid: nvme, sata-ssd, hdd, nfs, s3"),
        ({"workers": -1}, r"workers \(loader workers\) must be an integer in 0\.\.64"),
        ({"prefetch": 0}, r"prefetch \(batches in the queue\) must be an integer in 1\.\."),
        ({"decode_s": -1.0}, "decode_s must be a finite number >= 0"),
    ],
)
def test_bad_io_models_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        IOModel(**kwargs)


def test_storage_presets_hold_their_cited_figures():
    nvme, hdd = STORAGE_PRESETS["nvme"], STORAGE_PRESETS["hdd"]
    assert nvme.latency_s == pytest.approx(1 / 19_000, rel=0.01) and nvme.bandwidth_Bps == 3.5e9
    assert hdd.latency_s == pytest.approx(8.5e-3 + 0.5 * 60 / 7200, rel=0.01)
    assert STORAGE_PRESETS["sata-ssd"].latency_s == pytest.approx(1 / 10_000)
    assert all(s.source for s in STORAGE_PRESETS.values())


@pytest.mark.parametrize("storage", list(STORAGE_PRESETS))
def test_the_closed_form_step_is_the_timelines_steady_state(storage):
    window = math.lcm(*range(1, 7))  # a whole number of the pipeline's periods
    for workers in range(7):
        for prefetch in (1, 2, 3, 6):
            for batch_size, sample_nbytes, decode_s in [(32, 110e3, 2e-3), (8, 1e7, 0.0), (1, 256, 1e-5)]:
                model = IOModel(storage, workers, prefetch, batch_size, sample_nbytes, decode_s)
                for compute_s in (0.0, 1e-3, 0.05, 2.0):
                    rows = io_timeline(model, compute_s, 3 * window)
                    period_s = (rows[-1]["compute_end_s"] - rows[-1 - window]["compute_end_s"]) / window
                    assert period_s == pytest.approx(model.steady_step_s(compute_s), rel=1e-9)
                    wait_s = sum(r["io_wait_s"] for r in rows[-window:]) / window
                    assert wait_s == pytest.approx(model.steady_step_s(compute_s) - compute_s, rel=1e-6, abs=1e-12)


def test_more_workers_and_a_deeper_queue_feed_a_starved_trainer():
    compute_s = 0.03  # between t_w / 4 and t_w
    slow = IOModel("nvme", workers=0, batch_size=32)
    assert slow.steady_step_s(compute_s) == pytest.approx(slow.worker_batch_s() + compute_s)
    assert IOModel("nvme", workers=4, prefetch=1).steady_step_s(compute_s) == slow.worker_batch_s()  # D caps K
    assert IOModel("nvme", workers=4, prefetch=4).steady_step_s(compute_s) == compute_s  # compute-bound


def test_the_timeline_never_queues_more_than_prefetch_batches():
    """At every moment, batches started and not yet taken by the trainer number at most D."""
    for prefetch in (1, 3):
        timeline, now_s = LoaderTimeline(IOModel("hdd", workers=4, prefetch=prefetch, batch_size=4)), 0.0
        for _ in range(30):
            now_s = timeline.take(now_s) + 0.01
        taken = timeline.taken_s
        for load in timeline.loads[: len(taken)]:
            queued = sum(other.start_s <= load.start_s < taken[other.batch] for other in timeline.loads[: len(taken)])
            assert queued <= prefetch


@pytest.mark.parametrize("strategy", ["allreduce", "local-sgd"])
def test_training_through_the_loader_learns_the_same_weights_and_waits_as_the_model_says(strategy):
    from dlsys.experiments import train
    from dlsys.train import TrainConfig, load_task, steps_per_epoch

    config = TrainConfig(epochs=1, hidden=(16,))
    plain = train(strategy, config, 2)
    steps = steps_per_epoch(len(load_task().y_train), 2, config.batch_size)
    for workers in (0, 2):
        io = IOModel("sata-ssd", workers, 2, config.batch_size, sample_nbytes=256, decode_s=1e-5)
        record = train(strategy, config, 2, io=io)
        np.testing.assert_array_equal(record["params"], plain["params"])
        if workers == 0:  # nothing overlaps: every step waits for its whole batch
            assert record["io_wait_s"] == pytest.approx(steps * io.worker_batch_s())
        assert record["loader_step_s"] == io.steady_step_s(0.0)
    assert_nothing_left()


def test_training_refuses_a_loader_it_does_not_model():
    from dlsys.experiments import train
    from dlsys.train import TrainConfig

    with pytest.raises(ValueError, match="modelled for allreduce and local-sgd"):
        train("ps-bsp", TrainConfig(epochs=1), 2, io=IOModel())
    with pytest.raises(ValueError, match="io.batch_size must be the training batch size 32"):
        train("allreduce", TrainConfig(epochs=1), 2, io=IOModel(batch_size=8))
    with pytest.raises(ValueError, match=r"loader workers per worker \(4 workers share at most 64"):
        train("allreduce", TrainConfig(epochs=1), 4, io=IOModel(workers=17))
