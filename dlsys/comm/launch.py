"""``launch``: run one rank program on every rank of a world, on a chosen backend.

    result = dlsys.launch(program, world_size=4, backend="processes", link="rdma-edr")
    result.values          # each rank's return value
    result.trace           # the virtual-time trace (dlsys.comm.trace.Trace)
    result.virtual_time_s  # the emulated makespan
    result.wall_time_s     # how long it really took here
    result.memory          # each rank's MemoryLedger, if the program used comm.memory

Input is checked before any rank starts. Nothing hangs: a failing or killed rank fails the
run with its traceback, a deadlock (every live rank waiting, nothing in flight) is detected
and reported, and the whole run has a wall-clock deadline (dlsys.comm.supervise).
``backend`` is a name in the registry ``dlsys.comm.backends.BACKENDS``.

Nothing outlives a run, however it ends. While a run is under way in the main thread,
SIGTERM (``kill PID``) and SIGHUP (the terminal closed) raise SystemExit(128 + signal)
there, as Ctrl-C raises KeyboardInterrupt, if they still have their default action: the
backend's ``finally`` ends the ranks and the process exits with the shell's status for
that signal (143, 129). An application that handles them itself keeps its handling.
SIGKILL runs nothing of the launcher: the kernel and the run's reaper end the ranks
(dlsys.comm.backends.reaper).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..checks import check_int
from ..machine.fabric import Fabric
from ..machine.net import LinkModel, NodeModel, get_node
from ..machine.topology import DEFAULT_LINK, Topology, get_network, sharing_of
from .backends import BACKENDS
from .replay import replay
from .supervise import RunSpec, RunTimeout
from .trace import Trace

BACKEND_ENV = "DLSYS_BACKEND"


@dataclass
class LaunchResult:
    values: list
    trace: Trace
    clocks_s: list
    wall_time_s: float
    backend: str
    network: Topology  # the link between every pair of ranks (its ``link``: inside a supernode)
    nodes: tuple
    sharing: bool = False  # times from a replay in which messages share links (dlsys.comm.replay)
    segments: list | None = None  # under sharing: (route, from_s, to_s, rate_Bps) of the messages' bytes
    ops: list | None = None  # each rank's operations in program order, when logged (RunSpec.log_ops)
    memory: list | None = None  # each rank's MemoryLedger when the program used comm.memory (else None)

    @property
    def virtual_time_s(self) -> float:
        """Emulated makespan: the latest final clock of any rank."""
        return max(self.clocks_s)

    @property
    def world_size(self) -> int:
        return len(self.values)


def launch(
    program: Callable,
    world_size: int,
    backend: str = "processes",
    *,
    link: str | LinkModel | Topology = DEFAULT_LINK,
    node: str | NodeModel | Sequence = "laptop-cpu",
    seed: int = 0,
    args: tuple = (),
    kwargs: dict | None = None,
    charge_reductions: bool = False,
    record: bool = True,
    timeout_s: float = 600.0,
    topology: str | Topology | None = None,
    sharing: bool | None = None,
    eager_limit_bytes: int | None = None,
) -> LaunchResult:
    """Run ``program(comm, *args, **kwargs)`` on ``world_size`` ranks and collect the results.

    ``node`` is one node model for all ranks or a sequence of one per rank (a straggler is
    ``get_node("v100").slowed(4)``). ``charge_reductions`` adds n * gamma for every reduced
    byte. ``record=False`` skips the trace (faster for huge emulations). The network, resolved
    here once (``dlsys.machine.topology.get_network``): ``link`` (a preset or LinkModel) for
    every pair, or ``topology``, a link per pair ("flat" on ``link``, "taihulight", or a
    Topology); rank r is node r of it. ``sharing``: the times (trace, clocks) come from a
    replay of the run's operations in which concurrent messages share the links of
    ``network.fabric(world_size)`` max-min fairly (dlsys.comm.replay; values are the
    run's); None (the default) is the network's own model (``topology.sharing_of``: shared
    where the ranks span links above the nodes, the per-pair clock on a flat network or in
    one supernode, where it is the closed forms exactly); False across supernodes: static
    per-pair shares.
    ``eager_limit_bytes``: every send of more bytes is synchronous (as
    ``comm.ssend``: it returns once the receiver has posted the matching receive), as MPI
    switches from its eager to its rendezvous protocol above a threshold (MPICH ch3:
    MPIDI_CH3_EAGER_MAX_MSG_SIZE, 256 KiB, src/mpid/ch3/include/mpidi_ch3_post.h); 0 makes
    every send synchronous, None (the default) none. The environment variable ``DLSYS_BACKEND``, if set,
    replaces ``backend`` in every launch (``DLSYS_BACKEND=mpi python lesson.py`` runs a
    lesson's ranks on MPI).
    """
    backend, size, seed, nodes, network = _check(
        program, world_size, backend, node, seed, timeout_s, args, topology, link
    )
    asked, sharing = sharing, sharing_of(network, sharing, size)
    if eager_limit_bytes is not None:
        eager_limit_bytes = check_int("eager_limit_bytes", eager_limit_bytes, 0)
        if sharing:  # refused, not run on static shares instead: that would change the network model unasked
            raise ValueError(
                "eager_limit_bytes: synchronous sends cannot run with shared links (the replay does not "
                "model them), "
                + (
                    "sharing=True"
                    if asked
                    else f"the {network.name} topology's own model across supernodes (sharing=None)"
                )
                + "; pass eager_limit_bytes=None, or sharing=False for the per-pair clock with static shares"
            )
    fabric = network.fabric(size) if sharing else None
    spec = RunSpec(
        program,
        tuple(args),
        dict(kwargs or {}),
        size,
        network,
        nodes,
        seed,
        bool(charge_reductions),
        bool(record) and not sharing,
        time.monotonic() + timeout_s,
        sharing,
        bool(record),
        eager_limit_bytes,
    )
    start = time.perf_counter()
    try:
        with _exit_on_termination():
            outcomes = BACKENDS[backend].run(spec)
    except RunTimeout as exc:
        raise RunTimeout(exc.ranks, timeout_s) from None  # the same report, with the timeout_s it passed
    return _result(spec, outcomes, backend, fabric, start)


def _check(program, world_size, backend, node, seed, timeout_s, args, topology, link) -> tuple:
    """launch's input, checked before any rank starts: (backend, world size, seed, a node per
    rank, network)."""
    if not callable(program):
        raise TypeError(f"program must be a callable program(comm, ...), got {type(program).__name__}")
    if BACKEND_ENV in os.environ:  # a lesson or script, unchanged, on a cluster (docs/mpi.md)
        backend = os.environ[BACKEND_ENV]
        if backend not in BACKENDS:
            raise ValueError(
                f"the environment variable {BACKEND_ENV} must be one of {', '.join(BACKENDS)}; got {backend!r}"
            )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    size = check_int("world_size", world_size, 1, BACKENDS[backend].max_ranks)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s < math.inf):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s!r}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of extra arguments, got {type(args).__name__}")
    if isinstance(node, (str, NodeModel)):
        nodes = (get_node(node),) * size
    else:
        nodes = tuple(get_node(n) for n in node)
        if len(nodes) != size:
            raise ValueError(f"node: a sequence of node models needs one per rank ({size}), got {len(nodes)}")
    network = get_network(topology, link, "topology")
    network.check_nodes(size, "world_size")
    return backend, size, seed, nodes, network


def _result(spec: RunSpec, outcomes: list, backend: str, fabric: Fabric | None, start: float) -> LaunchResult:
    """The ranks' outcomes as a LaunchResult: their trace and clocks, or, with sharing, a
    replay's (dlsys.comm.replay; the values are the run's)."""
    values = [o.value for o in outcomes]
    ledgers = [o.memory for o in outcomes]
    memory = ledgers if any(ledger is not None for ledger in ledgers) else None
    network, nodes = spec.network, spec.nodes
    if fabric is not None:  # sharing: the times are the replay's
        replayed = replay([o.ops or [] for o in outcomes], network, nodes, fabric, spec.log_labels, fast=True)
        return LaunchResult(
            values,
            replayed.trace,
            replayed.clocks_s,
            time.perf_counter() - start,
            backend,
            network,
            nodes,
            True,
            replayed.segments,
            [o.ops for o in outcomes],
            memory,
        )
    wall = time.perf_counter() - start
    spans = [s for o in outcomes for s in o.spans]
    messages = sorted((m for o in outcomes for m in o.messages), key=lambda m: (m.arrive_s, m.dst, m.src))
    return LaunchResult(
        values,
        Trace(spans, messages, spec.size),
        [o.clock_s for o in outcomes],
        wall,
        backend,
        network,
        nodes,
        ops=[o.ops for o in outcomes] if spec.log_ops else None,
        memory=memory,
    )


TERMINATION = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _exit_on_termination():
    """SIGTERM and SIGHUP raise SystemExit(128 + signal) while the run is under way (see
    the module docstring); the previous actions are restored when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mine = [s for s in TERMINATION if signal.getsignal(s) is signal.SIG_DFL]
    for s in mine:
        signal.signal(s, _raise_exit)
    try:
        yield
    finally:
        for s in mine:
            signal.signal(s, signal.SIG_DFL)


def _raise_exit(signum, frame):
    for s in TERMINATION:  # a second signal must not cut the teardown short
        signal.signal(s, signal.SIG_IGN)
    raise SystemExit(128 + signum)
