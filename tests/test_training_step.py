"""training_step: only runs that update trainable variables or the global step are the iteration."""
import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import read_bundle
from npu_dump_hook.training_step import TrainingStepDetector

v1 = tf.compat.v1


@pytest.fixture(params=[True, False], ids=["resource", "ref"])
def model(request):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.ones((4, 3), np.float32), name="x")
        w = v1.get_variable("w", initializer=np.full((3, 1), 0.5, np.float32), use_resource=request.param)
        cost = tf.reduce_mean(tf.matmul(x, w), name="cost")
        step = v1.train.get_or_create_global_step()
        mean, mean_update = v1.metrics.mean(cost)
        parts = {
            "graph": graph, "cost": cost, "init": v1.global_variables_initializer(),
            "local_init": v1.local_variables_initializer(), "metric": mean_update,
            "train": v1.train.GradientDescentOptimizer(0.1).minimize(cost, global_step=step),
            "manual": v1.assign_sub(w, 0.1 * tf.ones_like(w)) if not request.param else w.assign_sub(0.1 * tf.ones_like(w)),
            "bump": v1.assign_add(step, 1),
            "saver": v1.train.Saver(),
        }
    return parts


def test_only_updates_of_the_model_count(model):
    detector = TrainingStepDetector(model["graph"])
    counted = {name: detector.verdict(model[name]).training
               for name in ("cost", "init", "local_init", "metric", "train", "manual", "bump")}
    assert counted == {"cost": False, "init": False, "local_init": False, "metric": False,
                       "train": True, "manual": True, "bump": True}
    assert detector.verdict([model["cost"], model["train"]]).training  # a fetch list with the train op
    assert any("ApplyGradientDescent" in name for name in detector.verdict(model["train"]).writes)
    restore = model["saver"].saver_def.restore_op_name
    assert detector.verdict(model["graph"].get_operation_by_name(restore)).training is False


def test_a_fed_tensor_ends_the_walk(model):
    detector = TrainingStepDetector(model["graph"])
    # Feeding the loss: the optimizer still runs (it needs only the gradient of the fed cost? no:
    # feeding the cost cuts the forward pass, the update ops still execute).
    assert detector.verdict(model["train"], {model["cost"]: 1.0}).training
    assert detector.verdict(model["cost"], {model["cost"]: 1.0}).training is False


def test_guide_script_with_init_and_cost_runs_first_captures_the_training_step(in_tmp_cwd):
    # The seed guide's sess.run mode ported to MonitoredSession: sess.run(init) and
    # print(sess.run(cost)) first. Neither may count as the iteration.
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    with tf.Graph().as_default():
        x = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3), name="x")
        w = v1.get_variable("w", initializer=np.full((3, 1), 0.5, np.float32))
        cost = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="cost")
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.AdamOptimizer(0.01).minimize(cost, global_step=step)
        init = v1.global_variables_initializer()
        with v1.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(init)
            sess.run(cost)
            for _ in range(100):
                if sess.should_stop():
                    break
                sess.run(train_op)
    assert hook.summary["steps"] == 1 and hook.summary["skipped_runs"]["count"] == 2
    (counted,) = hook.summary["counted_steps"]
    assert counted["training"] and any("Adam" in name for name in counted["updates"])
    doc = read_bundle(hook.bundle.path)
    dumped = [f["op_name"] for f in doc["files"] if f["kind"] == "dump"]
    assert any(name.startswith("gradients") for name in dumped)  # the backward pass of a training step
    assert not any("Initializer" in name for name in dumped)


def test_no_training_step_at_all_is_an_error_naming_what_ran(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    with tf.Graph().as_default():
        w = v1.get_variable("w", initializer=1.0)
        cost = tf.identity(w * 2.0, name="cost")
        v1.train.get_or_create_global_step()
        with pytest.raises(Exception) as info:
            with v1.train.MonitoredSession(hooks=[hook]) as sess:
                sess.run(cost)
    assert "no training step ran" in str(info.value) and "cost" in str(info.value)


@pytest.mark.parametrize("resource", [True, False], ids=["resource", "ref"])
def test_loading_values_into_the_model_is_not_a_training_step(resource):
    # Keras set_weights/load_weights (model_to_estimator's conversion session runs them) assign a
    # fed placeholder; w.assign(array) assigns a constant: neither is computed by the model.
    with tf.Graph().as_default() as graph:
        w = v1.get_variable("w", initializer=np.ones((3, 1), np.float32), use_resource=resource)
        fed = v1.placeholder(tf.float32, [3, 1])
        loads = {"set_weights": w.assign(fed), "constant": w.assign(np.zeros((3, 1), np.float32))}
        computed = w.assign(w * 0.5)  # hand-written update from the variable itself: training
    detector = TrainingStepDetector(graph)
    assert {name: detector.verdict(op).training for name, op in loads.items()} == {"set_weights": False,
                                                                                  "constant": False}
    assert detector.verdict(computed).training
