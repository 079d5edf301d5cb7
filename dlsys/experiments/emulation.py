"""How far the emulation scales on this machine: the wall time and peak memory one all-reduce
(``ring``) or one parameter-server round (``ps``) of a large model needs on the ``threads``
backend (virtual time), with payloads of a logical size far above what is allocated
(``dlsys.experiments.budget``). The real bytes' clock is ``dlsys.experiments.wallclock``.

    dlsys bench emulate --scheme ring --ranks 512 [--json]
"""

from __future__ import annotations

import math
import resource

import numpy as np

from .. import collectives
from ..checks import check_int
from ..collectives.dispatch import closed_form
from ..comm.backends import MAX_THREAD_RANKS
from ..comm.launch import launch
from ..machine.net import get_link
from ..machine.profiles import totals
from ..ps import ps_round
from ..units import format_bytes
from . import DEFAULT_MAX_MEMORY_BYTES, BufferPlan, plan_buffers, plan_record, ps_closed_form_s

BOARD_PAIR_BYTES = 24  # per pair of ranks: the status board's two float64 counters and a mailbox's list slot
RING_PAIR_BYTES = 400  # per pair of ranks in the ring emulation, measured (issue 28): each rank also holds p
# block views (np.array_split) and their sums; peak RSS 69 MiB at 256 ranks, 431 MiB at 1024, i.e. about
# 380 B per added pair (bench emulate --ranks N --json, peak_rss_bytes)


def _ring_program(comm, plan: BufferPlan):
    total = collectives.allreduce(comm, plan.full(comm.rank + 1), algorithm="ring")
    return bool(np.all(total == comm.size * (comm.size + 1) // 2))


def _ps_program(comm, plan: BufferPlan):
    """One synchronous parameter-server round (``dlsys.ps.ps_round``), rank 0 the server."""
    weights = ps_round(comm, None if comm.rank == 0 else plan.full(comm.rank))
    return bool(np.all(weights == comm.size / 2))


def emulate(
    scheme: str = "ring",
    ranks: int = 512,
    params: int | None = None,
    link="tcp-10gbe",
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    timeout_s: float = 600.0,
) -> dict:
    """Emulate one all-reduce (``ring``) or one parameter-server round (``ps``, rank 0 the
    server) of a ``params``-float32 gradient (default: AlexNet) on ``ranks`` threads, on
    real buffers within ``max_memory_bytes`` (``experiments.plan_buffers``: exact logical
    sizes, one real element per ring block if the blocks are uneven).

    Returns wall time, messages per wall second, the process's peak resident memory so far
    (run it in a fresh process to measure one emulation), the virtual time and its closed
    form (the ring's at its largest block, which sets every step).
    """
    if scheme not in ("ring", "ps"):
        raise ValueError(f"scheme must be 'ring' or 'ps', got {scheme!r}")
    ranks = check_int("ranks", ranks, 2, MAX_THREAD_RANKS)
    params = totals("alexnet")[0] if params is None else check_int("params", params, 1, 10**12)
    link = get_link(link)
    pair_bytes = RING_PAIR_BYTES if scheme == "ring" else BOARD_PAIR_BYTES
    overhead = ranks * ranks * pair_bytes  # what grows with the ranks squared, besides the buffers
    if overhead >= max_memory_bytes:
        raise ValueError(
            f"ranks must be in 2..{math.isqrt(max_memory_bytes // pair_bytes - 1)} for the {scheme} "
            f"emulation within the memory budget {format_bytes(max_memory_bytes)}: {ranks} ranks need "
            f"about {format_bytes(overhead)} besides their buffers ({pair_bytes} B per pair of ranks)"
        )
    if scheme == "ring":
        plan = plan_buffers(
            params, ranks, unit=ranks, split_per_block=True, max_memory_bytes=max_memory_bytes, overhead_bytes=overhead
        )
        program, messages = _ring_program, 2 * ranks * (ranks - 1)
        closed = closed_form("allreduce", "ring", ranks, ranks * -(-params // ranks) * 4, link)
    else:
        plan = plan_buffers(params, ranks, max_memory_bytes=max_memory_bytes, overhead_bytes=overhead)
        program, messages = _ps_program, 2 * (ranks - 1)
        closed = ps_closed_form_s(ranks - 1, params * 4, link)
    result = launch(program, ranks, "threads", link=link, args=(plan,), record=False, timeout_s=timeout_s)
    if not all(result.values):
        raise AssertionError(f"{scheme}: a rank returned a wrong result")
    t = result.virtual_time_s
    return {
        "benchmark": "emulate",
        "scheme": scheme,
        "backend": "threads",
        "ranks": ranks,
        "params": params,
        "logical_nbytes": params * 4,
        "link": link.name,
        "messages": messages,
        "wall_time_s": result.wall_time_s,
        "messages_per_s": messages / result.wall_time_s,
        "peak_rss_bytes": _peak_rss_bytes(),
        "virtual_time_s": t,
        "closed_form_s": closed,
        "relative_error": abs(t - closed) / closed,
        **plan_record(plan, max_memory_bytes),
    }


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
