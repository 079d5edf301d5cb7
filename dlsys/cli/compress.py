"""``dlsys compress``: what a gradient compression method does to a model's bytes, and to training.

    dlsys compress --model resnet50 --method dgc [--ratio 0.001] [--node v100] [--json]
    dlsys compress --pareto [--epochs 10] [--workers 4] [--write-cache] [--json]
    dlsys compress --feedback [--write-cache] [--json]

The first reports one iteration's gradients of a model's layer profile: dense fp32 bytes,
encoded bytes and their ratio (DGC at its final sparsity), and the node's time to compress.
The second trains the digits MLP with every method and prints accuracy against bytes.
The third trains it with each biased method with and without error feedback, over seeds
(the runs of ``dlsys reproduce error-feedback``), and prints mean and spread.
``dlsys train --compress METHOD`` takes the same method options.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from ..compress.methods import COMPRESSORS, MEMORIES
from ..experiments import compression as ex
from ..machine.net import NODE_PRESETS
from ..machine.profiles import PROFILES
from ..train import Compression
from ..units import format_bytes, format_seconds
from .options import Checked, add_option, any_case, integer, print_table, refuse_unused


def method_options() -> dict:
    """Every method option, once: its name -> (its ``Option``, the methods that take it),
    from the compressors' own declarations (``Compressor.options``)."""
    found: dict = {}
    for method, cls in COMPRESSORS.items():
        for option in cls.options:
            found.setdefault(option.name, (option, []))[1].append(method)
    return found


# The flags' dests are "compress_<name>" (``dlsys train`` has a --warmup-epochs of its own).
METHOD_OPTIONS = method_options()


def add_method_options(p) -> None:
    """The method options, shared with ``dlsys train --compress``: one flag per Option."""
    for name, (option, methods) in METHOD_OPTIONS.items():
        add_option(p, option, f"compress_{name}", f"{option.help} ({', '.join(methods)})")
    p.add_argument("--memory", choices=list(MEMORIES), help="error feedback (default: the method's paper's)")


def method_options_given(args) -> dict:
    return {
        name: getattr(args, f"compress_{name}")
        for name in METHOD_OPTIONS
        if getattr(args, f"compress_{name}") is not None
    }


def method_flags_given(args) -> dict:
    """Flag -> value of each method option given."""
    return {METHOD_OPTIONS[name][0].flag: value for name, value in method_options_given(args).items()}


def compression_from(args, method: str) -> Compression:
    """The checked Compression the options describe (an option the method lacks is an error)."""
    return Compression(method, tuple(method_options_given(args).items()), args.memory)


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "compress",
        help="gradient compression: bytes per model, accuracy vs bytes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", type=any_case(PROFILES), choices=PROFILES, help="a model's layer profile")
    what.add_argument("--pareto", action="store_true", help="train digits with every method")
    what.add_argument("--feedback", action="store_true", help="train digits with and without error feedback")
    p.add_argument(
        "--method", type=any_case(COMPRESSORS), choices=list(COMPRESSORS), help="--model: the method (default topk)"
    )
    add_method_options(p)
    p.add_argument(
        "--node", type=any_case(NODE_PRESETS), choices=list(NODE_PRESETS), help="--model: who compresses (default v100)"
    )
    p.add_argument("--epochs", action=Checked, check=integer(1, 1000), help="--pareto (default 10)")
    p.add_argument("--workers", action=Checked, check=integer(2, 32), help="--pareto (default 4)")
    p.add_argument("--write-cache", action="store_true", help="--pareto, --feedback: store the rows the app shows")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_compress)


def cmd_compress(args) -> int:
    if args.pareto:
        refuse_unused(
            {"--method": args.method, "--memory": args.memory, "--node": args.node} | method_flags_given(args),
            "--pareto (it trains every method with its paper's settings)",
        )
        return pareto(args)
    if args.feedback:
        refuse_unused(
            {
                "--method": args.method,
                "--memory": args.memory,
                "--node": args.node,
                "--epochs": args.epochs,
                "--workers": args.workers,
            }
            | method_flags_given(args),
            "--feedback (it trains the pinned seeds and settings of the error-feedback claim)",
        )
        return feedback(args)
    refuse_unused(
        {"--epochs": args.epochs, "--workers": args.workers, "--write-cache": args.write_cache or None},
        "--model (they set --pareto's training)",
    )
    args.method, args.node = args.method or "topk", args.node or "v100"
    compression = compression_from(args, args.method)
    table = ex.model_bytes(args.model, args.method, dict(compression.options), args.node)
    if args.json:
        print(json.dumps(table))
        return 0
    print_table(
        [
            (
                "model",
                f"{args.model}: {len(table['layers'])} layers with parameters, "
                f"{sum(r['params'] for r in table['layers']):,} parameters",
            ),
            ("method", f"{args.method} {dict(compression.options) or ''}".strip()),
            ("dense fp32", format_bytes(table["dense_nbytes"])),
            ("encoded", format_bytes(table["encoded_nbytes"])),
            ("ratio", f"{table['ratio']:.1f}x"),
            (
                "compress / decode",
                f"{format_seconds(table['compress_s'])} / {format_seconds(table['decompress_s'])} "
                f"per iteration on {args.node}",
            ),
        ]
    )
    return 0


def pareto(args) -> int:
    args.epochs, args.workers = args.epochs or 10, args.workers or 4
    rows = ex.pareto(
        args.epochs, args.workers, progress=None if args.json else lambda m: print(f"  trained {m}", file=sys.stderr)
    )
    if args.write_cache:
        print(f"wrote {ex.write_pareto_cache(rows)}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows))
        return 0
    print_table(
        [
            (
                r["method"],
                f"{r['test_accuracy']:.2%} accuracy, {format_bytes(r['bytes_per_step'])} per step, "
                f"{r['compression_ratio']:.1f}x, {format_seconds(r['virtual_time_s'])} virtual",
            )
            for r in rows
        ],
        title=f"digits MLP, {args.workers} workers, {args.epochs} epochs (all-reduce)",
    )
    return 0


def feedback(args) -> int:
    rows = ex.feedback_study(progress=None if args.json else lambda s: print(f"  trained {s}", file=sys.stderr))
    if args.write_cache:
        print(f"wrote {ex.write_feedback_cache(rows)}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows))
        return 0
    lines = []
    for epochs in ex.FEEDBACK_EPOCHS:
        for method in ("none", *ex.FEEDBACK_METHODS):
            for feedback in (True, False) if method != "none" else (False,):
                acc = [
                    r["test_accuracy"]
                    for r in rows
                    if (r["method"], r["feedback"], r["epochs"]) == (method, feedback, epochs)
                ]
                label = "dense" if method == "none" else f"{method} {'with' if feedback else 'without'}"
                lines.append(
                    (
                        f"{label}, {epochs} epochs",
                        f"{statistics.mean(acc):.1%} +- {statistics.stdev(acc):.1%} "
                        f"(min {min(acc):.1%}, max {max(acc):.1%})",
                    )
                )
    print_table(
        lines,
        title=f"digits MLP, seeds {', '.join(map(str, ex.FEEDBACK_SEEDS))}: "
        "test accuracy with and without error feedback",
    )
    return 0
