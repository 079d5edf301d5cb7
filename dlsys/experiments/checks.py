"""Checks of an experiment's arguments, run before any rank starts (the algorithms trust
their input). The command line checks its options with ``dlsys.cli.common``."""

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
