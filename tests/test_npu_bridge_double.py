"""The npu_bridge double as model-zoo scripts use it (issue #21 item 8; reference §13).

What ``from npu_bridge.npu_init import *`` gives, each name behaving as
docs/reference/npu-bridge-dump-api.md says; a model-zoo-style script (tests/helpers/modelzoo_npu_init.py)
running to completion under the double, and with npu_dump_hook added by hand on the emulated NPU;
the error of a backend-``npu`` run that finds no GE output; and the same script, unmodified, through
the whole chain (``npu-dump-hook run`` on the emulated ascend profile with and without ``--fault``,
``run --golden-for``, ``compare``) in its Session and NPUEstimator forms.
"""
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from helpers.runs import clean_env, run
from npu_dump_hook import DumpOptions, LocateError, NpuDumpSession, collect, session_config
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.cli import main as cli_main
from npu_dump_hook.determinism import apply_policy

v1 = tf.compat.v1
HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOUBLE_DIR = os.path.join(REPO, "tests", "npu_bridge_double")  # what the npu_bridge_double fixture puts on sys.path
MODELZOO = os.path.join(HELPERS, "modelzoo_npu_init.py")
STAR_NAMES = ("DumpConfig", "NPURunConfig", "NPUEstimator", "NPUEstimatorSpec", "RewriterConfig", "config_pb2",
              "rewriter_config_pb2", "npu_config_proto", "npu_session_config_init", "npu_run_config_init",
              "npu_hooks_append", "npu_distributed_optimizer_wrapper", "NPUDistributedOptimizer",
              "NPULossScaleOptimizer", "FixedLossScaleManager", "ExponentialUpdateLossScaleManager", "npu_ops",
              "util", "keras_to_npu", "hccl_ops")


@pytest.fixture
def npu_init(npu_bridge_double, monkeypatch):
    """The namespace ``from npu_bridge.npu_init import *`` gives, on one device, in a fresh graph."""
    for var in ("RANK_SIZE", "RANK_ID"):
        monkeypatch.delenv(var, raising=False)
    namespace = {}
    exec("from npu_bridge.npu_init import *", namespace)
    with tf.Graph().as_default():
        yield namespace


def _npu_entries(config):
    return [entry for entry in config.graph_options.rewrite_options.custom_optimizers if entry.name == "NpuOptimizer"]


def _train(optimizer, steps=3):
    """Variables of a small least-squares model after ``steps`` of ``optimizer`` (one fixed batch)."""
    x = tf.constant(np.random.RandomState(0).rand(8, 3).astype(np.float32))
    w = v1.get_variable("w", initializer=tf.constant([[0.5], [-0.2], [0.1]]))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
    train_op = optimizer.minimize(loss)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(steps):
            sess.run(train_op)
        return sess.run(w)


def test_the_star_import_gives_what_model_zoo_ports_use_from_the_real_modules(npu_init):
    assert all(name in npu_init for name in STAR_NAMES), [n for n in STAR_NAMES if n not in npu_init]
    modules = {name: npu_init[name].__name__ for name in ("npu_ops", "util", "keras_to_npu", "hccl_ops")}
    assert modules == {"npu_ops": "npu_bridge.estimator.npu_ops", "util": "npu_bridge.estimator.npu.util",
                       "keras_to_npu": "npu_bridge.estimator.npu.keras_to_npu",
                       "hccl_ops": "npu_bridge.hccl.hccl_ops"}
    assert npu_init["NPUDistributedOptimizer"].__module__ == "npu_bridge.estimator.npu.npu_optimizer"
    assert npu_init["NPULossScaleOptimizer"].__module__ == "npu_bridge.estimator.npu.npu_loss_scale_optimizer"
    assert npu_init["FixedLossScaleManager"].__module__ == "npu_bridge.estimator.npu.npu_loss_scale_manager"
    assert npu_init["RewriterConfig"].OFF == tf.compat.v1.ConfigProto().graph_options.rewrite_options.OFF
    assert npu_init["config_pb2"].ConfigProto is v1.ConfigProto


