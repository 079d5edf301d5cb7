"""Gradient compression, GRACE's split: one file per method, ``Compressor`` and ``Memory``.

``COMPRESSORS`` maps each method's name to its class; the CLI, the app and the tests
enumerate it, and read each method's ``options`` (``dlsys.options.Option``: name, range,
help). ``make(name, seed, rank, **options)`` builds one (naming the valid methods or
options if asked for an unknown one); stochastic methods get a Generator seeded by
(seed, rank), random-k by the seed alone, because every rank must draw the same indices.
``MEMORIES``: "none", "residual" (error feedback), "dgc" (DGC's momentum correction); each
method's ``memory`` attribute names the one its paper uses. They live in ``methods.py``;
every name here is imported on first use (dlsys.lazy), so that importing one method's
file imports no other.
"""

from ..lazy import lazy

__getattr__, __all__ = lazy(
    __name__,
    methods=["COMPRESSORS", "MEMORIES", "make", "make_memory", "options_of"],
    compressor=[
        "Compressor",
        "Memory",
        "NoneMemory",
        "ResidualMemory",
        "frame",
        "pack_payload",
        "payload_nbytes",
        "unframe",
        "unpack_payload",
    ],
    dgc=["DGCMemory"],
    none=["NoneCompressor"],
)
