"""The size of a dump before it is written (issue 23, "size before writing").

Before the dumped step the hook calls :func:`estimate` on the step's walk (the ops it will
execute) and :func:`check_fit` on the result: the dump GE (or the emulator) will write, the
golden tensors this run captures, the capture's scratch, and the bundle's copies, each against
the free space of its file system and the dump against ``max_dump_size``. A dump that does not
fit is refused before the step under ``strict=True`` (the hook leaves nothing behind), a warning
otherwise; both figures and the statistics-first alternative are named.

The model, per dumped step (``dump_step`` steps within ``max_steps`` multiply it). The dump is
measured on the Build graph GE makes of the step (:mod:`._sizing_graph`: the emulator's own graph
builder over the walk's executed ops with static shapes, so estimate and emulator share every rule):

* what GE does (:class:`DeviceModel`, from :func:`device_model`): on a real NPU and the emulator's
  ``ascend`` profile, fusion (a fused node dumps only its last op's outputs), float16 outputs of the
  Cube ops (convolutions, matrix products) under the session's ``precision_mode`` (GE's training
  default ``allow_fp32_to_fp16`` when unset; ``force_fp32``/``must_keep_origin_dtype``: none),
  device formats with their padding (NC1HWC0 and FRACTAL_Z round channels up to C0=16, FRACTAL_NZ
  both matrix dims to 16) and the ``Cast``/``TransData`` nodes between formats, each dumped; the
  emulator's ``exact`` profile and a golden run: every TF op one GE op, TF dtypes, ND;
* the ops dumped: the nodes GE gives a task (:func:`npu_dump_hook.emulator.ge_model.is_no_task`:
  not Const, Identity, variables, iterators...); ``dump_layer`` keeps the named ones (by GE or
  original TF name) and the Data ops feeding them;
* ``dump_data="tensor"``: one file per node: the 8-byte length, the DumpData header (sized with the
  writer's own code: op name, one entry per tensor with its device and original shapes) and every
  dumped tensor's device bytes (outputs for ``dump_mode=output``, inputs for ``input``, both for
  ``all``); a variable update's inputs are what it reads, its outputs every variable it updates;
* ``dump_data="stats"``: one CSV per node, its header line and a row per tensor, the known cells
  (size, dtype, format, device shape, count) as written, each min/max/mean cell at
  :data:`STATS_FLOAT_CELL` characters (their width depends on the values);
* ``enable_dump_debug``: only overflowing ops are dumped, which cannot be known before the step:
  the estimate is 0 (``note`` says so); ``all_bytes`` is the upper bound (every op overflowing);
* golden (``reference``): every executed op's outputs as ``.npy`` (a variable handle's as the
  variable, an update's as the variables it updates; :data:`GOLDEN_PER_FILE` each: its header and
  its golden_manifest.json entry); an
  emulating backend also writes the step's tensors to its scratch folder first (removed after).

A TF 1.x ``tf.while_loop`` body is dumped and captured once per iteration: the count is folded
from the graph (:mod:`._sizing_loops`: the loop's ``maximum_iterations`` or ``counter < limit``
bound, when static; else once, and ``note`` names the loop).

Not modelled: names over 255 bytes
(``mapping.csv``), the fusion patterns and formats the emulator does not emulate either (its
module doc), ``allow_mix_precision``'s float16 Vector ops.

Unknown static shapes: the shape the step's feeds decide, by the capture's rule
(:class:`~._capture_sizes.FedSizes`: TensorFlow's shape inference with the fed shapes, made once
for the estimate and the capture); where that leaves it unknown too (no feed, a data-dependent
size), an unknown dimension is taken as the batch size -- the fed batch's leading dimension, else
the ``batch_size`` constant of the graph's batching dataset op, else 1 -- and a tensor of unknown
rank counts 0 bytes; ``unknown`` says how many tensors and ``assumed`` what. Shape vectors of
unknown length (``Shape``, ``BroadcastGradientArgs``) count 4 entries.

TensorFlow objects are received, never imported.
"""
import logging
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .. import _tf
from ..bundle import walk_files
from ..constants import COMPLETE_STEP_MARKER, INCOMPLETE_STEP_MARKER
from ..environment import session_options
from ..emulator.npu_graph import cyclic_gc_paused
from ..errors import DumpSizeError
from ._capture_plan import is_update_type, while_or_cond
from ._capture_sizes import FedSizes
from ._sizing_graph import (DEFAULT_PRECISION_MODE, LENGTH_PREFIX, STATS_FLOAT_CELL, STATS_HEADER_BYTES,
                            DeviceModel, StaticCapture, measure_dump, static_capture, unwatched_in_loop)
