"""The only module that imports TensorFlow or npu_bridge.

Everything TF-specific that differs between TF 1.15 (Ascend images) and TF 2.x
(through ``tf.compat.v1``) is resolved here, lazily, so that importing
``npu_dump_hook`` stays free of TensorFlow. Each difference is one function whose docstring
names the versions it covers:

==========================  ===============================  ===============================
function                    TF 1.15                          TF 2.x (2.15 tested)
==========================  ===============================  ===============================
:func:`debug_identity`      ``Graph.create_op`` (the hidden  ``tf.raw_ops.DebugIdentity``
                            op has no Python wrapper), plus
                            its OpDef in the Python registry
:func:`repeat_dataset`      ``gen_dataset_ops`` (private)    ``tf.raw_ops.RepeatDataset``
==========================  ===============================  ===============================

Private TensorFlow APIs used on both (present since TF 1.x, read defensively):
``session.register_session_run_conversion_functions`` (:func:`register_fetch_conversion`),
``Operation._update_input`` and ``Operation._control_flow_context`` (used on graph objects by
the callers; no import needed), ``Graph._create_op_internal`` (:func:`debug_identity`; falls
back to the public paths when absent). For :mod:`npu_dump_hook.runner` (injection into unmodified
scripts): the modules named by :data:`SESSION_MODULE`, :data:`MONITORED_SESSION_MODULE` and
:data:`ESTIMATOR_MODULE`, ``_MonitoredSession`` and its ``_CoordinatedSessionCreator``, the
``_config`` of the session creators and the ``_session_config`` of ``Estimator`` (see
:func:`monitored_session_classes`, :func:`session_creator_config`, :func:`estimator_session_config`).
"""
import contextlib
import copy
import importlib
import importlib.util
import os
import sys
import types
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "const_value",
    "tf_v1",
    "tf_version",
    "npu_bridge_available",
    "npu_bridge_origin",
    "npu_dump_config_classes",
    "config_pb2",
    "rewriter_config_pb2",
    "attr_value_pb2",
    "estimator_module",
    "types_pb2",
    "op_def",
    "debug_identity",
    "register_fetch_conversion",
    "repeat_dataset",
    "quiet_tensorflow_logs",
    "SESSION_MODULE",
    "KERAS_TRAINING_MODULES",
    "executing_eagerly_if_loaded",
    "MONITORED_SESSION_MODULE",
    "ESTIMATOR_MODULE",
    "session_classes",
    "monitored_session_classes",
    "estimator_class",
    "session_creator_config",
    "session_config_of",
    "with_session_creator_config",
    "estimator_session_config",
    "set_estimator_session_config",
    "estimator_run_config",
    "set_estimator_model_dir",
    "latest_checkpoint",
    "op_was_imported",
    "shapes_with_feeds",
    "graph_runtime",
]

#: Where ``tf.compat.v1.Session``, ``InteractiveSession`` and ``BaseSession`` are defined, under the
#: name in ``sys.modules`` (TF 1.15: the code lives in ``tensorflow_core`` but is imported under
#: ``tensorflow.*``; TF 2.x: the same name).
SESSION_MODULE = "tensorflow.python.client.session"
#: Where ``MonitoredSession``, ``MonitoredTrainingSession`` and the session creators are defined
#: (TF 1.15 and 2.x, as :data:`SESSION_MODULE`).
MONITORED_SESSION_MODULE = "tensorflow.python.training.monitored_session"
#: Where ``tf.estimator.Estimator`` is defined: the tensorflow-estimator package of both TF 1.15
#: (imported with ``tensorflow``) and TF 2.x (imported on first use of ``tf.estimator``).
ESTIMATOR_MODULE = "tensorflow_estimator.python.estimator.estimator"
#: Where Keras's ``Model`` (``fit``, ``train_on_batch``) is defined: the keras package of TF 2.13+
#: (``tf.keras`` of TF 2.15; ``training_v1``: the Model class it uses with eager execution off), and
#: TensorFlow's own copy (``tf.keras`` of TF 1.15 and 2.x up to 2.5).
KERAS_TRAINING_MODULES = ("keras.src.engine.training", "keras.src.engine.training_v1",
                          "tensorflow.python.keras.engine.training")


