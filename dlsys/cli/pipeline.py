"""``dlsys pipeline``: one step of a pipeline schedule on the emulator, its bubble and memory.

    dlsys pipeline --schedule 1f1b|gpipe|interleaved|zb-h1 --stages P --microbatches M [--chunks V] [--link PRESET]

Runs ``dlsys.experiments.pipeline.pipeline_schedule`` (the small transformer cut into P x V
chunks; free communication unless --link names a preset) and prints each stage's measured
bubble beside the schedule's closed form and its peak activation bytes (B = byte).
"""

from __future__ import annotations

import argparse

from ..train.pipeline import SCHEDULES
from .options import Checked, integer


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="a pipeline schedule's bubble and activation memory (emulated)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--schedule", default="1f1b", choices=list(SCHEDULES))
    p.add_argument("--stages", default=4, action=Checked, check=integer(2, 64), help="pipeline degree p")
    p.add_argument("--microbatches", default=8, action=Checked, check=integer(1, 256), help="micro-batches m")
    p.add_argument("--chunks", default=1, action=Checked, check=integer(1, 16), help="interleaved: chunks per stage v")
    p.add_argument("--link", default=None, help="a link preset (dlsys presets); default: free communication")
    p.set_defaults(func=cmd_pipeline)


def cmd_pipeline(args) -> int:
    from ..experiments.pipeline import FREE_LINK, pipeline_schedule

    record = pipeline_schedule(args.schedule, args.stages, args.microbatches, args.chunks, args.link or FREE_LINK)
    print(
        f"{args.schedule} on {args.stages} stages, {args.microbatches} micro-batches"
        + (f", {args.chunks} chunks a stage" if args.chunks > 1 else "")
        + f"; link {record['link']}"
    )
    print(f"  bubble formula {record['bubble_latex']} = {record['bubble'][0]['formula']:.4f}   ({record['citation']})")
    print(
        f"  {'stage':>5} {'step (us)':>10} {'idle (us)':>10} {'bubble':>8} {'idle/busy':>9} "
        f"{'in flight':>9} {'peak activations (B)':>21}"
    )
    for bubble, memory in zip(record["bubble"], record["memory"]):
        print(
            f"  {bubble['stage']:>5} {bubble['step_s'] * 1e6:>10.3f} {bubble['idle_s'] * 1e6:>10.3f} "
            f"{bubble['measured']:>8.4f} {bubble['relative']:>9.4f} {memory['in_flight']:>9} "
            f"{memory['activation_peak_nbytes']:>21,}"
        )
    return 0
