"""The Build graph a size estimate measures: the step's executed TF ops as GE builds them, from static shapes.

The estimate (:mod:`.sizing`) must know what GE does to sizes on a real NPU: the Cube ops' float16
outputs, the fused nodes that dump only their last op's outputs, the padded device formats
(NC1HWC0, FRACTAL_Z, FRACTAL_NZ) and the ``Cast``/``TransData`` nodes inserted between formats.
The emulator knows the same rules; so that there is one definition of each, this module feeds the
emulator's own graph builder (:func:`npu_dump_hook.emulator.npu_graph.build_nodes`: fusion from
:mod:`~npu_dump_hook.emulator.fusion`, held dtypes, layouts and padding from
:mod:`~npu_dump_hook.emulator.layout`) with a *static* capture: every executed op's outputs with
their static shapes (unknown dimensions already replaced by the batch size) instead of the arrays a
step wrote. Nothing runs; TensorFlow objects are received, never imported.

Which Cube ops compute in float16 comes from the run: the emulating backend's own
:class:`~npu_dump_hook.emulator.numerics.NumericsPlan` when it has one, else (a real NPU) the
session's ``precision_mode`` (:data:`FP16_PRECISION_MODES`; GE's training default
``allow_fp32_to_fp16`` when the session sets none) and the rewrite's eligibility rule
(:func:`~npu_dump_hook.emulator.numerics.fp16_lowering_problem`).
"""
from typing import Any, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Set, Tuple

import numpy as np

from ..emulator import layout, npu_graph
from ..emulator.backend import dump_tensor, dumped_nodes
from ..emulator.ge_model import ge_dtype
from ..emulator.numerics import FP16_OP_TYPES, fp16_lowering_problem
from ..formats.dump_file import build_header, encode_header
from ..formats.stats_csv import STATS_HEADER, StatsRow, format_stats_csv
from ._capture_plan import is_update_type, needs_handle_reader, reference_variable, variable_handle, while_or_cond
from ._capture_results import ExecutedOp
from ._sizing_loops import LoopCounts
from .walk import GraphIndex

__all__ = ["FP16_PRECISION_MODES", "DEFAULT_PRECISION_MODE", "StaticValue", "StaticCapture", "StaticPlan",
           "static_capture", "static_plan", "build_static_nodes", "DeviceModel", "DumpMeasure", "measure_dump",
           "STATS_HEADER_BYTES", "LENGTH_PREFIX", "STATS_FLOAT_CELL", "STATS_INT_CELL", "unwatched_in_loop"]

#: NpuOptimizer ``precision_mode`` values under which GE runs the Cube ops (convolutions, matrix
#: products) in float16 from float32 graphs; every other mode keeps float32 (no lowering modelled).
FP16_PRECISION_MODES = frozenset(("allow_fp32_to_fp16", "force_fp16", "allow_mix_precision",
                                  "allow_mix_precision_fp16"))
#: GE's precision mode for training when the session sets none.
DEFAULT_PRECISION_MODE = "allow_fp32_to_fp16"
_NO_VALUE_DTYPES = frozenset(("resource", "variant", "string"))
#: Loop-body ops whose values the capture's per-iteration watches never see: an Enter forwards its
#: input (captured outside the loop), and Identity and Const run on no device kernel TF watches there.
_NOT_WATCHED_IN_LOOPS = frozenset(("Enter", "RefEnter", "Identity", "IdentityN", "Const"))
#: Integer ops of a loop body computed from constants only: Grappler folds them away, they never run.
_FOLDABLE = frozenset(("Const", "Shape", "Rank", "Size", "FloorMod", "ConcatOffset", "Enter", "Identity"))
#: A stats CSV's header line (reference §3.2).
STATS_HEADER_BYTES = len(",".join(STATS_HEADER)) + 1


class StaticValue(NamedTuple):
    """What the capture would hold for one tensor: its dtype name and static shape."""

    dtype: str
    shape: Tuple[int, ...]