def tf_v1() -> Any:
    """``tf.compat.v1`` (also present in TF 1.15), imported on first use."""
    import tensorflow

    return tensorflow.compat.v1


def executing_eagerly_if_loaded() -> bool:
    """Whether TensorFlow, when the script has imported it, executes eagerly here (TF 2.x by
    default; TF 1.15 only after ``enable_eager_execution``); False before it is imported."""
    tensorflow = sys.modules.get("tensorflow")
    executing = getattr(tensorflow, "executing_eagerly", None)
    return bool(executing()) if executing is not None else False


def tf_version() -> str:
    import tensorflow

    return str(tensorflow.__version__)


def npu_bridge_available() -> bool:
    """True when the Ascend TF adapter (``npu_bridge``) can be imported."""
    try:
        return importlib.util.find_spec("npu_bridge") is not None
    except (ImportError, ValueError):
        return False


def npu_bridge_origin() -> Optional[str]:
    """The folder (or file) ``npu_bridge`` imports from; None when it cannot be imported."""
    try:
        spec = importlib.util.find_spec("npu_bridge")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or ())
    return locations[0] if locations else spec.origin


def npu_dump_config_classes() -> Tuple[type, type]:
    """``(DumpConfig, NPURunConfig)`` from npu_bridge (ImportError when absent)."""
    module = importlib.import_module("npu_bridge.estimator.npu.npu_config")
    return module.DumpConfig, module.NPURunConfig


def config_pb2() -> Any:
    from tensorflow.core.protobuf import config_pb2 as module

    return module


def rewriter_config_pb2() -> Any:
    from tensorflow.core.protobuf import rewriter_config_pb2 as module

    return module


def attr_value_pb2() -> Any:
    from tensorflow.core.framework import attr_value_pb2 as module

    return module


def types_pb2() -> Any:
    from tensorflow.core.framework import types_pb2 as module

    return module


def op_def(op_type: str) -> Optional[Any]:
    """The registered OpDef of ``op_type``, or None (TF 2.x: ``op_def_registry.get``; TF 1.15:
    ``op_def_registry.get_registered_ops()``)."""
    from tensorflow.python.framework import op_def_registry

    getter = getattr(op_def_registry, "get", None)
    if getter is not None:
        return getter(op_type)
    return op_def_registry.get_registered_ops().get(op_type)


def estimator_module() -> Any:
    """``tf.estimator`` (TF 1.15 and the tensorflow-estimator package of TF 2.x)."""
    return tf_v1().estimator


def debug_identity(graph: Any, tensor: Any, tensor_name: str, debug_urls: List[str]) -> Any:
    """A ``DebugIdentity`` op on ``tensor`` that writes it to ``debug_urls`` (``file://`` URLs).

    The node is made directly from its op definition (attrs ``T``, ``tensor_name``,
    ``debug_urls``; the others take their defaults) through the private
    ``Graph._create_op_internal`` (TF 1.15 and 2.x; what the public ``Graph.create_op`` and the
    generated wrappers end in): a third of the time of ``tf.raw_ops.DebugIdentity``'s argument
    processing (0.2 against 0.6 ms a node), which counts when every tensor of a large graph
    gets one. Without it: ``tf.raw_ops.DebugIdentity`` (TF 2.x) or ``Graph.create_op`` (TF 1.15
    keeps the op out of ``tf.raw_ops``). All give the same node, file names and file contents.
    Called inside the caller's graph, name scope and device scopes.
    """
    create = getattr(graph, "_create_op_internal", None)
    raw = getattr(tf_v1().raw_ops, "DebugIdentity", None)
    if create is None and raw is not None:
        return raw(input=tensor, tensor_name=tensor_name, debug_urls=debug_urls)
    attr = attr_value_pb2().AttrValue
    dtype = tensor.dtype.base_dtype  # a reference tensor (VariableV2) is read as its value
    attrs = {
        "T": attr(type=dtype.as_datatype_enum),
        "tensor_name": attr(s=tensor_name.encode("utf-8")),
        "debug_urls": attr(list=attr.ListValue(s=[url.encode("utf-8") for url in debug_urls])),
    }
    op = (create or graph.create_op)("DebugIdentity", [tensor], [dtype], attrs=attrs, name="DebugIdentity")
    if raw is None:
        _register_python_op_def(op)
    return op.outputs[0]


