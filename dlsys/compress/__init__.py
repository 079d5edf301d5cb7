"""Gradient compression, GRACE's split: one file per method, ``Compressor`` and ``Memory``.

``COMPRESSORS`` maps each method's name to its class; the CLI, the app and the tests
enumerate it. ``make(name, **options)`` builds one and names the valid methods if asked
for an unknown one. Stochastic methods take ``rng`` (a seeded numpy Generator).
Memories: ``NoneMemory``, ``ResidualMemory`` (error feedback), ``DGCMemory`` (DGC's momentum).
"""
from .base import Compressor, Memory, NoneMemory, ResidualMemory, payload_nbytes
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

COMPRESSORS = {
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


def make(name: str, **options) -> Compressor:
    if name not in COMPRESSORS:
        raise ValueError(f"method: unknown compressor {name!r}; valid: {', '.join(COMPRESSORS)}")
    return COMPRESSORS[name](**options)


__all__ = ["COMPRESSORS", "Compressor", "DGCMemory", "Memory", "NoneMemory", "ResidualMemory", "make", "payload_nbytes"]
