"""Comparing the tensors of one dump file with their golden ``.npy`` files, and the process
pool that does it for every file.

A :class:`FileJob` names one dump file and, per tensor, the golden tensor it is matched to
(:mod:`._match`). :func:`compare_file` opens the file (header only), and for each input then
each output reads the payload (up to 1 MiB into a buffer the process reuses, larger ones
memory-mapped), converts it from its device format to its original shape
(:func:`npu_dump_hook.formats.device_format.to_original`) in the framework layout
:func:`origin_format` picks, loads the golden ``.npy`` the same way and computes
msaccucmp's metrics (:func:`npu_dump_hook.compare.metrics.compute_metrics`, chunked). One
tensor pair is alive at a time, so a worker's memory is bounded by the largest pair's
chunks plus what the kernel keeps mapped.

The framework layout of a device-format tensor (:func:`origin_format`): the dump header's
``original_op.format`` when it names a layout (NHWC, HWCN, ...), else the Build graph's
origin format of that tensor desc (``FileJob.formats``: ``_datadump_origin_format`` /
``origin_format``, what msaccucmp converts by), else the header's NCHW, else none: then
:func:`~npu_dump_hook.formats.device_format.to_original` picks the layout the original shape
fits (TensorFlow's first). NCHW in the header comes after the graph because it is also what
an unset field reads as (value 0), and inputs never carry an ``original_op``.

Anything that stops one tensor from being compared is a :class:`TensorResult` with a
``reason`` (``"<category>: <detail>"``), never an exception: no golden file, a data type
numpy cannot hold or that has no values (string, resource, variant), an element count that
does not match the golden one after conversion, an unreadable dump or golden file, a dump or golden
path that is no regular file (a FIFO, a link to one, a device: opening it by name could block
forever; :func:`special_file` before, the descriptor after the one non-blocking open of
:func:`npu_dump_hook._files.open_regular`, which every later read of that file goes through).

Shapes (:func:`shape_note`): after conversion, the NPU shape must be the golden one up to dims of
size 1; one that differs but holds as many elements (what a folded Reshape/Flatten leaves on the
device: NPU ``[16000]`` vs golden ``[1, 20, 100, 8]``) is compared flattened, as msaccucmp does,
and its result carries a ``shape_note`` naming both shapes (a note, not a reason).

An input is, with ``dump_mode`` ``all``, its producer's output dumped again: the same bytes
against the same golden file, often in the previous file this process compared. The last
output compared (of a file that also dumps inputs; up to :data:`REUSE_MAX_BYTES`) is kept with
its metrics (:class:`_LastOutput`); an input whose values are bit for bit those, in the same
dtype and shape, against the same golden file, takes its metrics instead of computing them
again (msaccucmp computes them twice), and the golden file is not read again (the kept output
holds its dtype and shape): the same cells, at the cost of one comparison of the bytes. A result whose reason names the NPU file is not reused.

The golden ``.npy`` header cache (:func:`npu_dump_hook.formats.npy.header_cache`) is bounded by
bytes (:data:`HEADER_CACHE_BYTES`): padded headers of up to 4 GiB each would otherwise be kept
4,096 at a time (300 padded headers: 513 MB).

:mod:`._pool` runs :func:`compare_file` on worker processes (:func:`init_worker` first).
"""
import logging
import mmap
import os
import signal
import stat
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from .._files import NotRegularFile, open_regular
from ..errors import DumpFileError, FormatError, NpuDumpError
from ..formats import device_format
from ..formats.dump_file import DumpFile, TensorInfo, read_header_from
from ._blas import limit_blas_threads
from ..formats.npy import HEADER_CACHE_BYTES  # noqa: F401 (the bound, named where the cache is used)
from ._golden import golden_key, iteration_key, load_golden
from ._graph import FRAMEWORK_LAYOUTS

__all__ = ["OutputPlan", "FileJob", "TensorResult", "FileResult", "compare_file", "init_worker", "origin_format",
           "special_file", "shape_note", "FLATTENED",
           "REASON_NO_GOLDEN", "REASON_DTYPE", "REASON_SHAPE", "REASON_DUMP", "REASON_GOLDEN_FILE",
           "REASON_NO_PRODUCER", "REASON_SPECIAL_FILE", "REASON_WORKER_DIED"]

logger = logging.getLogger(__name__)

