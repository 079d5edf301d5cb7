"""Large-batch training (SPEC section 10): real data-parallel runs over a batch sweep, and
what the large-batch literature does about the gap.

    from dlsys.experiments import large_batch_study
    study = large_batch_study()          # the cached results (results/large_batch.json)
    study["sweep"]                       # test accuracy per batch and learning-rate rule
    dlsys train --sweep batch --out results/large_batch.json   # the cold run behind it, with a progress bar

Five experiments share one ``Study`` (its settings are the cache key):
- ``sweep``: global batch 32 .. 8,192 (the sum of the workers' batches) with a fixed
  learning rate, the square-root rule, the linear scaling rule, and linear scaling with
  gradual warm-up (Goyal et al. 2017);
- ``optimizers``: LARS (You et al. 2017) and LAMB (You et al. 2019) against SGD + warm-up
  at the largest batches;
- ``layers``: each tensor's ||w||, ||g|| and the trust ratio LARS/LAMB applied, per step;
- ``landscape``: the loss on the line from the small-batch to the large-batch solution
  and the sharpness of each (Keskar et al. 2017);
- ``time_to_accuracy``: virtual time to a target accuracy against workers and batch.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from ..checks import check_int
from ..comm.backends import MAX_THREAD_RANKS
from ..learn import landscape
from ..learn.optim import scale_lr
from ..learn.task import lr_schedule
from ..outputs import write_atomic
from ..train import TrainConfig, build_model, load_task, steps_per_epoch
from .training import train

CACHE_PATH = Path(__file__).resolve().parents[2] / "results" / "large_batch.json"
RULES = ("fixed", "sqrt", "linear", "linear + warm-up")
OPTIMIZERS = ("sgd + warm-up", "lars", "lamb")
# Bump by hand when a change of code changes the results: a cache of another version is
# refused (``require_study``), and tests/train/test_large_batch.py fails when a cold quick study
# no longer gives what the cache recorded for it (``quick_check``) under the same version.
CACHE_VERSION = 1
SWEEP_COMMAND = "dlsys train --sweep batch --out results/large_batch.json"


@dataclass(frozen=True)
class Study:
    """Every setting of the large-batch study. ``batches`` are global batches split over
    ``workers``; the rules scale ``base_lr`` from ``base_batch``; warm-up starts at
    ``base_lr`` (Goyal et al. 2017); LARS and LAMB warm up to their own peak rates."""

    dataset: str = "digits-aug"
    hidden: tuple[int, ...] = (64, 64, 64, 64, 64)
    epochs: int = 8
    batches: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    workers: int = 2
    base_batch: int = 32
    base_lr: float = 0.01
    momentum: float = 0.9
    warmup_epochs: int = 3
    large_batches: tuple[int, ...] = (4096, 8192)
    lars_lr: float = 20.0
    lars_weight_decay: float = 0.0
    trust_coefficient: float = 0.001
    lamb_lr: float = 0.03
    lamb_weight_decay: float = 0.0
    evals_per_epoch: int = 4
    tolerance: float = 0.01
    target_accuracy: float = 0.95
    scaling_workers: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    scaling_batches: tuple[int, ...] = (32, 256)
    landscape_alphas: tuple[float, ...] = tuple(np.round(np.linspace(-0.5, 1.5, 21), 2))
    landscape_samples: int = 4000
    sharpness_epsilon: float = 0.05
    sharpness_samples: int = 10
    link: str = "rdma-edr"
    node: str = "laptop-cpu"
    seed: int = 0


QUICK = Study(
    dataset="digits",
    hidden=(32, 32),
    epochs=4,
    batches=(8, 32, 128, 512),
    base_batch=8,
    base_lr=0.01,
    warmup_epochs=1,
    large_batches=(512,),
    lars_lr=5.0,
    lamb_lr=0.02,
    scaling_workers=(1, 2, 4),
    scaling_batches=(8, 64),
    landscape_alphas=(-0.5, 0.0, 0.5, 1.0, 1.5),
    landscape_samples=300,
    sharpness_samples=3,
    target_accuracy=0.9,
)
"""A study small enough for tests and lessons: the 8x8 digits, seconds instead of minutes."""


def check_study(study: Study) -> int:
    """Raise ValueError naming the setting and its accepted range unless every run of the
    study is possible; return the number of training samples."""
    n = len(load_task(study.dataset, False, study.seed).y_train)
    check_int("workers", study.workers, 1, MAX_THREAD_RANKS)
    for batch in study.batches:
        check_int("batch", batch, study.workers, n)
        if batch % study.workers:
            raise ValueError(f"every batch must be a multiple of workers ({study.workers}), got {batch}")
    for batch in study.large_batches:
        if batch not in study.batches:
            raise ValueError(f"large_batches must be among batches {study.batches}, got {batch}")
    if study.base_batch not in study.batches:
        raise ValueError(f"base_batch must be among batches {study.batches}, got {study.base_batch}")
    for workers in study.scaling_workers:
        check_int("every scaling_workers entry", workers, 1, MAX_THREAD_RANKS)
        for batch in study.scaling_batches:
            check_int(f"every scaling_batches entry (with {workers} workers)", batch, 1, n // workers)
    rule_config(study, RULES[-1], study.base_batch)  # TrainConfig checks lr, momentum, warm-up
    return n


def rule_lr(study: Study, rule: str, batch: int) -> float:
    """The peak learning rate of ``rule`` at global ``batch``: base_lr ("fixed"), or
    ``optim.scale_lr`` by k = batch / base_batch (linear: k, sqrt: sqrt(k))."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if rule == "fixed":
        return study.base_lr
    return scale_lr(study.base_lr, batch, study.base_batch, "sqrt" if rule == "sqrt" else "linear")


