"""FIFO: the baseline. Backward runs to the end, then the gradients go out in backprop order
(last layer first), and the next forward waits for every layer's update: compute and
communication never overlap, T = sum(f + b) + T_comm."""

from .policy import Policy


class FIFO(Policy):
    name = "fifo"
    paper = "the baseline without overlap (e.g. a synchronous PS push after backward)"
    colour = "#9c9c9c"

    def release_s(self, item, ready_s):
        return max(ready_s.values())
