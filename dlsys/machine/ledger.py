"""Measured memory: what a rank program allocates, by kind, on its virtual clock.

A rank program owns one ``MemoryLedger`` (``comm.memory``: made on the rank's virtual
clock) and tells it what it allocates and frees:

    ledger = comm.memory
    ledger.alloc("parameters", model.params.nbytes, "params")
    ledger.alloc("activations", nn.activation_nbytes(model), "forward")   # after forward
    ledger.free("forward")                                              # after backward

It keeps the bytes in use per kind (``dlsys.machine.memory.KINDS``, the kinds the closed
form counts), the peak, and a timeline: one row per change, at the virtual time ``now()``
read when it happened. The figures are the numpy arrays' ``nbytes`` the program reports,
so they can be held against ``Layout.bytes()`` kind by kind. ``chrome_counters()`` gives
the timeline as Chrome trace counter events ("ph": "C"), which Perfetto draws as a stacked
track per rank; ``Trace.to_chrome(memory=ledgers)`` adds them to a run's trace.

Like PyTorch's caching allocator statistics (torch.cuda.memory_stats: "allocated_bytes"
current and peak, per pool) but by what the bytes are for, not where they came from.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from .memory import KINDS


class Change(NamedTuple):
    """One allocation (nbytes > 0) or free (nbytes < 0) at virtual time time_s."""

    time_s: float
    kind: str
    nbytes: int
    label: str


class MemoryLedger:
    """Bytes a rank holds, by kind: ``alloc``/``free`` by label, ``in_use``, ``peak``, ``timeline``."""

    def __init__(self, rank: int = 0, now: Callable[[], float] | None = None):
        self.rank = rank
        self.now = now or (lambda: 0.0)
        self.changes: list[Change] = []
        self.live: dict[str, tuple[str, int]] = {}  # label -> (kind, nbytes)
        self._in_use = dict.fromkeys(KINDS, 0)
        self.peak_bytes = 0
        self.peak_by_kind = dict.fromkeys(KINDS, 0)

    def alloc(self, kind: str, nbytes: int, label: str) -> None:
        """Record ``nbytes`` of ``kind`` under ``label`` (unique among the live allocations)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if int(nbytes) != nbytes or nbytes < 0:
            raise ValueError(f"nbytes must be a whole number >= 0, got {nbytes!r}")
        if label in self.live:
            raise ValueError(f"label {label!r} is already allocated (free it first)")
        self.live[label] = (kind, int(nbytes))
        self._change(kind, int(nbytes), label)

    def free(self, label: str) -> None:
        if label not in self.live:
            raise ValueError(f"label {label!r} is not allocated; live: {', '.join(self.live) or 'none'}")
        kind, nbytes = self.live.pop(label)
        self._change(kind, -nbytes, label)

    def _change(self, kind: str, nbytes: int, label: str) -> None:
        self.changes.append(Change(float(self.now()), kind, nbytes, label))
        self._in_use[kind] += nbytes
        self.peak_by_kind[kind] = max(self.peak_by_kind[kind], self._in_use[kind])
        self.peak_bytes = max(self.peak_bytes, sum(self._in_use.values()))

    def in_use(self) -> dict[str, int]:
        """Bytes held now, by kind."""
        return dict(self._in_use)

    def timeline(self) -> list[tuple[float, dict[str, int]]]:
        """(time_s, bytes in use by kind) after each change, in program order."""
        held = dict.fromkeys(KINDS, 0)
        rows = []
        for change in self.changes:
            held[change.kind] += change.nbytes
            rows.append((change.time_s, dict(held)))
        return rows

    def chrome_counters(self) -> list[dict]:
        """The timeline as Chrome trace counter events: one "memory" counter per rank
        (pid = rank), a series per kind, times in microseconds as ``Trace.to_chrome``."""
        return [
            {"name": "memory (bytes)", "ph": "C", "pid": self.rank, "ts": time_s * 1e6, "args": held}
            for time_s, held in self.timeline()
        ]

    def __getstate__(self):
        """A ledger crosses processes as data: the clock it read stays with its rank."""
        state = dict(self.__dict__)
        state["now"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.now = lambda: 0.0