def rule_config(study: Study, rule: str, batch: int, workers: int | None = None) -> TrainConfig:
    """The TrainConfig of ``rule`` at global ``batch`` split over ``workers`` (default the
    study's). Warm-up is only needed when the rate grows (batch > base_batch)."""
    workers = workers or study.workers
    lr = rule_lr(study, rule, batch)
    warm = rule == "linear + warm-up" and lr != study.base_lr
    return TrainConfig(
        "mlp",
        study.hidden,
        study.dataset,
        study.epochs,
        batch // workers,
        lr,
        study.momentum,
        study.seed,
        warmup_epochs=study.warmup_epochs if warm else 0,
        warmup_start_lr=study.base_lr if warm else 0.0,
    )


def optimizer_config(study: Study, optimizer: str, batch: int) -> TrainConfig:
    """SGD + warm-up is the linear rule with warm-up; LARS and LAMB warm up from 0 to their
    own peak rate (You et al. 2017 and 2019 warm up too)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    config = rule_config(study, "linear + warm-up", batch)
    if optimizer == "lars":
        return replace(
            config,
            optimizer="lars",
            lr=study.lars_lr,
            weight_decay=study.lars_weight_decay,
            trust_coefficient=study.trust_coefficient,
            warmup_start_lr=0.0,
            warmup_epochs=study.warmup_epochs,
        )
    if optimizer == "lamb":
        return replace(
            config,
            optimizer="lamb",
            lr=study.lamb_lr,
            weight_decay=study.lamb_weight_decay,
            warmup_start_lr=0.0,
            warmup_epochs=study.warmup_epochs,
        )
    return config


def lr_schedules(study: Study, batch: int, train_samples: int | None = None) -> list[dict]:
    """Rows (rule, epoch, lr): the rate every rule and optimizer applies at global ``batch``,
    step by step, from the same schedule the training runs use (``learn.task.lr_schedule``).
    ``train_samples``: the training set's size, as a study's record has it (else the
    dataset is made to count it: seconds for the augmented digits)."""
    if train_samples is None:
        train_samples = len(load_task(study.dataset, False, study.seed).y_train)
    per_epoch = steps_per_epoch(train_samples, 1, batch)
    configs = {rule: rule_config(study, rule, batch) for rule in RULES}
    configs.update({name: optimizer_config(study, name, batch) for name in OPTIMIZERS[1:]})
    rows = []
    for name, config in configs.items():
        schedule = lr_schedule(config, per_epoch)
        rows += [
            {"rule": name, "epoch": step / per_epoch, "lr": float(schedule(step)) if callable(schedule) else schedule}
            for step in range(study.epochs * per_epoch)
        ]
    return rows


class _Runner:
    """Runs each distinct (config, workers) once: the rules coincide at the base batch."""

    def __init__(self, study: Study, bar: tqdm, backend: str):
        self.study, self.bar, self.backend, self.runs = study, bar, backend, {}

    def __call__(self, config: TrainConfig, workers: int, record_layers: bool = False) -> dict:
        key = (config, workers, record_layers)
        if key not in self.runs:
            self.bar.set_postfix_str(f"{config.optimizer} batch {config.batch_size * workers} on {workers} workers")
            record = train(
                "allreduce",
                config,
                workers,
                backend=self.backend,
                link=self.study.link,
                node=self.study.node,
                evals_per_epoch=self.study.evals_per_epoch,
                record_layers=record_layers,
            )
            self.runs[key] = record
            self.bar.update()
        return self.runs[key]


def _row(record: dict) -> dict:
    losses = [row["loss"] for row in record["losses"]]
    return {
        "test_accuracy": record["test_accuracy"],
        "virtual_time_s": record["virtual_time_s"],
        "final_loss": float(np.mean(losses[-record["workers"] :])),
        "curve": record["accuracy_curve"],
    }


def run_study(study: Study = Study(), progress: bool = False, backend: str = "threads") -> dict:
    """Run every experiment of ``study`` (real training; minutes for the default study on
    2 cores) and return the tidy record (what ``large_batch_study`` caches)."""
    n = check_study(study)
    runs = (
        len(study.batches) * len(RULES)
        + len(study.large_batches) * len(OPTIMIZERS)
        + len(study.scaling_workers) * len(study.scaling_batches)
    )
    # BLAS threads would fight the rank threads for the 2 cores (10x slower at batch 256);
    # runs whose rate is too large overflow, which is a result (the rule failed), not a fault
    with (
        threadpool_limits(1, user_api="blas"),
        warnings.catch_warnings(),
        tqdm(total=runs, desc="large-batch study", unit="run", disable=None if progress else True) as bar,
    ):
        warnings.simplefilter("ignore", RuntimeWarning)
        run = _Runner(study, bar, backend)
        largest = max(study.batches)
        sweep = [
            {
                "rule": rule,
                "batch": batch,
                "lr": rule_lr(study, rule, batch),
                **_row(run(rule_config(study, rule, batch), study.workers, batch == largest)),
            }
            for rule in RULES
            for batch in study.batches
        ]
        optimizers, layers, params = [], [], {}
        for name in OPTIMIZERS:
            for batch in study.large_batches:
                record = run(optimizer_config(study, name, batch), study.workers, batch == largest)
                optimizers.append(
                    {"optimizer": name, "batch": batch, "lr": optimizer_config(study, name, batch).lr, **_row(record)}
                )
                if batch == largest:
                    layers += [{"optimizer": name, **row} for row in record["layers"]]
                    params[name] = record["params"]
        small = run(rule_config(study, "fixed", study.base_batch), study.workers)
        best = max(optimizers + [r for r in sweep if r["batch"] == largest], key=lambda r: r["test_accuracy"])
        best_name = best.get("optimizer") or best["rule"]
        large = run(
            optimizer_config(study, best_name, largest)
            if "optimizer" in best
            else rule_config(study, best_name, largest),
            study.workers,
            True,
        )
        scaling = []
        for batch in study.scaling_batches:
            for workers in study.scaling_workers:
                config = rule_config(study, "linear + warm-up", workers * batch, workers)
                scaling.append(
                    {
                        "workers": workers,
                        "batch_per_worker": batch,
                        "global_batch": workers * batch,
                        **time_to_target(run(config, workers), study.target_accuracy),
                    }
                )
    return {
        "study": _jsonable(asdict(study)),
        "version": CACHE_VERSION,
        "train_samples": n,
        "sweep": sweep,
        "optimizers": optimizers,
        "layers": layers,
        "landscape": sharp_vs_flat(
            study,
            small["params"],
            large["params"],
            f"batch {study.base_batch}, fixed lr",
            f"batch {largest}, {best_name}",
        ),
        "time_to_accuracy": scaling,
    }


def time_to_target(record: dict, target: float) -> dict:
    """The virtual time at the first evaluation reaching ``target`` test accuracy (None if
    none did), the run's whole virtual time and final accuracy."""
    reached = [row["time_s"] for row in record["accuracy_curve"] if row["test_accuracy"] >= target]
    return {
        "time_to_target_s": reached[0] if reached else None,
        "virtual_time_s": record["virtual_time_s"],
        "test_accuracy": record["test_accuracy"],
    }


