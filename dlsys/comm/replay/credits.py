"""Credit waits on the replay's own flows (``Communicator.wait_sent``, ``wait_left``): a
post has left its sender's egress when its flow's last byte is on the wire, the flow's
completion minus its route's latency (dlsys.comm.replay). Both replays keep them here."""

from __future__ import annotations

import math


class Credits:
    """For the ranks that make credit waits (``waits[r]``): their posts' flows in order (-1:
    a signal), how many of them are known to have left and when the last of those left."""

    def __init__(self, waits: list[bool]):
        self.waits = waits
        self.posts: list[list[int]] = [[] for _ in waits]
        self.checked, self.left_s = [0] * len(waits), [0.0] * len(waits)
        self.latency_of: dict[int, float] = {}  # a flow of such a rank -> its route's latency
        self.left_at: dict[int, float] = {}  # such a flow, finished -> when its last byte left
        # (wait_sent takes a flow's entry once; wait_left keeps it: a rank makes one kind or the other)
        self.waiting_left: dict[int, int] = {}  # such a flow -> the rank whose credit waits for it

    def left(self, r: int, one: bool, k: int) -> float | None:
        """When rank r's post k (``one``: wait_left) or its posts 0..k (wait_sent) left its
        egress; None: not known yet (r now waits for a flow)."""
        if one:
            flow = self.posts[r][k]
            if flow < 0:  # a signal: nothing left the egress
                return -math.inf
            left = self.left_at.get(flow)
            if left is None:
                self.waiting_left[flow] = r
            return left
        mine, checked, left_s = self.posts[r], self.checked, self.left_s
        while checked[r] <= k:
            flow = mine[checked[r]]
            if flow >= 0:
                if flow not in self.left_at:
                    self.waiting_left[flow] = r
                    return None
                left = self.left_at.pop(flow)
                if left > left_s[r]:
                    left_s[r] = left
            checked[r] += 1
        return left_s[r]

    def finished(self, flow: int, t: float) -> int | None:
        """Flow ``flow`` completed at ``t``: the rank whose credit wait it ends, if any."""
        latency_s = self.latency_of.pop(flow, None)
        if latency_s is None:
            return None
        self.left_at[flow] = t - latency_s
        return self.waiting_left.pop(flow, None)