def const_value(op: Any) -> Any:
    """The numpy array a ``Const`` op is made of (its ``value`` attribute: one attribute read and
    ``make_ndarray``, TF 1.15 and 2.x), the array a fetch of its output gives."""
    return tf_v1().make_ndarray(op.get_attr("value"))


def _register_python_op_def(op: Any) -> None:
    """TF 1.15: list ``op``'s OpDef in the Python op registry.

    TF 1.15 keeps a Python-side registry filled only by the ops that have Python wrappers;
    ``export_meta_graph`` (Estimator and ``Saver`` checkpoints write meta graphs) refuses a
    graph holding any other op ("Op DebugIdentity is used by the graph, but is not
    registered"). The OpDef is the one TensorFlow's C++ registry holds. TF 2.x reads the C++
    registry directly and needs nothing.
    """
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.framework import op_def_registry

    register = getattr(op_def_registry, "register_op_list", None)
    if register is not None and op.type not in op_def_registry.get_registered_ops():
        register(op_def_pb2.OpList(op=[op.op_def]))


def register_fetch_conversion(fetch_type: type, convert: Any) -> bool:
    """Teach ``Session.run`` to fetch objects of ``fetch_type`` (TF 1.15 and 2.x, private API).

    ``convert(obj) -> (list of tensors, callback taking their values)``. False when this
    TensorFlow lacks the hook; registering a type twice counts as done.
    """
    try:
        from tensorflow.python.client import session as tf_session

        tf_session.register_session_run_conversion_functions(fetch_type, convert)
    except ValueError:  # already registered (module reloaded)
        return True
    except (ImportError, AttributeError):
        return False
    return True


def repeat_dataset(input_dataset: Any, count: Any, output_types: Any, output_shapes: Any, name: str) -> Any:
    """A ``RepeatDataset`` node (TF 2.x: ``tf.raw_ops``; TF 1.15: its private gen_dataset_ops wrapper)."""
    raw = getattr(tf_v1().raw_ops, "RepeatDataset", None)
    if raw is None:
        from tensorflow.python.ops import gen_dataset_ops

        raw = gen_dataset_ops.repeat_dataset
        return raw(input_dataset, count, output_types=output_types, output_shapes=output_shapes, name=name)
    return raw(input_dataset=input_dataset, count=count, output_types=output_types,
               output_shapes=output_shapes, name=name)


def quiet_tensorflow_logs() -> None:
    """TensorFlow's Python logger at ERROR (both versions): for the demo's readable output."""
    import tensorflow

    tensorflow.get_logger().setLevel("ERROR")


def session_classes() -> Tuple[type, type, type]:
    """``(BaseSession, Session, InteractiveSession)`` of :data:`SESSION_MODULE` (TF 1.15 and 2.x).

    ``tf.compat.v1.Session`` (and TF 1.15's ``tf.Session``) is that ``Session``; ``run`` and
    ``close`` are defined on ``BaseSession`` only, ``__exit__`` on ``Session`` only, and
    ``InteractiveSession`` derives from ``BaseSession`` directly, with its own ``close``.
    Works while the module is still being imported (its classes exist once its code has run).
    """
    module = importlib.import_module(SESSION_MODULE)
    return module.BaseSession, module.Session, module.InteractiveSession


