"""The ``processes`` backend: one OS process per rank, payloads through shared memory.

Why it looks like this:

* Ranks are started with ``subprocess`` (fork+exec of a fresh interpreter), never a bare
  fork, so launching from a multithreaded server (Streamlit) is safe, and never
  multiprocessing's spawn, which re-imports the student's ``__main__`` script. The program
  and its arguments travel by value with cloudpickle (as in joblib/loky and Ray), so
  functions defined in notebooks, lessons and ``python -`` scripts work.
* A payload is written once into a shared-memory segment (a file in /dev/shm) that the
  receiver maps: the receiver's array *is* that memory, no pickling, no second copy, and
  reductions read straight out of it. Segments are pooled: each sender keeps its own
  segments and reuses one as soon as its receiver has dropped every view of the array
  (a flag byte in the segment, cleared by the receiver), and each receiver keeps its
  mappings. A fresh segment per message page-faults on every page on both sides and is
  zeroed by the kernel (a 64 MiB all-reduce was 5x slower, docs/performance.md); a pooled
  one is written at memory speed.
  Memory from ``comm.alloc`` is a segment of its own, and ``isend`` of it is lent, not
  copied: the receiver maps the sender's buffer itself, and when it drops the array a
  one-line "released" frame goes back through the sender's inbox pipe, which completes
  the sender's request (MPI's rendezvous; the ring all-reduce then moves each byte the
  fewest times, docs/performance.md).
  Only a small header travels through the receiver's inbox pipe (one atomic write of at
  most PIPE_BUF bytes, so any number of senders can share one pipe without a lock).
  A reader thread drains the pipe into the rank's mailbox, so sends never block, and a
  waiting rank sleeps on a condition variable: nothing spins.
* A rank that has finished its program keeps draining its inbox until the run ends (the
  launcher then ends it), as an mpi rank serves until every rank has finished: a message
  sent to a finished rank is delivered to a mailbox nobody reads, on every backend.
* Nothing outlives a run, however it ends (the leak policy, dlsys.comm.backends.reaper). A
  run's segments are named /dev/shm/dlsys-<run id>-*, and each rank's command line
  carries ``dlsys-<run id>-rank<r>`` (the run id starts with the launcher's pid). Ranks run
  in their own session (Ctrl-C reaches only the launcher), carry the run's marker in their
  environment and get the kernel's parent-death signal. Then:
  - success, a failing rank, deadlock, deadline, Ctrl-C, SIGTERM, SIGHUP (launch turns
    the last two into SystemExit): the launcher's ``finally`` kills the ranks and closes
    the reaper's pipe; the reaper kills what the ranks forked and sweeps the segments;
  - SIGKILL of the launcher: the kernel kills every rank (parent-death signal, which
    needs no GIL: a rank inside a long C call stops too), and the reaper sees its pipe
    close and does the rest;
  - whatever a killed reaper left: every new run first sweeps the files of dead runs.
"""

from __future__ import annotations

import functools
import math
import mmap
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback

import cloudpickle
import numpy as np

from ..board import DONE, STATE, board_width, new_board
from ..communicator import DEADLINE_GRACE_S
from ..logical import as_logical
from ..mailbox import Aborted, Header, Mailbox
from ..supervise import Outcome, RankFailed, RunSpec, supervise
from .reaper import Reaper, new_run_id, set_parent_death_signal, sweep_dead_runs
from .transport import Backend, MailboxTransport, rank_communicator

SHM_DIR = "/dev/shm"
PIPE_BUF = 4096
_FRAME = struct.Struct("<I")
# A segment starts with this many bytes of control area: byte 0 is the lease flag (1 while
# a receiver may still read the payload). 64 keeps the payload cache-line aligned.
SEGMENT_HEADER = 64
MIN_SEGMENT = 1 << 16
# Smaller payloads are copied even when they could be lent (MPI's eager protocol): below
# this a copy costs less than the receiver's extra "released" wake-up (docs/performance.md).
LEND_MIN_NBYTES = 1 << 20
MAX_PROCESS_RANKS = 256


