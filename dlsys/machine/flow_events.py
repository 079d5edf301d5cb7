"""FlowNetwork's two event queues (dlsys.machine.flows): when flows join the network
(``Calendar``) and when they complete (``Dues``), each batched so that the thousand flows
of a ring's step cost one heap entry, not a thousand."""

from __future__ import annotations

import heapq
import math


class Calendar:
    """Items by time: a heap of the distinct times and a list of items per time, in the
    order they were added. A ring's flows start together and finish together: one heap
    entry for a step's thousand flows."""

    def __init__(self):
        self.times: list[float] = []
        self.at: dict[float, list] = {}

    def add(self, t: float, item) -> None:
        batch = self.at.get(t)
        if batch is None:
            batch = self.at[t] = []
            heapq.heappush(self.times, t)
        batch.append(item)

    def first_s(self) -> float:
        return self.times[0] if self.times else math.inf

    def pop_first(self) -> list:
        return self.at.pop(heapq.heappop(self.times))


class Dues:
    """Completions, (time, flow, version), a batch at a time: one event's rescheduled flows,
    sorted once, under one heap entry (the time of its first entry not yet taken). An
    incast re-solves a hundred flows an event: one heap push, not a hundred. A batch counts
    its live entries (``state[flow][6]`` is the batch of a flow's live entry, the owner
    counts down when the flow is rescheduled or leaves): an event later the whole batch is
    stale and goes in one pop; a stale entry in a live batch is skipped once."""

    def __init__(self, state: dict[int, list]):
        self.heap: list[tuple[float, int, list]] = []  # (time of its first entry not taken, seq, batch)
        self.seq = 0
        self.state = state  # FlowNetwork's: an entry is live while its flow has its version

    @staticmethod
    def batch() -> list:
        """An empty batch: [entries, index of the first not taken, live entries]."""
        return [[], 0, 0]

    def add(self, batch: list) -> None:
        entries = batch[0]
        entries.sort()
        batch[2] = len(entries)
        self.seq += 1
        heapq.heappush(self.heap, (entries[0][0], self.seq, batch))

    def first_s(self) -> float:
        """The earliest live entry's time (math.inf: none); stale entries before it are dropped."""
        heap, state = self.heap, self.state
        while heap:
            time, seq, batch = heap[0]
            entries, k, live = batch
            if not live:
                heapq.heappop(heap)
                continue
            while k < len(entries):
                _, flow, version = entries[k]
                s = state.get(flow)
                if s is not None and s[4] == version:
                    break
                k += 1
            batch[1] = k
            if k == len(entries):
                heapq.heappop(heap)
            elif entries[k][0] != time:
                heapq.heapreplace(heap, (entries[k][0], seq, batch))
            else:
                return time
        return math.inf

    def pop_at(self, t: float) -> list[tuple[int, int]]:
        """Every entry at time t as (flow, version), stale ones too; t must be first_s()."""
        heap, out = self.heap, []
        while heap and heap[0][0] == t:
            _, seq, batch = heapq.heappop(heap)
            entries, k = batch[0], batch[1]
            while k < len(entries) and entries[k][0] == t:
                out.append(entries[k][1:])
                k += 1
            batch[1] = k
            if k < len(entries) and batch[2]:
                heapq.heappush(heap, (entries[k][0], seq, batch))
        return out
