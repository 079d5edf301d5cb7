"""What every command shares: the argument checkers, the table printer, the account of
the real buffers a run used.

Checkers run at the boundary, before any rank starts (the algorithms below trust their
input). Each error names the option and the accepted range, e.g.
``--ranks must be an integer in 1..1024, got 0``; use them as
``parser.add_argument("--ranks", action=Checked, check=integer(1, MAX_RANKS), ...)``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..comm.backends import MAX_THREAD_RANKS
from ..machine.net import LINK_PRESETS, get_link, parse_size
from ..machine.topology import Topology, get_network, sharing_of
from ..options import Option
from ..outputs import check_writable
from ..units import format_bytes

# The most ranks a command takes (the processes backend stops sooner: launch says so before
# starting). Threads could start MAX_THREAD_RANKS, but a ring all-reduce sends 2p(p-1)
# messages and its bookkeeping grows with them, beyond the buffers' budget. Measured on
# threads (`/usr/bin/time dlsys simulate allreduce --ranks P --size 64KiB`, 2 shared cores):
# 1024 ranks, 12 s and 0.53 GB; 2048 ranks, 93 s and 1.47 GB; 4096, minutes and 4.8 GB
# (issue 25). At 1024 the default 1 GiB of buffers runs in 32 s with 1.28 GB resident.
MAX_RANKS = min(MAX_THREAD_RANKS, 1024)


class Checked(argparse.Action):
    """An option whose value ``check`` parses; a ValueError becomes ``--option <message>``."""

    def __init__(self, option_strings, dest, check, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.check = check

    def __call__(self, parser, namespace, values, option_string=None):
        name = option_string or self.dest
        try:
            value = [self.check(v) for v in values] if isinstance(values, list) else self.check(values)
        except ValueError as exc:
            parser.error(f"{name} {exc}")
        setattr(namespace, self.dest, value)


def integer(low: int, high: int):
    """Checker: an integer in low..high."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise ValueError(f"must be an integer in {low}..{high}, got {text}")
        return value

    return check


def number(low: float, high: float = float("inf"), low_open: bool = False):
    """Checker: a number in [low, high] (or (low, high] with ``low_open``)."""

    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not (low < value if low_open else low <= value) or not value <= high:
            bounds = f"> {low:g}" if low_open else f">= {low:g}"
            bounds += f" and <= {high:g}" if high != float("inf") else ""
            raise ValueError(f"must be a number {bounds}, got {text}")
        return value

    return check


def size(low: int = 1, high: int | None = None, multiple: int = 1):
    """Checker: a byte size like 1024, 61MB, 64MiB in low..high, a multiple of ``multiple``
    (``net.parse_size``: case-sensitive, ``1Gb`` refused as bits)."""

    def check(text: str) -> int:
        negative = text.strip().startswith("-")
        try:
            nbytes = parse_size(text.strip().lstrip("-"))
        except ValueError as exc:
            raise ValueError(f"must be a size in bytes, got {text}: {str(exc).removeprefix('size: ')}") from None
        too_small = negative or nbytes < low
        if too_small or (high is not None and nbytes > high) or nbytes % multiple:
            if too_small and low == 1 and multiple == 1:
                raise ValueError(f"must be > 0 bytes, got {text}")
            what = f"a multiple of {multiple} bytes " if multiple > 1 else ""
            if high is None:
                limits = f">= {format_bytes(low)}"
            else:
                limits = f"in {format_bytes(low)}..{format_bytes(high)} ({low}..{high} bytes)"
            raise ValueError(f"must be {what}{limits}, got {text}")
        return nbytes

    return check


# an Option's kind -> the command line's checker of its range
CHECKERS = {
    "integer": lambda o: integer(int(o.low), int(o.high)),
    "number": lambda o: number(o.low, o.high, low_open=o.low_open),
    "size": lambda o: size(int(o.low), int(o.high)),
}


def add_option(parser, option: Option, dest: str | None = None, help: str | None = None, **kwargs) -> None:
    """``option``'s flag on ``parser``, checked in its declared range (``Option.kind``)."""
    parser.add_argument(
        option.flag,
        dest=dest or option.name,
        action=Checked,
        check=CHECKERS[option.kind](option),
        help=option.help if help is None else help,
        **kwargs,
    )


def any_case(names):
    """An argparse ``type`` for ``choices=names``: a name in any case (``--model VGG19``) as
    the registry spells it; anything else as typed, for argparse to refuse with the choices."""
    spelt = {name.lower(): name for name in names}
    return lambda text: spelt.get(text.strip().lower(), text)


def link(text: str) -> str:
    """Checker: a link in the one grammar (``net.get_link``): a preset in any case, as the
    preset's name; a bandwidth (10Gbps, 10 Gb/s, 1.25GB/s) as written."""
    try:
        model = get_link(text, "")
    except ValueError as exc:
        raise ValueError(f"{str(exc).removeprefix(': ')}, got {text}") from None
    return model.name if text.strip().lower() in LINK_PRESETS else text


def output_file(text: str) -> str:
    """Checker: a file the command writes at the end (``--trace``, ``--json FILE``): refused
    now, before minutes of work, if it is a directory or its folder is missing or read-only."""
    try:
        check_writable(text)
    except ValueError as exc:
        raise ValueError(f"must name a file in an existing, writable folder ({exc}), got {text}") from None
    return text


