"""The dump run: the backend, the capture of dumped steps, the initial-state checkpoint, the emulated dump.

Contract (the hook calls these; every method is a no-op where this rank or backend has nothing to do)::

    dump = DumpRun(layout, options, backend, reference, ranks, save_initial_state)  # construction
    dump.apply_graph_env()                    # begin(): DUMP_GRAPH_PATH -> the run folder
    dump.check_graph(graph)                   # begin(): dump_layer names ops of the graph
    dump.write_model_graph(graph_def, guard)  # begin(): tf/graph.pbtxt, the model as trained
    dump.begin(variables)                     # the initial-state Saver (graph editable)
    dump.begin_backend(graph, device_id, index, editable)   # backend.begin, the capture's dump ops
    dump.session_started()
    dump.save_initial_state(session, guard)   # before the captured step: run folder/init/
    args = dump.capture_args(run_context, step, captured_step, walk, also_read, guard)  # None: none
    dump.finish_step(step, captured_step, guard)           # after the step: golden .npy + manifest, emulated dump
    dump.end()                                # DUMP_GRAPH_PATH unset again, empty folders removed

Which backend writes the dump is an object (:mod:`npu_dump_hook.backends`), asked, never
switched on. The golden set is the captured step only; an emulating backend dumps every step
``dump_step`` selects (as GE does) from a capture into the scratch folder. A failed capture
leaves no scratch folder and renames a partial golden folder to ``golden.incomplete``.
"""
import logging
import os
import shutil
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple  # noqa: F401 (type comments)

from .. import _tf
from .._atomic import atomic_write_bytes
from .._phases import InFlight, test_pause
from ._capture_memory import IN_MEMORY_BYTES
from ._graph_text import graph_def_text
from .capture import TensorCapture
from .collector import CollectorPause
from .control_flow import census
from ..backends import golden_in_run, reference_default
from ..config import apply_graph_dump_env
from ..constants import ENV_OPTIONS, INCOMPLETE_STEP_MARKER
from ..errors import BundleError, OptionError
from ..options import DumpOptions
from .golden_capture import golden_report
from ..run_record import RunLayout, dumps_on_this_rank, rank_and_device
from .guard import HOOK_LOGGER, FailureGuard
from .walk import GraphIndex, StepWalk

__all__ = ["DumpRun", "write_graph_text", "model_graph_def", "default_options", "reference_choice", "numerics_text", "check_writable_dir",
           "INCOMPLETE_SUFFIX"]

logger = logging.getLogger(HOOK_LOGGER)

#: A golden folder whose capture failed is renamed with this suffix (never bundled as golden).
INCOMPLETE_SUFFIX = ".incomplete"


def write_graph_text(graph_def: Any, path: str) -> None:
    """``graph_def`` as ``tf.io.write_graph`` writes its text form to ``path`` (the same bytes);
    a failed write is a :class:`BundleError` naming the path."""
    tf = _tf.tf_v1()
    try:
        text = _graph_text(graph_def)
        if text is not None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write_bytes(path, text.encode("utf-8"))
        else:
            tf.train.write_graph(graph_def, os.path.dirname(path), os.path.basename(path))
    except OSError as exc:  # a full disk, a file-size limit: ours, naming the path
        raise BundleError("NpuDumpHook: writing the model graph to {} failed: {}".format(path, exc), path) from exc
    except tf.errors.OpError as exc:
        raise BundleError("NpuDumpHook: writing the model graph to {} failed: {}".format(path, exc.message),
                          path) from exc


def model_graph_def(graph: Any, name: Optional[Callable[[Any], str]] = None) -> Any:
    """``graph.as_graph_def(add_shapes=True)``, the same message. Without a function library on
    TF 1.15 (:func:`~npu_dump_hook._tf.graph_may_hold_functions`) the ``_output_shapes`` lists are
    filled here as TF fills them (each node's outputs' static shapes, in order), each distinct
    shape's proto made once: a 2,000-op graph has a few dozen shapes, TF makes one per tensor
    (~0.015 s CPU). With a library, or on TF 2.x, TensorFlow's own (it annotates functions too).
    ``name(op)``: ``op.name`` (a :class:`~npu_dump_hook.train.walk.GraphIndex`'s, read once)."""
    if _tf.graph_may_hold_functions(graph):
        return graph.as_graph_def(add_shapes=True)
    graph_def = graph.as_graph_def(add_shapes=False)
    protos = {}  # type: Dict[Any, Any]
    for node, op in _nodes_and_ops(graph, graph_def.node, name or _name_of):
        outputs = op.outputs
        if outputs:
            node.attr["_output_shapes"].list.shape.extend([_shape_proto(output, protos) for output in outputs])
    return graph_def


