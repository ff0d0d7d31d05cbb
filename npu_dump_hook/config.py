"""Config wrappers: DumpOptions -> ``ConfigProto`` / ``RunConfig`` / ``NPURunConfig``.

``session_config`` writes the keys the Ascend TF adapter reads from the
``NpuOptimizer`` custom-optimizer entry, with exactly the proto field types of
docs/reference/npu-bridge-dump-api.md §2.1 and §3::

    use_off_line        .b  True
    enable_dump         .b  options.enable_dump
    enable_dump_debug   .b  options.enable_dump_debug
    dump_path           .s  bytes of the absolute dump path   (when set)
    dump_step           .s  bytes                             (when set)
    dump_mode           .s  bytes                             (with enable_dump)
    dump_layer          .s  bytes                             (when set)
    dump_data           .s  bytes
    dump_debug_mode     .s  bytes                             (with enable_dump_debug)
    iterations_per_loop .i  1      (one session.run = one iteration, so the hook can stop after it)
    deterministic       .i  1      (when deterministic=True, the default)

and turns ``remapping`` and ``memory_optimization`` off, as the Ascend recipe
asks. Note: the Ascend docs write ``memory_optimization = RewriterConfig.OFF``,
which is the Toggle value 2 and so means ``MANUAL`` in TensorFlow's MemOptType
enum; we set ``NO_MEM_OPT``, which is what "off" means there.

The caller's proto is never mutated: a copy is returned. An existing
``NpuOptimizer`` entry is reused (the last one, since the adapter reads every
entry and the last entry holding a key wins); none is added twice.

``estimator_config`` returns an ``NPURunConfig`` carrying a ``DumpConfig`` when
npu_bridge is importable (``NPUEstimator`` always appends its own
``NpuOptimizer`` entry, so dump keys must travel in ``dump_config``), else a
plain ``tf.estimator.RunConfig`` whose session config carries the keys above.
Either way the dump run writes no checkpoint into the user's ``model_dir`` unless
``keep_checkpoints=True``: a one-step dump run would otherwise leave a step-1 checkpoint that
the next real training run resumes from. The returned config's model_dir is a new folder
(``./npu_dump_hook_out/model_dir-{time}`` or ``model_dir=``) seeded with hard links to the
latest checkpoint of the user's model_dir, so the dump starts where training is, and
``evaluate``/``train_and_evaluate`` after the dumped step find their checkpoints there.

Graph dumps: GE writes ``ge_proto_*_Build.txt`` into ``DUMP_GRAPH_PATH`` (else
the working directory). ``apply_graph_dump_env`` points it at a known folder
unless the user set it, and returns what it did so it can be recorded.
"""
import copy
import inspect
import logging
import os
import time
from typing import Any, Dict, MutableMapping, Optional, Sequence

from . import _tf
from .bundle import place_file
from .constants import ENV_DUMP_GRAPH_PATH, ENV_RUN_KEEP_CHECKPOINTS, NPU_OPTIMIZER_NAME
from .options import DumpOptions
from .run_record import dumps_on_this_rank

__all__ = ["session_config", "estimator_config", "dump_run_model_dir", "DUMP_RUN_MODEL_DIRS", "apply_graph_dump_env",
           "npu_parameter_map"]

logger = logging.getLogger(__name__)

#: Where estimator_config puts a dump run's model_dir by default: the hook's default output_dir.
DUMP_RUN_MODEL_DIRS = "npu_dump_hook_out"

_ITERATIONS_WARNING = (
    "iterations_per_loop=%s overridden to 1: with more than one iteration per session.run GE "
    "runs several training steps on the device per call, so the hook could not stop after one "
    "iteration and dump_step would count device iterations, not session.run calls"
)


def npu_parameter_map(config: Any) -> Any:
    """The ``parameter_map`` of the last ``NpuOptimizer`` entry of ``config`` (added if absent)."""
    rewrite = config.graph_options.rewrite_options
    entries = [o for o in rewrite.custom_optimizers if o.name == NPU_OPTIMIZER_NAME]
    entry = entries[-1] if entries else rewrite.custom_optimizers.add(name=NPU_OPTIMIZER_NAME)
    return entry.parameter_map