class StaticCapture(object):
    """The part of a :class:`~npu_dump_hook.train.capture.CaptureResult` the graph builder reads."""

    def __init__(self, executed_ops: List[ExecutedOp], by_name: Dict[str, StaticValue],
                 updates: Dict[str, List[str]], iterations: Dict[str, int],
                 itemsizes: Optional[Dict[str, int]] = None) -> None:
        self.executed_ops = executed_ops
        self.by_name = by_name
        self.updates = updates
        #: ``{tensor name: values in the step}`` of the TF 1.x loop-body tensors (one per iteration).
        self.iterations = iterations
        #: ``{dtype name: bytes per element}`` (TF's ``DType.size``) of the executed ops' output dtypes.
        self.itemsizes = itemsizes or {}


class StaticPlan(object):
    """A :class:`~npu_dump_hook.emulator.numerics.NumericsPlan` for a graph nobody rewrote: the Cube
    ops GE lowers to float16 and their float32 outputs, nothing added, no faults."""

    def __init__(self, fp16_ops: FrozenSet[str], fp16_tensors: FrozenSet[str]) -> None:
        self.fp16_ops = fp16_ops
        self.fp16_tensors = fp16_tensors
        self.added_ops = frozenset()  # type: FrozenSet[str]
        self.faults = {}  # type: Dict[str, Any]

    @staticmethod
    def original_of(name: str) -> str:
        return name

    @staticmethod
    def npu_tensor(name: str) -> str:
        return name


Edges = Callable[[Any], Tuple[List[Any], List[Any]]]
Dims = Callable[[Any], Optional[Tuple[int, ...]]]


def _plain_edges(op: Any) -> Tuple[List[Any], List[Any]]:
    return list(op.inputs), list(op.control_inputs)


def _variable_value(tensor: Any) -> Optional[StaticValue]:
    """A variable handle's value as the capture takes it (the variable's dtype and shape), when the
    capture reads that variable (some op other than ``ReadVariableOp`` takes the handle)."""
    handle = variable_handle(tensor)
    if handle is None or not needs_handle_reader(handle):
        return None
    try:
        dims, dtype = handle.get_attr("shape").dim, handle.get_attr("dtype")
    except (ValueError, KeyError, AttributeError):
        return None
    return StaticValue(dtype.name, tuple(max(int(d.size), 0) for d in dims))


def _update_variables(op: Any, inputs: Sequence[Any], by_name: Dict[str, StaticValue]) -> List[str]:
    """The variable inputs of an in-place update, as the capture lists them (resource handles it
    reads, reference variables)."""
    found = []
    for tensor in inputs:
        if tensor.dtype.base_dtype.name == "resource":
            if tensor.name in by_name:
                found.append(tensor.name)
        elif tensor.dtype != tensor.dtype.base_dtype and reference_variable(tensor) is not None:
            found.append(tensor.name)
    return found


def static_capture(executed: Sequence[Tuple[Any, bool]], dims: Dims, edges: Optional[Edges] = None,
                   loops: Optional[LoopCounts] = None, index: Any = None) -> StaticCapture:
    """The capture one step would give, from static shapes: ``dims(tensor)`` the shape with unknown
    dimensions taken as the batch (None: unknown rank); ``loops`` counts TF 1.x loop iterations;
    ``index``: the walk's :class:`~npu_dump_hook.train.walk.GraphIndex` (names read once; None: a
    new one), whose ``edges`` are the default ``edges``."""
    graph_index = index if index is not None else GraphIndex(None)
    edges, loops = edges or (graph_index.edges if index is not None else _plain_edges), loops or LoopCounts()
    name, op_type, own_edges = graph_index.name, graph_index.type, edges == graph_index.edges
    ops, by_name, updates = [], {}, {}  # type: List[ExecutedOp], Dict[str, StaticValue], Dict[str, List[str]]
    iterations = {}  # type: Dict[str, int]
    folded = {}  # type: Dict[str, bool]
    dtypes_seen = {}  # type: Dict[int, Tuple[Any, str, int]]
    for order, (op, _fed_only) in enumerate(executed):
        dtypes, shapes = [], []  # type: List[str], List[Optional[Tuple[int, ...]]]
        in_loop = while_or_cond(op) == "while"
        op_name = name(op)
        prefix = op_name + ":"  # tensor names "op:i" without TF's accessors
        for number, tensor in enumerate(op.outputs):
            dtype, shape = _dtype_name(tensor.dtype, dtypes_seen), dims(tensor)
            dtypes.append(dtype)
            shapes.append(shape)
            if in_loop and unwatched_in_loop(op, folded):
                continue  # TF's per-iteration watches see no value of these (capture: LOOP_ENTRY_REASON)
            tensor_name = prefix + str(number)
            if dtype == "resource":
                value = _variable_value(tensor)
                if value is not None:
                    by_name[tensor_name] = value
            elif dtype not in _NO_VALUE_DTYPES:
                by_name[tensor_name] = StaticValue(dtype, shape or ())
            if in_loop and tensor_name in by_name:
                iterations[tensor_name] = loops.of(op)
        inputs, controls = edges(op)
        input_names = graph_index.input_names(op) if own_edges else [t.name for t in inputs]
        ops.append(ExecutedOp(name=op_name, type=op_type(op), inputs=list(input_names),
                              control_inputs=[name(c) for c in controls], order=order,
                              output_dtypes=dtypes, output_shapes=shapes))
    for record, (op, fed_only) in zip(ops, executed):
        if fed_only or not is_update_type(record.type):
            continue
        variables = _update_variables(op, edges(op)[0], by_name)
        if variables:
            updates[record.name] = variables
            for number, variable in enumerate(variables):  # output k: the k-th variable after the step
                by_name.setdefault("{}:{}".format(record.name, number),
                                   by_name.get(variable) or _ref_value(variable, by_name))
    itemsizes = {dtype_name: size for _, dtype_name, size in dtypes_seen.values()}
    return StaticCapture(ops, by_name, updates, iterations, itemsizes)


