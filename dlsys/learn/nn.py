"""Numpy neural-network layers whose parameters live in ONE flat buffer.

Each layer only declares the shapes of its parameters. `Sequential` allocates one
contiguous float buffer for all parameters (`model.params`) and one for all gradients
(`model.grads`) and hands every layer *views* into them. A single all-reduce of
`model.grads` therefore synchronises every gradient with no packing copy: the layout
the Caffe port to the Sunway TaihuLight moved to (SPEC section 11).

Conventions: a batch is the first axis; images are (N, C, H, W); a FLOP count treats a
multiply-add as 2 FLOPs and a bias add, activation or pooling comparison as 1 per
element. Backward costs about twice the forward FLOPs (gradients for the input and for
the weights). Layers write their gradients with `grad[...] = ...` so the views keep
aliasing the flat buffer; gradients are overwritten, not accumulated, by each backward.
A layer may split backward in two, as zero-bubble pipelines need: `backward_input(dy) -> dx`
now, `backward_weights()` (the weight gradients) later; the transformer's layers
(`dlsys.learn.transformer`) do.
"""

from __future__ import annotations

import copy
from math import prod, sqrt
from typing import Callable, NamedTuple

import numpy as np


class ParamSlice(NamedTuple):
    """Where a parameter tensor (or a whole layer) sits in the flat buffers."""

    layer: int  # index of the layer in the Sequential
    name: str  # e.g. "linear0.W" (a tensor) or "linear0" (a layer)
    offset: int  # first element in model.params / model.grads
    size: int  # number of elements
    ndim: int = 1  # dimensions of the tensor (a whole layer: 1, it is flat)


class Layer:
    """Base class: `forward(x)` caches what `backward(dy) -> dx` needs.

    `params` and `grads` map a name to an array view; `Sequential` fills them."""

    def __init__(self):
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        self.in_shape: tuple[int, ...] | None = None
        self.out_shape: tuple[int, ...] | None = None

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        return {}

    def output_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return in_shape

    def build(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Record the per-sample input shape, check it, return the output shape."""
        self.in_shape, self.out_shape = tuple(in_shape), self.output_shape(tuple(in_shape))
        return self.out_shape

    def init_params(self, rng: np.random.Generator) -> None:
        pass

    def flops(self, batch: int) -> int:
        """Forward FLOPs for a batch of `batch` samples (default: 1 per output element)."""
        return batch * prod(self.out_shape)

    def saved(self) -> dict[str, np.ndarray]:
        """The arrays the last forward kept for backward: its activation memory (none here)."""
        return {}

    def forward(self, x: np.ndarray) -> np.ndarray:
        """The layer's output; keeps what ``backward`` needs."""
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, dy: np.ndarray) -> np.ndarray:
        """dloss/dinput from dy = dloss/doutput; writes the parameters' gradients into ``grads``."""
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def backward_input(self, dy: np.ndarray) -> np.ndarray:
        """Zero bubble's B (Qi et al. 2024, section 2): dx alone, keeping what
        ``backward_weights`` needs. A layer without parameters has nothing to defer."""
        return self.backward(dy)

    def backward_weights(self) -> None:
        """Zero bubble's W: the weight gradients of the last ``backward_input``."""

    def replica(self) -> Layer:
        """A copy sharing this layer's parameter and gradient arrays, with its own forward
        cache: what ``copy.deepcopy`` gives with those arrays in its memo, taken before any
        forward, without walking every attribute (a pipeline stage keeps one per micro-batch
        in flight, and deepcopy was 40 % of a run)."""
        twin = copy.copy(self)
        twin.params, twin.grads = dict(self.params), dict(self.grads)
        return twin


class SplitLayer(Layer):
    """A layer whose dx and weight gradients are computed apart (``backward_input``, then
    ``backward_weights``): ``backward`` is the two in a row."""

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx = self.backward_input(dy)
        self.backward_weights()
        return dx

    def backward_input(self, dy: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}.backward_input")


def _he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """He et al. 2015 initialisation: w ~ N(0, 2 / fan_in)."""
    return rng.standard_normal(shape) * sqrt(2.0 / fan_in)


