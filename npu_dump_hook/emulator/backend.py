"""``EmulatedNpu``: writes what GE would write for the dumped iterations, without an NPU.

Input: the tensors the capture engine (:mod:`npu_dump_hook.train.capture`) streamed to
disk for one executed step. Output, exactly as on an Ascend device::

    {DUMP_GRAPH_PATH or cwd}/ge_proto_{index:08d}_Build.txt      graph { name: "ge_default_{time}_{n}" ... }
    {dump_path}/{YYYYMMDDHHMMSS}/{device_id}/{model_name}/{model_id}/{data_index}/
        {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}    v2 dump files (dump_data=tensor)
        {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.csv  stats (dump_data=stats)
        Opdebug.Node_OpDebug.{task_id}.{stream_id}.{timestamp}  overflow records (enable_dump_debug)
        {digits} + mapping.csv                                   names longer than 255 bytes

What the options select: ``dump_mode`` (input/output/all), ``dump_layer`` (only the
named ops, by NPU or original TF name, plus the Data ops that feed them, as the adapter
documents), ``dump_step`` (``data_index`` is the step when given, else 0, 1, ... per
dumped iteration), ``dump_data=stats`` (one CSV per op, no binary files) and
``enable_dump_debug`` (only ops with an overflowing output: Inf/NaN, or beyond the
float16 range with ``emulate_precision="fp16"``; the folder is not created when nothing
overflows, as on the device).

Emulated NPU profiles (``profile=``)
------------------------------------
``"exact"`` (default)
    The step runs as TensorFlow computes it (CPU/GPU float32); every executed TF op is one GE
    op and its dump shows exactly the tensors TF computed, in ND layout. The demo's
    "everything equal" check uses it. ``emulate_precision="fp16"`` (exact profile only) rounds
    floating tensors through float16 *at dump time* and dumps them as DT_FLOAT16 (the error
    does not propagate). The golden capture can run in the same process
    (:attr:`EmulatedNpu.golden_in_run` is True).
``"ascend"``
    What an Ascend device in ``allow_fp32_to_fp16`` mode does, in four parts:
    *numerics in the graph* (:func:`.numerics.apply` with ``fp16=True``: the Cube ops compute
    from float16 inputs and write float16, their consumers read the rounded values, so the
    rounding errors propagate and the run's training results differ from a pure fp32 run);
    *GE fusion* (:mod:`.fusion`: Conv2D+BiasAdd(+Relu/Relu6), Conv2D(+BiasAdd)+inference
    BatchNorm(+Relu), MatMul+BiasAdd(+Relu/Relu6/Tanh/Sigmoid) become one node and one dump
    file); *device formats* (:mod:`.layout`: float16 4-D feature maps in NC1HWC0, convolution
    filters in FRACTAL_Z, MatMul operands in FRACTAL_NZ, with ``Cast``/``TransData`` nodes
    inserted where the held form changes, see :mod:`.npu_graph`); *optimizer updates* (as in
    ``exact``). The golden tensors must come from a separate golden run
    (``golden_in_run`` is False).
``faults={"op name": "scale=1.05" | "add_noise=1e-2" | "overflow" | "nan"}`` (any profile)
    Replaces what that op's kernel writes inside the emulated run (:func:`.numerics.apply`),
    so the error reaches every op downstream, as a wrong NPU kernel's would; with faults the
    golden also comes from a separate run.

Multi-rank runs (``RANK_SIZE`` > 1, one process per ``RANK_ID``): the collectives of
:mod:`.hccl` exchange between the ranks' processes and are written as GE's ``HcomAllReduce`` /
``HcomAllGather`` / ``HcomBroadcast`` nodes and dump files; :meth:`EmulatedNpu.step_time` puts the
ranks' dump timestamps on one clock.

Not emulated (real GE does it): BatchNorm *training* (GE splits it into BNTrainingReduce +
BNTrainingUpdate and fuses the reduce into the convolution before it); fusion patterns beyond
the documented ones (element-wise chains, Conv2D+Add residuals, BatchMatMul+BiasAdd, L1/L2
buffer fusion, FFTS+ slicing); 5HD layouts for float32 feature maps and the layouts GE's format
inference picks for other ops (here only the Cube ops' operands change layout); GE's own
choice of which side of a Cast a TransData goes; NCHW ``data_format`` convolutions (NHWC is
assumed); ops inside TF 2 functional ``If``/``While`` bodies (function-internal: no dump file, counted
in the bundle's ``coverage.control_flow``); memory addresses, workspaces and the bookkeeping tasks GE
adds (atomic clean, memcpy, send/recv).

TF 1.x ``tf.while_loop`` bodies: an op inside one is dumped at every iteration, as GE dumps a
loop-body task each time it runs: one file per iteration, the same ``{op_type}.{op_name}.{task_id}
.{stream_id}`` and a later ``{timestamp}`` for each (the capture takes every iteration's value
through TensorFlow's debug watches, :mod:`npu_dump_hook.train.capture`). Readers that take the
newest file per op (msaccucmp) see the last iteration; ``npu-dump-hook compare`` matches them
iteration by iteration (docs/compare.md).

Both profiles dump the in-place variable updates (``ResourceApply*``/``Apply*``,
``Assign*``, ``Assign*VariableOp``): inputs as the update read them (variables before the
step), outputs the updated variables (see :mod:`npu_dump_hook.train.capture`), so a training
step's coverage is complete. The graph shape (fused, ``trans_TransData_N``/``trans_Cast_N``
nodes) is described in :mod:`.npu_graph`. Everything the emulator writes is recorded in :attr:`EmulatedNpu.report`, whose
``backend`` is ``"emulated"``, so emulated data is never mistaken for NPU data.
"""
import datetime
import functools
import json
import logging
import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from .._ledger import note_dump_file
from .._phases import test_pause
from ..constants import COMPLETE_STEP_MARKER, INCOMPLETE_STEP_MARKER
from ..errors import BackendError, NpuDumpError, OptionError
from ..formats import ge_handover, mapping_csv, names, opdebug, stats_csv
from ..formats.dump_file import DumpTensor, ge_origin_data_type, write_dump_file
from ..formats.npy import read_npy
from ..options import DumpOptions
from ..bundle.selection import is_selected
from . import ge_model, graph_forms, hccl, layout, npu_graph, numerics

