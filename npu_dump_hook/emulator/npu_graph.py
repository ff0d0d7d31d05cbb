"""The executed graph as the emulated GE builds it: nodes, their tensors and where each dumped value comes from.

Input: the capture of one step (:class:`~npu_dump_hook.train.capture.CaptureResult`), the
:class:`~npu_dump_hook.emulator.numerics.NumericsPlan` when the graph was rewritten, and the
profile. Output: :class:`NpuNode` objects in execution order, which :mod:`.ge_model` prints as
the Build graph and :mod:`.backend` dumps.

Shape of the Build graph
------------------------
* **The TF ops as they ran**, minus what the numerics rewrite added (``plan.added_ops``): a
  consumer of a rounded or faulted tensor reads the original op (``conv1/Conv2D:0``); the value
  dumped for ``op:i`` is the captured tensor ``plan.alias["op:i"]`` (the NPU value).
* **In-place updates** (``ResourceApplyAdam``, ``ApplyAdam``, ``AssignVariableOp``, ...) are
  nodes with a dump file: inputs as TF lists them (a variable input holds the value before the
  step), one output per variable input holding its value after the step (capture
  ``updates``). GE types drop TF's resource spelling: ``ResourceApplyAdam`` -> ``ApplyAdam``,
  ``AssignVariableOp`` -> ``Assign``, ``AssignAddVariableOp`` -> ``AssignAdd`` (GE's TF parser
  turns resource variables into GE variables updated by ref ops).
* **Resource handles without a value** (an iterator's, a queue's; a variable's handle holds its
  value) are no data input: the node lists their producer as a control input, so
  ``IteratorGetNext`` (GE's ``GetNext`` has no input) and ``QueueDequeue*`` are dumped with their
  outputs and other inputs under every ``dump_mode``.
* ``ascend`` profile, **fusion** (:mod:`.fusion`): a group is one node named as GE names it
  (``conv1/Conv2Dconv1/Relu``), type of its head (``Conv2D``), inputs = the group's external
  inputs (head inputs first, then each member's other inputs, in member order), outputs = the
  last member's, each with ``_datadump_origin_name`` = the last member and
  ``_datadump_origin_output_index`` = the output index. The node carries
  ``_datadump_original_op_names`` / ``_datadump_original_op_types``. Intermediate tensors
  have no node output and are not dumped. Consumers of the last member read ``fused:i``.
* ``ascend`` profile, **device formats** (:mod:`.layout`): where a producer's held dtype/format
  differs from what a consumer reads, a chain of ``Cast`` (``trans_Cast_{n}``) and/or
  ``TransData`` (``trans_TransData_{n}``) nodes is inserted before the consumer, one chain per
  (producer output, held form), shared by every consumer that reads that form; ``n`` counts
  inserted nodes in graph order. Each has one input and one output, ``_datadump_original_op_names
  = [""]``, no origin name on its output (GE creates them without an origin) and gets a dump
  file (they run as tasks on the device). To find the TF tensor behind one, walk input 0
  (``src:i``) to the first node that is neither Cast nor TransData, as msaccucmp does.

Every node output and input has a :class:`Value`: which captured tensor it shows and how it is
held (:class:`~.layout.Held`), so the writer lays the array out without knowing the rules.
"""
import contextlib
import gc
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from . import fusion, layout
from .ge_model import ge_type, is_no_task
from .hccl import ge_collective_type

__all__ = ["Value", "NodeTensor", "NpuNode", "build_nodes", "SharedBuild", "cyclic_gc_paused", "TRANS_TYPES",
           "graph_report"]

TRANS_TYPES = ("Cast", "TransData")


class Value(NamedTuple):
    """What a dumped tensor shows: captured tensor ``tensor`` (TF shape ``shape``) held as ``held``."""

    tensor: str
    shape: Optional[Tuple[int, ...]]
    held: layout.Held
    #: The original tensor, when ``tensor`` is a float16 rounding of it that the step did not run
    #: (nothing executed reads it): its float16 dump gives the same value.
    fallback: Optional[str] = None


