"""Checks of a caller's arguments, run at the boundary (``launch``, experiments, data,
benchmarks) before any rank starts: the algorithms trust their input. The command line
checks its options with ``dlsys.cli.options``. Pure: the bottom layer, importable by all."""

from __future__ import annotations

import inspect

import numpy as np


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """``value`` as an int if it is an integer in low..high (no upper bound if None);
    otherwise a ValueError naming ``name`` and the accepted range."""
    if (
        not isinstance(value, (int, np.integer))
        or isinstance(value, bool)
        or value < low
        or (high is not None and value > high)
    ):
        accepted = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {accepted}, got {value!r}")
    return int(value)


def options_of(cls, hidden=()) -> list[str]:
    """The keyword options a registered class takes: its constructor's arguments but ``hidden``."""
    return [k for k in inspect.signature(cls).parameters if k not in hidden]


def registered(registry: dict, kind: str, name: str, options: dict, hidden=(), argument: str | None = None):
    """``registry[name]``, the class to build with ``options``, once both are checked: a
    ValueError naming ``argument`` (default ``kind``, what the registry holds: "policy", ...)
    and the valid names, or the valid options (``hidden`` ones the caller supplies itself)."""
    if name not in registry:
        raise ValueError(f"{argument or kind}: unknown {kind} {name!r}; valid: {', '.join(registry)}")
    valid = options_of(registry[name], hidden)
    unknown = set(options) - set(valid)
    if unknown:
        raise ValueError(f"{name}: unknown option {', '.join(sorted(unknown))}; valid: {', '.join(valid) or 'none'}")
    return registry[name]