def test_npu_config_proto_adds_or_reuses_the_npu_optimizer_entry(npu_init):
    fresh = npu_init["npu_config_proto"]()
    rewrite = fresh.graph_options.rewrite_options
    assert len(_npu_entries(fresh)) == 1 and fresh.allow_soft_placement and not fresh.log_device_placement
    assert rewrite.remapping == rewrite.OFF and rewrite.memory_optimization == npu_init["RewriterConfig"].OFF
    assert fresh.graph_options.optimizer_options.global_jit_level == npu_init["config_pb2"].OptimizerOptions.OFF
    own = v1.ConfigProto(log_device_placement=True)
    entry = own.graph_options.rewrite_options.custom_optimizers.add()
    entry.name = "NpuOptimizer"
    entry.parameter_map["precision_mode"].s = b"allow_mix_precision"
    same = npu_init["npu_session_config_init"](own)
    assert same is own and len(_npu_entries(own)) == 1 and not own.log_device_placement
    assert _npu_entries(own)[0].parameter_map["precision_mode"].s == b"allow_mix_precision"
    assert own.graph_options.rewrite_options.memory_optimization == 0  # only a new entry turns it off
    run_config = npu_init["npu_run_config_init"](tf.estimator.RunConfig(model_dir="m"))
    assert run_config.model_dir == "m" and len(_npu_entries(run_config.session_config)) == 1


def test_npu_hooks_append_adds_a_broadcast_hook_that_does_nothing_on_one_device(npu_init):
    mine = v1.train.StopAtStepHook(last_step=1)
    hooks = npu_init["npu_hooks_append"]([mine])
    assert hooks[0] is mine and type(hooks[1]).__name__ == "NPUBroadcastGlobalVariablesHook"
    hooks[1].begin()
    with v1.Session() as sess:
        hooks[1].after_create_session(sess, None)


def test_distributed_wrappers_change_nothing_on_one_device(npu_init):
    plain = _train(v1.train.GradientDescentOptimizer(0.1))
    with tf.Graph().as_default():
        wrapped = _train(npu_init["NPUDistributedOptimizer"](v1.train.GradientDescentOptimizer(0.1)))
    sgd = v1.train.GradientDescentOptimizer(0.1)
    assert npu_init["npu_distributed_optimizer_wrapper"](sgd) is sgd
    np.testing.assert_array_equal(plain, wrapped)


def test_distributed_wrappers_use_the_emulated_hccl_on_several_ranks(npu_init, monkeypatch):
    """RANK_SIZE > 1: the gradients go through HcomAllReduce ops (the emulated HCCL's, named as
    npu_bridge names them); the exchange itself is tested with ranks as processes (tests/compare/test_ranks.py)."""
    monkeypatch.setenv("RANK_SIZE", "2")
    with tf.Graph().as_default() as graph:
        optimizer = npu_init["NPUDistributedOptimizer"](v1.train.GradientDescentOptimizer(0.1))
        weight = v1.get_variable("w", initializer=tf.ones([3]))
        optimizer.minimize(tf.reduce_sum(weight * weight))
        found = [op for op in graph.get_operations() if op.name.endswith("HcomAllReduce")]
    assert [op.type for op in found] == ["PyFunc"] and "_Allreduce/" in found[0].name


@pytest.mark.parametrize("manager", ["FixedLossScaleManager", "ExponentialUpdateLossScaleManager"])
def test_loss_scaling_trains_as_the_wrapped_optimizer_in_float32(npu_init, manager):
    plain = _train(v1.train.GradientDescentOptimizer(0.1))
    args = (1024,) if manager == "FixedLossScaleManager" else (1024, 2)
    with tf.Graph().as_default():
        scaled = _train(npu_init["NPULossScaleOptimizer"](v1.train.GradientDescentOptimizer(0.1),
                                                          npu_init[manager](*args)))
    np.testing.assert_allclose(scaled, plain, rtol=1e-5)


def test_an_overflowing_step_is_skipped_and_the_scale_adapts(npu_init):
    manager = npu_init["ExponentialUpdateLossScaleManager"](3e38, incr_every_n_steps=1, decr_every_n_nan_or_inf=1,
                                                            decr_ratio=0.5)
    w = v1.get_variable("w", initializer=tf.constant([4.0]))
    loss = tf.reduce_sum(w * w)  # scaled by 3e38: inf in float32
    train_op = npu_init["NPULossScaleOptimizer"](v1.train.GradientDescentOptimizer(0.1), manager).minimize(loss)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(train_op)
        assert sess.run(w)[0] == 4.0 and sess.run(manager.get_loss_scale()) == pytest.approx(1.5e38)


def test_npu_ops_dropout_is_a_dropout_the_randomness_audit_finds(npu_init):
    npu_ops = npu_init["npu_ops"]
    x = tf.ones([2000])
    assert npu_ops.dropout(x, keep_prob=1.0) is x
    with pytest.raises(ValueError):
        npu_ops.dropout(x, keep_prob=0.0)
    dropped = npu_ops.dropout(x, keep_prob=0.5)
    with v1.Session() as sess:
        values = sess.run(dropped)
    assert set(np.unique(values)) == {0.0, 2.0}
    report = apply_policy(v1.get_default_graph(), "strip")
    assert [(s["category"], s["action"].split()[0]) for s in report["sources"]] == [("dropout", "stripped")]
    with v1.Session() as sess:
        np.testing.assert_array_equal(sess.run(dropped), np.ones(2000))