REASON_NO_GOLDEN = "no golden file"
REASON_DTYPE = "data type not comparable"
REASON_SHAPE = "shape mismatch"
REASON_DUMP = "unreadable dump file"
REASON_GOLDEN_FILE = "unreadable golden file"
REASON_NO_PRODUCER = "no producer in the graph"
REASON_SPECIAL_FILE = "not a regular file"
REASON_WORKER_DIED = "worker died"
#: The start of a ``shape_note``: the row was compared flattened.
FLATTENED = "compared flattened"
#: Data types that hold no values to compare (numpy may still read their bytes).
_NO_VALUES = frozenset(("DT_STRING", "DT_RESOURCE", "DT_VARIANT", "DT_STRING_REF", "DT_UNDEFINED"))


class OutputPlan(NamedTuple):
    """The golden tensor (``name``, ``index``) one NPU tensor is matched to. ``header_may_override``:
    the graph said nothing, so the dump header's ``original_op`` wins when it names one."""

    name: str
    index: int
    header_may_override: bool = False


class FileJob(NamedTuple):
    """One dump file to compare: ``outputs``/``inputs`` plans by slot (None: no golden to match);
    ``formats``: the graph's origin formats (outputs by slot, inputs by slot; None: unknown)."""

    job: int
    path: str
    outputs: Tuple[Optional[OutputPlan], ...]
    inputs: Tuple[Optional[OutputPlan], ...]
    default_output: Optional[str] = None  # op name for output slots past ``outputs``
    formats: Tuple[Tuple[Optional[str], ...], Tuple[Optional[str], ...]] = ((), ())
    iteration: Optional[int] = None  # a loop-body op's k-th dump file: matched to the k-th golden file


class TensorResult(NamedTuple):
    direction: str
    slot: int
    npu_dtype: str
    address: str
    shape: Tuple[int, ...]
    npu_format: str
    original_shape: Tuple[int, ...]
    golden: Optional[Tuple[str, int]]  # the TF tensor matched (name, output index)
    golden_path: Optional[str]
    golden_dtype: str
    values: Optional[Dict[str, Optional[float]]]
    std: Any
    cells: Optional[List[str]]
    fail_reason: str
    reason: str  # "" when compared; else "<category>: <detail>"
    overflow: bool
    shape_note: str = ""  # "" unless compared flattened (see shape_note)


class FileResult(NamedTuple):
    job: int
    dump_time: Optional[int]
    op_name: Optional[str]
    error: str  # the file could not be read at all
    tensors: List[TensorResult]


_GOLDEN = {}  # type: Dict[str, str]
_READ_WHOLE = 1 << 20
#: The largest output kept for an identical input's metrics (module doc).
REUSE_MAX_BYTES = 16 << 20
# Per process: payloads up to _READ_WHOLE bytes are read into these, reused for every tensor
# (fresh memory costs a page fault per 4 KiB; a memory map more). The arrays made over them
# live until the tensor's metrics are computed, before the next read.
_NPU_SCRATCH = bytearray(0)
_GOLDEN_SCRATCH = bytearray(0)
_GOLDEN_SCRATCH_SIZE = _READ_WHOLE + (64 << 10)  # the payload and its .npy header


_DTYPE_NAMES = {}  # type: Dict[np.dtype, str]


def special_file(path: str) -> Optional[str]:
    """Why ``path`` (links followed) must not be opened: "a FIFO", ... None for a regular file
    or one that cannot be stat'ed (opening it then names the error)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return what
    return "not a regular file"


def _dtype_name(dtype: np.dtype) -> str:
    """``dtype.name``, cached (numpy computes it in Python: ~20 us a call)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def _scratch_buffers() -> Tuple[bytearray, bytearray]:
    global _NPU_SCRATCH, _GOLDEN_SCRATCH
    if not _NPU_SCRATCH:
        _NPU_SCRATCH = bytearray(_READ_WHOLE)
        _GOLDEN_SCRATCH = bytearray(_GOLDEN_SCRATCH_SIZE)
    return _NPU_SCRATCH, _GOLDEN_SCRATCH


