"""Records as files: CSV text, and records slim enough to cache."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from ..comm.trace import Trace


def without_values(record: dict) -> dict:
    """The record without the ranks' returned arrays (trace kept): small enough to cache."""
    result = record["result"]
    return {**record, "result": replace(result, values=[None] * result.world_size)}


def with_trace(record: dict) -> dict:
    """A record in plain data (a stored one: its trace as ``Trace.to_rows`` under "trace")
    with its Trace back."""
    return {**record, "trace": Trace.from_rows(record["trace"])}


def to_csv(rows: list[dict]) -> str:
    """Rows of dicts as CSV text (columns: the union of the keys, in first-seen order)."""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.DictWriter(out, fields)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
