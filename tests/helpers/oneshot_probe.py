"""Run in a fresh process: one training step fed by make_one_shot_iterator over a shuffled,
repeated, batched dataset, under NpuDumpHook; prints the batch the step consumed as JSON.

usage: oneshot_probe.py POLICY OUTPUT_DIR
"""
import hashlib
import json
import os
import sys

import numpy as np
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook

v1 = tf.compat.v1
v1.disable_eager_execution()


class FetchHook(v1.train.SessionRunHook):
    def __init__(self, tensor):
        self.tensor, self.value = tensor, None

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.tensor)

    def after_run(self, run_context, run_values):
        if self.value is None:
            self.value = np.asarray(run_values.results).tolist()


def main(policy, output_dir):
    with tf.Graph().as_default():
        dataset = tf.data.Dataset.range(256).shuffle(256).repeat().batch(8)
        batch = v1.data.make_one_shot_iterator(dataset).get_next()
        weight = v1.get_variable("w", initializer=1.0)
        loss = tf.reduce_sum(tf.cast(batch, tf.float32) * weight)
        train_op = v1.train.GradientDescentOptimizer(0.0).minimize(loss, global_step=v1.train.get_or_create_global_step())
        fetch = FetchHook(batch)
        hook = NpuDumpHook(DumpOptions(), randomness=policy, output_dir=output_dir)
        with v1.train.MonitoredSession(hooks=[hook, fetch]) as session:
            while not session.should_stop():
                session.run(train_op)
    golden = hook.layout.golden_dir  # the reference capture of the step (no NPU dump asked for)
    (dumped,) = [name for name in os.listdir(golden) if name.startswith("IteratorGetNext.0.")]
    with open(os.path.join(golden, dumped), "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    print(json.dumps({"batch": fetch.value, "dumped_sha256": digest, "sources": hook.summary["randomness"]["sources"]}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