__all__ = ["EmulatedNpu", "PRECISIONS", "PROFILES", "MAX_FILE_NAME_BYTES", "NUMERICS_NOTE", "dump_tensor",
           "dumped_nodes"]

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16")
PROFILES = ("exact", "ascend")
#: What the run summary says when the emulated run computed with NPU numerics or faults.
NUMERICS_NOTE = ("the emulated NPU run computed with NPU numerics in the graph (float16 Cube ops and/or injected "
                 "faults): its losses and updated weights differ from a pure fp32 run of the same step, and its "
                 "golden tensors must come from a separate golden run")
MAX_FILE_NAME_BYTES = 255
FP16_MAX = float(np.finfo(np.float16).max)
_FIRST_TASK_ID = 2  # GE numbers tasks per stream; low ids go to its own bookkeeping tasks


class EmulatedNpu(object):
    """The emulated GE backend. One instance serves one training run."""

    name = "emulated"
    #: The backend protocol (see :mod:`npu_dump_hook.backends`): files are written in this process
    #: from the capture of each dumped step, so nothing is still landing at collection time.
    captures = True
    settles = False

    def __init__(self, emulate_precision: str = "fp32", ffts_names: bool = False, model_id: int = 1,
                 profile: str = "exact", faults: Optional[Mapping[str, str]] = None) -> None:
        if emulate_precision not in PRECISIONS:
            raise OptionError("emulate_precision", emulate_precision, "must be one of " + "|".join(PRECISIONS))
        if isinstance(model_id, bool) or not isinstance(model_id, int) or model_id < 0:
            raise OptionError("model_id", model_id, "must be a non-negative int")
        if profile not in PROFILES:
            raise OptionError("profile", profile, "must be one of " + "|".join(PROFILES))
        if profile == "ascend" and emulate_precision != "fp32":
            raise OptionError("emulate_precision", emulate_precision, 'applies to profile="exact" only: the ascend '
                              "profile computes float16 in the graph (numerics.FP16_OP_TYPES)")
        if faults is not None and not isinstance(faults, Mapping):
            raise OptionError("faults", faults, 'must be a mapping {"op name": "scale=1.05" | ...}')
        self.emulate_precision = emulate_precision
        self.ffts_names = ffts_names
        self.model_id = model_id
        self.profile = profile
        parsed = [numerics.parse_fault(name, spec) for name, spec in (faults or {}).items()]
        #: ``{op name: canonical spec}`` of the injected kernel faults.
        self.faults = {fault.op: fault.spec for fault in parsed}  # type: Dict[str, str]
        #: False when this emulator alters the step's numerics (profile "ascend" or any fault): the
        #: hook must then take no golden capture in this run (the golden comes from a golden run).
        self.golden_in_run = profile == "exact" and not self.faults
        self.plan = None  # type: Any
        self.options = None  # type: Optional[DumpOptions]
        self.device_id = 0
        self.graph_file = None  # type: Optional[str]
        self.graph_name = None  # type: Optional[str]
        self.time_dir = None  # type: Optional[str]
        self._tf_graph = None  # type: Any
        #: The Build graph, built once: by the size estimate before the dumped step or by write_step.
        self.shared_build = npu_graph.SharedBuild()
        self._dumped_iterations = 0
        self._task_ids = {}  # type: Dict[str, int]
        self._name_prefixes = {}  # type: Dict[Tuple[str, str], str]
        self._last_debug_time = 0  # each Opdebug record gets its own timestamp (its own file)
        self._placed = set()  # type: set
        self.report = {"backend": self.name, "emulate_precision": emulate_precision, "ffts_names": ffts_names,
                       "profile": profile, "faults": dict(self.faults), "golden_in_run": self.golden_in_run,
                       "steps": [], "skipped": []}  # type: Dict[str, Any]

    # -- lifecycle (called by the hook, see npu_dump_hook.backends) ---------------------
    def begin(self, tf_graph: Any, options: DumpOptions, device_id: int) -> None:
        """Keep the graph; with profile "ascend" or faults, rewrite it to compute with NPU numerics
        (:func:`.numerics.apply`; the graph must not be finalized yet)."""
        self._tf_graph = tf_graph
        self.options = options
        self.device_id = device_id
        if self.profile == "ascend" or self.faults:
            self.plan = numerics.apply(tf_graph, fp16=self.profile == "ascend", faults=self.faults)
            self.report["numerics"] = self.plan.report
            self.report["note"] = NUMERICS_NOTE
            logger.info("emulated NPU (%s): %s", self.profile, NUMERICS_NOTE)

    def session_started(self) -> None:
        """GE names the dump time folder when the session loads the model (one per second)."""
        self.time_dir = _claim_time_dir(self.options.dump_path if self.options and self.options.enabled else None)

    def step_time(self, default_us: int) -> int:
        """The time (µs) a dumped step's file timestamps start from: in a multi-rank run the
        earliest collective completion since the last step, the same on every rank
        (:func:`.hccl.agreed_step_time`), so the ranks' dump timestamps share one clock."""
        return hccl.agreed_step_time(default_us)

    def write_step(self, capture: Any, step: int) -> Dict[str, Any]:
        """Write the Build graph (first time) and the dump files of one captured step."""
        options = self.options
        if options is None:
            raise BackendError("EmulatedNpu.write_step called before begin()")
        if self.time_dir is None:
            self.session_started()
        with npu_graph.cyclic_gc_paused():
            ge_ops = self.shared_build.nodes(capture, self.plan, self.profile == "ascend", self._is_training)
            if self.graph_file is None:
                self._write_graph(ge_ops)
        data_index = step if options.dump_step is not None else self._dumped_iterations
        self._dumped_iterations += 1
        step_dir = os.path.join(options.dump_path, self.time_dir, str(self.device_id),
                                names.sanitize(self.graph_name), str(self.model_id), str(data_index))
        self._placed = set()
        try:
            _begin_step(step_dir, self.time_dir)  # before the first file: a killed run leaves it
            with npu_graph.cyclic_gc_paused():
                written = self._write_ops(ge_ops, capture, step_dir)
            _complete_step(step_dir, self.time_dir, self._placed)
        except (OSError, NpuDumpError) as exc:
            _mark_incomplete(step_dir, exc)
            raise
        finally:
            _release_arrays(capture)
        if not written:  # e.g. an overflow check without overflow: GE creates no folder either
            _drop_empty_step(step_dir, os.path.join(options.dump_path, self.time_dir))
        entry = {"step": step, "data_index": data_index, "dir": step_dir if written else None, "files": written}
        self.report["steps"].append(entry)
        logger.info("emulated NPU: step %d -> %d file(s) in %s", step, written, step_dir)
        return entry

    def graph_dirs(self, device_id: int) -> Optional[List[str]]:
        """The folder of the Build graph this emulator wrote (None before it wrote one)."""
        return [os.path.dirname(self.graph_file)] if self.graph_file else None

    def summary(self) -> Dict[str, Any]:
        result = dict(self.report)
        result.update(graph_file=self.graph_file, graph_name=self.graph_name, time_dir=self.time_dir,
                      device_id=self.device_id, model_id=self.model_id)
        return result

    # -- graph ---------------------------------------------------------------------------
    def _is_training(self, op_name: str) -> Optional[bool]:
        """A BatchNorm's ``is_training`` attr (None when unknown), for fusion."""
        op = _find_op(self._tf_graph, op_name) if self._tf_graph is not None else None
        try:
            return bool(op.get_attr("is_training")) if op is not None else None
        except (ValueError, KeyError):
            return None

    def _write_graph(self, ge_ops: Sequence[npu_graph.NpuNode]) -> None:
        self.graph_name = "ge_default_{}_1".format(datetime.datetime.now().strftime("%Y%m%d%H%M%S"))
        folder = os.environ.get("DUMP_GRAPH_PATH") or os.getcwd()
        os.makedirs(folder, exist_ok=True)
        index = _next_graph_index(folder)
        path = os.path.join(folder, "ge_proto_{:08d}_Build.txt".format(index))
        text, handed = graph_forms.text_and_handover(self.graph_name, ge_ops, self.profile == "ascend")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        if handed is not None:  # its JSON form and ops, for the bundle writer (which then need not convert nor scan it)
            ge_handover.note_graph(path, handed[0], handed[1], self.graph_name)
        self.graph_file = path
        self.report["graph"] = npu_graph.graph_report(ge_ops)
        logger.info("emulated NPU: Build graph %s (%s, %d ops)", path, self.graph_name, len(ge_ops))

    # -- dump files ------------------------------------------------------------------------
    def _write_ops(self, nodes: Sequence[npu_graph.NpuNode], capture: Any, step_dir: str) -> int:
        written = 0
        for node in dumped_nodes(nodes, self.options.layers):
            for view in _iterations(node, capture):
                tensors = self._op_tensors(node, view)
                if tensors is None:
                    continue
                inputs, outputs, timestamp = tensors
                if self.options.enable_dump_debug:
                    written += self._write_overflow(node, inputs, outputs, timestamp, step_dir)
                elif self.options.dump_data == "stats":
                    written += self._write_stats(node, inputs, outputs, timestamp, step_dir)
                else:
                    written += self._write_tensors(node, inputs, outputs, timestamp, step_dir)
        return written

    def _op_tensors(self, node: npu_graph.NpuNode, capture: Any) -> Optional[Tuple[list, list, int]]:
        """(inputs, outputs, timestamp) as the dump mode asks, each a list of (NodeTensor,
        CapturedTensor), or None when nothing can be dumped."""
        mode = "all" if self.options.enable_dump_debug else self.options.dump_mode
        by_name = capture.by_name
        outputs, inputs = [], []  # type: List[Tuple[Any, Any]], List[Tuple[Any, Any]]
        missing = []  # type: List[str]
        for tensor in node.outputs:
            captured = _captured(by_name, tensor.value)
            if captured is not None:
                outputs.append((tensor, captured))
            else:
                missing.append(tensor.value.tensor)
        if mode in ("input", "all"):
            for tensor in node.inputs:
                captured = _captured(by_name, tensor.value)
                if captured is not None:
                    inputs.append((tensor, captured))
                else:
                    missing.append(tensor.value.tensor)
        if missing:
            self.report["skipped"].append({"op": node.name, "reason": "tensors not captured: " + ", ".join(missing)})
            if mode != "output" or not outputs:
                return None
        if mode == "input":
            outputs = []
        if not inputs and not outputs:
            return None
        if node.kind == "trans":
            return inputs, outputs, int(max(captured.timestamp_us for _, captured in outputs + inputs))
        return inputs, outputs, int((outputs or inputs)[0][1].timestamp_us)

    def _device_array(self, tensor: Any, captured: Any) -> np.ndarray:
        """The payload of one dumped tensor: the captured array as the device holds it."""
        # The capture's in-memory copy of the file when it kept one (train._capture_memory), else one read
        array = getattr(captured, "in_memory", None)
        array = np.asarray(read_npy(captured.path)) if array is None else array
        if self.profile == "ascend":
            return layout.device_array(array, tensor.value.held)
        array = self._device_precision(array)
        # what ascontiguousarray answers for the common array (itself), without its call; it makes a 0-d array 1-D
        return array if type(array) is np.ndarray and array.ndim and array.flags.c_contiguous else np.ascontiguousarray(array)

    def _device_precision(self, array: np.ndarray) -> np.ndarray:
        """Floating tensors as an NPU in mixed precision holds them (fp16 mode), else unchanged."""
        if self.emulate_precision != "fp16" or array.dtype.kind != "f":
            return array
        with np.errstate(over="ignore"):  # beyond the float16 range becomes inf, as on the device
            return array.astype(np.float16)

    def _file_name(self, op: npu_graph.NpuNode, timestamp: int, stats: bool = False, op_type: Optional[str] = None,
                   op_name: Optional[str] = None) -> Tuple[str, int]:
        task_id = self._task_ids.setdefault(op.name, _FIRST_TASK_ID + len(self._task_ids))
        if not (stats or op_type or op_name or self.ffts_names) and type(timestamp) is int and timestamp >= 0:
            # An op's files differ only in the timestamp: its checked name for timestamp 0, less the 0, once
            prefix = self._name_prefixes.get((op.type, op.name))
            if prefix is None:
                prefix = self._name_prefixes[(op.type, op.name)] = names.format_dump_name(
                    op.type, op.name, task_id, 0, 0)[:-1]
            return prefix + str(timestamp), task_id
        ffts = {}  # type: Dict[str, int]
        if self.ffts_names:
            ffts = {"context_id": 0, "thread_id": 0, "device_id": self.device_id}
        name = names.format_dump_name(op_type or op.type, op_name or op.name, task_id, 0, timestamp,
                                      stats=stats, **ffts)
        return name, task_id

    def _place(self, step_dir: str, name: str) -> str:
        """The path a file goes to; names over 255 bytes become std::hash digits + mapping.csv.
        ``step_dir`` exists: :func:`_begin_step` made it before the step's first file."""
        if len(self._placed) == 2:
            test_pause("dump")  # two files of the step written (test-only, see npu_dump_hook._phases)
        if len(name.encode("utf-8")) <= MAX_FILE_NAME_BYTES:
            self._placed.add(name)
            return _folder_prefix(step_dir) + name  # os.path.join(step_dir, name): a plain name, joined once per step
        hashed = mapping_csv.std_hash_name(name)
        mapping_csv.append_mapping(os.path.join(step_dir, "mapping.csv"), hashed, name)
        self._placed.update((hashed, "mapping.csv"))
        return os.path.join(step_dir, hashed)

    def _write_tensors(self, node: npu_graph.NpuNode, inputs: list, outputs: list, timestamp: int,
                       step_dir: str) -> int:
        name, _ = self._file_name(node, timestamp)
        device, ascend = self._device_array, self.profile == "ascend"
        out = [dump_tensor(t, device(t, c), tuple(c.shape), True, ascend) for t, c in outputs]
        ins = [dump_tensor(t, device(t, c), tuple(c.shape), False, ascend) for t, c in inputs]
        # In place, no rename per file: the step folder's begin marker covers a write cut short (_begin_step)
        path = self._place(step_dir, name)
        write_dump_file(path, node.name, outputs=out, inputs=ins, dump_time=timestamp, atomic=False)
        note_dump_file(path, ins, out)  # its NaN/Inf counts for the end-of-run checks (no re-read)
        return 1

    def _write_stats(self, node: npu_graph.NpuNode, inputs: list, outputs: list, timestamp: int,
                     step_dir: str) -> int:
        rows = []
        for direction, group in (("Input", inputs), ("Output", outputs)):
            for index, (tensor, captured) in enumerate(group):
                array = self._device_array(tensor, captured)
                fmt = tensor.value.held.format if self.profile == "ascend" else "ND"
                rows.append(stats_csv.StatsRow(
                    direction=direction, index=index, data_size=int(array.nbytes),
                    data_type=ge_model.ge_dtype(array.dtype.name), format=fmt, shape=tuple(array.shape),
                    **stats_csv.compute_stats(np.asarray(array))))
        name, _ = self._file_name(node, timestamp, stats=True)
        stats_csv.write_stats_csv(self._place(step_dir, name), rows)
        return 1

    def _overflows(self, node: npu_graph.NpuNode, outputs: list) -> bool:
        for tensor, captured in outputs:
            array = self._device_array(tensor, captured)
            if array.dtype.kind != "f":
                continue
            if not np.all(np.isfinite(array)):
                return True
            if self.emulate_precision == "fp16" and array.size and float(np.max(np.abs(array))) > FP16_MAX:
                return True
        return False

    def _write_overflow(self, node: npu_graph.NpuNode, inputs: list, outputs: list, timestamp: int,
                        step_dir: str) -> int:
        if not self._overflows(node, outputs):
            return 0
        written = self._write_tensors(node, inputs, outputs, timestamp, step_dir)
        task_id = self._task_ids[node.name]
        record = opdebug.OpdebugRecord(
            layout=opdebug.LAYOUT_NEW, version=0, valid=1, acc_type=0, data_len=88,
            entries=(opdebug.OverflowEntry(unit="AIC", values=(
                ("model_id", self.model_id), ("stream_id", 0), ("task_id", task_id), ("task_type", 0),
                ("context_id", 0), ("thread_id", 0), ("pc_start", 0), ("para_base", 0), ("core_id", 0),
                ("block_id", 0)), status=(0x80,)),),
        )
        # The Opdebug task id is not the op's (docs/reference/npu-bridge-dump-api.md §6). Ops that
        # share a capture timestamp (a fused chain, an inserted Cast) still get one record each, in
        # execution order: the record's time is after its op's and after the previous record's.
        debug_task = _FIRST_TASK_ID - 1
        debug_time = self._last_debug_time = max(timestamp + 1, self._last_debug_time + 1)
        debug_name = names.format_dump_name("Opdebug", "Node_OpDebug", debug_task, 0, debug_time)
        opdebug.write_opdebug_file(self._place(step_dir, debug_name), record, dump_time=debug_time)
        return written + 1


