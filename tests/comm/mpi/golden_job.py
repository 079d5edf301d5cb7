"""Run under mpirun (tests/comm/test_mpi.py): every collective algorithm on the mpi backend at
the MPI world's size, as a script a student runs with ``mpirun -n P python script.py``;
rank 0 also runs each on the threads backend and writes, per case, whether values and
trace are equal, to the JSON file argv[1]."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "golden"))

import make_golden  # noqa: E402
from mpi4py import MPI  # noqa: E402

from dlsys import collectives  # noqa: E402


def record(result) -> dict:
    return {"values": [make_golden.digest(v) for v in result.values], **make_golden.trace_record(result)}


def main() -> None:
    size, rank = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    equal = {}
    for collective, algorithms in collectives.ALGORITHMS.items():
        for algorithm in algorithms:
            on_mpi = make_golden.run_collective(collective, algorithm, size, "mpi")
            if rank == 0:
                on_threads = make_golden.run_collective(collective, algorithm, size, "threads")
                equal[f"{collective}/{algorithm}"] = record(on_mpi) == record(on_threads)
    if rank == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(equal, f)


if __name__ == "__main__":
    main()
