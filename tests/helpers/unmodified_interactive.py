"""An unmodified script that opens an InteractiveSession before it builds its model (no npu_dump_hook in it).

usage: unmodified_interactive.py
Prints "iterations 100" after its loop (under the runner the process ends with status 0 after the
dumped step, before that line).
"""
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()


def main():
    sess = v1.InteractiveSession()  # the graph is still empty here
    x = v1.constant(np.random.RandomState(0).rand(32, 3).astype(np.float32))
    w = v1.get_variable("w", [3, 1])
    cost = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
    train_op = v1.train.AdamOptimizer(0.1).minimize(cost)
    v1.global_variables_initializer().run()
    iterations = 0
    for _ in range(100):
        train_op.run()
        iterations += 1
    sess.close()
    print("iterations", iterations)


if __name__ == "__main__":
    main()
