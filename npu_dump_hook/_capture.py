"""Capture every output tensor of every op one training step executes, with bounded memory.

Contract (used by the reference writer and the emulated NPU backend)::

    capture = TensorCapture(graph, scratch_dir, npy_dir=None, memory_budget=None)  # in begin()
    return capture.run_args(run_context)                         # in before_run of the captured step
    result = capture.finish(timestamp_us)                        # in after_run of the captured step

Two ways to take the tensors, chosen per captured step; both give the same files (same names,
bit-identical arrays) and the same :class:`CaptureResult`:

* **fetch** (small steps): the executed tensors are fetched in the step's own ``session.run``
  (already computed, so nothing extra runs) and written as ``.npy`` by ``finish``. Taken when
  their total static size (shape x dtype) is at most ``memory_budget`` bytes, which bounds
  what is held in memory at once. Default :data:`DEFAULT_MEMORY_BUDGET` (256 MiB); the
  constructor argument, else ``$NPU_DUMP_HOOK_CAPTURE_BUDGET`` (bytes), overrides it; 0 always
  streams. The values reach the engine through a registered ``Session.run`` fetch conversion
  (private ``tensorflow.python.client.session`` API; without it every step streams).
* **stream** (large steps, or any executed tensor whose static size is unknown): one in-graph
  ``DebugIdentity`` op per tensor (TensorFlow's own tensor-dump kernel, the one tfdbg uses)
  with a ``file://{scratch_dir}`` URL writes each tensor to its own file as soon as it is
  computed, in TF's threads; a tensor is held only until its dump op has run, never the whole
  step. ``finish`` turns each dump file (an ``Event`` proto holding a ``TensorProto``) into its
  ``.npy`` in place: it parses only the protobuf headers before the tensor bytes, overwrites
  them with an ``.npy`` header of exactly that length, cuts the tail and renames the file (a
  copy with ``os.sendfile`` when that fails); one tensor at a time, so memory stays flat.

``__init__`` (the graph is still editable) plans every output tensor and makes dump ops only
where a step may stream: for every capturable tensor when the graph's fetchable tensors exceed
the budget or any has an unknown static size, otherwise only for tensors that are never fetched
directly. Those are tensors that may be dead in a step (TF 1.x ``tf.cond`` contexts, ``Switch``
outputs and what they feed up to a ``Merge``: fetching a dead tensor fails the whole step, a
dead dump op just does not run), TF 1.x reference tensors (``VariableV2``: a fetched value could
show a later in-place update) and ops TF marks unfetchable (TF 2 ``If``/``While``). Dump ops
are made under the name scope ``npu_dump_hook_capture`` on the CPU of the producer's task; they
run only when fetched. Each extra node costs Grappler time when the captured step's executor is
built, so a graph that fits the budget gets none.

``run_args`` walks back from the step's fetches (data and control inputs; fed tensors end the
walk, as in TF's pruning) to the ops the step executes and fetches only *their* tensors (or
dump ops), so no op the step would not run is triggered (e.g. a metric's update op) and the step
computes what it computes without capture. :attr:`TensorCapture.last_path` tells which path a
step took.

Values are those of the graph as written (each captured tensor is fetched or has a dump-op
consumer, so Grappler keeps it), unlike tfdbg's run-option watches, which see the graph after Grappler
fused or folded nodes away.

With ``npy_dir`` the ``.npy`` files get the reference (golden) name
``{op name with / and . -> _}.{output_index}.{timestamp_us}.npy``; otherwise they stay in
``scratch_dir`` as ``t{n}.npy`` and the caller removes them with :meth:`TensorCapture.cleanup`.
Timestamps are 16-digit microsecond counts: ``timestamp_us + order`` for every output of the
op at position ``order`` among the executed ops (topological, ties in graph creation order).

What is not captured, with the reason recorded in :class:`SkippedTensor`:

* resource, variant and string tensors (handles and non-numeric data: no array to compare);
  dtypes numpy cannot hold (float8, int4); tensors whose static size is 2 GiB or more (a
  protobuf cannot hold them). ``bfloat16`` is widened to float32 (exact); quantized types
  are stored as their integer type.
* TF 1.x control flow: tensors inside a ``tf.while_loop`` body (per-iteration values; the
  loop's ``Exit`` outputs are captured); tensors of an untaken ``tf.cond`` branch (no value in
  this step). TF 2 control flow puts bodies into functions: the ``If``/``While`` outputs are
  captured, the function-internal tensors are not graph tensors and are not listed.
* tensors of ops created after ``__init__`` (e.g. by hooks whose ``begin`` ran later).
* fetches and feeds added by *other* hooks are not seen: the walk starts from the step's
  own fetches (``run_context.original_args``).

TF 1.x *reference* variables (``VariableV2``, the TF 1.15 default): a variable's output and the
``Identity`` that reads it (``w/read``) alias the variable's buffer, which the step's
``Apply*``/``Assign*`` ops update in place, so fetching them with the step gives the updated
value and a dump op a racing one. Their value is what the variable held before the step: it is
read in ``run_args`` by a separate ``session.run`` of the variables alone (in groups within the
memory budget, written to scratch files at once), which runs no other op. A variable without a
value yet (an initializer step) is skipped with that reason. Resource variables copy on read
and need none of this for their ``ReadVariableOp`` outputs.

In-place updates (``ApplyAdam``/``ResourceApplyAdam`` and the other ``Apply*``, ``Assign*``,
``Assign*VariableOp``, ``Scatter*``): the dump of an update shows its inputs as they were before
the step and its outputs as updated, so both are captured. An update's reference or
resource-handle input is captured as the variable's value before the step (a ``VarHandleOp``
handle through a ``ReadVariableOp`` the engine makes for each updated resource variable in
``__init__``, under its name scope, read in the same separate ``session.run`` as the reference
variables). After the step ``finish`` reads the updated variables (same grouping; the session
comes from ``run_args``) and records them as the update's outputs: output ``k`` of an update op is
its ``k``-th variable input after the step (TF 1.x ``Apply*`` return output 0 themselves, which is
kept). :attr:`CaptureResult.updates` lists each update's variables. A variable two ops update in
one step shows its final value for both. ``DebugIdentity`` file dumps count against tfdbg's per-process disk
budget (``TFDBG_DISK_BYTES_LIMIT``, 100 GB by default).

TensorFlow APIs: ``tf.compat.v1`` names present in TF 1.15 and 2.x (``Graph.is_fetchable``), the
``DebugIdentity`` op (made by ``_tf.debug_identity``: TF 1.15 has no Python wrapper for it), plus two private ones: ``Operation._control_flow_context``
(no public way to know that an op sits in a TF 1.x ``tf.cond``/``tf.while_loop``; read
defensively, absent in TF 2 graphs) and ``session.register_session_run_conversion_functions``
(present since TF 1.0; the fetch path is off without it).
"""
import heapq
import logging
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

