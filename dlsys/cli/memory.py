"""``dlsys memory``: the bytes one rank holds, by kind, for a parallel layout (closed form).

    dlsys memory --params 7.5e9 --ranks 64 --zero 3 [--tp T] [--optimizer adam|sgd|sgd-plain]
                 [--precision mixed|fp32] [--unit-params N [--prefetch]]
                 [--transformer LAYERS:HIDDEN:HEADS:SEQ:BATCH [--sequence-parallel]
                  [--recompute none|selective|full]] [--json]

Parameters, gradients and optimizer state per ZeRO (Rajbhandari et al. 2020, section 5),
activations per Korthikanti et al. 2022 (Table 2) when ``--transformer`` gives the shapes,
communication buffers for ZeRO-3/FSDP's gathered unit. Sizes print in GB (10^9 bytes, the
ZeRO paper's unit) and GiB (2^30 bytes, what a device's memory is sold in); --json gives bytes.
The model is ``dlsys.machine.memory``.
"""

from __future__ import annotations

import argparse
import json

from ..machine.memory import KINDS, OPTIMIZERS, PRECISIONS, RECOMPUTE, Layout, Transformer
from .options import Checked, integer, number, print_table, refuse_unused

MAX = 10**9  # ranks, TP degree: any layout a model can describe


def count(text: str) -> int:
    """A positive whole count such as 125000000 or 7.5e9."""
    value = number(0, low_open=True)(text)
    if value != int(value):
        raise ValueError(f"must be a positive whole number, got {text}")
    return int(value)


def transformer(text: str) -> Transformer:
    parts = text.split(":")
    if len(parts) != len(Transformer._fields):
        raise ValueError(f"must be LAYERS:HIDDEN:HEADS:SEQ:BATCH (positive integers), got {text}")
    return Transformer(*(integer(1, MAX)(part) for part in parts))


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "memory",
        help="bytes per rank by kind: DDP, ZeRO 0..3, FSDP, TP (closed form)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--params", required=True, action=Checked, check=count, help="parameters Psi (e.g. 7.5e9)")
    p.add_argument(
        "--ranks", required=True, action=Checked, check=integer(1, MAX), help="world size = data-parallel copies x --tp"
    )
    p.add_argument("--zero", default=0, action=Checked, check=integer(0, 3), help="ZeRO stage 0..3 (0 = DDP)")
    p.add_argument("--tp", default=1, action=Checked, check=integer(1, MAX), help="tensor-parallel degree")
    p.add_argument("--optimizer", default="adam", choices=OPTIMIZERS, help="sgd = with momentum")
    p.add_argument("--precision", default="mixed", choices=PRECISIONS, help="mixed: 2+2+K bytes, fp32: 4+4+K'")
    p.add_argument(
        "--unit-params",
        default=0,
        action=Checked,
        check=count,
        help="--zero 3: parameters gathered at once (FSDP's unit, the largest layer)",
    )
    p.add_argument("--prefetch", action="store_true", help="--unit-params: gather the next unit early")
    p.add_argument(
        "--transformer",
        action=Checked,
        check=transformer,
        help="LAYERS:HIDDEN:HEADS:SEQ:BATCH, per rank micro-batch: count activations",
    )
    p.add_argument("--sequence-parallel", action="store_true", help="--transformer: Korthikanti's SP")
    p.add_argument("--recompute", default="none", choices=RECOMPUTE, help="--transformer: activation recomputation")
    p.add_argument("--json", action="store_true", help="print one JSON object (bytes)")
    p.set_defaults(func=cmd_memory)


def cmd_memory(args) -> int:
    if args.prefetch and not args.unit_params:
        raise ValueError("--prefetch needs --unit-params (the unit it gathers)")
    if args.transformer is None:
        refuse_unused(
            {
                "--sequence-parallel": args.sequence_parallel or None,
                "--recompute": None if args.recompute == "none" else args.recompute,
            },
            "dlsys memory without --transformer (they shape the activations)",
        )
    layout = Layout(
        args.params,
        args.ranks,
        args.zero,
        args.tp,
        args.optimizer,
        args.precision,
        unit_params=args.unit_params,
        prefetch=args.prefetch,
        model=args.transformer,
        sequence_parallel=args.sequence_parallel,
        recompute=args.recompute,
    )
    nbytes = layout.bytes()
    if args.json:
        print(
            json.dumps(
                {
                    "layout": {
                        "params": layout.params,
                        "ranks": layout.ranks,
                        "dp": layout.dp,
                        "zero": layout.zero,
                        "tp": layout.tp,
                        "optimizer": layout.optimizer,
                        "precision": layout.precision,
                        "unit_params": layout.unit_params,
                    },
                    "bytes": nbytes,
                    "total_bytes": layout.total(),
                }
            )
        )
        return 0
    rows = [(kind, f"{nbytes[kind] / 1e9:12.3f} GB  {nbytes[kind] / 2**30:12.3f} GiB") for kind in KINDS]
    rows.append(("total", f"{layout.total() / 1e9:12.3f} GB  {layout.total() / 2**30:12.3f} GiB"))
    print_table(
        rows,
        f"one rank of {layout.ranks} (data-parallel {layout.dp} x tensor-parallel {layout.tp}), "
        f"ZeRO stage {layout.zero}, {layout.optimizer}, {layout.precision} precision, "
        f"{layout.params:,} parameters"
        + ("" if args.transformer else "; activations not counted (give --transformer)"),
    )
    return 0