class _Iteration(object):
    """The capture as one iteration of a TF 1.x loop body sees it: ``by_name`` gives the loop-body
    tensors' values of iteration ``k`` and every other tensor's one value."""

    def __init__(self, capture: Any, iteration: int) -> None:
        self.by_name = _IterationNames(capture.by_name, capture.by_iteration, iteration)


class _IterationNames(object):
    def __init__(self, single: Mapping[str, Any], per_iteration: Mapping[str, List[Any]], iteration: int) -> None:
        self.single, self.per_iteration, self.iteration = single, per_iteration, iteration

    def get(self, name: str, default: Any = None) -> Any:
        values = self.per_iteration.get(name)
        if values is not None:
            return values[self.iteration] if self.iteration < len(values) else default
        return self.single.get(name, default)


def _iterations(node: npu_graph.NpuNode, capture: Any) -> List[Any]:
    """The views one node is dumped from: the capture itself, or one per iteration when the node
    sits in a TF 1.x loop body (GE dumps a loop-body op at every iteration: same name and task id,
    a later timestamp each time)."""
    per_iteration = getattr(capture, "by_iteration", None)
    if not per_iteration:  # no loop body captured (a static graph): the capture itself
        return [capture]
    counts = [len(per_iteration.get(t.value.tensor) or ()) for t in list(node.outputs) + list(node.inputs)]
    count = max(counts) if counts else 0
    if not count:
        return [capture]
    return [_Iteration(capture, k) for k in range(count)]


