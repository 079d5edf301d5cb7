"""The ``dlsys`` command line: simulate collectives, list presets, and the subcommands
that other capabilities register (exercises, grade, bench, train)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from . import collectives
from .comm import BACKENDS
from .net import LINK_PRESETS, NODE_PRESETS, size_arg
from .viz.units import format_bytes, format_rate, format_seconds


def cmd_simulate(args) -> int:
    from .experiments import simulate_collective
    record = simulate_collective(args.collective, args.algo, args.ranks, args.size, args.link,
                                 args.node, args.backend, args.dtype, args.op, args.seed,
                                 args.gamma)
    result = record.pop("result")
    if args.trace:
        result.trace.save_chrome(args.trace)
    if args.json:
        print(json.dumps(record))
        return 0
    rows = [
        ("collective", f"{record['collective']} / {record['algorithm']}"),
        ("ranks", str(record["ranks"])),
        ("buffer", f"{format_bytes(record['nbytes'])} {record['dtype']} ({record['nbytes']} bytes)"),
        ("link", record["link"]),
        ("virtual time", format_seconds(record["virtual_time_s"], 4)),
        ("closed form", format_seconds(record["closed_form_s"], 4)),
        ("relative error", f"{record['relative_error']:.2e}"),
        ("algbw", format_rate(record["algbw_Bps"])),
        ("busbw", format_rate(record["busbw_Bps"])),
        ("sent per rank", format_bytes(max(record["bytes_sent_per_rank"]))),
        ("wall time here", format_seconds(record["wall_time_s"]) + f" ({record['backend']} backend)"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    if args.trace:
        print(f"{'trace':<{width}}  {args.trace} (open in https://ui.perfetto.dev)")
    return 0


def cmd_presets(args) -> int:
    links = {name: asdict(m) | {"alpha_s": m.alpha_s, "beta_s_per_byte": m.beta_s_per_byte}
             for name, m in LINK_PRESETS.items()}
    nodes = {name: asdict(m) | {"sustained_flops": m.sustained_flops, "gamma_s_per_byte": m.gamma_s_per_byte}
             for name, m in NODE_PRESETS.items()}
    if args.json:
        print(json.dumps({"links": links, "nodes": nodes}, default=str))
        return 0
    print("Links")
    print(f"  {'name':<10} {'latency':>10} {'bandwidth':>12} {'overhead':>10} {'copies':>6}  source")
    for m in LINK_PRESETS.values():
        print(f"  {m.name:<10} {format_seconds(m.latency_s):>10} {format_rate(m.bandwidth_Bps):>12} "
              f"{format_seconds(m.overhead_s):>10} {m.kernel_copies:>6}  {m.source}")
    print("Nodes")
    print(f"  {'name':<10} {'peak':>12} {'sustained':>10} {'memory bw':>12}  source")
    for m in NODE_PRESETS.values():
        print(f"  {m.name:<10} {f'{m.peak_flops / 1e12:.3g} TFLOP/s':>12} {m.efficiency:>10.0%} "
              f"{format_rate(m.memory_bandwidth_Bps):>12}  {m.source}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlsys", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="run one collective on emulated ranks and compare with its closed form")
    sim.add_argument("collective", choices=list(collectives.ALGORITHMS))
    sim.add_argument("--algo", default=None, help="algorithm (default: the first listed for the collective)")
    sim.add_argument("--ranks", type=int, default=8, help="world size P (default 8)")
    sim.add_argument("--size", type=size_arg, default="1MiB", help="per-rank buffer, e.g. 1024, 61MB, 64MiB (default 1MiB)")
    sim.add_argument("--link", default="tcp-10gbe", choices=list(LINK_PRESETS))
    sim.add_argument("--node", default="laptop-cpu", choices=list(NODE_PRESETS))
    sim.add_argument("--backend", default="threads", choices=list(BACKENDS))
    sim.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    sim.add_argument("--op", default="sum", choices=list(collectives.OPS))
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--gamma", action="store_true", help="charge n * gamma for reductions (node memory bandwidth)")
    sim.add_argument("--trace", metavar="FILE", help="write the Chrome trace-event JSON (Perfetto) here")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.set_defaults(func=cmd_simulate)

    pre = sub.add_parser("presets", help="list link and node presets with their numbers and sources")
    pre.add_argument("--json", action="store_true")
    pre.set_defaults(func=cmd_presets)

    from .cli_train import add_commands as add_train_commands
    add_train_commands(sub)
    from .exercises.cli import add_commands as add_exercise_commands
    add_exercise_commands(sub)
    from .bench import add_commands as add_bench_commands
    add_bench_commands(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "simulate":
        args.algo = args.algo or collectives.ALGORITHMS[args.collective][0]
        try:
            collectives.check_algorithm(args.collective, args.algo)
        except ValueError as exc:
            parser.error(f"--algo: {exc}")
        if not 1 <= args.ranks <= 4096:
            parser.error(f"--ranks must be in 1..4096, got {args.ranks}")
    try:
        return args.func(args)
    except (ValueError, TypeError) as exc:
        print(f"dlsys: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
