"""An unmodified tf.estimator training script (no npu_dump_hook in it): trains 100 steps.

usage: unmodified_estimator.py MODEL_DIR [subclass|train_and_evaluate]
With "subclass", an NPUEstimator-like subclass (its own NpuOptimizer entry, dump off); with
"train_and_evaluate", tf.estimator.train_and_evaluate whose evaluation prints its session config
("eval " + the line below).
Prints the session config's dump options, then "trained to step N" when train() returns (under
the runner the hook stopped it after one step).
"""
import sys

import numpy as np
import tensorflow as tf

from npu_config_probe import PrintNpuConfig

v1 = tf.compat.v1


def input_fn():
    x = np.random.RandomState(0).rand(64, 4).astype(np.float32)
    y = (x.sum(axis=1) > 2.0).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).shuffle(64).repeat().batch(16)


def model_fn(features, labels, mode):
    hidden = v1.layers.dense(features["x"], 8, activation=tf.nn.relu, name="hidden")
    hidden = v1.layers.dropout(hidden, rate=0.2, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = v1.layers.dense(hidden, 2, name="logits")
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdamOptimizer(0.01).minimize(loss, global_step=v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class SubclassedEstimator(tf.estimator.Estimator):
    """As NPUEstimator: a subclass (Estimator forbids overriding train()) whose constructor appends
    an NpuOptimizer entry with the dump off to the session config."""

    def __init__(self, model_fn, config):
        proto = v1.ConfigProto()
        entry = proto.graph_options.rewrite_options.custom_optimizers.add(name="NpuOptimizer")
        entry.parameter_map["enable_dump"].b = False
        entry.parameter_map["use_off_line"].b = True
        super(SubclassedEstimator, self).__init__(model_fn, config=config.replace(session_config=proto))


def main(model_dir, kind):
    config = tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=None, log_step_count_steps=None)
    cls = SubclassedEstimator if kind == "subclass" else tf.estimator.Estimator
    estimator = cls(model_fn, config=config)
    if kind == "train_and_evaluate":
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=100, hooks=[PrintNpuConfig()]),
            tf.estimator.EvalSpec(input_fn, steps=1, hooks=[PrintNpuConfig("eval ")], throttle_secs=0))
    else:
        estimator.train(input_fn, hooks=[PrintNpuConfig()], steps=100)
    print("trained to step", estimator.get_variable_value("global_step"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "estimator")
