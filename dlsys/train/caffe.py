"""Caffe's model in miniature and the two synchronous designs of "Caffe distributed extension
on Sunway TaihuLight" (SPEC section 11), as rank programs over the Communicator.

Caffe's names: a ``Blob`` holds ``data`` (weights) and ``diff`` (their gradient); a
``Layer`` owns a blob; a ``Net`` runs its layers forward and backward; a ``Solver`` updates
the net from its diffs. Caffe gives every blob its own memory (``contiguous=False``), so
one all-reduce of all gradients needs a packing copy into one buffer before and an
unpacking copy after; the paper restructured the net so every blob is a view of one flat
buffer (``contiguous=True``), the layout of ``dlsys.learn.nn.Sequential``, and the copies vanish.

The layers are a model's profile (dlsys.machine.profiles: parameters, forward FLOPs per sample).
Their compute is charged through the node model (backward: twice the forward FLOPs); a
copy of n bytes reads and writes them at the node's memory bandwidth (2n bytes of
traffic). Real numbers stand for the logical sizes: a layer of ``params`` weights holds
round(params / scale) real ones (at least one), each standing for ``scale`` (so a size
is off by less than scale / 2 per layer). Gradients are stand-ins, small integers drawn
per (seed, rank, layer): sums of them are exact, so both designs' averages agree bit for bit.

    ps      rank 0 (the server, and a worker too) sends W to every worker; every rank runs
            forward; in backward, as soon as layer j's gradient is computed every worker
            sends it to rank 0 (one gather per layer, last layer first, all of it through
            rank 0's link); after the last, rank 0 averages and updates.
    ps-gather, ps-reduce
            the same PS as the paper could have built it on MPI: MPI_Bcast of W, then per
            layer an MPI_Gather (rank 0 sums) or an MPI_Reduce to rank 0, each by the MPI
            library's algorithm (dlsys.machine.netstack: the TaihuLight MPI's binomial trees).
    ring    every rank runs forward and backward, then one ring all-reduce of the whole
            gradient buffer; every rank averages and updates.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from .. import collectives
from ..comm.logical import LogicalArray
from ..learn.nn import ParamSlice
from ..machine.netstack import LIBRARIES
from ..machine.profiles import LayerProfile

DESIGNS = ("ps", "ps-gather", "ps-reduce", "ring")
LEARNING_RATE = 1 / 16  # a power of two: the update is exact too
WEIGHTS_TAG, GRADIENT_TAG = 1, 2


def real_sizes(layers: list[LayerProfile], scale: int) -> list[int]:
    """Real elements of each layer's blob: round(params / scale), at least one."""
    return [max(1, round(layer.params / scale)) for layer in layers]


class Blob:
    """Caffe's Blob: ``data`` and ``diff``, arrays of the same shape."""

    def __init__(self, data: np.ndarray, diff: np.ndarray):
        self.data, self.diff = data, diff


class Layer:
    """One layer with parameters: its name, logical parameter count, forward FLOPs per
    sample, its blob and where the blob sits in the net's flat order (``slice``)."""

    def __init__(self, profile: LayerProfile, blob: Blob, slice_: ParamSlice):
        self.name, self.params, self.fwd_flops = profile.name, profile.params, profile.fwd_flops
        self.blob, self.slice = blob, slice_