def _nodes_and_ops(graph: Any, nodes: Sequence[Any], name: Callable[[Any], str]) -> Iterator[Tuple[Any, Any]]:
    """Each GraphDef node with its op. TensorFlow writes the nodes in the order the ops were made,
    the order ``get_operations`` lists them: each pair's names are compared, and a node that is not
    its op's (or a count that differs) is looked up by name (``get_operation_by_name`` for every
    node costs ~0.004 s more for 2,000 ops than pairing them; TF's own add_shapes reads the private
    ``_nodes_by_name``)."""
    ops = graph.get_operations()
    if len(ops) != len(nodes):
        ops = [None] * len(nodes)
    for node, op in zip(nodes, ops):
        node_name = node.name
        yield node, op if op is not None and name(op) == node_name else graph.get_operation_by_name(node_name)


def _name_of(op: Any) -> str:
    return op.name


def _shape_proto(tensor: Any, protos: Dict[Any, Any]) -> Any:
    shape = tensor.get_shape()
    key = None if shape.dims is None else tuple(shape.as_list())  # None: unknown rank; None dims: unknown sizes
    proto = protos.get(key)
    if proto is None:
        proto = protos[key] = shape.as_proto()
    return proto


def _graph_text(graph_def: Any) -> Optional[str]:
    """``tf.io.write_graph``'s text of ``graph_def`` printed faster, or None on a big-endian host
    (where write_graph byte-swaps tensor contents first): protobuf's C++ printer where it prints
    the same text, else ``text_format``'s text node by node (:mod:`._graph_text`)."""
    if sys.byteorder != "little":
        return None
    if _native_text_format() and not graph_def.HasField("library"):
        return str(graph_def)
    return graph_def_text(graph_def)


def _native_text_format() -> bool:
    """Protobuf runs on its C++ implementation (TF 1.15's protobuf 3.x): ``str(message)`` is its C++
    text printer, whose text of a GraphDef without function library is ``tf.io.write_graph``'s
    byte for byte (``text_format.MessageToString`` with ``float_format=''``) at a fifteenth of the
    CPU (tests/test_graph_text.py checks the bytes). A library's maps with integer keys differ (C++
    prints ``key: 0``, Python leaves it out); other implementations (upb, TF 2.x) print differently
    (map order, float digits): :func:`graph_def_text` prints those."""
    from google.protobuf.internal import api_implementation

    return api_implementation.Type() == "cpp"


def default_options(layout: RunLayout) -> DumpOptions:
    """NPU_DUMP_* variables when any is set (dumping into the run folder unless NPU_DUMP_PATH
    names one); else a data dump into the run folder."""
    if any(var in os.environ for var in ENV_OPTIONS.values()):
        environ = dict(os.environ)
        environ.setdefault(ENV_OPTIONS["dump_path"], layout.dump_dir)
        return DumpOptions.from_env(environ)
    return DumpOptions(enable_dump=True, dump_path=layout.dump_dir)


