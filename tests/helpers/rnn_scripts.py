"""Unmodified TF 1.x recurrent training scripts (no npu_dump_hook in them; run under
``npu-dump-hook run``): the control-flow test shapes and the RNN cost benchmark's script.

    python rnn_scripts.py SHAPE WORKDIR [STEPS]

SHAPE:
    dynamic   ``dynamic_rnn`` LSTM with recurrent dropout (``DropoutWrapper(state_keep_prob=)`` with a
              placeholder keep_prob: a dropout inside the while-loop body), plain Session, numpy feed
              (TF 2.x: control flow v2, the loop is a functional While with a body function)
    dynamic_v1flow  the same with TF 1.x control flow (``disable_control_flow_v2``; TF 1.15: as dynamic)
    static    ``static_rnn`` LSTM over 20 steps (unrolled, no loop), plain Session, numpy feed
    static_len the same with ``sequence_length=`` (TF 2.x puts each step in ``StatelessIf`` bodies)
Each prints ``done`` when its training loop ends, and ``step seconds: S`` (the median of its own
training steps after the first, timed by the script itself).
"""
import sys
import time

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()
v1.logging.set_verbosity(v1.logging.ERROR)

TIME, BATCH, FEATURES, UNITS = 6, 4, 3, 5


def _data(steps):
    rows = np.linspace(-1.0, 1.0, BATCH * steps * FEATURES, dtype=np.float32)
    return np.sin(rows * 7).reshape(BATCH, steps, FEATURES), (rows.reshape(BATCH, -1).sum(axis=1) > 0)


def _train(loss, feeds, steps):
    train = v1.train.GradientDescentOptimizer(0.3).minimize(loss)
    times = []
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _step in range(steps):
            start = time.perf_counter()
            sess.run(train, feeds)
            times.append(time.perf_counter() - start)
    later = sorted(times[1:]) or times
    print("step seconds: {:.6f}".format(later[len(later) // 2]))


def _head(outputs, labels):
    logits = v1.layers.dense(outputs, 2, kernel_initializer=v1.glorot_uniform_initializer(seed=2), name="head")
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def dynamic(steps):
    x = v1.placeholder(tf.float32, [None, TIME, FEATURES], name="x")
    y = v1.placeholder(tf.int64, [None], name="y")
    keep_prob = v1.placeholder_with_default(1.0, [], name="keep_prob")
    cell = v1.nn.rnn_cell.LSTMCell(UNITS, initializer=v1.glorot_uniform_initializer(seed=1), name="lstm")
    cell = v1.nn.rnn_cell.DropoutWrapper(cell, state_keep_prob=keep_prob)
    outputs, _state = v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    data, labels = _data(TIME)
    _train(_head(outputs[:, -1], y), {x: data, y: labels.astype(np.int64), keep_prob: 0.9}, steps)


def dynamic_v1flow(steps):
    v1.disable_control_flow_v2()
    dynamic(steps)


def _static(steps, lengths):
    size = 20
    x = v1.placeholder(tf.float32, [None, size, FEATURES], name="x")
    y = v1.placeholder(tf.int64, [None], name="y")
    cell = v1.nn.rnn_cell.LSTMCell(UNITS, initializer=v1.glorot_uniform_initializer(seed=1), name="lstm")
    length = v1.placeholder(tf.int32, [None], name="length") if lengths else None
    outputs, _state = v1.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32, sequence_length=length)
    data, labels = _data(size)
    feeds = {x: data, y: labels.astype(np.int64)}
    if lengths:
        feeds[length] = np.full([BATCH], size, np.int32)
    _train(_head(outputs[-1], y), feeds, steps)


def static(steps):
    _static(steps, False)


def static_len(steps):
    _static(steps, True)


if __name__ == "__main__":
    globals()[sys.argv[1]](int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    print("done")