def test_set_iteration_per_loop_keeps_one_and_groups_more(npu_init):
    util = npu_init["util"]
    w = v1.get_variable("w", initializer=tf.constant(1.0))
    train_op = v1.assign_add(w, 1.0).op
    with v1.Session() as sess:
        sess.run(w.initializer)
        assert util.set_iteration_per_loop(sess, train_op, 1) is train_op
        grouped = util.set_iteration_per_loop(sess, train_op, 10)
        loops = [v for v in v1.local_variables() if v.op.name == "npu_runconfig/iterations_per_loop"]
        assert grouped.name == "IterationOp" and len(loops) == 1 and sess.run(loops[0]) == 9
        with pytest.raises(ValueError):
            util.set_iteration_per_loop(sess, w, 1)
        with pytest.raises(TypeError):
            util.set_iteration_per_loop(sess, train_op, 1.0)


def test_npu_estimator_spec_is_an_estimator_spec_with_host_call(npu_init):
    loss = tf.constant(1.0)
    host_call = (lambda step: [], [loss])
    spec = npu_init["NPUEstimatorSpec"](mode=tf.estimator.ModeKeys.EVAL, loss=loss, host_call=host_call)
    assert isinstance(spec, tf.estimator.EstimatorSpec) and spec.loss is loss and spec.host_call is host_call


def test_keras_to_npu_gives_an_npu_estimator_that_starts_from_the_keras_weights(npu_init, tmp_path, monkeypatch):
    monkeypatch.setenv("JOB_ID", "10086")
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(4,), kernel_initializer="ones")])
    model.compile(optimizer=v1.train.GradientDescentOptimizer(0.0), loss="mse")  # keeps the weights
    config = npu_init["NPURunConfig"](model_dir=str(tmp_path / "md"), session_config=npu_init["npu_config_proto"]())
    estimator = npu_init["keras_to_npu"].model_to_npu_estimator(keras_model=model, config=config)
    assert type(estimator).__name__ == "NPUEstimator"
    assert os.path.isdir(str(tmp_path / "md" / "keras"))  # the conversion's own checkpoint
    batch = (np.ones((2, 4), np.float32), np.zeros((2, 2), np.float32))
    estimator.train(lambda: tf.data.Dataset.from_tensors(batch).repeat(), steps=1)
    kernel = [name for name in estimator.get_variable_names() if name.endswith("kernel")]
    np.testing.assert_array_equal(estimator.get_variable_value(kernel[0]), np.ones((4, 2)))


def _modelzoo(tmp_path, *args):
    env = clean_env(PYTHONPATH=os.pathsep.join([DOUBLE_DIR, REPO]))
    for var in ("RANK_SIZE", "RANK_ID", "JOB_ID"):
        env.pop(var, None)
    code, lines, err = run([sys.executable, MODELZOO] + list(args), tmp_path, env)
    assert code == 0, err[-3000:]
    return lines


@pytest.mark.parametrize("mode", ["session", "estimator"])
def test_a_model_zoo_script_runs_to_completion_on_the_double(tmp_path, mode):
    lines = _modelzoo(tmp_path, mode)
    assert lines[-1] == "trained global_step 5"
    if mode == "session":
        losses = [float(line.split()[1]) for line in lines if line.startswith("loss ")]
        assert len(losses) == 5 and all(np.isfinite(losses))


@pytest.mark.parametrize("mode", ["session", "estimator"])
def test_a_model_zoo_script_with_the_hook_added_by_hand_gives_a_verified_bundle(tmp_path, mode):
    lines = _modelzoo(tmp_path, mode, "--dump", str(tmp_path / "out"))
    bundle = lines[-1]
    assert bundle.startswith(str(tmp_path / "out" / "bundles"))
    assert verify_bundle(bundle) == [] and cli_main(["verify", "-q", bundle]) == 0
    doc = read_bundle(bundle)
    assert doc["backend"] == "emulated" and doc["run"]["steps"] == 1
    dumped = [entry["op_name"] for entry in doc["files"] if entry["kind"] == "dump"]
    assert any(name.startswith("gradients") for name in dumped), dumped
    assert any(s["category"] == "dropout" and s["action"].startswith("stripped")
               for s in doc["randomness"]["sources"]), doc["randomness"]