class DumpRun(object):
    """What this run dumps and captures, and how (see the module doc)."""

    def __init__(self, layout: RunLayout, options: DumpOptions, backend: Any, reference: Optional[bool],
                 ranks: Optional[Sequence[int]], save_initial_state: bool) -> None:
        self.layout = layout
        self.options = options
        self.backend = backend
        self.golden_only = bool(getattr(backend, "golden_only", False))
        self.dumping = dumps_on_this_rank(ranks)
        self.backend_name = backend.name if self.dumping else "none"  # run.json: this rank dumped nothing
        self.reference = reference_choice(reference, backend) and self.dumping
        if not self.dumping:
            # On an NPU this rank's session config still carries the dump options: build it
            # from DumpOptions() on the ranks that should not dump (see README).
            logger.info("NpuDumpHook: rank %s is not in ranks=%s: no dump on this rank",
                        rank_and_device()["rank"], ranks)
        self.golden_dir = layout.golden_dir if self.reference else None
        # A golden run restores the NPU bundle's checkpoint; saving its own would only repeat it.
        self.save_initial = save_initial_state and not self.golden_only
        self.capture = None  # type: Optional[TensorCapture]
        self.initial_state_path = None  # type: Optional[str]
        self.reference_report = None  # type: Optional[Dict[str, Any]]
        self.graph_env = {}  # type: Dict[str, Any]
        self._saver = None  # type: Any
        self._capturing = False
        self._census = None  # type: Any   # the captured step's control-flow census, or its executed ops
        # From a capture's fetches to its last file: an interruption (Ctrl-C, SIGTERM, a TF error)
        # leaves no scratch and no golden folder that looks complete (undone at exit).
        self._in_flight = InFlight(self.abandon_capture)
        # Python's cyclic collector off for a captured step's window (golden or emulated), as
        # ReferenceCapture has it (train/collector.py: the graph's full collection would otherwise
        # fall inside the step)
        self._collector = CollectorPause()

    def begin(self, variables: List[Any]) -> None:
        """Graph still editable, after the model graph is written: the initial-state Saver."""
        if self.save_initial and variables:
            self._saver = _tf.tf_v1().train.Saver(
                var_list=variables, sharded=False, name="npu_dump_hook_initial_state",
                max_to_keep=1, save_relative_paths=True,
            )

    def begin_backend(self, graph: Any, device_id: Any, index: GraphIndex, editable: bool = False) -> None:
        """After the golden run's restore Saver: the backend's setup and the capture (``editable``:
        the graph stays editable until the captured step, see :class:`TensorCapture`)."""
        if self.dumping:
            self.backend.begin(graph, self.options, device_id)
        if self._backend_captures() or self.reference:
            self.capture = TensorCapture(graph, self.layout.capture_dir, npy_dir=self.golden_dir, index=index,
                                         editable=editable)

    #: The GraphDef ``begin()`` writes (a function of the module: no state of the run).
    model_graph_def = staticmethod(model_graph_def)

    def write_model_graph(self, graph_def: Any, guard: FailureGuard) -> None:
        """The model graph as trained, before the hook adds its own Saver and capture ops:
        ``{run folder}/tf/graph.pbtxt`` (begin(); again at the captured step when it grew)."""
        path = self.layout.tf_graph
        with guard("writing the model graph to {}".format(path)):
            write_graph_text(graph_def, path)

    def apply_graph_env(self) -> None:
        """Point DUMP_GRAPH_PATH at the run folder (unless the user set it)."""
        self.graph_env = apply_graph_dump_env(self.layout.graph_dir)

    def session_started(self) -> None:
        if self.dumping:
            self.backend.session_started()
            self._mark_own_dump_folder()

    def _mark_own_dump_folder(self) -> None:
        marker = self._own_dump_marker()
        if marker is None:
            return
        try:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            with open(marker, "w") as handle:
                handle.write("NPU run of pid {} dumps into this folder and has not ended (a process that was "
                             "interrupted or killed leaves this marker)\n".format(os.getpid()))
        except OSError as exc:  # best effort: training goes on, a later collection just cannot tell
            logger.error("NpuDumpHook: could not mark the dump folder %s: %s", marker, exc)

    def run_ended(self) -> None:
        """The training ended (the hook's end()): the NPU run's own dump folder is no longer marked."""
        marker = self._own_dump_marker()
        if marker is not None and os.path.lexists(marker):
            os.unlink(marker)

    def _own_dump_marker(self) -> Optional[str]:
        """Backend "npu": GE writes the dump files, so the hook cannot mark a step folder before
        its first file; it marks the run's dump folder instead, but only when that folder is this
        run's own (the default, run folder/dump): a dump_path of the user's is never written to."""
        if not self.dumping or self.backend.captures or self.golden_only or not self.options.enabled:
            return None
        if os.path.abspath(self.options.dump_path) != os.path.abspath(self.layout.dump_dir):
            return None
        return os.path.join(self.layout.dump_dir, INCOMPLETE_STEP_MARKER)

    def save_initial_state(self, session: Any, guard: FailureGuard) -> None:
        """Before the captured step: the variables into run folder/init/ (once)."""
        if self._saver is None or self.initial_state_path is not None:
            return
        prefix = self.layout.init_prefix
        with guard("saving the initial state to {}".format(prefix)):
            try:
                self.initial_state_path = self._saver.save(session, prefix, write_meta_graph=False)
            except _tf.tf_v1().errors.OpError as exc:
                # e.g. OutOfRangeError from a file-size limit, which MonitoredSession would take for
                # the end of the data ("no training step ran"): ours, naming the path
                raise BundleError("NpuDumpHook: saving the initial state to {} failed: {}: {}".format(
                    prefix, type(exc).__name__, exc.message), prefix) from exc
            logger.info("NpuDumpHook: initial state saved to %s", self.initial_state_path)

    def captures_step(self, step: int, captured_step: int) -> bool:
        """A capture runs at this step: the golden set (captured step) or an emulated dump step."""
        return self.capture is not None and (self._golden_step(step, captured_step) or self._emulates_step(step))

    def capture_args(self, run_context: Any, step: int, captured_step: int, walk: StepWalk, also_read: Any,
                     guard: FailureGuard) -> Any:
        """The capture's ``SessionRunArgs`` for this step, or None (no capture, or it failed, not strict)."""
        self._collector.resume()  # still paused only when the previous captured step raised
        self._capturing = self.captures_step(step, captured_step)
        if step == captured_step:
            self._census = (self._user_ops(walk.executed()), None)
        if not self._capturing:
            return self._warm_args(run_context, step, captured_step, walk, guard)
        args = None
        self._collector.pause()  # golden or emulated: either allocates a file's worth per tensor
        with guard("preparing the capture of step {}".format(step), self.abandon_capture):
            self.capture.use(walk, also_read)
            args = self.capture.run_args(run_context)
        self._capturing = args is not None  # None: the guard logged a failure (strict=False)
        if self._capturing:
            self._in_flight.start()
        else:  # the guard logged a failure (strict=False) and abandoned the capture
            self._collector.resume()
        return args

    def _warm_args(self, run_context: Any, step: int, captured_step: int, walk: StepWalk,
                   guard: FailureGuard) -> Any:
        """A step before the captured one fetches what the capture will (values dropped), so the
        captured step reuses the executor TensorFlow built for the first step
        (:meth:`~npu_dump_hook.train.capture.TensorCapture.warm_args`); None otherwise."""
        if self.capture is None or step >= captured_step:
            return None
        args = None
        with guard("preparing the capture's fetches at step {}".format(step)):
            args = self.capture.warm_args(run_context, walk)
        return args

    def finish_step(self, step: int, captured_step: int, guard: FailureGuard) -> None:
        """After a captured step: the golden files and manifest, or the emulated dump of the step."""
        if not self._capturing:
            return
        self._capturing = False
        try:
            with guard("writing the dump of step {}".format(step), self.abandon_capture):
                self._write_step(step, captured_step)
        finally:
            self._in_flight.stop()
            self._collector.resume()

    def _write_step(self, step: int, captured_step: int) -> None:
        golden = self._golden_step(step, captured_step)
        test_pause("capture")
        stamp = int(time.time() * 1000000)
        clock = getattr(self.backend, "step_time", None) if self._emulates_step(step) else None
        # Only an emulated step's dump reads the written arrays again: keep them in memory for it
        self.capture.in_memory_bytes = IN_MEMORY_BYTES if self._emulates_step(step) else 0
        result = self.capture.finish(clock(stamp) if clock is not None else stamp, to_scratch=not golden)
        if step == captured_step and isinstance(self._census, tuple):
            self._census = (self._census[0], result)
            self.control_flow()  # now, while the captured files (an If's predicate) are still there
        if self._emulates_step(step):
            self.backend.write_step(result, step)
        if golden:
            test_pause("golden")
            self.reference_report = golden_report(result, self.golden_dir)
        else:
            self.capture.cleanup()  # scratch .npy files served the emulator only

    def _user_ops(self, executed: List[Any]) -> List[Any]:
        """``executed`` without the ops the emulated NPU's numerics rewrite added (a fault's scale, the
        float16 rounding): no dump file is due for them, so the control-flow census must not count them."""
        added = getattr(getattr(self.backend, "plan", None), "added_ops", None)
        return [entry for entry in executed if entry[0].name not in added] if added else list(executed)

    def control_flow(self) -> Optional[Dict[str, Any]]:
        """The captured step's control-flow census (:mod:`npu_dump_hook.train.control_flow`), or
        None when no step was captured or it cannot be read (a record never stops the run)."""
        if isinstance(self._census, tuple):
            executed, captured = self._census
            try:
                self._census = census(executed, executed[0][0].graph, captured) if executed else None
            except Exception as exc:  # noqa: BLE001 - see docstring
                logger.warning("NpuDumpHook: the control-flow coverage was not recorded: %s: %s",
                               type(exc).__name__, exc)
                self._census = None
        return self._census

    def abandon_capture(self) -> None:
        """After a failed capture step: no scratch left behind, and no golden folder that looks
        complete (its .npy files without golden_manifest.json) -- it becomes golden.incomplete.
        Also run at exit when a capture was interrupted (see :mod:`npu_dump_hook._phases`)."""
        self._collector.resume()
        self.capture.cleanup()
        if self.golden_dir and os.path.isdir(self.golden_dir) and self.reference_report is None:
            aside = self.golden_dir + INCOMPLETE_SUFFIX
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(self.golden_dir, aside)

    def discard(self, made_dirs: Sequence[str]) -> None:
        """A dump refused before its step (:mod:`.sizing`): nothing of this run is left behind -- its
        run folder, the emulator's (empty) time folder, the output and bundle folders it created when
        empty -- and DUMP_GRAPH_PATH is unset. Nothing in dump_path is touched but that empty time folder."""
        self.end()
        shutil.rmtree(self.layout.root, ignore_errors=True)
        time_dir = getattr(self.backend, "time_dir", None) if self.backend.captures else None
        empty = [os.path.join(self.options.dump_path, time_dir)] if time_dir and self.options.dump_path else []
        for folder in empty + list(made_dirs):
            _remove_if_empty(folder)

    def end(self) -> None:
        """Unset the DUMP_GRAPH_PATH this run set, so a later run in the same process (a second
        hook, a notebook cell) gets its own graph folder instead of sharing this one. A golden
        run (nothing writes a graph or a dump) leaves no empty graph/ and dump/ folders behind.
        The collector is restored if a captured step raised before :meth:`finish_step`."""
        self._collector.resume()
        if self.golden_only:
            for folder in (self.layout.graph_dir, self.layout.dump_dir):
                _remove_if_empty(folder)
        env = self.graph_env
        if env.get("set_by_npu_dump_hook") and os.environ.get(env["variable"]) == env["value"]:
            del os.environ[env["variable"]]

    def graph_dirs(self, device_id: Any) -> Optional[tuple]:
        dirs = self.backend.graph_dirs(device_id) if self.dumping else None
        return tuple(dirs) if dirs else None

    def emulator_summary(self) -> Any:
        return self.backend.summary() if self.dumping else None

    def computes_npu_numerics(self) -> bool:
        """This rank's emulated run computed with NPU numerics (no golden tensors in it)."""
        return self.dumping and not golden_in_run(self.backend)

    def _golden_step(self, step: int, captured_step: int) -> bool:
        """The reference (golden) set is the captured step only."""
        return self.reference and step == captured_step

    def _backend_captures(self) -> bool:
        """The backend writes dump files from captured steps (the emulator), and dumping is on."""
        return self.dumping and self.backend.captures and self.options.enabled

    def _emulates_step(self, step: int) -> bool:
        """The emulator dumps every step dump_step selects, as GE does."""
        return self._backend_captures() and self.options.dumps_step(step)

    def check_graph(self, graph: Any) -> None:
        """dump_layer names that are no op of the graph would silently dump nothing."""
        if not (self.dumping and self.options.enable_dump and self.options.layers):
            return
        missing = [name for name in self.options.layers if _op_or_none(graph, name) is None]
        if missing:
            raise OptionError("dump_layer", self.options.dump_layer,
                              "names op(s) that are not in the graph: {}".format(", ".join(missing)))


