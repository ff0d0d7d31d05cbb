"""``tf.compat.v1`` Session CNN with 8 convolutions and 3 dense layers (a deeper model than
``cnn_estimator``), trained with SGD, momentum or Adam: what compare's per-op precision is
calibrated and tested on (docs/compare.md, "Expected precision per op class").

    python sample_models/deep_cnn.py --output-dir out          # momentum; train(optimizer="adam") in code
"""
import sys

import tensorflow as tf

try:
    from . import _data, _session
except ImportError:  # run as a script
    import _data
    import _session

v1 = tf.compat.v1

#: optimizer name -> factory
OPTIMIZERS = {
    "sgd": lambda: v1.train.GradientDescentOptimizer(0.05),
    "momentum": lambda: v1.train.MomentumOptimizer(0.01, 0.9),
    "adam": lambda: v1.train.AdamOptimizer(1e-3),
}


def build_graph(optimizer="momentum", batch_size=8, convs=8, seed=3):
    """Builds the model into the default graph: ``convs`` 3x3 convolutions (ReLU), a 2x2 max
    pool after every second one (down to 7x7 on 28x28 input, then no more pooling), three dense
    layers; returns its named tensors and ops."""
    images, labels = _data.mnist_like(count=64)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(batch_size, drop_remainder=True)
    x, y = v1.data.make_one_shot_iterator(dataset).get_next()
    init = v1.glorot_uniform_initializer(seed=seed)
    for index in range(convs):
        x = v1.layers.conv2d(x, 8 + 4 * (index // 2), 3, padding="same", activation=tf.nn.relu,
                             kernel_initializer=init, name="conv{}".format(index + 1))
        if index % 2 == 1 and x.shape[1] > 7:
            x = v1.layers.max_pooling2d(x, 2, 2, name="pool{}".format(index // 2 + 1))
    x = v1.layers.flatten(x, name="flatten")
    x = v1.layers.dense(x, 64, activation=tf.nn.relu, kernel_initializer=init, name="fc1")
    x = v1.layers.dense(x, 32, activation=tf.nn.relu, kernel_initializer=init, name="fc2")
    logits = v1.layers.dense(x, 10, kernel_initializer=init, name="logits")
    loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(y, logits), name="loss")
    global_step = v1.train.get_or_create_global_step()
    train_op = OPTIMIZERS[optimizer]().minimize(loss, global_step=global_step)
    return {"loss": loss, "train_op": train_op, "global_step": global_step}


def train(options=None, hooks=(), steps=1000, config=None, graph_dump_dir=None, optimizer="momentum", convs=8,
          batch_size=8, seed=3):
    """Runs up to ``steps`` steps in a MonitoredSession; returns the list of losses seen."""
    return _session.train(lambda: build_graph(optimizer, batch_size, convs, seed), options, hooks, steps, config,
                          graph_dump_dir)


def main(argv=None):
    return _session.main(__doc__.splitlines()[0], train, argv)


if __name__ == "__main__":
    sys.exit(main())
