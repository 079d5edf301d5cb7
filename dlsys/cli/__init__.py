"""The ``dlsys`` command line: one module per command group, each registering its commands.

    simulate, presets   dlsys.cli.simulate   (one collective in virtual time; the link and node presets)
    schedule            dlsys.cli.schedule   (a scheduling policy on an emulated model, every policy per bandwidth)
    train               dlsys.cli.train      (a real model under a distributed strategy)
    compress            dlsys.cli.compress   (gradient compression: bytes per model, accuracy vs bytes)
    bench               dlsys.cli.bench      (the real data path; the emulator's scale)
    casestudy           dlsys.cli.casestudy  (a paper re-run: Caffe on the Sunway TaihuLight)
    reproduce           dlsys.cli.reproduce  (every published claim: paper vs dlsys, a verdict; docs/ tables)
    exercises, grade    dlsys.cli.exercises  (release the student version, grade it)
    mpirun              dlsys.cli.mpi        (a script on MPI ranks: the mpi backend)
    memory              dlsys.cli.memory     (bytes per rank by kind: DDP, ZeRO, FSDP, TP in closed form)
    pipeline            dlsys.cli.pipeline   (a pipeline schedule's bubble and activation memory, emulated)
    plan                dlsys.cli.plan       (the layout of a large run: DP x TP x PP x ZeRO, step time, memory)

Every option is checked by ``dlsys.cli.options`` before any rank starts.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys

from ..comm import DeadlockError, RankFailed
from .options import join_negative_values

# command -> the module of dlsys.cli that registers it. Running a command imports only its
# module: the others pull in the app's experiments, the notebooks' tools... (0.2 s of a
# `dlsys simulate`); `dlsys --help` imports them all.
COMMANDS = {
    "simulate": "simulate",
    "presets": "simulate",
    "schedule": "schedule",
    "train": "train",
    "compress": "compress",
    "exercises": "exercises",
    "grade": "exercises",
    "lessons": "lessons",
    "bench": "bench",
    "mpirun": "mpi",
    "casestudy": "casestudy",
    "reproduce": "reproduce",
    "memory": "memory",
    "pipeline": "pipeline",
    "plan": "plan",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlsys",
        description="dlsys: distributed deep learning, real data, virtual time.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values()):
        importlib.import_module(f"{__name__}.{module}").add_commands(sub)
    return parser


def main(argv=None) -> int:
    """Run one command; exit code 2 with a one-line message for bad input (an option the
    command does not take included: ``dlsys simulate allreduce: --policy: not an option of
    this command``), 1 if a run failed, 130 (the shell's code for SIGINT) and the one line
    "interrupted" for Ctrl-C, 1 and one line for an output it could not write (a full disk)."""
    argv = join_negative_values(sys.argv[1:] if argv is None else list(argv))
    try:
        args, unknown = build_parser(argv[0] if argv else None).parse_known_args(argv)
    except SystemExit as exc:  # bad options (argparse printed why) or --help: an exit code, not an exit
        return exc.code
    if unknown:
        command = " ".join(["dlsys", *itertools.takewhile(lambda token: not token.startswith("-"), argv)])
        flags = [token.partition("=")[0] for token in unknown if token.startswith("-")] or unknown
        print(f"{command}: {', '.join(flags)}: not an option of this command (see {command} --help)", file=sys.stderr)
        return 2
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
    except OSError as exc:  # a full disk at the end: outputs.write_atomic left the old file whole
        print(
            f"dlsys {args.command}: could not write {exc.filename or 'an output'}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
