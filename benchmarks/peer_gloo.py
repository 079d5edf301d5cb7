"""torch.distributed's all_reduce over the gloo backend, measured as ``dlsys bench allreduce``.

    python benchmarks/peer_gloo.py --ranks 2 --size 64MiB [--repeats 10] [--warmup 3]

Starts ``--ranks`` worker processes itself (TCP rendezvous on localhost). Same data, same
checks, same conventions: a barrier, then perf_counter around the in-place all_reduce
(its input is restored outside the timed region); each repeat's time is the slowest
rank's; rank 0 times a numpy memcpy of the same size between repeats. Prints one JSON
record.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

from dlsys.experiments.wallclock import bandwidth_record, bench_data
from dlsys.machine.net import parse_size


def worker(rank: int, ranks: int, nbytes: int, warmup: int, repeats: int) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    x, want = bench_data(nbytes // 4, rank, ranks)
    buffer = torch.from_numpy(x.copy())
    copy_dst = np.zeros_like(x)
    times, copies = [], []
    for i in range(warmup + repeats):
        buffer.numpy()[:] = x
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(buffer)
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if not np.array_equal(buffer.numpy(), want):
            raise AssertionError(f"rank {rank}: gloo all_reduce returned a wrong sum in repeat {i}")
        dist.barrier()
        if rank == 0:
            start = time.perf_counter()
            np.copyto(copy_dst, x)
            copy_s = time.perf_counter() - start
        if i >= warmup:
            times.append(float(elapsed))
            copies.append(copy_s if rank == 0 else 0.0)
    if rank == 0:
        print(
            json.dumps(
                bandwidth_record(
                    ranks,
                    nbytes,
                    times,
                    copies,
                    benchmark="allreduce",
                    backend="torch.distributed",
                    algorithm=f"gloo (torch {torch.__version__})",
                    repeats=repeats,
                    warmup=warmup,
                )
            )
        )
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)  # set for the workers
    args = parser.parse_args()
    nbytes = parse_size(args.size)
    if args.rank is not None:
        worker(args.rank, args.ranks, nbytes, args.warmup, args.repeats)
        return
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    argv = [
        sys.executable,
        __file__,
        "--ranks",
        str(args.ranks),
        "--size",
        str(nbytes),
        "--repeats",
        str(args.repeats),
        "--warmup",
        str(args.warmup),
    ]
    procs = [subprocess.Popen(argv + ["--rank", str(r)], env=env) for r in range(args.ranks)]
    try:
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        sys.exit(f"a gloo worker failed (exit codes {codes})")


if __name__ == "__main__":
    main()
