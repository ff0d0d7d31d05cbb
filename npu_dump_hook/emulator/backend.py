"""``EmulatedNpu``: writes what GE would write for the dumped iterations, without an NPU.

Input: the tensors the capture engine (:mod:`npu_dump_hook._capture`) streamed to
disk for one executed step. Output, exactly as on an Ascend device::

    {DUMP_GRAPH_PATH or cwd}/ge_proto_{index:08d}_Build.txt      graph { name: "ge_default_{time}_{n}" ... }
    {dump_path}/{YYYYMMDDHHMMSS}/{device_id}/{model_name}/{model_id}/{data_index}/
        {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}    v2 dump files (dump_data=tensor)
        {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.csv  stats (dump_data=stats)
        Opdebug.Node_OpDebug.{task_id}.{stream_id}.{timestamp}  overflow records (enable_dump_debug)
        {digits} + mapping.csv                                   names longer than 255 bytes

What the options select: ``dump_mode`` (input/output/all), ``dump_layer`` (only the
named ops), ``dump_step`` (``data_index`` is the step when given, else 0, 1, ... per
dumped iteration), ``dump_data=stats`` (one CSV per op, no binary files) and
``enable_dump_debug`` (only ops with an overflowing output: Inf/NaN, or beyond the
float16 range with ``emulate_precision="fp16"``; the folder is not created when nothing
overflows, as on the device).

``emulate_precision="fp16"`` rounds floating tensors through float16 and dumps them
as DT_FLOAT16, as an NPU running mixed precision would show. ``perturb`` (test-only)
scales the outputs of named ops so comparisons have an error to find.
Not emulated: in-place variable updates (``ResourceApply*``, ``Assign*VariableOp``) take
resource handles, which hold no tensor on the CPU, so they get no dump file; they are
listed in the report's ``skipped`` and show up as missing in a bundle's coverage.
Everything the emulator writes is recorded in :attr:`EmulatedNpu.report`, whose
``backend`` is ``"emulated"``, so emulated data is never mistaken for NPU data.
"""
import datetime
import logging
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..constants import INCOMPLETE_STEP_MARKER
from ..errors import BackendError, NpuDumpError, OptionError
from ..formats import mapping_csv, names, opdebug, stats_csv
from ..formats.dump_file import DumpTensor, write_dump_file
from ..options import DumpOptions
from . import ge_model

