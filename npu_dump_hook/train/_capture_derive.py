"""Outputs whose value is by definition a copy of values a captured step already holds (issue #21): the
rule of each (:data:`VALUE_FORWARDING`, :class:`Forwarding`), read from the graph by :func:`forwarded_input`
when :func:`~._capture_plan.plan_graph` plans a tensor; which of a step's tensors are derived instead of
fetched (:func:`derived_in_step`); their values from the step's (:func:`forwarded_value`). Each tensor a
``session.run`` fetches costs TensorFlow executor work and Python fetch handling (TF 1.15 most).
"""
import logging
from typing import Any, List, Mapping, NamedTuple, Optional, Set, Tuple

import numpy as np

from .. import _tf
from ..formats.npy import NUMPY_OF_TF_ENUM, TF_DT_BFLOAT16

__all__ = ["VALUE_FORWARDING", "Forwarding", "forwarded_input", "forwarded_value", "derived_in_step"]

logger = logging.getLogger("npu_dump_hook._capture")


#: Ops whose output is, by definition, a function of input values the step has anyway, with no arithmetic:
#: a copy of (part of) those values. By kind, output 0 unless told:
#:
#: * "same": input 0's value as it is (output ``k`` of IdentityN: input ``k``'s);
#: * "shape": input 0's shape (output ``k`` of ShapeN: input ``k``'s), a vector of the output's dtype;
#: * "reshape": input 0's bytes in the shape that input 1 holds at run time (-1 resolved as TF does);
#: * "expand": input 0 with a dimension of 1 inserted at the axis input 1 holds at run time;
#: * "const": the op's ``value`` attribute, read once at plan time (at most :data:`_CONST_BYTES`);
#: * "split": output ``k`` of ``n``: the ``k``-th of ``n`` equal slices of input 1 along the axis input 0 holds;
#: * "concat": inputs ``0..N-1`` joined along the axis the last input holds (ConcatV2);
#: * "slice": input 0 from the begin input 1 holds, the size input 2 holds (-1: to the end);
#: * "unpack": output ``k``: entry ``k`` of input 0 along the ``axis`` attribute (read at plan time);
#: * "fill": the shape input 0 holds, filled with the scalar input 1 holds.
#:
#: Every kind takes only the step's own values (and for "const" the value the op is made of), never a
#: static shape: a static shape is a promise (``set_shape`` can make one the run does not keep), so it
#: could make a derived array silently wrong. Negative axes count from the end, as TF's do.
#: A step that captures those inputs directly derives the output from them (:func:`derived_in_step`,
#: :func:`forwarded_value`); otherwise the output is fetched. (Squeeze, Pack, Transpose, SplitV are not
#: here: none is fetched by the RNN cost benchmark, and Squeeze/Pack need an attribute read per op.)
VALUE_FORWARDING = {"Identity": "same", "Snapshot": "same", "StopGradient": "same", "PreventGradient": "same",
                    "IdentityN": "same", "Shape": "shape", "ShapeN": "shape", "Reshape": "reshape",
                    "ExpandDims": "expand", "Const": "const", "Split": "split", "ConcatV2": "concat",
                    "Slice": "slice", "Unpack": "unpack", "Fill": "fill"}
_PER_OUTPUT = frozenset(("IdentityN", "ShapeN"))  # output k of input k
_OPERAND = frozenset(("reshape", "expand"))  # kinds that also take input 1's value (the shape, the axis)
#: Input count and the inputs whose dtype is the output's, of the kinds with a fixed number of inputs.
_ARITY = {"split": (2, (1,)), "slice": (3, (0,)), "unpack": (1, (0,)), "fill": (2, (1,))}
_PARTS = frozenset(("split", "unpack"))  # kinds whose output k is part k of n
#: A Const's value is held by its plan up to this size (scalars and short vectors: TF 1.15's gradients
#: make ~5 a layer); a larger one is fetched. The graph holds the same bytes in its own definition.
_CONST_BYTES = 256


class Forwarding(NamedTuple):
    """A :data:`VALUE_FORWARDING` output's rule: the kind, the names of the inputs whose values it takes
    (in input order), the numpy dtype ("shape"), the part ``k`` of ``parts`` ("split", "unpack"), and the
    value ("const": the array; "unpack": the axis)."""

    kind: str
    takes: Tuple[str, ...]
    dtype: Any = None
    part: int = 0
    parts: int = 1
    value: Any = None


