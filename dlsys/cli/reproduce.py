"""``dlsys reproduce``: every published claim dlsys teaches, the paper's figure beside ours,
with a verdict (dlsys.course.reproduce).

    dlsys reproduce                       # every claim at full settings (minutes)
    dlsys reproduce --quick               # quick settings (seconds; what CI, the app and docs/ use)
    dlsys reproduce ring-closed-form lars --json
    dlsys reproduce --write-docs          # rewrite every generated table in docs/ from the code
"""

from __future__ import annotations

import json
import sys
import textwrap

from ..course import docs, reproduce

WIDTHS = (24, 12, 30)  # claim, verdict, paper's figure; dlsys's figure takes the rest of the line


def cmd_reproduce(args) -> int:
    if args.write_docs:
        if args.claims or args.json or args.quick:
            raise ValueError(
                "--write-docs rewrites every generated table in docs/ (at quick settings) and takes no "
                "CLAIM, --json or --quick"
            )
        for path in docs.write_docs():
            print(f"rewrote {path}")
        return 0
    names = reproduce.check_names(args.claims)  # before anything runs
    progress = (lambda name: print(f"running {name}...", file=sys.stderr)) if sys.stderr.isatty() else None
    records = reproduce.run_claims(names, args.quick, progress)
    if args.json:
        print(json.dumps(records))
        return 0
    header = ("claim", "verdict", "paper's figure", "dlsys's figure")
    print("  ".join(f"{h:<{w}}" for h, w in zip(header, WIDTHS)) + f"  {header[3]}")
    for r in records:
        cells = (r["claim"], r["verdict"], r["paper_value"])
        print("  ".join(f"{textwrap.shorten(c, w):<{w}}" for c, w in zip(cells, WIDTHS)) + f"  {r['ours']}")
        print(
            textwrap.fill(
                f"{r['paper']}, {r['where']}. Why: {r['why']}", 110, initial_indent="    ", subsequent_indent="    "
            )
        )
        for line in r["lines"]:  # a claim of several lines: each one's verdict, the worst is the claim's
            print(
                textwrap.fill(
                    f"{line['line']}: {line['verdict']}. {line['why']}",
                    110,
                    initial_indent="      - ",
                    subsequent_indent="        ",
                )
            )
    counts = {v: sum(r["verdict"] == v for r in records) for v in reproduce.VERDICTS}
    print(", ".join(f"{n} {v}" for v, n in counts.items()) + f" ({'quick' if args.quick else 'full'} settings)")
    return 0


def add_commands(subparsers) -> None:
    """Register ``reproduce``."""
    p = subparsers.add_parser(
        "reproduce",
        help="every published claim dlsys teaches: paper vs dlsys, with a verdict",
        description=__doc__.split("\n\n")[0].replace("``", ""),
    )
    p.add_argument(
        "claims", nargs="*", metavar="CLAIM", help=f"claims to run (default all): {', '.join(reproduce.CLAIMS)}"
    )
    p.add_argument("--quick", action="store_true", help="quick settings (seconds; the full ones take a minute or so)")
    p.add_argument("--json", action="store_true", help="print one JSON object per claim, in a list")
    p.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite the generated tables of docs/ (<!-- generated: NAME --> blocks) from the code",
    )
    p.set_defaults(func=cmd_reproduce)