from ._sizing_loops import LoopCounts, const_ints
from ._space import free_bytes

__all__ = ["SizeEstimate", "DeviceModel", "estimate", "check_fit", "format_bytes", "device_model",
           "dir_bytes", "LENGTH_PREFIX", "STATS_HEADER_BYTES", "STATS_FLOAT_CELL", "NPY_HEADER", "BLOCK"]

logger = logging.getLogger(__name__)

#: A ``.npy`` header; a golden tensor also has its entry in golden_manifest.json.
NPY_HEADER = 128
GOLDEN_PER_FILE = NPY_HEADER + 240
#: What a file takes on disk at least (the free-space check rounds every file up to it).
BLOCK = 4096
_SHAPE_VECTOR_TYPES = frozenset(("Shape", "ShapeN", "BroadcastGradientArgs"))
_BATCH_DATASETS = frozenset(("BatchDataset", "BatchDatasetV2", "PaddedBatchDataset", "PaddedBatchDatasetV2",
                             "ParallelBatchDataset", "MapAndBatchDataset", "ExperimentalMapAndBatchDataset"))
_NO_BYTES_DTYPES = frozenset(("resource", "variant", "string"))


def format_bytes(count: Optional[int]) -> str:
    """``1.5 GiB``-style text of a byte count (``?`` for None)."""
    if count is None:
        return "?"
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return "{} {}".format(int(value), unit) if unit == "bytes" else "{:.1f} {}".format(value, unit)
        value /= 1024
    return str(count)  # not reached


@dataclass
class SizeEstimate:
    """What :func:`estimate` found (bytes; see the module doc). ``as_dict()`` is what run.json and
    bundle.json record under ``run.size.estimate``."""

    dump_bytes: int
    dump_files: int
    stats_bytes: int
    all_bytes: int
    golden_bytes: int
    golden_files: int
    scratch_bytes: int
    ops: int
    tensors: int
    steps: int
    unknown: int = 0
    assumed: str = ""
    note: str = ""
    #: What GE was modelled to do to the graph (:class:`DeviceModel`).
    device: str = ""
    limits: Dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        text = "dump {} in {} file(s) ({} op(s), {} tensor(s), {} step(s))".format(
            format_bytes(self.dump_bytes), self.dump_files, self.ops, self.tensors, self.steps)
        if self.golden_bytes:
            text += ", golden {}".format(format_bytes(self.golden_bytes))
        if self.unknown:
            text += "; {} tensor(s) of unknown shape: {}".format(self.unknown, self.assumed)
        return text


