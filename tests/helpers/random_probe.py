"""Run in a fresh process: one step of a model full of random sources under NpuDumpHook.

usage: random_probe.py POLICY OUTPUT_DIR  -> prints one JSON object of fetched values
"""
import json
import sys

import numpy as np
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook

v1 = tf.compat.v1
v1.disable_eager_execution()


class FetchHook(v1.train.SessionRunHook):
    def __init__(self, tensors):
        self.tensors = tensors
        self.values = None

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.tensors)

    def after_run(self, run_context, run_values):
        self.values = {k: np.asarray(v).tolist() for k, v in run_values.results.items()}


def main(policy, output_dir):
    with tf.Graph().as_default():
        dataset = tf.data.Dataset.range(20).shuffle(20).batch(5)
        iterator = v1.data.make_initializable_iterator(dataset)
        v1.add_to_collection(v1.GraphKeys.TABLE_INITIALIZERS, iterator.initializer)
        batch = iterator.get_next()
        x = tf.reshape(tf.range(32, dtype=tf.float32), [4, 8]) / 10.0
        dense = v1.layers.dense(x, 6, name="dense")
        dropped = v1.nn.dropout(dense, rate=0.5)
        tensors = {
            "uniform": v1.random_uniform([3]),
            "normal": v1.random_normal([3]),
            "truncated": v1.truncated_normal([3]),
            "shuffled": v1.random_shuffle(tf.range(10)),
            "dense": dense,
            "dropped": dropped,
            "batch": batch,
        }
        loss = tf.reduce_sum(dropped * dropped) + 0.0 * tf.cast(tf.reduce_sum(batch), tf.float32)
        tensors["loss"] = loss
        global_step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
        fetch = FetchHook(tensors)
        hook = NpuDumpHook(DumpOptions(), randomness=policy, output_dir=output_dir)
        with v1.train.MonitoredSession(hooks=[hook, fetch]) as session:
            while not session.should_stop():
                session.run(train_op)
    print(json.dumps({"values": fetch.values, "run_dir": hook.run_dir, "summary_steps": hook.summary["steps"],
                      "randomness": hook.summary["randomness"]}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
