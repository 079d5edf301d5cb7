"""Backends: name -> a way to run a world (``Backend``), each rank talking through a
``Transport`` (the interface, in base.py). Adding one is one file here and one entry below.

* ``threads``: every rank a thread of this process, taking turns (baton.py): fast start,
  hundreds of ranks for emulation;
* ``processes``: one OS process per rank, payloads through shared memory (the default);
* ``mpi``: one MPI process per rank (mpi4py; started by mpirun, across hosts too).
"""

from .mpi import MPIBackend
from .processes import LEND_MIN_NBYTES, MAX_PROCESS_RANKS, ProcessesBackend
from .threads import MAX_THREAD_RANKS, ThreadsBackend
from .transport import Backend, Transport

BACKENDS: dict[str, Backend] = {b.name: b for b in (ThreadsBackend(), ProcessesBackend(), MPIBackend())}

__all__ = ["BACKENDS", "LEND_MIN_NBYTES", "MAX_PROCESS_RANKS", "MAX_THREAD_RANKS", "Backend", "Transport"]
