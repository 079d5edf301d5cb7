"""Training strategies as rank programs, over real numpy models.

``allreduce_program`` (Horovod-style data parallel), ``local_sgd_program`` (average the
weights every ``period`` steps), ``pipeline_program`` (GPipe pipeline of layer stages, ``pipeline.gpipe``'s order).
The parameter server's program is ``dlsys.ps``. ``STRATEGIES`` (``strategies.py``) is the
registry of them all: name -> rank program, ranks, options. Launching a strategy and
building its record is an experiment: ``dlsys.experiments.train``.
"""

from __future__ import annotations

from ..learn.task import Compression, TrainConfig, accuracy, batch_indices, build_model, load_task, steps_per_epoch
from .data_parallel import DistributedOptimizer, allreduce_program, broadcast_parameters, local_sgd_program
from .model_parallel import pipeline_program, split_stages
from .strategies import STRATEGIES, Strategy

__all__ = [
    "STRATEGIES",
    "Strategy",
    "Compression",
    "TrainConfig",
    "DistributedOptimizer",
    "broadcast_parameters",
    "allreduce_program",
    "local_sgd_program",
    "pipeline_program",
    "split_stages",
    "build_model",
    "load_task",
    "batch_indices",
    "steps_per_epoch",
    "accuracy",
]
