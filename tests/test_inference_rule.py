"""train/inference.py: which run is an online-inference iteration, and how mode=auto decides."""
import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import settings
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.bundle.schema import run_mode_problems
from npu_dump_hook.bundle.verify import check_bundle_json
from npu_dump_hook.errors import OptionError
from npu_dump_hook.train.inference import InferenceDetector, ModeChoice, script_trains
from npu_dump_hook.train.training_step import TrainingStepDetector
from npu_dump_hook.train.walk import GraphIndex, StepWalk

v1 = tf.compat.v1


@pytest.fixture(params=[True, False], ids=["resource", "ref"])
def model(request):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        training = v1.placeholder_with_default(False, [], name="training")
        w = v1.get_variable("w", initializer=np.full((3, 1), 0.5, np.float32), use_resource=request.param)
        pred = tf.matmul(x, w, name="pred")
        dataset = tf.data.Dataset.from_tensor_slices(np.ones((8, 3), np.float32)).batch(2)
        iterator = v1.data.make_initializable_iterator(dataset)
        from_iterator = tf.matmul(iterator.get_next(), w, name="from_iterator")
        frozen_w = tf.constant(np.full((3, 1), 0.25, np.float32), name="frozen_w")
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a"], [1]), -1)
        parts = {
            "graph": graph, "x": x, "training": training, "pred": pred, "from_iterator": from_iterator,
            "frozen": tf.matmul(x, frozen_w, name="frozen_pred"), "init": v1.global_variables_initializer(),
            "table_init": v1.tables_initializer(), "lookup": table.lookup(tf.constant(["a"])),
            "iterator_init": iterator.initializer, "handle": iterator.string_handle(),
            "warm_up": tf.reduce_sum(tf.ones([2, 2]) * tf.constant(np.ones((2, 2), np.float32))),
            "weights_only": tf.reduce_sum(w), "saver": v1.train.Saver(),
        }
    return parts


def _verdict(model, fetches, feed=None):
    graph = model["graph"]
    return InferenceDetector(graph).verdict_for(StepWalk(GraphIndex(graph), fetches, feed))


def test_a_fed_batch_through_the_variables_is_an_iteration(model):
    verdict = _verdict(model, model["pred"], {model["x"]: np.ones((2, 3), np.float32)})
    assert verdict.iteration and verdict.inputs == ["x:0"] and verdict.model, verdict.as_dict()


def test_an_iterator_batch_and_a_frozen_graphs_constants_count(model):
    assert _verdict(model, model["from_iterator"]).iteration
    frozen = _verdict(model, model["frozen"], {model["x"]: np.ones((2, 3), np.float32)})
    assert frozen.iteration and frozen.model == ["frozen_w"]


@pytest.mark.parametrize("name, reason", [
    ("init", "a set-up run"), ("table_init", "a set-up run"), ("iterator_init", "a set-up run"),
    ("handle", "a set-up run"), ("warm_up", "reads no input batch"), ("weights_only", "reads no input batch"),
])
def test_set_up_and_warm_up_runs_are_skipped_with_their_reason(model, name, reason):
    verdict = _verdict(model, model[name])
    assert not verdict.iteration and reason in verdict.reason, verdict.reason


def test_a_restore_is_a_set_up_run_and_is_noted(model):
    saver_def = model["saver"].saver_def
    graph = model["graph"]
    restore = graph.get_operation_by_name(saver_def.restore_op_name)
    filename = graph.get_tensor_by_name(saver_def.filename_tensor_name)
    verdict = _verdict(model, restore, {filename: "ckpt"})
    assert not verdict.iteration and verdict.restore and "a set-up run" in verdict.reason, verdict.reason


def test_a_bool_switch_alone_is_no_input_batch(model):
    verdict = _verdict(model, model["weights_only"], {model["training"]: False})
    assert not verdict.iteration and "reads no input batch" in verdict.reason


def test_auto_decides_at_the_first_training_or_inference_run():
    trains = ModeChoice("auto")
    assert trains.decide(False, False, lambda: True) is None  # a set-up run decides nothing
    assert trains.decide(False, True, lambda: True) == "train"  # sess.run(cost, feed) of a training script
    infers = ModeChoice("auto")
    assert infers.decide(False, True, lambda: False) == "infer"
    assert infers.decide(True, False, lambda: True) == "infer"  # decided once
    assert ModeChoice("train").chosen == "train" and ModeChoice("infer").recorded == "infer"
    assert ModeChoice("auto").recorded == "train"


