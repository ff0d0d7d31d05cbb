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
the callers; no import needed).
"""
import importlib
import importlib.util
from typing import Any, List, Tuple

__all__ = [
    "tf_v1",
    "tf_version",
    "npu_bridge_available",
    "npu_dump_config_classes",
    "config_pb2",
    "rewriter_config_pb2",
    "attr_value_pb2",
    "estimator_module",
    "debug_identity",
    "register_fetch_conversion",
    "repeat_dataset",
    "quiet_tensorflow_logs",
]


def tf_v1() -> Any:
    """``tf.compat.v1`` (also present in TF 1.15), imported on first use."""
    import tensorflow

    return tensorflow.compat.v1


def tf_version() -> str:
    import tensorflow

    return str(tensorflow.__version__)


def npu_bridge_available() -> bool:
    """True when the Ascend TF adapter (``npu_bridge``) can be imported."""
    try:
        return importlib.util.find_spec("npu_bridge") is not None
    except (ImportError, ValueError):
        return False


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


def estimator_module() -> Any:
    """``tf.estimator`` (TF 1.15 and the tensorflow-estimator package of TF 2.x)."""
    return tf_v1().estimator


def debug_identity(graph: Any, tensor: Any, tensor_name: str, debug_urls: List[str]) -> Any:
    """A ``DebugIdentity`` op on ``tensor`` that writes it to ``debug_urls`` (``file://`` URLs).

    TF 2.x exports the op as ``tf.raw_ops.DebugIdentity``. TF 1.15 registers the same kernel
    but keeps it out of ``tf.raw_ops`` (a hidden op without a Python wrapper), so there the
    node is made directly from its op definition (attrs ``T``, ``tensor_name``, ``debug_urls``;
    the others take their defaults). Both give the same node, file names and file contents.
    Called inside the caller's graph, name scope and device scopes.
    """
    raw = getattr(tf_v1().raw_ops, "DebugIdentity", None)
    if raw is not None:
        return raw(input=tensor, tensor_name=tensor_name, debug_urls=debug_urls)
    attr = attr_value_pb2().AttrValue
    dtype = tensor.dtype.base_dtype  # a reference tensor (VariableV2) is read as its value
    attrs = {
        "T": attr(type=dtype.as_datatype_enum),
        "tensor_name": attr(s=tensor_name.encode("utf-8")),
        "debug_urls": attr(list=attr.ListValue(s=[url.encode("utf-8") for url in debug_urls])),
    }
    op = graph.create_op("DebugIdentity", [tensor], [dtype], attrs=attrs, name="DebugIdentity")
    _register_python_op_def(op)
    return op.outputs[0]


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
