"""The compressors' registry: a method's name -> its class, a memory's name -> its class,
and ``make``, which builds one with its Generator (dlsys.compress)."""

import numpy as np

from .. import checks
from .compressor import (
    Compressor,
    Memory,
    NoneMemory,
    ResidualMemory,
)
from .dgc import DGCCompressor, DGCMemory
from .dropping import GradientDroppingCompressor
from .fp16 import FP16Compressor
from .int8 import Int8Compressor
from .none import NoneCompressor
from .onebit import OneBitCompressor
from .qsgd import QSGDCompressor
from .randomk import RandomKCompressor
from .terngrad import TernGradCompressor
from .topk import TopKCompressor

COMPRESSORS: dict[str, type[Compressor]] = {
    "none": NoneCompressor,
    "fp16": FP16Compressor,
    "int8": Int8Compressor,
    "onebit": OneBitCompressor,
    "terngrad": TernGradCompressor,
    "qsgd": QSGDCompressor,
    "topk": TopKCompressor,
    "randomk": RandomKCompressor,
    "dropping": GradientDroppingCompressor,
    "dgc": DGCCompressor,
}


MEMORIES = {"none": NoneMemory, "residual": ResidualMemory, "dgc": DGCMemory}


def options_of(name: str) -> list[str]:
    """The options a method takes: the names of its ``Option``s (its constructor's keywords
    but the Generator)."""
    return [option.name for option in COMPRESSORS[name].options]


def make(name: str, seed: int = 0, rank: int = 0, **options) -> Compressor:
    cls = checks.registered(COMPRESSORS, "compressor", name, options, hidden=("rng",), argument="method")
    if "rng" in checks.options_of(cls):
        options["rng"] = np.random.default_rng([seed] if cls.same_draws_on_every_rank else [seed, rank])
    return cls(**options)


def make_memory(name: str, **options) -> Memory:
    if name not in MEMORIES:
        raise ValueError(f"memory: unknown memory {name!r}; valid: {', '.join(MEMORIES)}")
    return MEMORIES[name](**options)
