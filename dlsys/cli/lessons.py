"""``dlsys lessons build|check``: the lessons as executed notebooks, and the student exercise notebooks.

dlsys lessons build              # notebooks/NN_name.ipynb (executed) and notebooks/exercises/
dlsys lessons build --only 03    # one lesson
dlsys lessons build --force      # overwrite notebooks edited since the last build
dlsys lessons build --exercises  # only the student exercise notebooks (quick)
dlsys lessons check              # exit 1 if a notebook's cells differ from its script (CI)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..exercises import REPO_ROOT
from .options import Checked, output_folder


def lesson_prefix(text: str) -> str:
    """``--only``'s checker: a prefix of at least one lesson's file name."""
    from ..grading import notebooks

    names = [path.name for path in notebooks.lessons()]
    if not any(name.startswith(text) for name in names):
        raise argparse.ArgumentTypeError(f"no lesson starts with {text!r}; the lessons: {', '.join(names)}")
    return text


def cmd_build(args) -> int:
    from ..grading import notebooks  # jupytext, nbclient and a kernel: the teach extra

    try:
        written = notebooks.build(Path(args.out), args.only, lessons_too=not args.exercises, force=args.force)
    except FileExistsError as exc:
        print(f"dlsys lessons build: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"{path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


def cmd_check(args) -> int:
    from ..grading import notebooks

    problems = notebooks.out_of_sync(Path(args.out))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("rebuild them: dlsys lessons build (or make notebooks)", file=sys.stderr)
        return 1
    print(f"{len(notebooks.lessons())} lesson notebooks match their scripts")
    return 0


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "lessons",
        help="build the lesson notebooks, or check they match the scripts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="lessons_command", required=True)
    build = sub.add_parser("build", help="execute every lesson into notebooks/, write the student exercise notebooks")
    build.add_argument(
        "--only",
        action="append",
        metavar="PREFIX",
        type=lesson_prefix,
        help="lessons whose file names start so (repeatable)",
    )
    build.add_argument("--force", action="store_true", help="overwrite notebooks edited since the last build")
    build.add_argument("--exercises", action="store_true", help="only the student exercise notebooks (no kernel)")
    build.set_defaults(func=cmd_build)
    check = sub.add_parser("check", help="exit 1 if a notebook's cells differ from its lesson script")
    check.set_defaults(func=cmd_check)
    build.add_argument(
        "--out",
        action=Checked,
        check=output_folder,
        default=str(REPO_ROOT / "notebooks"),
        help="default: notebooks/ of this checkout",
    )
    check.add_argument("--out", default=str(REPO_ROOT / "notebooks"), help="default: notebooks/ of this checkout")
