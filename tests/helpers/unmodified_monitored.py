"""An unmodified MonitoredTrainingSession training script (no npu_dump_hook in it): 100 steps.

usage: unmodified_monitored.py [EXIT_STATUS]
Prints the session config's dump options, then "steps N" after the session closes (under the runner the hook stopped it after one step),
then exits with EXIT_STATUS (default 0).
"""
import sys

import numpy as np
import tensorflow as tf

from npu_config_probe import PrintNpuConfig

v1 = tf.compat.v1
v1.disable_eager_execution()


def main():
    x_all = np.random.RandomState(0).rand(64, 4).astype(np.float32)
    y_all = x_all.sum(axis=1, keepdims=True)
    dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).repeat().batch(16)
    x, y = v1.data.make_one_shot_iterator(dataset).get_next()
    hidden = v1.layers.dense(x, 8, activation=tf.nn.tanh, name="hidden")
    loss = v1.losses.mean_squared_error(y, v1.layers.dense(hidden, 1, name="out"))
    train_op = v1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, global_step=v1.train.get_or_create_global_step())
    steps = 0
    with v1.train.MonitoredTrainingSession(hooks=[v1.train.StopAtStepHook(last_step=100), PrintNpuConfig()]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
            steps += 1
    print("steps", steps)


if __name__ == "__main__":
    main()
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
