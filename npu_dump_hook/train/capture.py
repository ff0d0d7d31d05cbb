"""Capture every output tensor of every op one training step executes, with bounded memory.

Contract (used by the reference writer and the emulated NPU backend)::

    capture = TensorCapture(graph, scratch_dir, npy_dir=None, memory_budget=None)  # in begin()
    capture.warm_reads(session)                                  # optional, in after_create_session
    return capture.warm_args(run_context)                        # in before_run of a step before it
    return capture.run_args(run_context)                         # in before_run of the captured step
    result = capture.finish(timestamp_us)                        # in after_run of the captured step

Two ways to take the tensors, chosen per captured step; both give the same files (same names,
bit-identical arrays) and the same :class:`CaptureResult`:

* **fetch** (small steps): the executed tensors are fetched in the step's own ``session.run``
  (already computed, so nothing extra runs) and written as ``.npy`` by ``finish`` (an output
  whose value is by definition a copy of values the step fetches, an Identity, a Shape, a Reshape to
  the shape its shape input held, a Split, ConcatV2 or Slice, a small Const, is derived from those
  values instead of fetched: each fetched tensor costs TensorFlow executor work,
  ``_capture_derive.VALUE_FORWARDING``; a derivation that fails skips its output). Taken when
  their total static size (shape x dtype) is at most ``memory_budget`` bytes, which bounds
  what is held in memory at once. Default :data:`DEFAULT_MEMORY_BUDGET` (256 MiB); the
  constructor argument, else ``$NPU_DUMP_HOOK_CAPTURE_BUDGET`` (bytes), overrides it; 0 always
  streams. The values reach the engine through a registered ``Session.run`` fetch conversion
  (private ``tensorflow.python.client.session`` API; without it every step streams).
  A tensor whose static size is unknown (a ``None`` batch dimension) counts at the size the
  step's fed values decide (:mod:`npu_dump_hook.train._capture_sizes`: TF's shape inference).
* **stream** (large steps, or any executed tensor whose size is unknown even then): one in-graph
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
built, so a graph that fits the budget gets none. With ``editable=True`` (the graph stays editable
until the captured step: a plain session, :class:`~npu_dump_hook.session.NpuDumpSession`)
``__init__`` makes only the stream-only tensors' dump ops; ``run_args`` makes the others' for the
tensors a step streams, when it streams (a step whose fed shapes fit the budget gets none); a
graph finalized in between takes no op: those tensors are then fetched with the step, with a warning.

``run_args`` walks back from the step's fetches (data and control inputs; fed tensors end the walk, as in TF's
pruning; fetches that are no element of the graph are left out) to the ops the step executes and fetches only *their*
tensors (or dump ops), so no op the step would not run is triggered (e.g. a metric's update op) and the step
computes what it computes without capture. :attr:`TensorCapture.last_path` tells which path a step took.

Values are those of the graph as written (each captured tensor is fetched or has a dump-op consumer, so Grappler
keeps it), unlike tfdbg's run-option watches, which see the graph after Grappler fused or folded nodes away.

With ``npy_dir`` the ``.npy`` files get the reference (golden) name
``{op name with / and . -> _}.{output_index}.{timestamp_us}.npy``; otherwise they stay in
``scratch_dir`` as ``t{n}.npy`` and the caller removes them with :meth:`TensorCapture.cleanup`.
Timestamps are 16-digit microsecond counts: ``timestamp_us + order`` for every output of the
op at position ``order`` among the executed ops (topological, ties in graph creation order).

What is not captured, with the reason recorded in :class:`SkippedTensor`:

* resource, variant and string tensors (handles and non-numeric data: no array to compare); dtypes numpy
  cannot hold (float8, int4); tensors whose static size is 2 GiB or more (a protobuf cannot hold them).
  ``bfloat16`` is widened to float32 (exact); quantized types are stored as their integer type.
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
memory budget, written to scratch files, the last group by a worker thread while the step runs),
which runs no other op. A variable without a value yet (an initializer step) is skipped with that
reason. Resource variables copy on read and need none of this for their ``ReadVariableOp`` outputs.

In-place updates (``ApplyAdam``/``ResourceApplyAdam`` and the other ``Apply*``, ``Assign*``,
``Assign*VariableOp``, ``Scatter*``): the dump of an update shows its inputs as they were before
the step and its outputs as updated, so both are captured. An update's reference or
resource-handle input is captured as the variable's value before the step (a ``VarHandleOp``
handle through a ``ReadVariableOp`` the engine makes for each updated resource variable in
``__init__``, under its name scope, read in the same separate ``session.run`` as the reference
variables). After the step ``finish`` reads the updated variables (same grouping; the session
comes from ``run_args``) and records them as the update's outputs: output ``k`` of an update op is
its ``k``-th variable input after the step. TF 1.x ``Apply*``/``Assign*`` return output 0
themselves, a reference to input 0's buffer: it is taken from that read too (the same value), so
such a step needs no dump op and fetches everything with the step; their dump op serves only a step
that feeds that variable. :attr:`CaptureResult.updates` lists each update's variables. A variable two ops update in
one step shows its final value for both. ``DebugIdentity`` file dumps count against tfdbg's per-process disk
budget (``TFDBG_DISK_BYTES_LIMIT``, 100 GB by default).

Where the parts live: the per-tensor plan and dump ops in :mod:`npu_dump_hook.train._capture_plan`, the variable
reads before and after the step in :mod:`npu_dump_hook.train._capture_reads`, the fetch conversion in
:mod:`npu_dump_hook.train._capture_fetch`, the result records in :mod:`npu_dump_hook.train._capture_results` (the
written arrays kept for the emulator: :mod:`npu_dump_hook.train._capture_memory`), the writes of the step's files in
:mod:`npu_dump_hook.train._capture_write`, the walk of the executed ops in
:mod:`npu_dump_hook.train.walk` (``run_args`` takes a ready :class:`~npu_dump_hook.train.walk.StepWalk` so a hook
walks a step once); this module runs the step's capture and writes the files.

TensorFlow APIs: ``tf.compat.v1`` names present in TF 1.15 and 2.x (``Graph.is_fetchable``), the
``DebugIdentity`` op (made by ``_tf.debug_identity``: TF 1.15 has no Python wrapper for it), plus two private ones: ``Operation._control_flow_context``
(no public way to know that an op sits in a TF 1.x ``tf.cond``/``tf.while_loop``; read
defensively, absent in TF 2 graphs) and ``session.register_session_run_conversion_functions``
(present since TF 1.0; the fetch path is off without it).

Also importable as ``npu_dump_hook._capture`` (the same module object).
"""

