"""The training strategies' registry: name -> rank program, the ranks it needs, the options it takes.

``dlsys.experiments.train`` dispatches through it, ``dlsys train --strategy`` and the app
offer its names, and the tests enumerate it, so a training strategy is its rank program
plus one entry here.

An *option* is a keyword of ``dlsys.experiments.train`` that only some strategies model,
declared once here as an ``Option`` (its range, help, flag and default) that ``train()``,
``dlsys train``, the app, the docs and the tests read. ``OPTIONS`` are the keyword
arguments of the rank programs, each with the ``default`` a strategy that takes it runs
with when it is not given; ``CONFIG_OPTIONS`` are ``TrainConfig`` fields only some
strategies model (given when they differ from ``TrainConfig``'s default). An option a
strategy does not take is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from ..comm.backends import MAX_THREAD_RANKS
from ..compress.methods import COMPRESSORS
from ..learn.task import TrainConfig, build_model
from ..options import Option
from ..ps import ps_program
from .data_parallel import allreduce_program, local_sgd_program
from .model_parallel import pipeline_program, split_stages
from .zero import zero_program

MAX_CLOCKS = 10_000  # staleness, evaluations and warm-up epochs: a course's runs stay far below
OPTIONS: Mapping[str, Option] = MappingProxyType(
    {
        o.name: o
        for o in (
            Option("servers", "integer", 1, MAX_THREAD_RANKS, "parameter servers, extra ranks", default=1),
            Option("staleness", "integer", 0, MAX_CLOCKS, "SSP bound s in clocks", default=2),
            Option("period", "integer", 1, 2**20, "average the weights every K steps", default=4),
            Option("micro_batches", "integer", 1, 2**16, "GPipe micro-batches", default=4),
            Option("fail", "pair", help="worker WORKER crashes after STEP gradients (WORKER:STEP)"),
            Option(
                "checkpoint",
                "output",
                help="a .npz file (allreduce: rank 0) or a directory (ps-*: one file per server)",
            ),
            Option("resume", "path", help="resume from a --checkpoint of the same strategy"),
            Option("evals_per_epoch", "integer", 1, MAX_CLOCKS, "test-set evaluations per epoch", default=1),
            Option("record_layers", "bool", help="record per-tensor norms and trust ratios", default=False),
            Option("compression", "object", help="compress the gradients (Compression)", flags="--compress"),
            Option(
                "io",
                "object",
                help="load the batches through a real loader (IOModel)",
                flags="--loader-workers, --prefetch, --storage",
            ),
        )
    }
)
CONFIG_OPTIONS = MappingProxyType(
    {
        o.name: o
        for o in (
            Option("optimizer", "choice", help="sgd, lars or lamb (default sgd)"),
            Option(
                "warmup_epochs",
                "integer",
                0,
                MAX_CLOCKS,
                "gradual warm-up from --warmup-start-lr to --lr over this many epochs (<= --epochs)",
            ),
        )
    }
)


@dataclass(frozen=True)
class Strategy:
    """One strategy: ``program(comm, config, **fixed, **options, progress=...)`` runs on
    every rank. A strategy taking ``servers`` runs them as ranks 0..servers-1, its
    workers after them; the others run the workers alone. ``check(config, workers,
    options)`` refuses, before any rank starts, what only this strategy cannot run."""

    name: str
    program: Callable
    title: str
    options: frozenset[str]
    fixed: Mapping = field(default_factory=dict)
    family: str = ""
    check: Callable | None = field(default=None, compare=False)

    def first_worker(self, servers: int | None = None) -> int:
        """The rank of worker 0."""
        return (OPTIONS["servers"].default if servers is None else servers) if "servers" in self.options else 0

    def ranks(self, workers: int, servers: int | None = None) -> int:
        return self.first_worker(servers) + workers

    def settings(self, given: dict) -> dict:
        """The rank program's options: each one it takes, as ``given`` or by default. A
        given option (not None) it does not take is refused by name, with who takes it."""
        for option, value in given.items():
            if value is not None and option not in self.options:
                raise ValueError(f"{option} is not an option of {self.name}; it is modelled for {takers(option)}")
        return {
            k: OPTIONS[k].default if given.get(k) is None else given[k] for k in sorted(self.options & OPTIONS.keys())
        }


def check_stages(config: TrainConfig, workers: int, options: dict) -> None:
    split_stages(build_model(config), workers)  # one stage per worker: raises if the model has too few layers


def check_pushable(config: TrainConfig, workers: int, options: dict) -> None:
    compression = options["compression"]
    if compression is not None and COMPRESSORS[compression.method].same_draws_on_every_rank:
        raise ValueError(
            f"compression: {compression.method} cannot push to a parameter server (the server "
            "would need every worker's draw of indices); use it with allreduce"
        )


PS_OPTIONS = frozenset({"servers", "fail", "checkpoint", "resume", "compression"})
STRATEGIES = MappingProxyType(
    {
        s.name: s
        for s in [
            Strategy(
                "allreduce",
                allreduce_program,
                "Horovod-style data parallel: all-reduce the gradients every step",
                frozenset(
                    {"checkpoint", "resume", "evals_per_epoch", "record_layers", "compression", "io", *CONFIG_OPTIONS}
                ),
            ),
            Strategy(
                "local-sgd",
                local_sgd_program,
                "local SGD: average the weights every period steps",
                frozenset({"period", "io"}),
            ),
            Strategy(
                "model-parallel",
                pipeline_program,
                "GPipe: a pipeline of layer stages over micro-batches",
                frozenset({"micro_batches"}),
                check=check_stages,
            ),
            *(
                Strategy(
                    f"ps-{c}",
                    ps_program,
                    f"parameter server, {title} consistency",
                    PS_OPTIONS | extra,
                    {"consistency": c},
                    "parameter-server",
                    check_pushable,
                )
                for c, title, extra in (
                    ("bsp", "bulk synchronous", frozenset()),
                    ("ssp", "stale synchronous", frozenset({"staleness"})),
                    ("asp", "asynchronous", frozenset()),
                )
            ),
            *(
                Strategy(name, zero_program, title, frozenset(), fixed, "sharded")
                for name, title, fixed in (
                    (
                        "zero1",
                        "ZeRO-1: optimizer state sharded; reduce-scatter, update the shard, all-gather",
                        {"stage": 1},
                    ),
                    ("zero2", "ZeRO-2: gradients sharded too, reduce-scattered a layer at a time", {"stage": 2}),
                    ("zero3", "ZeRO-3: parameters sharded too, all-gathered a layer at a time", {"stage": 3}),
                    (
                        "fsdp",
                        "FSDP: ZeRO-3 over units of 2 layers, one flat parameter each",
                        {"stage": 3, "unit_layers": 2},
                    ),
                    (
                        "fsdp-prefetch",
                        "FSDP gathering the next unit while one computes",
                        {"stage": 3, "unit_layers": 2, "prefetch": True},
                    ),
                )
            ),
        ]
    }
)


def strategy_named(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    return STRATEGIES[name]


def taking(option: str) -> list[str]:
    """The strategies that take ``option``, in the registry's order."""
    return [s.name for s in STRATEGIES.values() if option in s.options]


def takers(option: str) -> str:
    """``taking(option)`` in words, a whole family by its name: "allreduce and the
    parameter-server strategies (ps-bsp, ps-ssp, ps-asp)"."""
    names = taking(option)
    for family in dict.fromkeys(s.family for s in STRATEGIES.values() if s.family):
        members = [s.name for s in STRATEGIES.values() if s.family == family]
        if set(members) <= set(names):
            names = [n for n in names if n not in members] + [f"the {family} strategies ({', '.join(members)})"]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def given_in(config: TrainConfig) -> dict:
    """The ``CONFIG_OPTIONS`` ``config`` sets away from ``TrainConfig``'s defaults (None where it does not)."""
    default = TrainConfig()
    return {k: getattr(config, k) if getattr(config, k) != getattr(default, k) else None for k in CONFIG_OPTIONS}
