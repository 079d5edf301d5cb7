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
* ``pacer(comm, scheme)``: how a sender paces its posts (``Pacer``): ``may_post(item)``, then
  ``post(peer, item, send)``. Default: post at release. ByteScheduler: a credit of bytes
  posted and not yet on the wire (``bytescheduler.CreditWindow``); P3: per connection, as
  its ps-lite's sockets (``p3.Sockets``);
* ``reply_pacer(comm)``: how a server paces its replies (default: at once; P3: its sockets);
* ``inbox(comm, tag, priority_of)``: the order a server handles the pushes it has in
  (``Inbox``; default first come first served, P3's by priority);
* ``forward``: "all" (the next forward waits for every layer's update), "layer"
  (forward l starts once layer l's update is back: P3, ByteScheduler) or "stale" (the
  next forward runs on locally updated weights, the global update one step behind: OD-SGD).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

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

    def pacer(self, comm, scheme: str) -> Pacer:
        """A sender's pacing, one per sender thread. Default: post each item at release."""
        return Pacer()

    def reply_pacer(self, comm) -> Pacer:
        """A server's pacing of its replies. Default: each at once."""
        return Pacer()

    def inbox(self, comm, tag: int, priority_of: Callable[[np.ndarray], tuple]) -> Inbox:
        """The order a server handles the pushes it has in. Default: as they come."""
        return Inbox(comm, tag)

    def describe(self) -> str:
        return self.name


class Pacer:
    """When a thread posts: the sender asks ``may_post(item)`` of the released item of
    smallest priority (False: the pacer has waited on the clock; decide again), then
    ``post(peer, item, send)``. This default posts at once: a credit of ``inf`` bytes."""

    def start(self) -> None:
        """A new iteration's posts begin."""

    def may_post(self, item: Item) -> bool:
        return True

    def post(self, peer: int, item: Item, send: Callable[[], None]) -> None:
        send()


class Inbox:
    """A server's pushes in the order it handles them: first come first served (MXNet's
    ps-lite): ``recv_any`` takes the earliest arrival among the workers that still owe
    this server a push of its round (``owed``: worker's rank -> pushes owed)."""

    def __init__(self, comm, tag: int):
        self.comm, self.tag = comm, tag

    def holds(self) -> bool:
        """Whether pushes taken in wait to be handled."""
        return False

    def take(self, owed: dict[int, int]) -> tuple[int, np.ndarray]:
        src, arr = self.comm.recv_any([sender for sender in owed if owed[sender]], self.tag)
        owed[src] -= 1
        return src, arr


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