def _dtype_name(dtype: Any, seen: Dict[int, Tuple[Any, str, int]]) -> str:
    """``dtype.base_dtype.name``, read once per TF dtype (by its enum: TF 1.15 makes a dtype object
    per tensor), kept in ``seen`` with its size."""
    enum = dtype.as_datatype_enum
    found = seen.get(enum)
    if found is None:
        base = dtype.base_dtype
        found = seen[enum] = (dtype, base.name, 0 if base.name in _NO_VALUE_DTYPES else base.size)
    return found[1]


def unwatched_in_loop(op: Any, memo: Dict[str, bool]) -> bool:
    """A TF 1.x loop-body op whose values the capture does not get (module constants above);
    ``memo`` carries the folding answers between calls."""
    return op.type in _NOT_WATCHED_IN_LOOPS or _folded_in_loop(op, memo)


def _folded_in_loop(op: Any, memo: Dict[str, bool]) -> bool:
    """A loop-body op TF's constant folding removes: of a foldable type, every input folded too
    (``Shape``/``Rank``/``Size`` of a tensor of static shape count as constants)."""
    found = memo.get(op.name)
    if found is None:
        memo[op.name] = False  # a cycle (NextIteration) folds nothing
        if op.type in ("Shape", "Rank", "Size"):
            found = op.inputs[0].get_shape().is_fully_defined() if op.inputs else False
        else:
            found = op.type in _FOLDABLE and op.type != "Enter" and all(
                _folded_in_loop(t.op, memo) for t in op.inputs)
            if op.type == "Enter":
                found = bool(op.inputs) and _folded_in_loop(op.inputs[0].op, memo)
        memo[op.name] = found
    return found


def _ref_value(name: str, by_name: Dict[str, StaticValue]) -> StaticValue:
    return by_name.get(name, StaticValue("float32", ()))


def static_plan(executed: Sequence[Tuple[Any, bool]], fp16: bool) -> StaticPlan:
    """The float16 Cube ops GE makes of the executed ops (``fp16``: the precision mode lowers them)."""
    ops, tensors = set(), set()  # type: Set[str], Set[str]
    if fp16:
        for op, fed_only in executed:
            if fed_only or op.type not in FP16_OP_TYPES or fp16_lowering_problem(op) is not None:
                continue
            ops.add(op.name)
            tensors.update(t.name for t in op.outputs if t.dtype.base_dtype.name == "float32")
    return StaticPlan(frozenset(ops), frozenset(tensors))


