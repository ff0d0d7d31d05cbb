"""NpuDumpHook lifecycle with real TF: 1000-step Estimator.train stops after one step, OutOfRange, summary."""
import json
import os

import pytest
import tensorflow as tf

from npu_dump_hook.backends import RealNpu
from npu_dump_hook import DumpOptions, NpuDumpError, NpuDumpHook, OptionError
from npu_dump_hook.hook import rank_and_device
from npu_dump_hook.sample_models import cnn_estimator

v1 = tf.compat.v1


def test_estimator_1000_steps_stops_after_one(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    estimator = cnn_estimator.train(str(in_tmp_cwd / "model"), hooks=[hook], steps=1000)
    assert hook.summary["steps"] == 1
    assert hook.summary["global_step"] == {"before": 0, "after": 1}
    assert estimator.get_variable_value("global_step") == 1
    with open(os.path.join(hook.run_dir, "run.json")) as handle:
        saved = json.load(handle)
    assert saved["steps"] == 1 and saved["options"]["dump_path"] == str(in_tmp_cwd / "dump")
    assert saved["randomness"]["policy"] == "strip"
    assert os.path.exists(os.path.join(hook.run_dir, "tf", "graph.pbtxt"))
    assert os.path.exists(os.path.join(hook.run_dir, "init", "model.ckpt.index"))
    # DUMP_GRAPH_PATH pointed at the run's graph folder while it ran, and is unset again after.
    assert saved["graph_dump_env"] == {"variable": "DUMP_GRAPH_PATH", "value": os.path.join(hook.run_dir, "graph"),
                                       "set_by_npu_dump_hook": True}
    assert os.listdir(os.path.join(hook.run_dir, "graph")) and "DUMP_GRAPH_PATH" not in os.environ


def _one_batch_graph():
    dataset = tf.data.Dataset.from_tensor_slices([[1.0, 2.0]]).batch(1)
    value = v1.data.make_one_shot_iterator(dataset).get_next()
    weight = v1.get_variable("w", [], initializer=v1.ones_initializer())
    global_step = v1.train.get_or_create_global_step()
    loss = tf.reduce_sum(value * weight)
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)


def test_out_of_range_ends_normally_with_steps_done(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(), max_steps=5, output_dir="out", save_initial_state=False)
    with tf.Graph().as_default():
        train_op = _one_batch_graph()
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(train_op)
    assert hook.summary["steps"] == 1 and hook.summary["initial_state"] is None


def test_other_errors_propagate_and_skip_end(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(), output_dir="out")
    with tf.Graph().as_default():
        _one_batch_graph()
        bad = tf.debugging.assert_equal(v1.placeholder_with_default(1, []), 2)
        with pytest.raises(tf.errors.InvalidArgumentError):
            with v1.train.MonitoredSession(hooks=[hook]) as session:
                session.run(bad)
    assert hook.summary == {}
    assert not os.path.exists(os.path.join(hook.run_dir, "run.json"))


def test_hook_serves_one_run(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(), output_dir="out")
    with tf.Graph().as_default():
        hook.begin()
        with pytest.raises(NpuDumpError, match="one training run"):
            hook.begin()


def test_max_steps_runs_that_many(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(), max_steps=3, output_dir="out")
    estimator = cnn_estimator.train(str(in_tmp_cwd / "model"), hooks=[hook], steps=1000)
    assert estimator.get_variable_value("global_step") == 3 and hook.summary["steps"] == 3


@pytest.mark.parametrize("kwargs,option", [
    ({"max_steps": 0}, "max_steps"), ({"max_steps": True}, "max_steps"),
    ({"randomness": "none"}, "randomness"), ({"options": {"enable_dump": True}}, "options"),
])
def test_bad_hook_arguments_fail_before_training(in_tmp_cwd, kwargs, option):
    with pytest.raises(OptionError) as info:
        NpuDumpHook(**kwargs)
    assert info.value.option == option


def test_dump_step_beyond_max_steps_rejected(in_tmp_cwd):
    with pytest.raises(OptionError, match="selects step 5, but max_steps=2 runs steps 0..1"):
        NpuDumpHook(DumpOptions(enable_dump=True, dump_path="d", dump_step="5"), max_steps=2)
    # Never silently dropped: step 7 would not run.
    with pytest.raises(OptionError, match="selects step 7"):
        NpuDumpHook(DumpOptions(enable_dump=True, dump_path="d", dump_step="1|7"), max_steps=2)
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="d", dump_step="1|7"))
    assert (hook.captured_step, hook.max_steps) == (1, 8)


def test_default_options_dump_into_run_folder(in_tmp_cwd):
    hook = NpuDumpHook(output_dir="out")
    assert hook.options.enable_dump and hook.options.dump_path == os.path.join(hook.run_dir, "dump")


def test_default_options_from_env(in_tmp_cwd, monkeypatch):
    monkeypatch.setenv("NPU_DUMP_DEBUG_ENABLE", "1")
    monkeypatch.setenv("NPU_DUMP_PATH", str(in_tmp_cwd / "ov"))
    hook = NpuDumpHook(output_dir="out")
    assert hook.options.enable_dump_debug and not hook.options.enable_dump


def test_rank_and_device_from_env():
    assert rank_and_device({"RANK_ID": "3", "DEVICE_ID": "5"}) == {"rank": 3, "device_id": 5}
    assert rank_and_device({"ASCEND_DEVICE_ID": "2", "DEVICE_ID": "5"}) == {"rank": None, "device_id": 2}
    assert rank_and_device({}) == {"rank": None, "device_id": 0}
    with pytest.raises(OptionError, match="DEVICE_ID"):
        rank_and_device({"DEVICE_ID": "-1"})


def test_rank_in_run_folder_name(in_tmp_cwd, monkeypatch):
    monkeypatch.setenv("RANK_ID", "4")
    assert NpuDumpHook(DumpOptions(), output_dir="out").run_dir.endswith("_rank4")


def test_npu_backend_with_npu_bridge_only_configures(in_tmp_cwd, npu_bridge_double):
    # With npu_bridge importable, GE writes the dump: the hook neither captures nor emulates.
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    assert isinstance(hook.backend, RealNpu) and hook.backend_name == "npu" and hook.reference is False
    estimator = cnn_estimator.train(str(in_tmp_cwd / "model"), hooks=[hook], steps=1000)
    assert estimator.get_variable_value("global_step") == 1
    assert hook.summary["backend"] == "npu" and hook.summary["emulator"] is None
    assert os.listdir(str(in_tmp_cwd / "dump")) == []
    assert not os.path.exists(os.path.join(hook.run_dir, ".capture"))


def test_npu_backend_collection_reports_what_was_searched(in_tmp_cwd, npu_bridge_double, monkeypatch):
    from npu_dump_hook import LocateError, collect

    monkeypatch.setattr(collect, "SETTLE_QUIET_SECONDS", 0.1)
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    with pytest.raises(LocateError) as info:
        cnn_estimator.train(str(in_tmp_cwd / "model"), hooks=[hook], steps=1000)
    assert "no Build graph file" in str(info.value) and os.path.join(hook.run_dir, "graph") in str(info.value)
