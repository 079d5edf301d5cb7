"""A parallel data loader (SPEC section 9): K worker processes fill batches into a pool of
shared memory, and the trainer reads them as zero-copy numpy views, in order, at most D
batches ahead.

    with Loader(X, y, batch_size=32, workers=2, prefetch=4, seed=0) as loader:
        for X_b, y_b in loader.epoch(0):   # views of the pool: valid until the next batch
            ...

PyTorch's DataLoader in miniature (``num_workers``, a bounded prefetch queue), on the
same plan as the rest of dlsys: epoch e permutes the n samples with the seed (seed, e),
and step i of rank ``rank`` out of ``world`` takes samples (i world + rank) B .. + B of that
order (DistributedSampler; ``dlsys.train.batch_indices``). With world = 1 the batches are
exactly ``dlsys.learn.data.batches(X, y, B, seed, e, drop_last)``, for any K.

How it works, and why:
* The data set is copied once into a shared-memory segment (a file in /dev/shm) that every
  worker maps: workers read samples where they lie, nothing is pickled.
* The pool is D + 1 slots of one batch each, in a second segment: D for the queue and one
  the trainer holds. Batch i fills slot i mod (D + 1) and goes to worker i mod K, so each
  worker answers in order and the trainer reads the workers round-robin: the order is
  the plain loader's whatever the workers' speeds. A worker writes with
  ``np.take(..., out=slot)``: no batch is ever allocated, and the trainer's batch *is* the
  slot. Batch i + D is requested when the trainer takes batch i, into the slot batch
  i - 1 used, so the queue (requested and not yet taken) never holds more than D.
* K = 0 fills the slot in the trainer's own process when it asks (nothing overlaps).
* Workers are fresh interpreters started with ``subprocess`` (as the processes backend
  of dlsys.comm: no fork from a threaded server, no re-import of the caller's
  ``__main__``). Commands and replies are a few bytes over pipes.
* Nothing hangs, nothing leaks: every wait has a deadline; a worker that raises fails
  the epoch with its traceback (``LoaderWorkerError``); a worker that dies is named with
  its exit code. ``close()`` (``with``, garbage collection, interpreter exit) kills the
  workers and unlinks the segments. Workers run in their own session, so Ctrl-C reaches
  only the trainer, whose ``with`` closes them; if the trainer is killed outright its
  workers read end-of-file on their command pipe, unlink the segments and exit. Segments
  are named /dev/shm/dlsys-<trainer pid>-loader<id>-*, the pattern the processes
  backend sweeps for dead launchers.
"""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import pickle
import secrets
import select
import struct
import subprocess
import sys
import time
import traceback
import weakref
from typing import Iterator

import numpy as np

from ..checks import check_int
from ..machine.storage import MAX_LOADER_WORKERS

SHM_DIR = "/dev/shm"
MAX_POOL_NBYTES = 1 << 30
_COMMAND = struct.Struct("<qqq")  # epoch, step, slot
_REPLY = struct.Struct("<qq")  # step, length of the error text that follows (0: the slot is filled)
_ALIGN = 64


class LoaderWorkerError(RuntimeError):
    """A loader worker raised (its traceback is in the message) or died."""

    def __init__(self, worker: int, message: str):
        super().__init__(f"loader worker {worker}: {message}")
        self.worker = worker


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


