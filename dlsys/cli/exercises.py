"""``dlsys exercises list|release DIR|gradescope HW EXERCISE... -o ZIP`` and ``dlsys grade [DIR] [--json results.json]``."""

from __future__ import annotations

import sys
from pathlib import Path

from ..exercises import EXERCISES
from ..grading import gradescope
from ..grading.grader import MEMORY_BYTES, TIMEOUT_S, grade, score_table, write_results_json
from ..grading.isolation import Stopped
from ..grading.release import release
from .options import Checked, integer, number, output_file, output_folder


def cmd_list(args) -> int:
    print(f"{'exercise':<22} {'points':>6}  {'file':<30} {'lesson':<36} task")
    for e in EXERCISES:
        print(f"{e.id:<22} {e.points:>6}  {e.file:<30} {e.lesson:<36} {e.title}")
    print(f"{'total':<22} {sum(e.points for e in EXERCISES):>6}")
    return 0


def cmd_release(args) -> int:
    try:
        written = release(args.dir, force=args.force)
    except FileExistsError as exc:
        print(f"dlsys: error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    print(f"student version written to {args.dir}; grade it with: dlsys grade {args.dir}")
    return 0


def cmd_gradescope(args) -> int:
    try:
        config = gradescope.build(
            args.name, args.exercise, args.output, args.visibility, args.timeout_s, args.memory_mib
        )
    except (RuntimeError, OSError) as exc:
        print(f"dlsys: error: {exc}", file=sys.stderr)
        return 2
    size_kib = Path(args.output).stat().st_size / 1024
    print(
        f"{args.output}: Gradescope autograder for {config['name']} ({size_kib:.0f} KiB, "
        f"{config['points']} points, dlsys {config['commit'][:12]})"
    )
    print(f"exercises: {', '.join(config['exercises'])}")
    print(f"students upload: {', '.join(config['files'])}")
    return 0


def cmd_grade(args) -> int:
    """The failing tests (one line each: why; pytest's full report with --verbose), then the
    score table, last, where the terminal shows it. Exit code 0 only at full score (so CI
    can grade the reference); stopped by SIGTERM or SIGHUP, 128 + the signal, like a shell."""
    # --exercise grades a homework: only those exercises' files need be there
    try:
        results = grade(
            args.dir, args.exercise, args.timeout_s, args.memory_mib << 20, args.jobs, homework=bool(args.exercise)
        )
    except Stopped as exc:  # SIGTERM, SIGHUP: the run's finally blocks have killed its tests by now
        print(f"dlsys grade: {exc}", file=sys.stderr)
        return 128 + exc.signum
    failed = [r for r in results if not r.passed]
    if failed and args.verbose:
        for r in failed:
            print(f"--- FAILED {r.name} ({r.seconds:.1f} s)\n{r.output.strip()}\n")
    elif failed:
        print("failed tests, and why (dlsys grade --verbose shows pytest's full report):")
        for exercise in dict.fromkeys(r.exercise for r in failed):
            print(exercise)
            for r in failed:
                if r.exercise == exercise:
                    print(f"  {r.name.split('::', 1)[1]}: {r.reason}")
        print()
    print(score_table(results))
    if args.json:
        write_results_json(results, args.json)
        print(f"results written to {args.json} (Gradescope format)")
    return 0 if all(r.passed for r in results) else 1


def add_commands(subparsers) -> None:
    """Register ``exercises`` (list, release) and ``grade`` on an argparse subparsers object."""
    ex = subparsers.add_parser("exercises", help="list the graded exercises or release the student version")
    ex_sub = ex.add_subparsers(dest="exercises_command", required=True)
    ex_sub.add_parser("list", help="each exercise: id, points, file, lesson").set_defaults(func=cmd_list)
    rel = ex_sub.add_parser("release", help="write the student version (stubs + graded tests) into DIR")
    rel.add_argument("dir", metavar="DIR", action=Checked, check=output_folder)
    rel.add_argument("--force", action="store_true", help="overwrite files that already exist in DIR")
    rel.set_defaults(func=cmd_release)
    add_gradescope(ex_sub)
    add_grade(subparsers)


def add_limits(p) -> None:
    """Each test's time and memory limits (``gradescope`` and ``grade``)."""
    p.add_argument(
        "--timeout-s",
        action=Checked,
        check=number(0, 86_400, low_open=True),
        default=TIMEOUT_S,
        help=f"per test, seconds (default {TIMEOUT_S:g})",
    )
    p.add_argument(
        "--memory-mib",
        action=Checked,
        check=integer(64, 1 << 20),
        default=MEMORY_BYTES >> 20,
        help=f"address-space limit per test, MiB (default {MEMORY_BYTES >> 20})",
    )


def add_gradescope(ex_sub) -> None:
    gs = ex_sub.add_parser(
        "gradescope",
        help="write a homework's Gradescope autograder zip (setup.sh, "
        "run_autograder, its tests, a wheel of this dlsys)",
    )
    gs.add_argument("name", metavar="HW_NAME", help="the homework's name, shown to the teacher and in results.json")
    gs.add_argument(
        "exercise",
        metavar="EXERCISE",
        nargs="+",
        choices=[e.id for e in EXERCISES],
        help="the exercises it grades (dlsys exercises list)",
    )
    gs.add_argument(
        "-o",
        "--output",
        metavar="ZIP",
        action=Checked,
        check=output_file,
        default="autograder.zip",
        help="default: autograder.zip",
    )
    gs.add_argument(
        "--visibility",
        choices=gradescope.VISIBILITIES,
        default="visible",
        help="when students see each test's result (Gradescope's setting; default visible)",
    )
    add_limits(gs)
    gs.set_defaults(func=cmd_gradescope)


def add_grade(subparsers) -> None:
    gr = subparsers.add_parser("grade", help="run the graded tests against DIR (default: the reference)")
    gr.add_argument("dir", metavar="DIR", nargs="?", help="the student's files (a released, filled-in directory)")
    gr.add_argument(
        "--json", metavar="FILE", action=Checked, check=output_file, help="write Gradescope's results.json here"
    )
    gr.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="pytest's full report of every failed test (default: one line, why it failed)",
    )
    gr.add_argument(
        "--exercise",
        action="append",
        choices=[e.id for e in EXERCISES],
        help="grade only this exercise (repeatable; default: all)",
    )
    add_limits(gr)
    gr.add_argument(
        "--jobs", action=Checked, check=integer(1, 256), default=None, help="tests run at once (default: CPU count)"
    )
    gr.set_defaults(func=cmd_grade)
