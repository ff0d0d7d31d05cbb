"""What the capture engine knows about a graph before any step runs: per tensor, whether it can be
captured (and why not), its static size, whether it may be dead in a step (TF 1.x control flow),
and which TF 1.x reference variable it aliases; plus the memory budget and device placement of
dump ops. Functions over TensorFlow graph objects; no session runs here. :func:`plan_graph` plans
every tensor of a graph and makes the dump ops a step may stream to (see
:mod:`npu_dump_hook.train.capture` for when).
"""
import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

import numpy as np

from .. import _tf
from .._bounded import BoundedStore
from ..constants import ENV_CAPTURE_BUDGET
from ..errors import BackendError
from ..formats.npy import NUMPY_OF_TF_ENUM, TF_DT_BFLOAT16
from ._capture_derive import VALUE_FORWARDING, Forwarding, forwarded_input

__all__ = ["Plan", "plan_graph", "WRITE_SCOPE", "DEFAULT_MEMORY_BUDGET", "BUDGET_ENV", "while_or_cond", "reference_variable", "dtype_reason",
           "static_nbytes", "floor_nbytes", "maybe_dead", "resolve_memory_budget", "as_stored_array", "static_shape", "cpu_device",
           "is_update_type", "make_dump_ops", "variable_handle", "needs_handle_reader", "updated_reference_output",
 ]

logger = logging.getLogger("npu_dump_hook._capture")

#: The name scope of the ops the capture adds (dump ops, resource-variable readers).
WRITE_SCOPE = "npu_dump_hook_capture"
#: Every op npu_dump_hook adds is named under a scope with this prefix (capture, Savers, randomness edits).
OWN_OPS_PREFIX = "npu_dump_hook_"
# The dump-op name appears twice before the tensor bytes (Value.tag, Value.node_name); padding it
# leaves room to overwrite that prefix with the .npy header in place (see debug_event_to_npy).
_NAME_PAD = "_" * 80
_MAX_PROTO_BYTES = (1 << 31) - (1 << 20)  # a serialized protobuf stays under 2 GiB

_SWITCH_TYPES = frozenset(("Switch", "RefSwitch"))
_REF_VARIABLE_TYPES = frozenset(("VariableV2", "Variable"))
# Ops whose 1-D outputs hold one entry per dimension of an input (TensorShape allows 254 at most).
_SHAPE_VECTOR_TYPES = frozenset(("Shape", "ShapeN", "BroadcastGradientArgs"))
_MAX_RANK = 254
_ALIASING_TYPES = frozenset(("Identity", "RefIdentity"))  # forward a reference input's buffer
_DEAD_ENDS = frozenset(("Merge", "RefMerge", "Exit", "RefExit"))
#: In-place variable updates (optimizer steps and assignments): their outputs are the updated values.
_UPDATE_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply", "Scatter", "ResourceScatter")
_UPDATE_TYPES = frozenset(("Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp",
                           "AssignSubVariableOp"))
#: Consumers of a resource handle that only read it (no dump file needs the variable's value for them).
_HANDLE_ONLY_READERS = frozenset(("ReadVariableOp", "VarIsInitializedOp", "VariableShape", "DestroyResourceOp"))
#: Executed tensors whose static sizes add up to at most this are fetched with the step
#: (held in memory together until ``finish`` writes them); larger steps stream to disk.
DEFAULT_MEMORY_BUDGET = 256 << 20
BUDGET_ENV = ENV_CAPTURE_BUDGET
_NO_ARRAY_DTYPES = {
    "resource": "resource handle: no array value",
    "variant": "variant tensor (dataset, TensorList, optional): no array value",
    "string": "string tensor: the comparison handles numeric tensors only",
}


