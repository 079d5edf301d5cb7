"""``dlsys schedule``: one scheduling policy on an emulated model, its iteration time,
throughput and overlap; with ``--sweep``, every policy at each link or bandwidth.
``dlsys train --schedule POLICY`` trains digits under one (with the options registered here).

    dlsys schedule --model resnet50 --policy p3 --workers 4 --link 10Gbps [--json]
    dlsys schedule --model vgg19 --credit-bytes 8MB --sweep 1Gbps 10Gbps 100Gbps
    dlsys schedule --model vgg19 --p3-paper --sweep 1Gbps 5Gbps 10Gbps 20Gbps 40Gbps

``--colocated`` puts server m on worker m's machine: the machine's streams share its links
max-min fairly (a replay, dlsys.comm.replay; no overlap or trace then), and a worker's
traffic to its own server takes the loopback; ``--p3-paper`` sweeps P3 against MXNet's
KVStore as P3's paper ran them (co-located, MXNet's per-slice server cost) and prints P3's
gain beside the paper's.

A policy's options (``--slice-params``, ``--credit-bytes``, ...) are its ``Option``s
(``dlsys.schedule.OPTIONS``): a new one is a new flag here, checked in its declared range.
"""

from __future__ import annotations

import argparse
import json

from .. import schedule
from ..comm.backends import BACKENDS
from ..experiments import schedule as ex
from ..experiments.p3_paper import p3_reproduction
from ..machine.net import NODE_PRESETS
from ..units import format_seconds
from .options import (
    Checked,
    add_option,
    add_trace_flags,
    any_case,
    integer,
    link,
    print_table,
    refuse_unused,
    save_trace,
    trace_row,
)

# what a single run takes and a --sweep (every policy, its own links) does not, with the defaults
SINGLE_RUN = {"policy": "wfbp", "link": "tcp-10gbe", "batch": 32, "iterations": 3, "backend": "threads", "trace": None}


def add_schedule_options(p) -> None:
    """The policy options (``schedule`` and ``train --schedule``): one flag per Option."""
    for name, (policy, option) in schedule.OPTIONS.items():
        add_option(p, option, name, f"{policy}: {option.help}")


def given_options(args) -> dict:
    return {name: getattr(args, name) for name in schedule.OPTIONS if getattr(args, name) is not None}


def policy_options(args, policy: str) -> dict:
    """The policy options given; an option the policy does not take is an error naming it."""
    given = given_options(args)
    wrong = [schedule.OPTIONS[name][1].flag for name in given if name not in schedule.options_of(policy)]
    if wrong:
        takes = ", ".join(option.flag for option in schedule.POLICIES[policy].options) or "none"
        raise ValueError(f"{', '.join(wrong)}: not an option of --policy {policy} (it takes: {takes})")
    return given


def cmd_schedule(args) -> int:
    servers = args.servers or args.workers
    if args.p3_paper:
        if not args.sweep:
            raise ValueError("--p3-paper: give the links to sweep with --sweep")
        refuse_unused(
            {f"--{name}": getattr(args, name) for name in SINGLE_RUN}
            | {
                "--servers": args.servers,
                "--colocated": args.colocated or None,
                "--scheme": None if args.scheme == "ps" else args.scheme,
                **{schedule.OPTIONS[name][1].flag: v for name, v in given_options(args).items()},
            },
            "--p3-paper (P3's defaults, co-located, as many servers as workers)",
        )
        return p3_paper(args)
    if args.sweep:
        return sweep(args, servers)
    for name, default in SINGLE_RUN.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    record = ex.simulate_schedule(
        args.policy,
        args.model,
        args.workers,
        args.link,
        args.node,
        args.scheme,
        servers,
        args.batch,
        args.iterations,
        args.backend,
        policy_options(args, args.policy),
        colocated=args.colocated,
    )
    save_trace(args, record)
    if args.json:
        print(json.dumps(record))
        return 0
    print_table(
        [
            ("policy", record["describe"]),
            (
                "model",
                f"{args.model}, batch {args.batch} per worker, {args.workers} workers"
                + (f" + {servers} server(s)" if args.scheme == "ps" else " (all-reduce)")
                + (", co-located" if args.colocated else ""),
            ),
            ("link, node", f"{record['link']}, {record['node']}"),
            (
                "iteration",
                format_seconds(record["iteration_s"]) + f" (compute alone {format_seconds(record['compute_s'])})",
            ),
            ("throughput", f"{record['throughput']:.1f} samples/s"),
        ]
        + (
            []
            if record["overlap"] is None
            else [
                ("overlap", f"{record['overlap']:.0%} of worker 0's sending hidden behind its compute"),
                ("messages", f"{record['messages']} in {args.iterations} iterations"),
            ]
        )
        + trace_row(args)
    )
    return 0


