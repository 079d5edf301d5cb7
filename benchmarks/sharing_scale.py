"""Links that messages share, at scale: what the replay costs (docs/performance.md, "Links
that messages share").

    .venv/bin/python benchmarks/sharing_scale.py             # every run below
    .venv/bin/python benchmarks/sharing_scale.py --json out.json
    .venv/bin/python benchmarks/sharing_scale.py --pairs 4 --skip-512   # the 1024 ring, 4 alternating pairs
    .venv/bin/python benchmarks/sharing_scale.py --pairs 3 --write-docs # docs/performance.md's tables

Each run is the command line itself in a fresh process under ``/usr/bin/time -v`` (wall
time with Python's start-up, peak resident set of the run alone):

    dlsys simulate allreduce --algo ring --ranks 1024 --size 60971008 --topology taihulight [--static-shares]
    dlsys simulate allreduce --algo ALGO --ranks 512 --size 60971008 --topology taihulight

(sharing is the TaihuLight's default across supernodes; ``--static-shares`` is the run without.)

Targets (issue 24): with sharing, the 1024-rank ring at most 2x the wall time of the same
run without (same memory budget, --max-memory's default); every all-reduce algorithm at
512 ranks with sharing within a minute. The wall time moves with the machine's load (this
one is shared); CPU time (user + sys) is reported beside it, and ``--pairs`` runs the
1024-rank pair (without, with) several times, alternating, for ratios taken minutes apart
from each other's load.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulate_scale import timed_simulate  # the script's own folder is on sys.path

SIZE = "60971008"  # 60.97 MB in whole float32 blocks of 512 ranks (Rabenseifner halves it exactly)


def measure(algorithm: str, ranks: int, sharing: bool) -> dict:
    """One ``dlsys simulate --json`` in a fresh process: its record plus wall, CPU, RSS."""
    run = timed_simulate(
        ["--algo", algorithm, "--ranks", str(ranks), "--size", SIZE, "--topology", "taihulight"]
        + ["--static-shares"] * (not sharing),
        1800,
    )
    record = run.pop("record")
    return {
        "algorithm": algorithm,
        "ranks": ranks,
        "sharing": sharing,
        **run,
        "launch_wall_s": record["wall_time_s"],
        "virtual_time_s": record["virtual_time_s"],
    }


def measured_tables(pairs: list[tuple[dict, dict]], algorithms: list[dict]) -> dict[str, str]:
    """docs/performance.md's measured blocks (``docs.write_measured``) for what ran, Markdown."""
    from dlsys.course.docs import markdown_table
    from dlsys.units import format_seconds

    def run(r: dict) -> str:
        return (
            f"{format_seconds(r['process_wall_s'])}, {format_seconds(r['cpu_s'])}, {r['peak_rss_bytes'] / 1e6:.0f} MB"
        )

    tables = {}
    if pairs:
        tables["bench.sharing_pairs"] = markdown_table(
            [
                "pair",
                "without sharing: wall, CPU, peak RSS",
                "with sharing: wall, CPU, peak RSS",
                "wall ratio",
                "CPU ratio",
                "memory ratio",
            ],
            [
                [
                    i,
                    run(a),
                    run(b),
                    f"{b['process_wall_s'] / a['process_wall_s']:.2f}x",
                    f"{b['cpu_s'] / a['cpu_s']:.2f}x",
                    f"{b['peak_rss_bytes'] / a['peak_rss_bytes']:.2f}x",
                ]
                for i, (a, b) in enumerate(pairs, 1)
            ],
        )
    if algorithms:
        tables["bench.sharing_algorithms"] = markdown_table(
            ["algorithm", "wall", "CPU", "peak RSS", "virtual time"],
            [
                [
                    r["algorithm"],
                    format_seconds(r["process_wall_s"]),
                    format_seconds(r["cpu_s"]),
                    f"{r['peak_rss_bytes'] / 1e6:.0f} MB",
                    format_seconds(r["virtual_time_s"], 5),
                ]
                for r in algorithms
            ],
        )
    return tables


def main(argv=None) -> int:
    from dlsys import collectives

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="FILE", help="write the rows here")
    parser.add_argument("--skip-1024", action="store_true", help="only the 512-rank runs")
    parser.add_argument("--skip-512", action="store_true", help="only the 1024-rank ring")
    parser.add_argument("--pairs", type=int, default=1, help="1024-rank pairs (without, with sharing), alternating")
    parser.add_argument(
        "--write-docs",
        metavar="FILE",
        nargs="?",
        const=str(Path(__file__).resolve().parents[1] / "docs" / "performance.md"),
        help="write the tables into FILE's measured blocks (default docs/performance.md)",
    )
    args = parser.parse_args(argv)
    if args.pairs < 1:
        raise SystemExit(f"--pairs must be >= 1, got {args.pairs}")
    runs = [] if args.skip_1024 else [("ring", 1024, False), ("ring", 1024, True)] * args.pairs
    runs += [] if args.skip_512 else [(algorithm, 512, True) for algorithm in collectives.ALGORITHMS["allreduce"]]
    print(
        f"{'algorithm':>14} {'ranks':>5} {'sharing':>7} {'wall (s)':>9} {'CPU (s)':>8} {'peak RSS':>9} "
        f"{'virtual time':>13}",
        flush=True,
    )
    rows = []
    for algorithm, ranks, sharing in runs:
        row = measure(algorithm, ranks, sharing)
        rows.append(row)
        print(
            f"{algorithm:>14} {ranks:>5} {str(sharing):>7} {row['process_wall_s']:>9.1f} {row['cpu_s']:>8.1f} "
            f"{row['peak_rss_bytes'] / 1e6:>7.0f} MB {row['virtual_time_s'] * 1e3:>10.3f} ms",
            flush=True,
        )
    for pair in range(0 if args.skip_1024 else args.pairs):
        without, shared = rows[2 * pair], rows[2 * pair + 1]
        print(
            f"1024-rank ring: sharing costs {shared['process_wall_s'] / without['process_wall_s']:.2f}x the wall "
            f"time (target <= 2x), {shared['cpu_s'] / without['cpu_s']:.2f}x the CPU time, "
            f"{shared['peak_rss_bytes'] / without['peak_rss_bytes']:.2f}x the peak memory"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.write_docs:
        from dlsys.course.docs import write_measured

        pairs = [] if args.skip_1024 else [(rows[2 * i], rows[2 * i + 1]) for i in range(args.pairs)]
        command = " ".join(["python benchmarks/sharing_scale.py", *(sys.argv[1:] if argv is None else argv)])
        write_measured(measured_tables(pairs, [r for r in rows if r["ranks"] == 512]), command, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
