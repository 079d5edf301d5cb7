"""Open MPI's MPI_Allreduce through mpi4py, measured exactly as ``dlsys bench allreduce``.

    mpirun -np 2 python benchmarks/peer_mpi.py --size 64MiB [--repeats 10] [--warmup 3]

Same data, same checks, same conventions (``dlsys.experiments.wallclock.library_allreduce``, which
``dlsys bench allreduce --backend mpi`` runs beside our ring): a barrier, then MPI.Wtime
around Allreduce into a preallocated receive buffer; each repeat's time is the slowest
rank's; rank 0 then times a numpy memcpy of the same size. Rank 0 prints one JSON record.
"""

import argparse
import json

import numpy as np
from mpi4py import MPI

from dlsys.experiments.wallclock import bandwidth_record, bench_data, library_allreduce
from dlsys.machine.net import parse_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size, nbytes = comm.Get_rank(), comm.Get_size(), parse_size(args.size)
    x, want = bench_data(nbytes // 4, rank, size)
    lib, times = library_allreduce(x, want, args.warmup, args.repeats)
    if rank == 0:
        copy_dst, copies = np.zeros_like(x), []
        for _ in range(args.repeats):
            start = MPI.Wtime()
            np.copyto(copy_dst, x)
            copies.append(MPI.Wtime() - start)
        print(
            json.dumps(
                bandwidth_record(
                    size,
                    nbytes,
                    times,
                    copies,
                    benchmark="allreduce",
                    backend="mpi4py",
                    algorithm=lib,
                    repeats=args.repeats,
                    warmup=args.warmup,
                )
            )
        )


if __name__ == "__main__":
    main()