class _HeldDumpFile(DumpFile):
    """A DumpFile read through the one descriptor it was opened with (:func:`open_held`:
    :func:`npu_dump_hook._files.open_regular`, so no FIFO, link or device put at the path after
    the folder was walked is ever opened by name); its ``copy=True`` payload reads of v2 files go
    into the process's scratch buffer (valid until the next read) instead of fresh memory."""

    _handle = None  # type: Any

    @classmethod
    def open_held(cls, path: str) -> "_HeldDumpFile":
        """The dump file at ``path``, its header parsed from the descriptor opened here;
        NotRegularFile / OSError / DumpFileError as :func:`open_regular` and the reader raise."""
        handle = open_regular(path, buffering=0)
        try:
            found = read_header_from(handle, path)
        except BaseException:
            handle.close()
            raise
        self = cls.__new__(cls)
        self.__dict__.update(found.__dict__)
        self._mmap = None
        self._handle = handle
        return self

    def close(self) -> None:
        DumpFile.close(self)
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()

    def _buffer(self) -> Any:
        if self._mmap is None:
            fd = self._handle.fileno()
            if os.fstat(fd).st_size != self.file_size:
                raise DumpFileError(self.path, "file changed size since its header was read", 0)
            self._mmap = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return self._mmap

    def _read_into(self, info: TensorInfo, target: memoryview) -> None:
        self._handle.seek(info.offset)
        if self._handle.readinto(target) != info.size:
            raise DumpFileError(self.path, "file shrank while reading {}[{}]".format(info.kind, info.index),
                                info.offset)

    def _storage(self, info: TensorInfo, storage: np.dtype, copy: bool) -> np.ndarray:
        if not copy or self.version == "legacy" or info.size == 0 or info.offset is None:
            return DumpFile._storage(self, info, storage, copy)  # mapped through _buffer, or no payload to read
        count = info.size // storage.itemsize
        buffer = _scratch_buffers()[0]
        if info.size <= len(buffer):
            self._read_into(info, memoryview(buffer)[:info.size])
            return np.frombuffer(buffer, dtype=storage, count=count)
        array = np.empty(count, dtype=storage)
        self._read_into(info, memoryview(array).cast("B"))
        return array


def origin_format(job: "FileJob", info: TensorInfo, kind: str, slot: int) -> Optional[str]:
    """The framework layout to convert ``kind`` ``slot`` of ``job``'s dump from (see the module doc)."""
    header = info.original_format if info.original_format in FRAMEWORK_LAYOUTS else None
    if header is not None and header != "NCHW":
        return header
    layouts = job.formats[0 if kind == "output" else 1] if job.formats else ()
    graph = layouts[slot] if slot < len(layouts) else None
    return graph or header


def _npu_array(job: "FileJob", dump: DumpFile, info: TensorInfo, kind: str, slot: int) -> np.ndarray:
    """The payload in its original shape (FormatError when it does not convert)."""
    # small payloads are read (a memory map costs more than the bytes), large ones mapped
    array = dump.array(kind, slot, copy=info.size <= _READ_WHOLE)
    if array.shape != info.shape or kind not in ("input", "output"):
        return array  # no shape applied (unsized types, "no data" scalars): as DumpFile.array
    try:
        return device_format.to_original(array, info.format_name, info.original_shape,
                                         origin_format(job, info, kind, slot), source=dump.path)
    except DumpFileError:
        raise
    except FormatError as exc:  # name the tensor and where its payload is
        raise DumpFileError(dump.path, "{}[{}]: {}".format(kind, slot, exc.rule), info.offset)


def init_worker(golden: Dict[str, str], pooled: bool = False) -> None:
    """Hand the golden index (key -> path) to this process; ``pooled``: a pool process (one BLAS
    thread, SIGTERM's default action)."""
    global _GOLDEN
    _GOLDEN = golden
    _LAST_OUTPUT.__init__()  # a new comparison: golden files of an earlier one may have changed since
    if pooled:
        limit_blas_threads()  # a pool process: one BLAS thread for good (see ._blas)
        # a forked worker inherits the CLI's SIGTERM-to-SystemExit handler (cli/_compare.py), which
        # is for the CLI process: a worker stopped with terminate() just ends
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _address(dump: DumpFile, kind: str, slot: int) -> str:
    proto = (dump.header.output if kind == "output" else dump.header.input)[slot]
    return str(proto.address) if proto.address else "NaN"


def _header_origin(dump: DumpFile, slot: int) -> Optional[Tuple[str, int]]:
    proto = dump.header.output[slot]
    if proto.HasField("original_op") and proto.original_op.name:
        index = int(proto.original_op.output_index)
        return proto.original_op.name, (index if index < 0x80000000 else index - 0x100000000)
    return None


def _plan_for(job: FileJob, dump: DumpFile, kind: str, slot: int) -> Optional[Tuple[str, int]]:
    plans = job.outputs if kind == "output" else job.inputs
    plan = plans[slot] if slot < len(plans) else None
    if kind == "output":
        if plan is None and job.default_output is not None:
            plan = OutputPlan(job.default_output, slot, True)
        if plan is not None and plan.header_may_override:
            return _header_origin(dump, slot) or (plan.name, plan.index)
    return None if plan is None else (plan.name, plan.index)