class Linear(SplitLayer):
    """y = x W + b, with W of shape (in, out), over the last axis of x (a sample may be
    (in,) or a sequence (S, in)).

    With X, dY the inputs and output gradients as rows: dW = X^T dY, db = column sums of
    dY, dx = dy W^T."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features

    def param_shapes(self):
        return {"W": (self.in_features, self.out_features), "b": (self.out_features,)}

    def output_shape(self, in_shape):
        if in_shape[-1:] != (self.in_features,):
            raise ValueError(
                f"Linear({self.in_features}, {self.out_features}): input shape "
                f"must be ({self.in_features},) or (S, {self.in_features}) per sample, "
                f"got {in_shape}"
            )
        return in_shape[:-1] + (self.out_features,)

    def init_params(self, rng):
        self.params["W"][...] = _he_normal(rng, self.params["W"].shape, self.in_features)
        self.params["b"][...] = 0.0

    def forward(self, x):
        self.x = x
        return x @ self.params["W"] + self.params["b"]

    def backward_input(self, dy):
        self.dy = dy
        return dy @ self.params["W"].T

    def backward_weights(self):
        rows, drows = self.x.reshape(-1, self.in_features), self.dy.reshape(-1, self.out_features)
        self.grads["W"][...] = rows.T @ drows
        self.grads["b"][...] = drows.sum(axis=0)

    def flops(self, batch):
        return batch * prod(self.out_shape[:-1]) * (2 * self.in_features + 1) * self.out_features

    def saved(self):
        return {"x": self.x}


class ReLU(Layer):
    """y = max(x, 0); dx = dy * [x > 0]."""

    def forward(self, x):
        self.mask = x > 0
        return x * self.mask

    def backward(self, dy):
        return dy * self.mask

    def saved(self):
        return {"mask": self.mask}


class Flatten(Layer):
    """(N, C, H, W) -> (N, C*H*W); backward reshapes back."""

    def output_shape(self, in_shape):
        return (prod(in_shape),)

    def forward(self, x):
        return x.reshape(len(x), -1)

    def backward(self, dy):
        return dy.reshape((len(dy),) + self.in_shape)

    def flops(self, batch):
        return 0


def _window_output(size: int, kernel: int, stride: int, padding: int, what: str) -> int:
    """Output length of a sliding window: (size + 2 padding - kernel) // stride + 1."""
    out = (size + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ValueError(f"{what}: kernel_size={kernel} does not fit an input of {size} pixels with padding={padding}")
    return out


def im2col(xp: np.ndarray, k: int, stride: int, out_h: int, out_w: int) -> np.ndarray:
    """(N, C, H, W) -> (N*out_h*out_w, C*k*k): row = one k x k window over all channels."""
    n, c = xp.shape[:2]
    cols = np.empty((n, c, k, k, out_h, out_w), xp.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i : i + stride * out_h : stride, j : j + stride * out_w : stride]
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n * out_h * out_w, c * k * k)


def col2im(cols: np.ndarray, x_shape: tuple[int, ...], k: int, stride: int, out_h: int, out_w: int) -> np.ndarray:
    """Adjoint of `im2col`: add every window's entries back onto the (N, C, H, W) image."""
    n, c = x_shape[:2]
    cols = cols.reshape(n, out_h, out_w, c, k, k).transpose(0, 3, 4, 5, 1, 2)
    dx = np.zeros(x_shape, cols.dtype)
    for i in range(k):
        for j in range(k):
            dx[:, :, i : i + stride * out_h : stride, j : j + stride * out_w : stride] += cols[:, :, i, j]
    return dx