def session_config(
    options: DumpOptions,
    config: Optional[Any] = None,
    *,
    deterministic: bool = True,
    graph_dump_dir: Optional[str] = None,
    ranks: Optional[Sequence[int]] = None,
) -> Any:
    """A copy of ``config`` (or a new ``ConfigProto``) carrying the NPU dump options.

    ``graph_dump_dir``: when given, ``DUMP_GRAPH_PATH`` is pointed there unless
    already set (see :func:`apply_graph_dump_env`); the only side effect.
    ``ranks``: the ranks (``RANK_ID``) that dump; on any other rank the config carries the
    dump switched off, so GE dumps nothing there (give the hook the same ``ranks``).
    """
    options = _for_this_rank(options, ranks)
    config_pb2 = _tf.config_pb2()
    rewriter = _tf.rewriter_config_pb2().RewriterConfig
    result = config_pb2.ConfigProto()
    if config is not None:
        result.CopyFrom(config)
    params = npu_parameter_map(result)
    _write_dump_keys(params, options)
    params["use_off_line"].b = True
    if params["iterations_per_loop"].i > 1:
        logger.warning(_ITERATIONS_WARNING, params["iterations_per_loop"].i)
    params["iterations_per_loop"].i = 1
    if deterministic:
        params["deterministic"].i = 1
    rewrite = result.graph_options.rewrite_options
    rewrite.remapping = rewriter.OFF
    rewrite.memory_optimization = rewriter.NO_MEM_OPT
    if graph_dump_dir is not None:
        apply_graph_dump_env(graph_dump_dir)
    return result


def _for_this_rank(options: DumpOptions, ranks: Optional[Sequence[int]]) -> DumpOptions:
    if dumps_on_this_rank(ranks):
        return options
    return DumpOptions()  # dumping off, nothing else: this rank trains untouched


def _write_dump_keys(params: Any, options: DumpOptions) -> None:
    # Stale dump keys from the caller's entry must not survive next to ours.
    for key in ("dump_path", "dump_step", "dump_mode", "dump_layer", "dump_data", "dump_debug_mode"):
        if key in params:
            del params[key]
    params["enable_dump"].b = options.enable_dump
    params["enable_dump_debug"].b = options.enable_dump_debug
    if options.dump_path is not None:
        params["dump_path"].s = options.dump_path.encode("utf-8")
    if options.enable_dump:
        if options.dump_step is not None:
            params["dump_step"].s = options.dump_step.encode("utf-8")
        params["dump_mode"].s = options.dump_mode.encode("utf-8")
    if options.enable_dump_debug:
        params["dump_debug_mode"].s = options.dump_debug_mode.encode("utf-8")
    if options.dump_layer is not None:
        params["dump_layer"].s = options.dump_layer.encode("utf-8")
    params["dump_data"].s = options.dump_data.encode("utf-8")


# RunConfig settings carried over to a new NPURunConfig (all are NPURunConfig keywords).
_RUN_CONFIG_FIELDS = (
    "model_dir",
    "tf_random_seed",
    "save_summary_steps",
    "save_checkpoints_steps",
    "save_checkpoints_secs",
    "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours",
    "log_step_count_steps",
)


def estimator_config(
    options: DumpOptions,
    run_config: Optional[Any] = None,
    *,
    deterministic: bool = True,
    graph_dump_dir: Optional[str] = None,
    ranks: Optional[Sequence[int]] = None,
    keep_checkpoints: bool = False,
    model_dir: Optional[str] = None,
) -> Any:
    """A RunConfig for ``tf.estimator`` / ``NPUEstimator`` that dumps as ``options`` say.

    The user's settings (seeds, session_config, checkpoint settings) are kept;
    ``iterations_per_loop`` is forced to 1 (with a warning when it was larger). The estimator
    trains in ``model_dir`` (default ``./npu_dump_hook_out/model_dir-{time}``), seeded with the
    latest checkpoint of the user's model_dir, which is left as it was; ``keep_checkpoints=True``
    trains in the user's model_dir instead (see the module doc). ``ranks``: as for
    :func:`session_config`.
    """
    options = _for_this_rank(options, ranks)
    if graph_dump_dir is not None:
        apply_graph_dump_env(graph_dump_dir)
    if _tf.npu_bridge_available():
        result = _npu_run_config(options, run_config, deterministic)
    else:
        estimator = _tf.estimator_module()
        base = run_config if run_config is not None else estimator.RunConfig()
        _warn_iterations(getattr(base, "iterations_per_loop", 1))
        result = base.replace(session_config=session_config(options, base.session_config,
                                                            deterministic=deterministic))
    if keep_checkpoints or not result.model_dir:
        return result  # without a model_dir the Estimator trains in a new temporary folder anyway
    target = os.path.abspath(model_dir or os.path.join(
        DUMP_RUN_MODEL_DIRS, "model_dir-" + time.strftime("%Y%m%d-%H%M%S")))
    return result.replace(model_dir=dump_run_model_dir(result.model_dir, target))


