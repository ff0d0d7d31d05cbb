"""``tf.compat.v1`` Session MLP: the session-config wrapper plus ``NpuDumpHook`` in a MonitoredSession.

    python sample_models/mlp_session.py --output-dir out
"""
import sys

import tensorflow as tf

try:
    from . import _data, _session
except ImportError:  # run as a script
    import _data
    import _session

v1 = tf.compat.v1


def build_graph(batch_size=16):
    """Builds the MLP into the default graph; returns its named tensors and ops."""
    x_all, y_all = _data.tabular()
    dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).shuffle(64).repeat().batch(batch_size)
    iterator = v1.data.make_initializable_iterator(dataset)
    v1.add_to_collection(v1.GraphKeys.TABLE_INITIALIZERS, iterator.initializer)  # run by the Scaffold
    x, y = iterator.get_next()
    hidden = v1.layers.dense(x, 32, activation=tf.nn.relu, name="hidden1")
    hidden = v1.nn.dropout(hidden, rate=0.2)
    hidden = v1.layers.dense(hidden, 16, activation=tf.nn.tanh, name="hidden2")
    logits = v1.layers.dense(hidden, 2, name="logits")
    loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(y, logits), name="loss")
    global_step = v1.train.get_or_create_global_step()
    train_op = v1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, global_step=global_step)
    return {"loss": loss, "train_op": train_op, "global_step": global_step}


def train(options=None, hooks=(), steps=1000, config=None, graph_dump_dir=None):
    """Runs up to ``steps`` steps in a MonitoredSession; returns the list of losses seen."""
    return _session.train(build_graph, options, hooks, steps, config, graph_dump_dir)


def main(argv=None):
    return _session.main(__doc__.splitlines()[0], train, argv)


if __name__ == "__main__":
    sys.exit(main())