class _Shapes(object):
    """Byte sizes of the step's tensors: the static shape; where it is unknown, the shape the step's
    feeds decide (``decided()``: :meth:`~._capture_sizes.FedSizes.shapes`, the capture's rule, asked
    once, at the first such tensor); else unknown dimensions taken as the batch size (module doc)."""

    def __init__(self, batch: int, source: str, index: Any = None,
                 decided: Optional[Callable[[], Dict[str, Tuple[int, ...]]]] = None) -> None:
        self.batch, self.source = batch, source
        #: ``op.type`` and ``op.name`` (a graph index's, read once per op; TF 1.15's accessors cost
        #: microseconds, ``tensor.name`` reads the op's name twice).
        self.op_type, self.op_name = (index.type, index.name) if index is not None else (_type_of, _name_of)
        self._decide = decided or dict
        self._decided = None  # type: Optional[Dict[str, Tuple[int, ...]]]
        #: ``id`` of each tensor of unknown shape (its count is reported; kept alive by ``_dims``).
        self.unknown = set()  # type: set
        #: ``{id(tensor): (tensor, dims)}``: the Build graph and the golden sizes both ask for every
        #: executed tensor (TF's shape accessors are slow); the tensor is kept so its id stays its own.
        self._dims = {}  # type: Dict[int, Tuple[Any, Optional[Tuple[int, ...]]]]

    def dims(self, tensor: Any) -> Optional[Tuple[int, ...]]:
        """The shape (static, else as the feeds decide it), an unknown dimension as the batch size
        (None: unknown rank)."""
        found = self._dims.get(id(tensor))
        if found is None:
            found = self._dims[id(tensor)] = (tensor, self._static_dims(tensor))
        return found[1]

    def _static_dims(self, tensor: Any) -> Optional[Tuple[int, ...]]:
        shape = tensor.get_shape()
        dims = shape.as_list() if shape.ndims is not None else None
        if dims is None or None in dims:
            if self._decided is None:
                self._decided = self._decide()
            decided = self._decided.get("%s:%d" % (self.op_name(tensor.op), tensor.value_index))
            if decided is not None:
                return decided
        if dims is None:
            if tensor.dtype.base_dtype.name not in _NO_BYTES_DTYPES:
                self.unknown.add(id(tensor))
            return None
        if len(dims) == 1 and dims[0] is None and self.op_type(tensor.op) in _SHAPE_VECTOR_TYPES:
            return (4,)
        if None in dims and tensor.dtype.base_dtype.name not in _NO_BYTES_DTYPES:
            self.unknown.add(id(tensor))  # (TF 1.15's tensor.name costs microseconds)
        return tuple(self.batch if dim is None else dim for dim in dims)

    def nbytes(self, tensor: Any) -> int:
        dtype = tensor.dtype.base_dtype
        dims = self.dims(tensor)
        if dtype.name in _NO_BYTES_DTYPES or dims is None:
            return 0
        count = 1
        for dim in dims:
            count *= dim
        return count * dtype.size

    def variable_bytes(self, tensor: Any) -> int:
        """A resource handle's variable (VarHandleOp's shape and dtype), else the tensor itself."""
        op = tensor.op
        if tensor.dtype.base_dtype.name != "resource":
            return self.nbytes(tensor)
        while op.type in ("Identity", "IdentityN", "Enter") and op.inputs:
            op = op.inputs[0].op
        try:
            dims, dtype = op.get_attr("shape").dim, op.get_attr("dtype")
        except (ValueError, KeyError, AttributeError):
            return 0
        count = 1
        for dim in dims:
            count *= max(int(dim.size), 0)
        return count * dtype.size


def _type_of(op: Any) -> str:
    return op.type


def _name_of(op: Any) -> str:
    return op.name


def batch_guess(graph: Any, feed_dict: Optional[Mapping[Any, Any]]) -> Tuple[int, str]:
    """``(batch size, where it came from)`` for unknown dimensions (module doc)."""
    for value in (feed_dict or {}).values():
        shape = getattr(value, "shape", None)
        if shape:
            return int(shape[0]), "the fed batch's leading dimension {}".format(int(shape[0]))
    for op in graph.get_operations():
        if op.type in _BATCH_DATASETS and len(op.inputs) > 1:
            size = _const_int(op.inputs[1].op)
            if size:
                return size, "the batch size {} of {}".format(size, op.name)
    return 1, "1 (no fed batch, no batching dataset in the graph)"


def _const_int(op: Any) -> Optional[int]:
    """The scalar integer a ``Const`` op holds (a dataset's batch size), else None."""
    found = const_ints(op) if op.type == "Const" else None
    return found if isinstance(found, int) else None


