"""What every training strategy shares: the task, the model, the data plan, one step.

The data plan is PyTorch's DistributedSampler: epoch e shuffles the n training samples
with the seed (seed, e); global step i takes the next P*b of them, and worker r takes the
r-th b of those. So P workers with batch b see exactly the samples one process sees with
batch P*b, which is why data-parallel SGD can reproduce single-process SGD.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import compress
from ..machine.storage import IOModel, LoaderTimeline
from . import data, nn, optim
from .loader import Loader

MODELS = ("mlp", "cnn")
DATASETS = ("digits", "synthetic", "digits-aug")
INPUT_FEATURES = {"digits": 64, "synthetic": 64, "digits-aug": 256}
OPTIMIZERS = ("sgd", "lars", "lamb")
DTYPES = {"float32": np.float32, "float64": np.float64}


@dataclass(frozen=True)
class TrainConfig:
    """The learning problem, the same for every strategy.

    ``batch_size`` is per worker; ``lr`` is applied to the mean gradient of the global
    batch (workers * batch_size samples) by ``optimizer`` (SGD with ``momentum``, LARS with
    ``momentum`` and ``trust_coefficient``, or LAMB) with ``weight_decay``. Gradual warm-up
    (Goyal et al. 2017) raises the rate linearly from ``warmup_start_lr`` at step 0 to
    ``lr`` after ``warmup_epochs`` epochs (``optim.warmup_lr``)."""

    model: str = "mlp"
    hidden: tuple[int, ...] = (64, 64)
    dataset: str = "digits"
    epochs: int = 10
    batch_size: int = 32
    lr: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    dtype: str = "float32"
    optimizer: str = "sgd"
    weight_decay: float = 0.0
    trust_coefficient: float = 0.001
    warmup_epochs: int = 0
    warmup_start_lr: float = 0.0

    def __post_init__(self):
        for name, choices in (("model", MODELS), ("dataset", DATASETS), ("dtype", DTYPES), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        if self.model == "cnn" and self.dataset != "digits":
            raise ValueError("model 'cnn' needs image data: use dataset 'digits'")
        for name in ("epochs", "batch_size"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)!r}")
        if not all(isinstance(h, int) and h >= 1 for h in self.hidden):
            raise ValueError(f"hidden must list positive layer widths, got {self.hidden!r}")
        if not self.lr > 0 or not 0 <= self.momentum < 1:
            raise ValueError(f"need lr > 0 and momentum in [0, 1), got lr={self.lr!r}, momentum={self.momentum!r}")
        if not (isinstance(self.warmup_epochs, int) and 0 <= self.warmup_epochs <= self.epochs):
            raise ValueError(
                f"warmup_epochs must be an integer in 0..epochs ({self.epochs}): the warm-up cannot "
                f"be longer than training, got {self.warmup_epochs!r}"
            )
        for name in ("weight_decay", "warmup_start_lr"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.trust_coefficient > 0:
            raise ValueError(
                f"trust_coefficient must be > 0 (LARS's eta, 0.001 in You et al. 2017), got {self.trust_coefficient!r}"
            )


@dataclass(frozen=True)
class Compression:
    """A gradient compression method (``dlsys.compress``), its options as (name, value)
    pairs, and its memory (default: the one its paper uses). Checked when made, so a bad
    method or option fails before any rank starts."""

    method: str = "none"
    options: tuple = ()
    memory: str | None = None

    def __post_init__(self):
        self.build(seed=0, rank=0)

    def build(self, seed: int, rank: int, workers: int = 1, momentum: float = 0.9):
        """This rank's (compressor, memory). DGC's memory takes over the optimizer's momentum."""
        compressor = compress.make(self.method, seed, rank, **dict(self.options))
        memory = self.memory or compressor.memory
        options = {"momentum": momentum, "workers": workers} if memory == "dgc" else {}
        return compressor, compress.make_memory(memory, **options)


@dataclass(frozen=True)
class Task:
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


@lru_cache(maxsize=8)
def load_task(dataset: str = "digits", image: bool = False, seed: int = 0) -> Task:
    """Stratified 75/25 split, pixels z-scored with the training set's statistics:
    x <- (x - mean) / (std + 0.1) (the 0.1 keeps always-blank pixels finite)."""
    if dataset == "digits-aug":
        X_train, X_test, y_train, y_test = data.augmented_digits(seed=seed)
        mean, std = X_train.mean(axis=0), X_train.std(axis=0) + 0.1
        return Task((X_train - mean) / std, y_train, (X_test - mean) / std, y_test)
    if dataset == "digits":
        X, y = data.load_digits("image" if image else "flat")
    else:
        X, y = data.synthetic_classification(2000, 64, 10, seed=seed)
    X_train, X_test, y_train, y_test = data.train_test_split(X, y, 0.25, seed=seed)
    mean, std = X_train.mean(axis=0), X_train.std(axis=0) + 0.1
    return Task((X_train - mean) / std, y_train, (X_test - mean) / std, y_test)


def task_of(config: TrainConfig) -> Task:
    return load_task(config.dataset, config.model == "cnn", config.seed)


