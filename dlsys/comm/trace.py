"""The virtual-time trace of a run: compute/overhead spans and messages.

One record per event. Spans: (rank, start_s, end_s, kind, label) with kind one of
``compute``, ``send`` (sender CPU overhead), ``wait`` (idle until a message arrives),
``recv`` (receiver CPU overhead). Messages: (src, dst, nbytes, depart_s, arrive_s, tag,
label), recorded when received. The Chrome trace-event export opens in Perfetto and
chrome://tracing (pid = rank, complete "X" events, times in microseconds), with the ranks'
memory timelines as counter tracks ("C" events) when their ledgers are given.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import NamedTuple

from ..outputs import write_atomic


class Span(NamedTuple):
    rank: int
    start_s: float
    end_s: float
    kind: str
    label: str


class Message(NamedTuple):
    src: int
    dst: int
    nbytes: int
    depart_s: float
    arrive_s: float
    tag: int
    label: str
    phase: str = ""  # a collective's message: its phase ("reduce-scatter"), step and block
    step: int = -1
    block: int = -1


class Trace:
    """All events of a run, in a canonical order (by rank, then program order)."""

    def __init__(self, spans: list[Span], messages: list[Message], world_size: int):
        self.spans = spans
        self.messages = messages
        self.world_size = world_size

    def __eq__(self, other):
        return (
            isinstance(other, Trace)
            and self.world_size == other.world_size
            and self.spans == other.spans
            and self.messages == other.messages
        )

    def __repr__(self):
        return f"Trace({len(self.spans)} spans, {len(self.messages)} messages, {self.world_size} ranks)"

    @property
    def makespan_s(self) -> float:
        ends = [s.end_s for s in self.spans] + [m.arrive_s for m in self.messages]
        return max(ends, default=0.0)

    def bytes_sent_per_rank(self) -> list[int]:
        sent = [0] * self.world_size
        for m in self.messages:
            sent[m.src] += m.nbytes
        return sent

    def bytes_received_per_rank(self) -> list[int]:
        received = [0] * self.world_size
        for m in self.messages:
            received[m.dst] += m.nbytes
        return received

    def bytes_per_link(self) -> dict[tuple[int, int], int]:
        """Bytes carried by each directed link (src, dst)."""
        links: dict[tuple[int, int], int] = defaultdict(int)
        for m in self.messages:
            links[(m.src, m.dst)] += m.nbytes
        return dict(links)

    def records(self) -> tuple[list[dict], list[dict]]:
        """(spans, messages) as lists of dicts, ready for pandas/plotly or CSV."""
        return [s._asdict() for s in self.spans], [m._asdict() for m in self.messages]

    def to_rows(self) -> dict:
        """The trace as plain lists (JSON, e.g. a stored result): ``from_rows`` gives it back, equal."""
        return {
            "world_size": self.world_size,
            "spans": [list(s) for s in self.spans],
            "messages": [list(m) for m in self.messages],
        }

    @classmethod
    def from_rows(cls, rows: dict) -> Trace:
        return cls([Span(*s) for s in rows["spans"]], [Message(*m) for m in rows["messages"]], rows["world_size"])

    def to_chrome(self, memory=()) -> dict:
        """Chrome trace-event JSON (open in https://ui.perfetto.dev or chrome://tracing);
        ``memory``: the ranks' ``dlsys.machine.ledger.MemoryLedger``s, drawn as counters."""
        us = 1e6
        events = [
            {"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}"}} for r in range(self.world_size)
        ]
        for s in self.spans:
            events.append(
                {
                    "name": s.label or s.kind,
                    "cat": s.kind,
                    "ph": "X",
                    "pid": s.rank,
                    "tid": 0,
                    "ts": s.start_s * us,
                    "dur": (s.end_s - s.start_s) * us,
                }
            )
        for m in self.messages:
            events.append(
                {
                    "name": m.label or f"{m.src}->{m.dst}",
                    "cat": "message",
                    "ph": "X",
                    "pid": m.src,
                    "tid": 1,
                    "ts": m.depart_s * us,
                    "dur": (m.arrive_s - m.depart_s) * us,
                    "args": {"dst": m.dst, "nbytes": m.nbytes, "tag": m.tag},
                }
            )
        for ledger in memory:
            events += ledger.chrome_counters()
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def save_chrome(self, path, memory=()) -> None:
        """The Chrome trace-event JSON, written whole or not at all (``outputs.write_atomic``)."""
        write_atomic(path, json.dumps(self.to_chrome(memory)))
