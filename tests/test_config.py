"""Config wrappers asserted key by key and type by type (reference §2.1, §3), plain TF and npu_bridge double."""
import logging
import os

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

from npu_dump_hook import DumpOptions, estimator_config, session_config
from npu_dump_hook.config import apply_graph_dump_env

RC = rewriter_config_pb2.RewriterConfig


def npu_entries(config):
    return [o for o in config.graph_options.rewrite_options.custom_optimizers if o.name == "NpuOptimizer"]


def field_of(value):
    return value.WhichOneof("value")


@pytest.fixture
def dump_opts(tmp_path):
    return DumpOptions(enable_dump=True, dump_path=str(tmp_path / "dump"), dump_step="0|5|10-20", dump_mode="all",
                       dump_layer="conv1/Conv2D fc1/MatMul", dump_data="tensor")


def test_session_config_keys_and_field_types(dump_opts):
    config = session_config(dump_opts)
    (entry,) = npu_entries(config)
    params = entry.parameter_map
    expected = {
        "use_off_line": ("b", True),
        "enable_dump": ("b", True),
        "enable_dump_debug": ("b", False),
        "dump_path": ("s", dump_opts.dump_path.encode()),
        "dump_step": ("s", b"0|5|10-20"),
        "dump_mode": ("s", b"all"),
        "dump_layer": ("s", b"conv1/Conv2D fc1/MatMul"),
        "dump_data": ("s", b"tensor"),
        "iterations_per_loop": ("i", 1),
        "deterministic": ("i", 1),
    }
    assert sorted(params.keys()) == sorted(expected)
    for key, (field, value) in expected.items():
        assert field_of(params[key]) == field, key
        assert getattr(params[key], field) == value, key
    rewrite = config.graph_options.rewrite_options
    assert rewrite.remapping == RC.OFF
    assert rewrite.memory_optimization == RC.NO_MEM_OPT


def test_overflow_options_write_debug_keys_only(tmp_path):
    opts = DumpOptions(enable_dump_debug=True, dump_path=str(tmp_path), dump_debug_mode="aicore_overflow")
    params = npu_entries(session_config(opts, deterministic=False))[0].parameter_map
    assert params["enable_dump_debug"].b is True and params["enable_dump"].b is False
    assert params["dump_debug_mode"].s == b"aicore_overflow"
    assert "dump_mode" not in params and "dump_step" not in params and "deterministic" not in params


def test_existing_entry_reused_and_caller_not_mutated(dump_opts):
    user = config_pb2.ConfigProto(allow_soft_placement=True)
    custom = user.graph_options.rewrite_options.custom_optimizers.add(name="NpuOptimizer")
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    custom.parameter_map["iterations_per_loop"].i = 10
    custom.parameter_map["dump_step"].s = b"99"
    before = user.SerializeToString()
    config = session_config(dump_opts, user)
    assert user.SerializeToString() == before
    (entry,) = npu_entries(config)
    assert entry.parameter_map["precision_mode"].s == b"allow_mix_precision"
    assert entry.parameter_map["iterations_per_loop"].i == 1
    assert entry.parameter_map["dump_step"].s == b"0|5|10-20"
    assert config.allow_soft_placement


def test_iterations_override_warns(dump_opts, caplog):
    user = config_pb2.ConfigProto()
    user.graph_options.rewrite_options.custom_optimizers.add(name="NpuOptimizer").parameter_map[
        "iterations_per_loop"].i = 10
    with caplog.at_level(logging.WARNING, logger="npu_dump_hook.config"):
        session_config(dump_opts, user)
    assert "iterations_per_loop=10 overridden to 1" in caplog.text


def test_plain_tf_estimator_config_keeps_user_settings(dump_opts):
    user = tf.estimator.RunConfig(model_dir="/tmp/m", tf_random_seed=7, save_checkpoints_steps=3,
                                  keep_checkpoint_max=2, session_config=config_pb2.ConfigProto(allow_soft_placement=True))
    config = estimator_config(dump_opts, user, keep_checkpoints=True)
    assert type(config) is tf.estimator.RunConfig
    assert (config.model_dir, config.tf_random_seed, config.save_checkpoints_steps, config.keep_checkpoint_max) == (
        "/tmp/m", 7, 3, 2)
    assert config.session_config.allow_soft_placement
    params = npu_entries(config.session_config)[0].parameter_map
    assert params["dump_path"].s == dump_opts.dump_path.encode() and params["enable_dump"].b is True
    assert len(user.session_config.graph_options.rewrite_options.custom_optimizers) == 0  # caller's copy untouched