def _shm_path(run_id: str, name: str) -> str:
    return os.path.join(SHM_DIR, f"dlsys-{run_id}-{name}")


def _map(path: str, nbytes: int | None, create: bool) -> mmap.mmap:
    """Map a segment; ``create`` makes it ``nbytes`` long, otherwise its own length is used."""
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, nbytes if create else os.fstat(fd).st_size)
    finally:
        os.close(fd)


class _Segment:
    """One reusable shared-memory segment of a sender's pool."""

    __slots__ = ("capacity", "mem", "name")

    def __init__(self, name: str, mem: mmap.mmap):
        self.name, self.mem, self.capacity = name, mem, len(mem) - SEGMENT_HEADER


class _Lease:
    """What a received array is a view of: the sender's memory, on loan.

    numpy keeps the object behind ``__array_interface__`` as the array's ``base``, and
    every view of the array keeps that base alive, so this object dies exactly when the
    program has dropped the array and all its views. Then ``on_drop`` gives the memory
    back: a pooled segment's flag byte is cleared, or a lent buffer's sender is told.
    (The receiver read the payload before it dropped the array; the flag store or the
    frame comes after those reads in program order and across the interpreter's locks.)
    """

    __slots__ = ("_on_drop", "_view")

    def __init__(self, view: np.ndarray, on_drop):
        self._view, self._on_drop = view, on_drop

    @property
    def __array_interface__(self):
        return self._view.__array_interface__

    def __del__(self):
        self._on_drop()


