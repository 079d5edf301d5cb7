"""One declaration per option: an ``Option`` says, once, what a keyword of an algorithm takes
(a scheduling policy's constructor, a compressor's, a training strategy's rank program), and
every reader takes it from there: the command line's flag and its checker, ``train()``'s
and the experiments' checks, the app's widgets, the tests, the generated docs. Adding an
option is one ``Option`` in the algorithm's own file. Pure: the bottom layer, importable by all.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple


class Option(NamedTuple):
    """One keyword option. ``kind``: "integer", "number" or "size" (bytes like 16MB), in
    [low, high] ((low, high] if ``low_open``), which ``check`` enforces; other kinds
    ("choice", "pair", "path", "output", "bool", "object") are read by the command that offers them.
    ``default``: the value a taker runs with when it is not given (None: the algorithm's
    own). ``flags``: the command line's flag(s) when not ``--name``. A scheduling policy's
    option also draws its trade-off figure: x axis ``axis_title``, in the value times
    ``axis_factor``; ``swept``: ``experiments.schedule.option_sweep`` sweeps it."""

    name: str
    kind: str
    low: float = 0
    high: float = math.inf
    help: str = ""
    axis_title: str = ""
    axis_factor: float = 1.0
    low_open: bool = False
    swept: bool = True
    default: Any = None
    flags: str = ""

    @property
    def flag(self) -> str:
        return self.flags or "--" + self.name.replace("_", "-")

    @property
    def accepted(self) -> str:
        """The range in words: "an integer in 1..64", "a number > 0 and <= 1"."""
        if self.kind == "number":
            bounds = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
            return f"a number {bounds}" + (f" and <= {self.high:g}" if self.high != math.inf else "")
        what = "an integer" if self.kind == "integer" else "a size in bytes"
        return f"{what} in {self.low:.0f}..{self.high:.0f}" if self.high != math.inf else f"{what} >= {self.low:.0f}"

    def check(self, value, name: str | None = None):
        """``value`` if it is of the option's kind and in its range; otherwise a ValueError
        naming the option (or ``name``, e.g. its flag) and the accepted range."""
        kind = numbers.Real if self.kind == "number" else numbers.Integral
        typed = isinstance(value, kind) and not isinstance(value, bool)
        if not (typed and (value > self.low if self.low_open else value >= self.low) and value <= self.high):
            raise ValueError(f"{name or self.name} must be {self.accepted}, got {value!r}")
        return value