class NodeTensor(NamedTuple):
    """One input or output of a node. ``source``: the Build-graph input ``"node:i"`` (inputs only);
    ``tf_dtype``: the framework dtype; ``origin``: ``(TF op, output index)`` (outputs only, or None)."""

    source: str
    value: Value
    tf_dtype: str
    origin: Optional[Tuple[str, int]] = None

    def with_value(self, value: Value) -> "NodeTensor":
        """``self._replace(value=value)`` at a third of its cost on Python 3.7 (a reshape makes
        1,000s); every field is named here (tests/emulator/test_shared_build.py holds them to _fields)."""
        return NodeTensor(self.source, value, self.tf_dtype, self.origin)


class NpuNode(object):
    """One node of the Build graph."""

    def __init__(self, name: str, ge_op_type: str, tf_type: str, inputs: List[NodeTensor],
                 control_inputs: List[str], outputs: List[NodeTensor], kind: str = "op",
                 original_names: Optional[List[str]] = None, original_types: Optional[List[str]] = None) -> None:
        self.name = name
        self.type = ge_op_type
        self.tf_type = tf_type
        self.inputs = inputs
        self.control_inputs = control_inputs
        self.outputs = outputs
        self.kind = kind  # "op" | "fused" | "trans" | "update"
        self.original_names = original_names
        self.original_types = original_types
        # Worked out once: the size estimate's and the emulator's dumped_nodes and the Build graph's
        # forms each ask every node (a node is not changed once made, see SharedBuild)
        self.no_task = kind not in ("fused", "trans", "update") and is_no_task(
            ge_op_type, [t.tf_dtype for t in outputs], tf_type)

    @property
    def input_names(self) -> List[str]:
        return [t.source for t in self.inputs]

    def __repr__(self) -> str:
        return "NpuNode({!r}, {!r}, {} in, {} out)".format(self.name, self.type, len(self.inputs), len(self.outputs))


def graph_report(nodes: Sequence[NpuNode]) -> Dict[str, Any]:
    """The report's numbers of the Build graph: its nodes, the fused ones' members, the inserted
    Cast/TransData nodes by type and the update nodes (one pass over the nodes, most of them plain ops)."""
    fused = {}  # type: Dict[str, List[str]]
    inserted = dict.fromkeys(TRANS_TYPES, 0)
    updates = 0
    for node in nodes:
        kind = node.kind
        if kind == "op":
            continue
        if kind == "fused":
            fused[node.name] = list(node.original_names or ())
        elif kind == "trans" and node.type in inserted:
            inserted[node.type] += 1
        elif kind == "update":
            updates += 1
    return {"nodes": len(nodes), "fused": fused, "inserted": inserted, "updates": updates}


class _Logical(NamedTuple):
    name: str
    type: str
    inputs: List[str]
    control_inputs: List[str]
    output_dtypes: List[str]
    output_shapes: List[Optional[Tuple[int, ...]]]


def _logical_ops(capture: Any, plan: Any) -> List[_Logical]:
    """Executed ops minus the numerics rewrite's, inputs read from the original tensors; update ops
    get one output per variable they update."""
    added = plan.added_ops if plan is not None else frozenset()
    by_name = capture.by_name
    updates = getattr(capture, "updates", {}) or {}
    handle_of = {"{}:{}".format(op.name, index) for op in capture.executed_ops
                 for index, dtype in enumerate(op.output_dtypes) if dtype == "resource"}
    result = []
    for op in capture.executed_ops:
        if op.name in added:
            continue
        dtypes, shapes = list(op.output_dtypes), list(op.output_shapes)
        for index in range(len(dtypes), len(updates.get(op.name, ()))):
            captured = by_name.get("{}:{}".format(op.name, index))
            dtypes.append(captured.dtype if captured is not None else "float32")
            shapes.append(None)
        prefix = op.name + ":"  # the op's tensor names, "op:i", as "{}:{}".format(name, i) makes them
        for index in range(len(shapes)):
            captured = by_name.get(prefix + str(index))
            if captured is not None:
                shapes[index] = tuple(captured.shape)
                if dtypes[index] == "resource":  # a variable's handle, captured as its value before the step
                    dtypes[index] = captured.dtype
        op_type = ge_collective_type(op.name, op.type) or op.type  # an emulated HCCL py_func: GE's Hcom* type
        inputs = list(op.inputs) if plan is None else [plan.original_of(name) for name in op.inputs]
        handles = []  # type: List[str]
        if handle_of and not handle_of.isdisjoint(inputs):
            inputs, handles = _split_handles(inputs, handle_of, by_name)
        controls = [c for c in op.control_inputs if c not in added] if added else list(op.control_inputs)
        if handles:
            controls += [h for h in handles if h not in controls]
        result.append(_Logical(op.name, op_type, inputs, controls, dtypes, shapes))
    return result