def _map(path: str, nbytes: int | None) -> mmap.mmap:
    """Create a segment of ``nbytes`` at ``path``, or map an existing one (``nbytes`` None)."""
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if nbytes is not None else 0), 0o600)
    try:
        if nbytes is not None:
            os.ftruncate(fd, max(nbytes, 1))
        return mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _sweep(prefix: str) -> None:
    for path in glob.glob(prefix + "*"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class _Layout:
    """Where the data set and the pool's slots lie in their segments (the same in every process)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, batch_size: int, slots: int):
        self.n, self.batch_size, self.slots = len(X), batch_size, slots
        self.x_shape, self.y_shape = X.shape[1:], y.shape[1:]
        self.x_dtype, self.y_dtype = X.dtype, y.dtype
        self.x_nbytes, self.y_nbytes = _aligned(X.nbytes), _aligned(y.nbytes)
        self.x_slot_nbytes = _aligned(batch_size * X[:1].nbytes)
        self.slot_nbytes = self.x_slot_nbytes + _aligned(batch_size * y[:1].nbytes)

    def data(self, mem) -> tuple[np.ndarray, np.ndarray]:
        X = np.ndarray((self.n, *self.x_shape), self.x_dtype, mem, 0)
        return X, np.ndarray((self.n, *self.y_shape), self.y_dtype, mem, self.x_nbytes)

    def slot(self, mem, slot: int) -> tuple[np.ndarray, np.ndarray]:
        at = slot * self.slot_nbytes
        return (
            np.ndarray((self.batch_size, *self.x_shape), self.x_dtype, mem, at),
            np.ndarray((self.batch_size, *self.y_shape), self.y_dtype, mem, at + self.x_slot_nbytes),
        )


class _Plan:
    """Which samples make each batch (module docstring)."""

    def __init__(self, n: int, batch_size: int, seed: int, rank: int, world: int, drop_last: bool):
        self.n, self.batch_size, self.seed, self.rank, self.world = n, batch_size, seed, rank, world
        per_step = world * batch_size
        self.steps = n // per_step if drop_last else -(-n // per_step)
        self._epoch, self._order = -1, np.empty(0, np.int64)

    def indices(self, epoch: int, step: int) -> np.ndarray:
        if epoch != self._epoch:  # one permutation per epoch, as the plain loader draws it
            self._epoch, self._order = epoch, np.random.default_rng([self.seed, epoch]).permutation(self.n)
        start = (step * self.world + self.rank) * self.batch_size
        return self._order[start : start + self.batch_size]


def _fill(slot: tuple[np.ndarray, np.ndarray], data: tuple[np.ndarray, np.ndarray], idx: np.ndarray, transform) -> None:
    """Gather batch ``idx`` into the slot (no allocation); ``transform`` edits its X in place."""
    x, y = slot[0][: len(idx)], slot[1][: len(idx)]
    np.take(data[0], idx, axis=0, out=x)
    np.take(data[1], idx, axis=0, out=y)
    if transform is not None:
        transform(x)


def _read_exactly(fd: int, nbytes: int) -> bytes:
    """``nbytes`` from ``fd``, or fewer at end of file."""
    chunks = b""
    while len(chunks) < nbytes and (chunk := os.read(fd, nbytes - len(chunks))):
        chunks += chunk
    return chunks


def _worker_main() -> None:
    """A loader worker: read the job, then fill one slot per command until end of file."""
    commands, replies = sys.stdin.fileno(), int(sys.argv[2])
    (length,) = struct.unpack("<q", _read_exactly(commands, 8))
    job = pickle.loads(_read_exactly(commands, length))
    sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
    status, trainer_gone = 0, True  # a closing trainer kills its workers: end of file means it died
    try:
        layout, plan = job["layout"], job["plan"]
        data = layout.data(_map(job["prefix"] + "data", None))
        pool = _map(job["prefix"] + "pool", None)
        transform = pickle.loads(job["transform"])
        while len(command := _read_exactly(commands, _COMMAND.size)) == _COMMAND.size:
            epoch, step, slot = _COMMAND.unpack(command)
            _fill(layout.slot(pool, slot), data, plan.indices(epoch, step), transform)
            os.write(replies, _REPLY.pack(step, 0))
    except BaseException:  # noqa: BLE001 - the trainer raises it with this traceback
        text = traceback.format_exc().encode()
        status = 1
        with contextlib.suppress(OSError):  # a broken pipe: the trainer died
            os.write(replies, _REPLY.pack(-1, len(text)) + text)
            trainer_gone = False
    if trainer_gone:
        _sweep(job["prefix"])
    os._exit(status)


def _teardown(procs: list, fds: list, prefix: str) -> None:
    """Kill the workers, close the pipes, unlink the segments (idempotent)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for proc in procs:
        proc.wait()
        with contextlib.suppress(OSError):
            proc.stdin.close()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()
    _sweep(prefix)


class Loader:
    """Batches of (X, y) from ``workers`` processes through a queue of ``prefetch`` batches
    (module docstring). ``transform(x)`` (a picklable function, e.g. defined at a module's
    top level) edits each batch's X in place in the worker. ``timeout_s`` bounds every
    wait for a batch. Arguments are checked before any process starts."""

    def __init__(
        self,
        X: np.ndarray,
        y: np.ndarray,
        batch_size: int,
        *,
        workers: int = 0,
        prefetch: int = 2,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world: int = 1,
        transform=None,
        timeout_s: float = 60.0,
    ):
        X, y = np.ascontiguousarray(X), np.ascontiguousarray(y)
        if len(X) != len(y) or len(X) == 0:
            raise ValueError(f"X and y must have the same length >= 1, got {len(X)} and {len(y)}")
        if X.dtype.hasobject or y.dtype.hasobject:  # pointers mean nothing in another process's memory
            raise ValueError("X and y must hold numbers, not Python objects")
        self.workers = check_int("workers (loader workers)", workers, 0, MAX_LOADER_WORKERS)
        self.prefetch = check_int("prefetch (batches in the queue)", prefetch, 1, 1 << 16)
        batch_size = check_int("batch_size", batch_size, 1, len(X))
        world = check_int("world", world, 1, len(X) // batch_size)
        rank = check_int("rank", rank, 0, world - 1)
        if world > 1 and not drop_last:
            raise ValueError("drop_last must be True when world > 1 (every rank takes a full batch per step)")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        try:
            transform_blob = pickle.dumps(transform)
        except Exception as exc:
            raise ValueError(
                f"transform must be picklable (a function defined at a module's top level): {exc}"
            ) from None
        self.layout = _Layout(X, y, batch_size, self.prefetch + 1 if workers else 1)
        if self.layout.slots * self.layout.slot_nbytes > MAX_POOL_NBYTES:
            raise ValueError(
                f"prefetch: {self.prefetch} + 1 slots of {self.layout.slot_nbytes} bytes exceed the "
                f"pool's limit of {MAX_POOL_NBYTES} bytes; use a smaller prefetch or batch_size"
            )
        self.plan = _Plan(len(X), batch_size, check_int("seed", seed, 0), rank, world, drop_last)
        self.timeout_s, self.transform = timeout_s, transform
        self.max_queued = 0  # the most batches requested and not yet taken, at any moment (<= prefetch)
        self.prefix = os.path.join(SHM_DIR, f"dlsys-{os.getpid()}-loader{secrets.token_hex(4)}-")
        self._procs: list[subprocess.Popen] = []
        self._fds: list[int] = []  # the trainer's ends: commands to worker k, then replies from worker k
        self._closer = weakref.finalize(self, _teardown, self._procs, self._fds, self.prefix)
        try:
            data_mem = _map(self.prefix + "data", self.layout.x_nbytes + self.layout.y_nbytes)
            for src, dst in zip((X, y), self.layout.data(data_mem)):
                dst[...] = src
            self.data = self.layout.data(data_mem)
            self.pool = _map(self.prefix + "pool", self.layout.slots * self.layout.slot_nbytes)
            self._start(transform_blob)
        except BaseException:
            self.close()
            raise

    @property
    def steps_per_epoch(self) -> int:
        return self.plan.steps

    def _start(self, transform_blob: bytes) -> None:
        job = pickle.dumps(
            {
                "layout": self.layout,
                "plan": self.plan,
                "prefix": self.prefix,
                "transform": transform_blob,
                "sys_path": sys.path,
            }
        )
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        commands, replies = [], []
        for k in range(self.workers):
            reply_r, reply_w = os.pipe()
            try:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-P",
                        "-c",
                        "from dlsys.learn.loader import _worker_main; _worker_main()",
                        f"{os.path.basename(self.prefix)}worker{k}",
                        str(reply_w),
                    ],  # argv[1] names it in ps
                    stdin=subprocess.PIPE,
                    pass_fds=[reply_w],
                    start_new_session=True,
                    env=env,
                )
            finally:
                os.close(reply_w)
                self._fds.append(reply_r)
            self._procs.append(proc)
            commands.append(proc.stdin)
            replies.append(reply_r)
            proc.stdin.write(struct.pack("<q", len(job)) + job)
            proc.stdin.flush()
        self._commands, self._replies = commands, replies

    def close(self) -> None:
        """Stop the workers and unlink the segments (also on ``with`` exit and garbage collection)."""
        self._closer()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, epoch: int, step: int) -> None:
        worker = step % self.workers
        try:
            self._commands[worker].write(_COMMAND.pack(epoch, step, step % self.layout.slots))
            self._commands[worker].flush()
        except BrokenPipeError:
            error = self._failure(worker, step)
            self.close()
            raise error from None

    def _failure(self, worker: int, step: int) -> LoaderWorkerError:
        """Why ``worker`` stopped: the traceback it sent, or else its exit code."""
        fd = self._replies[worker]
        while len(reply := _read_exactly(fd, _REPLY.size)) == _REPLY.size:  # until end of file: it is gone
            _, error_nbytes = _REPLY.unpack(reply)
            if error_nbytes:
                return LoaderWorkerError(worker, "raised:\n" + _read_exactly(fd, error_nbytes).decode())
        code = self._procs[worker].wait(timeout=self.timeout_s)
        return LoaderWorkerError(worker, f"died (exit code {code}) before batch {step}")

    def _wait(self, step: int) -> None:
        """Block until batch ``step`` is in its slot; a failure closes the loader and raises."""
        worker = step % self.workers
        fd, deadline = self._replies[worker], time.monotonic() + self.timeout_s
        try:
            while not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"loader worker {worker}: batch {step} not ready after {self.timeout_s} s")
            reply = _read_exactly(fd, _REPLY.size)
            done, error_nbytes = _REPLY.unpack(reply) if len(reply) == _REPLY.size else (step, -1)
            if error_nbytes:  # -1: end of file, the worker died
                raise (
                    self._failure(worker, step)
                    if error_nbytes < 0
                    else LoaderWorkerError(worker, "raised:\n" + _read_exactly(fd, error_nbytes).decode())
                )
            if done != step:
                raise LoaderWorkerError(worker, f"answered batch {done}, expected {step}")
        except BaseException:
            self.close()
            raise

    def epoch(self, epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The batches of ``epoch`` in the plan's order, as views of the pool: a batch is
        valid until the next one is asked for (copy it to keep it)."""
        epoch = check_int("epoch", epoch, 0)
        if not self._closer.alive:
            raise ValueError("the loader is closed")
        steps, depth = self.plan.steps, self.prefetch
        if self.workers == 0:
            slot = self.layout.slot(self.pool, 0)
            for step in range(steps):
                idx = self.plan.indices(epoch, step)
                _fill(slot, self.data, idx, self.transform)
                yield slot[0][: len(idx)], slot[1][: len(idx)]
            return
        requested = taken = 0

        def request_up_to(stop: int) -> None:
            nonlocal requested
            while requested < min(stop, steps):
                self._request(epoch, requested)
                requested += 1
                self.max_queued = max(self.max_queued, requested - taken)

        try:
            request_up_to(depth)
            for step in range(steps):
                self._wait(step)
                taken += 1
                # the trainer has batch `step` and let go of step - 1 by asking for it: batch
                # step + D goes into that slot, and the queue holds D again
                request_up_to(step + depth + 1)
                x, y = self.layout.slot(self.pool, step % self.layout.slots)
                size = len(self.plan.indices(epoch, step))
                yield x[:size], y[:size]
        finally:  # an epoch left early: collect the batches still coming, so the next epoch starts clean
            if self._closer.alive:
                for step in range(taken, requested):
                    self._wait(step)
