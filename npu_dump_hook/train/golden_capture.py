"""Reference (golden) capture: the CPU/GPU tensors of one step as msaccucmp-ready ``.npy`` files.

Layout of the golden folder (docs/reference/ascend-dump-formats.md §6)::

    {golden}/{op name with / and . -> _}.{output_index}.{16-digit µs timestamp}.npy
    {golden}/golden_manifest.json

Each ``.npy`` holds one output tensor of one op the step executed, in TF layout and dtype
(bfloat16 widened to float32), and its name matches msaccucmp's ``NUMPY_DUMP_PATTERN``
``^([\\.A-Za-z0-9_-]+\\.[0-9]+)\\.[0-9]{1,255}\\.npy$``: group 1 is the key msaccucmp looks
NPU outputs up by. Timestamps grow with the op's execution order, so when two op names
sanitize to the same key the later op's file is the one msaccucmp uses (it sorts by
timestamp); such collisions are listed in the manifest. An op name with a character that
pattern rejects (TF allows ``>`` and ``\\``) is written with that character replaced by ``_``
and listed as ``renamed``. msaccucmp skips the manifest with a warning (it is not an .npy).

``golden_manifest.json``: ``{"schema": "npu_dump_hook/golden@1", "files": [{"file", "tensor",
"op_type", "dtype", "shape", "order", "timestamp"[, "iteration"]}], "skipped": [{"tensor", "op_type",
"reason"}], "renamed": [...], "key_collisions": {key: [tensor, ...]}}``.

Memory: at most ``memory_budget`` bytes of tensors (default 256 MiB) are held at once; a step
whose tensors need more, or whose sizes are not static, streams each tensor to disk as it is
computed. The capture itself (what runs, memory, what is skipped and why) is
:mod:`npu_dump_hook.train.capture`; :class:`ReferenceCapture` wires it into a SessionRunHook.

Also importable as ``npu_dump_hook.reference`` (the same module object).
"""
import json
import json.encoder
import logging
import os
import time
from typing import Any, Dict, List, Optional

from .. import _tf
from .._golden_marker import begin_golden, golden_incomplete
from ..bundle import GOLDEN_MANIFEST
from ..constants import INCOMPLETE_STEP_MARKER
from ..formats.names import golden_npy_name as golden_file_name
from .capture import TensorCapture
from .collector import CollectorPause

__all__ = ["MANIFEST_NAME", "MANIFEST_SCHEMA", "golden_file_name", "golden_report", "ReferenceCapture",
           "begin_golden", "golden_incomplete"]

logger = logging.getLogger("npu_dump_hook.reference")  # its name before it moved into train/

MANIFEST_NAME = GOLDEN_MANIFEST  # named once, by the bundle format
MANIFEST_SCHEMA = "npu_dump_hook/golden@1"


def _flat(op_name: str) -> str:
    return op_name.replace("/", "_").replace(".", "_")


def _npy_key(base: str) -> str:
    """msaccucmp's key of a file :func:`golden_file_name` named (checked there against its pattern):
    the name less its timestamp and ``.npy``, as :func:`~npu_dump_hook.formats.names.parse_npy_name`
    gives it, without parsing again a name made a moment ago (218 files: a few ms)."""
    return base[:-len(".npy")].rsplit(".", 1)[0]


