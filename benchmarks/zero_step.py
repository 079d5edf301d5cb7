"""A 16-rank ZeRO-3 step of the small transformer on threads: finishes in seconds (issue 26;
docs/performance.md, "A ZeRO-3 step").

    .venv/bin/python benchmarks/zero_step.py               # 16 ranks, best of 3
    .venv/bin/python benchmarks/zero_step.py --json        # one JSON line
    .venv/bin/python benchmarks/zero_step.py --write-docs  # docs/performance.md's measured block

Every rank builds the small transformer (``learn.transformer``: 2 pre-norm blocks, d_model 32,
4 heads) on the sequence-reversal task, shards it with ``dlsys.train.zero.Sharded`` at
stage 3 (a layer gathered at a time) under Adam, and takes ``STEPS`` steps on its own
batch: per step every layer is all-gathered before its forward and again before its
backward, and its gradient reduce-scattered. The wall time is the whole ``launch``
(threads started, ranks run, trace collected); the virtual time is the emulated step's.
"""

from __future__ import annotations

import time

import numpy as np

from dlsys.comm import launch
from dlsys.course.docs import benchmark_parser, report_benchmark
from dlsys.learn import optim
from dlsys.learn.sequence import answer_loss, reversal
from dlsys.learn.transformer import transformer
from dlsys.train.zero import Sharded

RANKS, STEPS, BATCH, LENGTH = 16, 1, 8, 8
TARGET_S = 10.0  # issue 26: "finishes in seconds"


def zero3_program(comm, steps: int) -> float:
    task = reversal(BATCH, length=LENGTH, seed=comm.rank)
    model = transformer(vocab=task.vocab, seq_len=2 * LENGTH, d_model=32, heads=4, layers=2)
    sharded = Sharded(comm, model, 3, lambda w, g: optim.Adam(w, g, 1e-3))
    loss = 0.0
    for _ in range(steps):
        loss = sharded.step(task.inputs, lambda logits: answer_loss(logits, task))
    return loss


def measure(ranks: int = RANKS, steps: int = STEPS, repeats: int = 3) -> dict:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = launch(zero3_program, ranks, "threads", args=(steps,))
        best = min(best, time.perf_counter() - start)
    assert result is not None and np.isfinite(result.values).all()
    params = transformer(vocab=reversal(1, LENGTH).vocab, seq_len=2 * LENGTH, d_model=32, heads=4, layers=2).params.size
    return {
        "ranks": ranks,
        "steps": steps,
        "params": params,
        "messages": len(result.trace.messages),
        "bytes_sent": sum(m.nbytes for m in result.trace.messages),
        "virtual_time_s": result.virtual_time_s,
        "best_of": repeats,
        "wall_s": best,
        "target_s": TARGET_S,
    }


def sentence(record: dict) -> str:
    return (
        f"{record['ranks']} ranks, {record['steps']} ZeRO-3 step(s) of the {record['params']:,}-parameter "
        f"transformer: {record['wall_s']:.2f} s wall (best of {record['best_of']}; target < "
        f"{record['target_s']:g} s), {record['messages']:,} messages, {record['bytes_sent']:,} bytes, "
        f"{record['virtual_time_s'] * 1e3:.2f} ms virtual"
    )


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--ranks", type=int, default=RANKS)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    for name in ("ranks", "steps"):
        if not 1 <= getattr(args, name) <= 256:
            parser.error(f"--{name} must be 1..256, got {getattr(args, name)}")
    record = measure(args.ranks, args.steps)
    report_benchmark(record, sentence, "bench.zero_step", "zero_step.py", args, argv)


if __name__ == "__main__":
    main()