def _empty(direction: str, slot: int, info: Any, address: str, golden: Optional[Tuple[str, int]], reason: str,
           golden_path: Optional[str] = None, golden_dtype: str = "NaN", npu_dtype: str = "NaN") -> TensorResult:
    return TensorResult(direction, slot, npu_dtype, address, tuple(info.shape), info.format_name,
                        tuple(info.original_shape), golden, golden_path, golden_dtype, None, None, None,
                        reason, reason, False)


def _same_shape(a: Tuple[int, ...], b: Tuple[int, ...]) -> bool:
    return a == b or (tuple(d for d in a if d != 1) == tuple(d for d in b if d != 1))


def shape_note(npu_shape: Tuple[int, ...], golden_shape: Tuple[int, ...]) -> Optional[str]:
    """How an NPU tensor of ``npu_shape`` (converted) compares with its golden of ``golden_shape``:
    "" as it is (the same shape up to dims of size 1), a note naming both shapes when it is compared
    flattened (other shape, as many elements), None when it cannot be compared (element counts differ)."""
    if _same_shape(npu_shape, golden_shape):
        return ""
    count = _elements(npu_shape)
    if count != _elements(golden_shape):
        return None
    return "{}: NPU {} vs golden {} ({} elements)".format(FLATTENED, list(npu_shape), list(golden_shape), count)