def test_estimator_config_trains_in_its_own_model_dir_unless_asked(dump_opts, tmp_path):
    user = tf.estimator.RunConfig(model_dir=str(tmp_path / "m"), save_checkpoints_steps=3, keep_checkpoint_max=2)
    config = estimator_config(dump_opts, user, model_dir=str(tmp_path / "dump_model"))
    assert (config.model_dir, config.save_checkpoints_steps, config.keep_checkpoint_max) == (
        str(tmp_path / "dump_model"), 3, 2)
    assert user.model_dir == str(tmp_path / "m") and not (tmp_path / "m").exists()
    assert not (tmp_path / "dump_model").exists()  # nothing to seed: the Estimator creates it
    kept = estimator_config(dump_opts, user, keep_checkpoints=True)
    assert kept.model_dir == str(tmp_path / "m")
    assert estimator_config(dump_opts, tf.estimator.RunConfig()).model_dir is None  # a temporary folder anyway


def test_npu_run_config_trains_in_its_own_model_dir(npu_bridge_double, dump_opts, tmp_path):
    from npu_bridge.estimator.npu.npu_config import NPURunConfig

    config = estimator_config(dump_opts, tf.estimator.RunConfig(model_dir=str(tmp_path / "m")),
                              model_dir=str(tmp_path / "dump_model"))
    assert isinstance(config, NPURunConfig) and config._dump_config is not None
    assert config.model_dir == str(tmp_path / "dump_model")


def _model_fn(features, labels, mode):
    weights = tf.compat.v1.get_variable("w", [3, 1])
    loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
    train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)


def _input_fn():
    return tf.data.Dataset.from_tensors((tf.ones([4, 3]), tf.ones([4, 1]))).repeat()


def _checkpoints(folder):
    return sorted(n for n in os.listdir(str(folder)) if n.startswith(("checkpoint", "model.ckpt"))) \
        if os.path.isdir(str(folder)) else []


def test_dump_run_starts_from_the_users_checkpoint_and_leaves_model_dir_alone(dump_opts, tmp_path):
    """train_and_evaluate (it needs checkpoints) after a real step-1 run: the dump run resumes at
    step 1, evaluates, and the user's model_dir still holds only its own checkpoint."""
    user_dir = tmp_path / "model"
    tf.estimator.Estimator(_model_fn, config=tf.estimator.RunConfig(model_dir=str(user_dir))).train(
        _input_fn, max_steps=1)
    before = _checkpoints(user_dir)
    assert "model.ckpt-1.index" in before
    config = estimator_config(dump_opts, tf.estimator.RunConfig(model_dir=str(user_dir)),
                              model_dir=str(tmp_path / "dump_model"))
    estimator = tf.estimator.Estimator(_model_fn, config=config)
    tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(_input_fn, max_steps=2),
                                    tf.estimator.EvalSpec(_input_fn, steps=1))
    assert estimator.get_variable_value("global_step") == 2
    assert _checkpoints(user_dir) == before
    assert "model.ckpt-2.index" in _checkpoints(tmp_path / "dump_model")


def test_plain_tf_session_config_runs_a_real_session(dump_opts):
    # TensorFlow must accept the config as is (the NpuOptimizer entry is only a carrier).
    with tf.Graph().as_default():
        value = tf.constant(2.0) * 3.0
        with tf.compat.v1.Session(config=session_config(dump_opts)) as sess:
            assert sess.run(value) == 6.0


