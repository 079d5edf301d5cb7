"""Human-readable units for figures and metrics: seconds, bytes, bytes per second.

At the bottom of the layers (it imports only the standard library), so the command line,
the experiments and the figures format a number the same way."""

from __future__ import annotations

import math

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


# Axis ticks. Figures set tick values and texts themselves: plotly's own log ticks label
# the minor ticks ("2 5" or "9 8 7 6...") when the range is short, and its SI prefixes are
# decimal ("10kB"), while the app states sizes in binary units.


def _spaced(first: int, last: int, strides, max_ticks: int) -> range:
    """Exponents first..last at the smallest stride whose ticks number at most max_ticks,
    aligned to multiples of the stride (so 1 KiB, 1 MiB... stay on the grid)."""
    for stride in strides:
        start = -(-first // stride) * stride if first % stride else first
        if (last - start) // stride + 1 <= max_ticks:
            return range(start, last + 1, stride)
    return range(first, last + 1, strides[-1])


def byte_ticks(lo: float, hi: float, max_ticks: int = 9) -> tuple[list[float], list[str]]:
    """Log-axis ticks at powers of two from lo to hi bytes, in binary units:
    (1, 1e9) -> 1 B, 32 B, 1 KiB, 32 KiB, 1 MiB, 32 MiB, 1 GiB."""
    first, last = math.floor(math.log2(max(lo, 1))), math.ceil(math.log2(max(hi, 1)))
    exps = _spaced(first, last, (1, 2, 5, 10, 20), max_ticks)
    return [float(2**k) for k in exps], [format_bytes(2**k) for k in exps]


def _decades(lo: float, hi: float, max_ticks: int) -> list[float]:
    """Powers of ten from lo to hi; over two decades or less, 1, 2 and 5 times them (one
    decade alone gave a single labelled tick)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last - first <= 2:
        return [m * 10.0**k for k in range(first, last + 1) for m in (1, 2, 5) if m == 1 or k < last]
    return [10.0**k for k in _spaced(first, last, (1, 2, 3, 6), max_ticks)]


def time_ticks(lo: float, hi: float, max_ticks: int = 9) -> tuple[list[float], list[str]]:
    """Log-axis ticks at decades of seconds: (2e-6, 0.3) -> 1 µs, 10 µs, ..., 1 s; over two
    decades or less 1-2-5: (0.02, 0.3) -> 10 ms, 20 ms, 50 ms, 100 ms, ..., 1 s."""
    ticks = _decades(lo, hi, max_ticks)
    return ticks, [format_seconds(t) for t in ticks]


def count_ticks(lo: float, hi: float, max_ticks: int = 11) -> tuple[list[float], list[str]]:
    """Log-axis ticks for counts (ranks, workers, speedup) at powers of two: 2, 4, ..., 1024."""
    first, last = math.floor(math.log2(max(lo, 1))), math.ceil(math.log2(max(hi, 1)))
    exps = _spaced(first, last, (1, 2, 5), max_ticks)
    return [float(2**k) for k in exps], [f"{2**k:g}" for k in exps]


def decade_ticks(lo: float, hi: float, max_ticks: int = 9) -> tuple[list[float], list[str]]:
    """Log-axis ticks at decades of a unitless quantity: 0.01, 0.1, 1, 10 (1-2-5 over two
    decades or less, as ``time_ticks``)."""
    ticks = _decades(lo, hi, max_ticks)
    return ticks, [f"{t:g}" for t in ticks]


def linear_byte_ticks(hi: float, max_ticks: int = 6) -> tuple[list[float], list[str]]:
    """Linear-axis ticks from 0 to at least hi bytes at a round step of one binary unit:
    (300 MiB) -> 0, 100 MiB, 200 MiB, 300 MiB."""
    div, name = _pick(max(hi, 1), _BYTE_UNITS)
    span = max(hi, 1) / div
    step = next(s * 10**e for e in range(-3, 5) for s in (1, 2, 5) if span / (s * 10**e) <= max_ticks - 1)
    count = math.ceil(span / step - 1e-9)
    return [k * step * div for k in range(count + 1)], [f"{k * step:g} {name}" if k else "0" for k in range(count + 1)]