def build_model(config: TrainConfig) -> nn.Sequential:
    """The same initial weights on every rank that builds it (seeded by config.seed)."""
    dtype = DTYPES[config.dtype]
    if config.model == "cnn":
        return nn.cnn(seed=config.seed, dtype=dtype)
    return nn.mlp([INPUT_FEATURES[config.dataset], *config.hidden, 10], seed=config.seed, dtype=dtype)


def lr_schedule(config: TrainConfig, per_epoch: int) -> float | optim.Schedule:
    """``config.lr``, or with warm-up the schedule step -> ``optim.warmup_lr`` over
    ``config.warmup_epochs * per_epoch`` steps."""
    warmup_steps = config.warmup_epochs * per_epoch
    if not warmup_steps:
        return config.lr
    return lambda step: optim.warmup_lr(step, warmup_steps, config.warmup_start_lr, config.lr)


def build_optimizer(config: TrainConfig, model: nn.Sequential, per_epoch: int) -> optim.Optimizer:
    """``config.optimizer`` over the model's flat buffers; LARS and LAMB adapt per
    parameter tensor (``model.param_slices()``). The rate follows ``lr_schedule``."""
    lr = lr_schedule(config, per_epoch)
    if config.optimizer == "lars":
        return optim.LARS(
            model.params,
            model.grads,
            lr,
            model.param_slices(),
            config.momentum,
            config.weight_decay,
            config.trust_coefficient,
        )
    if config.optimizer == "lamb":
        return optim.LAMB(model.params, model.grads, lr, model.param_slices(), weight_decay=config.weight_decay)
    return optim.SGD(model.params, model.grads, lr, config.momentum, config.weight_decay)


def steps_per_epoch(n: int, workers: int, batch_size: int) -> int:
    """Global steps in one epoch; the last incomplete global batch is dropped."""
    steps = n // (workers * batch_size)
    if steps < 1:
        raise ValueError(
            f"batch_size must be an integer in 1..{max(1, n // workers)} for {workers} workers: "
            f"workers * batch_size = {workers * batch_size} exceeds the {n} training samples"
        )
    return steps


def batch_indices(n: int, step: int, rank: int, workers: int, batch_size: int, seed: int) -> np.ndarray:
    """Worker `rank`'s samples at global step `step` (DistributedSampler-style, see above)."""
    epoch, i = divmod(step, steps_per_epoch(n, workers, batch_size))
    order = np.random.default_rng([seed, epoch]).permutation(n)
    start = (i * workers + rank) * batch_size
    return order[start : start + batch_size]


def training_batches(comm, config: TrainConfig, task: Task, per_epoch: int, start: int = 0, io: IOModel | None = None):
    """This rank's (step, X_b, y_b) from global step ``start`` to the end of training, by
    the plan of ``batch_indices``. With ``io``, through a real ``dlsys.learn.loader.Loader`` of
    ``io.workers`` processes and a queue of ``io.prefetch`` batches (the same batches), and
    the rank waits in virtual time until the IO model (``dlsys.machine.storage.LoaderTimeline``)
    has the batch ready: an "io wait" span, 0 when the loader keeps up. Resuming restarts
    the loader (and its pipeline) at ``start``'s epoch."""
    n = len(task.y_train)
    if io is None:
        for step in range(start, config.epochs * per_epoch):
            idx = batch_indices(n, step, comm.rank, comm.size, config.batch_size, config.seed)
            yield step, task.X_train[idx], task.y_train[idx]
        return
    timeline = LoaderTimeline(io)
    with Loader(
        task.X_train,
        task.y_train,
        config.batch_size,
        workers=io.workers,
        prefetch=io.prefetch,
        seed=config.seed,
        drop_last=True,
        rank=comm.rank,
        world=comm.size,
    ) as loader:
        for epoch in range(start // per_epoch, config.epochs):
            for step, (X_b, y_b) in enumerate(loader.epoch(epoch), epoch * per_epoch):
                comm.wait_until(timeline.take(comm.clock), label="io wait")
                yield step, X_b, y_b


def gradient(comm, model: nn.Sequential, X: np.ndarray, y: np.ndarray, on_grad_ready=None) -> float:
    """Forward, loss, backward into model.grads; return the loss. Virtual time is charged,
    not measured: forward FLOPs + 2x forward FLOPs for the backward pass."""
    loss, dlogits = nn.softmax_cross_entropy(model.forward(X), y)
    model.backward(dlogits, on_grad_ready)
    comm.compute(flops=3 * sum(model.flops(len(X))), label="forward+backward")
    return loss


def accuracy(model: nn.Sequential, X: np.ndarray, y: np.ndarray) -> float:
    """Fraction of samples whose arg-max logit is the label."""
    return float(np.mean(model.forward(X).argmax(axis=1) == y))


def progress_bar(total: int, enabled: bool, desc: str):
    """A progress bar on stderr for the one rank that reports (shown only on a terminal)."""
    from tqdm import tqdm  # here: importing it took 35 ms of every command, most of which draw no bar

    return tqdm(total=total, desc=desc, unit="step", leave=False, disable=None if enabled else True)
