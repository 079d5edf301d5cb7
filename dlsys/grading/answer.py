"""A submission's answer, as plain data in JSON: the child encodes what the observe
function returned, the grader decodes it (dlsys.grading.untrusted). Exact types only, and
numpy arrays of numbers as base64: nothing in an answer can run code or lie about its type."""

from __future__ import annotations

import base64
import json

import numpy as np

ARRAY_KINDS = "biuf"  # numpy dtypes an answer may hold: bool, int, uint, float


def encode(value, depth: int = 0):
    """``value`` as JSON-ready data; numpy arrays as {"__ndarray__": {dtype, shape, data}}.
    Exact types only: a subclass of float or dict could lie."""
    if depth > 50:
        raise TypeError("the answer nests deeper than 50 levels")
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if np.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, (np.ndarray, np.generic)) and type(value) in (np.ndarray, type(np.asarray(value)[()])):
        array = np.ascontiguousarray(value)
        if array.dtype.kind not in ARRAY_KINDS:
            raise TypeError(f"an answer's arrays hold numbers, not {array.dtype}")
        item = {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "data": base64.b64encode(array.tobytes()).decode(),
        }
        return {"__ndarray__" if type(value) is np.ndarray else "__scalar__": item}
    if type(value) in (list, tuple):
        return [encode(v, depth + 1) for v in value]
    if type(value) is dict and all(type(k) is str and not k.startswith("__") for k in value):
        return {k: encode(v, depth + 1) for k, v in value.items()}
    raise TypeError(
        f"an observe function returns plain data (numbers, strings, lists, dicts with "
        f"str keys, numpy arrays), not {type(value).__name__}"
    )


def _reject_constant(name: str):
    raise ValueError(f"the answer holds a bare {name}")


def _decode_object(item: dict):
    if set(item) == {"__float__"}:
        if item["__float__"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"not a special float: {item['__float__']!r}")
        return float(item["__float__"])
    if set(item) in ({"__ndarray__"}, {"__scalar__"}):
        ((kind, spec),) = item.items()
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(n) for n in spec["shape"])
        data = base64.b64decode(spec["data"], validate=True)
        if dtype.kind not in ARRAY_KINDS or len(data) != dtype.itemsize * int(np.prod(shape)):
            raise ValueError(f"a malformed array: {spec['dtype']} {shape}, {len(data)} bytes")
        array = np.frombuffer(data, dtype).reshape(shape).copy()
        return array if kind == "__ndarray__" else array[()]
    if any(k.startswith("__") for k in item):
        raise ValueError(f"unknown tag in the answer: {sorted(item)}")
    return item


def decode(text: bytes):
    """The child's answer: {"value": ...} or {"error": {...}}, with arrays rebuilt."""
    return json.loads(text, object_hook=_decode_object, parse_constant=_reject_constant)