def monitored_session_classes() -> Tuple[type, Any, Tuple[type, ...]]:
    """``(_MonitoredSession, _CoordinatedSessionCreator or None, (ChiefSessionCreator, WorkerSessionCreator))``.

    TF 1.15 and 2.x (private): ``MonitoredSession`` and ``SingularMonitoredSession`` both run
    ``_MonitoredSession.__init__(self, session_creator, hooks, should_recover,
    stop_grace_period_secs=120)``, which begins the hooks and creates the session;
    ``MonitoredTrainingSession`` returns a ``MonitoredSession``. Every ``tf.Session`` a
    monitored session makes (the first and any recovery) is made inside
    ``_MonitoredSession._CoordinatedSessionCreator.create_session``.
    """
    module = importlib.import_module(MONITORED_SESSION_MODULE)
    base = module._MonitoredSession  # noqa: SLF001 - see docstring
    coordinated = getattr(base, "_CoordinatedSessionCreator", None)
    return base, coordinated, (module.ChiefSessionCreator, module.WorkerSessionCreator)


def estimator_class() -> type:
    """``tf.estimator.Estimator`` from :data:`ESTIMATOR_MODULE` (TF 1.15 and 2.x; NPUEstimator
    derives from it). ``Estimator.train(self, input_fn, hooks=None, steps=None, max_steps=None,
    saving_listeners=None)`` on both."""
    return importlib.import_module(ESTIMATOR_MODULE).Estimator


def session_creator_config(creator: Any) -> Any:
    """The ``ConfigProto`` (or None) a ``ChiefSessionCreator``/``WorkerSessionCreator`` creates its
    session with: the private ``_config`` both keep (TF 1.15 and 2.x)."""
    return getattr(creator, "_config", None)


def session_config_of(session: Any) -> Any:
    """The ``ConfigProto`` (or None) a ``tf.compat.v1.Session`` was created with: the private
    ``_config`` of ``BaseSession`` (TF 1.15 and 2.x)."""
    return getattr(session, "_config", None)


def with_session_creator_config(creator: Any, config: Any) -> Any:
    """A shallow copy of ``creator`` that creates its session with ``config`` (the caller's creator
    is left as it was; TF 1.15 and 2.x, private ``_config``)."""
    result = copy.copy(creator)
    result._config = config  # noqa: SLF001 - see docstring
    return result


def estimator_session_config(estimator: Any) -> Any:
    """The ``ConfigProto`` ``estimator.train`` gives ``MonitoredTrainingSession``: the private
    ``_session_config`` set in ``Estimator.__init__`` from ``RunConfig.session_config`` (TF 1.15 and
    2.x; NPUEstimator has put its ``NpuOptimizer`` entry there). None when absent."""
    return getattr(estimator, "_session_config", None)


def set_estimator_session_config(estimator: Any, config: Any) -> None:
    """Replace what :func:`estimator_session_config` returns (TF 1.15 and 2.x, private)."""
    estimator._session_config = config  # noqa: SLF001 - see docstring


def estimator_run_config(estimator: Any) -> Any:
    """The ``RunConfig`` an Estimator trains with: the private ``_config`` (the public ``config``
    property returns a copy; TF 1.15 and 2.x)."""
    return estimator._config  # noqa: SLF001 - see docstring


def set_estimator_model_dir(estimator: Any, run_config: Any, model_dir: str) -> None:
    """Make ``estimator`` save to and restore from ``model_dir``: its private ``_config`` and
    ``_model_dir``, both of which ``train``/``evaluate``/``predict`` read (TF 1.15 and 2.x)."""
    estimator._config = run_config  # noqa: SLF001 - see docstring
    estimator._model_dir = model_dir  # noqa: SLF001


def latest_checkpoint(folder: str) -> Optional[str]:
    """The prefix of the newest checkpoint the ``checkpoint`` file in ``folder`` names, or None."""
    return tf_v1().train.latest_checkpoint(folder)


def add_function_def(graph: Any, fdef: Any) -> None:
    """Add the FunctionDef ``fdef`` to ``graph``'s function library (TF 1.15 and 2.x).

    Through the legacy ``framework.function._from_definition`` and the private
    ``Graph._add_function``, present in both (TF 1.15 has no way to remove or replace a
    function, so callers add edited copies under new names).
    """
    from tensorflow.python.framework import function as legacy_function

    graph._add_function(legacy_function._from_definition(fdef))  # noqa: SLF001


