"""The seed guide's sess.run-mode script, unmodified (no npu_dump_hook in it).

usage: unmodified_session.py [DUMP_PATH]
With DUMP_PATH the session config is the guide's own (NpuOptimizer: enable_dump, dump_path,
dump_mode all). Prints its session config's dump options and the cost before training, then "iterations 100" after its 100-step loop (under the
runner the process ends with status 0 after the dumped step, before that line).
"""
import sys

import numpy as np
import tensorflow as tf

from npu_config_probe import describe

v1 = tf.compat.v1
v1.disable_eager_execution()


def guide_config(dump_path):
    """The seed guide's sess.run-mode config, as it writes it."""
    config = v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["use_off_line"].b = True
    custom_op.parameter_map["enable_dump"].b = True
    custom_op.parameter_map["dump_path"].s = tf.compat.as_bytes(dump_path)
    custom_op.parameter_map["dump_mode"].s = tf.compat.as_bytes("all")
    return config


def main(dump_path):
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
    with v1.Session(config=guide_config(dump_path) if dump_path else None) as sess:
        print(describe(sess))
        sess.run(init)
        print(sess.run(cost, feed_dict=feed))
        for _ in range(100):
            sess.run(train_op, feed_dict=feed)
            iterations += 1
    print("iterations", iterations)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