def _elements(shape: Tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


class _LastOutput(object):
    """The last output this process compared, its golden's dtype and shape, and its metrics (module doc)."""

    def __init__(self) -> None:
        self.key = None  # type: Optional[Tuple[Any, ...]]
        self.values = None  # type: Optional[np.ndarray]
        self.golden = None  # type: Optional[Tuple[np.dtype, Tuple[int, ...]]]
        self.result = None  # type: Any

    @staticmethod
    def _key(npu: np.ndarray, golden_path: str) -> Tuple[Any, ...]:
        return golden_path, npu.dtype.str, tuple(npu.shape)

    def find(self, npu: np.ndarray, golden_path: str) -> Any:
        """(kept metrics, golden dtype, golden shape) when ``npu`` is the kept output bit for bit against
        the same golden file, else None: the golden file need not be read again."""
        if self.key is None or self.key != self._key(npu, golden_path) or not npu.flags.c_contiguous:
            return None
        unsigned = np.dtype("u{}".format(npu.dtype.itemsize)) if npu.dtype.itemsize in (1, 2, 4, 8) else None
        if unsigned is None or not np.array_equal(npu.view(unsigned), self.values.view(unsigned)):
            return None
        return (self.result,) + self.golden

    def keep(self, npu: np.ndarray, gold: np.ndarray, golden_path: str, npu_path: str, result: Any) -> None:
        self.key = None
        if npu.nbytes > REUSE_MAX_BYTES or npu.dtype.kind not in "biufc" or npu_path in result.fail_reason:
            return
        self.values = np.array(npu, order="C")  # the payload buffer is reused by the next read
        self.golden = (gold.dtype, tuple(gold.shape))
        self.result = result
        self.key = self._key(npu, golden_path)


_LAST_OUTPUT = _LastOutput()


def _metrics(dump: DumpFile, kind: str, npu: np.ndarray, gold: np.ndarray, path: str) -> Any:
    """compute_metrics; an output is kept for the next file's input (module doc)."""
    from .metrics import compute_metrics

    result = compute_metrics(npu, gold, dump.path, path)
    if kind == "output" and dump.inputs:  # inputs are dumped too: the next file's input may be this output
        _LAST_OUTPUT.keep(npu, gold, path, dump.path, result)
    return result


def _has_overflow(npu: np.ndarray, finite: Tuple[bool, bool]) -> bool:
    """Inf/NaN on the NPU side of a floating tensor while every golden value is finite."""
    return npu.dtype.kind in "fc" and npu.size > 0 and not finite[0] and finite[1]


def _compare_tensor(job: FileJob, dump: DumpFile, kind: str, slot: int) -> TensorResult:
    info = dump.tensor(kind, slot)
    address = _address(dump, kind, slot)
    golden = _plan_for(job, dump, kind, slot)
    if golden is None:
        return _empty(kind, slot, info, address, None, "{}: {} {} of {}".format(
            REASON_NO_PRODUCER, kind, slot, dump.op_name))
    key = golden_key(*golden)
    if job.iteration is not None:
        key = iteration_key(key, job.iteration)
    path = _GOLDEN.get(key)
    if info.dtype is None or info.dtype_name in _NO_VALUES:
        return _empty(kind, slot, info, address, golden, "{}: {}".format(REASON_DTYPE, info.dtype_name), path)
    if path is None:
        return _empty(kind, slot, info, address, golden, "{}: {}.*.npy (for {}:{})".format(
            REASON_NO_GOLDEN, key, golden[0], golden[1]))
    special = special_file(path)
    if special is not None:
        return _empty(kind, slot, info, address, golden, "{}: golden {} is {} (skipped)".format(
            REASON_SPECIAL_FILE, path, special), path)
    try:
        npu = _npu_array(job, dump, info, kind, slot)
    except FormatError as exc:
        return _empty(kind, slot, info, address, golden, "{}: {}".format(REASON_SHAPE, exc.rule), path)
    reused = _LAST_OUTPUT.find(npu, path) if kind == "input" else None
    if reused is not None:  # the last output again: its metrics, and its golden is not read again
        return _tensor_result(kind, slot, info, address, golden, path, npu, reused[0], reused[1], reused[2])
    try:
        gold = load_golden(path, _scratch_buffers()[1])
    except NotRegularFile as exc:  # put there since the check above
        return _empty(kind, slot, info, address, golden, "{}: golden {} is {} (skipped)".format(
            REASON_SPECIAL_FILE, path, exc.kind), path, npu_dtype=_dtype_name(npu.dtype))
    except Exception as exc:  # noqa: BLE001 - untrusted .npy: numpy's header parsing raises anything (<f3: TypeError)
        return _empty(kind, slot, info, address, golden, "{}: {}: {}".format(REASON_GOLDEN_FILE, path, exc), path,
                      npu_dtype=_dtype_name(npu.dtype))
    if gold.dtype.kind not in "biufc":
        return _empty(kind, slot, info, address, golden, "{}: golden {}".format(REASON_DTYPE, gold.dtype), path,
                      _dtype_name(gold.dtype), _dtype_name(npu.dtype))
    note = shape_note(tuple(npu.shape), tuple(gold.shape))
    if note is None:
        return _empty(kind, slot, info, address, golden, "{}: NPU {} (original shape, {} on the device) vs golden "
                      "{} ({} vs {} elements)".format(REASON_SHAPE, list(npu.shape), list(info.shape), list(gold.shape),
                                                      npu.size, gold.size), path,
                      _dtype_name(gold.dtype), _dtype_name(npu.dtype))
    result = _metrics(dump, kind, npu, gold, path)
    return _tensor_result(kind, slot, info, address, golden, path, npu, result, gold.dtype, tuple(gold.shape), note)


def _tensor_result(kind: str, slot: int, info: TensorInfo, address: str, golden: Tuple[str, int], path: str,
                   npu: np.ndarray, result: Any, gold_dtype: np.dtype, gold_shape: Tuple[int, ...],
                   note: Optional[str] = None) -> TensorResult:
    """The row of a compared pair; ``note`` None: found here from the two shapes."""
    if note is None:
        note = shape_note(tuple(npu.shape), gold_shape)
    return TensorResult(kind, slot, _dtype_name(npu.dtype), address, tuple(info.shape), info.format_name,
                        tuple(npu.shape), golden, path, _dtype_name(gold_dtype), dict(result.values), result.std,
                        result.csv_cells(), result.fail_reason, "", _has_overflow(npu, result.finite), note)


def compare_file(job: FileJob) -> FileResult:
    """Compare every input and output of one dump file (see the module doc); never raises
    for bad data: an unreadable file is a FileResult with ``error``."""
    try:
        dump = _HeldDumpFile.open_held(job.path)
    except NotRegularFile as exc:  # checked on the descriptor: a FIFO put there since the walk never blocks
        return FileResult(job.job, None, None, "{}: {} is {} (skipped)".format(REASON_SPECIAL_FILE, job.path,
                                                                             exc.kind), [])
    except (NpuDumpError, OSError) as exc:
        return FileResult(job.job, None, None, "{}: {}".format(REASON_DUMP, exc), [])
    tensors = []
    with dump:
        for kind, count in (("input", len(dump.inputs)), ("output", len(dump.outputs))):
            for slot in range(count):
                try:
                    tensors.append(_compare_tensor(job, dump, kind, slot))
                except (NpuDumpError, OSError) as exc:  # e.g. the file shrank under us
                    info = dump.tensor(kind, slot)
                    tensors.append(_empty(kind, slot, info, "NaN", None, "{}: {}".format(REASON_DUMP, exc)))
        return FileResult(job.job, dump.dump_time or None, dump.op_name, "", tensors)
