"""``dlsys simulate COLLECTIVE``: one collective on emulated ranks against its closed form;
``dlsys presets``: the link and node presets with their numbers and sources."""

from __future__ import annotations

import json
from dataclasses import asdict

from .. import collectives
from ..comm.backends import BACKENDS
from ..experiments import DEFAULT_MAX_MEMORY_BYTES, DTYPES, simulate_collective
from ..machine import netstack
from ..machine.net import LINK_PRESETS, NODE_PRESETS
from ..machine.storage import STORAGE_PRESETS
from ..machine.topology import TOPOLOGY_PRESETS
from ..units import format_bytes, format_rate, format_seconds
from .options import (
    MAX_RANKS,
    STATIC_SHARES_HELP,
    Checked,
    add_trace_flags,
    any_case,
    integer,
    link,
    network,
    print_table,
    real_buffers,
    refuse_unused,
    save_trace,
    sharing,
    size,
    trace_row,
)

MAX_SIZE_BYTES = 2**50  # 1 PiB per rank: logical sizes are free, but the search for a real length is not
STACK_MESSAGE_BYTES = 2**20  # presets --stack: the message, unless --size says


def textbook_gap(record: dict) -> float:
    """How far the n/p formula is from the exact one (uneven blocks make them differ)."""
    closed = record["closed_form_s"]
    return abs(record["textbook_form_s"] - closed) / closed if closed > 0 else 0.0


def form_rows(record: dict) -> list[tuple[str, str]]:
    """The closed form, its error and the textbook form; or why there is none."""
    if record["closed_form_s"] is None and record["sharing"]:
        return [
            (
                "closed form",
                f"none with shared links on the {record['topology']} topology (the closed forms "
                "charge each message its pair's link)",
            )
        ]
    if record["closed_form_s"] is None:
        valid = ", ".join(a.name for a in collectives.REGISTRY.values() if a.tiered)
        return [("closed form", f"none for {record['algorithm']} on the {record['topology']} topology (only {valid})")]
    return [
        ("closed form", format_seconds(record["closed_form_s"], 4)),
        ("relative error", f"{record['relative_error']:.2e}"),
        (
            "textbook form",
            format_seconds(record["textbook_form_s"], 4)
            + " (blocks of n/p bytes; "
            + f"{textbook_gap(record):.2e} from the closed form)",
        ),
    ]


def cmd_simulate(args) -> int:
    algorithm = args.algo or collectives.ALGORITHMS[args.collective][0]
    try:
        collectives.check_algorithm(args.collective, algorithm)
    except ValueError as exc:
        raise ValueError(f"--algo: {exc}") from None
    machine = network(args)
    record = simulate_collective(
        args.collective,
        algorithm,
        args.ranks,
        args.size,
        machine,
        args.node,
        args.backend,
        args.dtype,
        args.op,
        args.seed,
        args.gamma,
        max_memory_bytes=args.max_memory,
        real=args.real,
        record=bool(args.trace),
        sharing=sharing(args, machine, args.ranks),
    )
    save_trace(args, record)
    if args.json:
        print(json.dumps(record))
        return 0
    rows = [
        ("collective", f"{record['collective']} / {record['algorithm']}"),
        ("ranks", str(record["ranks"])),
        ("buffer", f"{format_bytes(record['nbytes'])} {record['dtype']} ({record['nbytes']} bytes)"),
        ("link", record["link"] + ("" if record["topology"] == "flat" else f" ({record['topology']} topology)")),
        (
            "virtual time",
            format_seconds(record["virtual_time_s"], 4)
            + (
                " (messages share links: a max-min fair replay)"
                if record["sharing"]
                else " (static shares: a link per pair, --static-shares)"
                if args.static_shares
                else ""
            ),
        ),
        *form_rows(record),
        ("algbw", format_rate(record["algbw_Bps"])),
        ("busbw", format_rate(record["busbw_Bps"])),
        ("sent per rank", format_bytes(max(record["bytes_sent_per_rank"]))),
        ("real buffers", real_buffers(record)),
        ("wall time here", format_seconds(record["wall_time_s"]) + f" ({record['backend']} backend)"),
    ]
    print_table(rows + trace_row(args))
    return 0