__all__ = ["EmulatedNpu", "PRECISIONS", "MAX_FILE_NAME_BYTES"]

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16")
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
                 perturb: Optional[Mapping[str, float]] = None) -> None:
        if emulate_precision not in PRECISIONS:
            raise OptionError("emulate_precision", emulate_precision, "must be one of " + "|".join(PRECISIONS))
        if isinstance(model_id, bool) or not isinstance(model_id, int) or model_id < 0:
            raise OptionError("model_id", model_id, "must be a non-negative int")
        self.emulate_precision = emulate_precision
        self.ffts_names = ffts_names
        self.model_id = model_id
        self.perturb = dict(perturb or {})
        self.options = None  # type: Optional[DumpOptions]
        self.device_id = 0
        self.graph_file = None  # type: Optional[str]
        self.graph_name = None  # type: Optional[str]
        self.time_dir = None  # type: Optional[str]
        self._tf_graph = None  # type: Any
        self._dumped_iterations = 0
        self._task_ids = {}  # type: Dict[str, int]
        self.report = {"backend": self.name, "emulate_precision": emulate_precision, "ffts_names": ffts_names,
                       "steps": [], "skipped": []}  # type: Dict[str, Any]

    # -- lifecycle (called by the hook, see npu_dump_hook.backends) ---------------------
    def begin(self, tf_graph: Any, options: DumpOptions, device_id: int) -> None:
        self._tf_graph = tf_graph
        self.options = options
        self.device_id = device_id
        unknown = [name for name in self.perturb if _find_op(tf_graph, name) is None]
        if unknown:
            raise OptionError("perturb", sorted(unknown), "names ops that are not in the graph")

    def session_started(self) -> None:
        """GE names the dump time folder when the session loads the model."""
        self.time_dir = names.format_time_dir(datetime.datetime.now())

    def write_step(self, capture: Any, step: int) -> Dict[str, Any]:
        """Write the Build graph (first time) and the dump files of one captured step."""
        options = self.options
        if options is None:
            raise BackendError("EmulatedNpu.write_step called before begin()")
        if self.time_dir is None:
            self.session_started()
        ge_ops = [self._ge_op(op, capture) for op in capture.executed_ops]
        if self.graph_file is None:
            self._write_graph(ge_ops)
        data_index = step if options.dump_step is not None else self._dumped_iterations
        self._dumped_iterations += 1
        step_dir = os.path.join(options.dump_path, self.time_dir, str(self.device_id),
                                names.sanitize(self.graph_name), str(self.model_id), str(data_index))
        try:
            written = self._write_ops(ge_ops, capture, step_dir)
        except (OSError, NpuDumpError) as exc:
            _mark_incomplete(step_dir, exc)
            raise
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
    def _ge_op(self, executed: Any, capture: Any) -> ge_model.GeOp:
        dtypes, shapes = [], []  # type: List[str], List[Optional[Tuple[int, ...]]]
        by_name = capture.by_name
        for index, dtype in enumerate(executed.output_dtypes):
            tensor = by_name.get("{}:{}".format(executed.name, index))
            dtypes.append(dtype)
            shapes.append(tuple(tensor.shape) if tensor is not None else executed.output_shapes[index])
        return ge_model.GeOp(executed.name, executed.type, executed.inputs, executed.control_inputs, dtypes, shapes)

    def _write_graph(self, ge_ops: Sequence[ge_model.GeOp]) -> None:
        self.graph_name = "ge_default_{}_1".format(datetime.datetime.now().strftime("%Y%m%d%H%M%S"))
        folder = os.environ.get("DUMP_GRAPH_PATH") or os.getcwd()
        os.makedirs(folder, exist_ok=True)
        index = _next_graph_index(folder)
        path = os.path.join(folder, "ge_proto_{:08d}_Build.txt".format(index))
        text = ge_model.model_text(ge_model.build_model(self.graph_name, ge_ops))
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        self.graph_file = path
        logger.info("emulated NPU: Build graph %s (%s, %d ops)", path, self.graph_name, len(ge_ops))

    # -- dump files ------------------------------------------------------------------------
    def _selected(self, op: ge_model.GeOp) -> bool:
        if op.no_task:
            return False
        layers = self.options.layers
        return not layers or op.name in layers

    def _write_ops(self, ge_ops: Sequence[ge_model.GeOp], capture: Any, step_dir: str) -> int:
        written = 0
        for op in ge_ops:
            if not self._selected(op):
                continue
            tensors = self._op_tensors(op, capture)
            if tensors is None:
                continue
            inputs, outputs, timestamp = tensors
            if self.options.enable_dump_debug:
                written += self._write_overflow(op, inputs, outputs, timestamp, step_dir)
            elif self.options.dump_data == "stats":
                written += self._write_stats(op, inputs, outputs, timestamp, step_dir)
            else:
                written += self._write_tensors(op, inputs, outputs, timestamp, step_dir)
        return written

    def _op_tensors(self, op: ge_model.GeOp, capture: Any) -> Optional[Tuple[list, list, int]]:
        """(inputs, outputs, timestamp) as the dump mode asks, or None when nothing can be dumped."""
        mode = "all" if self.options.enable_dump_debug else self.options.dump_mode
        by_name = capture.by_name
        outputs, inputs = [], []  # type: List[Tuple[str, Any]], List[Tuple[str, Any]]
        missing = []  # type: List[str]
        for index in range(len(op.output_dtypes)):
            name = "{}:{}".format(op.name, index)
            if name in by_name:
                outputs.append((name, by_name[name]))
            else:
                missing.append(name)
        if mode in ("input", "all"):
            for name in op.inputs:
                if name in by_name:
                    inputs.append((name, by_name[name]))
                else:
                    missing.append(name)
        if missing:
            self.report["skipped"].append({"op": op.name, "reason": "tensors not captured: " + ", ".join(missing)})
            if mode != "output" or not outputs:
                return None
        if mode == "input":
            outputs = []
        if not inputs and not outputs:
            return None
        first = (outputs or inputs)[0][1]
        return inputs, outputs, int(first.timestamp_us)

    def _device_tensor(self, capture_tensor: Any, array: np.ndarray, output: bool) -> DumpTensor:
        return DumpTensor(np.ascontiguousarray(self._device_precision(array)),
                          original_name=capture_tensor.op_name if output else None,
                          original_output_index=capture_tensor.output_index)

    def _device_precision(self, array: np.ndarray) -> np.ndarray:
        """Floating tensors as an NPU in mixed precision holds them (fp16 mode), else unchanged."""
        if self.emulate_precision != "fp16" or array.dtype.kind != "f":
            return array
        with np.errstate(over="ignore"):  # beyond the float16 range becomes inf, as on the device
            return array.astype(np.float16)

    def _array(self, op: ge_model.GeOp, capture_tensor: Any, output: bool) -> np.ndarray:
        array = np.asarray(np.load(capture_tensor.path, mmap_mode="r"))
        scale = self.perturb.get(op.name) if output else None
        if scale is not None and array.dtype.kind == "f":
            array = (array * np.asarray(scale, dtype=array.dtype)).astype(array.dtype)
        return array

    def _file_name(self, op: ge_model.GeOp, timestamp: int, stats: bool = False, op_type: Optional[str] = None,
                   op_name: Optional[str] = None) -> Tuple[str, int]:
        task_id = self._task_ids.setdefault(op.name, _FIRST_TASK_ID + len(self._task_ids))
        ffts = {}  # type: Dict[str, int]
        if self.ffts_names:
            ffts = {"context_id": 0, "thread_id": 0, "device_id": self.device_id}
        name = names.format_dump_name(op_type or op.type, op_name or op.name, task_id, 0, timestamp,
                                      stats=stats, **ffts)
        return name, task_id

    def _place(self, step_dir: str, name: str) -> str:
        """The path a file goes to; names over 255 bytes become std::hash digits + mapping.csv."""
        os.makedirs(step_dir, exist_ok=True)
        if len(name.encode("utf-8")) <= MAX_FILE_NAME_BYTES:
            return os.path.join(step_dir, name)
        hashed = mapping_csv.std_hash_name(name)
        mapping_csv.append_mapping(os.path.join(step_dir, "mapping.csv"), hashed, name)
        return os.path.join(step_dir, hashed)

    def _write_tensors(self, op: ge_model.GeOp, inputs: list, outputs: list, timestamp: int, step_dir: str) -> int:
        name, _ = self._file_name(op, timestamp)
        out = [self._device_tensor(t, self._array(op, t, True), True) for _, t in outputs]
        ins = [self._device_tensor(t, self._array(op, t, False), False) for _, t in inputs]
        write_dump_file(self._place(step_dir, name), op.name, outputs=out, inputs=ins, dump_time=timestamp)
        return 1

    def _write_stats(self, op: ge_model.GeOp, inputs: list, outputs: list, timestamp: int, step_dir: str) -> int:
        rows = []
        for direction, group, is_output in (("Input", inputs, False), ("Output", outputs, True)):
            for index, (_, tensor) in enumerate(group):
                array = self._array(op, tensor, is_output)
                array = self._device_precision(array)
                rows.append(stats_csv.StatsRow(
                    direction=direction, index=index, data_size=int(array.nbytes),
                    data_type=ge_model.ge_dtype(array.dtype.name), format="ND", shape=tuple(array.shape),
                    **stats_csv.compute_stats(np.asarray(array))))
        name, _ = self._file_name(op, timestamp, stats=True)
        stats_csv.write_stats_csv(self._place(step_dir, name), rows)
        return 1

    def _overflows(self, op: ge_model.GeOp, outputs: list) -> bool:
        for _, tensor in outputs:
            array = self._array(op, tensor, True)
            if array.dtype.kind != "f":
                continue
            if not np.all(np.isfinite(array)):
                return True
            if self.emulate_precision == "fp16" and array.size and float(np.max(np.abs(array))) > FP16_MAX:
                return True
        return False

    def _write_overflow(self, op: ge_model.GeOp, inputs: list, outputs: list, timestamp: int, step_dir: str) -> int:
        if not self._overflows(op, outputs):
            return 0
        written = self._write_tensors(op, inputs, outputs, timestamp, step_dir)
        task_id = self._task_ids[op.name]
        record = opdebug.OpdebugRecord(
            layout=opdebug.LAYOUT_NEW, version=0, valid=1, acc_type=0, data_len=88,
            entries=(opdebug.OverflowEntry(unit="AIC", values=(
                ("model_id", self.model_id), ("stream_id", 0), ("task_id", task_id), ("task_type", 0),
                ("context_id", 0), ("thread_id", 0), ("pc_start", 0), ("para_base", 0), ("core_id", 0),
                ("block_id", 0)), status=(0x80,)),),
        )
        debug_task = _FIRST_TASK_ID - 1  # the Opdebug task id is not the op's (reference §6)
        debug_name = names.format_dump_name("Opdebug", "Node_OpDebug", debug_task, 0, timestamp + 1)
        opdebug.write_opdebug_file(self._place(step_dir, debug_name), record, dump_time=timestamp + 1)
        return written + 1


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
