"""What a message carries: a numeric array, its size on the wire and its label. Light (numpy
only), so the collectives import it without the Communicator."""

from __future__ import annotations

import numpy as np

MAX_LABEL = 200
NOTHING = np.empty(0, np.uint8)  # the payload of a synchronous send's acknowledgement


def as_payload(x, name: str = "x") -> np.ndarray:
    """The array a message carries; rejects what cannot travel as numbers."""
    if type(x) is np.ndarray or hasattr(type(x), "logical_nbytes"):
        arr = x  # a LogicalArray (dlsys.comm.logical) must stay one: its logical size is what we charge
    else:
        arr = np.asarray(x)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be a numeric array (bool, int, float or complex); got dtype {arr.dtype}")
    return arr


def payload_nbytes(arr: np.ndarray) -> int:
    """Bytes a payload stands for on the wire: a LogicalArray's elements each stand for
    ``scale`` (a class attribute: no Python call, and this runs once per message)."""
    return arr.nbytes * getattr(arr, "scale", 1)


def message_label(label, phase: str = "", step: int = -1, block: int = -1) -> str:
    """A message's label: ``label``, or "<phase> step <s> block <i>" from its fields; at
    most MAX_LABEL characters."""
    if not label and phase:
        label = f"{phase} step {step}" + (f" block {block}" if block >= 0 else "")
    return label if type(label) is str and len(label) <= MAX_LABEL else str(label)[:MAX_LABEL]


def check_buffer(buf, name: str, call: str) -> None:
    """mpi4py's ``buf``/``recvbuf`` of a receive: None or memory (ignored here); anything
    else, an int above all, is a source or tag in the wrong place."""
    if buf is None or isinstance(buf, (np.ndarray, bytearray, memoryview)):
        return
    hint = (
        f"; to receive from rank {buf}, name it: comm.{call}(source={buf})"
        if isinstance(buf, (int, np.integer)) and not isinstance(buf, bool)
        else ""
    )
    raise TypeError(f"{call}: {name} (mpi4py's receive buffer) must be None or an array, got {buf!r}{hint}")