def cmd_stack(args) -> int:
    """``presets --stack LINK``: where one message's time goes, stage by stage."""
    protocol = args.protocol or "basic"
    nbytes = STACK_MESSAGE_BYTES if args.size is None else args.size
    rows = netstack.breakdown(args.stack, nbytes, protocol)
    if args.json:
        print(json.dumps({"link": args.stack, "nbytes": nbytes, "protocol": protocol, "stages": rows}))
        return 0
    total = sum(r["time_s"] for r in rows)
    print_table(
        [
            (f"{r['side']:<8} {r['stage']}", f"{format_seconds(r['time_s']):>10}  {r['time_s'] / total:6.1%}")
            for r in rows
        ]
        + [("total", format_seconds(total))],
        f"one message of {format_bytes(nbytes)} on {args.stack} ({protocol} protocol; MPI and UCX would use "
        f"{netstack.protocol_for(nbytes)})",
    )
    return 0


def cmd_presets(args) -> int:
    if args.stack:
        return cmd_stack(args)
    refuse_unused({"--size": args.size, "--protocol": args.protocol}, "presets without --stack LINK")
    links = {
        name: asdict(m) | {"alpha_s": m.alpha_s, "beta_s_per_byte": m.beta_s_per_byte}
        for name, m in LINK_PRESETS.items()
    }
    nodes = {
        name: asdict(m) | {"sustained_flops": m.sustained_flops, "gamma_s_per_byte": m.gamma_s_per_byte}
        for name, m in NODE_PRESETS.items()
    }
    libraries = {
        name: lib._asdict() | {"alpha_s": lib.transport().alpha_s, "beta_s_per_byte": lib.transport().beta_s_per_byte}
        for name, lib in netstack.LIBRARIES.items()
    }
    storage = {name: s._asdict() for name, s in STORAGE_PRESETS.items()}
    if args.json:
        print(json.dumps({"links": links, "nodes": nodes, "libraries": libraries, "storage": storage}, default=str))
        return 0
    print("Links")
    print(f"  {'name':<10} {'latency':>10} {'bandwidth':>12} {'overhead':>10} {'copies':>6}  source")
    for m in LINK_PRESETS.values():
        print(
            f"  {m.name:<10} {format_seconds(m.latency_s):>10} {format_rate(m.bandwidth_Bps):>12} "
            f"{format_seconds(m.overhead_s):>10} {m.kernel_copies:>6}  {m.source}"
        )
    print("Nodes")
    print(f"  {'name':<10} {'peak':>12} {'sustained':>10} {'memory bw':>12}  source")
    for m in NODE_PRESETS.values():
        print(
            f"  {m.name:<10} {f'{m.peak_flops / 1e12:.3g} TFLOP/s':>12} {m.efficiency:>10.0%} "
            f"{format_rate(m.memory_bandwidth_Bps):>12}  {m.source}"
        )
    print("Libraries (all-reduce algorithm by rank count and size, on a transport)")
    for lib in netstack.LIBRARIES.values():
        print(f"  {lib.name:<14} on {lib.link}; alpha {format_seconds(lib.transport().alpha_s)}  {lib.source}")
        for ranks, sizes in lib.algorithms:
            algos = ", ".join(a if limit == float("inf") else f"{a} below {format_bytes(limit)}" for limit, a in sizes)
            print(f"  {'':<14}   {'every p' if ranks == float('inf') else f'p < {ranks}':>9}: {algos}")
    print("Storage (a data loader's reads, dlsys train --storage)")
    print(f"  {'name':<10} {'latency':>10} {'bandwidth':>12}  source")
    for st in STORAGE_PRESETS.values():
        print(f"  {st.name:<10} {format_seconds(st.latency_s):>10} {format_rate(st.bandwidth_Bps):>12}  {st.source}")
    return 0