def graph_may_hold_functions(graph: Any) -> bool:
    """False when ``graph``'s function library is known to be empty without serializing the graph.

    TF 1.15's C API counts the library's functions (``TF_GraphNumFunctions``); TF 2.x binds no
    such call in ``pywrap_tf_session``, so there the answer is True and the caller reads the
    library from the GraphDef as before."""
    from tensorflow.python import pywrap_tensorflow as c_api

    count = getattr(c_api, "TF_GraphNumFunctions", None)
    c_graph = getattr(graph, "_c_graph", None)  # noqa: SLF001 - the C graph the count is asked of
    if count is None or c_graph is None:
        return True
    return count(c_graph) > 0


def shapes_with_feeds(graph: Any, fed_shapes: Dict[str, Tuple[int, ...]]) -> Dict[str, Tuple[int, ...]]:
    """``{tensor name: shape}`` of every tensor of ``graph`` whose shape is fully known once the
    tensors of ``fed_shapes`` have those shapes: TensorFlow's own shape inference, run on a copy
    of ``graph`` (its ``GraphDef`` imported into a new graph with the fed tensors replaced by
    placeholders of the fed shapes; ``graph`` is not touched). A fully defined inferred shape is
    the shape the step computes (the kernels check it), so the sizes bound what a step holds.
    """
    v1 = tf_v1()
    prefix = "copy"
    with v1.Graph().as_default() as scratch:
        inputs = {}
        for number, (name, shape) in enumerate(sorted(fed_shapes.items())):
            dtype = graph.get_tensor_by_name(name).dtype.base_dtype
            inputs[name] = v1.placeholder(dtype, shape, name="fed{}".format(number))
        shapes = _shapes_of_c_import(graph, scratch, inputs, prefix)
        if shapes is not None:
            shapes.update((name, tuple(shape)) for name, shape in fed_shapes.items())
            return shapes
        v1.import_graph_def(graph.as_graph_def(), input_map=inputs, name=prefix)
        shapes = {}
        for op in scratch.get_operations():
            if not op.name.startswith(prefix + "/"):
                continue  # a placeholder standing for a feed
            for tensor in op.outputs:
                shape = tensor.get_shape()
                if shape.is_fully_defined():
                    shapes[tensor.name[len(prefix) + 1:]] = tuple(int(d) for d in shape.as_list())
    shapes.update((name, tuple(shape)) for name, shape in fed_shapes.items())  # a fed tensor holds the fed value
    return shapes


def _shapes_of_c_import(graph: Any, scratch: Any, inputs: Dict[str, Any], prefix: str) -> Optional[Dict[str, Tuple[int, ...]]]:
    """:func:`shapes_with_feeds`'s shapes from TensorFlow's C importer, or None where its bindings
    are not there.

    ``import_graph_def`` makes a full Python ``Operation`` for each imported op (about 0.25 ms each
    on TF 1.15, 0.1 ms on 2.15), only for the shapes to be read: here the C importer imports
    ``graph`` and the shapes are read where ``Tensor.get_shape`` reads them: TF 1.15's
    ``TF_GraphGetTensorShapeHelper`` on every output; TF 2.x's C++ ``PyOperation``/``PyTensor``
    (the bases of ``Operation``/``Tensor``) of every op, made bare, without the ``Operation``
    bookkeeping. The scratch graph is dropped after the call. Private API
    (``pywrap_tensorflow``/``pywrap_tf_session``, ``c_api_util``, ``Graph._c_graph``,
    ``Tensor._as_tf_output``).
    """
    from tensorflow.python.framework import c_api_util

    try:
        from tensorflow.python.client import pywrap_tf_session as c_api  # TF 2.x
    except ImportError:
        from tensorflow.python import pywrap_tensorflow as c_api  # TF 1.15
    if hasattr(c_api, "TF_GraphGetTensorShapeHelper"):
        read = _shapes_by_helper
    elif hasattr(c_api, "PyOperation") and hasattr(c_api.PyOperation, "_init_outputs"):
        read = _shapes_by_py_operation
    else:
        return None
    options = c_api_util.ScopedTFImportGraphDefOptions()
    c_api.TF_ImportGraphDefOptionsSetPrefix(options.options, prefix)
    for name, placeholder in inputs.items():
        op_name, index = name.rsplit(":", 1)
        c_api.TF_ImportGraphDefOptionsAddInputMapping(options.options, op_name, int(index),
                                                      placeholder._as_tf_output())  # noqa: SLF001

    def import_into_scratch() -> Any:
        with c_api_util.tf_buffer(_graph_def_bytes(c_api, graph)) as serialized:
            with _c_graph_of(scratch) as c_graph:
                return c_api_util.ScopedTFImportGraphDefResults(c_api.TF_GraphImportGraphDefWithResults(
                    c_graph, serialized, options.options))

    return read(c_api, graph, scratch, options.options, import_into_scratch)


