"""A training script in the shape of an Ascend model-zoo NPU port, written by this project.

usage: modelzoo_npu_init.py {session|estimator} [--dump OUTPUT_DIR]

It does what the ports of Ascend/ModelZoo-TensorFlow do (docs/reference/npu-bridge-dump-api.md
§10, §13): ``from npu_bridge.npu_init import *``; its own ``NpuOptimizer`` session config
(``precision_mode``, ``use_off_line``, ``mix_compile_mode`` in ``parameter_map``; ``remapping`` and
``memory_optimization`` set to ``RewriterConfig.OFF``) passed through ``npu_config_proto``;
``npu_ops.dropout``; ``NPUDistributedOptimizer`` around a TF optimizer; then five training steps in
a ``tf.compat.v1.Session`` (``util.set_iteration_per_loop``) or an ``NPUEstimator``
(``NPURunConfig``, ``NPUEstimatorSpec``, ``npu_hooks_append``). Prints ``loss <value>`` per step
(session) and ``trained global_step <n>`` at the end.

``--dump OUTPUT_DIR`` is the same script with npu_dump_hook added by hand, the README's way, on
the emulated NPU: ``NpuDumpSession`` around the session or ``NpuDumpHook`` in the train hooks,
``backend="emulated"``. The bundle path is then the last line printed.
"""
import argparse
import os

import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *  # noqa: F401,F403  (the model-zoo idiom under test)

v1 = tf.compat.v1
v1.disable_eager_execution()

STEPS = 5
BATCH = 16


def model_zoo_config():
    """The session config as the ports write it: their own NpuOptimizer entry and rewrites."""
    config = config_pb2.ConfigProto()  # noqa: F405
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["use_off_line"].b = True
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["mix_compile_mode"].b = False
    custom_op.parameter_map["iterations_per_loop"].i = 1
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF  # noqa: F405
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF  # noqa: F405
    return npu_config_proto(config_proto=config)  # noqa: F405


def data():
    rng = np.random.RandomState(0)
    x = rng.rand(BATCH * STEPS, 8).astype(np.float32)
    y = np.stack([x.sum(axis=1), x[:, 0] - x[:, 1]], axis=1).astype(np.float32)
    return x, y


def network(x, y, mode_train=True):
    hidden = v1.layers.dense(x, 16, activation=tf.nn.relu, name="dense1")
    if mode_train:
        hidden = npu_ops.dropout(hidden, keep_prob=0.9)  # noqa: F405
    out = v1.layers.dense(hidden, 2, name="dense2")
    return tf.reduce_mean(tf.square(out - y), name="loss")


def optimizer():
    return NPUDistributedOptimizer(v1.train.MomentumOptimizer(0.05, 0.9))  # noqa: F405


def train_session(dump_dir):
    x_data, y_data = data()
    x = v1.placeholder(tf.float32, [None, 8], name="x")
    y = v1.placeholder(tf.float32, [None, 2], name="y")
    loss = network(x, y)
    global_step = v1.train.get_or_create_global_step()
    train_op = optimizer().minimize(loss, global_step=global_step)
    sess = v1.Session(config=model_zoo_config())
    if dump_dir:  # added by hand: npu_dump_hook around the port's own session
        from npu_dump_hook import DumpOptions, NpuDumpSession, session_config

        options = DumpOptions(enable_dump=True, dump_path=os.path.join(dump_dir, "dump"), dump_mode="all")
        sess.close()
        sess = NpuDumpSession(v1.Session(config=session_config(options, model_zoo_config())), options,
                              backend="emulated", output_dir=dump_dir)
    with sess:
        sess.run(v1.global_variables_initializer())
        train_op = util.set_iteration_per_loop(sess, train_op, 1)  # noqa: F405
        for step in range(STEPS):
            feed = {x: x_data[step * BATCH:(step + 1) * BATCH], y: y_data[step * BATCH:(step + 1) * BATCH]}
            _, value = sess.run([train_op, loss], feed_dict=feed)
            print("loss", value)
        print("trained global_step", sess.run(global_step))


def model_fn(features, labels, mode):
    loss = network(features, labels, mode == tf.estimator.ModeKeys.TRAIN)
    train_op = optimizer().minimize(loss, global_step=v1.train.get_or_create_global_step())
    return NPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)  # noqa: F405


def input_fn():
    x_data, y_data = data()
    return tf.data.Dataset.from_tensor_slices((x_data, y_data)).batch(BATCH, drop_remainder=True).repeat()


def train_estimator(model_dir, dump_dir):
    os.environ.setdefault("JOB_ID", "10086")  # the ports' test/env.sh sets it; NPUEstimator needs it
    run_config = NPURunConfig(model_dir=model_dir, session_config=model_zoo_config(),  # noqa: F405
                              precision_mode="allow_mix_precision", iterations_per_loop=1, tf_random_seed=1)
    hooks = []
    if dump_dir:  # added by hand: the hook and the dump options in the port's own NPURunConfig
        from npu_dump_hook import DumpOptions, NpuDumpHook, estimator_config

        options = DumpOptions(enable_dump=True, dump_path=os.path.join(dump_dir, "dump"), dump_mode="all")
        run_config = estimator_config(options, run_config, keep_checkpoints=True)
        hooks.append(NpuDumpHook(options, backend="emulated", output_dir=dump_dir))
    estimator = NPUEstimator(model_fn=model_fn, config=run_config)  # noqa: F405
    estimator.train(input_fn, hooks=npu_hooks_append(hooks), steps=STEPS)  # noqa: F405
    print("trained global_step", estimator.get_variable_value("global_step"))
    if dump_dir and hooks[0].bundle is not None:
        print(hooks[0].bundle.location)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("session", "estimator"))
    parser.add_argument("--dump", metavar="OUTPUT_DIR")
    parser.add_argument("--model-dir", default="model_dir")
    args = parser.parse_args()
    if args.mode == "session":
        train_session(args.dump)
    else:
        train_estimator(args.model_dir, args.dump)


if __name__ == "__main__":
    main()
