"""Tensor fusion: PyTorch DDP's gradient buckets (Li et al. 2020, "PyTorch distributed:
experiences on accelerating data parallel training", VLDB): layers are packed, in reverse
order (the order backward makes them ready), into buckets of at most ``bucket_mb`` MiB
(DDP's ``bucket_cap_mb`` = 25 by default, MiB despite its name: torch/nn/parallel/
distributed.py caps a bucket at ``bucket_cap_mb * 1024 * 1024`` bytes; a bigger layer is a
bucket of its own); a bucket goes out, as one message, once all its layers are ready,
buckets in order. Fewer, larger messages pay alpha less often, at the price of waiting for
a bucket to fill. Horovod's fusion buffer does the same with a threshold and a ``cycle_ms``
tick: a bucket released between ticks waits for the next one."""

import math

from .policy import Item, Option, Policy


class Fusion(Policy):
    name = "fusion"
    paper = "Li et al. 2020, PyTorch distributed (VLDB); Sergeev & Del Balso 2018, Horovod"
    colour = "#54a24b"
    options = (
        Option(
            "bucket_mb",
            "number",
            0,
            1e6,
            "bucket cap in MiB (DDP's bucket_cap_mb: 25)",
            "DDP bucket size (MiB)",
            low_open=True,
        ),
        Option(
            "cycle_ms", "number", 0, 1e6, "Horovod's cycle time in ms (0: none)", "Horovod cycle time (ms)", swept=False
        ),
    )

    def __init__(self, bucket_mb: float = 25.0, cycle_ms: float = 0.0):
        if not 0 < bucket_mb < math.inf:
            raise ValueError(f"bucket_mb: expected a size in MiB > 0, got {bucket_mb!r}")
        if not 0 <= cycle_ms < math.inf:
            raise ValueError(f"cycle_ms: expected a time in ms >= 0, got {cycle_ms!r}")
        self.bucket_mb, self.cycle_ms = bucket_mb, cycle_ms

    def items(self, layers):
        """The buckets, in the order they go out (bucket 0 first: it holds the last layer):
        layers with parameters packed in reverse order, a bucket closed when the next layer
        would take it past ``bucket_mb`` MiB (2^20 bytes, 4 bytes a parameter); each
        bucket one Item of index and priority (k,) over its layers' elements [lo, hi)."""
        # BEGIN SOLUTION ddp_buckets
        buckets, current, nbytes = [], [], 0
        for i in reversed(range(len(layers))):
            size = 4 * layers[i].params
            if not size:
                continue
            if current and nbytes + size > self.bucket_mb * 2**20:
                buckets.append(current)
                current, nbytes = [], 0
            current.append(i)
            nbytes += size
        buckets += [current] if current else []
        # a bucket's layers are adjacent in the buffer: from its lowest layer's offset up
        return [
            Item(k, tuple(b), layers[b[-1]].offset, layers[b[0]].offset + layers[b[0]].params, (k,))
            for k, b in enumerate(buckets)
        ]
        # END SOLUTION

    def release_s(self, item, ready_s):
        ready = super().release_s(item, ready_s)
        if not self.cycle_ms:
            return ready
        start = min(ready_s.values()) - 0.0  # ticks counted from the first gradient of the iteration
        tick = self.cycle_ms / 1e3
        return start + math.ceil((ready - start) / tick - 1e-12) * tick

    def describe(self):
        return f"fusion (buckets of {self.bucket_mb:g} MiB" + (
            f", cycle {self.cycle_ms:g} ms)" if self.cycle_ms else ")"
        )
