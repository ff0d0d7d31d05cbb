"""Small text classifier: embedding + LSTM (a ``tf.while_loop`` inside) in a MonitoredSession.

    python sample_models/text_model.py --output-dir out
"""
import argparse
import sys

import tensorflow as tf

try:
    from . import _data
except ImportError:  # run as a script
    import _data

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
    graph = tf.Graph()
    with graph.as_default():
        model = build_graph()
        if options is not None:
            from npu_dump_hook import session_config

            config = session_config(options, config, graph_dump_dir=graph_dump_dir)
        creator = v1.train.ChiefSessionCreator(config=config)
        losses = []
        with v1.train.MonitoredSession(session_creator=creator, hooks=list(hooks)) as session:
            for _ in range(steps):
                if session.should_stop():
                    break
                _, loss = session.run([model["train_op"], model["loss"]])
                losses.append(float(loss))
    return losses


def main(argv=None):
    from npu_dump_hook import NpuDumpHook

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="npu_dump_hook_out")
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    hook = NpuDumpHook(output_dir=args.output_dir)
    losses = train(hook.options, hooks=[hook], steps=args.steps)
    print("steps run: {}, loss: {}".format(len(losses), losses[-1] if losses else None))
    print("run folder:", hook.run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