@dataclass
class Plan:
    """Per graph tensor: its number and static byte size (None: unknown), its dump op if any, or
    the reason it cannot be captured. ``stream_only``: never fetched directly (it may have no
    value in a step, or it is a TF 1.x reference whose buffer the step may update later)."""

    dump_op: Any = None
    number: int = -1
    reason: str = ""
    nbytes: Optional[int] = None
    #: With ``nbytes`` None: a lower bound of the size (:func:`floor_nbytes`), for the room check.
    floor: int = 0
    stream_only: bool = False
    #: The TF 1.x reference variable (``VariableV2`` output) whose value this tensor is: the
    #: variable's own output, or an ``Identity`` that aliases its buffer (``w/read``).
    variable: Any = None
    #: A TF 1.x in-place update's reference output 0 (``ApplyAdam:0``, ``AssignAdd:0``): the updated
    #: variable of input 0, taken from the read after the step; its dump op only serves a step
    #: that feeds that input.
    after_update: bool = False
    #: Inside a TF 1.x ``tf.while_loop`` body: one value per iteration, taken by a run-option debug
    #: watch (TF's tfdbg watch, which fires at every iteration), never fetched and without dump op.
    per_iteration: bool = False
    #: When the value is by definition a copy of input values the step has anyway (or a small Const's
    #: value): :func:`~._capture_derive.forwarded_input`; a step that fetches those inputs derives it.
    forwards: Optional[Forwarding] = None
    #: The tensor's name (set by :func:`plan_graph`; reading ``tensor.name`` calls into TF each time).
    name: str = ""


def while_or_cond(op: Any) -> str:
    """``"while"``/``"cond"`` when ``op`` sits in TF 1.x control flow, else ``""`` (private API)."""
    context = getattr(op, "_control_flow_context", None)
    if context is not None and op.type in ("Exit", "RefExit"):
        context = getattr(context, "outer_context", None)  # an Exit's value lives outside its loop
    if context is None:
        return ""
    get_while = getattr(context, "GetWhileContext", None)
    if get_while is not None and get_while() is not None:
        return "while"
    return "cond"


def reference_variable(tensor: Any) -> Any:
    """The TF 1.x reference variable whose buffer ``tensor`` is, or None.

    That is a ``VariableV2`` reference output, or the output of ``Identity`` ops over one
    (``w/read``, which forwards the buffer without a copy). Resource variables (TF 2 default)
    copy on read and need none of this.
    """
    while True:
        op = tensor.op
        if op.type in _REF_VARIABLE_TYPES:
            return tensor if tensor.dtype != tensor.dtype.base_dtype else None
        if op.type not in _ALIASING_TYPES or not op.inputs:
            return None
        source = op.inputs[0]
        if source.dtype == source.dtype.base_dtype:
            return None  # a value input: Identity of a value is an ordinary tensor
        tensor = source


def dtype_reason(tensor: Any) -> str:
    """Why this tensor cannot be captured as an array, judged from its dtype and static shape, or ``""``."""
    return _dtype_reason(tensor.dtype.base_dtype, _dims(tensor))


def _dims(tensor: Any) -> Optional[List[Optional[int]]]:
    """The static shape as a list (None: unknown rank; a None entry: an unknown dimension)."""
    shape = tensor.get_shape()
    return None if shape.ndims is None else shape.as_list()


def _count(dims: List[int]) -> int:
    count = 1
    for dim in dims:
        count *= dim
    return count


def _dtype_reason(base: Any, dims: Optional[List[Optional[int]]]) -> str:
    if base.name in _NO_ARRAY_DTYPES:
        return _NO_ARRAY_DTYPES[base.name]
    if base.as_datatype_enum not in NUMPY_OF_TF_ENUM:
        return "dtype {} has no numpy equivalent".format(base.name)
    if dims is not None and None not in dims and _count(dims) * base.size >= _MAX_PROTO_BYTES:  # type: ignore
        return "{} bytes: over the 2 GiB a protobuf can hold".format(_count(dims) * base.size)  # type: ignore
    return ""


def static_nbytes(tensor: Any) -> Optional[int]:
    """Static byte size; an upper bound for shape vectors of unknown length; None when unbounded."""
    return _static_nbytes(tensor.op.type, tensor.dtype.base_dtype, _dims(tensor))


def _static_nbytes(op_type: str, base: Any, dims: Optional[List[Optional[int]]]) -> Optional[int]:
    if dims is None or None in dims:
        if dims is not None and len(dims) == 1 and op_type in _SHAPE_VECTOR_TYPES:
            # One entry per dimension of some tensor: at most TensorShape's 254. TF 1.15's gradients
            # put BroadcastGradientArgs (length unknown statically) into nearly every training step;
            # without the bound every such step would stream.
            return _MAX_RANK * base.size
        return None
    return _count(dims) * base.size  # type: ignore


def floor_nbytes(tensor: Any) -> int:
    """A lower bound of the byte size of a tensor whose static size is unknown: its known
    dimensions times its item size, each unknown dimension counted as 1 (an unknown rank as one
    item); 0 for types without a fixed item size (strings, variants)."""
    try:
        base = tensor.dtype.base_dtype
    except (AttributeError, TypeError, ValueError):
        return 0
    return _floor_nbytes(base, _dims(tensor))