def test_npu_run_config_through_double(npu_bridge_double, dump_opts):
    from npu_bridge.double import read_npu_options, validate_session_config
    from npu_bridge.estimator.npu.npu_config import DumpConfig, NPURunConfig
    from npu_bridge.estimator.npu.npu_estimator import load_session_config

    user = tf.estimator.RunConfig(model_dir="/tmp/m", tf_random_seed=11, save_checkpoints_secs=30,
                                  session_config=config_pb2.ConfigProto(allow_soft_placement=True))
    config = estimator_config(dump_opts, user, keep_checkpoints=True)
    assert isinstance(config, NPURunConfig)
    assert (config.model_dir, config.tf_random_seed, config.save_checkpoints_secs) == ("/tmp/m", 11, 30)
    assert config.iterations_per_loop == 1 and config._deterministic == 1
    dump = config._dump_config
    assert isinstance(dump, DumpConfig)
    assert (dump._enable_dump, dump._dump_path, dump._dump_step, dump._dump_mode, dump.dump_layer, dump.dump_data,
            dump._enable_dump_debug) == (True, dump_opts.dump_path, "0|5|10-20", "all",
                                         "conv1/Conv2D fc1/MatMul", "tensor", False)
    proto = load_session_config(config)
    opts = validate_session_config(proto)  # what the adapter + GE would accept at session time
    assert opts["dump_path"].s == dump_opts.dump_path.encode()
    assert opts["dump_step"].s == b"0|5|10-20"
    assert read_npu_options(proto)["iterations_per_loop"].i == 1
    assert proto.allow_soft_placement


def test_npu_run_config_overrides_iterations_with_warning(npu_bridge_double, dump_opts, caplog, tmp_path):
    from npu_bridge.estimator.npu.npu_config import NPURunConfig

    user = NPURunConfig(iterations_per_loop=10, precision_mode="allow_mix_precision", model_dir="/tmp/n")
    with caplog.at_level(logging.WARNING, logger="npu_dump_hook.config"):
        config = estimator_config(dump_opts, user, model_dir=str(tmp_path / "dump_model"))
    assert "iterations_per_loop=10 overridden to 1" in caplog.text
    assert config.iterations_per_loop == 1 and user.iterations_per_loop == 10
    assert config._precision_mode == "allow_mix_precision" and config.model_dir == str(tmp_path / "dump_model")
    assert config._dump_config._dump_path == dump_opts.dump_path


def test_double_last_wins_user_keys_overridden_by_estimator_entry(npu_bridge_double, dump_opts):
    # Why dump keys must travel in dump_config under NPUEstimator (reference §2).
    from npu_bridge.double import read_npu_options
    from npu_bridge.estimator.npu.npu_config import NPURunConfig
    from npu_bridge.estimator.npu.npu_estimator import load_session_config

    proto = session_config(dump_opts)
    resolved = read_npu_options(load_session_config(NPURunConfig(session_config=proto)))
    assert resolved["enable_dump"].b is False


def test_double_session_validation_rejects_what_ge_rejects(npu_bridge_double, tmp_path):
    from npu_bridge.double import SessionConfigError, validate_session_config

    config = session_config(DumpOptions(enable_dump=True, dump_path=str(tmp_path)))
    params = npu_entries(config)[0].parameter_map
    params["dump_step"].s = b"5-1"
    with pytest.raises(SessionConfigError, match="dump_step"):
        validate_session_config(config)


def test_graph_dump_env_respects_user_value(tmp_path):
    env = {}
    record = apply_graph_dump_env(str(tmp_path / "g"), env)
    assert env["DUMP_GRAPH_PATH"] == str(tmp_path / "g") and record["set_by_npu_dump_hook"]
    assert os.path.isdir(str(tmp_path / "g"))
    env2 = {"DUMP_GRAPH_PATH": "/user/choice"}
    record2 = apply_graph_dump_env(str(tmp_path / "h"), env2)
    assert env2["DUMP_GRAPH_PATH"] == "/user/choice" and not record2["set_by_npu_dump_hook"]


def test_ranks_switch_the_dump_off_in_the_configs_of_other_ranks(dump_opts, monkeypatch):
    monkeypatch.setenv("RANK_ID", "3")
    params = npu_entries(session_config(dump_opts, ranks=[0]))[0].parameter_map
    assert params["enable_dump"].b is False and "dump_mode" not in params and "dump_path" not in params
    mine = npu_entries(session_config(dump_opts, ranks=[0, 3]))[0].parameter_map
    assert mine["enable_dump"].b is True and mine["dump_path"].s == dump_opts.dump_path.encode()
    other = estimator_config(dump_opts, tf.estimator.RunConfig(), ranks=[0])
    assert npu_entries(other.session_config)[0].parameter_map["enable_dump"].b is False
    monkeypatch.delenv("RANK_ID")
    assert npu_entries(session_config(dump_opts, ranks=[0]))[0].parameter_map["enable_dump"].b is True  # no rank: dumps
