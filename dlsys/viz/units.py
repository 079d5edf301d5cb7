"""Human-readable units for figures and metrics: seconds, bytes, bytes per second."""

from __future__ import annotations

_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
_RATE_UNITS = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1, "B/s"))


def _pick(value: float, units) -> tuple[float, str]:
    for size, name in units:
        if abs(value) >= size:
            return size, name
    return units[-1]


def time_unit(seconds: float) -> tuple[float, str]:
    """(divisor, name) of the largest unit not exceeding ``seconds``: 0.012 -> (1e-3, 'ms')."""
    return _pick(seconds, _TIME_UNITS) if seconds else (1.0, "s")


def format_seconds(seconds: float, digits: int = 3) -> str:
    """0.0123 -> '12.3 ms'."""
    div, name = time_unit(seconds)
    return f"{seconds / div:.{digits}g} {name}"


def format_bytes(nbytes: float, digits: int = 3) -> str:
    """67108864 -> '64 MiB' (binary units, as buffer sizes are given)."""
    div, name = _pick(nbytes, _BYTE_UNITS)
    return f"{nbytes / div:.{digits}g} {name}"


def format_rate(bytes_per_s: float, digits: int = 3) -> str:
    """1.25e9 -> '1.25 GB/s' (decimal units, as link rates and nccl-tests report them)."""
    div, name = _pick(bytes_per_s, _RATE_UNITS)
    return f"{bytes_per_s / div:.{digits}g} {name}"