class _ProcessTransport(MailboxTransport):
    """Send: copy into a free segment of this rank's pool (or lend comm.alloc memory),
    write a header to dst's pipe. Take: map the sender's segment (once per segment) and
    hand the payload out in place."""

    def __init__(self, rank, run_id, inbox_writers, mailbox):
        super().__init__(mailbox)
        self.rank, self.run_id, self.writers = rank, run_id, inbox_writers
        self.pool: list[_Segment] = []
        self.mapped: dict[str, mmap.mmap] = {}  # other ranks' segments this rank has seen
        self.lendable: list[tuple[int, int, str]] = []  # (first address, end address, name)
        self.loans = 0
        self.long_headers = 0

    def alloc(self, shape, dtype) -> np.ndarray:
        """Zeroed memory in a segment of its own, which post(lend=True) lends (comm.alloc)."""
        count = math.prod(shape)
        if count == 0:
            return np.zeros(shape, dtype)
        name = f"a{self.rank}-{len(self.lendable)}"
        mem = _map(_shm_path(self.run_id, name), count * dtype.itemsize, create=True)
        array = np.frombuffer(mem, dtype, count).reshape(shape)
        start = array.__array_interface__["data"][0]
        self.lendable.append((start, start + array.nbytes, name))
        return array

    def _lendable(self, array) -> tuple[str, int] | None:
        """(segment, byte offset) if array is a contiguous piece of comm.alloc memory."""
        if not array.flags.c_contiguous or type(array) is not np.ndarray:
            return None
        address = array.__array_interface__["data"][0]
        for start, end, name in self.lendable:
            if start <= address and address + array.nbytes <= end:
                return name, address - start
        return None

    def _acquire(self, nbytes: int) -> _Segment:
        """The smallest free segment that fits, or a new one (capacity a power of two, so
        a pool serving varying sizes stays small; untouched pages of /dev/shm cost nothing)."""
        fits = [s for s in self.pool if s.capacity >= nbytes and s.mem[0] == 0]
        if fits:
            segment = min(fits, key=lambda s: s.capacity)
        else:
            size = max(MIN_SEGMENT, 1 << (nbytes + SEGMENT_HEADER - 1).bit_length())
            name = f"s{self.rank}-{len(self.pool)}"
            segment = _Segment(name, _map(_shm_path(self.run_id, name), size, create=True))
            self.pool.append(segment)
        segment.mem[0] = 1
        return segment

    def post(self, dst, header, array, lend=False):
        handle = loan = None
        if lend and array.nbytes >= LEND_MIN_NBYTES and self.lendable and (place := self._lendable(array)):
            self.loans += 1
            handle, loan = (*place, self.loans), self.loans
        elif array.nbytes:
            segment = self._acquire(array.nbytes)
            view = np.frombuffer(segment.mem, array.dtype, array.size, SEGMENT_HEADER)
            np.copyto(view.reshape(array.shape), array, casting="no")
            handle = segment.name
        # A plain tuple with the dtype as a string: pickling the NamedTuple and the dtype
        # object took 12 us a message, a third of a small send.
        frame = pickle.dumps(
            (*header[:5], header.dtype.str, header.shape, handle, header.meta, header.sync),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        if len(frame) + _FRAME.size > PIPE_BUF:  # a long label: the header goes by file
            self.long_headers += 1
            path = _shm_path(self.run_id, f"h{self.rank}-{self.long_headers}")
            with open(path, "wb") as f:
                f.write(frame)
            frame = pickle.dumps(path)
        try:
            os.write(self.writers[dst], _FRAME.pack(len(frame)) + frame)
        except BrokenPipeError:
            pass  # dst's process has died (a finished rank serves until the end): the launcher names it
        return loan

    def take(self, src, tag, deadline):
        header, _ = self.mailbox.take(src, tag, deadline)
        dtype, shape = np.dtype(header.dtype), header.shape
        if header.handle is None:
            return header, as_logical(np.zeros(shape, dtype), header.nbytes)
        name = header.handle[0] if type(header.handle) is tuple else header.handle
        mem = self.mapped.get(name)
        if mem is None:
            mem = self.mapped[name] = _map(_shm_path(self.run_id, name), None, create=False)
        count = math.prod(shape)
        if type(header.handle) is tuple:  # lent: (segment, offset, loan number)
            _, offset, loan = header.handle
            view = np.frombuffer(mem, dtype, count, offset)
            view.flags.writeable = False  # the sender's own buffer: read, never write
            return header, np.asarray(_Lease(view, functools.partial(self._release, header.src, loan))).reshape(shape)
        view = np.frombuffer(mem, dtype, count, SEGMENT_HEADER)
        array = np.asarray(_Lease(view, functools.partial(mem.__setitem__, 0, 0))).reshape(shape)
        return header, as_logical(array, header.nbytes)

    def _release(self, src: int, loan: int) -> None:
        frame = pickle.dumps(loan)
        try:
            os.write(self.writers[src], _FRAME.pack(len(frame)) + frame)
        except BrokenPipeError:
            pass  # the sender has finished: nobody waits for this loan


def _drain_inbox(fd: int, mailbox: Mailbox) -> None:
    """Reader thread: split the inbox pipe into frames: message headers, the numbers of
    loans their receivers dropped, and the files of headers too long for one atomic pipe
    write (PIPE_BUF)."""
    buffer = b""
    while chunk := os.read(fd, 1 << 16):
        buffer += chunk
        while len(buffer) >= _FRAME.size:
            (length,) = _FRAME.unpack_from(buffer)
            if len(buffer) < _FRAME.size + length:
                break
            frame = pickle.loads(buffer[_FRAME.size : _FRAME.size + length])
            buffer = buffer[_FRAME.size + length :]
            if type(frame) is int:
                mailbox.released(frame)
                continue
            if type(frame) is str:  # a long header's file
                with open(frame, "rb") as f:
                    blob = f.read()
                os.unlink(frame)
                frame = pickle.loads(blob)
            mailbox.deliver(Header(*frame), None)


def _child_main() -> None:
    """Entry point of a rank process: read its job from stdin, run, write the outcome,
    then serve (deliver what others still send it) until the launcher ends it."""
    set_parent_death_signal(int(sys.argv[2]))
    job = pickle.loads(sys.stdin.buffer.read())
    sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
    rank, run_id = job["rank"], job["run_id"]
    board = new_board(job["size"], _map(_shm_path(run_id, "board"), None, create=False))
    mailbox = Mailbox(rank, board)
    threading.Thread(target=_drain_inbox, args=(job["inbox"], mailbox), daemon=True).start()
    try:
        spec = cloudpickle.loads(job["spec"])
        transport = _ProcessTransport(rank, run_id, job["writers"], mailbox)
        comm = rank_communicator(spec, rank, transport, board)
        value = spec.program(comm, *spec.args, **spec.kwargs)
        outcome = ("ok", Outcome(value, comm.spans, comm.messages, comm.clock, comm.ops, comm.used_memory))
    except Aborted:
        outcome = ("aborted", None)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent with the traceback
        outcome = ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    blob = cloudpickle.dumps(outcome)
    tmp = _shm_path(run_id, f"result{rank}.tmp")
    with open(tmp, "wb") as f:
        f.write(blob)
    os.rename(tmp, _shm_path(run_id, f"result{rank}"))
    board[rank, STATE] = DONE
    sys.stdout.flush()
    sys.stderr.flush()
    # the launcher ends this process once every rank is done; until then the reader thread
    # delivers what others send here. A backstop in case it never does:
    time.sleep(max(0.0, job["deadline"] + DEADLINE_GRACE_S - time.monotonic()))
    os._exit(0)  # the reader thread blocks in read(); do not wait for it


class ProcessesBackend(Backend):
    name = "processes"
    max_ranks = MAX_PROCESS_RANKS

    def run(self, spec: RunSpec) -> list[Outcome]:
        sweep_dead_runs()
        return _run(spec, new_run_id())


def _run(spec: RunSpec, run_id: str) -> list[Outcome]:
    size = spec.size
    procs: list[subprocess.Popen] = []
    fds: list[int] = []
    outcomes: list = [None] * size
    reaper = Reaper(run_id, [_shm_path(run_id, "*")])
    try:
        board = new_board(size, _map(_shm_path(run_id, "board"), size * board_width(size) * 8, create=True))
        blob = cloudpickle.dumps(spec)  # the deadline is CLOCK_MONOTONIC, the same in every process
        inboxes = [os.pipe() for _ in range(size)]
        fds += [fd for pair in inboxes for fd in pair]
        writers = [w for _, w in inboxes]
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env = dict(reaper.env, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        for rank in range(size):
            job = {
                "rank": rank,
                "size": size,
                "run_id": run_id,
                "spec": blob,
                "sys_path": sys.path,
                "inbox": inboxes[rank][0],
                "writers": writers,
                "deadline": spec.deadline,
            }
            proc = subprocess.Popen(
                # -P: not the working directory's dlsys, the launcher's (PYTHONPATH)
                [
                    sys.executable,
                    "-P",
                    "-c",
                    "from dlsys.comm.backends.processes import _child_main; _child_main()",
                    f"dlsys-{run_id}-rank{rank}",  # names the run in ps: the marker tests and users look for
                    str(os.getpid()),
                ],  # the parent whose death must end the rank
                stdin=subprocess.PIPE,
                pass_fds=[inboxes[rank][0], *writers],
                start_new_session=True,
                env=env,
            )
            procs.append(proc)
            proc.stdin.write(pickle.dumps(job))
            proc.stdin.close()
        for fd in fds:
            os.close(fd)
        fds = []

        def finished():
            for rank, proc in enumerate(procs):
                if outcomes[rank] is None and (board[rank, STATE] == DONE or proc.poll() is not None):
                    outcomes[rank] = _collect(run_id, rank, proc.poll())
            return all(o is not None for o in outcomes)

        supervise(board, finished, time.sleep, spec.deadline, poll_s=0.01)
        return outcomes
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            proc.wait()
        for fd in fds:
            os.close(fd)
        reaper.close()  # what the ranks forked, and the segments


def _collect(run_id: str, rank: int, returncode: int | None) -> Outcome:
    path = _shm_path(run_id, f"result{rank}")
    if not os.path.exists(path):
        how = (
            f"killed by {signal.Signals(-returncode).name}"
            if returncode and returncode < 0
            else f"exit code {returncode}: os._exit() or a crash"
        )
        raise RankFailed(rank, f"the rank process ended ({how}) without reporting a result")
    with open(path, "rb") as f:
        outcome = pickle.loads(f.read())
    if outcome[0] == "error":
        raise RankFailed(rank, outcome[1], outcome[2])
    if outcome[0] == "aborted":
        raise RankFailed(rank, "aborted")
    return outcome[1]