def _op_tensors(op: Any, shapes: _Shapes) -> List[int]:
    """The golden capture's bytes of one op: its outputs, a variable update's the variables it updates."""
    if is_update_type(op.type):
        ins = [shapes.variable_bytes(t) for t in op.inputs]
        updated = [size for size, t in zip(ins, op.inputs) if t.dtype.base_dtype.name == "resource"
                   or t.dtype != t.dtype.base_dtype]  # every variable it updates (var, accumulators)
        return updated or ins[:1]
    return [shapes.nbytes(t) for t in op.outputs]


def _captured_sizes(executed: Sequence[Tuple[Any, bool]], capture: StaticCapture, shapes: _Shapes,
                    loops: LoopCounts) -> List[int]:
    """What the capture writes for the step: every output of the ops that run, a variable handle
    as the variable's value, a variable update as the variables it updates; a TF 1.x loop body's
    once per iteration (its Enter ops not: their inputs are captured outside the loop). Dtypes and
    static dims are read from the step's static ``capture`` (the Build graph's), not from TF again."""
    sizes, folded = [], {}  # type: List[int], Dict[str, bool]
    itemsizes = capture.itemsizes
    for record, (op, fed_only) in zip(capture.executed_ops, executed):
        if fed_only:
            continue
        if is_update_type(record.type):
            sizes.extend(_op_tensors(op, shapes))
            continue
        in_loop = while_or_cond(op) == "while"
        runs = loops.of(op) if in_loop else 1
        if in_loop and unwatched_in_loop(op, folded):
            continue
        for number, (name, dims) in enumerate(zip(record.output_dtypes, record.output_shapes)):
            if name == "resource":
                size = shapes.variable_bytes(op.outputs[number])
                if size:
                    sizes.append(size)
            elif name not in _NO_BYTES_DTYPES:
                sizes.extend([_elements(dims) * itemsizes[name] if dims is not None else 0] * runs)
    return sizes


def _elements(dims: Sequence[int]) -> int:
    count = 1
    for dim in dims:
        count *= dim
    return count