def add_commands(subparsers) -> None:
    """Register ``simulate`` and ``presets``."""
    sim = subparsers.add_parser(
        "simulate", help="run one collective on emulated ranks and compare with its closed form"
    )
    sim.add_argument("collective", choices=list(collectives.ALGORITHMS))
    sim.add_argument("--algo", default=None, help="algorithm (default: the first listed for the collective)")
    sim.add_argument(
        "--ranks",
        action=Checked,
        check=integer(1, MAX_RANKS),
        default=8,
        help=f"world size P, 1..{MAX_RANKS} (default 8)",
    )
    sim.add_argument(
        "--size",
        action=Checked,
        check=size(1, MAX_SIZE_BYTES),
        default=2**20,
        help="per-rank buffer, e.g. 1024, 61MB, 64MiB (default 1MiB)",
    )
    sim.add_argument(
        "--link",
        default="tcp-10gbe",
        action=Checked,
        check=link,
        help=f"a preset ({', '.join(LINK_PRESETS)}) or a bandwidth, e.g. 10Gbps",
    )
    sim.add_argument(
        "--topology",
        default="flat",
        type=any_case(TOPOLOGY_PRESETS),
        choices=list(TOPOLOGY_PRESETS),
        help="flat: every pair on --link (default); two-level: supernodes of 32 on --link, upper "
        "level 4:1; taihulight: 256-node supernodes of sw26010 links under a 4:1 oversubscribed "
        "upper level; fat-tree: k = 16 on --link; gpu-cluster: DGX H100 islands of 8 "
        "(taihulight and gpu-cluster: --link is not used)",
    )
    sim.add_argument("--static-shares", action="store_true", help=STATIC_SHARES_HELP)
    sim.add_argument("--node", default="laptop-cpu", type=any_case(NODE_PRESETS), choices=list(NODE_PRESETS))
    sim.add_argument("--backend", default="threads", choices=list(BACKENDS))
    sim.add_argument("--dtype", default="float32", choices=list(DTYPES))
    sim.add_argument("--op", default="sum", choices=list(collectives.OPS))
    sim.add_argument("--seed", action=Checked, check=integer(0, 2**63 - 1), default=0)
    sim.add_argument(
        "--max-memory",
        action=Checked,
        check=size(),
        default=DEFAULT_MAX_MEMORY_BYTES,
        metavar="SIZE",
        help="real buffers of all ranks together stay below this; larger sizes run on "
        "real elements that each stand for several (default 1GiB)",
    )
    sim.add_argument(
        "--real",
        action="store_true",
        help="real data only: refuse, before any rank starts, a size that does not fit --max-memory",
    )
    sim.add_argument("--gamma", action="store_true", help="charge n * gamma for reductions (node memory bandwidth)")
    add_trace_flags(sim)
    sim.set_defaults(func=cmd_simulate)
    add_presets(subparsers)


def add_presets(subparsers) -> None:
    pre = subparsers.add_parser(
        "presets", help="list link, node, library and storage presets with their numbers and sources"
    )
    pre.add_argument(
        "--stack",
        metavar="LINK",
        type=any_case(LINK_PRESETS),
        choices=list(LINK_PRESETS),
        help="instead: the stages of one message on this link (dlsys.machine.netstack)",
    )
    pre.add_argument(
        "--size", action=Checked, check=size(0, MAX_SIZE_BYTES), help="--stack: the message size (default 1MiB)"
    )
    pre.add_argument(
        "--protocol",
        choices=["basic", "eager", "rendezvous"],
        help="--stack: basic (what the emulator charges), eager or rendezvous",
    )
    pre.add_argument("--json", action="store_true")
    pre.set_defaults(func=cmd_presets)
