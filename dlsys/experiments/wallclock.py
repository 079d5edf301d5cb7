"""Benchmarks of dlsys itself: how fast the real bytes move, how far the emulation scales.

Two different questions, two different clocks:

* ``allreduce_bench``: the *real* wall-clock time of an all-reduce of real float32 data
  between real processes (the ``processes`` backend: shared memory), measured inside the
  ranks around the collective (a barrier first, so process start-up is excluded), median
  of repeats after warm-up, the result checked on every repeat. Reported as nccl-tests
  does: algbw = n / t, busbw = algbw * 2(p-1)/p; and against numpy's memcpy bandwidth
  for the same n, measured by rank 0 in the same run between the repeats.
* ``dlsys.experiments.emulation.emulate``: the wall time and peak memory this machine
  needs to *emulate* a large cluster on the ``threads`` backend (virtual time), with
  payloads of a logical size far above what is allocated (``dlsys.experiments.budget``).

    dlsys bench allreduce --ranks 2 --size 64MiB [--algo ring] [--backend mpi] [--json]
    dlsys bench latency [--size 8B] [--json]
    dlsys bench emulate --scheme ring --ranks 512 [--json]

(The command line is ``dlsys.cli.bench``.)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

from .. import collectives
from ..checks import check_int
from ..comm.backends import BACKENDS, MAX_PROCESS_RANKS
from ..comm.launch import launch
from ..machine.net import busbw_factor, parse_size
from ..machine.netstack import fit_alpha_beta
from ..units import format_bytes
from . import DEFAULT_MAX_MEMORY_BYTES
from .budget import PROCESS_RANK_BYTES

MAX_BENCH_NBYTES = 2**30
# per rank: the pattern, the input, the expected sum (bench_data); x and out; rank 0's memcpy target
REAL_BUFFERS = 6
PATTERN = 251  # inputs are small integers, so float32 sums over <= 256 ranks are exact


# --- the real data path -----------------------------------------------------------------


def bench_data(count: int, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(rank's input, the exact sum every rank must get): small integers times rank + 1."""
    pattern = (np.arange(count) % PATTERN).astype(np.float32)
    return pattern * np.float32(rank + 1), pattern * np.float32(size * (size + 1) // 2)


BUFFERS = ("alloc", "plain")
BENCH_BACKENDS = ("processes", "mpi")  # the real data paths (threads share one process: nothing moves)


def _allreduce_program(
    comm, count: int, algorithm: str, warmup: int, repeats: int, buffers: str = "alloc", peer: bool = False
):
    """Rank program: time ``warmup + repeats`` all-reduces; rank 0 also times memcpy.

    Returns (seconds per timed all-reduce, seconds per memcpy, the peer's) for this rank;
    ``peer`` (mpi backend): then the same repeats of the MPI library's own MPI_Allreduce
    (``library_allreduce``, same data, same checks). The input and
    the result buffer (passed as ``out``, as MPI_Allreduce's recvbuf) are allocated once:
    so the loop measures communication, not malloc. ``buffers="alloc"`` takes them from
    ``comm.alloc``, as nccl-tests allocates and registers its buffers, and the ring lends
    its blocks; ``"plain"`` uses ordinary numpy memory, and every send is a copy.
    """
    data, want = bench_data(count, comm.rank, comm.size)
    alloc = comm.alloc if buffers == "alloc" else np.zeros
    x, out = alloc(count, np.float32), alloc(count, np.float32)
    x[:] = data
    copy_dst = np.zeros_like(x) if comm.rank == 0 else None
    times, copies = [], []
    for i in range(warmup + repeats):
        collectives.barrier(comm)
        start = time.perf_counter()
        collectives.allreduce(comm, x, algorithm=algorithm, out=out)
        elapsed = time.perf_counter() - start
        if not np.array_equal(out, want):
            raise AssertionError(f"rank {comm.rank}: all-reduce ({algorithm}) returned a wrong sum in repeat {i}")
        out[:] = 0  # a stale correct result must not pass the next check
        collectives.barrier(comm)  # memcpy below runs while every other rank waits, idle
        if copy_dst is not None:
            start = time.perf_counter()
            np.copyto(copy_dst, x)
            copy_s = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed)
            if copy_dst is not None:
                copies.append(copy_s)
    return times, copies, library_allreduce(x, want, warmup, repeats) if peer else None