def _graph_def_bytes(c_api: Any, graph: Any) -> bytes:
    """``graph``'s GraphDef as TF's C API serializes it: the bytes ``as_graph_def`` parses, here
    not parsed into Python and serialized again (TF 1.15: a third of a 2,000-op graph's import
    time). They may hold an empty ``library`` field, which ``as_graph_def`` strips and the
    importer ignores."""
    from tensorflow.python.framework import c_api_util

    with c_api_util.tf_buffer() as buffer:
        with _c_graph_of(graph) as c_graph:
            c_api.TF_GraphToGraphDef(c_graph, buffer)
        return bytes(c_api.TF_GetBuffer(buffer))


def _shapes_by_helper(c_api: Any, graph: Any, scratch: Any, options: Any,
                      import_into_scratch: Any) -> Optional[Dict[str, Tuple[int, ...]]]:
    """TF 1.15: every output of ``graph`` returned by the importer, its shape from
    ``TF_GraphGetTensorShapeHelper`` (an unknown dimension is -1)."""
    names = [tensor.name for op in graph.get_operations() for tensor in op.outputs]
    for name in names:
        op_name, index = name.rsplit(":", 1)
        c_api.TF_ImportGraphDefOptionsAddReturnOutput(options, op_name, int(index))
    results = import_into_scratch()  # kept: its outputs live in it
    outputs = c_api.TF_ImportGraphDefResultsReturnOutputs(results.results)
    if len(outputs) != len(names):
        return None
    shapes = {}  # type: Dict[str, Tuple[int, ...]]
    read, c_graph = c_api.TF_GraphGetTensorShapeHelper, scratch._c_graph  # noqa: SLF001 - read once, not per output
    for name, output in zip(names, outputs):
        dims, unknown_rank = read(c_graph, output)  # Python ints
        if not unknown_rank and -1 not in dims:
            shapes[name] = tuple(dims)
    return shapes


def _shapes_by_py_operation(c_api: Any, graph: Any, scratch: Any, options: Any,
                            import_into_scratch: Any) -> Optional[Dict[str, Tuple[int, ...]]]:
    """TF 2.x: every op of ``graph`` returned by the importer as a bare ``PyOperation`` of
    ``scratch``, its outputs' shapes from ``PyTensor._shape`` (an unknown dimension is None)."""
    from tensorflow.python.framework import ops

    names = [op.name for op in graph.get_operations()]
    for name in names:
        c_api.TF_ImportGraphDefOptionsAddReturnOperation(options, name)
    results = import_into_scratch()  # kept: its operations live in it
    c_ops = c_api.TF_ImportGraphDefResultsReturnOperations(results.results)
    if len(c_ops) != len(names):
        return None
    shapes = {}  # type: Dict[str, Tuple[int, ...]]
    for name, c_op in zip(names, c_ops):
        op = c_api.PyOperation(c_op, ops.SymbolicTensor)
        op.graph = scratch
        op._init_outputs()  # noqa: SLF001
        for tensor in op.outputs:
            dims, unknown_rank = tensor._shape  # noqa: SLF001
            if not unknown_rank and all(d is not None and d >= 0 for d in dims):
                shapes["{}:{}".format(name, tensor.value_index)] = tuple(int(d) for d in dims)
    return shapes


