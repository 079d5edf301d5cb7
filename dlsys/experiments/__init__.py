"""Named, reproducible experiments: one call runs a program and returns a tidy record.

The CLI, the app and the lessons all call these, so a figure in class and a number in the
terminal come from the same code.

Topics, one module each: ``budget`` (real buffers standing for any logical size within a
memory budget: every experiment sizes its buffers there), ``collectives`` (one collective, checked and timed; the ring step
by step), ``costs`` (closed forms, emulated costs, crossovers), ``ps_vs_ring`` (a parameter
server beside ring all-reduce), ``training`` (a model trained under a distributed
strategy), ``large_batch`` (batch sweeps, scaling rules, warm-up, LARS/LAMB, sharp
minima, time to accuracy; cached), ``taihulight`` (the Caffe-on-TaihuLight case study: its
two designs, sweeps to 512 nodes, ring vs MPI_Allreduce; import it as a module),
and ``records`` (CSV, cacheable records). The course's tooling that runs these (the
reproductions, the generated docs, the app's precomputed store) is ``dlsys.course``.
"""

import importlib

from .budget import DEFAULT_MAX_MEMORY_BYTES, BufferPlan, plan_buffers
from .collectives import (
    DTYPES,
    collective_plan,
    collective_program,
    expected_values,
    plan_record,
    ring_allreduce_steps,
    simulate_collective,
)
from .costs import (
    ALLREDUCE_ALGORITHMS,
    allreduce_costs,
    choice_changes,
    crossovers,
    emulated_allreduce_costs,
    library_choice,
    link_table,
)
from .ps_vs_ring import ps_closed_form_s, ps_vs_ring, ps_vs_ring_scaling, simulate_ps
from .records import to_csv, without_values

# The training topics are imported on first use (PEP 562): `dlsys simulate` needs none of
# them, and they took 0.12 s to import (the trainers, tqdm, the loss landscape).
_LAZY = {
    "train": "training",
    **dict.fromkeys(
        ["QUICK", "RULES", "Study", "large_batch_study", "largest_good_batch", "load_study", "lr_schedules"],
        "large_batch",
    ),
}

__all__ = [
    "DEFAULT_MAX_MEMORY_BYTES",
    "BufferPlan",
    "plan_buffers",
    "DTYPES",
    "collective_plan",
    "collective_program",
    "expected_values",
    "plan_record",
    "ring_allreduce_steps",
    "simulate_collective",
    "ALLREDUCE_ALGORITHMS",
    "allreduce_costs",
    "library_choice",
    "choice_changes",
    "crossovers",
    "emulated_allreduce_costs",
    "link_table",
    "ps_closed_form_s",
    "ps_vs_ring",
    "ps_vs_ring_scaling",
    "simulate_ps",
    "to_csv",
    "without_values",
    *_LAZY,
]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    return value