def golden_report(result: Any, golden_dir: str) -> Dict[str, Any]:
    """Write ``golden_manifest.json`` for a capture whose ``.npy`` files are in ``golden_dir``,
    then remove the begin marker (:func:`begin_golden`).

    Returns the run-summary entry: folder, counts, the manifest path and the skip reasons.
    """
    os.makedirs(golden_dir, exist_ok=True)
    files, renamed = _EncodedList(), []  # type: List[str], List[Dict[str, str]]
    keys = {}  # type: Dict[str, List[str]]
    for tensor in result.tensors:
        base = os.path.basename(tensor.path)
        name = tensor.tensor_name
        files.append(_file_entry_text(tensor, base, name))
        if tensor.iteration:
            continue  # a TF 1.x loop body: one file per iteration, the key counted once (iteration 0)
        key = _npy_key(base)
        if key[:key.rindex(".")] != _flat(tensor.op_name):
            renamed.append({"tensor": name, "file": base})
        keys.setdefault(key, []).append(name)
    collisions = {key: tensors for key, tensors in keys.items() if len(tensors) > 1}
    skipped = [{"tensor": s.tensor_name, "op_type": s.op_type, "reason": s.reason} for s in result.skipped]
    manifest = {"schema": MANIFEST_SCHEMA, "files": files, "skipped": skipped, "renamed": renamed,
                "key_collisions": collisions}
    path = os.path.join(golden_dir, MANIFEST_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(_manifest_text(manifest))
    os.replace(tmp, path)
    marker = os.path.join(golden_dir, INCOMPLETE_STEP_MARKER)
    if os.path.lexists(marker):
        os.unlink(marker)
    reasons = {}  # type: Dict[str, int]
    for entry in skipped:
        reasons[entry["reason"]] = reasons.get(entry["reason"], 0) + 1
    if collisions:
        logger.warning("reference: %d msaccucmp key(s) shared by several ops; the latest op's file wins: %s",
                       len(collisions), ", ".join(sorted(collisions)[:5]))
    logger.info("reference: %d tensor(s) in %s, %d skipped", len(files), golden_dir, len(skipped))
    return {"dir": golden_dir, "manifest": path, "files": len(files), "skipped": len(skipped),
            "skip_reasons": reasons, "renamed": len(renamed), "key_collisions": len(collisions)}


class _EncodedList(list):
    """Manifest entries already encoded as JSON text, one a line (:func:`_file_entry_text`)."""


#: A file entry's line, as ``json.dumps`` writes that dict (its keys in this order, ``", "`` and ``": "``).
_FILE_ENTRY = '{"file": %s, "tensor": %s, "op_type": %s, "dtype": %s, "shape": [%s], "order": %d, "timestamp": %d%s}'
_INT_ONLY = frozenset((int,))
_quoted = json.encoder.encode_basestring_ascii  # json.dumps's string encoder (ensure_ascii=True): C where built


def _file_entry_text(tensor: Any, base: str, name: str) -> str:
    """``json.dumps`` of the manifest entry of ``tensor`` (file ``base``, tensor ``name``), the same
    text, made from a template: one json.dumps per entry was most of the manifest's cost (2,000
    files). Fields of other types than these plain ``str``/``int`` go through ``json.dumps``."""
    shape, iteration, order, stamp = tensor.shape, tensor.iteration, tensor.order, tensor.timestamp_us
    if (type(tensor.op_type) is str and type(tensor.dtype) is str and type(base) is str  # noqa: E721
            and type(name) is str and type(order) is int and type(stamp) is int  # noqa: E721 - no bool, numpy int
            and _INT_ONLY.issuperset(map(type, shape)) and (iteration is None or type(iteration) is int)):  # noqa: E721
        return _FILE_ENTRY % (_quoted(base), _quoted(name), _quoted(tensor.op_type), _quoted(tensor.dtype),
                              ", ".join(map(str, shape)), order, stamp,
                              "" if iteration is None else ', "iteration": %d' % iteration)
    entry = {"file": base, "tensor": name, "op_type": tensor.op_type, "dtype": tensor.dtype, "shape": list(shape),
             "order": tensor.order, "timestamp": tensor.timestamp_us}  # type: Dict[str, Any]
    if iteration is not None:
        entry["iteration"] = iteration
    return json.dumps(entry)


def _manifest_text(manifest: Dict[str, Any]) -> str:
    """The manifest as JSON, one file or skipped entry a line (readable, diffable). Each line is
    encoded by json's C encoder (or, for the file entries, a template giving its text): ``indent=``
    would switch to the pure-Python one, which cost more than writing the step's .npy files on a
    small model."""
    parts = []
    for key, value in manifest.items():
        if isinstance(value, _EncodedList) and value:
            body = "[\n  " + ",\n  ".join(value) + "\n ]"
        elif isinstance(value, list) and value:
            body = "[\n  " + ",\n  ".join(json.dumps(item) for item in value) + "\n ]"
        else:
            body = json.dumps(value)
        parts.append(" {}: {}".format(json.dumps(key), body))
    return "{\n" + ",\n".join(parts) + "\n}\n"


class ReferenceCapture(object):
    """Golden capture of one step for a SessionRunHook: call from its begin/before_run/after_run
    (and, optionally, after_create_session: the variable read before the step is then cheaper).

    ``step`` is the 0-based local step to capture (counted by :meth:`before_run` calls);
    ``memory_budget`` (bytes) is :class:`~npu_dump_hook.train.capture.TensorCapture`'s: steps whose
    tensors fit are fetched with the step, larger ones stream to disk (default 256 MiB, or
    ``$NPU_DUMP_HOOK_CAPTURE_BUDGET``).
    After the captured step, :attr:`result` is the :class:`~npu_dump_hook.train.capture.CaptureResult`
    and :attr:`report` the :func:`golden_report` summary.

    Python's cyclic garbage collector is paused from the captured step's :meth:`before_run` to the
    end of its :meth:`after_run` and then restored as the caller had it
    (:mod:`npu_dump_hook.train.collector`: the full collection of the just-built graph that the
    capture's allocations would trigger inside the step runs after it instead, in the next step's
    allocations). A step that raised before :meth:`after_run` gets the collector back at the next
    :meth:`before_run` or at :meth:`end`.
    """

    def __init__(self, golden_dir: str, scratch_dir: Optional[str] = None, step: int = 0,
                 memory_budget: Optional[int] = None) -> None:
        self.golden_dir = os.path.abspath(golden_dir)
        self.memory_budget = memory_budget
        self.scratch_dir = os.path.abspath(scratch_dir or os.path.join(self.golden_dir, os.pardir, ".capture"))
        self.step = step
        self.result = None  # type: Any
        self.report = None  # type: Optional[Dict[str, Any]]
        self._capture = None  # type: Any
        self._steps = 0
        self._active = False
        self._collector = CollectorPause()

    def begin(self, graph: Any = None) -> None:
        graph = graph if graph is not None else _tf.tf_v1().get_default_graph()
        self._capture = TensorCapture(graph, self.scratch_dir, npy_dir=self.golden_dir,
                                      memory_budget=self.memory_budget)

    def after_create_session(self, session: Any, coord: Any = None) -> bool:
        """Optional: the variable read before the captured step gets its executor now, while TF
        sets the session up, instead of inside that step (:meth:`TensorCapture.warm_reads`; False:
        not warmed, the step reads its own list as without this call)."""
        return self._capture is not None and self._capture.warm_reads(session)

    def before_run(self, run_context: Any) -> Any:
        self._collector.resume()  # still paused only when the captured step raised before after_run
        began = self._capture is not None
        self._active, warm = began and self._steps == self.step, began and self._steps < self.step
        self._steps += 1
        if warm:  # the captured step's fetches, dropped: its executor is built once, at the first step
            return self._capture.warm_args(run_context)
        if not self._active:
            return None
        self._collector.pause()
        try:
            return self._capture.run_args(run_context)
        except BaseException:
            self._collector.resume()
            raise

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if not self._active:
            return
        self._active = False
        try:
            self.result = self._capture.finish(int(time.time() * 1000000))
            self.report = golden_report(self.result, self.golden_dir)
        finally:
            self._collector.resume()

    def end(self, session: Any = None) -> None:
        """Optional, from the hook's ``end``: the collector restored if a captured step raised."""
        self._collector.resume()
