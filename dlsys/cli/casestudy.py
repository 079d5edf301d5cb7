"""``dlsys casestudy taihulight``: the Caffe-on-Sunway-TaihuLight paper re-run on emulated
SW26010 nodes (dlsys.experiments.taihulight).

    dlsys casestudy taihulight --model alexnet --design ring --nodes 64
    dlsys casestudy taihulight --model alexnet --design ps --nodes 2,4,8,16,32,64,128,256,512
    dlsys casestudy taihulight --model resnet50 --design ps-reduce --nodes 2,4,...,512   # the PS on MPI
    dlsys casestudy taihulight --versus-mpi --nodes 2,4,...,512       # the paper's figs 7-8
    dlsys casestudy taihulight --versus-mpi --library mpich --nodes 2,4,...,512
    dlsys casestudy taihulight --versus-mpi --nodes 2,4,...,512 --static-shares   # the old rule, for contrast
"""

from __future__ import annotations

import json

from ..experiments import taihulight as study
from ..machine.netstack import LIBRARIES, MPI_LIBRARIES
from ..machine.topology import TOPOLOGY_PRESETS, sharing_of
from ..train.caffe import DESIGNS
from ..units import format_bytes, format_seconds
from .options import STATIC_SHARES_HELP, Checked, integer, network, print_table, refuse_unused, sharing


def model_words(machine, shared, nodes: list[int]) -> str:
    """The title's words for the network model the runs used."""
    if shared is False:
        return ", a link per pair (static shares, --static-shares)"
    if any(sharing_of(machine, shared, n) for n in nodes):
        return ", messages sharing its links (max-min) across supernodes"
    return ", a link per pair"