def _floor_nbytes(base: Any, dims: Optional[List[Optional[int]]]) -> int:
    try:
        size = base.size
    except (AttributeError, TypeError, ValueError):
        return 0
    if dims is None:
        return size
    for dim in dims:
        size *= dim if dim is not None else 1
    return int(size)


def maybe_dead(ops: List[Any], edges: Dict[str, Tuple[List[Any], List[Any]]]) -> Set[str]:
    """Ops whose outputs may be dead in a step: fed by a ``Switch`` through data or control edges,
    not through a ``Merge`` (which ends deadness) or a loop ``Exit`` (alive once its loop ends).
    Fetching a dead tensor fails the whole ``session.run``; its dump op simply does not run."""
    switches = [op for op in ops if op.type in _SWITCH_TYPES]
    if not switches:
        return set()
    consumers = {}  # type: Dict[str, List[Any]]
    for op in ops:
        inputs, controls = edges[op.name]
        for producer in {t.op.name for t in inputs} | {c.name for c in controls}:
            consumers.setdefault(producer, []).append(op)
    dead = set()  # type: Set[str]
    stack = list(switches)
    while stack:
        op = stack.pop()
        if op.name in dead:
            continue
        dead.add(op.name)
        stack.extend(c for c in consumers.get(op.name, ()) if c.name not in dead and c.type not in _DEAD_ENDS)
    return dead


def resolve_memory_budget(value: Optional[int]) -> int:
    """The fetch budget in bytes: the argument, else ``$NPU_DUMP_HOOK_CAPTURE_BUDGET``, else the default."""
    source = "memory_budget"
    if value is None:
        text = os.environ.get(BUDGET_ENV, "").strip()
        if not text:
            return DEFAULT_MEMORY_BUDGET
        source = BUDGET_ENV
        try:
            value = int(text)
        except ValueError:
            raise BackendError("{} must be a byte count (an integer), got {!r}".format(BUDGET_ENV, text))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BackendError("{} must be a byte count >= 0, got {!r}".format(source, value))
    return value


def as_stored_array(value: Any, tensor: Any) -> np.ndarray:
    """A fetched value as the ``.npy`` stores it: bfloat16 widened to float32, quantized as integers."""
    stored = _STORED_DTYPES.get(tensor.dtype)
    if stored is None:  # the TF dtype's enum costs more than the write of a small tensor: once per dtype
        enum = tensor.dtype.base_dtype.as_datatype_enum
        stored = _BFLOAT16 if enum == TF_DT_BFLOAT16 else np.dtype(NUMPY_OF_TF_ENUM[enum])
        _STORED_DTYPES.add_if_room(tensor.dtype, stored)
    array = np.asarray(value, order="C")  # (ascontiguousarray would make a scalar 1-d)
    if stored is _BFLOAT16:
        bits = array.reshape(-1).view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(array.shape)
    # (a view only to change the dtype: a numpy call per tensor, 2,000 a step, for nothing otherwise)
    return array if array.dtype == stored else array.view(stored)


_BFLOAT16 = "bfloat16"  # widened to float32 by as_stored_array
#: TF dtype -> numpy dtype of its .npy (or _BFLOAT16): TF has ~30 dtypes and their _ref forms, so
#: the bound (the first ones stay) is never reached; a dtype beyond it is looked up each time.
_STORED_DTYPES = BoundedStore(1 << 10)  # type: BoundedStore[Any, Any]


def static_shape(tensor: Any) -> Optional[Tuple[int, ...]]:
    return _static_shape(_dims(tensor))


def _static_shape(dims: Optional[List[Optional[int]]]) -> Optional[Tuple[int, ...]]:
    if dims is None:
        return None
    return tuple(-1 if d is None else int(d) for d in dims)


def cpu_device(device: str, cache: Dict[str, str]) -> str:
    """The CPU of the task that runs ``device`` (the dump kernel is a host kernel)."""
    if device not in cache:
        spec = _tf.tf_v1().DeviceSpec.from_string(device or "")
        parts = []
        for label, value in (("job", spec.job), ("replica", spec.replica), ("task", spec.task)):
            if value is not None:
                parts.append("/{}:{}".format(label, value))
        cache[device] = "".join(parts) + "/device:CPU:0"
    return cache[device]


