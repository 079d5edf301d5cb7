"""Logical sizes: a small real array that stands for a much larger one.

Emulating 512 ranks that each hold AlexNet's gradient (61.1 M float32, 244 MB) would need
125 GB of real memory. The virtual clocks only need the *size* of every message, so a
rank can compute on a small real array and charge the wire for the large one:

    from dlsys.comm.logical import LogicalArray
    grad = LogicalArray(np.ones(512, np.float32), scale=119_338)  # stands for 61,101,056 floats
    grad.logical_nbytes        # 244_404_224: what a send of it costs on the virtual wire
    collectives.allreduce(comm, grad)  # unchanged program code

Each real element stands for ``scale`` logical elements, so everything that slices keeps
the proportion: a block from ``np.array_split`` of 1/p of the real elements stands for
1/p of the logical bytes, which is what the closed forms assume (pick the real length
as a multiple of p so that every block is the same size). Values are the real ones: only
sizes are logical. The rules:

* slicing, reshaping, copying, ``np.array_split``, ``np.concatenate``, ``np.empty_like``
  and element-wise arithmetic (``+``, ``np.maximum``, ``/ p``, ``astype``) keep the scale;
* mixing two different scales in one operation that makes a new array is an error (the
  result's size would be meaningless); a plain ndarray operand is fine and takes the
  LogicalArray's scale; a result written into ``out=`` keeps the scale of ``out``;
  ``np.concatenate`` of 1-D arrays of different scales (a ring's uneven blocks, joined
  again) gives one scale per element (``per_block`` below);
* reductions (``sum``, ``max``, ``mean`` over axes) return plain arrays and numbers, since
  a reduction's result is a value, not a payload;
* both backends deliver a received LogicalArray with the sender's scale
  (``Communicator.send`` charges ``payload_nbytes``, which reads ``logical_nbytes``).

Uneven blocks: 60.97 MB of float32 on 512 ranks is 15,242,500 elements, 260 blocks of
29,771 and 252 of 29,770; one integer scale cannot stand for both. ``per_block(real,
scales)`` makes an array of one real element per block whose ``np.array_split`` into
``len(scales)`` gives block i the integer scale ``scales[i]``: a ring's messages then
cost exactly the logical blocks. Such an array is only ever split (the ring sends its
blocks, never the whole); sending it whole raises (its ``scale`` is None).

How long the real arrays are, under a memory budget, is decided in one place for every
entry point (CLI, app, lessons, bench): ``dlsys.experiments.budget.plan_buffers``.
"""

from __future__ import annotations

import numpy as np


class LogicalArray(np.ndarray):
    """An ndarray whose every element stands for ``scale`` logical elements on the wire.

    ``LogicalArray(real, scale)`` returns an instance of a subclass made for that scale
    (one per scale, cached): the scale lives on the type, and numpy keeps the type through
    views, slices, copies and element-wise results at C speed, with no Python hook per
    array (a 512-rank emulation makes millions of them).
    """

    scale: int = 1
    __array_priority__ = 1.0  # numpy functions that pick an output type by priority pick ours

    def __new__(cls, real, scale: int):
        if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool) or scale < 1:
            raise ValueError(f"scale must be an integer >= 1 (logical elements per real element), got {scale!r}")
        return np.asanyarray(real).view(np.ndarray).view(_scaled(int(scale)))

    def __reduce__(self):
        # Pickle as (values, scale): the per-scale subclass is made again on loading.
        return LogicalArray, (self.view(np.ndarray), self.scale)

    def __repr__(self):
        return f"LogicalArray({self.view(np.ndarray)!r}, scale={self.scale})"

    @property
    def logical_size(self) -> int:
        """Elements this array stands for."""
        return self.size * self.scale

    @property
    def logical_nbytes(self) -> int:
        """Bytes this array stands for: what sending it costs in virtual time."""
        return self.nbytes * self.scale

    def __array_wrap__(self, array, context=None, return_scalar=False):
        # numpy calls this on every ufunc result (context = (ufunc, inputs, index)) and on
        # every reduction (context None). It is cheaper than __array_ufunc__, which would
        # re-dispatch every addition of an emulated ring.
        if context is None:  # sum, max, mean...: a value, not a payload
            array = array.view(np.ndarray)
            return array[()] if return_scalar else array
        if isinstance(array, LogicalArray):  # written into an ``out``: its scale is the result's
            return array
        cls = type(self)
        for operand in context[1]:  # numpy wraps with one of the inputs (self)
            if type(operand) is not cls and isinstance(operand, LogicalArray) and operand.scale != cls.scale:
                common_scale(context[1])  # raises, naming the scales
        # what ndarray.__array_wrap__ does for a subclass, without super()'s lookups: this
        # runs on every addition of an emulated ring's reduce-scatter
        return array.view(cls)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.array_split:
            blocks = _split_axis0(*args, **kwargs)
            if blocks is not None:
                return blocks
        elif func is np.concatenate:
            arrays = args[0] if args else kwargs["arrays"]
            result = super().__array_function__(func, types, args, kwargs)
            if kwargs.get("out") is not None:
                return result
            scales = {x.scale for x in arrays if isinstance(x, LogicalArray)}
            if len(scales) == 1 and None not in scales:
                return _wrap(result, scales.pop())
            return per_block(result, _element_scales(arrays))  # a ring's blocks, joined again
        return super().__array_function__(func, types, args, kwargs)


