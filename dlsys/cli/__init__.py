"""The ``dlsys`` command line: one module per command group, each registering its commands.

    simulate, presets   dlsys.cli.simulate   (one collective in virtual time; the link and node presets)
    train               dlsys.cli.train      (a real model under a distributed strategy)
    compress            dlsys.cli.compress   (gradient compression: bytes per model, accuracy vs bytes)
    bench               dlsys.cli.bench      (the real data path; the emulator's scale)
    casestudy           dlsys.cli.casestudy  (a paper re-run: Caffe on the Sunway TaihuLight)
    exercises, grade    dlsys.cli.exercises  (release the student version, grade it)

Every option is checked by ``dlsys.cli.common`` before any rank starts.
"""

from __future__ import annotations

import argparse
import sys

from ..comm import DeadlockError, RankFailed
from . import bench, casestudy, compress, exercises, lessons, simulate, train
from .common import join_negative_values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlsys", description="dlsys: distributed deep learning, real data, virtual time.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (simulate, train, compress, exercises, lessons, bench, casestudy):
        group.add_commands(sub)
    return parser


def main(argv=None) -> int:
    """Run one command; exit code 2 with a one-line message for bad input, 1 if a run failed,
    130 (the shell's code for SIGINT) and the one line "interrupted" for Ctrl-C."""
    argv = join_negative_values(sys.argv[1:] if argv is None else list(argv))
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # bad options (argparse printed why) or --help: an exit code, not an exit
        return exc.code
    try:
        return args.func(args)
    except RankFailed as exc:
        print(f"dlsys {args.command}: the run failed: rank {exc.rank}: {exc.summary}", file=sys.stderr)
        return 1
    except (DeadlockError, TimeoutError) as exc:  # their message names every rank and what it waits for
        print(f"dlsys {args.command}: the run failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the runs' own finally blocks have stopped their ranks by now
        # on a terminal, a progress bar may be half drawn: start a line of our own
        print("\ninterrupted" if sys.stderr.isatty() else "interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError) as exc:
        print(f"dlsys: error: {exc}", file=sys.stderr)
        return 2