def _c_graph_of(graph: Any) -> Any:
    """A context giving ``graph``'s C graph: TF 2.x guards it (``_c_graph.get()``), TF 1.15 hands it out."""
    c_graph = graph._c_graph  # noqa: SLF001
    if hasattr(c_graph, "get"):
        return c_graph.get()
    return contextlib.nullcontext(c_graph)


#: The importer's function on the creation stack of an op imported from a GraphDef (TF 1.15).
_IMPORTER_FRAME = "_ProcessNewOps"


def op_was_imported(op: Any) -> bool:
    """Whether ``op`` came from a ``GraphDef``/``MetaGraphDef`` import (a SavedModel load,
    ``import_meta_graph``, ``import_graph_def``), not built by Python code: TF 2.x keeps no
    creation traceback for imported ops; TF 1.15 keeps one whose frames pass through the
    importer's ``_ProcessNewOps``."""
    try:
        frames = op.traceback
    except Exception:  # noqa: BLE001 - a traceback TensorFlow cannot convert: say built
        return False
    if frames is None:
        return True
    return any(_frame_name(frame) == _IMPORTER_FRAME for frame in frames)


def _frame_name(frame: Any) -> Any:
    """The function name of one traceback frame (a tuple on TF 1.15, a FrameSummary on 2.x)."""
    name = getattr(frame, "name", None)
    if name is None and isinstance(frame, tuple) and len(frame) > 2:
        name = frame[2]
    return name


_RUNTIME = []  # type: List[Any]


def graph_runtime(lean: bool = False) -> Any:
    """What replaying a GraphDef on CPU needs (TF 1.15 and 2.x), as a namespace: ``GraphDef``,
    ``ConfigProto``, ``Graph``, ``import_graph_def``, ``Session``, ``make_ndarray``, ``as_dtype``,
    ``version``, ``get_logger``.

    ``lean``: for a process of its own that uses nothing else of TensorFlow (the replay
    subprocess, :mod:`npu_dump_hook.op_replay`). When TensorFlow is not imported yet and its
    package holds its Python code itself (TF 2.x), the modules are imported without running
    ``tensorflow/__init__.py``, which builds the whole public API (``tf.compat``, ``tf.data``,
    ``tf.distribute``, autograph, feature columns): on TF 2.15 about 1.3 s of CPU instead of
    3.5 s. The C++ library is loaded all the same, so every op and kernel is registered.
    Afterwards only ``tensorflow.python.*`` / ``tensorflow.core.*`` work in that process. TF 1.15
    (its code in ``tensorflow_core``, 1.6-1.9 s of CPU to import) is imported as usual.
    """
    if _RUNTIME:
        return _RUNTIME[0]
    if lean and "tensorflow" not in sys.modules:
        _bare_tensorflow_package()
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import config_pb2 as config
    from tensorflow.python.client import session
    from tensorflow.python.framework import dtypes, importer, ops, tensor_util, versions
    from tensorflow.python.platform import tf_logging

    runtime = types.SimpleNamespace(
        GraphDef=graph_pb2.GraphDef, ConfigProto=config.ConfigProto, Graph=ops.Graph,
        import_graph_def=importer.import_graph_def, Session=session.Session,
        make_ndarray=tensor_util.MakeNdarray, as_dtype=dtypes.as_dtype, version=str(versions.__version__),
        get_logger=tf_logging.get_logger)
    _RUNTIME.append(runtime)
    return runtime


def _bare_tensorflow_package() -> bool:
    """Register the ``tensorflow`` package without running its ``__init__`` (see
    :func:`graph_runtime`); False (nothing done) where its Python code is not in it (TF 1.15)."""
    spec = importlib.util.find_spec("tensorflow")
    locations = list(getattr(spec, "submodule_search_locations", None) or ())
    if not locations or not os.path.isfile(os.path.join(locations[0], "python", "client", "session.py")):
        return False
    sys.modules["tensorflow"] = importlib.util.module_from_spec(spec)
    return True