def is_update_type(op_type: str) -> bool:
    """True for TF ops that update a variable in place (``ApplyAdam``, ``ResourceApplyAdam``, ``Assign*``, ...)."""
    return op_type in _UPDATE_TYPES or op_type.startswith(_UPDATE_PREFIXES)


def variable_handle(tensor: Any) -> Any:
    """The ``VarHandleOp`` whose handle ``tensor`` is (directly or through ``Identity``), or None."""
    while True:
        op = tensor.op
        if op.type == "VarHandleOp":
            return op
        if op.type not in _ALIASING_TYPES or not op.inputs:
            return None
        tensor = op.inputs[0]


def needs_handle_reader(handle_op: Any) -> bool:
    """A resource variable some op updates or reads in place (not only through ``ReadVariableOp``):
    its value before and after the step is read separately (see :mod:`npu_dump_hook.train.capture`)."""
    return any(consumer.type not in _HANDLE_ONLY_READERS for consumer in handle_op.outputs[0].consumers())


def plan_graph(graph: Any, index: Any, can_fetch: bool, memory_budget: int, dump_root: str,
               ops: Optional[List[Any]] = None, first: int = 0, editable: bool = False) -> Tuple[dict, dict]:
    """``({tensor name: Plan}, {op name: (dtype names, static shapes)})`` for every op of ``graph``
    (or of ``ops``, those an editable graph gained since, numbered from ``first``); dump ops made
    where a step may stream (every capturable tensor when the fetchable ones exceed the budget or
    any size is unknown, else only the stream-only ones). ``editable``: the graph stays editable
    until the captured step (a plain session), so only the stream-only tensors get their dump op
    here; the others get theirs from :func:`make_dump_ops` if and when a step streams them.
    ``index`` is the graph's :class:`~npu_dump_hook.train.walk.GraphIndex`; its edges are read
    here, outside the step."""
    if ops is None:
        ops = graph.get_operations()
        index.read_all(ops)  # TF's accessors are slow the first time (Python wrappers through the C API)
    op_name_of = index.name  # each op's name read through TF once (read_all has read them)
    dead = maybe_dead(ops, {op_name_of(op): index.edges(op) for op in ops})
    plans, outputs = {}, {}  # type: Dict[str, Plan], Dict[str, Any]
    planned = []  # type: List[Tuple[Any, Plan]]   # every tensor with its plan, for the dump ops below
    # dtype -> (base dtype, its name, a reference dtype?): a graph has few dtypes, each read costs TF calls
    dtype_facts = {}  # type: Dict[Any, Tuple[Any, str, bool]]
    number, fetchable_bytes, unknown = first, 0, False
    for op in ops:
        flow, op_name, op_type = while_or_cond(op), op_name_of(op), index.type(op)  # each read once per op
        dtypes, shapes = [], []  # type: List[str], List[Optional[Tuple[int, ...]]]
        outputs[op_name] = (dtypes, shapes)
        for number_in_op, tensor in enumerate(op.outputs):
            # each TF accessor read once per tensor (they cost microseconds each, 2,000 tensors a model)
            dtype, dims = tensor.dtype, _dims(tensor)
            known = dtype_facts.get(dtype)
            if known is None:
                known = dtype_facts[dtype] = (dtype.base_dtype, dtype.base_dtype.name, dtype != dtype.base_dtype)
            facts = _Facts(op_type, known[0], dims, known[2])
            dtypes.append(known[1])
            shapes.append(_static_shape(dims))
            plan = _plan_tensor(graph, op, tensor, flow, op_name in dead or not can_fetch, number, facts)
            if op_type in VALUE_FORWARDING and not (plan.reason or plan.stream_only or plan.variable is not None):
                plan.forwards = forwarded_input(op_type, number_in_op, index.edges(op)[0], index.input_names(op),
                                                known[0], op, plan.nbytes)
            plan.name = "{}:{}".format(op_name, number_in_op)  # tensor.name
            plans[plan.name] = plan
            planned.append((tensor, plan))
            if plan.reason:
                continue
            number += 1
            if plan.variable is None and not plan.stream_only:
                unknown = unknown or plan.nbytes is None
                fetchable_bytes += plan.nbytes or 0
    # A graph whose tensors all fit the budget never streams them: no dump op is needed
    # (each costs time here and Grappler time in the captured step's executor).
    stream_all = (unknown or fetchable_bytes > memory_budget) and not editable
    made = make_dump_ops(graph, [(t, plan) for t, plan in planned if _wants_dump_op(plan, stream_all)],
                         dump_root, index)
    logger.debug("capture: %d capturable tensor(s) (%s bytes fetchable%s), %d dump op(s), budget %d",
                 number, fetchable_bytes, ", some unknown" if unknown else "", made, memory_budget)
    return plans, outputs