def build_static_nodes(executed: Sequence[Tuple[Any, bool]], dims: Dims, plan: Any, ascend: bool,
                       edges: Optional[Edges] = None, loops: Optional[LoopCounts] = None, index: Any = None,
                       shared: Any = None, capture: Optional[StaticCapture] = None) -> Tuple[List[Any], StaticCapture]:
    """``(Build-graph nodes, static capture)`` of the step: :func:`~npu_dump_hook.emulator.npu_graph.build_nodes`
    over the static capture (``plan``: the backend's numerics plan or a :class:`StaticPlan`;
    ``ascend``: fusion and device formats; ``index`` as :func:`static_capture`'s); ``shared``: the
    emulating backend's :class:`~npu_dump_hook.emulator.npu_graph.SharedBuild`, which then builds
    them and hands them on to the emulator's write of the step when its capture gives the same graph;
    ``capture``: the step's :func:`static_capture` when already made."""
    capture = capture if capture is not None else static_capture(executed, dims, edges, loops, index)
    graph_ops = {}  # type: Dict[str, Any]  # one per executed op, made when fusion first asks (a BatchNorm)

    def is_training(name: str) -> Optional[bool]:
        if not graph_ops:
            graph_ops.update((record.name, op) for record, (op, _) in zip(capture.executed_ops, executed))
        op = graph_ops.get(name)
        try:
            return bool(op.get_attr("is_training")) if op is not None else None
        except (ValueError, KeyError):
            return None

    if shared is None:
        return npu_graph.build_nodes(capture, plan, ascend, is_training), capture
    if isinstance(plan, StaticPlan) and not plan.fp16_ops:
        plan = None  # a plan that changes nothing builds what the emulator's None builds (its key)
    return shared.nodes(capture, plan, ascend, is_training), capture


# --------------------------------------------------------------------------- what the dump files take


class DeviceModel(NamedTuple):
    """What GE does to the graph, for the estimate: ``plan`` the emulating backend's numerics plan
    (None: derived from ``precision_mode``), ``ascend`` fusion and device formats (a real NPU, the
    emulator's ``ascend`` profile), ``precision_mode`` the session's (real NPU)."""

    plan: Any = None
    ascend: bool = False
    precision_mode: str = ""
    note: str = ""
    #: The emulating backend's :class:`~npu_dump_hook.emulator.npu_graph.SharedBuild` (None: no emulator).
    shared: Any = None

    def describe(self) -> str:
        if not self.ascend:
            return "TF ops, dtypes and layouts as they are" + (" (emulated numerics plan)" if self.plan else "")
        fp16 = "the emulator's float16 Cube ops" if self.plan is not None else (
            "precision_mode={}: {}".format(self.precision_mode, "float16 Cube ops" if self.fp16 else "no float16"))
        return "GE: fusion, {}, device formats, Cast/TransData".format(fp16)

    @property
    def fp16(self) -> bool:
        return self.precision_mode in FP16_PRECISION_MODES


class DumpMeasure(NamedTuple):
    """Bytes of one step's dump: ``tensor_bytes`` for the dump mode, ``all_bytes`` inputs and outputs,
    ``stats_bytes`` the stats CSVs; ``files``, ``tensors`` (for the mode) and dumped ``ops``."""

    tensor_bytes: int
    all_bytes: int
    stats_bytes: int
    files: int
    tensors: int
    ops: int


#: A dump file's 8-byte header length before its DumpData header (reference §1.2).
LENGTH_PREFIX = 8
#: A statistic cell of a stats CSV (Max, Min, Avg, ``%g``, six significant digits): its mean width
#: in characters, measured on the sample models' stats dumps (float tensors; integers are shorter).
STATS_FLOAT_CELL = 9
STATS_INT_CELL = 2
_DUMP_TIME = 1700000000000000  # 16 digits, as every dump time: its varint is 8 bytes


def _value(capture: StaticCapture, tensor: Any) -> Optional[StaticValue]:
    value = tensor.value
    found = capture.by_name.get(value.tensor)
    if found is None and value.fallback is not None:
        found = capture.by_name.get(value.fallback)
    return found


def _itemsize(dtype: str) -> int:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:  # bfloat16 and other types numpy lacks
        return 2


def _device_dims(tensor: Any, ascend: bool) -> Tuple[int, ...]:
    shape = tensor.value.shape or ()
    return tuple(layout.device_shape(shape, tensor.value.held)) if ascend else tuple(shape)