class Conv2d(Layer):
    """y[n, o] = b[o] + sum_{c,i,j} W[o, c, i, j] x_pad[n, c, s*h + i, s*w + j], via im2col.

    With X = im2col(x) and Wm = W reshaped (out, c*k*k): Y = X Wm^T + b,
    dWm = dY^T X, db = column sums of dY, dx = col2im(dY Wm)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.cin, self.cout = in_channels, out_channels
        self.k, self.stride, self.padding = kernel_size, stride, padding

    def param_shapes(self):
        return {"W": (self.cout, self.cin, self.k, self.k), "b": (self.cout,)}

    def output_shape(self, in_shape):
        if len(in_shape) != 3 or in_shape[0] != self.cin:
            raise ValueError(f"Conv2d: input shape must be ({self.cin}, H, W) per sample, got {in_shape}")
        h, w = (_window_output(s, self.k, self.stride, self.padding, "Conv2d") for s in in_shape[1:])
        return (self.cout, h, w)

    def init_params(self, rng):
        self.params["W"][...] = _he_normal(rng, self.params["W"].shape, self.cin * self.k**2)
        self.params["b"][...] = 0.0

    def forward(self, x):
        p = self.padding
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        _, out_h, out_w = self.out_shape
        self.xp_shape = xp.shape
        self.cols = im2col(xp, self.k, self.stride, out_h, out_w)
        y = self.cols @ self.params["W"].reshape(self.cout, -1).T + self.params["b"]
        return y.reshape(len(x), out_h, out_w, self.cout).transpose(0, 3, 1, 2)

    def backward(self, dy):
        dy = dy.transpose(0, 2, 3, 1).reshape(-1, self.cout)
        self.grads["W"][...] = (dy.T @ self.cols).reshape(self.grads["W"].shape)
        self.grads["b"][...] = dy.sum(axis=0)
        dcols = dy @ self.params["W"].reshape(self.cout, -1)
        dxp = col2im(dcols, self.xp_shape, self.k, self.stride, *self.out_shape[1:])
        h, w = self.in_shape[1:]
        return dxp[:, :, self.padding : self.padding + h, self.padding : self.padding + w]

    def flops(self, batch):
        return batch * prod(self.out_shape) * (2 * self.cin * self.k**2 + 1)

    def saved(self):
        return {"cols": self.cols}


class _Pool2d(Layer):
    """Pooling over k x k windows with stride s (no padding), channel by channel."""

    def __init__(self, kernel_size: int, stride: int | None = None):
        super().__init__()
        self.k, self.stride = kernel_size, stride or kernel_size

    def output_shape(self, in_shape):
        name = type(self).__name__
        if len(in_shape) != 3:
            raise ValueError(f"{name}: input shape must be (C, H, W) per sample, got {in_shape}")
        h, w = (_window_output(s, self.k, self.stride, 0, name) for s in in_shape[1:])
        return (in_shape[0], h, w)

    def _windows(self, x):
        """One row per (sample, channel, output pixel), k*k columns."""
        n, c, h, w = x.shape
        return im2col(x.reshape(n * c, 1, h, w), self.k, self.stride, *self.out_shape[1:])

    def _unwindows(self, dcols, n):
        c, h, w = self.in_shape
        dx = col2im(dcols, (n * c, 1, h, w), self.k, self.stride, *self.out_shape[1:])
        return dx.reshape((n,) + self.in_shape)

    def flops(self, batch):
        return batch * prod(self.out_shape) * self.k**2


class MaxPool2d(_Pool2d):
    """y = max over each window; dx routes dy to the arg-max of its window."""

    def forward(self, x):
        cols = self._windows(x)
        self.argmax = cols.argmax(axis=1)
        return cols[np.arange(len(cols)), self.argmax].reshape((len(x),) + self.out_shape)

    def backward(self, dy):
        dcols = np.zeros((dy.size, self.k**2), dy.dtype)
        dcols[np.arange(dy.size), self.argmax] = dy.ravel()
        return self._unwindows(dcols, len(dy))

    def saved(self):
        return {"argmax": self.argmax}


class AvgPool2d(_Pool2d):
    """y = mean over each window; dx spreads dy / k^2 over its window."""

    def forward(self, x):
        return self._windows(x).mean(axis=1).reshape((len(x),) + self.out_shape)

    def backward(self, dy):
        dcols = np.repeat(dy.reshape(-1, 1) / self.k**2, self.k**2, axis=1)
        return self._unwindows(dcols, len(dy))


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax(logits) against integer labels, and its gradient.

    p = softmax(z) = exp(z - max z) / sum exp(z - max z); loss = -mean_n log p[n, y_n];
    dloss/dz = (p - onehot(y)) / N."""
    if logits.ndim != 2 or np.shape(y) != (len(logits),):
        raise ValueError(
            f"softmax_cross_entropy: logits must be (N, classes) and y (N,), got {logits.shape} and {np.shape(y)}"
        )
    classes = logits.shape[1]
    if len(y) and (np.min(y) < 0 or np.max(y) >= classes):
        raise ValueError(f"softmax_cross_entropy: labels y must be in [0, {classes - 1}]")
    n = len(logits)
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -log_p[np.arange(n), y].mean()
    dlogits = np.exp(log_p)
    dlogits[np.arange(n), y] -= 1.0
    return float(loss), dlogits / n


GradHook = Callable[[int, str, np.ndarray], None]


