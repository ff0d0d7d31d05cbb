"""Double of ``npu_bridge.npu_init``: what ``from npu_bridge.npu_init import *`` gives a script.

Reference §13 lists the names; like the real module this one has no ``__all__``, so the star
import brings every public name below (TensorFlow's ``config_pb2``, ``rewriter_config_pb2``,
``RewriterConfig`` and ``session`` included). The session-config helpers follow reference §3;
the double does not patch ``tf.Session`` on import (adapters up to r1.8.0 did not either, §12 item 6).
"""
import os

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2  # noqa: F401
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig
from tensorflow.python.client import session  # noqa: F401

from npu_bridge.estimator import npu_ops  # noqa: F401
from npu_bridge.estimator.npu import keras_to_npu, util  # noqa: F401
from npu_bridge.estimator.npu.npu_config import DumpConfig, NPURunConfig  # noqa: F401
from npu_bridge.estimator.npu.npu_estimator import NPUEstimator, NPUEstimatorSpec  # noqa: F401
from npu_bridge.estimator.npu.npu_hook import NPUBroadcastGlobalVariablesHook
from npu_bridge.estimator.npu.npu_loss_scale_manager import (  # noqa: F401
    ExponentialUpdateLossScaleManager, FixedLossScaleManager)
from npu_bridge.estimator.npu.npu_loss_scale_optimizer import NPULossScaleOptimizer  # noqa: F401
from npu_bridge.estimator.npu.npu_optimizer import (  # noqa: F401
    NPUDistributedOptimizer, npu_distributed_optimizer_wrapper)
from npu_bridge.hccl import hccl_ops  # noqa: F401


def npu_config_proto(config_proto=None):
    """``config_proto`` (a new ``ConfigProto`` when None) with an ``NpuOptimizer`` entry (reused when
    present; a new one also turns ``memory_optimization`` off), soft placement on, device placement
    logging off, ``remapping`` off and XLA's ``global_jit_level`` off."""
    config = config_proto if isinstance(config_proto, config_pb2.ConfigProto) else config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    if not any(entry.name == "NpuOptimizer" for entry in rewrite.custom_optimizers):
        rewrite.custom_optimizers.add().name = "NpuOptimizer"
        rewrite.memory_optimization = RewriterConfig.OFF
    config.allow_soft_placement = True
    config.log_device_placement = False
    rewrite.remapping = RewriterConfig.OFF
    config.graph_options.optimizer_options.global_jit_level = config_pb2.OptimizerOptions.OFF
    return config


def npu_session_config_init(session_config=None):
    """A session config made ready for the NPU: :func:`npu_config_proto` of it."""
    return npu_config_proto(session_config)


def npu_run_config_init(run_config=None):
    """``run_config`` (a new ``RunConfig`` when None) whose session config went through
    :func:`npu_session_config_init`."""
    if not isinstance(run_config, tf.estimator.RunConfig):
        run_config = tf.estimator.RunConfig()
    return run_config.replace(session_config=npu_session_config_init(run_config.session_config))


def npu_hooks_append(hooks_list=None):
    """``hooks_list`` (a new list when None) with an ``NPUBroadcastGlobalVariablesHook(0, RANK_ID)``."""
    hooks = hooks_list if isinstance(hooks_list, list) else []
    hooks.append(NPUBroadcastGlobalVariablesHook(0, int(os.environ.get("RANK_ID") or 0)))
    return hooks
