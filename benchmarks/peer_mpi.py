"""Open MPI's MPI_Allreduce through mpi4py, measured exactly as ``dlsys bench allreduce``.

    mpirun -np 2 python benchmarks/peer_mpi.py --size 64MiB [--repeats 10] [--warmup 3]

Same data, same checks, same conventions: a barrier, then MPI.Wtime around Allreduce into
a preallocated receive buffer; each repeat's time is the slowest rank's; rank 0 times a
numpy memcpy of the same size between repeats. Rank 0 prints one JSON record.
"""

import argparse
import json

import numpy as np
from mpi4py import MPI

from dlsys.bench import bandwidth_record, bench_data
from dlsys.net import parse_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size, nbytes = comm.Get_rank(), comm.Get_size(), parse_size(args.size)
    x, want = bench_data(nbytes // 4, rank, size)
    out, copy_dst = np.zeros_like(x), np.zeros_like(x)
    times, copies = [], []
    for i in range(args.warmup + args.repeats):
        comm.Barrier()
        start = MPI.Wtime()
        comm.Allreduce(x, out, op=MPI.SUM)
        elapsed = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
        if not np.array_equal(out, want):
            raise AssertionError(f"rank {rank}: MPI_Allreduce returned a wrong sum in repeat {i}")
        out[:] = 0
        comm.Barrier()
        if rank == 0:
            start = MPI.Wtime()
            np.copyto(copy_dst, x)
            copy_s = MPI.Wtime() - start
        if i >= args.warmup:
            times.append(elapsed)
            copies.append(copy_s if rank == 0 else 0.0)
    if rank == 0:
        lib = MPI.Get_library_version().split(",")[0].strip("\x00 ")
        print(json.dumps(bandwidth_record(size, nbytes, times, copies, benchmark="allreduce",
                                          backend="mpi4py", algorithm=lib, repeats=args.repeats,
                                          warmup=args.warmup)))


if __name__ == "__main__":
    main()
