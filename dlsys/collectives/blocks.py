"""What every collective algorithm shares: its tag, a checked receive, a charged reduction.

Blocks: a buffer of n elements is cut into p blocks by ``np.array_split`` (any length
works, also 0 and fewer elements than ranks: the first n mod p blocks hold one element
more); rank r owns block r after a reduce-scatter. The helpers keep ndarray subclasses
(a LogicalArray, dlsys.comm.logical, stays one through them), so the algorithms need no
special case for logical sizes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..comm.payload import payload_nbytes

if TYPE_CHECKING:  # only the type: importing an algorithm does not import the Communicator
    from ..comm.communicator import Communicator

TAG = 1 << 20  # collectives use their own tag so they never match a program's own messages


def send(comm: Communicator, buf, dest: int, phase: str, step: int = -1, block: int = -1, label: str = "") -> None:
    """``comm.send`` on the collectives' tag, describing the message by phase, step and block
    (trace.Message's fields, which the figures read); the label defaults to
    "<phase> step <step> block <block>"."""
    comm.send(buf, dest, TAG, label=label, phase=phase, step=step, block=block)


def recv_like(comm: Communicator, source: int, like: np.ndarray, label: str | None = None) -> np.ndarray:
    """Receive from ``source`` what this rank expects: ``like``'s size and dtype (reshaped
    to its shape). A mismatch means the ranks passed different buffers: say so by name.
    ``label`` names this rank's wait (default: the message's label)."""
    return check_like(comm, source, comm.recv(source=source, tag=TAG, label=label), like)


def check_like(comm: Communicator, source: int, got: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``got`` (from ``source``) checked against ``like`` as ``recv_like`` does."""
    if got.dtype != like.dtype or got.size != like.size:
        raise ValueError(
            f"x: rank {source} sent {got.size} elements of {got.dtype} where rank {comm.rank} "
            f"expected {like.size} of {like.dtype}; every rank must pass the same shape and dtype"
        )
    return got if got.shape == like.shape else got.reshape(like.shape)


UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}
"""The element-wise operation of each reduction the algorithms run (MPI_SUM, MPI_MAX,
MPI_MIN, MPI_PROD); "mean" is a sum divided by p (dlsys.collectives.allreduce)."""


def combine(comm: Communicator, mine: np.ndarray, other: np.ndarray, op: str) -> np.ndarray:
    """op(mine, other) as a new array (an op of ``UFUNCS``); charges n gamma if the run does."""
    comm.charge_reduction(payload_nbytes(other))
    return UFUNCS[op](mine, other)


def cat(blocks: list, dtype) -> np.ndarray:
    """The blocks end to end (an empty list: an empty array of ``dtype``)."""
    return np.concatenate(blocks) if blocks else np.empty(0, dtype)


def split_like(flat: np.ndarray, blocks: list) -> list:
    """``flat`` cut into pieces the sizes of ``blocks``."""
    return np.split(flat, np.cumsum([b.size for b in blocks])[:-1])