def estimate(executed: Sequence[Tuple[Any, bool]], graph: Any, options: Any, steps: int, golden: bool,
             scratch: bool, feed_dict: Optional[Mapping[Any, Any]] = None, added: Any = (),
             device: Optional[DeviceModel] = None, edges: Any = None, index: Any = None,
             fed_sizes: Optional[FedSizes] = None) -> SizeEstimate:
    """The size of this run's dump (module doc). ``executed``: the walk's ``[(op, fed_only)]``;
    ``steps``: the dumped steps; ``golden``: this run captures golden tensors; ``scratch``: an
    emulating backend captures the step's tensors to scratch first; ``added``: names of ops the
    emulator added to the graph for its numerics (no GE ops, no dump files); ``device``: what GE
    does to the graph (:class:`DeviceModel`; None: every TF op one GE op, TF dtypes and layouts);
    ``edges(op)``: ``(input tensors, control ops)`` (the walk's graph index); ``index``: that
    :class:`~npu_dump_hook.train.walk.GraphIndex` itself, whose op names are read once;
    ``fed_sizes``: the capture's :class:`~._capture_sizes.FedSizes` of ``graph`` (its inference of
    this step's shapes is then made once for both; None: one of the estimate's own)."""
    batch, source = batch_guess(graph, feed_dict)
    fed_sizes = fed_sizes or FedSizes(graph)
    shapes = _Shapes(batch, source, index, lambda: fed_sizes.shapes(feed_dict))
    device = device or DeviceModel()
    if device.plan is None and added:
        raise ValueError("estimate: ops added to the graph need the numerics plan that added them")
    loops = LoopCounts()
    with cyclic_gc_paused():  # 10,000s of short-lived objects: no collection walking TF's graph meanwhile
        capture = static_capture(executed, shapes.dims, edges, loops, index)  # the Build graph's and the golden's
        dump = measure_dump(executed, shapes.dims, options, device, edges, loops, index, capture)
        outputs = _captured_sizes(executed, capture, shapes, loops) if golden or scratch else []
    golden_files = golden_bytes = scratch_bytes = 0
    if golden or scratch:
        if golden:
            golden_files, golden_bytes = len(outputs), sum(outputs) + GOLDEN_PER_FILE * len(outputs)
        if scratch:
            scratch_bytes = sum(outputs) + NPY_HEADER * len(outputs)
    note, files = device.note, dump.files
    if options.enable_dump_debug:
        dump_bytes, files = 0, 0
        note = "; ".join(n for n in (note, "enable_dump_debug dumps only overflowing ops: not known before the step "
                                           "(all_bytes: every op overflowing)") if n)
    else:
        dump_bytes = dump.stats_bytes if options.dump_data == "stats" else dump.tensor_bytes
    unknown = len(shapes.unknown)
    if loops.unknown:
        note = "; ".join(n for n in (note, "TF 1.x loop(s) whose iterations are not known before the step, counted "
                                           "once: " + ", ".join(sorted(loops.unknown))) if n)
    return SizeEstimate(
        dump_bytes=dump_bytes * steps, dump_files=files * steps, stats_bytes=dump.stats_bytes * steps,
        all_bytes=dump.all_bytes * steps, golden_bytes=golden_bytes, golden_files=golden_files,
        scratch_bytes=scratch_bytes, ops=dump.ops, tensors=dump.tensors, steps=steps, unknown=unknown,
        assumed=("unknown dimensions taken as {}; unknown ranks as 0 bytes".format(source) if unknown else ""),
        note=note, device=device.describe())


def device_model(backend: Any, session_config: Any = None) -> DeviceModel:
    """What GE does to this run's graph: the emulator's profile and numerics plan; on a real NPU
    fusion, device formats and the float16 Cube ops of the session's ``precision_mode`` (GE's
    training default when the session sets none); else (no NPU) nothing."""
    name = getattr(backend, "name", None)
    if name == "emulated":
        return DeviceModel(plan=getattr(backend, "plan", None), ascend=getattr(backend, "profile", "") == "ascend",
                           shared=getattr(backend, "shared_build", None))
    if name == "npu":
        mode = session_options(session_config).get("precision_mode")
        note = "" if mode else "the session sets no precision_mode: GE's training default {} assumed".format(
            DEFAULT_PRECISION_MODE)
        return DeviceModel(ascend=True, precision_mode=mode or DEFAULT_PRECISION_MODE, note=note)
    return DeviceModel()


# --------------------------------------------------------------------------- room and limits


def _device(path: str) -> Tuple[Any, str]:
    """(file system id, nearest existing folder) of ``path``."""
    folder = os.path.abspath(path)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return os.stat(folder).st_dev, folder


def needs(est: SizeEstimate, dump_path: str, run_dir: str, bundle_dir: str, copies: bool) -> Dict[Any, List[Any]]:
    """``{file system: [bytes needed, folder, [what]]}``: the dump under ``dump_path``, golden and
    scratch under the run folder, the bundle's copies under ``bundle_dir`` (``copies``: the bundle
    copies or archives its payload; else only when it is on another file system, where hard links
    cannot go)."""
    found = {}  # type: Dict[Any, List[Any]]

    def add(path: str, count: int, files: int, what: str) -> None:
        if count <= 0:
            return
        dev, folder = _device(path)
        entry = found.setdefault(dev, [0, folder, []])
        entry[0] += count + BLOCK * files
        entry[2].append("{} {}".format(what, format_bytes(count)))

    add(dump_path, est.dump_bytes, est.dump_files, "dump")
    add(run_dir, est.golden_bytes + est.scratch_bytes, est.golden_files * (2 if est.scratch_bytes else 1),
        "golden and capture scratch" if est.scratch_bytes and est.golden_bytes else
        "capture scratch" if est.scratch_bytes else "golden")
    bundle_dev = _device(bundle_dir)[0]
    sources = est.dump_bytes * (copies or _device(dump_path)[0] != bundle_dev) + \
        est.golden_bytes * (copies or _device(run_dir)[0] != bundle_dev)
    add(bundle_dir, sources, est.dump_files + est.golden_files, "bundle")
    return found


