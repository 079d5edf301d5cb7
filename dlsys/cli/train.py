"""``dlsys train``: train a real model under one distributed strategy, in virtual time.

    dlsys train --model mlp --dataset digits --workers 4 --strategy ps-ssp --staleness 2 \\
                --straggler 3:4 --epochs 10 [--json]
    dlsys train --compress topk --ratio 0.01    (allreduce and ps-*: compressed gradients)
    dlsys train --strategy ps-bsp --schedule p3 --slice-params 1000   (overlap and scheduling)
    dlsys train --sweep batch [--quick] [--out results/large_batch.json]   (default out/large_batch.json)
    dlsys train --storage hdd --loader-workers 4 --prefetch 8   (a real loader; IO waits in virtual time)

``--sweep batch`` runs the large-batch study (dlsys.experiments.large_batch: batch 32 ..
8,192 under four learning-rate rules, LARS and LAMB, sharp vs flat minima, time to
accuracy) with a progress bar, writes its record to ``--out`` (default out/large_batch.json,
untracked: the tracked cache the app and the lessons read, results/large_batch.json, is
rewritten only when named), and prints the accuracy table. Its settings are the study's own; the other options do not apply.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from .. import schedule
from ..comm.backends import BACKENDS
from ..compress.methods import COMPRESSORS
from ..experiments import large_batch, train
from ..experiments import schedule as schedule_experiments
from ..learn.task import DATASETS, INPUT_FEATURES, MODELS, OPTIMIZERS
from ..machine.net import NODE_PRESETS
from ..machine.storage import MAX_LOADER_WORKERS, STORAGE_PRESETS, IOModel
from ..train import STRATEGIES, TrainConfig
from ..train.strategies import CONFIG_OPTIONS, OPTIONS, taking
from ..units import format_bytes, format_seconds
from .compress import add_method_options, compression_from, method_options_given
from .options import (
    CHECKERS,
    MAX_RANKS,
    Checked,
    add_trace_flags,
    any_case,
    given_flags,
    integer,
    link,
    number,
    output_file,
    output_path,
    pair,
    print_table,
    refuse_unused,
    save_trace,
    trace_row,
)
from .schedule import add_schedule_options, given_options, policy_options

DECODE_S_PER_SAMPLE = 10e-6  # decoding an 8x8 or 16x16 image: microseconds (the model's default: an ImageNet JPEG's)
HISTOGRAM_WIDTH = 40  # characters of the longest bar
MAX_WIDTH = 4096  # MLP hidden width: 4096 x 4096 float64 weights are 128 MiB per copy
MAX_EPOCHS = 10_000
DEFAULT_SWEEP_OUT = "out/large_batch.json"  # untracked (.gitignore): never the tracked cache unless named
SWEEP_DESTS = ("sweep", "quick", "out", "backend")  # what --sweep batch reads; the study fixes the rest
STRATEGY_OPTIONS = {**OPTIONS, **CONFIG_OPTIONS}  # every strategy option, each declared once in dlsys.train.strategies
# a strategy option's kind -> its flag's argparse keywords ("object" options have flags of their own below)
FLAG_KINDS = {
    "integer": lambda o: dict(action=Checked, check=CHECKERS["integer"](o)),
    "pair": lambda o: dict(
        action=Checked, metavar="WORKER:STEP", check=pair(integer(0, MAX_RANKS - 1), integer(0, 2**31), "WORKER:STEP")
    ),
    "output": lambda o: dict(action=Checked, metavar="PATH", check=output_path),
    "path": lambda o: dict(metavar="PATH"),
    "bool": lambda o: dict(action="store_const", const=True),
    "choice": lambda o: dict(type=any_case(OPTIMIZERS), choices=OPTIMIZERS),  # the one choice: --optimizer
}
# the run's other flags: flag -> (checker, default, help)
RUN_FLAGS = {
    "--hidden": (integer(1, MAX_WIDTH), [64, 64], f"MLP hidden widths, each 1..{MAX_WIDTH} (default 64 64)"),
    "--workers": (integer(1, MAX_RANKS), 4, "workers (pipeline stages for model-parallel); default 4"),
    "--epochs": (integer(1, MAX_EPOCHS), 10, None),
    "--batch-size": (integer(1, 2**16), 32, "samples per worker per step (default 32)"),
    "--lr": (number(0, low_open=True), 0.1, "learning rate for the global batch (default 0.1)"),
    "--momentum": (number(0, 1), 0.9, None),
    "--weight-decay": (number(0), 0.0, None),
    "--trust-coefficient": (number(0, low_open=True), 0.001, "LARS's eta (default 0.001, You et al. 2017)"),
    "--warmup-start-lr": (number(0), 0.0, None),
    "--decode-s": (
        number(0),
        DECODE_S_PER_SAMPLE,
        f"loader: seconds to decode one sample on the node (default {DECODE_S_PER_SAMPLE:g}: a small image)",
    ),
    "--seed": (integer(0, 2**63 - 1), 0, None),
    "--loader-workers": (
        integer(0, MAX_LOADER_WORKERS),
        None,
        f"load each worker's batches with this many loader processes, 0..{MAX_LOADER_WORKERS} in all "
        "(0: in the worker itself; default 0 once --prefetch or --storage is given)",
    ),
    "--prefetch": (integer(1, 1 << 16), None, "batches the loader's queue may hold, 1..65536 (default 2)"),
}
# flag -> (registry, default, help): a name of the registry, in any case
NAMED_FLAGS = {
    "--strategy": (STRATEGIES, "allreduce", None),
    "--model": (MODELS, "mlp", None),
    "--dataset": (DATASETS, "digits", None),
    "--node": (NODE_PRESETS, "laptop-cpu", None),
    "--backend": (BACKENDS, "threads", None),
    "--dtype": (("float32", "float64"), "float32", None),
    "--compress": (COMPRESSORS, None, f"compress the gradients: {', '.join(COMPRESSORS)} (options below)"),
    "--schedule": (
        schedule.POLICIES,
        None,
        f"overlap backward with communication: {', '.join(schedule.POLICIES)} (allreduce or ps-bsp; options below)",
    ),
    "--storage": (STORAGE_PRESETS, None, "where the samples are read from, charged in virtual time (default nvme)"),
}


def add_commands(subparsers) -> None:
    """Register ``train`` on the ``dlsys`` argparse subparsers."""
    p = subparsers.add_parser(
        "train",
        help="train a numpy model with a distributed strategy (virtual time)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag, (names, default, text) in NAMED_FLAGS.items():
        metavar = {"--compress": "METHOD", "--schedule": "POLICY"}.get(flag)
        p.add_argument(flag, type=any_case(names), choices=list(names), default=default, metavar=metavar, help=text)
    for flag, (check, default, text) in RUN_FLAGS.items():
        p.add_argument(
            flag, action=Checked, check=check, default=default, help=text, nargs="+" if flag == "--hidden" else None
        )
    p.add_argument(
        "--link", action=Checked, check=link, default="tcp-10gbe", help="a link preset or a bandwidth, e.g. 10Gbps"
    )
    p.add_argument(
        "--straggler",
        action=Checked,
        metavar="WORKER:FACTOR",
        check=pair(integer(0, MAX_RANKS - 1), number(0, low_open=True), "WORKER:FACTOR"),
        help="make worker WORKER (0-based) FACTOR times slower, e.g. 3:4",
    )
    add_strategy_options(p)
    add_method_options(p)
    add_schedule_options(p)
    add_output_flags(p)
    p.set_defaults(func=cmd_train, parser=p)


def add_strategy_options(p) -> None:
    """One flag per strategy option (``dlsys.train.strategies``), its help naming who takes it."""
    for option in STRATEGY_OPTIONS.values():
        if option.kind != "object":
            takers = ", ".join(taking(option.name))
            default = "" if option.default in (None, False) else f" (default {option.default})"
            p.add_argument(
                option.flag,
                dest=option.name,
                help=f"{takers}: {option.help}{default}",
                **FLAG_KINDS[option.kind](option),
            )


def add_output_flags(p) -> None:
    """--trace, --json and the large-batch study's --sweep, --quick, --out."""
    add_trace_flags(p)
    p.add_argument("--sweep", choices=["batch"], help="run the large-batch study (minutes) and cache it")
    p.add_argument("--quick", action="store_true", help="--sweep: the small study on the 8x8 digits (seconds)")
    p.add_argument(
        "--out",
        metavar="PATH",
        action=Checked,
        check=output_file,
        help="--sweep: where to write the record (default out/large_batch.json; with --quick nothing "
        "is written unless given; the app's cache: results/large_batch.json)",
    )


