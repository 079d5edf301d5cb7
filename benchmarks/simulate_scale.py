"""``dlsys simulate`` at scale, within its memory budget: wall time, peak memory, messages
per second (the figures of docs/performance.md, "Any size within a budget").

    .venv/bin/python benchmarks/simulate_scale.py            # the two target runs
    .venv/bin/python benchmarks/simulate_scale.py --json out.json
    .venv/bin/python benchmarks/simulate_scale.py --write-docs   # docs/performance.md's table

Each run is the command line itself in a fresh process under ``/usr/bin/time -v`` (so the
wall time includes Python's start-up and the peak resident set is the run's own):

    dlsys simulate allreduce --algo ring --ranks 512 --size 60.97MB --link sw26010
    dlsys simulate allreduce --algo ring --ranks 1024 --size 244MB --link sw26010

Targets (issue 10): <= 5 s and <= 1 GB at 512 ranks, <= 12 s at 1024 ranks. The wall time
moves with the machine's load (this one is shared), the virtual time does not; the CPU
time (user + sys) is reported beside it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

RUNS = [(512, "60.97MB", 5.0), (1024, "244MB", 12.0)]
MAX_RSS_BYTES = 10**9


def timed_simulate(args: list[str], timeout_s: float) -> dict:
    """``dlsys simulate allreduce ARGS --json`` in a fresh process under /usr/bin/time -v:
    its record plus the process's wall, CPU and peak RSS (sharing_scale.py uses it too)."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "dlsys.cli", "simulate", "allreduce", *args, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")

    def field(name: str) -> str:
        return re.search(rf"{re.escape(name)}: (.+)", out.stderr).group(1).strip()

    minutes, seconds = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")[-2:]
    return {
        "record": json.loads(out.stdout),
        "process_wall_s": 60 * int(minutes) + float(seconds),
        "cpu_s": float(field("User time (seconds)")) + float(field("System time (seconds)")),
        "peak_rss_bytes": 1024 * int(field("Maximum resident set size (kbytes)")),
    }


def measure(ranks: int, size: str) -> dict:
    """One ring at ``ranks`` ranks: its record plus wall, CPU, RSS."""
    run = timed_simulate(["--algo", "ring", "--ranks", str(ranks), "--size", size, "--link", "sw26010"], 900)
    record, messages = run.pop("record"), 2 * ranks * (ranks - 1)
    return {
        "ranks": ranks,
        "size": size,
        "messages": messages,
        **run,
        "launch_wall_s": record["wall_time_s"],
        "messages_per_s": messages / record["wall_time_s"],
        "virtual_time_s": record["virtual_time_s"],
        "closed_form_s": record["closed_form_s"],
        "real_count": record["real_count"],
        "scale_min": record["scale_min"],
        "scale_max": record["scale_max"],
    }


def measured_table(rows: list[dict]) -> str:
    """docs/performance.md's measured block ``bench.simulate_scale``, Markdown."""
    from dlsys.course.docs import markdown_table
    from dlsys.units import format_seconds

    return markdown_table(
        ["command", "messages", "wall (target)", "CPU (user+sys)", "peak RSS", "messages / wall s", "virtual time"],
        [
            [
                f"`--ranks {r['ranks']} --size {r['size']}`",
                f"{r['messages']:,}",
                f"{format_seconds(r['process_wall_s'])} ({format_seconds(r['target_wall_s'])})",
                format_seconds(r["cpu_s"]),
                f"{r['peak_rss_bytes'] / 1e6:.0f} MB",
                f"{r['messages_per_s'] / 1e3:.0f}k",
                format_seconds(r["virtual_time_s"], 6),
            ]
            for r in rows
        ],
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="FILE", help="write the rows here")
    parser.add_argument(
        "--write-docs",
        metavar="FILE",
        nargs="?",
        const=str(Path(__file__).resolve().parents[1] / "docs" / "performance.md"),
        help="write the table into FILE's measured block (default docs/performance.md)",
    )
    args = parser.parse_args(argv)
    rows = []
    print(
        f"{'ranks':>5} {'size':>8} {'messages':>10} {'wall (s)':>9} {'target':>7} {'CPU (s)':>8} "
        f"{'peak RSS':>9} {'messages/s':>11} {'virtual time':>13}  real buffers"
    )
    for ranks, size, target_s in RUNS:
        r = measure(ranks, size)
        rows.append(r | {"target_wall_s": target_s})
        print(
            f"{ranks:>5} {size:>8} {r['messages']:>10,} {r['process_wall_s']:>9.2f} {target_s:>7.0f} "
            f"{r['cpu_s']:>8.2f} {r['peak_rss_bytes'] / 1e6:>7.0f} MB {r['messages_per_s']:>11,.0f} "
            f"{r['virtual_time_s'] * 1e3:>10.3f} ms  {r['real_count']} real elements per rank, each for "
            f"{r['scale_min']:,}..{r['scale_max']:,}"
        )
        if r["peak_rss_bytes"] > MAX_RSS_BYTES:
            print(f"  peak memory above the {MAX_RSS_BYTES / 1e9:g} GB target", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.write_docs:
        from dlsys.course.docs import write_measured

        command = " ".join(["python benchmarks/simulate_scale.py", *(sys.argv[1:] if argv is None else argv)])
        write_measured({"bench.simulate_scale": measured_table(rows)}, command, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
