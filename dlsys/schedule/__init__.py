"""Overlap and scheduling: when each gradient goes on the wire, one short file per policy.

    fifo.py           no overlap: send after backward, in backprop order
    wfbp.py           wait-free backpropagation (Poseidon): each layer as soon as it is ready
    p3.py             P3: slices, priority to the input layers, preemption, per-layer forward
    bytescheduler.py  ByteScheduler: partitions, priority queue, credit of bytes in flight
    fusion.py         tensor fusion: DDP's buckets (and Horovod's cycle time)
    odsgd.py          OD-SGD: the next forward on locally updated weights, the global update a step late
    base.py           Layer, Item, the Policy interface
    engine.py         the rank programs: a worker's compute and communication threads as ranks

``POLICIES`` maps a name to its class; ``make(name, **options)`` checks the options.
Launching a job and summarizing its trace is an experiment: ``dlsys.experiments.schedule``.
"""
from .. import checks
from .policy import Item, Layer, Policy
from .bytescheduler import ByteScheduler
from .engine import SCHEMES, Job, layers_of, program, steps_of
from .fifo import FIFO
from .fusion import Fusion
from .odsgd import ODSGD
from .p3 import P3
from .wfbp import WFBP

POLICIES = {"fifo": FIFO, "wfbp": WFBP, "p3": P3, "bytescheduler": ByteScheduler, "fusion": Fusion, "odsgd": ODSGD}


def options_of(name: str) -> list[str]:
    return checks.options_of(POLICIES[name])


def make(name: str, **options) -> Policy:
    return checks.registered(POLICIES, "policy", name, options)(**options)


__all__ = ["POLICIES", "SCHEMES", "Item", "Job", "Layer", "Policy", "layers_of", "make", "options_of", "program",
           "steps_of"]