def test_an_optimizer_the_script_built_trains_one_that_came_with_a_savedmodel_does_not(tmp_path):
    """mode auto's graph rule: a training script's optimizer makes its evaluation-after-restore no
    inference iteration; the optimizer a SavedModel (or a meta graph) brings along does not."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        pred = tf.matmul(x, v1.get_variable("w", [3, 1]), name="pred")
        v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(pred))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            v1.saved_model.simple_save(sess, str(tmp_path / "saved"), {"x": x}, {"pred": pred})
            v1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    assert script_trains(TrainingStepDetector(graph))
    with v1.Session(graph=tf.Graph()) as sess:
        v1.saved_model.loader.load(sess, ["serve"], str(tmp_path / "saved"))
        detector = TrainingStepDetector(sess.graph)
        assert detector.update_ops(sess.graph.get_operations())  # the optimizer came along
        assert not script_trains(detector)
        with sess.graph.as_default():  # an update the script adds after the load is its own
            v1.assign_add(v1.train.get_or_create_global_step(), 1)
        assert script_trains(TrainingStepDetector(sess.graph))
    meta = tf.Graph()
    with meta.as_default():
        v1.train.import_meta_graph(str(tmp_path / "model.ckpt.meta"))
    assert not script_trains(TrainingStepDetector(meta))


def test_mode_is_one_row_of_the_settings_table():
    row = settings.SETTINGS["mode"]
    assert (row.owner, row.default, row.env, row.flag) == (settings.HOOK, "auto", "NPU_DUMP_HOOK_MODE", "--mode")
    assert settings.read("mode", {"NPU_DUMP_HOOK_MODE": "infer"}) == "infer"
    with pytest.raises(OptionError) as raised:
        settings.read("mode", {"NPU_DUMP_HOOK_MODE": "serve"})
    assert (raised.value.option, raised.value.rule) == ("NPU_DUMP_HOOK_MODE", "must be one of auto|train|infer")
    with pytest.raises(OptionError) as raised:
        settings.check_keyword("mode", "predict")
    assert raised.value.option == "mode"


def test_the_hook_refuses_a_bad_mode(in_tmp_cwd):
    from npu_dump_hook import NpuDumpHook

    with pytest.raises(OptionError) as raised:
        NpuDumpHook(mode="eval")
    assert (raised.value.option, raised.value.rule) == ("mode", "must be one of auto|train|infer")


def test_bundle_json_run_mode_is_train_or_infer():
    assert run_mode_problems({"mode": "infer"}) == [] and run_mode_problems({}) == []
    assert run_mode_problems({"mode": "serve"}) == ["run.mode 'serve' is not one of train, infer"]
    assert any("run.mode" in p for p in check_bundle_json({"run": {"mode": 3}}))


def _inference_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        noisy = x + tf.random.uniform([3], maxval=0.1, name="augment")  # random preprocessing
        w = v1.get_variable("w", initializer=np.full((3, 1), 0.5, np.float32))
        pred = tf.matmul(noisy, w, name="pred")
        pred.graph.add_to_collection("init", v1.global_variables_initializer())
    return graph, x, pred


def _run_inference(hook, graph, x, pred):
    with graph.as_default():
        with v1.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(graph.get_collection("init")[0])  # a set-up run: skipped
            outputs = [sess.run(pred, {x: np.full((2, 3), float(i), np.float32)}) for i in range(3)
                       if not sess.should_stop()]
    return outputs


def test_auto_dumps_the_first_fed_batch_of_a_graph_that_cannot_train_with_randomness_stripped(in_tmp_cwd):
    from npu_dump_hook import NpuDumpHook

    graph, x, pred = _inference_graph()
    hook = NpuDumpHook(backend="emulated", output_dir="out")
    outputs = _run_inference(hook, graph, x, pred)
    assert len(outputs) == 1  # request_stop after the dumped batch, as after a training step
    summary = hook.summary
    assert summary["mode"] == "infer" and summary["steps"] == 1 and summary["skipped_runs"]["count"] == 1
    (counted,) = summary["counted_steps"]
    assert counted["inference"] and counted["inputs"] == ["x:0"] and counted["model"] == ["w"]
    assert any(source["op"].startswith("augment") for source in summary["randomness"]["sources"])
    doc = read_bundle(hook.bundle.path)
    assert doc["run"]["mode"] == "infer" and verify_bundle(hook.bundle.path) == []
    golden = NpuDumpHook(initial_state=hook.bundle.path, output_dir="golden")
    assert np.array_equal(_run_inference(golden, *_inference_graph())[0], outputs[0])  # the same noise
    assert read_bundle(golden.bundle.path)["golden_for"]["match"] is True


def test_mode_train_skips_every_inference_run(in_tmp_cwd):
    from npu_dump_hook import NpuDumpHook

    graph, x, pred = _inference_graph()
    hook = NpuDumpHook(backend="emulated", output_dir="out", mode="train")
    with pytest.raises(Exception) as raised:
        _run_inference(hook, graph, x, pred)
    assert "no training step ran" in str(raised.value) and hook.summary["mode"] == "train"


def test_a_golden_run_takes_the_bundles_mode_and_refuses_another(in_tmp_cwd):
    from npu_dump_hook import NpuDumpHook

    graph, x, pred = _inference_graph()
    hook = NpuDumpHook(backend="emulated", output_dir="out", mode="infer")
    _run_inference(hook, graph, x, pred)
    with pytest.raises(OptionError) as raised:
        NpuDumpHook(initial_state=hook.bundle.path, output_dir="golden", mode="train")
    assert raised.value.option == "mode" and "captured an inference iteration (run.mode infer)" in raised.value.rule
    assert NpuDumpHook(initial_state=hook.bundle.path, output_dir="golden").steps.mode.chosen == "infer"