from . import _tf
from .errors import BackendError
from ._capture_plan import (BUDGET_ENV, DEFAULT_MEMORY_BUDGET, Plan, as_stored_array, cpu_device, dtype_reason,
                            is_update_type, maybe_dead, needs_handle_reader, reference_variable, resolve_memory_budget,
                            static_nbytes, static_shape, variable_handle, while_or_cond)
from .formats.names import golden_npy_name
from .formats.npy import debug_event_to_npy, write_npy

__all__ = [
    "TensorCapture",
    "CaptureResult",
    "CapturedTensor",
    "SkippedTensor",
    "ExecutedOp",
    "WRITE_SCOPE",
    "DEFAULT_MEMORY_BUDGET",
    "BUDGET_ENV",
]

logger = logging.getLogger(__name__)

WRITE_SCOPE = "npu_dump_hook_capture"
_CONVERT_THREADS = 4
# DebugIdentity file dumps: {root}/_tfdbg_device_{device}/{node}_{slot}_DebugIdentity_{wall µs}
_DUMP_FILE = re.compile(r"t([0-9]+)_+0_DebugIdentity_[0-9]+\Z")
# The dump-op name appears twice before the tensor bytes (Value.tag, Value.node_name); padding it
# leaves room to overwrite that prefix with the .npy header in place (see debug_event_to_npy).
_NAME_PAD = "_" * 80

# --------------------------------------------------------------------------- results


@dataclass
class CapturedTensor:
    """One output tensor written to ``path`` (an ``.npy`` file)."""

    op_name: str
    op_type: str
    output_index: int
    dtype: str
    shape: Tuple[int, ...]
    path: str
    order: int
    timestamp_us: int

    @property
    def tensor_name(self) -> str:
        return "{}:{}".format(self.op_name, self.output_index)


@dataclass
class SkippedTensor:
    """An output tensor of an executed op that has no file, and why."""

    tensor_name: str
    op_type: str
    reason: str


@dataclass
class ExecutedOp:
    """An op the captured step executed. Shapes are static: -1 for an unknown dim, None for unknown rank."""

    name: str
    type: str
    inputs: List[str]
    control_inputs: List[str]
    order: int
    output_dtypes: List[str]
    output_shapes: List[Optional[Tuple[int, ...]]]


