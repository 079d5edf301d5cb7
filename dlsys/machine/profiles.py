"""Layer profiles of classic ImageNet CNNs, for cost models and scheduling experiments.

`profile(name)` lists, in forward order, every layer that has parameters: its name
(torchvision's module name), parameter count, and forward FLOPs for ONE sample at
224 x 224 (299 x 299 for Inception-v3). Batch normalisation is folded into the
convolution it follows; ``vectors`` says how many of a layer's parameters sit in its 1-D
tensors (the bias, or batch norm's scale and shift). FLOPs count a multiply-add as 2,
plus 1 per output element for a bias and 2 for a batch norm (scale and shift);
activations and pooling are left out.

The profiles are generated from compact descriptions of the torchvision models
(torchvision/models/{alexnet,vgg,resnet,googlenet,inception}.py), and their totals
match torchvision's parameter counts exactly:

| model        | parameters  | forward GMACs (torchvision docs) |
| ------------ | ----------- | -------------------------------- |
| alexnet      |  61,100,840 |  0.71 |
| vgg19        | 143,667,240 | 19.63 |
| resnet50     |  25,557,032 |  4.09 |
| googlenet    |   6,624,904 |  1.50 | (aux_logits=False, as after loading weights)
| inception_v3 |  27,161,264 |  5.71 | (with the auxiliary classifier, used in training)

Papers: Krizhevsky et al. 2012 (AlexNet, torchvision's one-GPU variant), Simonyan &
Zisserman 2015 (VGG), He et al. 2016 (ResNet; torchvision's v1.5 strides in the 3x3),
Szegedy et al. 2015 (GoogLeNet; torchvision uses 3x3 kernels in the "5x5" branch),
Szegedy et al. 2016 (Inception-v3).
"""

from __future__ import annotations

from math import ceil
from typing import NamedTuple


class LayerProfile(NamedTuple):
    name: str
    params: int
    fwd_flops: int  # forward FLOPs for one sample
    vectors: int = 0  # of the params, those in 1-D tensors (bias; batch norm's scale and shift)


Shape = tuple[int, int, int]  # (channels, height, width)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _out(size: int, k: int, stride: int, pad: int, ceil_mode: bool = False) -> int:
    """Sliding-window output length; ceil mode never starts a window in the padding."""
    span = size + 2 * pad - k
    out = (ceil(span / stride) if ceil_mode else span // stride) + 1
    return out - 1 if ceil_mode and (out - 1) * stride >= size + pad else out


class _Builder:
    """Walks an architecture, tracking shapes and recording one LayerProfile per layer."""

    def __init__(self):
        self.layers: list[LayerProfile] = []

    def conv(self, name: str, x: Shape, out: int, k, stride=1, pad=0, bias=False, bn=True) -> Shape:
        (kh, kw), (ph, pw), (c, h, w) = _pair(k), _pair(pad), x
        y = (out, _out(h, kh, stride, ph), _out(w, kw, stride, pw))
        per_pixel = 2 * c * kh * kw + bias + 2 * bn
        self.layers.append(
            LayerProfile(
                name, out * (c * kh * kw + bias + 2 * bn), per_pixel * out * y[1] * y[2], out * (bias + 2 * bn)
            )
        )
        return y

    def fc(self, name: str, x: Shape, out: int) -> Shape:
        inputs = x[0] * x[1] * x[2]
        self.layers.append(LayerProfile(name, (inputs + 1) * out, (2 * inputs + 1) * out, out))
        return (out, 1, 1)

    @staticmethod
    def pool(x: Shape, k: int, stride: int, pad: int = 0, ceil_mode: bool = False) -> Shape:
        c, h, w = x
        return (c, _out(h, k, stride, pad, ceil_mode), _out(w, k, stride, pad, ceil_mode))


def _concat(*branches: Shape) -> Shape:
    return (sum(b[0] for b in branches),) + branches[0][1:]


def _alexnet() -> list[LayerProfile]:
    b, x = _Builder(), (3, 224, 224)
    x = b.pool(b.conv("features.0", x, 64, 11, 4, 2, bias=True, bn=False), 3, 2)
    x = b.pool(b.conv("features.3", x, 192, 5, 1, 2, bias=True, bn=False), 3, 2)
    for i, out in zip((6, 8, 10), (384, 256, 256)):
        x = b.conv(f"features.{i}", x, out, 3, 1, 1, bias=True, bn=False)
    x = b.pool(x, 3, 2)  # 6 x 6, so the adaptive average pool is the identity
    for i, out in zip((1, 4, 6), (4096, 4096, 1000)):
        x = b.fc(f"classifier.{i}", x, out)
    return b.layers


def _vgg19() -> list[LayerProfile]:
    b, x, i = _Builder(), (3, 224, 224), 0
    for widths in ((64, 64), (128, 128), (256,) * 4, (512,) * 4, (512,) * 4):
        for out in widths:
            x = b.conv(f"features.{i}", x, out, 3, 1, 1, bias=True, bn=False)
            i += 2  # conv, ReLU
        x, i = b.pool(x, 2, 2), i + 1  # max pool
    for i, out in zip((0, 3, 6), (4096, 4096, 1000)):
        x = b.fc(f"classifier.{i}", x, out)
    return b.layers


def _resnet50() -> list[LayerProfile]:
    b = _Builder()
    x = b.pool(b.conv("conv1", (3, 224, 224), 64, 7, 2, 3), 3, 2, 1)
    for stage, (blocks, width, stride) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512), (1, 2, 2, 2)), start=1):
        for block in range(blocks):
            name, s = f"layer{stage}.{block}", stride if block == 0 else 1
            y = b.conv(f"{name}.conv1", x, width, 1)
            y = b.conv(f"{name}.conv2", y, width, 3, s, 1)
            y = b.conv(f"{name}.conv3", y, 4 * width, 1)
            if block == 0:
                b.conv(f"{name}.downsample.0", x, 4 * width, 1, s)
            x = y
    b.fc("fc", (x[0], 1, 1), 1000)  # after global average pooling
    return b.layers


