"""``dlsys bench allreduce|latency|emulate``: the real data path and the emulator's scale
(the benchmarks themselves are ``dlsys.experiments.wallclock``)."""

from __future__ import annotations

import json

from .. import collectives
from ..comm.backends import MAX_PROCESS_RANKS
from ..experiments import DEFAULT_MAX_MEMORY_BYTES, emulation, wallclock
from ..machine.net import LINK_PRESETS
from ..units import format_bytes, format_rate, format_seconds
from .options import MAX_RANKS, Checked, integer, link, print_table, real_buffers, size


def _report(args, rec: dict, title: str, rows) -> int:
    """``--json``: the record as one JSON object; otherwise the title and a table of rows."""
    if args.json:
        print(json.dumps(rec))
    else:
        print_table(rows, title)
    return 0


def cmd_allreduce(args) -> int:
    rec = wallclock.allreduce_bench(
        args.ranks,
        args.size,
        args.algo,
        args.repeats,
        args.warmup,
        buffers=args.buffers,
        max_memory_bytes=args.max_memory,
        backend=args.backend,
    )
    if rec["backend"] == "mpi":
        sends = "MPI messages (Isend of a copy)"
    else:
        sends = "lent sends (comm.alloc buffers)" if rec["buffers"] == "alloc" else "copied sends (plain buffers)"
    title = (
        f"all-reduce ({rec['algorithm']}), {rec['ranks']} ranks, {format_bytes(rec['nbytes'])} float32, "
        f"{rec['backend']} backend, {sends}, median of {rec['repeats']} after {rec['warmup']} warm-up"
    )
    rows = [
        ("time", format_seconds(rec["wall_time_s"])),
        ("algbw", format_rate(rec["algbw_Bps"]) + "  (n / t)"),
        ("busbw", format_rate(rec["busbw_Bps"]) + "  (algbw * 2(p-1)/p, as nccl-tests)"),
        ("memcpy", format_rate(rec["memcpy_Bps"]) + f"  (numpy copy of {format_bytes(rec['nbytes'])}, same run)"),
        ("busbw/memcpy", f"{rec['ratio_to_memcpy']:.2f}"),
    ]
    if "peer" in rec:
        rows += [
            (
                f"{rec['peer']['algorithm']} MPI_Allreduce",
                f"{format_rate(rec['peer']['busbw_Bps'])} busbw, "
                f"{format_seconds(rec['peer']['wall_time_s'])}  (mpi4py, same ranks, same run)",
            ),
            ("ours / MPI_Allreduce", f"{rec['ratio_to_peer']:.2f}"),
        ]
    return _report(args, rec, title, [*rows, ("correct", "yes (every repeat checked)")])


def cmd_latency(args) -> int:
    rec = wallclock.latency_bench(args.size, args.repeats, args.warmup)
    title = f"ping-pong of {format_bytes(rec['nbytes'])} between 2 ranks, processes backend, median of {rec['repeats']}"
    return _report(
        args,
        rec,
        title,
        [
            ("round trip", format_seconds(rec["round_trip_s"])),
            (
                "bare pipes",
                format_seconds(rec["pipe_round_trip_s"]) + "  (two processes, two pipes, no dlsys; same run)",
            ),
            ("ratio", f"{rec['ratio_to_pipes']:.2f}x"),
        ],
    )


def cmd_emulate(args) -> int:
    rec = emulation.emulate(args.scheme, args.ranks, args.params, args.link)
    what = "ring all-reduce" if rec["scheme"] == "ring" else "parameter-server round"
    title = (
        f"emulated {what}, {rec['ranks']} ranks, {rec['params']:,} float32 "
        f"({rec['logical_nbytes'] / 1e6:.1f} MB logical), threads backend, {rec['link']}"
    )
    return _report(
        args,
        rec,
        title,
        [
            ("messages", f"{rec['messages']:,}"),
            ("wall time here", format_seconds(rec["wall_time_s"]) + f"  ({rec['messages_per_s']:,.0f} messages/s)"),
            ("real buffers", real_buffers(rec)),
            ("peak memory", format_bytes(rec["peak_rss_bytes"]) + "  (this process)"),
            ("virtual time", format_seconds(rec["virtual_time_s"], 6)),
            (
                "closed form",
                format_seconds(rec["closed_form_s"], 6) + f"  (relative error {rec['relative_error']:.1e})",
            ),
        ],
    )


def cmd_stack(args) -> int:
    rec = wallclock.stack_bench(args.sizes, args.transports)
    if args.json:
        print(json.dumps(rec))
        return 0
    sizes = sorted({r["nbytes"] for r in rec["rows"]})
    one_way = {(r["transport"], r["nbytes"]): r["one_way_s"] for r in rec["rows"]}
    print_table(
        [(t, "  ".join(f"{format_seconds(one_way[t, n]):>9}" for n in sizes)) for t in args.transports],
        "one-way time (half the median round trip) at " + "  ".join(f"{format_bytes(n):>9}" for n in sizes),
    )
    rows = [
        (
            f"{t} (measured here)",
            f"alpha {format_seconds(f['alpha_s'])}, bandwidth "
            f"{format_rate(1 / f['beta_s_per_byte']) if f['beta_s_per_byte'] > 0 else 'inf'}",
        )
        for t, f in rec["fits"].items()
    ]
    rows += [
        (f"{name} (preset)", f"alpha {format_seconds(m.alpha_s)}, bandwidth {format_rate(1 / m.beta_s_per_byte)}")
        for name, m in LINK_PRESETS.items()
    ]
    print_table(
        rows, "alpha and beta fitted to t(n) = alpha + n beta (least squares on relative error), beside the presets"
    )
    return 0


