"""Small text classifier: embedding + LSTM (a ``tf.while_loop`` inside) in a MonitoredSession.

    python sample_models/text_model.py --output-dir out
"""
import sys

import tensorflow as tf

try:
    from . import _data, _session
except ImportError:  # run as a script
    import _data
    import _session

v1 = tf.compat.v1

VOCAB = 50


def build_graph(batch_size=8):
    tokens_all, labels_all = _data.token_sequences(vocab=VOCAB)
    dataset = tf.data.Dataset.from_tensor_slices((tokens_all, labels_all)).shuffle(128).repeat().batch(
        batch_size, drop_remainder=True)
    iterator = v1.data.make_initializable_iterator(dataset)
    v1.add_to_collection(v1.GraphKeys.TABLE_INITIALIZERS, iterator.initializer)
    tokens, labels = iterator.get_next()
    embedding = v1.get_variable("embedding", [VOCAB, 16])
    embedded = tf.nn.embedding_lookup(embedding, tokens)
    cell = v1.nn.rnn_cell.LSTMCell(24, name="lstm")
    _, state = v1.nn.dynamic_rnn(cell, embedded, dtype=tf.float32)
    logits = v1.layers.dense(state.h, 2, name="logits")
    loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(labels, logits), name="loss")
    global_step = v1.train.get_or_create_global_step()
    train_op = v1.train.AdamOptimizer(1e-2).minimize(loss, global_step=global_step)
    return {"loss": loss, "train_op": train_op, "global_step": global_step}


def train(options=None, hooks=(), steps=1000, config=None, graph_dump_dir=None):
    """Runs up to ``steps`` steps in a MonitoredSession; returns the list of losses seen."""
    return _session.train(build_graph, options, hooks, steps, config, graph_dump_dir)


def main(argv=None):
    return _session.main(__doc__.splitlines()[0], train, argv)


if __name__ == "__main__":
    sys.exit(main())