class Sequential:
    """Layers applied in order, all parameters in `params`, all gradients in `grads`.

    `params` and `grads` are 1-D arrays; every layer's tensors are reshaped views into
    them, so update them in place (`model.params[...] = w`), never rebind them."""

    def __init__(self, layers: list[Layer], input_shape: tuple[int, ...], seed: int = 0, dtype=np.float32):
        self.layers, self.input_shape = list(layers), tuple(input_shape)
        shape = self.input_shape
        for layer in self.layers:
            shape = layer.build(shape)
        self.output_shape = shape
        self.names = [f"{type(layer).__name__.lower()}{i}" for i, layer in enumerate(self.layers)]
        total = sum(prod(s) for layer in self.layers for s in layer.param_shapes().values())
        self.params = np.zeros(total, dtype)
        self.grads = np.zeros(total, dtype)
        self._tensor_slices: list[ParamSlice] = []
        offset = 0
        for i, layer in enumerate(self.layers):
            for name, s in layer.param_shapes().items():
                size = prod(s)
                layer.params[name] = self.params[offset : offset + size].reshape(s)
                layer.grads[name] = self.grads[offset : offset + size].reshape(s)
                self._tensor_slices.append(ParamSlice(i, f"{self.names[i]}.{name}", offset, size, len(s)))
                offset += size
        self._ready = {s.layer: s for s in self.layer_slices()}
        rng = np.random.default_rng(seed)
        for layer in self.layers:
            layer.init_params(rng)

    def param_slices(self) -> list[ParamSlice]:
        """One slice per parameter tensor (W, b of each layer), in buffer order."""
        return list(self._tensor_slices)

    def layer_slices(self) -> list[ParamSlice]:
        """One slice per layer that has parameters (its tensors are adjacent)."""
        by_layer: dict[int, ParamSlice] = {}
        for s in self._tensor_slices:
            first = by_layer.get(s.layer, ParamSlice(s.layer, self.names[s.layer], s.offset, 0))
            by_layer[s.layer] = first._replace(size=first.size + s.size)
        return list(by_layer.values())

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=self.params.dtype)
        if x.shape[1:] != self.input_shape:
            raise ValueError(f"x must have shape (N,) + {self.input_shape}, got {x.shape}")
        for layer in self.layers:
            x = layer.forward(x)
        return x

    __call__ = forward

    def backward(self, dout: np.ndarray, on_grad_ready: GradHook | None = None) -> np.ndarray:
        """Backpropagate dout = dloss/doutput, last layer first; return dloss/dinput.

        As soon as layer i's gradient is complete, and before layer i-1 starts its
        backward, `on_grad_ready(i, layer_name, grad_view)` is called with the layer's
        contiguous 1-D view of `grads` (wait-free backpropagation hooks in here)."""
        for i in reversed(range(len(self.layers))):
            dout = self.layers[i].backward(dout)
            if on_grad_ready is not None and i in self._ready:
                s = self._ready[i]
                on_grad_ready(i, s.name, self.grads[s.offset : s.offset + s.size])
        return dout

    def flops(self, batch: int) -> list[int]:
        """Forward FLOPs of each layer for a batch of `batch` samples."""
        return [layer.flops(batch) for layer in self.layers]


def mlp(sizes: list[int], seed: int = 0, dtype=np.float32) -> Sequential:
    """Multi-layer perceptron Linear-ReLU-...-Linear, e.g. mlp([64, 128, 10])."""
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must list at least 2 positive layer widths, got {sizes}")
    layers: list[Layer] = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [Linear(fan_in, fan_out), ReLU()]
    return Sequential(layers[:-1], (sizes[0],), seed=seed, dtype=dtype)


def cnn(seed: int = 0, classes: int = 10, dtype=np.float32) -> Sequential:
    """A small LeNet-style network for (1, 8, 8) digit images:
    conv3x3(8) - ReLU - maxpool2 - conv3x3(16) - ReLU - maxpool2 - linear(classes)."""
    layers = [
        Conv2d(1, 8, 3, padding=1),
        ReLU(),
        MaxPool2d(2),
        Conv2d(8, 16, 3, padding=1),
        ReLU(),
        MaxPool2d(2),
        Flatten(),
        Linear(16 * 2 * 2, classes),
    ]
    return Sequential(layers, (1, 8, 8), seed=seed, dtype=dtype)


def activation_nbytes(model: Sequential) -> int:
    """Bytes of the arrays every layer kept for backward in the last forward (`Layer.saved`)."""
    return sum(a.nbytes for layer in model.layers for a in layer.saved().values())
