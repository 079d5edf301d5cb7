"""docs/training.md's tables: every strategy, a straggler and a failure."""

from __future__ import annotations

from collections import Counter

from ...experiments import training
from ...train.strategies import OPTIONS
from . import Sources, markdown_table

FAILURE = (1, 5)  # (worker, gradients before it crashes)


def strategy_title(name: str) -> str:
    """The strategy's name with the option that shapes it: "ps-ssp (s = 2)"."""
    option = {"local-sgd": ("K", "period"), "model-parallel": ("M", "micro_batches"), "ps-ssp": ("s", "staleness")}
    return f"{name} ({option[name][0]} = {OPTIONS[option[name][1]].default})" if name in option else name


def steps_per_worker(record: dict) -> dict[int, int]:
    """Steps (gradients pushed) of each training rank, from the record's losses."""
    return dict(sorted(Counter(row["rank"] for row in record["losses"]).items()))


def gradients_per_worker(record: dict) -> str:
    counts = list(steps_per_worker(record).values())
    return f"{counts[0]} each" if len(set(counts)) == 1 else ", ".join(map(str, counts))


def training_strategies(src: Sources) -> str:
    def staleness(name: str, r: dict) -> str:
        return f"{OPTIONS['period'].default - 1} local steps" if name == "local-sgd" else str(r["max_staleness"])

    return markdown_table(
        ["strategy", "test accuracy", "virtual time", "bytes moved", "max staleness"],
        [
            [
                strategy_title(name),
                f"{r['test_accuracy']:.2%}",
                f"{r['virtual_time_s'] * 1e3:.2f} ms",
                f"{r['bytes_moved'] / 1e6:.2f} MB",
                staleness(name, r),
            ]
            for name, r in src.strategies.items()
        ],
    )


def training_straggler(src: Sources) -> str:
    runs = src.straggler
    rows = [
        [
            strategy_title(name),
            f"{r['test_accuracy']:.2%}",
            f"{r['virtual_time_s'] * 1e3:.2f} ms",
            gradients_per_worker(r) + (f" (max staleness {r['max_staleness']} clocks)" if name == "ps-asp" else ""),
        ]
        for name, r in runs.items()
    ]
    asp, bsp = runs["ps-asp"], runs["ps-bsp"]
    return (
        markdown_table(["strategy", "test accuracy", "virtual time", "gradients per worker"], rows)
        + f"\nASP finishes {bsp['virtual_time_s'] / asp['virtual_time_s']:.1f}x earlier than BSP, with reads up "
        f"to {asp['max_staleness']} clocks stale.\n"
    )


def training_failure(src: Sources) -> str:
    worker, step = FAILURE
    r = training.train("ps-asp", fail=FAILURE)
    pushed = [n for rank, n in steps_per_worker(r).items() if rank != OPTIONS["servers"].default + worker]
    return (
        f"`dlsys train --strategy ps-asp --fail {worker}:{step}`: the other three push "
        f"{', '.join(map(str, pushed))} gradients, {r['test_accuracy']:.2%} test accuracy.\n"
    )