class _Sizer(object):
    """Bytes of each dumped tensor's payload, file entry and stats row, each measure made once per
    distinct key (a model repeats its layers: the same shapes, dtypes and formats over and over)."""

    def __init__(self, ascend: bool) -> None:
        self.ascend = ascend
        self.empty_header = len(encode_header(build_header("", dump_time=_DUMP_TIME)))
        self._entries = {}  # type: Dict[Any, int]
        self._rows = {}  # type: Dict[Any, int]
        self._tensors = {}  # type: Dict[Any, Tuple[int, int, int]]

    def payload(self, tensor: Any) -> Tuple[int, Tuple[int, ...]]:
        dims = _device_dims(tensor, self.ascend)
        return _elements(dims) * _itemsize(tensor.value.held.dtype), dims

    def entry(self, tensor: Any, output: bool) -> int:
        """The tensor's entry in the DumpData header, built by the emulator's writer code. Its size
        depends on the origin name's length only, not its text: the key holds the length."""
        origin = tensor.origin if output else None
        key = (tensor.value.held, tensor.value.shape, tensor.tf_dtype, output,
               (len(origin[0].encode("utf-8")), origin[1]) if origin else None)
        found = self._entries.get(key)
        if found is None:
            dims = _device_dims(tensor, self.ascend)
            array = np.broadcast_to(np.zeros((), _storage(tensor.value.held.dtype)), tuple(max(d, 0) for d in dims))
            entry = dump_tensor(tensor, array, tuple(tensor.value.shape or ()), output, self.ascend)
            header = build_header("", outputs=[entry] if output else [], inputs=[] if output else [entry],
                                  dump_time=_DUMP_TIME)
            found = self._entries[key] = len(encode_header(header)) - self.empty_header
        return found

    def group(self, tensors: Sequence[Any], output: bool) -> Tuple[int, int]:
        """``(header entries + payloads, stats rows)`` bytes of a node's inputs or outputs."""
        files = rows = 0
        for index, tensor in enumerate(tensors):
            entry, payload, row = self.tensor(tensor, output, index)
            files += entry + payload
            rows += row
        return files, rows

    def name_part(self, name: str) -> int:
        """A dump file's bytes besides its tensors' entries and payloads: length prefix, header, op name."""
        name_bytes = len(name.encode("utf-8"))  # the op_name field: tag, length varint, the name
        return LENGTH_PREFIX + self.empty_header + 1 + _varint_bytes(name_bytes) + name_bytes

    def stats_row(self, direction: str, index: int, tensor: Any) -> int:
        key = (direction, index, tensor.value.held, tensor.value.shape)
        found = self._rows.get(key)
        if found is None:
            found = self._rows[key] = self._stats_row(direction, index, tensor)
        return found

    def _stats_row(self, direction: str, index: int, tensor: Any) -> int:
        nbytes, dims = self.payload(tensor)
        held = tensor.value.held
        floating = held.dtype.startswith(("float", "bfloat"))
        row = StatsRow(direction=direction, index=index, data_size=nbytes, data_type=ge_dtype(held.dtype),
                       format=held.format if self.ascend else "ND", shape=dims)
        count = _elements(dims)
        cell = STATS_FLOAT_CELL if floating else STATS_INT_CELL
        # the known cells as the writer prints them, the three value cells at their measured width,
        # Count exact, the NaN/Inf counts "0"
        return len(format_stats_csv([row])) - STATS_HEADER_BYTES + 3 * cell + len(str(count)) + 3

    def tensor(self, tensor: Any, output: bool, index: int) -> Tuple[int, int, int]:
        """``(header entry, payload, stats row)`` bytes of one tensor, measured once per key (the
        union of :meth:`entry`'s and :meth:`stats_row`'s keys, which decide all three)."""
        value = tensor.value
        origin = tensor.origin if output else None
        key = (value.held, value.shape, tensor.tf_dtype, output, index, (_utf8_length(origin[0]), origin[1])
               if origin else None)
        found = self._tensors.get(key)
        if found is None:
            found = self._tensors[key] = (self.entry(tensor, output), self.payload(tensor)[0],
                                          self.stats_row("Output" if output else "Input", index, tensor))
        return found


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _elements(dims: Sequence[int]) -> int:
    count = 1
    for dim in dims:
        count *= max(dim, 0)
    return count


def _varint_bytes(value: int) -> int:
    count = 1
    while value >= 0x80:
        value >>= 7
        count += 1
    return count


def _storage(dtype: str) -> str:
    try:
        np.dtype(dtype)
        return dtype
    except TypeError:
        return "uint16"