def sharp_vs_flat(study: Study, small: np.ndarray, large: np.ndarray, small_name: str, large_name: str) -> dict:
    """The loss along w(alpha) = (1 - alpha) w_small + alpha w_large on training and test
    samples, and the sharpness of each solution on the training samples (``dlsys.learn.landscape``)."""
    task = load_task(study.dataset, False, study.seed)
    model = build_model(rule_config(study, "fixed", study.base_batch))
    pick = np.random.default_rng(study.seed).permutation(len(task.y_train))[: study.landscape_samples]
    X, y = task.X_train[pick], task.y_train[pick]
    alphas = list(study.landscape_alphas)
    return {
        "small": small_name,
        "large": large_name,
        "alpha": alphas,
        "train_loss": landscape.loss_along_line(model, small, large, X, y, alphas),
        "test_loss": landscape.loss_along_line(model, small, large, task.X_test, task.y_test, alphas),
        "sharpness": {
            which: landscape.sharpness(model, w, X, y, study.sharpness_epsilon, study.sharpness_samples, study.seed)
            for which, w in (("small", small), ("large", large))
        },
    }


def largest_good_batch(sweep: list[dict], rule: str, tolerance: float) -> int:
    """The largest batch whose test accuracy under ``rule`` is within ``tolerance`` (absolute,
    0.01 = one percentage point) of the smallest batch's."""
    rows = sorted((r for r in sweep if r["rule"] == rule), key=lambda r: r["batch"])
    if not rows:
        raise ValueError(f"no sweep rows for rule {rule!r}")
    return max(r["batch"] for r in rows if r["test_accuracy"] >= rows[0]["test_accuracy"] - tolerance)