def common_scale(operands) -> int:
    """The one scale the LogicalArrays among ``operands`` share (1 if there are none)."""
    scales = {x.scale for x in operands if isinstance(x, LogicalArray)}
    if len(scales) > 1:
        raise ValueError(
            f"cannot combine LogicalArrays of different scales {sorted(scales, key=str)}: "
            "their logical sizes would not add up"
        )
    return scales.pop() if scales else 1


def as_logical(array: np.ndarray, logical_nbytes: int) -> np.ndarray:
    """``array`` as it was sent: a LogicalArray if it stood for ``logical_nbytes`` > its bytes.

    Used by transports that move only the real bytes (the processes backend) to restore
    the sender's scale from the message header.
    """
    if logical_nbytes == array.nbytes or array.nbytes == 0:
        return array
    scale, rest = divmod(logical_nbytes, array.nbytes)
    if rest or scale < 1:
        raise ValueError(f"a message of {array.nbytes} real bytes cannot stand for {logical_nbytes} logical bytes")
    return LogicalArray(array, scale)


def _split_axis0(ary, indices_or_sections, axis=0):
    """np.array_split into n sections along axis 0 as plain slices (one view per block,
    where numpy's version makes two swapaxes per block, each dispatched back through
    ``__array_function__``: the split of a 512-rank ring's buffer would dominate). None
    when numpy's general version is needed."""
    sections = indices_or_sections
    if not (isinstance(sections, (int, np.integer)) and sections > 0 and axis == 0 and ary.ndim):
        return None
    scales = getattr(ary, "block_scales", None)
    if scales is not None:  # one real element per block, each with its own scale
        if ary.shape != (len(scales),) or sections != len(scales):
            raise ValueError(
                f"an array of per-block scales splits only into its {len(scales)} blocks, "
                f"not {ary.shape} into {sections}"
            )
        plain = ary.view(np.ndarray)  # slicing a plain view, then one view per block, is the cheapest
        return [plain[i : i + 1].view(cls) for i, cls in enumerate(ary.block_types)]
    each, extra = divmod(ary.shape[0], int(sections))
    blocks, start = [], 0
    for i in range(sections):
        stop = start + each + (i < extra)
        blocks.append(ary[start:stop])
        start = stop
    return blocks


def _wrap(result, scale: int):
    if isinstance(result, np.ndarray) and result.ndim:
        return result.view(_scaled(scale))
    return result


_SCALED: dict[int, type] = {}


def _scaled(scale: int) -> type:
    """The subclass of LogicalArray whose instances stand for ``scale`` elements each."""
    cls = _SCALED.get(scale)
    if cls is None:
        cls = _SCALED[scale] = type("LogicalArray", (LogicalArray,), {"scale": scale, "__module__": __name__})
    return cls


def _element_scales(arrays) -> list[int]:
    """Every element's scale, for joining 1-D arrays of different scales into a per-block
    array; a plain array among them has no scale to give (the sizes would not add up)."""
    scales: list[int] = []
    for x in arrays:
        if not isinstance(x, LogicalArray) or x.ndim != 1:
            common_scale(arrays)  # raises, naming the scales
            raise ValueError("only 1-D LogicalArrays of different scales can be joined (one scale per element)")
        scale = x.scale
        if scale is None:
            scales.extend(x.block_scales)
        elif x.size == 1:  # a ring's block of a per-block array: no list per block (p of them per rank)
            scales.append(scale)
        else:
            scales.extend([scale] * x.size)
    return scales


def per_block(real, scales) -> LogicalArray:
    """One real element per block, element i standing for ``scales[i]`` logical ones:
    ``np.array_split`` into ``len(scales)`` blocks gives block i the scale ``scales[i]``."""
    real = np.asanyarray(real).view(np.ndarray)
    scales = tuple(map(int, scales))
    if real.shape != (len(scales),) or min(scales, default=0) < 1:
        raise ValueError(
            f"per_block needs one real element per block and scales >= 1, got {real.shape} "
            f"elements for {len(scales)} scales (smallest {min(scales, default=None)})"
        )
    return real.view(_per_block(scales))


class _PerBlock(LogicalArray):
    block_scales: tuple = ()
    block_types: tuple = ()  # _scaled(scale) of every block, made once with the class
    scale = None  # sending the whole array would have no single scale: payload_nbytes raises

    def __reduce__(self):
        return per_block, (self.view(np.ndarray), self.block_scales)

    def __repr__(self):
        return f"per_block({self.view(np.ndarray)!r}, scales={self.block_scales[:4]}...)"

    @property
    def logical_size(self) -> int:
        return sum(self.block_scales)

    @property
    def logical_nbytes(self) -> int:
        return self.itemsize * sum(self.block_scales)


_PER_BLOCK: dict[tuple, type] = {}


def _per_block(scales: tuple) -> type:
    cls = _PER_BLOCK.get(scales)
    if cls is None:
        cls = _PER_BLOCK[scales] = type(
            "LogicalArray",
            (_PerBlock,),
            {"block_scales": scales, "block_types": tuple(_scaled(scale) for scale in scales), "__module__": __name__},
        )
    return cls