def _chosen(node: npu_graph.NpuNode, layers: Sequence[str]) -> bool:
    """A node with a task that ``dump_layer`` selects (every task when ``layers`` is empty)."""
    return not node.no_task and is_selected(node.name, node.original_names, layers)


def dumped_nodes(nodes: Sequence[npu_graph.NpuNode], layers: Sequence[str]) -> List[npu_graph.NpuNode]:
    """The Build-graph nodes a dump writes files for, in order: the tasks ``dump_layer`` selects and,
    with ``dump_layer``, the Data nodes feeding a chosen one (the adapter documents that their info
    is dumped too: docs/reference/npu-bridge-dump-api.md, ``dump_layer``). The emulator writes
    these; the size estimate (:mod:`npu_dump_hook.train._sizing_graph`) measures them."""
    if not layers:  # every task (is_selected's answer for every name), no Data inputs to add
        return [node for node in nodes if not node.no_task]
    data_inputs = set()  # type: Set[str]
    data = {n.name for n in nodes if n.type == "Data"}
    for node in nodes:
        if _chosen(node, layers):
            data_inputs.update(name for name in (t.source.rpartition(":")[0] for t in node.inputs if t.source)
                               if name in data)
    return [node for node in nodes if _chosen(node, layers) or node.name in data_inputs]