import logging
import os
import re
import shutil
from concurrent.futures import wait
from typing import Any, Dict, List, Optional, Set, Tuple

from .. import _tf
from .._golden_marker import begin_golden
from ..errors import BackendError
from ..formats.names import golden_npy_name
from ._capture_fetch import FetchedValues, register_fetch_conversion
from ._capture_loops import execution_ranks, watch_files
from ._capture_memory import hold_written
from ._capture_plan import (BUDGET_ENV, DEFAULT_MEMORY_BUDGET, OWN_OPS_PREFIX, WRITE_SCOPE, Plan, as_stored_array,
                            make_dump_ops, plan_graph, resolve_memory_budget, static_shape, while_or_cond)
from ._capture_derive import derived_in_step, forwarded_value
from ._capture_reads import VariableReads, worker
from ._capture_results import CapturedTensor, CaptureResult, ExecutedOp, SkippedTensor
from ._capture_sizes import FedSizes, fetch_sizes
from ._capture_write import StepFiles, write_jobs
from ._space import check_room
from .walk import GraphIndex, StepWalk

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

logger = logging.getLogger("npu_dump_hook._capture")  # its name before it moved into train/

# DebugIdentity file dumps: {root}/_tfdbg_device_{device}/{node}_{slot}_DebugIdentity_{wall µs}
_DUMP_FILE = re.compile(r"t([0-9]+)_+0_DebugIdentity_[0-9]+\Z")
# Run-option watches (loop bodies): {root}/_tfdbg_device_{device}/{op name as folders}_{slot}_DebugIdentity_{wall µs}