@dataclass
class CaptureResult:
    """What one captured step produced; ``tensors`` are in ``order``."""

    tensors: List[CapturedTensor]
    skipped: List[SkippedTensor]
    executed_ops: List[ExecutedOp]
    #: In-place variable updates the step executed: ``{op name: [variable input tensor names]}``. The
    #: op's output ``k`` in ``tensors`` (``"op:k"``) is the value of the ``k``-th of those variables
    #: after the step; each input tensor (a ``VariableV2`` output or a ``VarHandleOp`` handle) is
    #: captured as the variable's value before the step.
    updates: Dict[str, List[str]] = field(default_factory=dict)
    _by_name: Optional[Dict[str, CapturedTensor]] = field(default=None, repr=False, compare=False)

    @property
    def by_name(self) -> Dict[str, CapturedTensor]:
        """``{"op:index": CapturedTensor}``."""
        if self._by_name is None:
            self._by_name = {t.tensor_name: t for t in self.tensors}
        return self._by_name

    def array(self, tensor_name: str) -> np.ndarray:
        """The captured value of ``tensor_name`` (memory-mapped, read-only)."""
        captured = self.by_name[tensor_name]
        if int(np.prod(captured.shape, dtype=np.int64)) == 0:
            return np.load(captured.path)  # numpy cannot memory-map an empty array
        return np.load(captured.path, mmap_mode="r")


class _FetchedValues(object):
    """A ``session.run`` fetch of many tensors whose values land here, not in the hook's results.

    The capture engine is driven through ``run_args``/``finish`` and never sees ``run_values``;
    a registered fetch conversion (``fetch_function`` -> tensors + contraction) hands the
    values over the moment ``session.run`` returns them.
    """

    def __init__(self, tensors: List[Any]) -> None:
        self.tensors = tensors
        self.values = None  # type: Optional[List[Any]]

    def receive(self, values: List[Any]) -> None:
        self.values = list(values)


_FETCH_REGISTERED = []  # type: List[bool]


def _register_fetch_conversion() -> bool:
    """Teach ``Session.run`` to fetch :class:`_FetchedValues` (private TF API; False when absent)."""
    if not _FETCH_REGISTERED:
        done = _tf.register_fetch_conversion(_FetchedValues, lambda sink: (list(sink.tensors), sink.receive))
        if not done:
            logger.warning("capture: this TensorFlow has no session-run fetch conversions; streaming only")
        _FETCH_REGISTERED.append(done)
    return _FETCH_REGISTERED[0]


# --------------------------------------------------------------------------- the engine