class Net:
    """A model's layers (forward order) with one blob each; ``scale`` logical elements per
    real one; ``contiguous``: every blob a view of one flat data and one flat diff buffer."""

    def __init__(self, layers: list[LayerProfile], scale: int = 1, contiguous: bool = True, seed: int = 0):
        self.scale, self.contiguous = scale, contiguous
        sizes = real_sizes(layers, scale)
        self.count = sum(sizes)  # real elements
        weights = np.random.default_rng(seed).integers(-64, 65, self.count).astype(np.float32)
        self.data, self.diff = weights, np.zeros(self.count, np.float32)
        self.layers, offset = [], 0
        for i, (profile, size) in enumerate(zip(layers, sizes)):
            part = slice(offset, offset + size)
            blob = (
                Blob(self.data[part], self.diff[part])
                if contiguous
                else Blob(weights[part].copy(), np.zeros(size, np.float32))
            )
            self.layers.append(Layer(profile, blob, ParamSlice(i, profile.name, offset, size)))
            offset += size

    @property
    def nbytes(self) -> int:
        """Logical bytes of all weights (and of all gradients)."""
        return self.count * self.scale * 4

    def logical(self, real: np.ndarray) -> np.ndarray:
        """``real`` as the message it stands for (each element ``scale`` logical ones)."""
        return real if self.scale == 1 else LogicalArray(real, self.scale)

    def flat(self, field: str) -> np.ndarray:
        """All blobs' ``field`` ("data" or "diff") as one buffer: the flat buffer itself if
        contiguous, else a new array (the packing copy)."""
        if self.contiguous:
            return getattr(self, field)
        return np.concatenate([getattr(layer.blob, field) for layer in self.layers])

    def load(self, field: str, flat: np.ndarray) -> None:
        """Write ``flat`` back into every blob's ``field`` (the unpacking copy if scattered)."""
        for layer in self.layers:
            s = layer.slice
            getattr(layer.blob, field)[...] = flat[s.offset : s.offset + s.size]


class Solver:
    """Caffe's SGDSolver, one step: W <- W - lr * diff (the diffs hold the mean gradient)."""

    def __init__(self, net: Net, lr: float = LEARNING_RATE):
        self.net, self.lr = net, lr

    def apply_update(self) -> None:
        for layer in self.net.layers:
            layer.blob.data -= self.lr * layer.blob.diff


# --- the two designs: rank code ----------------------------------------------------------


def _timed(comm, account: dict, kind: str, **charge) -> None:
    """``comm.compute(**charge)``, its seconds added to ``account[kind]``."""
    start = comm.clock
    comm.compute(**charge)
    account[kind] += comm.clock - start


def _copy(comm, net: Net, account: dict, what: str) -> None:
    """A packing or unpacking copy of all blobs: read and write every byte, if scattered."""
    if not net.contiguous:
        _timed(comm, account, "pack_s", nbytes=2 * net.nbytes, label=what)


def _forward(comm, net: Net, batch: int, account: dict) -> None:
    for layer in net.layers:
        _timed(comm, account, "compute_s", flops=batch * layer.fwd_flops, label=f"forward {layer.name}")


def _backward(comm, net: Net, batch: int, seed: int, account: dict):
    """Last layer first: charge the layer's backward, fill its diff; yield the layer."""
    for j in reversed(range(len(net.layers))):
        layer = net.layers[j]
        _timed(comm, account, "compute_s", flops=2 * batch * layer.fwd_flops, label=f"backward {layer.name}")
        layer.blob.diff[...] = np.random.default_rng([seed, comm.rank, j]).integers(-8, 9, layer.slice.size)
        yield layer


def _update(comm, solver: Solver, account: dict) -> None:
    """The SGD step: read W and the gradient, write W."""
    solver.apply_update()
    _timed(comm, account, "update_s", nbytes=3 * solver.net.nbytes, label="update")


def ps_iteration(comm, solver: Solver, batch: int, seed: int = 0) -> dict:
    """The parameter-server design: rank 0 sends W to every worker; forward; then per
    layer (last first) its backward, and every worker sends that layer's gradient to rank 0,
    which takes them in rank order; rank 0 averages and updates. Returns this rank's time
    account and (rank 0) the new weights.

        rank 0: for k = 1 .. p-1: send W to k           workers: W = receive from 0
        forward
        for j = L-1 .. 0: backward j
            rank 0: g_j = own + sum of receive(k) for k = 1 .. p-1; g_j /= p
            worker: send g_j to 0
        rank 0: update
    """
    net, account, p = solver.net, dict.fromkeys(("compute_s", "pack_s", "update_s"), 0.0), comm.size
    if comm.rank == 0:
        _copy(comm, net, account, "pack W")
        weights = net.logical(net.flat("data"))
        for worker in range(1, p):
            comm.send(weights, worker, WEIGHTS_TAG, label="W")
    else:
        net.load("data", comm.recv(source=0, tag=WEIGHTS_TAG))
        _copy(comm, net, account, "unpack W")
    _forward(comm, net, batch, account)
    for layer in _backward(comm, net, batch, seed, account):
        if comm.rank == 0:
            total = layer.blob.diff.copy()
            for worker in range(1, p):
                total += comm.recv(source=worker, tag=GRADIENT_TAG)
            layer.blob.diff[...] = total / p
        else:
            comm.send(net.logical(layer.blob.diff), 0, GRADIENT_TAG, label=f"gradient {layer.name}")
    if comm.rank == 0:
        _update(comm, solver, account)
    return account | {"weights": net.flat("data").copy() if comm.rank == 0 else None}