def test_no_ge_output_says_why_backend_npu_was_chosen(npu_bridge_double, in_tmp_cwd, monkeypatch):
    monkeypatch.setattr(collect, "SETTLE_QUIET_SECONDS", 0.1)
    options = DumpOptions(enable_dump=True, dump_path="dump")
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, 3])
        w = v1.get_variable("w", [3, 1])
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)))
        with pytest.raises(LocateError) as info:
            with NpuDumpSession(v1.Session(config=session_config(options)), options, stop="continue",
                                output_dir="out") as sess:
                sess.run(v1.global_variables_initializer())
                sess.run(train_op, {x: np.ones((2, 3))})
    message = str(info.value)
    assert info.value.what == "graph" and "no Build graph file" in message
    assert "Backend 'npu' was chosen because npu_bridge imported" in message and DOUBLE_DIR in message
    assert "backend='auto'" in message and str(in_tmp_cwd / "dump") in message
    assert os.path.join(sess.hook.run_dir, "graph") in message
    assert 'backend="emulated"' in message and "--backend emulated" in message


# -- the model-zoo chain through the runner: NPU bundle -> golden bundle -> compare verdict -----------

CLI = [sys.executable, "-m", "npu_dump_hook"]
ZOO_FAULT = "dense1/MatMul"


def _zoo_run(folder, mode, flags):
    """``npu-dump-hook run FLAGS -- modelzoo_npu_init.py MODE`` (the script unmodified, the double
    importable as on an Ascend host): (status, bundle path or None, stdout lines, stderr)."""
    os.makedirs(str(folder))
    env = clean_env(PYTHONPATH=os.pathsep.join([DOUBLE_DIR, REPO]))
    for var in ("RANK_SIZE", "RANK_ID", "JOB_ID"):
        env.pop(var, None)
    argv = CLI + ["run", "--output-dir", str(folder / "out")] + list(flags) + [
        "--", sys.executable, MODELZOO, mode, "--model-dir", str(folder / "model")]
    code, lines, err = run(argv, folder, env, timeout=600)
    bundle = lines[-1] if lines and os.path.isdir(lines[-1]) else None
    return code, bundle, lines, err


def _zoo_chain(root, mode, fault):
    """NPU run (emulated, ascend profile, ``fault`` or none), golden run, compare."""
    name = "{}_{}".format(mode, "fault" if fault else "healthy")
    flags = ["--backend", "emulated", "--emulate-profile", "ascend"]
    flags += ["--fault", "{}=scale=1.05".format(fault)] if fault else []
    code, npu, _lines, err = _zoo_run(root / ("npu_" + name), mode, flags)
    assert code == 0 and npu, err[-3000:]
    code, golden, _lines, err = _zoo_run(root / ("golden_" + name), mode, ["--golden-for", npu])
    assert code == 0 and golden, err[-3000:]
    target = str(root / ("compare_" + name + ".json"))
    code, lines, err = run(CLI + ["compare", npu, golden, "--json", target], root, clean_env())
    assert code in (0, 1), err[-3000:]
    with open(target) as handle:
        return npu, golden, code, "\n".join(lines), json.load(handle)


@pytest.fixture(scope="module", params=["session", "estimator"])
def zoo_chains(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo_" + request.param)
    return {"healthy": _zoo_chain(root, request.param, None), "fault": _zoo_chain(root, request.param, ZOO_FAULT)}


def test_model_zoo_script_through_the_runner_gives_a_verified_one_step_bundle(zoo_chains):
    for npu, golden, _code, _out, _doc in zoo_chains.values():
        assert verify_bundle(npu) == [] and cli_main(["verify", "-q", npu]) == 0
        assert verify_bundle(golden) == []
        doc = read_bundle(npu)
        assert doc["backend"] == "emulated" and doc["run"]["steps"] == 1
        assert any(f["op_name"].startswith("gradients") for f in doc["files"] if f["kind"] == "dump")
        assert any(s["category"] == "dropout" and s["action"].startswith("stripped")
                   for s in doc["randomness"]["sources"]), doc["randomness"]  # npu_ops.dropout
        target = read_bundle(golden)["golden_for"]
        assert target["path"] == npu and target["match"] is True
        assert read_bundle(golden)["fingerprints"] == doc["fingerprints"]


def test_model_zoo_chain_passes_without_a_fault(zoo_chains):
    _npu, _golden, code, out, doc = zoo_chains["healthy"]
    assert code == 0, out
    assert doc["summary"]["verdict"] == "pass" and doc["first_divergence"] is None


def test_model_zoo_chain_names_the_faulted_op_first(zoo_chains):
    _npu, _golden, code, out, doc = zoo_chains["fault"]
    assert code == 1, out
    first = doc["first_divergence"]
    assert first is not None and ZOO_FAULT in first["original_ops"], first
    assert ZOO_FAULT in out.split("first divergence: ")[1].splitlines()[0]
