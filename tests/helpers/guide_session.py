"""The seed guide's sess.run-mode script, wrapped in NpuDumpSession (run in a fresh process).

usage: guide_session.py STOP OUTPUT_DIR   (STOP: exit | continue)
Prints "iterations N" before exiting normally; with stop=exit the wrapper ends the process first.
"""
import sys

import numpy as np
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpSession, session_config

v1 = tf.compat.v1
v1.disable_eager_execution()


def main(stop, output_dir):
    options = DumpOptions(enable_dump=True, dump_path=output_dir + "/dump")
    x_data = np.random.RandomState(0).rand(64, 3).astype(np.float32)
    y_data = x_data.sum(axis=1, keepdims=True)
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    y = v1.placeholder(tf.float32, [None, 1], name="y")
    w = v1.get_variable("w", [3, 1])
    hidden = v1.nn.dropout(tf.matmul(x, w), rate=0.1)
    cost = tf.reduce_mean(tf.square(hidden - y), name="cost")
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(cost, global_step=v1.train.get_or_create_global_step())
    init = v1.global_variables_initializer()
    feed = {x: x_data, y: y_data}
    iterations = 0
    with NpuDumpSession(v1.Session(config=session_config(options)), options, stop=stop, output_dir=output_dir) as sess:
        sess.run(init)
        print(sess.run(cost, feed_dict=feed))
        for _ in range(100):
            sess.run(train_op, feed_dict=feed)
            iterations += 1
    print("iterations", iterations)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
