"""How the emulated NPU holds a tensor: data type and device format, and the payload it dumps.

A :class:`Held` is one tensor as the device keeps it (``dtype`` a numpy name, ``format`` the
device layout, ``origin_format`` the framework layout). The ``ascend`` profile's rules
(docs/reference/ascend-dump-formats.md §1.8, §2.4)::

    producer outputs   float16 (the tensor is in NumericsPlan.fp16_tensors) and 4-D:
                         filter gradients (Conv2DBackpropFilter, Depthwise...)     -> FRACTAL_Z (origin HWCN)
                         feature maps (everything else)                            -> NC1HWC0
                       anything else                                               -> ND (4-D: origin NHWC)
    consumer inputs    float16 ops (NumericsPlan.fp16_ops) read float16:
                         Conv2D-family data input (4-D)            NC1HWC0
                         Conv2D / Conv2DBackpropInput filter       FRACTAL_Z (origin HWCN)
                         Conv2DBackpropFilter out_backprop / input NC1HWC0
                         MatMul / BatchMatMul operands (>= 2-D)    FRACTAL_NZ
                         other float inputs                        ND, float16
                       every other op reads the tensor in its TF dtype, ND

Where a producer's :class:`Held` differs from what a consumer reads, the Build graph gets a
``Cast`` (dtype) and/or ``TransData`` (layout) node between them (:mod:`.npu_graph`). Going
to a device layout the Cast comes first (TransData works on the float16 data), going back to
ND the TransData comes first. TF's data layout is assumed NHWC for 4-D feature maps (CPU
TensorFlow runs convolutions in NHWC) and HWCN for filters.

:func:`device_array` lays a framework array out as a :class:`Held` says
(:func:`~npu_dump_hook.formats.device_format.from_original`); :func:`device_shape` gives the
device dims without touching data.
"""
from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..formats import device_format

__all__ = ["Held", "C0", "plain", "device_shape", "device_array", "input_held", "output_held", "needs_trans"]

C0 = 16  # cube block: float16 C0, N0, Ni (msaccucmp's C0_AXIS)

_DATA_AND_FILTER = {  # op type -> {input index: device format} of its float16 inputs
    "Conv2D": {0: "NC1HWC0", 1: "FRACTAL_Z"},
    "Conv2DBackpropInput": {1: "FRACTAL_Z", 2: "NC1HWC0"},
    "Conv2DBackpropFilter": {0: "NC1HWC0", 2: "NC1HWC0"},
    "DepthwiseConv2dNative": {0: "NC1HWC0"},
    "DepthwiseConv2dNativeBackpropInput": {2: "NC1HWC0"},
    "DepthwiseConv2dNativeBackpropFilter": {0: "NC1HWC0", 2: "NC1HWC0"},
    "MatMul": {0: "FRACTAL_NZ", 1: "FRACTAL_NZ"},
    "BatchMatMul": {0: "FRACTAL_NZ", 1: "FRACTAL_NZ"},
    "BatchMatMulV2": {0: "FRACTAL_NZ", 1: "FRACTAL_NZ"},
    "BatchMatMulV3": {0: "FRACTAL_NZ", 1: "FRACTAL_NZ"},
}
_FILTER_OUTPUTS = frozenset(("Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter"))
_MIN_RANK = {"NC1HWC0": 4, "FRACTAL_Z": 4, "FRACTAL_NZ": 2}
_EXACT_RANK = {"NC1HWC0": 4, "FRACTAL_Z": 4}


class Held(NamedTuple):
    """A tensor as the device holds it."""

    dtype: str  # numpy dtype name: "float16", "float32", "int32", ...
    format: str  # device layout: "ND", "NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ"
    origin_format: str  # framework layout: "ND", "NHWC", "HWCN"


def _origin(shape: Optional[Sequence[int]]) -> str:
    return "NHWC" if shape is not None and len(shape) == 4 else "ND"


def plain(dtype: str, shape: Optional[Sequence[int]]) -> Held:
    """The tensor in its TF dtype and layout."""
    origin = _origin(shape)
    return Held(dtype, "ND", origin)


def output_held(dtype: str, shape: Optional[Sequence[int]], fp16: bool, op_type: str = "") -> Held:
    """How a producer holds its output: float16 4-D feature maps in NC1HWC0 (filter gradients in
    FRACTAL_Z), the rest ND."""
    if fp16 and dtype in ("float32", "float16"):
        if shape is not None and len(shape) == 4:
            if op_type in _FILTER_OUTPUTS:
                return Held("float16", "FRACTAL_Z", "HWCN")
            return Held("float16", "NC1HWC0", "NHWC")
        return Held("float16", "ND", _origin(shape))
    return plain(dtype, shape)


def input_held(op_type: str, index: int, dtype: str, shape: Optional[Sequence[int]], fp16_op: bool) -> Held:
    """How a consumer reads its input ``index`` (``dtype``/``shape``: the TF input's)."""
    if not fp16_op or dtype not in ("float32", "float16"):
        return plain(dtype, shape)
    wanted = _DATA_AND_FILTER.get(op_type, {}).get(index, "ND")
    rank = len(shape) if shape is not None else -1
    if wanted != "ND" and (rank < _MIN_RANK[wanted] or (wanted in _EXACT_RANK and rank != _EXACT_RANK[wanted])):
        wanted = "ND"
    origin = "HWCN" if wanted == "FRACTAL_Z" else _origin(shape)
    return Held("float16", wanted, origin)


def needs_trans(source: Held, target: Held) -> Tuple[bool, bool]:
    """(dtype changes, layout changes) between what a producer holds and what a consumer reads."""
    return source.dtype != target.dtype, source.format != target.format


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def device_shape(shape: Sequence[int], held: Held) -> Tuple[int, ...]:
    """Device dims of a framework ``shape`` laid out as ``held`` (unknown dims stay -1)."""
    dims = tuple(int(d) for d in shape)
    if held.format == "ND" or any(d < 0 for d in dims):
        return dims
    if held.format == "NC1HWC0":
        n, h, w, c = dims if held.origin_format == "NHWC" else (dims[0], dims[2], dims[3], dims[1])
        return (n, _ceil(c, C0), h, w, C0)
    if held.format == "FRACTAL_Z":
        h, w, c, n = dims  # HWCN
        return (_ceil(c, C0) * h * w, _ceil(n, C0), C0, C0)
    if held.format == "FRACTAL_NZ":
        batch, rows, cols = dims[:-2], dims[-2], dims[-1]
        return tuple(batch) + (_ceil(cols, C0), _ceil(rows, C0), C0, C0)
    return dims


def device_array(array: np.ndarray, held: Held) -> np.ndarray:
    """``array`` (TF layout) cast to ``held.dtype`` (beyond the float16 range -> inf, as on the
    device) and laid out as ``held.format``, zero padded; C-contiguous."""
    if array.dtype.name != held.dtype and array.dtype.kind in "fc":
        with np.errstate(over="ignore", invalid="ignore"):
            array = array.astype(held.dtype)
    if held.format != "ND":
        array = device_format.from_original(array, held.format, held.origin_format, c0=C0, n0=C0)
    return np.ascontiguousarray(array)