def sweep(args, servers: int) -> int:
    """``--sweep``: every policy at each link or bandwidth."""
    refuse_unused({f"--{name}": getattr(args, name) for name in SINGLE_RUN}, "--sweep (every policy at each link)")
    options: dict = {}
    for name, value in given_options(args).items():
        options.setdefault(schedule.OPTIONS[name][0], {})[name] = value
    rows = ex.bandwidth_sweep(
        args.model,
        args.sweep,
        workers=args.workers,
        node=args.node,
        scheme=args.scheme,
        servers=servers,
        options=options,
        colocated=args.colocated,
    )
    if args.json:
        print(json.dumps(rows))
        return 0
    print_table(
        [
            (
                f"{r['link']} {r['policy']}",
                f"{format_seconds(r['iteration_s'])} per iteration, {r['throughput']:.1f} samples/s" + _overlap(r),
            )
            for r in rows
        ],
        title=f"{args.model}, {args.workers} workers, {args.scheme}, {args.node}"
        + (", servers co-located" if args.colocated else ""),
    )
    return 0


def _overlap(record: dict) -> str:
    """ ", overlap 40%", or nothing for a co-located run (its shared-link replay keeps no trace)."""
    return "" if record["overlap"] is None else f", overlap {record['overlap']:.0%}"


def p3_paper(args) -> int:
    """``--p3-paper``: P3's gain over MXNet at each link (``experiments.p3_paper.p3_reproduction``)."""
    rows = p3_reproduction(args.model, args.sweep, args.workers, args.node)
    if args.json:
        print(json.dumps(rows))
        return 0
    paper = rows[0]["paper_max_gain"]
    print_table(
        [
            (
                r["link"],
                f"mxnet {format_seconds(r['mxnet_s'])}, p3 {format_seconds(r['p3_s'])}: P3 "
                f"{r['gain']:+.0%} (at most {r['ceiling_gain']:+.0%} by the bound); the link's bound "
                f"{format_seconds(r['bound_s'])}, compute {format_seconds(r['compute_s'])}",
            )
            for r in rows
        ],
        title=f"P3 against MXNet on {args.model}, {args.workers} machines (a worker and a server each)",
    )
    print(
        f"ours: the largest gain {max(r['gain'] for r in rows):+.0%}; the paper's abstract: "
        + (f"up to {paper:+.0%}" if paper is not None else "no figure for this model")
    )
    return 0


def add_commands(subparsers) -> None:
    """Register ``schedule``."""
    p = subparsers.add_parser(
        "schedule",
        help="a scheduling policy on an emulated model: iteration time and overlap",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        default="resnet50",
        type=any_case(ex.MODELS),
        choices=ex.MODELS,
        help="the layer profile (default resnet50)",
    )
    p.add_argument("--policy", type=any_case(schedule.POLICIES), choices=list(schedule.POLICIES), help="default wfbp")
    p.add_argument("--workers", action=Checked, check=integer(1, 64), default=4, help="default 4")
    p.add_argument(
        "--servers",
        action=Checked,
        check=integer(1, 64),
        default=None,
        help="--scheme ps: servers (default: as many as workers)",
    )
    p.add_argument("--scheme", default="ps", choices=schedule.SCHEMES, help="parameter server or all-reduce")
    p.add_argument("--batch", action=Checked, check=integer(1, 2**16), help="samples per worker (default 32)")
    p.add_argument("--iterations", action=Checked, check=integer(2, 100), help="default 3")
    p.add_argument(
        "--link", action=Checked, check=link, help="a link preset or a bandwidth, e.g. 10Gbps (default tcp-10gbe)"
    )
    p.add_argument(
        "--node", default="v100", type=any_case(NODE_PRESETS), choices=list(NODE_PRESETS), help="default v100"
    )
    p.add_argument("--backend", choices=list(BACKENDS), help="default threads")
    p.add_argument(
        "--sweep",
        nargs="+",
        action=Checked,
        check=link,
        metavar="LINK",
        help="instead: every policy at each link or bandwidth",
    )
    p.add_argument(
        "--colocated",
        action="store_true",
        help="--scheme ps: server m on worker m's machine, sharing its links max-min fairly (servers = workers)",
    )
    p.add_argument(
        "--p3-paper",
        action="store_true",
        help="with --sweep: P3 against MXNet's KVStore as P3's paper ran them (co-located, shared "
        "links: a replay, seconds a point), and its gain",
    )
    add_schedule_options(p)
    add_trace_flags(p)
    p.set_defaults(func=cmd_schedule)