def forwarded_input(op_type: str, output_index: int, inputs: List[Any], input_names: List[str],
                    base: Any, op: Any = None, nbytes: Optional[int] = None) -> Optional[Forwarding]:
    """The :class:`Forwarding` of output ``output_index`` of a :data:`VALUE_FORWARDING` op (``base``: its base
    dtype, ``nbytes``: its static size); None where an input is not an immutable value of the dtype the
    kind needs (a TF 1.x reference, whose buffer the step may update after this op ran), or anything
    about the op is unusual (an attribute missing, unexpected inputs): that output is fetched."""
    kind = VALUE_FORWARDING[op_type]
    if kind in _OPERAND or kind in ("same", "shape"):
        return _forwarded_input(op_type, kind, output_index, inputs, input_names, base)
    try:
        return _moved(kind, op, output_index, inputs, input_names, base, nbytes)
    except Exception:  # an attribute TF does not have or cannot read: fetch the output as before
        logger.debug("capture: %s output %d is fetched (its rule could not be read)", op_type, output_index,
                     exc_info=True)
        return None


def _forwarded_input(op_type: str, kind: str, output_index: int, inputs: List[Any], input_names: List[str],
                     base: Any) -> Optional[Forwarding]:
    position = output_index if op_type in _PER_OUTPUT else 0
    if output_index != position or len(inputs) < (2 if kind in _OPERAND else position + 1):
        return None
    if kind == "shape":
        return Forwarding(kind, (input_names[position],), dtype=np.dtype(NUMPY_OF_TF_ENUM[base.as_datatype_enum]))
    if inputs[position].dtype != base:
        return None
    return Forwarding(kind, tuple(input_names[position:position + (2 if kind in _OPERAND else 1)]))


def _moved(kind: str, op: Any, output_index: int, inputs: List[Any], input_names: List[str], base: Any,
           nbytes: Optional[int]) -> Optional[Forwarding]:
    """:func:`forwarded_input` for the kinds that move data ("const" to "fill")."""
    if kind == "const":
        return _const(op, base, nbytes) if output_index == 0 and not inputs else None
    if any(t.dtype != t.dtype.base_dtype for t in inputs):
        return None  # a TF 1.x reference input: the step may update its buffer after this op ran
    if kind == "concat":
        arity, same = len(inputs), range(len(inputs) - 1)
        if arity < 2:
            return None
    else:
        arity, same = _ARITY[kind]
    if len(inputs) != arity or any(inputs[i].dtype != base for i in same):
        return None
    if kind not in _PARTS:
        return Forwarding(kind, tuple(input_names)) if output_index == 0 else None
    axis = int(op.get_attr("axis")) if kind == "unpack" else None
    return Forwarding(kind, tuple(input_names), part=output_index, parts=len(op.outputs), value=axis)


def _const(op: Any, base: Any, nbytes: Optional[int]) -> Optional[Forwarding]:
    """A Const's Forwarding, its value read from the graph (one attribute read): None when larger than
    :data:`_CONST_BYTES` or not exactly the array a fetch gives (bfloat16, another dtype)."""
    if nbytes is None or nbytes > _CONST_BYTES or base.as_datatype_enum == TF_DT_BFLOAT16:
        return None
    value = _tf.const_value(op)
    if value.dtype != np.dtype(NUMPY_OF_TF_ENUM[base.as_datatype_enum]) or value.nbytes != nbytes:
        return None
    value.setflags(write=False)  # held by the plan for every step: never changed in place
    return Forwarding("const", (), value=value)


def forwarded_value(forwarding: Forwarding, values: Mapping[str, Any]) -> Any:
    """The value of a forwarded output from the step's values of the inputs it takes (``values``, by
    tensor name: fetched, or derived before it). Raises ValueError (or numpy's error) where the values
    are not what TF's kernel would have accepted: the caller leaves that output out."""
    return _DERIVE[forwarding.kind](forwarding, [values[name] for name in forwarding.takes])


def _axis(value: Any, rank: int) -> int:
    """A run-time axis (a scalar or a 1-vector, as TF takes it) within ``rank``, negative counted from the end."""
    entries = np.reshape(value, -1)
    if entries.size != 1 or entries.dtype.kind not in "iu":  # (np.issubdtype costs microseconds a call)
        raise ValueError("an axis must be one integer, got {!r}".format(value))
    axis = int(entries[0])
    if not -rank <= axis < rank:
        raise ValueError("axis {} out of range for rank {}".format(axis, rank))
    return axis + rank if axis < 0 else axis


