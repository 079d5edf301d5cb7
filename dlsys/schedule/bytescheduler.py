"""ByteScheduler (Peng et al. 2019, "A generic communication scheduler for distributed DNN
training acceleration", SOSP; bytedance/byteps, bytescheduler/common/bytecore.py): tensors
are partitioned into pieces of ``partition_params``; a priority queue (layer index: input
first) holds the pieces, and ByteCore's loop posts the highest-priority piece while the
bytes in flight stay within the ``credit_bytes``. Credit above one partition keeps the link
busy between posts (less idle, less preemption): the trade-off the paper auto-tunes."""

import math

from .policy import Option, Policy, check_positive_int, slices


class ByteScheduler(Policy):
    name = "bytescheduler"
    paper = "Peng et al. 2019, ByteScheduler (SOSP)"
    colour = "#f58518"
    options = (
        Option(
            "partition_params",
            "integer",
            1,
            2**31,
            "parameters per partition",
            "ByteScheduler partition size (parameters)",
        ),
        Option(
            "credit_bytes",
            "size",
            1,
            2**40,
            "bytes in flight, e.g. 16MB",
            "ByteScheduler credit (MB in flight)",
            axis_factor=1e-6,
        ),
    )
    forward = "layer"
    cut = "partition_params"

    def __init__(self, partition_params: int = 1_000_000, credit_bytes: float = 16e6):
        self.partition_params = check_positive_int("partition_params", partition_params)
        if not (credit_bytes >= 4 * partition_params and credit_bytes < math.inf):
            raise ValueError(
                f"credit_bytes: expected at least one partition ({4 * partition_params} bytes of "
                f"float32), got {credit_bytes!r}"
            )
        self.credit_bytes = credit_bytes

    def items(self, layers):
        return slices(layers, self.partition_params)

    def describe(self):
        return f"bytescheduler (partitions of {self.partition_params:,}, credit {self.credit_bytes / 1e6:g} MB)"