def dump_tensor(tensor: Any, array: Any, original_shape: Tuple[int, ...], output: bool, ascend: bool) -> DumpTensor:
    """The dump file entry of one node tensor (:class:`~.npu_graph.NodeTensor`) whose device payload is
    ``array``; the dump size estimate (:mod:`npu_dump_hook.train.sizing`) sizes headers with it."""
    held = tensor.value.held
    origin = tensor.origin if output else None
    return DumpTensor(array, format=held.format if ascend else "ND", original_shape=original_shape,
                      original_name=origin[0] if origin else None,
                      original_output_index=origin[1] if origin else 0,
                      original_data_type=_origin_data_type(tensor.tf_dtype),
                      original_format=held.origin_format if ascend else None)


@functools.lru_cache(maxsize=None)
def _origin_data_type(tf_dtype: str) -> int:
    """GE's origin data type number of a TF dtype name (:func:`dump_tensor`: once per dtype)."""
    return ge_origin_data_type(ge_model.ge_dtype(tf_dtype))


def _release_arrays(capture: Any) -> None:
    """The step's dump is written: drop the capture's in-memory copies of its tensors (the files stay)."""
    release = getattr(capture, "release_arrays", None)
    if release is not None:
        release()


def _captured(by_name: Mapping[str, Any], value: Any) -> Any:
    """The captured tensor a dumped value comes from (its fallback when the NPU tensor did not run), or None."""
    captured = by_name.get(value.tensor)
    if captured is None and value.fallback is not None:
        captured = by_name.get(value.fallback)
    return captured