def _split_handles(inputs: List[str], handle_of: Set[str], by_name: Any) -> Tuple[List[str], List[str]]:
    """(data inputs, producers of the left-out handles): a resource input with no captured value
    (an iterator's or a queue's handle: a variable's handle is captured as its value) is no tensor
    GE dumps; the op keeps its other inputs and its outputs, and the handle's producer becomes a
    control input."""
    kept, handles = [], []  # type: List[str], List[str]
    for name in inputs:
        if name in handle_of and by_name.get(name) is None:
            handles.append(name.rsplit(":", 1)[0])
        else:
            kept.append(name)
    return kept, handles


class _Builder(object):
    def __init__(self, updates: Any, plan: Any, ascend: bool) -> None:
        self.plan = plan
        self.ascend = ascend
        self.fp16_tensors = plan.fp16_tensors if (plan is not None and ascend) else frozenset()
        self.fp16_ops = plan.fp16_ops if (plan is not None and ascend) else frozenset()
        self.updates = updates
        self.nodes = []  # type: List[NpuNode]
        self.owner = {}  # type: Dict[str, str]  # logical tensor -> Build-graph output "node:i"
        self.trans = {}  # type: Dict[Tuple[str, layout.Held], str]
        self.trans_count = 0
        self.renamed = {}  # type: Dict[str, str]  # fused member -> the fused node's name
        self.dtype_of = {}  # type: Dict[str, str]
        self.type_of = {}  # type: Dict[str, str]  # logical tensor -> its producer's TF type
        self.shape_of = {}  # type: Dict[str, Optional[Tuple[int, ...]]]
        # produced() and value() depend on the tensor (and held form) only: made once each (a
        # tensor read by several consumers, a model's thousands of repeated forms)
        self._produced = {}  # type: Dict[str, layout.Held]
        self._values = {}  # type: Dict[Tuple[str, layout.Held], Value]

    # -- values --------------------------------------------------------------------
    def npu_tensor(self, tensor: str) -> str:
        return self.plan.npu_tensor(tensor) if self.plan is not None else tensor

    def produced(self, tensor: str) -> layout.Held:
        """How the producer of logical ``tensor`` holds it."""
        found = self._produced.get(tensor)
        if found is None:
            found = self._produced[tensor] = self._produced_form(tensor)
        return found

    def _produced_form(self, tensor: str) -> layout.Held:
        dtype, shape = self.dtype_of.get(tensor, "float32"), self.shape_of.get(tensor)
        if not self.ascend:
            return layout.plain(dtype, shape)
        return layout.output_held(dtype, shape, tensor in self.fp16_tensors, self.type_of.get(tensor, ""))

    def read_as(self, op: _Logical, index: int) -> layout.Held:
        tensor = op.inputs[index]
        if not self.ascend:
            return self.produced(tensor)  # both plain(dtype, shape) of the tensor: made once
        dtype, shape = self.dtype_of.get(tensor, "float32"), self.shape_of.get(tensor)
        return layout.input_held(op.type, index, dtype, shape, op.name in self.fp16_ops)

    def value(self, tensor: str, held: layout.Held) -> Value:
        found = self._values.get((tensor, held))
        if found is None:
            found = self._values[(tensor, held)] = self._value(tensor, held)
        return found

    def _value(self, tensor: str, held: layout.Held) -> Value:
        npu = self.npu_tensor(tensor)
        faulted = self.plan is not None and tensor.rsplit(":", 1)[0] in self.plan.faults
        fallback = tensor if npu != tensor and not faulted else None
        return Value(npu, self.shape_of.get(tensor), held, fallback)

    # -- nodes ----------------------------------------------------------------------
    def add_outputs(self, node_name: str, op: _Logical, origin_op: str) -> List[NodeTensor]:
        outputs = []
        prefix, node_prefix = op.name + ":", node_name + ":"  # "{}:{}" names, made by concatenation
        for index, dtype in enumerate(op.output_dtypes):
            tensor, owner = prefix + str(index), node_prefix + str(index)
            self.owner[tensor] = owner
            outputs.append(NodeTensor(owner, self.value(tensor, self.produced(tensor)), dtype, (origin_op, index)))
        return outputs

    def input_for(self, op: _Logical, index: int) -> NodeTensor:
        """Input ``index`` of ``op``, through Cast/TransData nodes where the held form changes."""
        tensor = op.inputs[index]
        have = self.produced(tensor)
        if not self.ascend:  # read as produced: no Cast/TransData
            return NodeTensor(self.owner.get(tensor, tensor), self.value(tensor, have),
                              self.dtype_of.get(tensor, "float32"))
        wanted = self.read_as(op, index)
        source = self.owner.get(tensor, tensor)
        if have != wanted:
            source = self.trans_chain(tensor, source, have, wanted)
        return NodeTensor(source, self.value(tensor, wanted), self.dtype_of.get(tensor, "float32"))

    def trans_chain(self, tensor: str, source: str, have: layout.Held, wanted: layout.Held) -> str:
        cached = self.trans.get((tensor, wanted))
        if cached is not None:
            return cached
        dtype_changes, layout_changes = layout.needs_trans(have, wanted)
        steps = []  # type: List[Tuple[str, layout.Held]]
        if wanted.format == "ND" or have.format != "ND":
            if layout_changes:  # back to ND (or device -> device): TransData in the held dtype first
                steps.append(("TransData", layout.Held(have.dtype, wanted.format, wanted.origin_format)))
            if dtype_changes:
                steps.append(("Cast", wanted))
        else:
            if dtype_changes:
                steps.append(("Cast", layout.Held(wanted.dtype, have.format, have.origin_format)))
            steps.append(("TransData", wanted))
        current = have
        tf_dtype = self.dtype_of.get(tensor, "float32")
        for op_type, target in steps:
            self.trans_count += 1
            name = "trans_{}_{}".format(op_type, self.trans_count)
            node = NpuNode(name, op_type, op_type, [NodeTensor(source, self.value(tensor, current), tf_dtype)], [],
                           [NodeTensor(name + ":0", self.value(tensor, target), tf_dtype)], kind="trans",
                           original_names=[""], original_types=[""])
            self.nodes.append(node)
            source, current = name + ":0", target
        self.trans[(tensor, wanted)] = source
        return source

    def control(self, names: Sequence[str]) -> List[str]:
        result = []  # type: List[str]
        for name in names:
            name = self.renamed.get(name, name)
            if name not in result:
                result.append(name)
        return result

    def add_op(self, op: _Logical) -> None:
        kind = "update" if op.name in self.updates else "op"
        inputs = [self.input_for(op, index) for index in range(len(op.inputs))]
        outputs = self.add_outputs(op.name, op, op.name)
        self.nodes.append(NpuNode(op.name, ge_type(op.type), op.type, inputs, self.control(op.control_inputs), outputs,
                                  kind=kind))

    def add_group(self, group: fusion.FusedGroup, members: List[_Logical]) -> None:
        inside = {m.name for m in members}
        for member in inside:
            self.renamed[member] = group.name
        inputs, controls = [], []  # type: List[NodeTensor], List[str]
        for position, member in enumerate(members):
            for index, tensor in enumerate(member.inputs):
                if position and index == 0:
                    continue  # the previous member's output: inside the fused kernel
                inputs.append(self.input_for(member, index))
            controls.extend(c for c in member.control_inputs if c not in inside)
        last = members[-1]
        outputs = self.add_outputs(group.name, last, last.name)
        self.nodes.append(NpuNode(group.name, ge_type(members[0].type), members[0].type, inputs, self.control(controls),
                                  outputs, kind="fused", original_names=list(group.members),
                                  original_types=list(group.types)))