class TensorCapture(object):
    """Streams the output tensors of one step's executed ops to ``.npy`` files (see module doc)."""

    def __init__(self, graph: Any, scratch_dir: str, *, npy_dir: Optional[str] = None,
                 memory_budget: Optional[int] = None) -> None:
        self.graph = graph
        self.scratch_dir = os.path.abspath(scratch_dir)
        self.npy_dir = os.path.abspath(npy_dir) if npy_dir else None
        self.memory_budget = resolve_memory_budget(memory_budget)
        self._dump_root = os.path.join(self.scratch_dir, "dumps")
        self._plans = {}  # type: Dict[str, Plan]
        self._creation_index = {}  # type: Dict[str, int]
        self._pending = None  # type: Optional[List[Tuple[Any, bool]]]
        self._fed = set()  # type: Set[str]
        self._sink = None  # type: Optional[_FetchedValues]
        self._snapshots = {}  # type: Dict[str, Any]
        self._handle_readers = {}  # type: Dict[str, Any]   handle tensor name -> ReadVariableOp output
        self._updates = []  # type: List[Tuple[Any, List[Tuple[str, Any]]]]
        self._session = None  # type: Any
        self._scratch_names = []  # type: List[str]
        self._edges = {}  # type: Dict[str, Tuple[List[Any], List[Any]]]
        self._outputs = {}  # type: Dict[str, Tuple[List[str], List[Optional[Tuple[int, ...]]]]]
        self._can_fetch = _register_fetch_conversion()
        #: How the last captured step was taken: "fetch" (with the step, within the budget) or "stream".
        self.last_path = ""
        self._plan_tensors()
        self._make_handle_readers()

    # -- begin(): plan every tensor; dump ops only where streaming may be needed ----------
    def _plan_tensors(self) -> None:
        ops = self.graph.get_operations()
        self._creation_index = {op.name: i for i, op in enumerate(ops)}
        # Edges, static shapes and dtype names are read here, outside the training step: TF's
        # accessors are slow the first time (each builds Python wrappers through the C API).
        for op in ops:
            self._edges_of(op)
        dead = maybe_dead(ops, self._edges)
        number, fetchable_bytes, unknown = 0, 0, False
        for op in ops:
            flow = while_or_cond(op)
            self._outputs[op.name] = ([t.dtype.base_dtype.name for t in op.outputs],
                                      [static_shape(t) for t in op.outputs])
            for tensor in op.outputs:
                reason = dtype_reason(tensor)
                if not reason and flow == "while":
                    reason = ("inside a TF 1.x tf.while_loop body: a per-iteration value "
                              "(the loop's Exit outputs are captured)")
                if reason:
                    self._plans[tensor.name] = Plan(reason=reason)
                    continue
                # TF 2 If/While ops are marked unfetchable (cond_v2 prevent_fetching); their
                # outputs are read by a dump op instead.
                stream_only = (not self._can_fetch or flow == "cond" or op.name in dead
                               or tensor.dtype != tensor.dtype.base_dtype or not self.graph.is_fetchable(op))
                plan = Plan(number=number, nbytes=static_nbytes(tensor), stream_only=stream_only)
                self._plans[tensor.name] = plan
                number += 1
                plan.variable = None if flow else reference_variable(tensor)
                if plan.variable is not None:
                    plan.stream_only = False  # read before the step (run_args), never fetched or dumped
                    continue
                if not stream_only:
                    unknown = unknown or plan.nbytes is None
                    fetchable_bytes += plan.nbytes or 0
        # A graph whose tensors all fit the budget never streams them: no dump op is needed
        # (each costs time here and Grappler time in the captured step's executor).
        stream_all = unknown or fetchable_bytes > self.memory_budget
        made = self._make_dump_ops(ops, stream_all)
        logger.debug("capture: %d capturable tensor(s) (%s bytes fetchable%s), %d dump op(s), budget %d",
                     number, fetchable_bytes, ", some unknown" if unknown else "", made, self.memory_budget)

    def _make_dump_ops(self, ops: List[Any], stream_all: bool) -> int:
        graph = self.graph
        urls = ["file://" + self._dump_root]
        devices = {}  # type: Dict[str, str]
        made = 0
        with graph.as_default(), graph.control_dependencies(None), graph.name_scope(WRITE_SCOPE + "/"):
            for op in ops:
                for tensor in op.outputs:
                    plan = self._plans[tensor.name]
                    if plan.reason or plan.variable is not None or not (stream_all or plan.stream_only):
                        continue
                    with graph.device(cpu_device(op.device, devices)):
                        dump = _tf.debug_identity(graph, tensor, "t{}{}:0".format(plan.number, _NAME_PAD), urls)
                    plan.dump_op = dump.op
                    made += 1
        return made

    def _make_handle_readers(self) -> None:
        """One ``ReadVariableOp`` per resource variable that an op updates in place, made now while
        the graph is editable; run only by the reads before and after the captured step."""
        graph = self.graph
        handles = [op for op in graph.get_operations() if op.type == "VarHandleOp" and needs_handle_reader(op)]
        if not handles:
            return
        raw_ops = _tf.tf_v1().raw_ops
        with graph.as_default(), graph.control_dependencies(None), graph.name_scope(WRITE_SCOPE + "/"):
            for handle_op in handles:
                with graph.device(handle_op.device):
                    reader = raw_ops.ReadVariableOp(resource=handle_op.outputs[0], dtype=handle_op.get_attr("dtype"),
                                                    name="read")
                self._handle_readers[handle_op.outputs[0].name] = reader

    def _value_of_variable_input(self, tensor: Any) -> Any:
        """The tensor a separate ``session.run`` fetches for the variable behind an update op's
        input: the ``VariableV2`` reference, or the reader made for a resource handle; else None."""
        if tensor.dtype.base_dtype.name == "resource":
            handle = variable_handle(tensor)
            return self._handle_readers.get(handle.outputs[0].name) if handle is not None else None
        if tensor.dtype != tensor.dtype.base_dtype:
            return reference_variable(tensor)
        return None

    def _plan_updates(self, executed: List[Tuple[Any, bool]], fed: Set[str]) -> List[Tuple[Any, Any]]:
        """Record the executed in-place updates (``self._updates``) and return the resource handles
        the step's ops take, each with its reader: their values are read before the step."""
        self._updates = []
        handle_reads = {}  # type: Dict[str, Tuple[Any, Any]]
        for op, fed_only in executed:
            if fed_only:
                continue
            variables = []  # type: List[Tuple[str, Any]]
            for tensor in self._edges[op.name][0]:
                if tensor.name in fed:
                    continue
                value = self._value_of_variable_input(tensor)
                if value is None:
                    continue
                variables.append((tensor.name, value))
                if tensor.dtype.base_dtype.name == "resource":
                    handle = variable_handle(tensor).outputs[0]
                    handle_reads.setdefault(handle.name, (handle, value))
            if variables and is_update_type(op.type):
                self._updates.append((op, variables))
        return list(handle_reads.values())

    # -- before_run(): fetch the executed tensors, or their dump ops ---------------------
    def run_args(self, run_context: Any) -> Any:
        """``SessionRunArgs`` that capture every tensor the step computes (module doc: fetch or stream)."""
        args = run_context.original_args
        if not self.graph.finalized:
            self._edges = {}  # an editable graph may gain edges between steps
        executed, fed = self._executed(args.fetches, args.feed_dict)
        self._pending, self._fed = executed, fed
        shutil.rmtree(self._dump_root, ignore_errors=True)  # stale dumps must not pass for this step's
        self._scratch_names = []
        direct, streamed = [], []  # type: List[Tuple[Any, Plan]], List[Tuple[Any, Plan]]
        variable_reads = self._plan_updates(executed, fed)  # type: List[Tuple[Any, Any]]
        for op, fed_only in executed:
            for tensor in op.outputs:
                plan = self._plans.get(tensor.name)
                if plan is None or plan.reason:
                    continue
                if fed_only and tensor.name not in fed:
                    continue  # the op is replaced by a feed; its other outputs are never computed
                if plan.variable is not None and tensor.name not in fed:
                    variable_reads.append((tensor, plan.variable))
                    continue
                (streamed if plan.stream_only else direct).append((tensor, plan))
        self._session = run_context.session
        self._snapshots = self._snapshot_variables(run_context.session, variable_reads, "v")
        sizes = [plan.nbytes for _, plan in direct]
        fetch = all(plan.dump_op is None for _, plan in direct) or (
            None not in sizes and sum(sizes) <= self.memory_budget)  # type: ignore[arg-type]
        if not fetch:
            streamed, direct = direct + streamed, []
        self.last_path = "fetch" if direct else "stream"
        self._sink = _FetchedValues([tensor for tensor, _ in direct])
        dumps = [plan.dump_op for _, plan in streamed]
        if dumps:
            os.makedirs(self._dump_root, exist_ok=True)
        logger.debug("capture: step executes %d op(s); fetching %d tensor(s) and %d dump op(s); "
                     "%d reference-variable read(s) taken before the step",
                     len(executed), len(direct), len(dumps), len(variable_reads))
        return _tf.tf_v1().train.SessionRunArgs([self._sink, dumps] if direct else dumps)

    def _snapshot_variables(self, session: Any, reads: List[Tuple[Any, Any]], prefix: str) -> Dict[str, Any]:
        """Read variables in a ``session.run`` of their values alone (no other op runs).

        ``reads`` pairs a tensor to capture with the variable value that stands for it. Before the
        step (``prefix="v"``): TF 1.x reference variables the step reads -- a ``VariableV2`` output
        and the ``Identity`` that reads it (``w/read``) alias the variable's buffer, which the
        step's ``Apply*``/``Assign*`` ops update in place, so fetched with the step (or dumped
        while it runs) they show the updated or a racing value, not the one the step computed
        with -- and the resource handles the step's ops take (read through their reader). After
        the step (``prefix="u"``): the variables the step updated. Variables are read in groups
        of at most the memory budget and written to scratch ``.npy`` files at once. Returns
        ``{key: (scratch file, dtype, shape)}`` or, for a variable that has no value (an
        initializer step), ``{key: reason}``; the key is the tensor name (``"v"``) or its
        position in ``reads`` (``"u"``).
        """
        snapshots = {}  # type: Dict[Any, Any]
        if not reads:
            return snapshots
        by_variable = {}  # type: Dict[str, Tuple[Any, List[Tuple[Any, Any]]]]
        for position, (tensor, variable) in enumerate(reads):
            key = position if prefix == "u" else tensor.name
            by_variable.setdefault(variable.name, (variable, []))[1].append((key, tensor))
        os.makedirs(self._dump_root, exist_ok=True)
        groups, group, size = [], [], 0  # type: List[List[Any]], List[Any], int
        for variable, _ in by_variable.values():
            nbytes = static_nbytes(variable) or 0
            if group and size + nbytes > self.memory_budget:
                groups.append(group)
                group, size = [], 0
            group.append(variable)
            size += nbytes
        groups.append(group)
        for group in groups:
            values = self._read_variables(session, group)
            for variable in group:
                value = values.pop(variable.name)
                for key, _ in by_variable[variable.name][1]:
                    if isinstance(value, str):
                        snapshots[key] = value
                        continue
                    path = os.path.join(self._dump_root, "{}{}.npy".format(prefix, len(self._scratch_names)))
                    self._scratch_names.append(path)
                    dtype, shape = write_npy(as_stored_array(value, variable), path)
                    snapshots[key] = (path, dtype, shape)
            del values
        return snapshots

    @staticmethod
    def _read_variables(session: Any, variables: List[Any]) -> Dict[str, Any]:
        """``{name: value}``; a variable that cannot be read maps to the reason."""
        try:
            return dict(zip([v.name for v in variables], session.run(variables)))
        except _tf.tf_v1().errors.FailedPreconditionError:
            pass  # some are uninitialized: read one by one to tell which
        values = {}  # type: Dict[str, Any]
        for variable in variables:
            try:
                values[variable.name] = session.run(variable)
            except _tf.tf_v1().errors.FailedPreconditionError:
                values[variable.name] = "uninitialized variable: no value before this step"
        return values

    def _graph_elements(self, structure: Any) -> List[Any]:
        elements = []
        for leaf in _tf.tf_v1().nest.flatten(structure, expand_composites=True):
            if leaf is not None:
                elements.append(self.graph.as_graph_element(leaf, allow_tensor=True, allow_operation=True))
        return elements

    def _executed(self, fetches: Any, feed_dict: Any) -> Tuple[List[Tuple[Any, bool]], Set[str]]:
        """Executed ops in topological order as ``(op, fed_only)``, and the fed tensor names."""
        fed = set()  # type: Set[str]
        for key in (feed_dict or {}):
            fed.update(element.name for element in self._graph_elements(key))
        full = {}  # type: Dict[str, Any]       ops that run
        fed_only = {}  # type: Dict[str, Any]   ops whose outputs are only reached through feeds
        stack = []  # type: List[Any]
        for element in self._graph_elements(fetches):
            if element.name in fed:
                fed_only[element.op.name] = element.op
            else:
                stack.append(getattr(element, "op", element))
        edges = self._edges
        while stack:
            op = stack.pop()
            if op.name in full:
                continue
            full[op.name] = op
            inputs, controls = edges.get(op.name) or self._edges_of(op)
            for tensor in inputs:
                if tensor.name in fed:
                    fed_only.setdefault(tensor.op.name, tensor.op)
                elif tensor.op.name not in full:
                    stack.append(tensor.op)
            stack.extend(control for control in controls if control.name not in full)
        for name, op in fed_only.items():
            if name not in edges:
                self._edges_of(op)
        ops = dict(fed_only)
        ops.update(full)
        return [(op, op.name not in full) for op in self._topological(ops)], fed

    def _edges_of(self, op: Any) -> Tuple[List[Any], List[Any]]:
        """``(input tensors, control-input ops)`` of ``op``, kept: TF's accessors build new lists each call."""
        edges = (list(op.inputs), list(op.control_inputs))
        self._edges[op.name] = edges
        return edges

    def _topological(self, ops: Dict[str, Any]) -> List[Any]:
        """Kahn's order over data and control edges, ties by creation; cycles (TF 1.x loops) broken by creation."""
        if any(name not in self._creation_index for name in ops):
            self._creation_index = {op.name: i for i, op in enumerate(self.graph.get_operations())}
        index = self._creation_index
        indegree = dict.fromkeys(ops, 0)
        consumers = {name: [] for name in ops}  # type: Dict[str, List[str]]
        for name, op in ops.items():
            inputs, controls = self._edges[name]
            producers = {t.op.name for t in inputs} | {c.name for c in controls}
            for producer in producers:
                if producer in ops and producer != name:
                    indegree[name] += 1
                    consumers[producer].append(name)
        ready = [(index[name], name) for name, degree in indegree.items() if degree == 0]
        heapq.heapify(ready)
        waiting = sorted((index[name], name) for name in ops)
        ordered, done, cursor = [], set(), 0  # type: List[Any], Set[str], int
        while len(ordered) < len(ops):
            if not ready:  # a cycle: release the earliest-created op still waiting
                while waiting[cursor][1] in done:
                    cursor += 1
                heapq.heappush(ready, waiting[cursor])
            _, name = heapq.heappop(ready)
            if name in done:
                continue
            done.add(name)
            ordered.append(ops[name])
            for consumer in consumers[name]:
                indegree[consumer] -= 1
                if indegree[consumer] == 0 and consumer not in done:
                    heapq.heappush(ready, (index[consumer], consumer))
        return ordered

    # -- after_run(): dump files -> .npy ------------------------------------------------
    def finish(self, timestamp_us: int, to_scratch: bool = False) -> CaptureResult:
        """Convert this step's dump files to ``.npy`` files; one tensor in memory at a time.

        ``to_scratch=True`` keeps this step's files in the scratch folder even when
        ``npy_dir`` is set (a further dumped step that must not mix into the golden set);
        :meth:`cleanup` removes them.
        """
        if self._pending is None:
            raise BackendError("TensorCapture.finish() called without run_args() for this step")
        if isinstance(timestamp_us, bool) or not isinstance(timestamp_us, int) or len(str(timestamp_us)) != 16:
            raise BackendError("timestamp_us must be a 16-digit microsecond count, got {!r}".format(timestamp_us))
        executed, self._pending = self._pending, None
        sink, self._sink = self._sink, None
        fetched = {}  # type: Dict[str, Any]
        if sink is not None and sink.tensors:
            if sink.values is None:
                raise BackendError("TensorCapture.finish(): the step did not return the fetched tensors "
                                   "(run_args() result not passed to this step's session.run?)")
            fetched = {t.name: v for t, v in zip(sink.tensors, sink.values)}
        dumped = self._dump_files()
        snapshots, self._snapshots = self._snapshots, {}
        updates, self._updates = self._updates, []
        session, self._session = self._session, None
        updated = self._read_updated(session, updates)
        golden = bool(self.npy_dir) and not to_scratch
        target_dir = self.npy_dir if golden else self.scratch_dir
        os.makedirs(target_dir, exist_ok=True)
        tensors, skipped, executed_ops = [], [], []  # type: List[CapturedTensor], List[SkippedTensor], List[ExecutedOp]
        jobs = []  # type: List[Tuple[Any, str]]
        for order, (op, fed_only) in enumerate(executed):
            outputs = op.outputs
            inputs, controls = self._edges[op.name]
            dtypes, shapes = self._outputs.get(op.name) or (
                [t.dtype.base_dtype.name for t in outputs], [static_shape(t) for t in outputs])
            executed_ops.append(ExecutedOp(
                name=op.name, type=op.type, inputs=[t.name for t in inputs],
                control_inputs=[c.name for c in controls], order=order,
                output_dtypes=list(dtypes), output_shapes=list(shapes),
            ))
            stamp = timestamp_us + order
            for index, tensor in enumerate(outputs):
                snapshot = snapshots.get(tensor.name)
                reason = snapshot if isinstance(snapshot, str) else (
                    "" if snapshot else self._skip_reason(op, tensor, fed_only, dumped, fetched))
                if reason:
                    skipped.append(SkippedTensor(tensor.name, op.type, reason))
                    continue
                target = os.path.join(target_dir, self._npy_name(op.name, index, stamp, golden))
                if snapshot and not golden:  # a handle has no plan number: the scratch name is unique
                    target = os.path.join(target_dir, "s" + os.path.basename(snapshot[0]))
                if snapshot:
                    os.replace(snapshot[0], target)
                    tensors.append(CapturedTensor(op_name=op.name, op_type=op.type, output_index=index,
                                                  dtype=snapshot[1], shape=snapshot[2], path=target,
                                                  order=order, timestamp_us=stamp))
                    continue
                if tensor.name in fetched:
                    # Released as soon as it is queued: the values dict must not outlive its writes.
                    jobs.append((as_stored_array(fetched.pop(tensor.name), tensor), target))
                else:
                    jobs.append((dumped.pop(self._plans[tensor.name].number), target))
                tensors.append(CapturedTensor(op_name=op.name, op_type=op.type, output_index=index, dtype="",
                                              shape=(), path=target, order=order, timestamp_us=stamp))
            if op.name in updated:
                self._add_updated(op, updated[op.name], tensors, skipped, target_dir, golden, order, stamp)
        del fetched, sink
        self._write([t for t in tensors if not t.dtype], jobs)
        del jobs
        shutil.rmtree(self._dump_root, ignore_errors=True)
        if golden:
            self._remove_scratch_dir_if_empty()
        logger.info("capture: %d tensor(s) written (%s), %d skipped, %d op(s) executed",
                    len(tensors), self.last_path, len(skipped), len(executed_ops))
        return CaptureResult(tensors=tensors, skipped=skipped, executed_ops=executed_ops,
                             updates={op.name: [name for name, _ in variables] for op, variables in updates})

    def _read_updated(self, session: Any, updates: List[Tuple[Any, List[Tuple[str, Any]]]]) -> Dict[str, List[Any]]:
        """The values of the variables each update op changed, read after the step:
        ``{op name: [(scratch file, dtype, shape) or reason, ...]}`` in the op's variable order."""
        reads = [(None, value) for _, variables in updates for _, value in variables]
        if not reads:
            return {}
        if session is None:
            raise BackendError("TensorCapture.finish(): no session from run_args() to read the updated variables")
        try:
            values = self._snapshot_variables(session, reads, "u")
        except _tf.tf_v1().errors.OpError as exc:
            raise BackendError("TensorCapture.finish(): reading the variables the step updated failed: {}".format(
                exc.message))
        result, position = {}, 0  # type: Dict[str, List[Any]], int
        for op, variables in updates:
            result[op.name] = [values[position + k] for k in range(len(variables))]
            position += len(variables)
        return result

    def _add_updated(self, op: Any, values: List[Any], tensors: List[CapturedTensor], skipped: List[SkippedTensor],
                     target_dir: str, golden: bool, order: int, stamp: int) -> None:
        """Output ``k`` of update op ``op``: its ``k``-th variable after the step (unless TF's own
        output ``k`` was captured already: a TF 1.x ``Apply*`` returns the updated reference)."""
        own = {t.output_index for t in tensors if t.op_name == op.name}
        for index, value in enumerate(values):
            if index in own:
                continue
            if isinstance(value, str):
                skipped.append(SkippedTensor("{}:{}".format(op.name, index), op.type, value))
                continue
            name = golden_npy_name(op.name, index, stamp) if golden else "u{}_{}.npy".format(order, index)
            target = os.path.join(target_dir, name)
            os.replace(value[0], target)
            tensors.append(CapturedTensor(op_name=op.name, op_type=op.type, output_index=index, dtype=value[1],
                                          shape=value[2], path=target, order=order, timestamp_us=stamp))

    @staticmethod
    def _write(tensors: List[CapturedTensor], jobs: List[Tuple[Any, str]]) -> None:
        """Write each job's ``.npy`` and fill in its tensor's dtype and shape."""
        if all(isinstance(source, np.ndarray) for source, _ in jobs):
            # In-memory arrays: two system calls per file; threads only add lock hand-offs here.
            for tensor, (array, target) in zip(tensors, jobs):
                tensor.dtype, tensor.shape = write_npy(array, target)
            return
        # Dump files (open, header parse, rewrite, rename, unlink) release the GIL: a few threads
        # overlap that work; each converts one tensor at a time, so memory stays bounded.
        with ThreadPoolExecutor(max_workers=_CONVERT_THREADS) as pool:
            for tensor, (dtype, shape) in zip(tensors, pool.map(_convert, jobs)):
                tensor.dtype, tensor.shape = dtype, shape

    def _dump_files(self) -> Dict[int, str]:
        """``{dump op number: file}`` of the files the dump ops wrote in this step."""
        found = {}  # type: Dict[int, str]
        for folder, _, files in os.walk(self._dump_root):
            for name in files:
                match = _DUMP_FILE.match(name)
                if match:
                    found[int(match.group(1))] = os.path.join(folder, name)
        return found

    def _skip_reason(self, op: Any, tensor: Any, fed_only: bool, dumped: Dict[int, str],
                     fetched: Dict[str, Any]) -> str:
        plan = self._plans.get(tensor.name)
        if plan is None:
            return "op created after the capture was set up (no dump op)"
        if plan.reason:
            return plan.reason
        if fed_only and tensor.name not in self._fed:
            return "not computed: the op was replaced by a feed"
        if tensor.name not in fetched and plan.number not in dumped:
            if while_or_cond(op) == "cond":
                return "no value in this step (untaken TF 1.x tf.cond branch)"
            return "no value in this step (dead output, e.g. the untaken side of a Switch)"
        return ""

    def _npy_name(self, op_name: str, index: int, stamp: int, golden: bool) -> str:
        if not golden:
            return "t{}.npy".format(self._plans["{}:{}".format(op_name, index)].number)
        return golden_npy_name(op_name, index, stamp)

    def _remove_scratch_dir_if_empty(self) -> None:
        try:
            os.rmdir(self.scratch_dir)
        except OSError:
            pass  # not empty: someone else's files

    def cleanup(self) -> None:
        """Remove the scratch folder and everything in it (the .npy files too when no npy_dir)."""
        shutil.rmtree(self.scratch_dir, ignore_errors=True)


def _convert(job: Tuple[Any, str]) -> Tuple[str, Tuple[int, ...]]:
    source, target = job
    if isinstance(source, np.ndarray):
        return write_npy(source, target)
    return debug_event_to_npy(source, target, move=True)


