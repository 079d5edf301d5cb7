"""MXNet's KVStore, the baseline P3 was measured against (Jayarajan et al. 2019; Chen et al.
2015, "MXNet: a flexible and efficient machine learning library for heterogeneous
distributed systems"). Each layer is pushed as soon as its backward ends and pulled back
(python/mxnet/model.py, ``_update_params_on_kvstore``, lines 145-155 at v1.3.0), in the
order backward makes them, one message per server, first in first out on the wire; the
next forward of layer l waits only for layer l's pull, since MXNet's dependency engine
orders operators by the arrays they read and write. And the KVStore's rule for which
server gets what
(apache/mxnet v1.3.0, src/kvstore/kvstore_dist.h, ``EncodeDefaultKey``, lines 532-570):

    n < MXNET_KVSTORE_BIGARRAY_BOUND (line 58: 1000 * 1000)   one server, (key * 9973) mod S
    otherwise                                                 every server: part i holds
                                                              round(n/S (i+1)) - round(n/S i)

so VGG-19's fc6 (103M parameters) goes to all S servers at once instead of one. A key is a
layer's number among the layers with parameters, in forward order (MXNet numbers its
arrays in the order it initializes them; it keeps a layer's weight and bias apart)."""

import math

from .policy import Item, Option, Policy, check_positive_int


class MXNet(Policy):
    name = "mxnet"
    paper = "Chen et al. 2015, MXNet; its KVStore (src/kvstore/kvstore_dist.h)"
    colour = "#72b7b2"
    options = (
        Option(
            "bigarray_bound",
            "integer",
            1,
            2**31,
            "parameters from which an array is split over every server (MXNet: 1000000)",
            "MXNet big-array bound (parameters)",
            swept=False,
        ),
    )
    forward = "layer"

    def __init__(self, bigarray_bound: int = 1_000_000):
        self.bigarray_bound = check_positive_int("bigarray_bound", bigarray_bound)

    def items(self, layers):
        return [item for item, _ in self.placed(layers, 1)]

    def placed(self, layers, servers):
        """Layers in backprop order, each one item or (big) S parts, item k priority (k,)."""
        keys = [i for i, layer in enumerate(layers) if layer.params]
        out: list[tuple[Item, int]] = []
        for key in reversed(range(len(keys))):
            layer = layers[keys[key]]
            if layer.params < self.bigarray_bound:
                parts = [(0, layer.params, key * 9973 % servers)]
            else:  # C's round(): halves away from zero
                cut = [math.floor(layer.params / servers * s + 0.5) for s in range(servers + 1)]
                parts = [(cut[s], cut[s + 1], s) for s in range(servers) if cut[s] < cut[s + 1]]
            for lo, hi, server in parts:
                k = len(out)
                out.append((Item(k, (keys[key],), layer.offset + lo, layer.offset + hi, (k,)), server))
        return out

    def describe(self):
        return f"mxnet (arrays of {self.bigarray_bound:,}+ parameters split over the servers)"