def check_fit(est: SizeEstimate, max_dump_size: Optional[int], dump_path: str, run_dir: str, bundle_dir: str,
              copies: bool) -> None:
    """DumpSizeError when the dump exceeds ``max_dump_size`` or the writes of one file system
    exceed its free space; fills ``est.limits`` with what was checked."""
    est.limits = {"max_dump_size": max_dump_size, "free": {}}
    if max_dump_size is not None and est.dump_bytes > max_dump_size:
        raise DumpSizeError(_refusal(est, "exceeds max_dump_size={} ({} bytes)".format(
            format_bytes(max_dump_size), max_dump_size)), None, max_dump_size, est.as_dict())
    for needed, folder, what in needs(est, dump_path, run_dir, bundle_dir, copies).values():
        free = free_bytes(folder)
        est.limits["free"][folder] = {"needed": needed, "free": free, "what": what}
        if needed > free:
            raise DumpSizeError(_refusal(est, "does not fit: {} needed ({}) under {}, {} free".format(
                format_bytes(needed), ", ".join(what), folder, format_bytes(free))), folder, free, est.as_dict())


def _refusal(est: SizeEstimate, why: str) -> str:
    alternative = "dump statistics first: dump_data='stats' (--dump-data stats; about {} for this step), then only " \
                  "the suspect ops with dump_layer (npu-dump-hook run --two-phase does both)".format(
                      format_bytes(est.stats_bytes))
    return "the dump is estimated at {} and {}; {}".format(est.describe(), why, alternative)


def dir_bytes(folders: Iterable[Optional[str]]) -> Optional[int]:
    """Total size of the files under ``folders`` (None when none exists), the emulator's step
    marks left out: the files the bundle writer takes (:func:`~npu_dump_hook.bundle.walk_files`,
    the one walk of a dump tree: a symlink to a folder or out of the tree is not followed, one to a
    file in the tree counts as the file it names). None, and a warning naming the folder and the
    reason, when a folder cannot be walked (unlistable, removed meanwhile): the figure is read at
    the run's end (``run.size.actual``), where a partial sum would pass for the size and an
    exception would cost the run its run.json and bundle."""
    total, seen = 0, False
    for folder in folders:
        if not folder or not os.path.isdir(folder):
            continue
        seen = True
        try:
            total += _walked_bytes(folder)
        except OSError as exc:
            logger.warning("NpuDumpHook: the size of %s was not measured (run.size.actual left unknown): %s",
                           folder, exc)
            return None
    return total if seen else None


def _walked_bytes(folder: str) -> int:
    marks = (COMPLETE_STEP_MARKER, INCOMPLETE_STEP_MARKER)  # the emulator's own step marks: GE writes none
    # quiet: the bundle writer walks the same tree and reports what it skips (once)
    return sum(found.size for found in walk_files(folder, quiet=True) if found.rel.rpartition("/")[2] not in marks)


def dumped_steps(options: Any, first: int, stop: int) -> int:
    """How many of the steps ``first`` .. ``stop - 1`` ``dump_step`` selects (overlapping ranges
    counted once; no dump_step: all of them)."""
    ranges = options.step_ranges()
    if not ranges:
        return max(stop - first, 0)
    covered, count = first, 0
    for start, end in sorted(ranges):
        start, end = max(start, covered), min(end, stop - 1)
        if end >= start:
            count += end - start + 1
            covered = end + 1
    return count


