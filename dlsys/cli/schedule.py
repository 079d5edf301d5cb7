"""``dlsys simulate schedule``: one scheduling policy on an emulated model, its iteration
time, throughput and overlap; ``dlsys train --schedule POLICY`` trains digits under one.

    dlsys simulate schedule --model resnet50 --policy p3 --workers 4 --link 10Gbps [--json]
    dlsys simulate schedule --model vgg19 --policy bytescheduler --credit-bytes 8MB --sweep 1Gbps 10Gbps 100Gbps
"""

from __future__ import annotations

import json

from .. import schedule
from ..experiments import schedule as ex
from ..viz.units import format_seconds
from .options import Checked, integer, number, print_table, save_trace, size, trace_row

# option -> (flag, checker, help, the policies that take it)
POLICY_OPTIONS = {
    "slice_params": ("--slice-params", integer(1, 2**31), "P3: parameters per slice (paper: 40000)"),
    "partition_params": ("--partition-params", integer(1, 2**31), "ByteScheduler: parameters per partition"),
    "credit_bytes": ("--credit-bytes", size(1, 2**40), "ByteScheduler: bytes in flight, e.g. 16MB"),
    "bucket_mb": ("--bucket-mb", number(0, 1e6, low_open=True), "fusion: bucket cap in MB (DDP: 25)"),
    "cycle_ms": ("--cycle-ms", number(0, 1e6), "fusion: Horovod's cycle time in ms (default 0: none)"),
}


def add_schedule_options(p) -> None:
    """The policy options (``simulate schedule`` and ``train --schedule``)."""
    for name, (flag, check, text) in POLICY_OPTIONS.items():
        p.add_argument(flag, dest=name, action=Checked, check=check, help=text)


def policy_options(args, policy: str) -> dict:
    """The policy options given; an option the policy does not take is an error naming it."""
    given = {name: getattr(args, name) for name in POLICY_OPTIONS if getattr(args, name) is not None}
    wrong = [POLICY_OPTIONS[name][0] for name in given if name not in schedule.options_of(policy)]
    if wrong:
        raise ValueError(f"{', '.join(wrong)}: not an option of --policy {policy} "
                         f"(it takes: {', '.join(POLICY_OPTIONS[o][0] for o in schedule.options_of(policy)) or 'none'})")
    return given


def add_simulate_options(p) -> None:
    p.add_argument("--model", default="resnet50", choices=ex.MODELS, help="schedule: the layer profile")
    p.add_argument("--policy", default="wfbp", choices=list(schedule.POLICIES), help="schedule: the policy")
    p.add_argument("--workers", action=Checked, check=integer(1, 64), default=4, help="schedule: workers (default 4)")
    p.add_argument("--servers", action=Checked, check=integer(1, 64), default=None,
                   help="schedule --scheme ps: servers (default: as many as workers)")
    p.add_argument("--scheme", default="ps", choices=schedule.SCHEMES, help="schedule: parameter server or all-reduce")
    p.add_argument("--batch", action=Checked, check=integer(1, 2**16), default=32, help="schedule: samples per worker")
    p.add_argument("--iterations", action=Checked, check=integer(2, 100), default=3, help="schedule (default 3)")
    p.add_argument("--sweep", nargs="+", metavar="LINK", help="schedule: every policy at each link or bandwidth")
    add_schedule_options(p)


def cmd_schedule(args) -> int:
    ex.parse_link(args.link)
    for link in args.sweep or []:
        ex.parse_link(link)
    node = args.node or "v100"
    servers = args.servers or args.workers
    if args.sweep:
        rows = ex.bandwidth_sweep(args.model, args.sweep, workers=args.workers, node=node, scheme=args.scheme,
                                  servers=servers)
        if args.json:
            print(json.dumps(rows))
            return 0
        print_table([(f"{r['link']} {r['policy']}", f"{format_seconds(r['iteration_s'])} per iteration, "
                                                      f"{r['throughput']:.1f} samples/s, overlap {r['overlap']:.0%}")
                     for r in rows], title=f"{args.model}, {args.workers} workers, {args.scheme}, {node}")
        return 0
    record = ex.simulate_schedule(args.policy, args.model, args.workers, args.link, node, args.scheme, servers,
                                  args.batch, args.iterations, args.backend, policy_options(args, args.policy))
    save_trace(args, record)
    if args.json:
        print(json.dumps(record))
        return 0
    print_table([
        ("policy", record["describe"]),
        ("model", f"{args.model}, batch {args.batch} per worker, {args.workers} workers"
                  + (f" + {servers} server(s)" if args.scheme == "ps" else " (all-reduce)")),
        ("link, node", f"{record['link']}, {record['node']}"),
        ("iteration", format_seconds(record["iteration_s"]) + f" (compute alone {format_seconds(record['compute_s'])})"),
        ("throughput", f"{record['throughput']:.1f} samples/s"),
        ("overlap", f"{record['overlap']:.0%} of worker 0's sending hidden behind its compute"),
        ("messages", f"{record['messages']} in {args.iterations} iterations"),
    ] + trace_row(args))
    return 0