def build_nodes(capture: Any, plan: Any = None, ascend: bool = False,
                is_training: Optional[Callable[[str], Optional[bool]]] = None) -> List[NpuNode]:
    """The Build-graph nodes of one captured step (module doc). ``ascend``: fusion and device
    formats; ``is_training(op name)``: a BatchNorm's ``is_training`` attr, for fusion."""
    ops = _logical_ops(capture, plan)
    return _build(ops, _updates(capture), plan, ascend, is_training or (lambda name: None)).nodes


def _updates(capture: Any) -> Dict[str, Any]:
    return getattr(capture, "updates", {}) or {}


def _build(ops: List[_Logical], updates: Dict[str, Any], plan: Any, ascend: bool,
           is_training: Callable[[str], Optional[bool]]) -> "_Builder":
    """The builder that made the nodes of ``ops`` (:func:`_logical_ops`): the Build graph depends on
    nothing else but ``updates``' op names, ``plan``, ``ascend`` and the answers of ``is_training``."""
    builder = _Builder(updates, plan, ascend)
    dtype_of, shape_of, type_of = builder.dtype_of, builder.shape_of, builder.type_of
    for op in ops:
        prefix = op.name + ":"
        for index, dtype in enumerate(op.output_dtypes):
            tensor = prefix + str(index)
            dtype_of[tensor] = dtype
            shape_of[tensor] = op.output_shapes[index]
            type_of[tensor] = op.type
    groups = []  # type: List[fusion.FusedGroup]
    if ascend:
        consumers = {}  # type: Dict[str, List[str]]
        for op in ops:
            for tensor in op.inputs:
                consumers.setdefault(tensor, []).append(op.name)
        faulted = set(plan.faults) if plan is not None else set()  # type: Set[str]
        groups = fusion.find_groups(ops, consumers, faulted, is_training)
    last_of = {g.last: g for g in groups}
    member_of = {m for g in groups for m in g.members}
    by_name = {op.name: op for op in ops}
    for op in ops:
        if op.name in last_of:
            group = last_of[op.name]
            builder.add_group(group, [by_name[m] for m in group.members])
        elif op.name not in member_of:
            builder.add_op(op)
    return builder


