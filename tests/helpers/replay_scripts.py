"""Unmodified TF 1.x training scripts whose batches a golden run cannot make again by itself
(no npu_dump_hook in them; run under ``npu-dump-hook run``): input replay's test shapes.

    python replay_scripts.py SHAPE WORKDIR

SHAPE:
    feed       plain Session, numpy-shuffled feed_dict batches (np.random.permutation, no seed)
               and dropout with a placeholder keep_prob
    clockfeed  the same, shuffled by a generator seeded from the clock (no run makes it again)
    gan        two optimizers in one ``run`` (generator and discriminator), np.random noise feeds
    estimator  Estimator with ``numpy_input_fn(shuffle=True)`` (queue input)
    pyfunc     MonitoredSession over a tf.data pipeline whose map is a ``py_func`` drawing from
               numpy's unseeded generator, plus a ``py_func`` of the step that feeds the model
    late       a string-handle iterator whose pipeline is built after the session, shuffled with a
               seed from the clock
Each prints ``done`` when its training loop ends (under the runner the loop ends at the dumped step).
"""
import os
import sys
import time

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()
v1.logging.set_verbosity(v1.logging.ERROR)

DATA = np.linspace(-1.0, 1.0, 64 * 8, dtype=np.float32).reshape(64, 8)
LABELS = (np.sin(DATA.sum(axis=1) * 3) > 0).astype(np.int64)


def _dense(x, name, units, seed, relu=True):
    with v1.variable_scope(name):
        kernel = v1.get_variable("kernel", [int(x.shape[-1]), units],
                                 initializer=v1.glorot_uniform_initializer(seed=seed))
        bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
        out = tf.matmul(x, kernel) + bias
    return tf.nn.relu(out) if relu else out


def _classifier(x, labels, keep_prob=None):
    hidden = _dense(x, "hidden", 16, 1)
    if keep_prob is not None:
        hidden = v1.nn.dropout(hidden, keep_prob)
    logits = _dense(hidden, "logits", 2, 2, relu=False)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def feed(workdir, permutation=np.random.permutation):
    x = v1.placeholder(tf.float32, [None, 8], name="x")
    y = v1.placeholder(tf.int64, [None], name="y")
    keep_prob = v1.placeholder(tf.float32, name="keep_prob")
    loss = _classifier(x, y, keep_prob)
    train = v1.train.GradientDescentOptimizer(0.5).minimize(loss)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _epoch in range(3):
            order = permutation(len(DATA))
            for start in range(0, len(DATA), 16):
                batch = order[start:start + 16]
                sess.run(train, {x: DATA[batch], y: LABELS[batch], keep_prob: 0.8})


def clockfeed(workdir):
    feed(workdir, np.random.RandomState(int(time.time() * 1e6) % (1 << 32)).permutation)


def gan(workdir):
    noise = v1.placeholder(tf.float32, [None, 4], name="noise")
    real = v1.placeholder(tf.float32, [None, 8], name="real")
    with v1.variable_scope("generator"):
        fake = _dense(_dense(noise, "g1", 16, 3), "g2", 8, 4, relu=False)
    with v1.variable_scope("discriminator") as scope:
        d_real = _dense(_dense(real, "d1", 16, 5), "d2", 1, 6, relu=False)
        scope.reuse_variables()
        d_fake = _dense(_dense(fake, "d1", 16, 5), "d2", 1, 6, relu=False)
    bce = tf.nn.sigmoid_cross_entropy_with_logits
    d_loss = tf.reduce_mean(bce(labels=tf.ones_like(d_real), logits=d_real) +
                            bce(labels=tf.zeros_like(d_fake), logits=d_fake))
    g_loss = tf.reduce_mean(bce(labels=tf.ones_like(d_fake), logits=d_fake))
    d_vars = v1.trainable_variables("discriminator")
    g_vars = v1.trainable_variables("generator")
    d_train = v1.train.GradientDescentOptimizer(0.1).minimize(d_loss, var_list=d_vars)
    g_train = v1.train.GradientDescentOptimizer(0.1).minimize(g_loss, var_list=g_vars)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _step in range(5):
            batch = DATA[np.random.randint(0, len(DATA), 16)]
            sess.run([d_train, g_train], {noise: np.random.normal(size=(16, 4)).astype(np.float32), real: batch})


def estimator(workdir):
    def model_fn(features, labels, mode):
        loss = _classifier(features["x"], labels)
        train = v1.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)

    input_fn = v1.estimator.inputs.numpy_input_fn({"x": DATA}, LABELS, batch_size=16, num_epochs=None,
                                                  shuffle=True)
    est = tf.estimator.Estimator(model_fn, model_dir=os.path.join(workdir, "model"))
    est.train(input_fn, steps=5)


def pyfunc(workdir):
    def jitter(row):
        return (row + np.random.normal(scale=0.1, size=row.shape)).astype(np.float32)

    def labels_of(rows):
        return (rows.sum(axis=1) > np.random.uniform(-0.1, 0.1)).astype(np.int64)

    dataset = tf.data.Dataset.from_tensor_slices(DATA)
    dataset = dataset.map(lambda row: tf.reshape(v1.py_func(jitter, [row], tf.float32), [8]))
    x = v1.data.make_one_shot_iterator(dataset.batch(16).repeat()).get_next()
    y = tf.reshape(v1.py_func(labels_of, [x], tf.int64, name="labels_of"), [-1])
    loss = _classifier(x, y)
    train = v1.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=v1.train.get_or_create_global_step())
    with v1.train.MonitoredSession() as sess:
        for _step in range(5):
            if sess.should_stop():
                break
            sess.run(train)


def late(workdir):
    handle = v1.placeholder(tf.string, [], name="handle")
    iterator = v1.data.Iterator.from_string_handle(handle, (tf.float32, tf.int64), ([None, 8], [None]))
    x, y = iterator.get_next()
    train = v1.train.GradientDescentOptimizer(0.5).minimize(_classifier(x, y))
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        seed = int(time.time() * 1e6) % (1 << 31)
        dataset = tf.data.Dataset.from_tensor_slices((DATA, LABELS)).shuffle(64, seed=seed).batch(16).repeat()
        token = sess.run(v1.data.make_one_shot_iterator(dataset).string_handle())
        for _step in range(5):
            sess.run(train, {handle: token})


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[2] if len(sys.argv) > 2 else ".")
    print("done")