def ps_mpi_iteration(
    comm, solver: Solver, batch: int, seed: int = 0, aggregate: str = "reduce", library: str = "taihulight-mpi"
) -> dict:
    """The parameter server on MPI's collectives, each by ``library``'s algorithm: rank 0
    broadcasts W; forward; per layer (last first) its backward, then the layer's gradient
    is reduced to rank 0 (``aggregate="reduce"``: MPI_Reduce, the tree adds on the way) or
    gathered there (``"gather"``: MPI_Gather, rank 0 adds the p parts); rank 0 averages and
    updates. Returns this rank's time account and (rank 0) the new weights.

        W = MPI_Bcast(W, root 0)
        forward
        for j = L-1 .. 0: backward j;  g_j = MPI_Reduce(g_j, root 0)   or   sum of MPI_Gather(g_j, root 0)
        rank 0: g /= p; update
    """
    net, account, p, lib = (
        solver.net,
        dict.fromkeys(("compute_s", "pack_s", "update_s"), 0.0),
        comm.size,
        LIBRARIES[library],
    )
    if comm.rank == 0:
        _copy(comm, net, account, "pack W")
    weights = collectives.broadcast(comm, net.logical(net.flat("data")), 0, lib.rooted_algorithm("broadcast"))
    if comm.rank:
        net.load("data", weights)
        _copy(comm, net, account, "unpack W")
    _forward(comm, net, batch, account)
    for layer in _backward(comm, net, batch, seed, account):
        gradient = net.logical(layer.blob.diff)
        if aggregate == "reduce":
            total = collectives.reduce(comm, gradient, "sum", 0, lib.rooted_algorithm("reduce"))
        else:
            parts = collectives.gather(comm, gradient, 0, lib.rooted_algorithm("gather"))
            total = None if parts is None else parts.sum(axis=0)
        if comm.rank == 0:
            layer.blob.diff[...] = np.asarray(total) / p
    if comm.rank == 0:
        _update(comm, solver, account)
    return account | {"weights": net.flat("data").copy() if comm.rank == 0 else None}


def ring_iteration(comm, solver: Solver, batch: int, seed: int = 0) -> dict:
    """The decentralized design: forward, backward, one ring all-reduce of the gradient
    buffer (packed first if the blobs are scattered), average, unpack, update on every rank."""
    net, account = solver.net, dict.fromkeys(("compute_s", "pack_s", "update_s"), 0.0)
    _forward(comm, net, batch, account)
    for _ in _backward(comm, net, batch, seed, account):
        pass
    _copy(comm, net, account, "pack gradients")
    total = collectives.allreduce(comm, net.logical(net.flat("diff")), algorithm="ring", fast=True)
    net.load("diff", np.asarray(total) / comm.size)
    _copy(comm, net, account, "unpack gradients")
    _update(comm, solver, account)
    return account | {"weights": net.flat("data").copy()}


ITERATIONS: dict[str, Callable[..., dict]] = {
    "ps": ps_iteration,
    "ps-gather": partial(ps_mpi_iteration, aggregate="gather"),
    "ps-reduce": partial(ps_mpi_iteration, aggregate="reduce"),
    "ring": ring_iteration,
}
MPI_DESIGNS = ("ps-gather", "ps-reduce")  # the designs that run an MPI library's collectives


def design_program(
    comm,
    design: str,
    layers: list[LayerProfile],
    scale: int,
    contiguous: bool,
    batch: int,
    seed: int = 0,
    library: str = "taihulight-mpi",
) -> dict:
    """Rank program: build the net (every rank the same initial weights) and run one
    iteration of ``design`` (the MPI designs with ``library``'s collectives)."""
    solver = Solver(Net(layers, scale, contiguous, seed))
    extra = {"library": library} if design in MPI_DESIGNS else {}
    return ITERATIONS[design](comm, solver, batch, seed, **extra)