#: ``os.path.join(folder, "")``: a file name appended to it is the file's path in ``folder``.
_folder_prefix = functools.lru_cache(maxsize=8)(lambda folder: os.path.join(folder, ""))


def _find_op(graph: Any, name: str) -> Any:
    try:
        return graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return None


def _next_graph_index(folder: str) -> int:
    """GE's global graph-dump counter, continued past files already in the folder."""
    highest = -1
    for entry in os.listdir(folder):
        parsed = names.parse_graph_file_name(entry)
        if parsed is not None and parsed.index is not None:
            highest = max(highest, parsed.index)
    return highest + 1


#: How many seconds past now a run may name its time folder when earlier ones are taken.
_TIME_DIR_TRIES = 3600


def _claim_time_dir(dump_path: Optional[str]) -> str:
    """The time folder name for this run, created under ``dump_path`` so no other run shares it.

    GE names the folder by the second, so two runs started within one second (two hooks in one
    script, a test suite, concurrent jobs on one ``dump_path``) would write their dump files into
    one step folder, which collection would then bundle as one run. The first free second from
    now on is claimed with an atomic ``mkdir``; without a dump path nothing is claimed."""
    now = datetime.datetime.now().replace(microsecond=0)
    if not dump_path:
        return names.format_time_dir(now)
    os.makedirs(dump_path, exist_ok=True)
    for ahead in range(_TIME_DIR_TRIES):
        name = names.format_time_dir(now + datetime.timedelta(seconds=ahead))
        try:
            os.mkdir(os.path.join(dump_path, name))
        except FileExistsError:
            continue
        return name
    raise BackendError("emulated NPU: every time folder of the next {} s under {} is taken".format(
        _TIME_DIR_TRIES, dump_path))