class _Built(NamedTuple):
    ops: List[_Logical]
    updated: FrozenSet[str]
    plan: Any
    ascend: bool
    answers: Dict[str, Optional[bool]]
    nodes: List[NpuNode]
    #: The builder's ``{(logical tensor, held): Value}``: every Value of ``nodes``.
    values: Dict[Tuple[str, layout.Held], Value]


class SharedBuild(object):
    """The Build graph built once and handed on: the size estimate builds it before the dumped step
    from static shapes (:mod:`npu_dump_hook.train._sizing_graph`), the emulator writes that step
    (and the next dumped ones) from it. :meth:`nodes` is :func:`build_nodes`, answered from the last
    build when everything it was built from is equal -- the logical ops (names, types, inputs,
    control inputs, output dtypes), the updates' op names, the same ``plan`` object, ``ascend`` and
    every ``is_training`` answer the fusion asked for -- and no output shape changed the held forms
    (:func:`_reshaped`): fusion and Cast/TransData nodes depend on nothing else. Shapes that differ
    otherwise (a static shape's batch guess, a dynamic ``Shape``'s length, an unknown static rank)
    get new :class:`Value` objects and the nodes that show them new node objects; anything else
    that changed (a changed graph) is built again, never reused. The nodes are read, never changed,
    by their users."""

    def __init__(self) -> None:
        self._last = None  # type: Optional[_Built]
        #: How many :meth:`nodes` calls were answered from the last build (for tests and logs).
        self.reused = 0

    def nodes(self, capture: Any, plan: Any = None, ascend: bool = False,
              is_training: Optional[Callable[[str], Optional[bool]]] = None) -> List[NpuNode]:
        ask = is_training or (lambda name: None)
        ops, updated = _logical_ops(capture, plan), frozenset(_updates(capture))
        last = self._last
        if (last is not None and last.plan is plan and last.ascend == ascend and last.updated == updated
                and all(ask(name) == answer for name, answer in last.answers.items())):
            reshaped = _reshaped(last.ops, ops, ascend)
            if reshaped is not None:
                self.reused += 1
                self._last = _reshape(last, ops, reshaped) if reshaped else last
                return self._last.nodes
        answers = {}  # type: Dict[str, Optional[bool]]

        def noted(name: str) -> Optional[bool]:
            found = answers[name] = ask(name)
            return found

        builder = _build(ops, _updates(capture), plan, ascend, noted)
        self._last = _Built(ops, updated, plan, ascend, answers, builder.nodes, builder._values)
        return builder.nodes

    def forget(self) -> None:
        """Drop the last build (its nodes and values): the next :meth:`nodes` builds again. For
        an owner whose run has ended, so the build is not kept alive to the end of the process."""
        self._last = None