def library_allreduce(x: np.ndarray, want: np.ndarray, warmup: int, repeats: int) -> tuple[str, list[float]]:
    """The MPI library's MPI_Allreduce through mpi4py, timed as ``_allreduce_program`` times
    ours: a barrier, MPI.Wtime around Allreduce into a preallocated buffer, each repeat the
    slowest rank's time, every result checked. Returns (the library's name, times)."""
    from mpi4py import MPI

    world, out, times = MPI.COMM_WORLD, np.zeros_like(x), []
    for i in range(warmup + repeats):
        world.Barrier()
        start = MPI.Wtime()
        world.Allreduce(x, out, op=MPI.SUM)
        elapsed = world.allreduce(MPI.Wtime() - start, op=MPI.MAX)
        if not np.array_equal(out, want):
            raise AssertionError(f"rank {world.Get_rank()}: MPI_Allreduce returned a wrong sum in repeat {i}")
        out[:] = 0
        if i >= warmup:
            times.append(elapsed)
    return MPI.Get_library_version().split(",")[0].strip("\x00 "), times


def allreduce_bench(
    ranks: int = 2,
    size="64MiB",
    algorithm: str = "ring",
    repeats: int = 10,
    warmup: int = 3,
    timeout_s: float = 600.0,
    buffers: str = "alloc",
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    backend: str = "processes",
) -> dict:
    """Wall-clock all-reduce of float32 data on ``ranks`` processes, vs memcpy (see module doc).

    ``backend``: ``processes`` (shared memory) or ``mpi`` (MPI messages; then the record's
    ``peer`` is the MPI library's own MPI_Allreduce in the same run, and ``ratio_to_peer``
    our busbw over its).

    Each repeat's time is the slowest rank's (the collective is done when the last rank
    is); ``wall_time_s`` is the median over repeats, and ``memcpy_Bps`` is n over the
    median time of ``np.copyto`` of the same n bytes. ``buffers``: ``alloc`` (lent sends)
    or ``plain`` (copied sends; see ``_allreduce_program``). The bytes are real (this
    measures the data path), so ranks x (``REAL_BUFFERS`` x size + an interpreter) must fit
    ``max_memory_bytes``. Returns a JSON-ready record.
    """
    if buffers not in BUFFERS:
        raise ValueError(f"buffers must be one of {', '.join(BUFFERS)}, got {buffers!r}")
    if backend not in BENCH_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BENCH_BACKENDS)}, got {backend!r}")
    ranks = check_int("ranks", ranks, 1, MAX_PROCESS_RANKS)
    repeats, warmup = check_int("repeats", repeats, 1, 10_000), check_int("warmup", warmup, 0, 10_000)
    collectives.check_algorithm("allreduce", algorithm)
    nbytes = parse_size(size)
    if not (4 <= nbytes <= MAX_BENCH_NBYTES and nbytes % 4 == 0):
        raise ValueError(f"size must be a multiple of 4 bytes (float32) in 4..{MAX_BENCH_NBYTES}, got {nbytes}")
    need = ranks * (REAL_BUFFERS * nbytes + PROCESS_RANK_BYTES)
    if need > max_memory_bytes:
        raise ValueError(
            f"{ranks} rank processes with {REAL_BUFFERS} real buffers of {format_bytes(nbytes)} each need "
            f"{format_bytes(need)}, "
            f"more than the memory budget {format_bytes(max_memory_bytes)} (--max-memory): "
            "the real data path cannot scale its buffers; lower --ranks or --size"
        )
    peer = backend == "mpi"
    result = launch(
        _allreduce_program,
        ranks,
        backend,
        args=(nbytes // 4, algorithm, warmup, repeats, buffers, peer),
        record=False,
        timeout_s=timeout_s,
    )
    per_repeat = [max(ts) for ts in zip(*(times for times, _, _ in result.values))]
    memcpy = result.values[0][1]
    record = bandwidth_record(
        ranks,
        nbytes,
        per_repeat,
        memcpy,
        benchmark="allreduce",
        backend=backend,
        algorithm=algorithm,
        buffers=buffers,
        repeats=repeats,
        warmup=warmup,
    )
    if peer:
        library, times = result.values[0][2]
        record["peer"] = bandwidth_record(
            ranks,
            nbytes,
            times,
            memcpy,
            benchmark="allreduce",
            backend="mpi4py",
            algorithm=library,
            repeats=repeats,
            warmup=warmup,
        )
        record["ratio_to_peer"] = record["busbw_Bps"] / record["peer"]["busbw_Bps"]
    return record


def bandwidth_record(ranks: int, nbytes: int, times_s, memcpy_times_s, **about) -> dict:
    """The all-reduce record every implementation reports (dlsys and its peers alike):
    median time over repeats (each the slowest rank's), algbw = n / t, busbw = algbw *
    2(p-1)/p (nccl-tests), memcpy_Bps = n / median memcpy time, and their ratio."""
    t = statistics.median(times_s)
    algbw = nbytes / t
    busbw = algbw * busbw_factor("allreduce", ranks)
    memcpy_bps = nbytes / statistics.median(memcpy_times_s)
    return {
        **about,
        "ranks": ranks,
        "nbytes": nbytes,
        "dtype": "float32",
        "correct": True,
        "wall_time_s": t,
        "times_s": list(times_s),
        "algbw_Bps": algbw,
        "busbw_Bps": busbw,
        "memcpy_Bps": memcpy_bps,
        "ratio_to_memcpy": busbw / memcpy_bps,
    }


def _pingpong_program(comm, nbytes: int, warmup: int, repeats: int) -> list[float]:
    x = np.zeros(nbytes, np.uint8)
    times = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        if comm.rank == 0:
            comm.send(x, 1)
            got = comm.recv(source=1)
        else:
            got = comm.recv(source=0)
            comm.send(x, 0)
        if i >= warmup:
            times.append(time.perf_counter() - start)
        if got.nbytes != nbytes:
            raise AssertionError(f"rank {comm.rank}: ping-pong got {got.nbytes} bytes, sent {nbytes}")
    return times


_PIPE_ECHO = "import os,sys\nr,w=int(sys.argv[1]),int(sys.argv[2])\nwhile m:=os.read(r,1<<16): os.write(w,m)"


def _while_reading(send, read, nbytes: int) -> None:
    """Send (in a thread, if the message is larger than a pipe's or a socket's buffer:
    the echo writes back while we still send, and would block) and read nbytes back."""
    if nbytes <= 32 * 1024:
        send()
    else:
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
    got = 0
    while got < nbytes:
        n = read(nbytes - got)
        if not n:
            raise ConnectionError(f"the echo closed after {got} of {nbytes} bytes")
        got += n
    if nbytes > 32 * 1024:
        sender.join(timeout=60)


def _pipe_round_trips(nbytes: int, warmup: int, repeats: int) -> list[float]:
    """The floor under dlsys's small messages: two processes, two pipes, no dlsys, each
    round trip waking the other process twice, as a dlsys ping-pong does."""
    to_r, to_w = os.pipe()
    back_r, back_w = os.pipe()
    # its own session: a terminal's Ctrl-C reaches only us, not a child that would print a
    # traceback; closing to_w (finally) ends it, as does our death
    echo = subprocess.Popen(
        [sys.executable, "-c", _PIPE_ECHO, str(to_r), str(back_w)], pass_fds=(to_r, back_w), start_new_session=True
    )
    os.close(to_r), os.close(back_w)
    message, times = memoryview(b"x" * nbytes), []

    def write_all():
        sent = 0
        while sent < nbytes:
            sent += os.write(to_w, message[sent:])

    try:
        for i in range(warmup + repeats):
            start = time.perf_counter()
            _while_reading(write_all, lambda need: len(os.read(back_r, need)), nbytes)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    finally:
        os.close(to_w)
        echo.wait(timeout=10)
        os.close(back_r)
    return times


def latency_bench(size="8B", repeats: int = 1000, warmup: int = 50, timeout_s: float = 600.0) -> dict:
    """Round-trip time of a ping-pong of ``size`` bytes between two processes backend
    ranks (median of repeats), next to the same ping-pong over bare pipes in the same run."""
    repeats, warmup = check_int("repeats", repeats, 1, 1_000_000), check_int("warmup", warmup, 0, 1_000_000)
    nbytes = parse_size(size)
    if not 1 <= nbytes <= 4096:
        raise ValueError(
            f"size must be 1..4096 bytes (a small message; use bench allreduce for bandwidth), got {nbytes}"
        )
    result = launch(
        _pingpong_program, 2, "processes", args=(nbytes, warmup, repeats), record=False, timeout_s=timeout_s
    )
    ours = statistics.median(result.values[0])
    pipes = statistics.median(_pipe_round_trips(nbytes, warmup, repeats))
    return {
        "benchmark": "latency",
        "backend": "processes",
        "nbytes": nbytes,
        "repeats": repeats,
        "round_trip_s": ours,
        "pipe_round_trip_s": pipes,
        "ratio_to_pipes": ours / pipes,
    }


# --- one message through real local transports ----------------------------------------------

_TCP_ECHO = """import socket,sys
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(1); print(s.getsockname()[1],flush=True)
c,_=s.accept(); c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,int(sys.argv[1]))
buf=bytearray(1<<20)
while n:=c.recv_into(buf): c.sendall(memoryview(buf)[:n])
"""
STACK_SIZES = (8, 1024, 64 * 1024, 1 << 20, 16 << 20, 64 << 20)
TRANSPORTS = ("pipe", "tcp-nodelay", "tcp", "shared-memory", "mpi")
BACKEND_OF = {"shared-memory": "processes", "mpi": "mpi"}  # the transports that are dlsys backends


def available_transports() -> list[str]:
    """The transports this machine can measure (mpi needs mpi4py and mpirun)."""
    return [t for t in TRANSPORTS if t not in BACKEND_OF or BACKENDS[BACKEND_OF[t]].unavailable() is None]


def _pingpong_sizes_program(comm, sizes: list[int]) -> list[list[float]]:
    """Ping-pong at every size in one run (one mpirun, one set of rank processes)."""
    return [_pingpong_program(comm, nbytes, 2, _repeats(nbytes)) for nbytes in sizes]


def _repeats(nbytes: int) -> int:
    return 200 if nbytes <= 1024 else 50 if nbytes <= 64 * 1024 else 10 if nbytes <= 1 << 20 else 3


def _tcp_round_trips(nbytes: int, nodelay: bool, warmup: int, repeats: int) -> list[float]:
    """Round trips over a TCP loopback socket to an echoing child (Nagle's algorithm on or off)."""
    import socket

    echo = subprocess.Popen(
        [sys.executable, "-c", _TCP_ECHO, str(int(nodelay))], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        port = int(echo.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(nodelay))
            message, back, times = b"x" * nbytes, memoryview(bytearray(nbytes)), []
            for i in range(warmup + repeats):
                start = time.perf_counter()
                _while_reading(
                    lambda: sock.sendall(message), lambda need: sock.recv_into(back[nbytes - need :]), nbytes
                )
                if i >= warmup:
                    times.append(time.perf_counter() - start)
    finally:
        echo.kill()
        echo.wait(timeout=10)
    return times


def stack_bench(sizes=STACK_SIZES, transports=TRANSPORTS, timeout_s: float = 600.0) -> dict:
    """One-way time of one message (half the median round trip) through real local
    transports at each size, and alpha and beta fitted to each (netstack.fit_alpha_beta):
    a pipe, a TCP loopback socket with and without TCP_NODELAY, dlsys's shared-memory
    processes backend and its mpi backend (MPI messages, where installed). The emulator's presets are models of real networks; these are
    measured here, to show that alpha and beta are measurable, not made up."""
    sizes = [check_int("size", parse_size(s) if isinstance(s, str) else s, 1, MAX_BENCH_NBYTES) for s in sizes]
    unknown = set(transports) - set(TRANSPORTS)
    if unknown:
        raise ValueError(f"transports: unknown {', '.join(sorted(unknown))}; valid: {', '.join(TRANSPORTS)}")
    for transport in set(transports) & set(BACKEND_OF):
        if (why := BACKENDS[BACKEND_OF[transport]].unavailable()) is not None:
            raise ValueError(f"transports: {transport} cannot run here: {why}")
    rows = []
    for transport in transports:
        if transport in BACKEND_OF:
            per_size = launch(
                _pingpong_sizes_program, 2, BACKEND_OF[transport], args=(sizes,), record=False, timeout_s=timeout_s
            ).values[0]
        else:
            per_size = [
                _pipe_round_trips(n, 2, _repeats(n))
                if transport == "pipe"
                else _tcp_round_trips(n, transport == "tcp-nodelay", 2, _repeats(n))
                for n in sizes
            ]
        rows += [
            {"transport": transport, "nbytes": nbytes, "one_way_s": statistics.median(times) / 2, "repeats": len(times)}
            for nbytes, times in zip(sizes, per_size)
        ]
    fits = {}
    for transport in transports:
        mine = [r for r in rows if r["transport"] == transport]
        alpha, beta = fit_alpha_beta([r["nbytes"] for r in mine], [r["one_way_s"] for r in mine])
        fits[transport] = {"alpha_s": alpha, "beta_s_per_byte": beta, "bandwidth_Bps": 1 / beta if beta > 0 else None}
    return {"benchmark": "stack", "rows": rows, "fits": fits}
