"""Double of ``npu_bridge.estimator.npu.npu_estimator``: ``NPUEstimator``'s config conversion
(reference §2, §2.1, §11 item 3) and ``NPUEstimatorSpec`` (§13)."""
import os

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from npu_bridge.estimator.npu.npu_config import NPURunConfig


def _as_bytes(value):
    return tf.compat.as_bytes(value)  # an int raises TypeError, as upstream


def load_session_config(config):
    """Fill the session config as NPUEstimator does: always append a new NpuOptimizer entry."""
    if not isinstance(config, NPURunConfig):
        raise ValueError("config must be NPURunConfig")
    proto = config.session_config if config.session_config is not None else config_pb2.ConfigProto()
    custom = proto.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    params = custom.parameter_map
    dump = config._dump_config
    params["enable_dump"].b = False if dump is None else dump._enable_dump
    params["enable_dump_debug"].b = False if dump is None else dump._enable_dump_debug
    if dump is not None:
        if dump._dump_path is not None:
            params["dump_path"].s = _as_bytes(dump._dump_path)
        if dump._dump_step is not None:
            params["dump_step"].s = _as_bytes(dump._dump_step)
        if dump._dump_mode is not None:
            params["dump_mode"].s = _as_bytes(dump._dump_mode)
            params["dump_debug_mode"].s = _as_bytes(dump._dump_debug_mode)  # upstream guards on dump_mode
        if dump.dump_data is not None:
            params["dump_data"].s = _as_bytes(dump.dump_data)
        if dump.dump_layer is not None:
            params["dump_layer"].s = _as_bytes(dump.dump_layer)
    params["enable_data_pre_proc"].b = config._enable_data_pre_proc
    params["mix_compile_mode"].b = config._mix_compile_mode
    params["use_off_line"].b = True
    params["iterations_per_loop"].i = config.iterations_per_loop
    params["graph_run_mode"].i = config._graph_run_mode
    params["enable_exception_dump"].i = config._enable_exception_dump
    params["deterministic"].i = config._deterministic
    if config._precision_mode is not None:
        params["precision_mode"].s = _as_bytes(config._precision_mode)
    return proto


class NPUEstimatorSpec(tf.estimator.EstimatorSpec):
    """``EstimatorSpec`` plus ``host_call`` ``(fn, tensors)``: on Ascend the tensors are sent to the
    host each step and ``fn`` runs there (summaries). The double keeps it (``spec.host_call``) and
    does not run it: it computes no training value."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=None, training_hooks=None, scaffold=None, evaluation_hooks=None,
                prediction_hooks=None, host_call=None):
        spec = super(NPUEstimatorSpec, cls).__new__(
            cls, mode, predictions=predictions, loss=loss, train_op=train_op, eval_metric_ops=eval_metric_ops,
            export_outputs=export_outputs, training_chief_hooks=training_chief_hooks,
            training_hooks=training_hooks, scaffold=scaffold, evaluation_hooks=evaluation_hooks,
            prediction_hooks=prediction_hooks)
        spec.host_call = host_call
        return spec


class NPUEstimator(tf.estimator.Estimator):
    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, job_start_file="",
                 warm_start_from=None):
        if not job_start_file and "JOB_ID" not in os.environ:
            raise ValueError("Load job info failed, please check whether JOB_ID is set in environment variable")
        proto = load_session_config(config)
        super(NPUEstimator, self).__init__(
            model_fn=model_fn, model_dir=model_dir, config=config.replace(session_config=proto), params=params,
            warm_start_from=warm_start_from,
        )