def reference_choice(reference: Optional[bool], backend: Any) -> bool:
    """``reference=`` resolved for ``backend`` (None: :func:`reference_default`)."""
    if reference is None:
        return reference_default(backend)
    if reference and not golden_in_run(backend):
        raise OptionError("reference", reference, "this emulated run computes with NPU numerics ({}), so its "
                                                  "tensors are no golden; make the golden in a second run with "
                                                  "backend='reference', initial_state=<this run's bundle>".format(
                                                      numerics_text(backend)))
    if not reference and getattr(backend, "golden_only", False):
        raise OptionError("reference", reference, "the reference backend's only product is the golden capture")
    return bool(reference)


def numerics_text(backend: Any) -> str:
    faults = getattr(backend, "faults", None) or {}
    return "profile {}{}".format(getattr(backend, "profile", "?"),
                                 ", faults on {}".format(", ".join(sorted(faults))) if faults else "")


def check_writable_dir(option: str, given: Optional[str], path: str) -> None:
    """Create ``path`` and require it to be a writable folder, or raise OptionError naming ``option``."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OptionError(option, given or path, "cannot create {}: {}".format(path, exc.strerror or exc))
    if not os.access(path, os.W_OK | os.X_OK):
        raise OptionError(option, given or path, "must be a writable folder: " + path)


def _remove_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:  # not empty (the user's own dump_path, say) or already gone
        pass


def _op_or_none(graph: Any, name: str) -> Any:
    try:
        return graph.get_operation_by_name(name)
    except KeyError:
        return None
