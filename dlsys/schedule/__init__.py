"""Overlap and scheduling: when each gradient goes on the wire, one short file per policy.

    fifo.py           no overlap: send after backward, in backprop order
    wfbp.py           wait-free backpropagation (Poseidon): each layer as soon as it is ready
    p3.py             P3: slices, priority to the input layers, preemption, per-layer forward
    bytescheduler.py  ByteScheduler: partitions, priority queue, credit of bytes in flight
    fusion.py         tensor fusion: DDP's buckets (and Horovod's cycle time)
    mxnet.py          MXNet's KVStore (P3's baseline): WFBP's order, big arrays split over every server
    odsgd.py          OD-SGD: the next forward on locally updated weights, the global update a step late
    policy.py         Layer, Item, Option, the Policy interface (its default pacing and server inbox)
    job.py            Job: the layers, the policy, the cluster, which rank is which thread
    worker_thread.py  a worker's compute thread (forward, backward, the forward gate) and receiver
    sender.py         a worker's sender: the policy's queue, paced as the policy says
    server_thread.py  the parameter server's thread
    engine.py         the rank programs wired together; the allreduce scheme's thread

``POLICIES`` maps a name to its class, which carries its colour and its ``Option``s (the
command line's flags, the sweeps and the figures read them; ``OPTIONS`` indexes them by
name); ``make(name, **options)`` checks the options.
Launching a job and summarizing its trace is an experiment: ``dlsys.experiments.schedule``.
"""

import inspect

from .. import checks
from .bytescheduler import ByteScheduler
from .engine import program, steps_of
from .fifo import FIFO
from .fusion import Fusion
from .job import SCHEMES, Job, layers_of
from .mxnet import MXNet
from .odsgd import ODSGD
from .p3 import P3
from .policy import Item, Layer, Option, Policy
from .server_thread import MXNET_SERVER_SLICE_S
from .wfbp import WFBP

POLICIES = {
    "fifo": FIFO,
    "wfbp": WFBP,
    "p3": P3,
    "bytescheduler": ByteScheduler,
    "fusion": Fusion,
    "odsgd": ODSGD,
    "mxnet": MXNet,
}
# an option's name -> (the policy that takes it, its Option)
OPTIONS = {option.name: (name, option) for name, policy in POLICIES.items() for option in policy.options}


def options_of(name: str) -> list[str]:
    return checks.options_of(POLICIES[name])


def default_of(option: str):
    """An option's default: its policy's constructor's."""
    return inspect.signature(POLICIES[OPTIONS[option][0]]).parameters[option].default


def make(name: str, **options) -> Policy:
    return checks.registered(POLICIES, "policy", name, options)(**options)


__all__ = [
    "MXNET_SERVER_SLICE_S",
    "OPTIONS",
    "POLICIES",
    "SCHEMES",
    "Item",
    "Job",
    "Layer",
    "Option",
    "Policy",
    "default_of",
    "layers_of",
    "make",
    "options_of",
    "program",
    "steps_of",
]