def _googlenet() -> list[LayerProfile]:
    b = _Builder()
    x = b.pool(b.conv("conv1", (3, 224, 224), 64, 7, 2, 3), 3, 2, ceil_mode=True)
    x = b.conv("conv3", b.conv("conv2", x, 64, 1), 192, 3, 1, 1)
    x = b.pool(x, 3, 2, ceil_mode=True)
    blocks = {
        "3a": (64, 96, 128, 16, 32, 32),
        "3b": (128, 128, 192, 32, 96, 64),
        "4a": (192, 96, 208, 16, 48, 64),
        "4b": (160, 112, 224, 24, 64, 64),
        "4c": (128, 128, 256, 24, 64, 64),
        "4d": (112, 144, 288, 32, 64, 64),
        "4e": (256, 160, 320, 32, 128, 128),
        "5a": (256, 160, 320, 32, 128, 128),
        "5b": (384, 192, 384, 48, 128, 128),
    }
    for block, (c1, c3r, c3, c5r, c5, pool_proj) in blocks.items():
        n = f"inception{block}"
        x = _concat(
            b.conv(f"{n}.branch1", x, c1, 1),
            b.conv(f"{n}.branch2.1", b.conv(f"{n}.branch2.0", x, c3r, 1), c3, 3, 1, 1),
            b.conv(f"{n}.branch3.1", b.conv(f"{n}.branch3.0", x, c5r, 1), c5, 3, 1, 1),
            b.conv(f"{n}.branch4.1", b.pool(x, 3, 1, 1, ceil_mode=True), pool_proj, 1),
        )
        if block in ("3b", "4e"):
            x = b.pool(x, 3 if block == "3b" else 2, 2, ceil_mode=True)
    b.fc("fc", (x[0], 1, 1), 1000)
    return b.layers