def output_folder(text: str) -> str:
    """Checker: a folder the command writes into (made if missing): refused now if it is a
    file, or if it is missing and its parent folder is missing or read-only."""
    folder = Path(text)
    try:
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"{folder} is a file")
        check_writable(folder / "x" if folder.is_dir() else folder)
    except ValueError as exc:
        raise ValueError(f"must be a writable folder or one that can be made ({exc}), got {text}") from None
    return text


def output_path(text: str) -> str:
    """Checker: a file or a folder the run writes (``--checkpoint``: a file or a directory by
    strategy): an existing folder must be writable, anything else goes in a writable folder."""
    path = Path(text)
    try:
        check_writable(path / "x" if path.is_dir() else path)
    except ValueError as exc:
        raise ValueError(f"must be a writable place ({exc}), got {text}") from None
    return text


def pair(first, second, names: str):
    """Checker for 'A:B', e.g. --straggler 3:4 -> (3, 4.0); ``first``/``second`` check each
    part, and an error names the part: ``--straggler FACTOR must be a number > 0, got 0``."""

    def check(text: str):
        a, sep, b = text.partition(":")
        if not sep:
            raise ValueError(f"must be {names}, got {text}")
        parts = []
        for name, part, checker in zip(names.split(":"), (a, b), (first, second)):
            try:
                parts.append(checker(part))
            except ValueError as exc:
                raise ValueError(f"{name} {exc}") from None
        return tuple(parts)

    return check


def join_negative_values(argv: list[str]) -> list[str]:
    """``--size -5MiB`` -> ``--size=-5MiB``: argparse takes a value that starts with '-' and a
    digit for an option, and would only say "expected one argument"; joined, the checker
    sees it and names the accepted range."""
    out: list[str] = []
    for token in argv:
        if out and re.match(r"-\d", token) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def network(args, link: str | None = None) -> Topology:
    """The run's network, resolved once here from ``--topology`` and ``--link`` (or ``link``,
    for a command without --link): "flat" on that link, or the named topology."""
    return get_network(args.topology, link or args.link, "--topology")


STATIC_SHARES_HELP = (
    "the old rule, for contrast: every pair on a link of its own, a message across the upper level "
    "charged the static share 1/oversubscription of it however few cross (default: messages share "
    "the links max-min fairly, a replay of the run, docs/flows.md; a flat network keeps its per-pair "
    "clock, its closed forms exactly)"
)


def sharing(args, machine: Topology, *sizes: int) -> bool | None:
    """The run's ``sharing``: False under ``--static-shares`` (refused where no run of
    ``sizes`` ranks spans a link above the nodes: there the per-pair clock is already the
    model, with no share to make static), else None, the network's own model
    (``topology.sharing_of``)."""
    if not args.static_shares:
        return None
    if not any(sharing_of(machine, None, n) for n in sizes):
        raise ValueError(
            f"--static-shares: no link above the nodes on {max(sizes)} ranks of the {machine.name} topology (the "
            "per-pair clock is already the default there); use a tiered --topology (two-level, taihulight, "
            "fat-tree, gpu-cluster) and ranks in more than one supernode"
        )
    return False


def print_table(rows, title: str | None = None) -> None:
    """Key/value rows, keys aligned (under ``title``, indented, if given)."""
    indent = "  " if title else ""
    if title:
        print(title)
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{indent}{key:<{width}}  {value}")


def real_buffers(record: dict) -> str:
    """What really ran: '512 x 2 KiB, each element stands for 29,770..29,771 (one per ring
    block); 3 MiB of the 1 GiB budget'."""
    low, high = record["scale_min"], record["scale_max"]
    if high == 1:
        stands = "real data (scale 1)"
    elif low == high:
        stands = f"each element stands for {low:,}"
    else:
        stands = f"each element stands for {low:,}..{high:,} (one element per ring block)"
    return (
        f"{record['ranks']} x {format_bytes(record['real_nbytes'])}, {stands}; about "
        f"{format_bytes(record['memory_bytes'])} of the {format_bytes(record['max_memory_bytes'])} budget"
    )


def add_trace_flags(p) -> None:
    """--trace FILE (the run's Chrome trace, ``save_trace``) and --json."""
    p.add_argument(
        "--trace",
        metavar="FILE",
        action=Checked,
        check=output_file,
        help="write the Chrome trace-event JSON (Perfetto) here",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def save_trace(args, record: dict) -> None:
    """Take the LaunchResult out of ``record`` (it does not print) and write its trace to
    ``--trace`` if given."""
    result = record.pop("result")
    if args.trace:
        result.trace.save_chrome(args.trace, memory=result.memory or ())


def trace_row(args) -> list:
    """The table row that says where ``--trace`` went (none without it)."""
    return [("trace", f"{args.trace} (open in https://ui.perfetto.dev)")] if args.trace else []


def refuse_unused(given: dict, where: str) -> None:
    """A ValueError naming every option of ``given`` (flag -> value, None if not given) that
    was given where it does nothing: ``--size: not an option of presets without --stack LINK``."""
    unused = [flag for flag, value in given.items() if value is not None]
    if unused:
        raise ValueError(f"{', '.join(unused)}: not an option of {where}")


def given_flags(parser: argparse.ArgumentParser, args, keep=()) -> dict:
    """Flag -> value of every option of ``parser`` that ``args`` sets away from its default,
    except the dests in ``keep``: what a mode that reads only ``keep`` must refuse."""
    return {
        a.option_strings[0]: getattr(args, a.dest)
        for a in parser._actions
        if a.option_strings
        and a.dest not in keep
        and a.dest != "help"
        and getattr(args, a.dest, a.default) != a.default
    }
