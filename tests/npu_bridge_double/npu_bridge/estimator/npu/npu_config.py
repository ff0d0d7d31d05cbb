"""Double of ``npu_bridge.estimator.npu.npu_config`` (reference §1.1, §2, §11 items 1-2)."""
import tensorflow as tf


class DumpConfig(object):
    """Stores values only; no validation (as the real constructor). Note the attribute names."""

    def __init__(self, enable_dump=False, dump_path=None, dump_step=None, dump_mode="output",
                 enable_dump_debug=False, dump_debug_mode="all", dump_data="tensor", dump_layer=None):
        self._enable_dump = enable_dump
        self._dump_path = dump_path
        self._dump_step = dump_step
        self._dump_mode = dump_mode
        self._enable_dump_debug = enable_dump_debug
        self._dump_debug_mode = dump_debug_mode
        self.dump_data = dump_data
        self.dump_layer = dump_layer


def _check_positive_integer(value, name):
    if not isinstance(value, int):
        raise TypeError("{} must be int, got {}".format(name, type(value)))
    if value <= 0:
        raise ValueError("{} must be positive, got {}".format(name, value))


class NPURunConfig(tf.estimator.RunConfig):
    def __init__(self, iterations_per_loop=1, model_dir=None, tf_random_seed=None, save_summary_steps=0,
                 save_checkpoints_steps=None, save_checkpoints_secs=None, session_config=None,
                 keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
                 enable_data_pre_proc=True, precision_mode=None, mix_compile_mode=False, dump_config=None,
                 enable_exception_dump=2, deterministic=0, graph_run_mode=1, **unused):
        _check_positive_integer(iterations_per_loop, "iterations_per_loop")
        if not isinstance(mix_compile_mode, bool):
            raise TypeError("mix_compile_mode must be bool")
        if mix_compile_mode and iterations_per_loop != 1:
            raise ValueError("mix_compile_mode requires iterations_per_loop == 1")
        if dump_config is not None and not isinstance(dump_config, DumpConfig):
            raise ValueError("dump_config must be provided with type DumpConfig")
        if save_checkpoints_steps is None and save_checkpoints_secs is None:
            save_checkpoints_steps = 100
        self.iterations_per_loop = iterations_per_loop
        self._mix_compile_mode = mix_compile_mode
        self._dump_config = dump_config
        self._enable_data_pre_proc = enable_data_pre_proc
        self._precision_mode = precision_mode
        self._enable_exception_dump = enable_exception_dump
        self._deterministic = deterministic
        self._graph_run_mode = graph_run_mode
        super(NPURunConfig, self).__init__(
            model_dir=model_dir, tf_random_seed=tf_random_seed, save_summary_steps=save_summary_steps,
            save_checkpoints_steps=save_checkpoints_steps, save_checkpoints_secs=save_checkpoints_secs,
            session_config=session_config, keep_checkpoint_max=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours, log_step_count_steps=log_step_count_steps,
        )