def add_commands(subparsers) -> None:
    """Register ``dlsys bench allreduce`` and ``dlsys bench emulate``."""
    bench = subparsers.add_parser("bench", help="benchmark the real data path and the emulator's scale")
    sub = bench.add_subparsers(dest="bench_command", required=True)
    for add in (add_allreduce, add_latency, add_emulate, add_stack):
        add(sub)


def add_allreduce(sub) -> None:
    ar = sub.add_parser("allreduce", help="real wall-clock all-reduce between processes, vs memcpy")
    ar.add_argument(
        "--ranks",
        action=Checked,
        check=integer(1, MAX_PROCESS_RANKS),
        default=2,
        help=f"processes P, 1..{MAX_PROCESS_RANKS} (default 2)",
    )
    ar.add_argument(
        "--size",
        action=Checked,
        check=size(4, wallclock.MAX_BENCH_NBYTES, multiple=4),
        default=64 * 2**20,
        help="bytes per rank, float32 (default 64MiB)",
    )
    ar.add_argument("--algo", default="ring", choices=list(collectives.ALGORITHMS["allreduce"]))
    ar.add_argument(
        "--repeats",
        action=Checked,
        check=integer(1, 10_000),
        default=10,
        help="timed repeats, the median is reported (default 10)",
    )
    ar.add_argument(
        "--warmup", action=Checked, check=integer(0, 10_000), default=3, help="untimed repeats first (default 3)"
    )
    ar.add_argument(
        "--buffers",
        default="alloc",
        choices=wallclock.BUFFERS,
        help="alloc: comm.alloc memory, sends are lent (default); plain: numpy memory, sends copy",
    )
    ar.add_argument(
        "--backend",
        default="processes",
        choices=wallclock.BENCH_BACKENDS,
        help="processes: shared memory (default); mpi: MPI messages, beside the library's MPI_Allreduce",
    )
    ar.add_argument(
        "--max-memory",
        action=Checked,
        check=size(),
        default=DEFAULT_MAX_MEMORY_BYTES,
        metavar="SIZE",
        help="refuse runs whose real memory (ranks x (6 x size + 32 MiB)) exceeds this (default 1GiB)",
    )
    ar.add_argument("--json", action="store_true", help="print one JSON object")
    ar.set_defaults(func=cmd_allreduce)


def add_latency(sub) -> None:
    lat = sub.add_parser("latency", help="round trip of a small message between processes, vs bare pipes")
    lat.add_argument(
        "--size", action=Checked, check=size(1, 4096), default=8, help="bytes per message, 1..4096 (default 8B)"
    )
    lat.add_argument(
        "--repeats",
        action=Checked,
        check=integer(1, 1_000_000),
        default=1000,
        help="timed round trips, the median is reported",
    )
    lat.add_argument(
        "--warmup",
        action=Checked,
        check=integer(0, 1_000_000),
        default=50,
        help="untimed round trips first (default 50)",
    )
    lat.add_argument("--json", action="store_true", help="print one JSON object")
    lat.set_defaults(func=cmd_latency)


def add_emulate(sub) -> None:
    em = sub.add_parser("emulate", help="wall time and memory of a large emulated cluster (threads backend)")
    em.add_argument("--scheme", default="ring", choices=["ring", "ps"], help="ring all-reduce or a PS round")
    em.add_argument(
        "--ranks", action=Checked, check=integer(2, MAX_RANKS), default=512, help="emulated ranks (default 512)"
    )
    em.add_argument(
        "--params",
        action=Checked,
        check=integer(1, 10**12),
        default=None,
        help="float32 parameters (default AlexNet's 61,100,840)",
    )
    em.add_argument("--link", default="tcp-10gbe", action=Checked, check=link, help="a link preset or a bandwidth")
    em.add_argument("--json", action="store_true", help="print one JSON object")
    em.set_defaults(func=cmd_emulate)


def add_stack(sub) -> None:
    st = sub.add_parser(
        "stack", help="one message through real local transports (pipe, TCP, shared memory, MPI), alpha and beta fitted"
    )
    st.add_argument(
        "--sizes",
        nargs="+",
        action=Checked,
        check=size(1, wallclock.MAX_BENCH_NBYTES),
        default=list(wallclock.STACK_SIZES),
        metavar="SIZE",
        help="message sizes (default 8B .. 64MiB)",
    )
    st.add_argument(
        "--transports",
        nargs="+",
        choices=wallclock.TRANSPORTS,
        default=wallclock.available_transports(),
        help="default: every one this machine can run (mpi where mpi4py and mpirun are installed)",
    )
    st.add_argument("--json", action="store_true", help="print one JSON object")
    st.set_defaults(func=cmd_stack)