class SizeCheck(object):
    """The hook's size check (module doc): :meth:`before_step` once, before the first dumped step;
    :meth:`section` the ``size`` part of run.json and bundle.json's ``run`` section. ``output``
    (:class:`~npu_dump_hook.train.output.BundleOutput`): where the bundle goes, whether it copies
    the dump, and the folders a refusal removes again."""

    def __init__(self, max_dump_size: Optional[int], output: Any) -> None:
        self.max_dump_size = max_dump_size
        self.output = output
        self.estimate = None  # type: Optional[SizeEstimate]
        self.refused = None  # type: Optional[str]
        self._checked = False
        #: What the bundle's ``warnings`` carry (strict=False: the dump went ahead).
        self.warnings = []  # type: List[str]

    def before_step(self, walk: Any, run_context: Any, dump: Any, steps: Any, guard: Any) -> None:
        """Estimate the run's dump and golden against free space and max_dump_size. Refused
        (``guard.strict``): recorded in the guard's failures, nothing of this run left behind
        (``dump.discard``), and a DumpSizeError naming both figures and the statistics-first
        alternative; not strict: a warning and the dump goes ahead."""
        try:
            self._check(walk, run_context, dump, steps, guard.strict)
        except DumpSizeError as exc:
            guard.record("checking the dump size before step {}".format(steps.captured_step), exc)
            dump.discard(self.output.made_dirs)
            raise DumpSizeError("NpuDumpHook: refused before step {}: {}".format(steps.captured_step, exc),
                                exc.path, exc.limit, exc.estimate) from None

    def _check(self, walk: Any, run_context: Any, dump: Any, steps: Any, strict: bool) -> None:
        if self._checked:
            return
        self._checked = True
        try:
            self._estimate(walk, run_context, dump, steps)
            check_fit(self.estimate, self.max_dump_size, dump.options.dump_path, dump.layout.root,
                      self.output.bundle_dir, self.output.copies)
        except DumpSizeError as exc:
            self.refused = str(exc)
            if strict:
                raise
            self.warnings.append("before the dumped step, " + self.refused)
            logger.warning("NpuDumpHook: %s (strict=False: dumping anyway)", exc)
            return
        except Exception as exc:  # noqa: BLE001 - an estimate that cannot be made never stops training
            logger.warning("NpuDumpHook: the dump's size could not be estimated before step %d (dumping "
                           "unchecked): %s: %s", steps.captured_step, type(exc).__name__, exc)
            return
        logger.info("NpuDumpHook: size estimate before step %d: %s", steps.captured_step, self.estimate.describe())

    def _estimate(self, walk: Any, run_context: Any, dump: Any, steps: Any) -> None:
        options = dump.options
        dumps = dump.dumping and not dump.golden_only and options.enabled
        count = dumped_steps(options, steps.captured_step, steps.max_steps) if dumps else 0
        feeds = getattr(run_context.original_args, "feed_dict", None)
        scratch = dump.capture is not None and not dump.reference and dumps
        device = device_model(dump.backend, _tf.session_config_of(getattr(run_context, "session", None)))
        added = getattr(device.plan, "added_ops", ())
        self.estimate = estimate(walk.executed(), walk.index.graph, options, count, dump.reference, scratch, feeds,
                                 added, device, walk.index.edges, walk.index, getattr(dump.capture, "fed_sizes", None))

    def section(self, dump: Any) -> Optional[Dict[str, Any]]:
        """``{"estimate", "actual", "refused"}``: bytes estimated before the step and written."""
        if self.estimate is None:
            return None
        report = dump.emulator_summary() or {}
        step_dirs = [entry.get("dir") for entry in report.get("steps", ())] if report else []
        actual = {"dump_bytes": dir_bytes(step_dirs) if dump.backend.captures else None,
                  "golden_bytes": dir_bytes([dump.golden_dir]) if dump.golden_dir else None}
        return {"estimate": self.estimate.as_dict(), "actual": actual, "refused": self.refused}
