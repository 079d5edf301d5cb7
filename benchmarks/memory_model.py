"""The memory model's speed: a thousand layouts in under a second (issue 26; docs/performance.md,
"The memory model").

    .venv/bin/python benchmarks/memory_model.py            # the grid below, best of 5
    .venv/bin/python benchmarks/memory_model.py --json     # one JSON line
    .venv/bin/python benchmarks/memory_model.py --write-docs   # docs/performance.md's measured block

The grid: 5 model sizes x 5 world sizes x 4 ZeRO stages x 2 TP degrees x 3 optimizers x
2 precisions = 1200 layouts, each with a transformer's activations (selective recomputation),
each answered by ``Layout.bytes()``.
"""

from __future__ import annotations

import itertools
import time

from dlsys.course.docs import benchmark_parser, report_benchmark
from dlsys.machine.memory import Layout, Transformer

TARGET_S = 1.0  # issue 26: a thousand layouts in under a second


def grid() -> list[dict]:
    return [
        dict(
            params=params,
            ranks=ranks,
            zero=zero,
            tp=tp,
            optimizer=optimizer,
            precision=precision,
            model=Transformer(32, 4096, 32, 2048, 1),
            recompute="selective",
        )
        for params, ranks, zero, tp, optimizer, precision in itertools.product(
            (125_000_000, 1_300_000_000, 7_500_000_000, 70_000_000_000, 175_000_000_000),
            (8, 64, 256, 1024, 4096),
            range(4),
            (1, 8),
            ("adam", "sgd", "sgd-plain"),
            ("mixed", "fp32"),
        )
    ]


def measure(repeats: int = 5) -> dict:
    layouts = grid()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for options in layouts:
            Layout(**options).bytes()
        best = min(best, time.perf_counter() - start)
    return {
        "layouts": len(layouts),
        "best_of": repeats,
        "wall_s": best,
        "target_s": TARGET_S,
        "per_layout_us": best / len(layouts) * 1e6,
    }


def sentence(record: dict) -> str:
    return (
        f"{record['layouts']} layouts in {record['wall_s'] * 1e3:.1f} ms (best of {record['best_of']}; "
        f"{record['per_layout_us']:.1f} us each; target < {TARGET_S:g} s)"
    )


def main(argv=None) -> None:
    args = benchmark_parser(__doc__).parse_args(argv)
    report_benchmark(measure(), sentence, "bench.memory_model", "memory_model.py", args, argv)


if __name__ == "__main__":
    main()