# --------------------------------------------------------------------------- the engine


class TensorCapture(object):
    """Streams the output tensors of one step's executed ops to ``.npy`` files (see module doc)."""
    in_memory_bytes = 0  #: the written arrays kept for an emulated NPU by finish (train._capture_memory)

    def __init__(self, graph: Any, scratch_dir: str, *, npy_dir: Optional[str] = None,
                 memory_budget: Optional[int] = None, index: Optional[GraphIndex] = None,
                 editable: bool = False) -> None:
        self.graph = graph
        self.scratch_dir = os.path.abspath(scratch_dir)
        self.npy_dir = os.path.abspath(npy_dir) if npy_dir else None
        self.memory_budget = resolve_memory_budget(memory_budget)
        #: The graph's edges, read once (shared with a hook's :class:`~npu_dump_hook.train.walk.StepWalk`).
        self.index = index if index is not None else GraphIndex(graph)
        self._dump_root = os.path.join(self.scratch_dir, "dumps")
        self._watch_root = os.path.join(self.scratch_dir, "watches")
        self._ranks = {}  # type: Dict[Tuple[int, int], int]   (order, iteration) -> timestamp offset
        self._pending = None  # type: Optional[List[Tuple[Any, bool]]]
        self._fed = set()  # type: Set[str]
        self._sink = None  # type: Optional[FetchedValues]
        self._derived = []  # type: List[Tuple[str, Any]]   (name, Forwarding): not fetched, derived
        self._not_derived = {}  # type: Dict[str, str]   name -> why its derivation failed (it is skipped)
        self._snapshots = {}  # type: Dict[str, Any]
        self._updates = []  # type: List[Tuple[Any, List[Tuple[str, Any]]]]
        self._session = None  # type: Any
        self._given = (None, None)  # type: Tuple[Optional[StepWalk], Any]
        self._records = None  # type: Any   the step's ExecutedOp records, made by a worker during the step
        #: How the last captured step was taken: "fetch" (with the step, within the budget) or "stream".
        self.last_path = ""
        #: The graph stays editable until the captured step (a plain session): dump ops for
        #: tensors that are not stream-only are made by run_args, only when that step streams.
        self._editable = editable
        # begin(): plan every tensor; dump ops only where streaming may be needed.
        self._plans, self._outputs = plan_graph(graph, self.index, register_fetch_conversion(),
                                                self.memory_budget, self._dump_root, editable=editable)
        self._reads = VariableReads(graph, self._dump_root, self.memory_budget)
        self._version = graph.version
        #: The shapes this step's feeds decide (one inference, shared with the hook's size estimate).
        self.fed_sizes = FedSizes(graph)
        self._resolved = {}  # type: Dict[str, int]   sizes the last step's feeds decided

    def _catch_up(self) -> None:
        """Plan the ops an editable graph gained since (a plain session's script may build its train
        function or a pipeline after the hook began: Keras's optimizer and gradients, a string-handle
        iterator); without a plan their tensors would not be captured. The hook's own ops are left out."""
        graph = self.graph
        if graph.finalized or graph.version == self._version:
            return
        ops = [op for op in graph.get_operations()
               if op.name not in self._outputs and not op.name.startswith(OWN_OPS_PREFIX)]
        if ops:
            first = 1 + max([plan.number for plan in self._plans.values()] or [-1])
            plans, outputs = plan_graph(graph, self.index, register_fetch_conversion(), self.memory_budget,
                                        self._dump_root, ops, first, editable=self._editable)
            self._plans.update(plans)
            self._outputs.update(outputs)
            self._reads.add_readers(graph, ops)
            logger.info("capture: %d op(s) built after the hook began planned for capture", len(ops))
        self._version = graph.version

    def warm_reads(self, session: Any) -> bool:
        """At session creation: the variable reads' executor built now, not in the captured step
        (:meth:`~npu_dump_hook.train._capture_reads.VariableReads.warm`); values are not kept."""
        self._catch_up()
        return self._reads.warm(session)

    # -- before_run(): fetch the executed tensors, or their dump ops ---------------------
    def use(self, walk: Optional[StepWalk], also_read: Any = None) -> None:
        """The walk (and the co-reader) the next :meth:`run_args` takes (a hook walks each step once)."""
        self._given = (walk, also_read)

    def run_args(self, run_context: Any, walk: Optional[StepWalk] = None, also_read: Any = None) -> Any:
        """``SessionRunArgs`` that capture every tensor the step computes (module doc: fetch or stream).

        ``walk``: the step's :class:`~npu_dump_hook.train.walk.StepWalk` when the caller has one
        (over this capture's ``index``); ``also_read``: a reader whose variables join the read
        before the step (:mod:`npu_dump_hook.train._capture_reads`). Both may instead be handed over
        by :meth:`use` for the next call.
        """
        given, self._given = self._given, (None, None)
        walk, also_read = walk or given[0], also_read or given[1]
        self._catch_up()
        if walk is None:
            args = run_context.original_args
            self.index.forget_if_editable()  # an editable graph may gain edges between steps
            walk = StepWalk(self.index, args.fetches, args.feed_dict)
        executed, fed = walk.executed(), set(walk.fed)
        self._pending, self._fed = executed, fed
        shutil.rmtree(self._dump_root, ignore_errors=True)  # stale dumps must not pass for this step's
        shutil.rmtree(self._watch_root, ignore_errors=True)
        variable_reads, self._updates = self._reads.plan(executed, fed, self.index.edges, self.index.input_names)
        direct, streamed = self._paths(executed, fed, variable_reads, run_context.original_args.feed_dict)
        direct, streamed = self._with_dump_ops(direct, streamed)
        # Before TF's debug writers run (dump ops and loop-body watches: at least one iteration each).
        check_room(self._dump_root, [plan.nbytes for _, plan in streamed], [plan.floor for _, plan in streamed])
        watched = [tensor for tensor, plan in streamed if plan.per_iteration]
        streamed = [(tensor, plan) for tensor, plan in streamed if not plan.per_iteration]
        self._session = run_context.session
        spare = self.memory_budget - sum(plan.nbytes or self._resolved.get(t.name, 0) for t, plan in direct)
        self._snapshots = self._reads.before(run_context.session, variable_reads, also_read, spare=spare)
        self.last_path = "fetch" if direct else "stream"
        dumps = [plan.dump_op for _, plan in streamed]
        fetched, self._derived = derived_in_step(direct, fed)
        self._sink = FetchedValues([tensor for tensor, _ in fetched], ops=dumps)
        # Pure Python over the graph: done while session.run holds no GIL, not after it (finish joins).
        self._records = worker("records").submit(self._executed_ops, executed)
        if dumps:
            os.makedirs(self._dump_root, exist_ok=True)
        logger.debug("capture: step executes %d op(s); fetching %d tensor(s) (%d more derived from them) and %d "
                     "dump op(s), watching %d loop-body tensor(s); %d reference-variable read(s) taken before the step",
                     len(executed), len(fetched), len(self._derived), len(dumps), len(watched), len(variable_reads))
        return _tf.tf_v1().train.SessionRunArgs(self._sink if direct else dumps, options=self._watch_options(watched))

    def _watch_options(self, watched: List[Any]) -> Any:
        """``RunOptions`` whose debug watches write every iteration's value of each loop-body tensor
        (tfdbg's mechanism: the executor runs the watch each time the tensor is computed), or None."""
        if not watched:
            return None
        os.makedirs(self._watch_root, exist_ok=True)
        options = _tf.tf_v1().RunOptions()
        url = "file://" + self._watch_root
        for tensor in watched:
            watch = options.debug_options.debug_tensor_watch_opts.add()
            watch.node_name, watch.output_slot = tensor.op.name, tensor.value_index
            watch.debug_ops.append("DebugIdentity")
            watch.debug_urls.append(url)
        return options

    def warm_args(self, run_context: Any, walk: Optional[StepWalk] = None) -> Any:
        """``SessionRunArgs`` for a training step *before* the captured one: the fetches
        :meth:`run_args` will add, their values dropped as they arrive; None when that step would
        stream (dump ops must not run before it) or fetch nothing.

        TensorFlow builds an executor per fetch set and keeps it for the session. The session's
        first step builds one anyway; with these fetches it is the one the captured step needs,
        so that step runs on it instead of pruning, placing and optimizing the graph again. Cost
        on such a step: the fetched values (at most the memory budget) are held until ``run``
        returns, and the graph runs as written (no fusion across the fetched tensors), as the
        captured step does. Nothing is read, written or remembered here.
        """
        self._catch_up()
        if walk is None:
            args = run_context.original_args
            self.index.forget_if_editable()
            walk = StepWalk(self.index, args.fetches, args.feed_dict)
        fed = set(walk.fed)
        direct, streamed = self._paths(walk.executed(), fed, [], run_context.original_args.feed_dict)
        if streamed or not direct:
            return None
        fetched, _ = derived_in_step(direct, fed)
        warm = FetchedValues([tensor for tensor, _ in fetched], keep=False)
        return _tf.tf_v1().train.SessionRunArgs(warm)  # the structure run_args gives (no dump op: none streams)

    def _paths(self, executed: List[Tuple[Any, bool]], fed: Set[str], variable_reads: List[Tuple[Any, Any]],
               feed_dict: Any) -> Tuple[List[Tuple[Any, Plan]], List[Tuple[Any, Plan]]]:
        """``(fetched with the step, streamed)``: :meth:`_split`, then everything streams when the
        directly fetchable tensors exceed the budget (or have sizes unknown even with the step's fed
        shapes: :mod:`._capture_sizes`) and have dump ops."""
        direct, streamed = self._split(executed, fed, variable_reads)
        self._resolved = {}
        if not (self._editable and not self.graph.finalized) and all(plan.dump_op is None for _, plan in direct):
            return direct, streamed
        resolved = fetch_sizes(direct, self.memory_budget, self.fed_sizes, feed_dict)
        if resolved is None:
            return [], direct + streamed
        self._resolved = resolved
        return direct, streamed

    def _with_dump_ops(self, direct: List[Tuple[Any, Plan]],
                       streamed: List[Tuple[Any, Plan]]) -> Tuple[List[Tuple[Any, Plan]], List[Tuple[Any, Plan]]]:
        """The streamed tensors of an editable graph get their dump ops now (made for this step's
        streamed tensors only: each op costs graph building and Grappler time). A graph finalized
        since ``begin()`` takes no new op: such tensors are fetched with the step instead, over
        the memory budget, with a warning."""
        missing = [(tensor, plan) for tensor, plan in streamed if plan.dump_op is None and not plan.per_iteration]
        if not missing:
            return direct, streamed
        if not self.graph.finalized:
            made = make_dump_ops(self.graph, missing, self._dump_root, self.index)
            self._version = self.graph.version  # the capture's own ops: nothing for _catch_up to plan
            logger.debug("capture: %d dump op(s) made for this step's streamed tensors", made)
            return direct, streamed
        logger.warning("capture: the graph was finalized after the capture began: %d tensor(s) the step would "
                       "stream have no dump op and are fetched with the step (over the memory budget of %d bytes)",
                       len(missing), self.memory_budget)
        kept = {tensor.name for tensor, _ in missing}
        return direct + missing, [(t, p) for t, p in streamed if t.name not in kept]

    def _split(self, executed: List[Tuple[Any, bool]], fed: Set[str],
               variable_reads: List[Tuple[Any, Any]]) -> Tuple[List[Tuple[Any, Plan]], List[Tuple[Any, Plan]]]:
        """``(fetched directly, streamed)`` tensors of the step; reference-variable tensors are
        appended to ``variable_reads`` (read before the step, never fetched or dumped)."""
        direct, streamed = [], []  # type: List[Tuple[Any, Plan]], List[Tuple[Any, Plan]]
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
                if self._after_update(op, plan, fed_only, fed):
                    continue  # the variable read after the step holds it (finish)
                (streamed if plan.stream_only else direct).append((tensor, plan))
        return direct, streamed

    # -- after_run(): dump files -> .npy ------------------------------------------------
    def finish(self, timestamp_us: int, to_scratch: bool = False) -> CaptureResult:
        """Convert this step's dump files to ``.npy`` files; one tensor in memory at a time.

        ``to_scratch=True`` keeps this step's files in the scratch folder even when
        ``npy_dir`` is set (a further dumped step that must not mix into the golden set);
        :meth:`cleanup` removes them.
        """
        executed, fetched = self._take_step(timestamp_us)
        self._reads.written()
        dumped = self._dump_files()
        watched = watch_files(self._watch_root)
        self._ranks = execution_ranks(executed, watched)
        snapshots, self._snapshots = self._snapshots, {}
        updates, self._updates = self._updates, []
        session, self._session = self._session, None
        # The read after the step runs in TF (GIL released) while this thread writes the step's files.
        reading = worker("read").submit(self._reads.after, session, updates)
        golden = bool(self.npy_dir) and not to_scratch
        files = StepFiles(self.npy_dir if golden else self.scratch_dir, golden)
        try:
            if golden:
                begin_golden(files.target_dir)  # before the first file: a killed capture leaves it
            else:
                os.makedirs(files.target_dir, exist_ok=True)
            executed_ops = self._write_outputs(files, executed, timestamp_us, snapshots, (dumped, watched), fetched)
        finally:
            wait([reading])  # no session.run of ours outlives finish()
        updated = reading.result()
        op_name_of = self.index.name  # read once per op (each op.name is a call into TF)
        for order, (op, _) in enumerate(executed):
            values = updated.get(op_name_of(op)) if updated else None
            if values is not None:
                self._add_updated(op, values, files.tensors, files.skipped, files.target_dir, golden,
                                  order, timestamp_us + self._ranks[(order, 0)])
        files.tensors.sort(key=lambda tensor: (tensor.order, tensor.iteration or 0))  # stable: an update's after its own
        shutil.rmtree(self._dump_root, ignore_errors=True)
        shutil.rmtree(self._watch_root, ignore_errors=True)
        if golden:
            self._remove_scratch_dir_if_empty()
        logger.info("capture: %d tensor(s) written (%s), %d skipped, %d op(s) executed",
                    len(files.tensors), self.last_path, len(files.skipped), len(executed_ops))
        return CaptureResult(tensors=files.tensors, skipped=files.skipped, executed_ops=executed_ops,
                             updates={op.name: [name for name, _ in variables] for op, variables in updates})

    def _write_outputs(self, files: StepFiles, executed: List[Tuple[Any, bool]], timestamp_us: int,
                       snapshots: Dict[str, Any], found: Tuple[Dict[int, str], Dict[str, List[str]]],
                       fetched: Dict[str, Any]) -> List[ExecutedOp]:
        """Every executed op's own outputs into ``files`` (written; ``fetched`` is emptied as they are
        queued); returns the executed ops. ``found``: the dump ops' files and the loop-body watches'."""
        dumped, watched = found
        for order, (op, fed_only) in enumerate(executed):
            stamp = timestamp_us + self._ranks[(order, 0)]
            op_name, op_type = op.name, op.type  # each a call into TF: once per op, not per output
            for index, tensor in enumerate(op.outputs):
                name = "%s:%d" % (op_name, index)  # tensor.name, as TF makes it
                plan = self._plans.get(name)
                if plan is not None and plan.per_iteration and not fed_only:
                    self._add_iterations(files, op, index, (order, timestamp_us), watched.pop(name, []))
                    continue
                self._add_output(files, (op, op_name, op_type), (index, tensor, name, plan), fed_only,
                                 (order, stamp), snapshots, (dumped, fetched))
        fetched.clear()
        write_jobs([t for t in files.tensors if not t.dtype], files.jobs)
        hold_written(files.tensors, files.jobs, self.in_memory_bytes)  # for an emulated NPU
        files.jobs = []
        records, self._records = self._records, None
        return records.result() if records is not None else self._executed_ops(executed)

    def _take_step(self, timestamp_us: int) -> Tuple[List[Tuple[Any, bool]], Dict[str, Any]]:
        """The step run_args() prepared and the values it fetched (``{tensor name: value}``)."""
        if self._pending is None:
            raise BackendError("TensorCapture.finish() called without run_args() for this step")
        if isinstance(timestamp_us, bool) or not isinstance(timestamp_us, int) or len(str(timestamp_us)) != 16:
            raise BackendError("timestamp_us must be a 16-digit microsecond count, got {!r}".format(timestamp_us))
        executed, self._pending = self._pending, None
        sink, self._sink = self._sink, None
        derived, self._derived = self._derived, []
        self._not_derived = {}
        if sink is None or not sink.tensors:
            return executed, {}
        if sink.values is None:
            raise BackendError("TensorCapture.finish(): the step did not return the fetched tensors "
                               "(run_args() result not passed to this step's session.run?)")
        values = {t.name: v for t, v in zip(sink.tensors, sink.values)}
        for name, forwarding in derived:  # in execution order: a source before what it forwards to
            try:
                values[name] = forwarded_value(forwarding, values)
            except Exception as error:  # never out of the user's session.run: that output is left out
                self._not_derived[name] = "not derived from its inputs' values ({}: {})".format(
                    type(error).__name__, error)
                logger.warning("capture: %s left out: %s", name, self._not_derived[name])
        return executed, values

    def _executed_ops(self, executed: List[Tuple[Any, bool]]) -> List[ExecutedOp]:
        return [self._executed_op(op, order) for order, (op, _) in enumerate(executed)]

    def _executed_op(self, op: Any, order: int) -> ExecutedOp:
        index = self.index  # names and types as the walk read them: TF 1.15's accessors call the C API each time
        op_name, controls = index.name(op), index.edges(op)[1]
        dtypes, shapes = self._outputs.get(op_name) or (
            [t.dtype.base_dtype.name for t in op.outputs], [static_shape(t) for t in op.outputs])
        return ExecutedOp(name=op_name, type=index.type(op), inputs=list(index.input_names(op)),
                          control_inputs=[index.name(c) for c in controls], order=order,
                          output_dtypes=list(dtypes), output_shapes=list(shapes))

    def _add_output(self, files: StepFiles, of: Tuple[Any, str, str], output: Tuple[int, Any, str, Optional[Plan]],
                    fed_only: bool, when: Tuple[int, int], snapshots: Dict[str, Any],
                    values: Tuple[Dict[int, str], Dict[str, Any]]) -> None:
        """One output of an executed op (``of``: the op, its name and type; ``output``: its index,
        tensor, tensor name and plan): skipped (with the reason), moved from its snapshot, or queued.
        ``values``: the dump ops' files and the fetched values."""
        (op, op_name, op_type), (index, tensor, name, plan) = of, output
        order, stamp = when
        dumped, fetched = values
        if plan is not None and self._after_update(op, plan, fed_only, self._fed):
            return  # written by _add_updated from the read after the step
        snapshot = snapshots.get(name) if snapshots else None
        if snapshot is None and name in fetched and plan is not None and not (plan.reason or fed_only):
            reason = ""  # fetched with the step: _skip_reason's answer, without the call per tensor
        else:
            reason = snapshot if isinstance(snapshot, str) else (
                "" if snapshot else self._skip_reason(op, name, plan, fed_only, dumped, fetched))
        if reason:
            files.skipped.append(SkippedTensor(name, op_type, reason))
            return
        if snapshot and not files.golden:  # a handle has no plan number: the scratch name is unique
            target = files.prefix + "s" + os.path.basename(snapshot[0])
        else:
            target = files.prefix + (golden_npy_name(op_name, index, stamp) if files.golden
                                     else "t{}.npy".format(plan.number))
        if snapshot:
            os.replace(snapshot[0], target)
            files.tensors.append(CapturedTensor(op_name=op_name, op_type=op_type, output_index=index,
                                                dtype=snapshot[1], shape=snapshot[2], path=target,
                                                order=order, timestamp_us=stamp))
            return
        if name in fetched:
            # Released as soon as it is queued: the values dict must not outlive its writes.
            files.jobs.append((as_stored_array(fetched.pop(name), tensor), target))
        else:
            files.jobs.append((dumped.pop(plan.number), target))
        files.tensors.append(CapturedTensor(op_name=op_name, op_type=op_type, output_index=index, dtype="",
                                            shape=(), path=target, order=order, timestamp_us=stamp))

    def _add_iterations(self, files: StepFiles, op: Any, index: int, when: Tuple[int, int],
                        paths: List[str]) -> None:
        """One output of a TF 1.x loop-body op: one file per iteration its watch wrote (in the order
        they were written), timestamped by :func:`._capture_loops.execution_ranks`; none: skipped."""
        order, base = when
        if not paths:
            files.skipped.append(SkippedTensor("{}:{}".format(op.name, index), op.type,
                                               "no value in this step (a TF 1.x while-loop body op that did not "
                                               "run, or whose tensor TensorFlow's debug watch did not see)"))
            return
        for iteration, path in enumerate(paths):
            stamp = base + self._ranks[(order, iteration)]
            if files.golden:
                name = golden_npy_name(op.name, index, stamp)
            else:
                name = "t{}_i{}.npy".format(self._plans["{}:{}".format(op.name, index)].number, iteration)
            target = os.path.join(files.target_dir, name)
            files.jobs.append((path, target))
            files.tensors.append(CapturedTensor(op_name=op.name, op_type=op.type, output_index=index, dtype="",
                                                shape=(), path=target, order=order, timestamp_us=stamp,
                                                iteration=iteration))

    def _add_updated(self, op: Any, values: List[Any], tensors: List[CapturedTensor], skipped: List[SkippedTensor],
                     target_dir: str, golden: bool, order: int, stamp: int) -> None:
        """Output ``k`` of update op ``op``: its ``k``-th variable after the step (unless TF's own
        output ``k`` was captured already: a TF 1.x ``Apply*`` returns the updated reference)."""
        op_name = op.name  # once, not per captured tensor compared
        own = {t.output_index for t in tensors if t.op_name == op_name}
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

    def _after_update(self, op: Any, plan: Plan, fed_only: bool, fed: Set[str]) -> bool:
        """A TF 1.x update's reference output 0 whose variable (input 0) is read after the step."""
        return plan.after_update and not fed_only and self.index.edges(op)[0][0].name not in fed

    def _dump_files(self) -> Dict[int, str]:
        """``{dump op number: file}`` of the files the dump ops wrote in this step."""
        found = {}  # type: Dict[int, str]
        for folder, _, files in os.walk(self._dump_root):
            for name in files:
                match = _DUMP_FILE.match(name)
                if match:
                    found[int(match.group(1))] = os.path.join(folder, name)
        return found

    def _skip_reason(self, op: Any, name: str, plan: Optional[Plan], fed_only: bool, dumped: Dict[int, str],
                     fetched: Dict[str, Any]) -> str:
        if plan is None:
            return "op created after the capture was set up (no dump op)"
        if plan.reason:
            return plan.reason
        if fed_only and name not in self._fed:
            return "not computed: the op was replaced by a feed"
        if name not in fetched and plan.number not in dumped:
            if name in self._not_derived:
                return self._not_derived[name]
            if while_or_cond(op) == "cond":
                return "no value in this step (untaken TF 1.x tf.cond branch)"
            return "no value in this step (dead output, e.g. the untaken side of a Switch)"
        return ""

    def _remove_scratch_dir_if_empty(self) -> None:
        try:
            os.rmdir(self.scratch_dir)
        except OSError:
            pass  # not empty: someone else's files

    def cleanup(self) -> None:
        """Remove the scratch folder and everything in it (the .npy files too when no npy_dir)."""
        shutil.rmtree(self.scratch_dir, ignore_errors=True)
