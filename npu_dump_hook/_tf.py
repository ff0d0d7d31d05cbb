"""The only module that imports TensorFlow or npu_bridge.

Everything TF-specific that differs between TF 1.15 (Ascend images) and TF 2.x
(through ``tf.compat.v1``) is resolved here, lazily, so that importing
``npu_dump_hook`` stays free of TensorFlow.
"""
import importlib
import importlib.util
from typing import Any, Tuple

__all__ = [
    "tf_v1",
    "tf_version",
    "npu_bridge_available",
    "npu_dump_config_classes",
    "config_pb2",
    "rewriter_config_pb2",
    "attr_value_pb2",
    "estimator_module",
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