def _jsonable(value):
    """Tuples as lists and numpy scalars as floats, so the study compares equal after a JSON round trip."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def quick_check(record: dict) -> list[list]:
    """A study's fingerprint: (rule or optimizer, batch, test accuracy) of every sweep and
    optimizer run. The cache stores the quick study's, so a cold quick run (seconds) tells
    whether the training code still gives what the cache was made with."""
    return [
        [r.get("optimizer") or r["rule"], r["batch"], r["test_accuracy"]]
        for r in record["sweep"] + record["optimizers"]
    ]


def cache_problem(study: Study = Study(), path: Path | str = CACHE_PATH) -> str | None:
    """Why the cache at ``path`` cannot stand for ``study`` (missing, other settings, or
    another CACHE_VERSION), or None if it can."""
    path = Path(path)
    if not path.is_file():
        return f"{path.name} is missing: run `{SWEEP_COMMAND}` (minutes) to make it"
    record = json.loads(path.read_text())
    if record.get("version") != CACHE_VERSION:
        return (
            f"{path.name} was made by CACHE_VERSION {record.get('version')} and the code is at {CACHE_VERSION}: "
            f"the training code changed its results; rerun `{SWEEP_COMMAND}` (minutes)"
        )
    if record.get("study") != _jsonable(asdict(study)):
        return f"{path.name} was made with other study settings: rerun `{SWEEP_COMMAND}` (minutes)"
    return None


def load_study(study: Study = Study(), path: Path | str = CACHE_PATH) -> dict | None:
    """The cached record of ``study`` at ``path``, or None if ``cache_problem`` finds one."""
    return None if cache_problem(study, path) else json.loads(Path(path).read_text())


def require_study(study: Study = Study(), path: Path | str = CACHE_PATH) -> dict:
    """The cached record of ``study``; a ValueError saying why and what to run if the cache
    is missing or stale (what the docs generator and the reproduction suite read: they never
    train for minutes, and never show a stale figure)."""
    problem = cache_problem(study, path)
    if problem:
        raise ValueError(problem)
    return json.loads(Path(path).read_text())


def large_batch_study(
    study: Study = Study(),
    path: Path | str | None = CACHE_PATH,
    progress: bool = False,
    refresh: bool = False,
    backend: str = "threads",
) -> dict:
    """The study's record from the cache at ``path`` if it matches, else run it (and write
    the cache with the quick study's ``quick_check``, unless ``path`` is None). ``refresh``
    always runs it again."""
    cached = None if refresh or path is None else load_study(study, path)
    if cached is not None:
        return cached
    record = run_study(study, progress, backend)
    if path is not None:
        quick = record if study == QUICK else run_study(QUICK, backend=backend)
        record["quick_check"] = quick_check(quick)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record, separators=(",", ":")))
    return json.loads(json.dumps(record))
