"""P3, priority-based parameter propagation (Jayarajan et al. 2019, "Priority-based
parameter propagation for distributed DNN training", SysML): every layer is cut into
slices of ``slice_params`` parameters (40,000 in the paper); a slice of a layer nearer the
input has higher priority, because the next forward needs it first; a slice is posted
only onto an idle link, so a newly ready high-priority slice preempts the rest at the next
slice boundary; and forward of layer l starts as soon as layer l's update is back."""
from .policy import Option, Policy, check_positive_int, slices


class P3(Policy):
    name = "p3"
    paper = "Jayarajan et al. 2019, Priority-based parameter propagation (SysML)"
    colour = "#e45756"
    options = (Option("slice_params", "integer", 1, 2**31, "parameters per slice (paper: 40000)",
                      "P3 slice size (parameters)"),)
    forward = "layer"
    credit_bytes = 0
    cut = "slice_params"

    def __init__(self, slice_params: int = 40_000):
        self.slice_params = check_positive_int("slice_params", slice_params)

    def items(self, layers):
        return slices(layers, self.slice_params)

    def describe(self):
        return f"p3 (slices of {self.slice_params:,} parameters)"
