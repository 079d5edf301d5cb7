"""The ``dlsys`` command line: simulate collectives, list presets, and the subcommands
that other capabilities register (exercises, grade, bench, train)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from . import collectives
from .comm import BACKENDS
from .net import LINK_PRESETS, NODE_PRESETS, parse_size


def _si(value: float, unit: str) -> str:
    """1.23e9, 'B/s' -> '1.23 GB/s'; seconds get ms/us/ns."""
    if unit == "s":
        for scale, prefix in ((1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
            if abs(value) >= scale or scale == 1e-9:
                return f"{value / scale:.4g} {prefix}s"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(value) >= scale or scale == 1:
            return f"{value / scale:.4g} {prefix}{unit}"


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        ("buffer", f"{_si(record['nbytes'], 'B')} {record['dtype']} ({record['nbytes']} bytes)"),
        ("link", record["link"]),
        ("virtual time", _si(record["virtual_time_s"], "s")),
        ("closed form", _si(record["closed_form_s"], "s")),
        ("relative error", f"{record['relative_error']:.2e}"),
        ("algbw", _si(record["algbw_Bps"], "B/s")),
        ("busbw", _si(record["busbw_Bps"], "B/s")),
        ("sent per rank", _si(max(record["bytes_sent_per_rank"]), "B")),
        ("wall time here", _si(record["wall_time_s"], "s") + f" ({record['backend']} backend)"),
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
        print(f"  {m.name:<10} {_si(m.latency_s, 's'):>10} {_si(m.bandwidth_Bps, 'B/s'):>12} "
              f"{_si(m.overhead_s, 's'):>10} {m.kernel_copies:>6}  {m.source}")
    print("Nodes")
    print(f"  {'name':<10} {'peak':>12} {'sustained':>10} {'memory bw':>12}  source")
    for m in NODE_PRESETS.values():
        print(f"  {m.name:<10} {_si(m.peak_flops, 'FLOP/s'):>12} {m.efficiency:>10.0%} "
              f"{_si(m.memory_bandwidth_Bps, 'B/s'):>12}  {m.source}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlsys", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="run one collective on emulated ranks and compare with its closed form")
    sim.add_argument("collective", choices=list(collectives.ALGORITHMS))
    sim.add_argument("--algo", default=None, help="algorithm (default: the first listed for the collective)")
    sim.add_argument("--ranks", type=int, default=8, help="world size P (default 8)")
    sim.add_argument("--size", type=_size, default="1MiB", help="per-rank buffer, e.g. 1024, 61MB, 64MiB (default 1MiB)")
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
