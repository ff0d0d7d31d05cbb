"""Online-inference scripts over one small trained model, unmodified or with the hook by hand.

usage: inference_scripts.py train MODEL
       inference_scripts.py ENTRY MODEL [HOOK_JSON]
ENTRY: predict | evaluate | session | monitored | savedmodel | frozen | restore_train

``train`` trains the model and saves it four ways under MODEL: a checkpoint (ckpt/), an
Estimator model_dir (estimator/), a SavedModel (saved/) and a frozen GraphDef (frozen.pb).
Every ENTRY then runs inference over BATCHES fixed batches (the same order every run) and prints
``batches N`` when its loop ends. With HOOK_JSON (the hook's keywords as a JSON object) the
script uses NpuDumpHook / NpuDumpSession itself; without, it has no npu_dump_hook in it (the
runner's case). The first real batch is what a dump must capture; set-up runs (initializers,
restores) and a warm-up run on constants come first and must be skipped.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

from inference_data import BATCH, BATCHES, FEATURES, data

v1 = tf.compat.v1
v1.disable_eager_execution()

#: A file that gets, through the npu_bridge double, the NPU options of every session the script
#: makes and its runs (tests/npu_bridge_double/npu_bridge/double.py ``record_sessions``).
RECORD = os.environ.get("NPU_BRIDGE_DOUBLE_RECORD")
if RECORD:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "npu_bridge_double"))
    from npu_bridge import double

    double.record_sessions(RECORD)


def net(x):
    """A convolution with an inference BatchNorm (conv/Conv2D, bn/FusedBatchNormV3, is_training=False:
    the ascend profile folds it into the convolution), then two dense layers: fc1/MatMul,
    fc1/BiasAdd, fc1/Relu, logits/MatMul, logits/BiasAdd."""
    image = tf.reshape(x, [-1, 2, 3, 1])
    conv = v1.layers.conv2d(image, 4, 2, padding="same", use_bias=False, name="conv")
    conv = tf.nn.relu(v1.layers.batch_normalization(conv, training=False, fused=True, name="bn"))
    hidden = v1.layers.dense(tf.reshape(conv, [-1, 24]), 8, activation=tf.nn.relu, name="fc1")
    hidden = v1.layers.dropout(hidden, rate=0.2, training=False)  # inference: dropout is off
    return v1.layers.dense(hidden, 2, name="logits")


def model_fn(features, labels, mode):
    logits = net(features)
    predictions = {"classes": tf.argmax(logits, 1), "logits": logits}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = v1.metrics.accuracy(labels, predictions["classes"])
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    train_op = v1.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x, y = data()
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)


def estimator(model):
    config = tf.estimator.RunConfig(tf_random_seed=1, log_step_count_steps=None, save_summary_steps=1000)
    return tf.estimator.Estimator(model_fn, model_dir=os.path.join(model, "estimator"), config=config)


def train(model):
    os.makedirs(os.path.join(model, "ckpt"), exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(1)
        x = v1.placeholder(tf.float32, [None, FEATURES], name="x")
        y = v1.placeholder(tf.int64, [None], name="y")
        logits = tf.identity(net(x), name="predictions")
        loss = v1.losses.sparse_softmax_cross_entropy(y, logits)
        step = v1.train.GradientDescentOptimizer(0.5).minimize(loss)
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            xs, ys = data(1)
            for _ in range(20):
                sess.run(step, {x: xs, y: ys})
            saver.save(sess, os.path.join(model, "ckpt", "model.ckpt"))
            v1.saved_model.simple_save(sess, os.path.join(model, "saved"), {"x": x}, {"predictions": logits})
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["predictions"])
    with open(os.path.join(model, "frozen.pb"), "wb") as handle:
        handle.write(frozen.SerializeToString())
    estimator(model).train(input_fn, steps=5)
    print("trained")


def hook_of(options):
    if options is None:
        return []
    from npu_dump_hook import NpuDumpHook

    return [NpuDumpHook(**options)]


def wrap(sess, options):
    """The plain session, or NpuDumpSession over it (by hand)."""
    if options is None:
        return sess
    from npu_dump_hook import NpuDumpSession

    return NpuDumpSession(sess, **options)


def warm_up(graph):
    with graph.as_default():
        return tf.reduce_sum(tf.ones([2, 2]), name="warm_up")


def loop(sess, inputs, outputs, warm):
    """A warm-up run on constants (not the iteration), then every batch, fed in order."""
    sess.run(warm)
    x, _ = data()
    total = 0.0
    for number in range(BATCHES):
        total += float(np.sum(sess.run(outputs, {inputs: x[number * BATCH:(number + 1) * BATCH]})))
    print("batches", BATCHES, round(total, 3))


def session(model, options):
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, FEATURES], name="x")
        logits = tf.identity(net(x), name="predictions")
        warm = warm_up(v1.get_default_graph())
        saver = v1.train.Saver()
        sess = wrap(v1.Session(), options)
        saver.restore(sess, os.path.join(model, "ckpt", "model.ckpt"))  # a restore run: not the iteration
        loop(sess, x, logits, warm)


def restore_train(model, options):
    """A training script that restores the checkpoint, evaluates a fed batch, then trains: under
    mode auto the evaluation is no inference iteration (the script built an optimizer), the
    training step is the one dumped."""
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, FEATURES], name="x")
        y = v1.placeholder(tf.int64, [None], name="y")
        logits = tf.identity(net(x), name="predictions")
        loss = v1.losses.sparse_softmax_cross_entropy(y, logits)
        step = v1.train.GradientDescentOptimizer(0.5).minimize(loss)
        saver = v1.train.Saver()
        sess = wrap(v1.Session(), options)
        saver.restore(sess, os.path.join(model, "ckpt", "model.ckpt"))
        xs, ys = data()
        print("evaluated", round(float(np.sum(sess.run(logits, {x: xs[:BATCH]}))), 3))
        for number in range(BATCHES):
            sess.run(step, {x: xs[number * BATCH:(number + 1) * BATCH], y: ys[number * BATCH:(number + 1) * BATCH]})
        print("batches", BATCHES)


def monitored(model, options):
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, FEATURES], name="x")
        logits = tf.identity(net(x), name="predictions")
        creator = v1.train.ChiefSessionCreator(checkpoint_filename_with_path=os.path.join(model, "ckpt", "model.ckpt"))
        with v1.train.MonitoredSession(session_creator=creator, hooks=hook_of(options)) as sess:
            xs, _ = data()
            number = 0
            while not sess.should_stop() and number < BATCHES:
                sess.run(logits, {x: xs[number * BATCH:(number + 1) * BATCH]})
                number += 1
    print("batches", number)


def savedmodel(model, options):
    with v1.Session(graph=tf.Graph()) as sess:
        meta = v1.saved_model.loader.load(sess, ["serve"], os.path.join(model, "saved"))
        signature = meta.signature_def["serving_default"]
        inputs = sess.graph.get_tensor_by_name(signature.inputs["x"].name)
        outputs = sess.graph.get_tensor_by_name(signature.outputs["predictions"].name)
        warm = warm_up(sess.graph)
        loop(wrap(sess, options), inputs, outputs, warm)


def frozen(model, options):
    graph_def = v1.GraphDef()
    with open(os.path.join(model, "frozen.pb"), "rb") as handle:
        graph_def.ParseFromString(handle.read())
    with tf.Graph().as_default() as graph:
        tf.import_graph_def(graph_def, name="")
        warm = warm_up(graph)
        with v1.Session(graph=graph) as sess:
            loop(wrap(sess, options), graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("predictions:0"),
                 warm)


def predict(model, options):
    results = list(estimator(model).predict(input_fn, hooks=hook_of(options)))
    print("predicted", len(results))


def evaluate(model, options):
    metrics = estimator(model).evaluate(input_fn, hooks=hook_of(options))
    print("evaluated", sorted(metrics))


if __name__ == "__main__":
    ENTRY, MODEL = sys.argv[1], sys.argv[2]
    if ENTRY == "train":
        train(MODEL)
    else:
        OPTIONS = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
        globals()[ENTRY](MODEL, OPTIONS)
