"""How many times a TF 1.x ``tf.while_loop`` body runs, read from the graph (for the size estimate).

GE dumps a loop-body task at every iteration and the golden capture takes every iteration's value
(:mod:`npu_dump_hook.train.capture`), so a loop body's bytes count once per iteration. The count
is known before the step when the loop's bound folds to a constant: the ``maximum_iterations``
of its while context (``tf.nn.dynamic_rnn`` passes the time steps, the input's static length),
else the limit of a ``counter < limit`` condition. A loop whose bound does not fold (it depends on
fed or computed values) counts once; :class:`LoopCounts` says which loops those were.

Only the static parts of a graph are read: ``Const`` values, ``Shape`` of a tensor of known shape,
and ``Identity``/``Enter``/``Cast``, ``StridedSlice``, ``Pack``, ``Maximum``/``Minimum`` over them.
TensorFlow objects are received, never imported (the while context is TF's private
``_control_flow_context``, read with ``getattr`` as the capture does).
"""
from typing import Any, Dict, List, Optional, Set, Union

import numpy as np

from ._capture_plan import while_or_cond

__all__ = ["LoopCounts", "const_ints"]

_FORWARDING = frozenset(("Identity", "Enter", "RefEnter", "Snapshot", "Cast"))
_MAX_DEPTH = 24
Folded = Union[int, List[int], None]


class LoopCounts(object):
    """Iterations per TF 1.x while loop of one graph, each loop folded once."""

    def __init__(self) -> None:
        self._counts = {}  # type: Dict[int, int]
        #: Names of the loops whose bound did not fold (counted once).
        self.unknown = set()  # type: Set[str]

    def of(self, op: Any) -> int:
        """How many times ``op`` runs in a step: the product of its while loops' iterations (1
        outside a loop and for a loop whose bound does not fold)."""
        if while_or_cond(op) != "while":
            return 1
        count, context = 1, getattr(op, "_control_flow_context", None)
        if op.type in ("Exit", "RefExit") and context is not None:
            context = getattr(context, "outer_context", None)  # an Exit's value lives outside its loop
        while context is not None:
            get_while = getattr(context, "GetWhileContext", None)
            if get_while is not None and get_while() is context:
                count *= self._loop(context)
            context = getattr(context, "outer_context", None)
        return count

    def _loop(self, context: Any) -> int:
        key = id(context)
        if key not in self._counts:
            found = _iterations(context)
            if found is None:
                self.unknown.add(getattr(context, "name", "?"))
            self._counts[key] = max(found or 1, 1)
        return self._counts[key]


def _iterations(context: Any) -> Optional[int]:
    bound = getattr(context, "maximum_iterations", None)
    if bound is not None:
        folded = _fold(bound, 0)
        if isinstance(folded, int):
            return folded
    pivot = getattr(context, "pivot", None)  # the LoopCond's output; its input is the condition
    condition = pivot.op.inputs[0] if pivot is not None and pivot.op.inputs else None
    return _condition_limit(condition, 0) if condition is not None else None


def _condition_limit(tensor: Any, depth: int) -> Optional[int]:
    """The limit of ``counter < limit`` (a loop counter from 0 by 1, as tf.while_loop's own), the
    smallest of several joined by ``LogicalAnd``."""
    op = tensor.op
    if depth > _MAX_DEPTH:
        return None
    if op.type in ("Identity", "Enter"):
        return _condition_limit(op.inputs[0], depth + 1)
    if op.type == "LogicalAnd":
        limits = [_condition_limit(t, depth + 1) for t in op.inputs]
        known = [limit for limit in limits if limit is not None]
        return min(known) if known else None
    if op.type == "Less":
        folded = _fold(op.inputs[1], 0)
        return folded if isinstance(folded, int) else None
    return None


#: A constant vector longer than this is no loop bound or shape: not expanded (a declared length
#: filled from one value would become that many Python ints).
_MAX_VECTOR = 64


def const_ints(op: Any) -> Folded:
    """The integer value (scalar) or values (1-D, at most ``_MAX_VECTOR``) of the ``Const`` op
    ``op``, int32 or int64; None for anything else."""
    try:
        proto = op.get_attr("value")
    except (ValueError, KeyError):
        return None
    dims = [int(d.size) for d in proto.tensor_shape.dim]
    if proto.tensor_content:
        dtype = {3: "<i4", 9: "<i8"}.get(int(proto.dtype))  # DT_INT32, DT_INT64
        values = [int(v) for v in np.frombuffer(proto.tensor_content, dtype=dtype)] if dtype else None
    else:
        values = [int(v) for v in list(proto.int_val) or list(proto.int64_val)]
    if not values:
        return None
    if not dims:
        return values[0]
    count = int(np.prod(dims))
    if len(dims) != 1 or count > _MAX_VECTOR:
        return None
    return values + [values[-1]] * (count - len(values))


def _fold(tensor: Any, depth: int) -> Folded:
    """The integer (or integer vector) value of ``tensor`` when it is static, else None."""
    op = tensor.op
    if depth > _MAX_DEPTH:
        return None
    if op.type == "Const":
        return const_ints(op)
    if op.type in _FORWARDING and op.inputs:
        return _fold(op.inputs[0], depth + 1)
    if op.type == "Shape" and op.inputs:
        shape = op.inputs[0].get_shape()
        return [int(d) for d in shape.as_list()] if shape.is_fully_defined() else None
    if op.type in ("Maximum", "Minimum"):
        pair = [_fold(t, depth + 1) for t in op.inputs]
        if all(isinstance(v, int) for v in pair):
            return max(pair) if op.type == "Maximum" else min(pair)  # type: ignore[type-var]
        return None
    if op.type == "Pack":
        values = [_fold(t, depth + 1) for t in op.inputs]
        return values if all(isinstance(v, int) for v in values) else None  # type: ignore[return-value]
    if op.type == "StridedSlice":
        return _strided_slice(op, depth)
    return None


def _strided_slice(op: Any, depth: int) -> Folded:
    """A 1-D ``StridedSlice`` of a static vector: one element (``shrink_axis_mask``) or a slice."""
    vector, begin, end, strides = (_fold(t, depth + 1) for t in op.inputs)
    if not (isinstance(vector, list) and isinstance(begin, list) and isinstance(end, list)
            and isinstance(strides, list) and len(begin) == 1):
        return None
    try:
        shrink, begin_mask, end_mask = (int(op.get_attr(name)) for name in
                                        ("shrink_axis_mask", "begin_mask", "end_mask"))
    except (ValueError, KeyError):
        return None
    if shrink & 1:
        index = begin[0]
        return vector[index] if -len(vector) <= index < len(vector) else None
    start = None if begin_mask & 1 else begin[0]
    stop = None if end_mask & 1 else end[0]
    return vector[start:stop:strides[0] or 1]
