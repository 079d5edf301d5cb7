"""ps-lite's worker-side API: push and pull return a timestamp, wait completes one."""

from __future__ import annotations

import numpy as np

from .hooks import DENSE
from .keys import KeyLayout
from .protocol import DATA, KINDS, LEAVE, PULL, PUSH, REPLY, REQUEST, STOP


class KVWorker:
    """A worker's handle on the server group. A request goes to every server (a kind, then
    the keys); a push's values follow, each server's share encoded by ``codec``. Pushes are
    not acknowledged (our sends are buffered, so ``wait`` on a push returns at once); a
    pull's ``wait`` returns (clock, values), or None once the servers say training is over."""

    def __init__(self, comm, layout: KeyLayout, codec=DENSE):
        self.comm, self.layout, self.servers, self.codec = comm, layout, layout.servers, codec
        self._pulls: dict[int, tuple] = {}
        self._ts = 0

    def _request(self, kind: int, keys) -> tuple:
        keys = tuple(int(k) for k in keys)
        for s in range(self.servers):
            self.comm.send(np.array([kind, *keys], np.int64), s, REQUEST, label=KINDS[kind])
        return keys

    def push(self, keys, values) -> int:
        keys = self._request(PUSH, keys)
        for s, (positions, _) in enumerate(self.layout.parts(keys)):
            message = self.codec.encode(self.comm, values[positions], s)
            self.comm.send(message, s, DATA, label=f"push {positions.size} values{self.codec.label}")
        self._ts += 1
        return self._ts

    def pull(self, keys) -> int:
        self._ts += 1
        self._pulls[self._ts] = self._request(PULL, keys)
        return self._ts

    def wait(self, ts: int):
        if ts not in self._pulls:
            return None
        keys = self._pulls.pop(ts)
        replies = [self.comm.recv(source=s, tag=REPLY) for s in range(self.servers)]  # server 0 first: it gates
        if replies[0][0] == STOP:
            return None
        values = np.empty(sum(p.size for p, _ in self.layout.parts(keys)), replies[0].dtype)
        for (positions, _), reply in zip(self.layout.parts(keys), replies):
            values[positions] = reply[1:]
        return int(replies[0][0]), values

    def leave(self) -> None:
        """Tell every server this worker is gone (our stand-in for missed heartbeats)."""
        self._request(LEAVE, ())