def _reshaped(old: List[_Logical], new: List[_Logical], ascend: bool
              ) -> Optional[Dict[str, Optional[Tuple[int, ...]]]]:
    """``{logical tensor: new shape}`` of the outputs whose shape changed but not the held forms it
    decides, when nothing else differs between ``old`` and ``new``; None when anything else does.
    The forms depend on the rank only: under ``ascend`` any rank (or its being known) counts, else
    only whether the tensor is 4-D (its NHWC origin format; TF 1.15 gives some gradients no static
    rank at all)."""
    if len(old) != len(new):
        return None
    changed = {}  # type: Dict[str, Optional[Tuple[int, ...]]]
    for was, now in zip(old, new):
        if was == now:
            continue
        if was[:5] != now[:5]:  # all but output_shapes
            return None
        for index, (before, after) in enumerate(zip(was.output_shapes, now.output_shapes)):
            if before == after:
                continue
            if _rank(before) != _rank(after) and (ascend or (_rank(before) == 4) != (_rank(after) == 4)):
                return None
            changed["{}:{}".format(now.name, index)] = after
    return changed


def _rank(shape: Optional[Tuple[int, ...]]) -> int:
    return -1 if shape is None else len(shape)


def _reshape(last: _Built, ops: List[_Logical], shapes: Dict[str, Optional[Tuple[int, ...]]]) -> _Built:
    """``last`` with the Values of the logical tensors in ``shapes`` showing their new shapes."""
    values = dict(last.values)
    replaced = {}  # type: Dict[int, Value]  # id(old Value) -> new Value
    for key, value in last.values.items():
        if key[0] in shapes:
            replaced[id(value)] = values[key] = value._replace(shape=shapes[key[0]])
    nodes = [_with_values(node, replaced) for node in last.nodes]
    return last._replace(ops=ops, nodes=nodes, values=values)


def _with_values(node: NpuNode, replaced: Dict[int, Value]) -> NpuNode:
    """``node`` itself, or a copy whose tensors show the ``replaced`` Values."""
    inputs, outputs = _swapped(node.inputs, replaced), _swapped(node.outputs, replaced)
    if inputs is node.inputs and outputs is node.outputs:
        return node
    return NpuNode(node.name, node.type, node.tf_type, inputs, list(node.control_inputs), outputs, node.kind,
                   node.original_names, node.original_types)


def _swapped(tensors: List[NodeTensor], replaced: Dict[int, Value]) -> List[NodeTensor]:
    """``tensors`` itself, or a copy whose tensors show the ``replaced`` Values (one look-up a tensor:
    a reshape goes over every tensor of the graph)."""
    news = [replaced.get(id(t.value)) for t in tensors]
    if news.count(None) == len(news):
        return tensors
    return [t if new is None else t.with_value(new) for t, new in zip(tensors, news)]


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a step's Build graph and dump files are made (the
    emulator's write, the size estimate's static build): 10,000s of short-lived acyclic objects,
    and each collection their allocations trigger walks the whole heap, TensorFlow's graph
    included (~0.1 s of a 20-step RNN's dump on TF 1.15). Reference counting still frees them;
    the collector is back on (if it was) afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
