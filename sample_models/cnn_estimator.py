"""Estimator CNN on synthetic MNIST-shaped data, with dropout and a shuffled dataset.

Run it as a user would::

    python sample_models/cnn_estimator.py --output-dir out

which trains "1000 steps" with ``NpuDumpHook``: the hook stops after one step,
removes dropout and the shuffle, and dumps that step.
"""
import argparse
import sys

import tensorflow as tf

try:
    from . import _data
except ImportError:  # run as a script
    import _data

v1 = tf.compat.v1


def input_fn(batch_size=8):
    images, labels = _data.mnist_like()
    dataset = tf.data.Dataset.from_tensor_slices(({"image": images}, labels))
    return dataset.shuffle(buffer_size=256).repeat().batch(batch_size, drop_remainder=True)


def model_fn(features, labels, mode, params=None):
    training = mode == tf.estimator.ModeKeys.TRAIN
    x = features["image"]
    x = v1.layers.conv2d(x, 8, 3, padding="same", activation=tf.nn.relu, name="conv1")
    x = v1.layers.max_pooling2d(x, 2, 2, name="pool1")
    x = v1.layers.conv2d(x, 16, 3, padding="same", activation=tf.nn.relu, name="conv2")
    x = v1.layers.max_pooling2d(x, 2, 2, name="pool2")
    x = v1.layers.flatten(x, name="flatten")
    x = v1.layers.dense(x, 32, activation=tf.nn.relu, name="fc1")
    x = v1.layers.dropout(x, rate=0.3, training=training, name="dropout")
    logits = v1.layers.dense(x, 10, name="logits")
    loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(labels, logits), name="loss")
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = v1.metrics.accuracy(labels, tf.argmax(logits, axis=1))
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})
    optimizer = v1.train.AdamOptimizer(1e-3)
    train_op = optimizer.minimize(loss, global_step=v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def make_estimator(model_dir, options=None, run_config=None):
    """An Estimator whose RunConfig carries the dump options (via ``estimator_config``)."""
    config = run_config or tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=None,
                                                  log_step_count_steps=None)
    if options is not None:
        from npu_dump_hook import estimator_config

        config = estimator_config(options, config)  # trains in a dump-run model_dir (config.model_dir)
    return tf.estimator.Estimator(model_fn=model_fn, model_dir=None if config.model_dir else model_dir, config=config)


def train(model_dir, hooks=(), steps=1000, options=None):
    estimator = make_estimator(model_dir, options)
    estimator.train(input_fn, hooks=list(hooks), steps=steps)
    return estimator


def main(argv=None):
    from npu_dump_hook import DumpOptions, NpuDumpHook

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="npu_dump_hook_out")
    parser.add_argument("--model-dir", default=None)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    hook = NpuDumpHook(output_dir=args.output_dir)
    options = hook.options if isinstance(hook.options, DumpOptions) else None
    train(args.model_dir or hook.run_dir + "/model", hooks=[hook], steps=args.steps, options=options)
    print("run folder:", hook.run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