#: A TF 1.x loop's Enter ops forward a value from outside the loop into it (the value is the
#: input's, captured outside the loop). TensorFlow's debug watches miss them at random (on TF 1.15
#: one of a step's Enter ops goes unseen, a different one from run to run), so they are skipped
#: with this reason on every run, never captured on one and missing on the next.
_LOOP_ENTRIES = ("Enter", "RefEnter")
LOOP_ENTRY_REASON = "a TF 1.x loop Enter: it forwards its input's value into the loop (captured outside it)"


class _Facts(NamedTuple):
    """What the plan reads of a tensor: its op's type, base dtype, static dims, reference dtype."""

    op_type: str
    base: Any
    dims: Optional[List[Optional[int]]]
    is_ref: bool


def _plan_tensor(graph: Any, op: Any, tensor: Any, flow: str, may_be_dead: bool, number: int,
                 facts: _Facts) -> Plan:
    reason = _dtype_reason(facts.base, facts.dims)
    if reason:
        return Plan(reason=reason)
    if flow == "while" and facts.op_type in _LOOP_ENTRIES:
        return Plan(reason=LOOP_ENTRY_REASON)
    if flow == "while":  # fetching a loop-body tensor fails; a graph dump op would fire once per loop
        return Plan(number=number, nbytes=None, floor=_floor_nbytes(facts.base, facts.dims), stream_only=True,
                    per_iteration=True)
    # TF 2 If/While ops are marked unfetchable (cond_v2 prevent_fetching); their outputs are
    # read by a dump op instead.
    stream_only = may_be_dead or flow == "cond" or facts.is_ref or not graph.is_fetchable(op)
    plan = Plan(number=number, nbytes=_static_nbytes(facts.op_type, facts.base, facts.dims), stream_only=stream_only)
    if plan.nbytes is None:
        plan.floor = _floor_nbytes(facts.base, facts.dims)
    # reference_variable answers None at once for any other op type
    aliases = facts.op_type in _REF_VARIABLE_TYPES or facts.op_type in _ALIASING_TYPES
    plan.variable = None if flow or not aliases else reference_variable(tensor)
    if plan.variable is not None:
        plan.stream_only = False  # read before the step (run_args), never fetched or dumped
    plan.after_update = not (flow or may_be_dead) and facts.is_ref and is_update_type(facts.op_type) and \
        updated_reference_output(op, tensor)
    return plan


def updated_reference_output(op: Any, tensor: Any) -> bool:
    """True for output 0 of a TF 1.x in-place update whose input 0 is a reference variable: that
    output is the variable's buffer, so the variable read after the step holds its value."""
    return (tensor.value_index == 0 and tensor.dtype != tensor.dtype.base_dtype and is_update_type(op.type)
            and bool(op.inputs) and reference_variable(op.inputs[0]) is not None)


def _wants_dump_op(plan: Plan, stream_all: bool) -> bool:
    """A tensor a step may stream, whose value a graph dump op can take (not a per-iteration
    loop-body tensor, not a reference variable read before the step)."""
    return not (plan.reason or plan.variable is not None or plan.per_iteration) and (stream_all or plan.stream_only)


def make_dump_ops(graph: Any, pairs: List[Tuple[Any, Plan]], dump_root: str, index: Any = None) -> int:
    """Give each ``(tensor, plan)`` without one a ``DebugIdentity`` dump op (on the CPU of the
    producer's task, under :data:`WRITE_SCOPE`, named by the plan's number); the count made.
    ``index``: the graph's :class:`~npu_dump_hook.train.walk.GraphIndex`, told that the new ops
    only consume existing tensors (the edges it read stay the graph's)."""
    before = graph.version
    urls = ["file://" + dump_root]
    devices = {}  # type: Dict[str, str]
    made = 0
    with graph.as_default(), graph.control_dependencies(None), graph.name_scope(WRITE_SCOPE + "/"):
        for tensor, plan in pairs:
            if plan.dump_op is not None:
                continue
            with graph.device(cpu_device(tensor.op.device, devices)):
                dump = _tf.debug_identity(graph, tensor, "t{}{}:0".format(plan.number, _NAME_PAD), urls)
            plan.dump_op = dump.op
            made += 1
    if index is not None:
        index.consumers_added(before)
    return made
