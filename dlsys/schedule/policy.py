"""What every scheduling policy shares: the layers of a model, the items (messages) a
policy cuts the gradient into, and the ``Policy`` interface.

A worker's iteration, per layer l = 0..L-1 (input first): forward f_l, then backward
b_l = 2 f_l from the last layer down (times from the layer's FLOPs on the worker's node). Layer l's gradient is *ready* at the end of its
backward. A policy decides
* ``items(layers)``: the messages: a whole layer, slices of one (P3, ByteScheduler) or
  buckets of several (fusion); each an element range [lo, hi) of the flat gradient;
* ``placed(layers, servers)``: the items with the parameter server each goes to (default:
  item k to server k mod S; MXNet's KVStore splits a big array over every server);
* ``release_s(item, ready_s)``: when the item may go (WFBP: its layer's ready time; FIFO:
  the end of backward; fusion: when its whole bucket is ready);
* ``priority``: among released items the smallest goes first;
* ``credit_bytes``: bytes that may be posted and still unsent on the link; a new item is
  posted only if it fits, so a smaller credit preempts more often (at item boundaries) and
  idles more between posts. ``inf``: post at release; 0: only onto an idle link;
* ``socket_hwm``: None, or pace per connection instead (P3's ps-lite): one sending
  thread pops the released item of smallest priority and blocks until that item's
  connection (its server) holds at most the message on its wire and ``socket_hwm``
  queued behind it (ZMQ_SNDHWM); the credit then paces nothing;
* ``server_priority``: a server handles the pushes it has in by priority (P3's ps-lite
  queues received messages by priority), not first come first served;
* ``forward``: "all" (the next forward waits for every layer's update), "layer"
  (forward l starts once layer l's update is back: P3, ByteScheduler) or "stale" (the
  next forward runs on locally updated weights, the global update one step behind: OD-SGD).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..options import Option


class Layer(NamedTuple):
    """One layer of a worker's model, in forward order."""

    name: str
    params: int  # parameters (0: nothing to send)
    offset: int  # its first element in the flat gradient buffer
    flops: float  # its forward FLOPs on one worker's batch (backward: 2x, input and weight gradients)


class Item(NamedTuple):
    """One message a policy sends: elements [lo, hi) of the gradient, from ``layers``."""

    index: int  # type: ignore[assignment]  # the item's number; shadows tuple.index on purpose
    layers: tuple[int, ...]
    lo: int
    hi: int
    priority: tuple

    @property
    def size(self) -> int:
        return self.hi - self.lo


class Policy:
    """A scheduling policy (see the module docstring); subclasses set the class attributes
    and override what they change: ``colour`` in every figure, ``options`` (one ``Option``
    per constructor keyword)."""

    name = ""
    paper = ""
    colour = ""
    options: tuple[Option, ...] = ()
    forward = "all"
    credit_bytes = math.inf
    socket_hwm: int | None = None
    server_priority = False
    cut = ""  # the option that sets the items' size, if any: smaller items, more messages

    def item_count(self, layers: list[Layer]) -> int:
        """len(self.items(layers)), without cutting a model into millions of slices first."""
        return slice_count(layers, getattr(self, self.cut)) if self.cut else len(self.items(layers))

    def items(self, layers: list[Layer]) -> list[Item]:
        """Default: one item per layer with parameters, in backprop order (last layer first)."""
        order = [i for i in reversed(range(len(layers))) if layers[i].params]
        return [Item(k, (i,), layers[i].offset, layers[i].offset + layers[i].params, (k,)) for k, i in enumerate(order)]

    def placed(self, layers: list[Layer], servers: int) -> list[tuple[Item, int]]:
        """The items and the server each goes to. Default: item k to server k mod S,
        round-robin as P3's KVStore deals its slices (apache/mxnet v1.9.0,
        src/kvstore/p3store_dist.h lines 226-240: one counter over every slice, there in
        the order the keys are first pushed, here in the items' order)."""
        return [(item, item.index % servers) for item in self.items(layers)]

    def release_s(self, item: Item, ready_s: dict) -> float:
        """Default: as soon as the last of its layers is ready."""
        return max(ready_s[i] for i in item.layers)

    def describe(self) -> str:
        return self.name


def slices(layers: list[Layer], slice_params: int) -> list[Item]:
    """Every layer with parameters cut into slices of at most ``slice_params`` elements,
    priority (layer index, slice index): the input layer's first slice first."""
    items = []
    for i, layer in enumerate(layers):
        for lo in range(layer.offset, layer.offset + layer.params, slice_params):
            items.append((i, lo, min(lo + slice_params, layer.offset + layer.params)))
    items.sort(key=lambda it: (-it[0], it[1]))  # backprop order: the order they become ready
    return [Item(k, (i,), lo, hi, (i, lo)) for k, (i, lo, hi) in enumerate(items)]


def slice_count(layers: list[Layer], slice_params: int) -> int:
    """How many items ``slices`` makes: the sum over layers of ceil(params / slice_params)."""
    return sum(-(-layer.params // slice_params) for layer in layers)


def check_positive_int(name: str, value) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ValueError(f"{name}: expected a whole number >= 1, got {value!r}")
    return value