def _writer(time_dir: Optional[str]) -> Dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "time_dir": time_dir}


def _begin_step(step_dir: str, time_dir: Optional[str]) -> None:
    """The begin marker (:data:`INCOMPLETE_STEP_MARKER`), before the step's first file: a run
    interrupted or killed while writing leaves it, and collection refuses the folder."""
    os.makedirs(step_dir, exist_ok=True)
    text = "dump of this step began (pid {pid} on {host}, time folder {time_dir}) and never completed: the " \
           "process was interrupted or killed while writing it\n".format(**_writer(time_dir))
    with open(os.path.join(step_dir, INCOMPLETE_STEP_MARKER), "w") as handle:
        handle.write(text)


def _complete_step(step_dir: str, time_dir: Optional[str], placed: Any) -> None:
    """The completion mark (:data:`COMPLETE_STEP_MARKER`: the writer and every file it wrote),
    then the begin marker removed: a folder with both was never completed."""
    mark = os.path.join(step_dir, COMPLETE_STEP_MARKER)
    with open(mark + ".tmp", "w") as handle:
        handle.write(json.dumps({"writer": _writer(time_dir), "files": sorted(placed)}))  # json.dump: a write per piece
    os.replace(mark + ".tmp", mark)
    os.unlink(os.path.join(step_dir, INCOMPLETE_STEP_MARKER))