def histogram_lines(histogram: dict) -> list[str]:
    """One text bar per staleness value; long tails are bucketed into 10 ranges."""
    keys = sorted(histogram)
    if len(keys) > 10:
        width = -(-(keys[-1] + 1) // 10)
        buckets: dict = {}
        for k in keys:
            lo = k // width * width
            buckets[f"{lo}-{lo + width - 1}"] = buckets.get(f"{lo}-{lo + width - 1}", 0) + histogram[k]
    else:
        buckets = {str(k): histogram[k] for k in keys}
    top = max(buckets.values(), default=1)
    return [f"{k:>8} clocks  {'#' * max(1, round(HISTOGRAM_WIDTH * v / top))} {v}" for k, v in buckets.items()]


def options_given(args) -> dict:
    """Each strategy option as the flags give it (None if not given)."""
    given = {name: getattr(args, name) for name, o in STRATEGY_OPTIONS.items() if o.kind != "object"}
    return given | {"compression": args.compress, "io": loader_given(args) or None}


def refuse_options(args) -> None:
    """An option --strategy does not take is refused by its flag, with the strategies that take it."""
    for option, value in options_given(args).items():
        if value is not None and option not in STRATEGIES[args.strategy].options:
            flag = STRATEGY_OPTIONS[option].flag
            raise ValueError(f"{flag}: need --strategy {' or '.join(taking(option))}, got {args.strategy}")


def check_ranks(args) -> None:
    """What only the options together decide, named by option before any rank starts: the
    ranks fit the backend, and --straggler and --fail name one of the workers."""
    limit = min(BACKENDS[args.backend].max_ranks, MAX_RANKS)
    servers = STRATEGIES[args.strategy].first_worker(args.servers)  # servers are the ranks before worker 0
    if servers:
        if args.workers + servers > limit:
            raise ValueError(
                f"--workers + --servers must be at most {limit} on the {args.backend} backend, "
                f"got {args.workers} + {servers}"
            )
    elif args.workers > limit:
        raise ValueError(
            f"--workers must be an integer in 1..{limit} on the {args.backend} backend, got {args.workers}"
        )
    if args.loader_workers is not None and args.loader_workers * args.workers > MAX_LOADER_WORKERS:
        raise ValueError(
            f"--loader-workers must be an integer in 0..{MAX_LOADER_WORKERS // args.workers} with "
            f"--workers {args.workers} (at most {MAX_LOADER_WORKERS} loader processes in all), "
            f"got {args.loader_workers}"
        )
    for option, value in (("--straggler", args.straggler), ("--fail", args.fail)):
        if value is not None and value[0] >= args.workers:
            raise ValueError(
                f"{option} WORKER must be an integer in 0..{args.workers - 1} "
                f"(--workers {args.workers}), got {value[0]}"
            )


def cmd_sweep(args) -> int:
    """The large-batch study, run cold, cached, and summarized as accuracy per batch and rule."""
    study = large_batch.QUICK if args.quick else large_batch.Study()
    out = args.out or (None if args.quick else DEFAULT_SWEEP_OUT)
    record = large_batch.large_batch_study(study, out, progress=True, refresh=True, backend=args.backend)
    sweep = record["sweep"]
    batches = sorted({r["batch"] for r in sweep})
    accuracy = {(r["rule"], r["batch"]): r["test_accuracy"] for r in sweep}
    print_table(
        [(rule, "  ".join(f"{accuracy[rule, b]:6.1%}" for b in batches)) for rule in large_batch.RULES],
        "test accuracy at global batch " + "  ".join(f"{b:>6}" for b in batches),
    )
    print_table(
        [(f"{r['optimizer']} at {r['batch']}", f"{r['test_accuracy']:.1%}") for r in record["optimizers"]],
        "large-batch optimizers",
    )
    shape = record["landscape"]
    print_table([(shape[w], f"{shape['sharpness'][w]:.3g}") for w in ("small", "large")], "sharpness")
    if out:
        print(f"cached: {out}")
    return 0


def cmd_train(args) -> int:
    if args.sweep:
        refuse_unused(given_flags(args.parser, args, SWEEP_DESTS), "train --sweep batch (the large-batch study)")
        return cmd_sweep(args)
    if args.quick or args.out:
        raise ValueError("--quick and --out apply to --sweep batch only")
    refuse_options(args)
    if not args.schedule:
        refuse_unused(
            {schedule.OPTIONS[name][1].flag: v for name, v in given_options(args).items()},
            "train without --schedule POLICY",
        )
    check_ranks(args)
    if args.schedule:
        return train_scheduled(args)
    if (args.warmup_epochs or 0) > args.epochs:
        raise ValueError(f"--warmup-epochs must be an integer in 0..{args.epochs} (--epochs), got {args.warmup_epochs}")
    given = {name: getattr(args, name) for name in CONFIG_OPTIONS}
    config = config_of(
        args,
        weight_decay=args.weight_decay,
        trust_coefficient=args.trust_coefficient,
        warmup_start_lr=args.warmup_start_lr,
        **{k: v for k, v in given.items() if v is not None},
    )
    compression = compression_from(args, args.compress) if args.compress else None
    if compression is None and (method_options_given(args) or args.memory):
        raise ValueError("the compression options (--ratio, --bits, ...) need --compress METHOD")
    options = {k: v for k, v in options_given(args).items() if k in OPTIONS}
    record = train(
        args.strategy,
        config,
        args.workers,
        backend=args.backend,
        link=args.link,
        node=args.node,
        straggler=args.straggler,
        progress=not args.json,
        **options | {"compression": compression, "io": io_model(args, config)},
    )
    save_trace(args, record)
    steps: dict = {}
    for row in record["losses"]:
        steps[row["rank"]] = steps.get(row["rank"], 0) + 1
    summary = {k: v for k, v in record.items() if k not in ("params", "losses", "reads")}
    summary["steps_per_rank"] = steps
    if args.json:
        print(json.dumps(summary))
        return 0
    print_table(summary_rows(args, config, record, steps))
    print("staleness histogram (reads per staleness)")
    for line in histogram_lines(record["staleness_histogram"]):
        print(line)
    if args.trace:
        print(f"trace: {args.trace} (open in https://ui.perfetto.dev)")
    return 0


def config_of(args, **given) -> TrainConfig:
    """The TrainConfig of the flags --model .. --dtype, and ``given``'s fields."""
    return TrainConfig(
        args.model,
        tuple(args.hidden),
        args.dataset,
        args.epochs,
        args.batch_size,
        args.lr,
        args.momentum,
        args.seed,
        args.dtype,
        **given,
    )


def summary_rows(args, config: TrainConfig, record: dict, steps: dict) -> list:
    """The table ``dlsys train`` prints: the run, its accuracy and costs, what compression and IO did."""
    servers = STRATEGIES[args.strategy].first_worker(args.servers)
    rows = [
        ("strategy", f"{args.strategy} on {args.workers} workers" + (f" + {servers} server(s)" if servers else "")),
        (
            "model",
            f"{args.model} {config.hidden if args.model == 'mlp' else ''} on {args.dataset}, "
            f"{args.epochs} epochs, batch {args.batch_size} per worker",
        ),
        ("test accuracy", f"{record['test_accuracy']:.2%}"),
        ("virtual time", f"{record['virtual_time_s'] * 1e3:.3f} ms ({args.link}, {args.node})"),
        ("bytes moved", f"{record['bytes_moved'] / 1e6:.3f} MB in {record['messages']} messages"),
        ("steps per rank", ", ".join(f"rank {r}: {n}" for r, n in sorted(steps.items()))),
        ("max staleness", f"{record['max_staleness']} clocks"),
        ("wall time here", f"{record['wall_time_s']:.2f} s ({args.backend} backend)"),
    ]
    if "compression" in record:
        rows += [
            (
                "compression",
                f"{record['compression']} {record['compression_options'] or ''}: {record['compression_ratio']:.1f}x "
                f"smaller payloads, {format_bytes(record['bytes_per_step'])} on the wire per step",
            ),
            (
                "compress / decode",
                f"{format_seconds(record['compress_s'])} / {format_seconds(record['decompress_s'])} virtual, all ranks",
            ),
        ]
    if "io_wait_s" in record:
        rows.append(
            (
                "IO wait",
                f"{format_seconds(record['io_wait_s'])} of worker 0, {record['io_wait_fraction']:.0%} "
                f"of the run ({record['storage']}, {record['loader_workers']} loader workers, queue of "
                f"{record['prefetch']}; the loader delivers a batch per {format_seconds(record['loader_step_s'])})",
            )
        )
    if record.get("failed"):
        rows.append(
            ("failed workers", ", ".join(f"worker {f['worker']} at clock {f['clock']}" for f in record["failed"]))
        )
    return rows


def loader_given(args) -> bool:
    return any(v is not None for v in (args.loader_workers, args.prefetch, args.storage))


def io_model(args, config: TrainConfig) -> IOModel | None:
    """The loader of --loader-workers, --prefetch, --storage and --decode-s (None if none
    of the first three is given): samples of the data set's own size."""
    if not loader_given(args):
        return None
    sample_nbytes = INPUT_FEATURES[config.dataset] * np.dtype(config.dtype).itemsize
    return IOModel(
        args.storage or "nvme",
        args.loader_workers or 0,
        args.prefetch or 2,
        config.batch_size,
        sample_nbytes,
        args.decode_s,
    )


def train_scheduled(args) -> int:
    """``--schedule``: the same training, its gradients sent by a scheduling policy."""
    if args.strategy not in ("allreduce", "ps-bsp"):
        raise ValueError(f"--schedule: needs --strategy allreduce or ps-bsp, got {args.strategy}")
    for option, value in (
        ("--compress", args.compress),
        ("--straggler", args.straggler),
        ("--fail", args.fail),
        ("--checkpoint", args.checkpoint),
        ("--resume", args.resume),
        ("--loader-workers, --prefetch, --storage", loader_given(args)),
    ):
        if value:
            raise ValueError(f"{option}: not modelled together with --schedule")
    config = config_of(args)
    if config.model != "mlp" or config.dataset != "digits":
        raise ValueError("--schedule: trains the digits MLP (--model mlp --dataset digits)")
    record = schedule_experiments.train_schedule(
        args.schedule,
        config,
        args.workers,
        "ps" if args.strategy == "ps-bsp" else "allreduce",
        args.link,
        args.node,
        args.backend,
        policy_options(args, args.schedule),
    )
    save_trace(args, record)
    summary = {k: v for k, v in record.items() if k not in ("params", "losses")}
    if args.json:
        print(json.dumps(summary))
        return 0
    print_table(
        [
            ("strategy", f"{args.strategy} on {args.workers} workers, scheduled by {record['describe']}"),
            ("test accuracy", f"{record['test_accuracy']:.2%}"),
            (
                "iteration",
                f"{format_seconds(record['iteration_s'])} (compute alone {format_seconds(record['compute_s'])})",
            ),
            ("overlap", f"{record['overlap']:.0%} of worker 0's sending hidden behind its compute"),
            ("virtual time", f"{format_seconds(record['virtual_time_s'])} ({args.link}, {args.node})"),
        ]
        + trace_row(args)
    )
    return 0