def _split(rule: Forwarding, taken: List[Any]) -> Any:
    array = np.asarray(taken[1])
    axis = _axis(taken[0], array.ndim)
    if array.shape[axis] % rule.parts:
        raise ValueError("dimension {} of {} does not split into {}".format(axis, array.shape, rule.parts))
    size = array.shape[axis] // rule.parts
    index = [slice(None)] * array.ndim
    index[axis] = slice(rule.part * size, (rule.part + 1) * size)
    return array[tuple(index)]


def _concat(rule: Forwarding, taken: List[Any]) -> Any:
    arrays = [np.asarray(value) for value in taken[:-1]]
    if len({array.dtype for array in arrays}) != 1 or not arrays[0].ndim:
        raise ValueError("concat of mixed dtypes or scalars")
    return np.concatenate(arrays, axis=_axis(taken[-1], arrays[0].ndim))


def _slice(rule: Forwarding, taken: List[Any]) -> Any:
    array, begins, sizes = np.asarray(taken[0]), np.reshape(taken[1], -1), np.reshape(taken[2], -1)
    if not len(begins) == len(sizes) == array.ndim:
        raise ValueError("slice of rank {} with {} begins and {} sizes".format(array.ndim, len(begins), len(sizes)))
    index = []
    for begin, size, dim in zip(begins.tolist(), sizes.tolist(), array.shape):
        end = dim if size == -1 else begin + size
        if not 0 <= begin <= end <= dim:
            raise ValueError("slice [{}, {}) outside a dimension of {}".format(begin, end, dim))
        index.append(slice(begin, end))
    return array[tuple(index)]


def _unpack(rule: Forwarding, taken: List[Any]) -> Any:
    array = np.asarray(taken[0])
    axis = _axis(rule.value, array.ndim)
    if array.shape[axis] != rule.parts:
        raise ValueError("unpack of {} along {} into {}".format(array.shape, axis, rule.parts))
    return np.take(array, rule.part, axis=axis)


def _fill(rule: Forwarding, taken: List[Any]) -> Any:
    dims, scalar = np.asarray(taken[0]), np.asarray(taken[1])
    if dims.ndim != 1 or scalar.ndim or dims.dtype.kind not in "iu" or (dims < 0).any():
        raise ValueError("fill of dims {!r} with {!r}".format(dims, scalar))
    return np.full([int(d) for d in dims], scalar, dtype=scalar.dtype)


def _reshape(rule: Forwarding, taken: List[Any]) -> Any:
    return np.reshape(taken[0], [int(size) for size in np.reshape(taken[1], -1)])


_DERIVE = {
    "same": lambda rule, taken: taken[0],
    "shape": lambda rule, taken: np.array(np.shape(taken[0]), dtype=rule.dtype),
    "reshape": _reshape,
    # TF's axis: a scalar or a 1-vector, counted in the output's rank (one more than the input's)
    "expand": lambda rule, taken: np.expand_dims(taken[0], _axis(taken[1], np.ndim(taken[0]) + 1)),
    "const": lambda rule, taken: rule.value.copy(),  # each step its own array (the plan's stays read-only)
    "split": _split, "concat": _concat, "slice": _slice, "unpack": _unpack, "fill": _fill,
}


def derived_in_step(direct: List[Tuple[Any, Any]],
                    fed: Set[str]) -> Tuple[List[Tuple[Any, Any]], List[Tuple[str, Forwarding]]]:
    """``(fetched, derived)``: the step's directly captured tensors (``direct``, in execution order) split
    into those ``session.run`` fetches and those derived from values the step has anyway, as
    ``(name, its Forwarding)`` in order (a source may itself be derived): a ``Plan.forwards`` tensor
    all of whose taken inputs are captured directly earlier in the same step and which is not fed (a
    Const takes none). Each fetched tensor costs TensorFlow executor work and Python fetch handling
    (TF 1.15 most)."""
    fetched, derived = [], []  # type: List[Tuple[Any, Any]], List[Tuple[str, Forwarding]]
    have = set()  # type: Set[str]
    for tensor, plan in direct:
        name, forwards = plan.name, plan.forwards
        if forwards is not None and name not in fed and all(source in have for source in forwards.takes):
            derived.append((name, forwards))
        else:
            fetched.append((tensor, plan))
        have.add(name)
    return fetched, derived
