"""Golden values and traces, recorded before the wave-2 engine refactor (issue 10).

    .venv/bin/python tests/golden/make_golden.py      # rewrites tests/golden/traces.json.gz

Every collective algorithm at 4 and 5 ranks (an uneven length, so blocks differ in size)
and every training strategy on 3 workers. ``tests/test_golden.py`` replays each case and
compares the whole trace (messages, spans and clocks, exact floats) with what is stored
here, and the values: a collective's exactly (a digest of their bytes: every sum is an
elementwise add in the order the algorithm chose), training's weights within ``TRAIN_ATOL``
of the arrays in train_params.npz (their matmuls sum in the order of the CPU's BLAS kernel,
so another CPU gives other last bits). Regenerate only for a deliberate change of the model.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "traces.json.gz")
PARAMS_PATH = os.path.join(HERE, "train_params.npz")  # each strategy's final weights, float32


def digest(value) -> str:
    """sha256 of a rank's return value: arrays by dtype, shape and bytes; dicts and lists by item."""
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, np.ndarray):
            h.update(f"{v.dtype.str}{v.shape}".encode())
            h.update(np.ascontiguousarray(v).tobytes())
        elif isinstance(v, dict):
            for k in sorted(v):
                h.update(str(k).encode())
                feed(v[k])
        elif isinstance(v, (list, tuple)):
            h.update(f"[{len(v)}".encode())
            for item in v:
                feed(item)
        else:
            h.update(repr(v).encode())

    feed(value)
    return h.hexdigest()


def trace_record(result) -> dict:
    t = result.trace
    return {
        "messages": [[m.src, m.dst, m.nbytes, m.depart_s, m.arrive_s, m.tag, m.label] for m in t.messages],
        "spans": [[s.rank, s.start_s, s.end_s, s.kind, s.label] for s in t.spans],
        "clocks_s": list(result.clocks_s),
    }


COLLECTIVE_COUNT = 1001  # elements: uneven blocks at 4 and 5 ranks


def collective_cases():
    from dlsys import collectives

    for collective, algorithms in collectives.ALGORITHMS.items():
        for algorithm in algorithms:
            for ranks in (4, 5):
                yield f"{collective}/{algorithm}/p{ranks}", collective, algorithm, ranks


TRAIN_STRATEGIES = ("allreduce", "local-sgd", "model-parallel", "ps-bsp", "ps-ssp", "ps-asp")
TRAIN_OPTIONS = {"staleness": 1, "period": 2}  # each given to the strategies that take it

# How far two CPUs' weights may lie apart. Every gradient comes from inner products of at most
# INNER_MAX terms (the MLP's 64 pixel features and 64 hidden units), which a BLAS kernel sums in
# its own order; the reordered sums' rounding differences (float32's unit roundoff u = 2^-24)
# add up over UPDATES gradient steps like a random walk, so the weights (|w| < 1) differ by
# about sqrt(INNER_MAX * UPDATES) * u = 4.4e-6 (the probabilistic bound sqrt(n) u instead of
# the worst case n u for a sum of n terms: Higham and Mary 2019, "A new approach to
# probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5)).
# Measured: at most 4.2e-7 (float64 difference) against SkylakeX, the kernel that recorded the
# golden weights, under ten other settings of numpy's OpenBLAS on this x86 machine
# (OPENBLAS_CORETYPE=Haswell, Zen, Sandybridge, Nehalem, Core2, Prescott, Atom, Opteron,
# Barcelona, Bulldozer): a tenth of the tolerance. A change of one gradient step moves weights
# by lr * |g|, orders of magnitude more.
INNER_MAX = 64
UPDATES = 86  # the most gradients a strategy applies: SSP and ASP, 3 workers x 28 steps and 2 taken ahead
TRAIN_ATOL = math.sqrt(INNER_MAX * UPDATES) * 2.0**-24


def train_options(strategy):
    from dlsys.train import STRATEGIES

    return {k: v for k, v in TRAIN_OPTIONS.items() if k in STRATEGIES[strategy].options}


def train_config():
    from dlsys.train import TrainConfig

    return TrainConfig(epochs=1, batch_size=16)


def run_collective(collective, algorithm, ranks, backend="threads"):
    import dlsys
    from dlsys.experiments import collective_program

    return dlsys.launch(
        collective_program,
        ranks,
        backend,
        link="tcp-10gbe",
        seed=3,
        args=(collective, algorithm, COLLECTIVE_COUNT, "float32", "sum", 3),
        charge_reductions=True,
    )


def run_train(strategy, backend="threads"):
    from dlsys.experiments import train

    record = train(strategy, train_config(), 3, backend=backend, straggler=(2, 3.0), **train_options(strategy))
    return record["result"], record["params"]


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    cases, params_of = {}, {}
    for name, collective, algorithm, ranks in collective_cases():
        result = run_collective(collective, algorithm, ranks)
        cases[name] = {"values": [digest(v) for v in result.values], **trace_record(result)}
    for strategy in TRAIN_STRATEGIES:
        result, params = run_train(strategy)
        cases[f"train/{strategy}"] = {"values": [digest(params)], **trace_record(result)}
        params_of[strategy] = params
    with gzip.open(PATH, "wt") as f:
        json.dump(cases, f)
    np.savez_compressed(PARAMS_PATH, **params_of)
    print(f"{len(cases)} cases -> {PATH} ({os.path.getsize(PATH)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
