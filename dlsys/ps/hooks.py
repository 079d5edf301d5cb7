"""What the parameter server's core leaves out, passed in as small hooks.

A codec turns a worker's share of a push into a message and the server turns it back:
``Dense`` (the default) sends the values themselves, ``Compressed`` a ``dlsys.compress``
payload. A server's ``ServerHooks`` hear when it starts serving, applies or discards a push,
answers a pull, loses a worker and finishes; the default does nothing. ``Chain`` calls
several in order (a ``Checkpoint`` first, so the ``ProgressBar`` counts what is left after a
restore); ``ReadLog`` records the staleness of every read and the workers that left.
"""

from __future__ import annotations

import os

import numpy as np

from ..collectives import compressed
from ..compress.compressor import frame, payload_nbytes, unframe
from ..learn.task import progress_bar


class Dense:
    """No compression: a push carries the values themselves."""

    label = ""  # appended to a push's trace label

    def encode(self, comm, values: np.ndarray, server: int) -> np.ndarray:
        return values

    def decode(self, comm, message: np.ndarray, like: np.ndarray) -> np.ndarray:
        return message


class Compressed(Dense):
    """Workers push compressed gradients (pulls stay dense): each server's share is
    compressed alone, with its own residual in `memory`, and decoded by that server."""

    label = " compressed"

    def __init__(self, compressor, memory):
        self.compressor, self.memory = compressor, memory
        self.encoded_nbytes = 0  # payload bytes pushed so far
        self.kept, self.entries = 0, 0  # entries pushed with a value, and entries, so far

    def encode(self, comm, values, server):
        payload, _ = compressed.encode(
            comm, values, self.compressor, self.memory, f"server {server}", share_scale=False
        )
        self.encoded_nbytes += payload_nbytes(payload)
        self.kept += self.compressor.kept(payload, values.size)
        self.entries += values.size
        return frame(payload)

    def decode(self, comm, message, like):
        return compressed.decode(comm, unframe(message), (like.shape, like.dtype), self.compressor, like, "push")


class ServerHooks:
    """A server's events, each given the server (a ``KVServer``); here they do nothing."""

    def started(self, server) -> None:
        """Before the first request."""

    def pushed(self, server, applied: bool) -> None:
        """After a push: applied, or discarded once the budget is spent."""

    def read(self, server, src: int) -> None:
        """Worker rank `src` passed the gate: its pull is answered now."""

    def left(self, server, src: int) -> None:
        """Worker rank `src` left and no longer holds the gate."""

    def finished(self, server) -> None:
        """After every worker was told to stop (or left)."""


class Chain(ServerHooks):
    """Several hooks, each event passed to them in the order given."""

    def __init__(self, *hooks: ServerHooks):
        self.hooks = hooks

    def started(self, server):
        for hook in self.hooks:
            hook.started(server)

    def pushed(self, server, applied):
        for hook in self.hooks:
            hook.pushed(server, applied)

    def read(self, server, src):
        for hook in self.hooks:
            hook.read(server, src)

    def left(self, server, src):
        for hook in self.hooks:
            hook.left(server, src)

    def finished(self, server):
        for hook in self.hooks:
            hook.finished(server)


class ReadLog(ServerHooks):
    """Every answered pull with its staleness (the worker's clock minus the slowest
    clock), and every worker that left, each with the virtual time."""

    def __init__(self):
        self.reads: list[dict] = []
        self.failed: list[dict] = []

    def read(self, server, src):
        clock, slowest = server.clock[src], server.slowest()
        self.reads.append(
            {
                "worker": src - server.layout.servers,
                "clock": clock,
                "slowest": slowest,
                "staleness": clock - slowest,
                "time_s": server.comm.clock,
            }
        )

    def left(self, server, src):
        self.failed.append(
            {"worker": src - server.layout.servers, "clock": server.clock[src], "time_s": server.comm.clock}
        )


class ProgressBar(ServerHooks):
    """The gradients still to apply, on stderr."""

    def started(self, server):
        self.bar = progress_bar(server.budget - server.pushes, True, f"parameter server ({server.consistency})")

    def pushed(self, server, applied):
        self.bar.update(applied)

    def finished(self, server):
        self.bar.close()


class Checkpoint(ServerHooks):
    """Each server restores its key range, optimizer state, clocks and gradient count from
    `resume` before serving and saves them to `directory` after (``server<rank>.npz``)."""

    def __init__(self, directory=None, resume=None):
        self.directory, self.resume = directory, resume

    def started(self, server):
        if not self.resume:
            return
        with np.load(os.path.join(self.resume, f"server{server.comm.rank}.npz")) as ckpt:
            if ckpt["weights"].shape != server.weights.shape or len(ckpt["clocks"]) != len(server.workers):
                raise ValueError(f"checkpoint in {self.resume} is for another model, server group or worker count")
            server.weights[...] = ckpt["weights"]
            server.sgd.load_state_dict(
                {k[len("optimizer_") :]: ckpt[k] for k in ckpt.files if k.startswith("optimizer_")}
            )
            server.pushes = int(ckpt["pushes"])
            server.clock = dict(zip(server.workers, (int(c) for c in ckpt["clocks"])))

    def finished(self, server):
        if not self.directory:
            return
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"server{server.comm.rank}.npz")
        state = {f"optimizer_{k}": v for k, v in server.sgd.state_dict().items()}
        np.savez(
            f"{path}.tmp.npz",
            weights=server.weights,
            pushes=server.pushes,
            clocks=[server.clock[w] for w in server.workers],
            **state,
        )
        os.replace(f"{path}.tmp.npz", path)


DENSE, NO_HOOKS = Dense(), ServerHooks()
