"""Checks of a caller's arguments, run at the boundary (``launch``, experiments, data,
benchmarks) before any rank starts: the algorithms trust their input. The command line
checks its options with ``dlsys.cli.common``. Pure: the bottom layer, importable by all."""

from __future__ import annotations

import numpy as np


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """``value`` as an int if it is an integer in low..high (no upper bound if None);
    otherwise a ValueError naming ``name`` and the accepted range."""
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low
            or (high is not None and value > high)):
        accepted = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {accepted}, got {value!r}")
    return int(value)