def _drop_empty_step(step_dir: str, stop: str) -> None:
    """Remove the completion mark of a step that wrote no file and the folders it made (up to ``stop``)."""
    try:
        os.unlink(os.path.join(step_dir, COMPLETE_STEP_MARKER))
        folder = step_dir
        while os.path.abspath(folder) != os.path.abspath(stop) and not os.listdir(folder):
            os.rmdir(folder)
            folder = os.path.dirname(folder)
    except OSError as exc:  # best effort: an empty marked folder is refused by nothing, just left
        logger.debug("emulated NPU: could not remove the empty step folder %s: %s", step_dir, exc)


def _mark_incomplete(step_dir: str, exc: BaseException) -> None:
    """Leave :data:`INCOMPLETE_STEP_MARKER` in a step folder whose files stopped part-way.

    Best effort: the marker is tiny (on a full disk it usually still fits in the folder's
    existing blocks); when even it cannot be written the error that stopped the step is
    still raised by the caller.
    """
    try:
        os.makedirs(step_dir, exist_ok=True)
        with open(os.path.join(step_dir, INCOMPLETE_STEP_MARKER), "w") as handle:
            handle.write("{}: {}\n".format(type(exc).__name__, exc))
    except OSError as marker_error:
        logger.error("emulated NPU: could not mark %s as incomplete: %s", step_dir, marker_error)