def _inception_v3() -> list[LayerProfile]:
    b = _Builder()
    x = b.conv("Conv2d_1a_3x3", (3, 299, 299), 32, 3, 2)
    x = b.conv("Conv2d_2b_3x3", b.conv("Conv2d_2a_3x3", x, 32, 3), 64, 3, 1, 1)
    x = b.conv("Conv2d_4a_3x3", b.conv("Conv2d_3b_1x1", b.pool(x, 3, 2), 80, 1), 192, 3)
    x = b.pool(x, 3, 2)

    def chain(n, x, *convs):  # convs: (suffix, out, kernel, stride, padding)
        for suffix, out, k, s, p in convs:
            x = b.conv(f"{n}.{suffix}", x, out, k, s, p)
        return x

    for n, pool_features in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):  # A
        x = _concat(
            chain(n, x, ("branch1x1", 64, 1, 1, 0)),
            chain(n, x, ("branch5x5_1", 48, 1, 1, 0), ("branch5x5_2", 64, 5, 1, 2)),
            chain(
                n, x, ("branch3x3dbl_1", 64, 1, 1, 0), ("branch3x3dbl_2", 96, 3, 1, 1), ("branch3x3dbl_3", 96, 3, 1, 1)
            ),
            chain(n, x, ("branch_pool", pool_features, 1, 1, 0)),
        )
    x = _concat(
        chain("Mixed_6a", x, ("branch3x3", 384, 3, 2, 0)),  # B
        chain(
            "Mixed_6a",
            x,
            ("branch3x3dbl_1", 64, 1, 1, 0),
            ("branch3x3dbl_2", 96, 3, 1, 1),
            ("branch3x3dbl_3", 96, 3, 2, 0),
        ),
        b.pool(x, 3, 2),
    )
    row, col = ((1, 7), 1, (0, 3)), ((7, 1), 1, (3, 0))  # 1x7 and 7x1 kernels, "same"
    for n, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):  # C
        x = _concat(
            chain(n, x, ("branch1x1", 192, 1, 1, 0)),
            chain(n, x, ("branch7x7_1", c7, 1, 1, 0), ("branch7x7_2", c7, *row), ("branch7x7_3", 192, *col)),
            chain(
                n,
                x,
                ("branch7x7dbl_1", c7, 1, 1, 0),
                ("branch7x7dbl_2", c7, *col),
                ("branch7x7dbl_3", c7, *row),
                ("branch7x7dbl_4", c7, *col),
                ("branch7x7dbl_5", 192, *row),
            ),
            chain(n, x, ("branch_pool", 192, 1, 1, 0)),
        )
    aux = chain("AuxLogits", b.pool(x, 5, 3), ("conv0", 128, 1, 1, 0), ("conv1", 768, 5, 1, 0))
    b.fc("AuxLogits.fc", aux, 1000)
    x = _concat(
        chain("Mixed_7a", x, ("branch3x3_1", 192, 1, 1, 0), ("branch3x3_2", 320, 3, 2, 0)),  # D
        chain(
            "Mixed_7a",
            x,
            ("branch7x7x3_1", 192, 1, 1, 0),
            ("branch7x7x3_2", 192, *row),
            ("branch7x7x3_3", 192, *col),
            ("branch7x7x3_4", 192, 3, 2, 0),
        ),
        b.pool(x, 3, 2),
    )
    for n in ("Mixed_7b", "Mixed_7c"):  # E
        x3 = chain(n, x, ("branch3x3_1", 384, 1, 1, 0))
        xd = chain(n, x, ("branch3x3dbl_1", 448, 1, 1, 0), ("branch3x3dbl_2", 384, 3, 1, 1))
        x = _concat(
            chain(n, x, ("branch1x1", 320, 1, 1, 0)),
            chain(n, x3, ("branch3x3_2a", 384, (1, 3), 1, (0, 1))),
            chain(n, x3, ("branch3x3_2b", 384, (3, 1), 1, (1, 0))),
            chain(n, xd, ("branch3x3dbl_3a", 384, (1, 3), 1, (0, 1))),
            chain(n, xd, ("branch3x3dbl_3b", 384, (3, 1), 1, (1, 0))),
            chain(n, x, ("branch_pool", 192, 1, 1, 0)),
        )
    b.fc("fc", (x[0], 1, 1), 1000)
    return b.layers


_BUILDERS = {
    "alexnet": _alexnet,
    "vgg19": _vgg19,
    "resnet50": _resnet50,
    "googlenet": _googlenet,
    "inception_v3": _inception_v3,
}
PROFILES: tuple[str, ...] = tuple(_BUILDERS)


def profile(name: str) -> list[LayerProfile]:
    """Per-layer (name, params, fwd_flops per sample) of a model named in PROFILES."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(PROFILES)}")
    return _BUILDERS[name]()


def totals(name: str) -> tuple[int, int]:
    """(total parameters, total forward FLOPs per sample) of a model in PROFILES."""
    layers = profile(name)
    return sum(l.params for l in layers), sum(l.fwd_flops for l in layers)