def dump_run_model_dir(source: Optional[str], target: str) -> str:
    """Seed ``target`` with (hard links to, else copies of) the files of ``source``'s latest
    checkpoint, so a dump run starts where ``source`` is but writes its own checkpoints there.

    ``source`` is never written to. Returns ``target``; logs (WARNING) where the checkpoints go.
    """
    if source and os.path.abspath(source) == os.path.abspath(target):
        return target
    prefix = _tf.latest_checkpoint(source) if source and os.path.isdir(source) else None
    if prefix:  # else the Estimator creates the folder when it first writes
        os.makedirs(target, exist_ok=True)
        folder, base = os.path.split(prefix)
        for name in os.listdir(folder):
            if name.startswith(base + "."):
                if not os.path.exists(os.path.join(target, name)):  # hard link, else copy
                    place_file(os.path.join(folder, name), os.path.join(target, name), checksum=False)
        with open(os.path.join(target, "checkpoint"), "w") as handle:
            handle.write('model_checkpoint_path: "{0}"\nall_model_checkpoint_paths: "{0}"\n'.format(base))
    logger.warning("npu_dump_hook: the Estimator trains in %s for this dump run%s; %s is left as it was "
                   "(keep_checkpoints=True or %s=1 trains there)", target,
                   " (starting from {})".format(prefix) if prefix else "", source or "its temporary model_dir",
                   ENV_RUN_KEEP_CHECKPOINTS)
    return target


def _npu_run_config(options: DumpOptions, run_config: Optional[Any], deterministic: bool) -> Any:
    dump_config_cls, npu_run_config_cls = _tf.npu_dump_config_classes()
    dump_config = dump_config_cls(
        enable_dump=options.enable_dump,
        dump_path=options.dump_path,
        dump_step=options.dump_step,
        dump_mode=options.dump_mode,
        enable_dump_debug=options.enable_dump_debug,
        dump_debug_mode=options.dump_debug_mode,
        dump_data=options.dump_data,
        dump_layer=options.dump_layer,
    )
    if isinstance(run_config, npu_run_config_cls):
        # Keep every NPU setting the user chose; only dump, loop and determinism change.
        _warn_iterations(run_config.iterations_per_loop)
        result = copy.copy(run_config)
        result._dump_config = dump_config
        result.iterations_per_loop = 1
        if deterministic and hasattr(result, "_deterministic"):
            result._deterministic = 1
        return result
    kwargs = {"dump_config": dump_config, "iterations_per_loop": 1}  # type: Dict[str, Any]
    if run_config is not None:
        _warn_iterations(getattr(run_config, "iterations_per_loop", 1))
        for name in _RUN_CONFIG_FIELDS:
            kwargs[name] = getattr(run_config, name)
        if run_config.session_config is not None:
            kwargs["session_config"] = _copy_proto(run_config.session_config)
    if deterministic and "deterministic" in inspect.signature(npu_run_config_cls.__init__).parameters:
        kwargs["deterministic"] = 1  # older adapters lack the keyword
    return npu_run_config_cls(**kwargs)


def _copy_proto(proto: Any) -> Any:
    result = type(proto)()
    result.CopyFrom(proto)
    return result


def _warn_iterations(value: Any) -> None:
    if isinstance(value, int) and value > 1:
        logger.warning(_ITERATIONS_WARNING, value)


#: The DUMP_GRAPH_PATH values this process's runs set: a run whose end() never came (an exception
#: inside the training loop) leaves one behind, which the next run replaces instead of sharing it.
_GRAPH_FOLDERS_SET = set()  # type: set


def apply_graph_dump_env(folder: str, environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, Any]:
    """Point ``DUMP_GRAPH_PATH`` at ``folder`` unless the user set it.

    Returns a record for the run summary: the variable, the value in force and
    whether npu_dump_hook set it.
    """
    env = os.environ if environ is None else environ
    current = env.get(ENV_DUMP_GRAPH_PATH)
    if current and current not in _GRAPH_FOLDERS_SET:  # an earlier run's value (one that died mid-run) is ours
        return {"variable": ENV_DUMP_GRAPH_PATH, "value": current, "set_by_npu_dump_hook": False}
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    env[ENV_DUMP_GRAPH_PATH] = folder
    _GRAPH_FOLDERS_SET.add(folder)
    logger.info("%s=%s (graph files of this run go there)", ENV_DUMP_GRAPH_PATH, folder)
    return {"variable": ENV_DUMP_GRAPH_PATH, "value": folder, "set_by_npu_dump_hook": True}