def _runs(node: Any, capture: StaticCapture) -> int:
    """How many files the node gets in a step: one per iteration of the loop its tensors sit in."""
    if not capture.iterations:
        return 1
    counts = [capture.iterations.get(t.value.tensor, 0) for t in list(node.outputs) + list(node.inputs)]
    return max(counts + [1])


def measure_dump(executed: Sequence[Tuple[Any, bool]], dims: Dims, options: Any, device: DeviceModel,
                 edges: Optional[Edges] = None, loops: Optional[LoopCounts] = None, index: Any = None,
                 capture: Optional[StaticCapture] = None) -> DumpMeasure:
    """The bytes GE (or the emulator) writes for one step of ``executed`` under ``options``
    (``index`` as :func:`static_capture`'s; ``capture``: the step's static capture when already made)."""
    plan = device.plan if device.plan is not None else static_plan(executed, device.ascend and device.fp16)
    with npu_graph.cyclic_gc_paused():
        nodes, capture = build_static_nodes(executed, dims, plan, device.ascend, edges, loops, index, device.shared,
                                            capture)
    mode = "all" if options.enable_dump_debug else options.dump_mode
    sizer = _Sizer(device.ascend)
    present = _Present(capture)
    tensor_bytes = all_bytes = stats = files = tensors = ops = 0
    for node in dumped_nodes(nodes, options.layers):
        outs, ins, missing = present.tensors(node)
        runs = _runs(node, capture)
        name_bytes = sizer.name_part(node.name)
        measured_outs = measured_ins = None  # type: Optional[Tuple[int, int]]
        if not any(missing) and (ins or outs):  # everything (dump_mode "all") is dumped
            measured_outs, measured_ins = sizer.group(outs, True), sizer.group(ins, False)
            all_bytes += runs * (name_bytes + measured_ins[0] + measured_outs[0])
        chosen = _chosen_groups(mode, ins, outs, missing)
        if chosen is None:
            continue
        chosen_ins, chosen_outs = chosen
        if measured_outs is None or measured_ins is None:
            measured_outs, measured_ins = sizer.group(chosen_outs, True), sizer.group(chosen_ins, False)
        # the chosen groups are each the whole group held or empty (_chosen_groups)
        measured_ins = measured_ins if chosen_ins else (0, 0)
        measured_outs = measured_outs if chosen_outs else (0, 0)
        ops, files, tensors = ops + 1, files + runs, tensors + runs * (len(chosen_ins) + len(chosen_outs))
        tensor_bytes += runs * (name_bytes + measured_ins[0] + measured_outs[0])
        stats += runs * (STATS_HEADER_BYTES + measured_ins[1] + measured_outs[1])
    return DumpMeasure(tensor_bytes, all_bytes, stats, files, tensors, ops)


class _Present(object):
    """Which of a node's tensors the static capture holds (:func:`_value`, once per :class:`Value`)."""

    def __init__(self, capture: StaticCapture) -> None:
        self.capture = capture
        self._found = {}  # type: Dict[int, Tuple[Any, bool]]  # id(Value) -> (Value, captured)

    def has(self, tensor: Any) -> bool:
        value = tensor.value
        found = self._found.get(id(value))
        if found is None:
            found = self._found[id(value)] = (value, _value(self.capture, tensor) is not None)
        return found[1]

    def tensors(self, node: Any) -> Tuple[list, list, Tuple[bool, bool]]:
        """``(outputs held, inputs held, (an output missing, an input missing))``."""
        has = self.has
        outs = [t for t in node.outputs if has(t)]
        ins = [t for t in node.inputs if has(t)]
        return outs, ins, (len(outs) != len(node.outputs), len(ins) != len(node.inputs))


def _chosen_groups(mode: str, ins: list, outs: list, missing: Tuple[bool, bool]) -> Optional[Tuple[list, list]]:
    """``(inputs, outputs)`` a node's file holds under ``mode`` from the tensors held (``missing``: an
    output, an input not held), or None when the emulator writes no file: its writer's rules
    (:meth:`~npu_dump_hook.emulator.backend.EmulatedNpu._op_tensors`). Each group is the whole
    group held or empty."""
    missing_out, missing_in = missing
    if mode not in ("input", "all"):
        ins, missing_in = [], False
    if (missing_out or missing_in) and (mode != "output" or not outs):
        return None
    if mode == "input":
        outs = []
    return (ins, outs) if ins or outs else None
