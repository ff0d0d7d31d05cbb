"""``tf.compat.v1`` Session MLP: the session-config wrapper plus ``NpuDumpHook`` in a MonitoredSession.

    python sample_models/mlp_session.py --output-dir out
"""
import argparse
import sys

import tensorflow as tf

try:
    from . import _data
except ImportError:  # run as a script
    import _data

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