def node_list(text: str) -> list[int]:
    """'64' -> [64]; '2,4,...,512' -> [2, 4, ..., 512] (doubling); '2,8,32' -> as given."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 4 and parts[2] == "...":
        first, second, last = (int(p) for p in (parts[0], parts[1], parts[3]))
        if first < 1 or second != 2 * first:
            raise ValueError(f"must be N, a list N1,N2,... or a doubling range like 2,4,...,512, got {text}")
        values = [first, second]
        while values[-1] < last:
            values.append(values[-1] * 2)
        if values[-1] != last:  # 2,4,...,0 or 2,4,...,100: a range that ends off its own steps
            near = f"the nearest are {values[-2]} and {values[-1]}" if last > second else f"{second} or more"
            raise ValueError(f"must end a doubling range on {first} x a power of 2 ({near}), got {text}")
        return values
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"must be N, a list N1,N2,... or a doubling range like 2,4,...,512, got {text}") from None


def _row(r: dict) -> str:
    closed = r["closed_communication_s"]
    return (
        f"{r['nodes']:>6} {format_seconds(r['compute_s']):>10} {format_seconds(r['pack_s']):>10} "
        f"{format_seconds(r['communication_s']):>11} {format_seconds(r['iteration_s']):>10} "
        f"{format_seconds(closed) if closed is not None else 'none':>12}"
    )


def cmd_taihulight(args) -> int:
    if args.versus_mpi:
        refuse_unused(
            {"--design": args.design, "--contiguous/--scattered": args.contiguous, "--batch": args.batch},
            "casestudy taihulight --versus-mpi (it times the ring and MPI_Allreduce alone)",
        )
        args.library = args.library or study.LIBRARY
        return cmd_versus_mpi(args)
    args.library = args.library or study.LIBRARY
    args.design = args.design or "ring"
    args.contiguous = args.contiguous is not False
    args.batch = args.batch or study.BATCH
    machine = network(args, study.LINK)
    shared = sharing(args, machine, *args.nodes)
    for n in args.nodes:  # every node count checked before the first run starts
        study.check_case(args.model, args.design, n, machine, args.library, shared)
    records = [
        study.run_design(
            args.model, args.design, n, args.contiguous, machine, args.batch, library=args.library, sharing=shared
        )
        for n in args.nodes
    ]
    rows = [{k: v for k, v in r.items() if k not in ("result", "weights")} for r in records]
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else rows))
        return 0
    r = rows[0]
    built = f" on {args.library}'s collectives" if r["library"] else ""
    title = (
        f"{args.model}, {args.design} design{built}, {r['layout']} gradients, batch {r['batch']} per node, "
        f"{format_bytes(r['gradient_nbytes'])} of gradients, SW26010 nodes on the {r['topology']} topology"
        f"{model_words(machine, shared, args.nodes)}"
    )
    if len(rows) == 1:
        closed = r["closed_communication_s"]
        print_table(
            [
                ("nodes", str(r["nodes"])),
                ("compute", format_seconds(r["compute_s"], 4) + " (forward + backward, per iteration)"),
                ("packing copies", format_seconds(r["pack_s"], 4)),
                ("update", format_seconds(r["update_s"], 4)),
                ("communication", format_seconds(r["communication_s"], 4) + " (what the compute does not hide)"),
                ("closed form", "none" if closed is None else format_seconds(closed, 4)),
                ("total", format_seconds(r["iteration_s"], 4) + " per iteration"),
                ("real buffers", f"each element stands for {r['scale']:,} parameters"),
            ],
            title,
        )
        return 0
    print(title)
    print(f"{'nodes':>6} {'compute':>10} {'packing':>10} {'comm':>11} {'total':>10} {'closed comm':>12}")
    for r in rows:
        print(_row(r))
    return 0


def cmd_versus_mpi(args) -> int:
    machine = network(args, study.LINK)
    shared = sharing(args, machine, *args.nodes)
    for n in args.nodes:
        study.check_case(args.model, "ring", n, machine, sharing=shared)
    sizes = (study.PAPER_MESSAGE_BYTES, study.model_gradient_nbytes(args.model))
    rows = study.ring_vs_mpi(sizes, args.nodes, machine, args.library, shared)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(
        f"ring vs MPI_Allreduce as {args.library} runs it, on the {machine.name} topology{model_words(machine, shared, args.nodes)} "
        f"({LIBRARIES[args.library].source})"
    )
    print(f"{'message':>10} {'nodes':>6} {'ring':>10} {'MPI_Allreduce':>14} {'MPI / ring':>11}  algorithm")
    for ring, mpi in zip(rows[::2], rows[1::2]):
        print(
            f"{format_bytes(ring['nbytes']):>10} {ring['nodes']:>6} {format_seconds(ring['virtual_time_s']):>10} "
            f"{format_seconds(mpi['virtual_time_s']):>14} {mpi['virtual_time_s'] / ring['virtual_time_s']:>10.2f}x"
            f"  {mpi['algorithm']}"
        )
    return 0


def add_commands(subparsers) -> None:
    """Register ``casestudy``."""
    case = subparsers.add_parser("casestudy", help="re-run a paper's experiment on emulated nodes")
    which = case.add_subparsers(dest="study", required=True)
    t = which.add_parser("taihulight", help="Caffe on the Sunway TaihuLight: parameter server vs ring, up to 512 nodes")
    t.add_argument("--model", default="alexnet", choices=list(study.MODELS))
    t.add_argument(
        "--design",
        choices=list(DESIGNS),
        help="ps: per-layer pushes to rank 0 by direct sends; ps-gather / ps-reduce: the PS on MPI, "
        "MPI_Bcast of W and a per-layer MPI_Gather / MPI_Reduce to rank 0 by --library's "
        "algorithms; ring: one ring all-reduce (default)",
    )
    t.add_argument(
        "--nodes",
        action=Checked,
        check=node_list,
        default=[8],
        help="N, or N1,N2,... for a table, e.g. 2,4,...,512 (default 8)",
    )
    layout = t.add_mutually_exclusive_group()
    layout.add_argument(
        "--contiguous",
        dest="contiguous",
        action="store_true",
        default=None,
        help="gradients in one buffer, as the paper restructured Caffe (default)",
    )
    layout.add_argument(
        "--scattered",
        dest="contiguous",
        action="store_false",
        default=None,
        help="Caffe's own layout: one buffer per layer, packed and unpacked around the all-reduce",
    )
    t.add_argument(
        "--topology",
        default="taihulight",
        choices=list(TOPOLOGY_PRESETS),
        help="taihulight (default: 256-node supernodes, 4:1 above) or flat (every pair on one sw26010 link)",
    )
    t.add_argument(
        "--batch",
        action=Checked,
        check=integer(1, 2**16),
        help=f"images per node and iteration (default {study.BATCH})",
    )
    t.add_argument(
        "--versus-mpi",
        action="store_true",
        help="instead: the ring against MPI_Allreduce for 60.97 MB and the model's gradient (figs 7-8)",
    )
    t.add_argument(
        "--library",
        choices=list(MPI_LIBRARIES),
        help=f"the MPI whose algorithms --versus-mpi and the ps-gather/ps-reduce designs use "
        f"(default {study.LIBRARY}, the paper's)",
    )
    t.add_argument("--static-shares", action="store_true", help=STATIC_SHARES_HELP)
    t.add_argument("--json", action="store_true", help="print JSON (one object, or a list for several --nodes)")
    t.set_defaults(func=cmd_taihulight)
