"""The MonitoredSession loop the session-style sample models share."""
import tensorflow as tf

v1 = tf.compat.v1


def train(build_graph, options=None, hooks=(), steps=1000, config=None, graph_dump_dir=None):
    """Builds the model in a new graph and runs up to ``steps`` steps; returns the losses seen.

    With ``options`` the session config goes through ``npu_dump_hook.session_config``,
    exactly as a user script would do it.
    """
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


def main(description, train_fn, argv=None):
    """The command line of a session sample model: one run with NpuDumpHook."""
    import argparse

    from npu_dump_hook import NpuDumpHook

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--output-dir", default="npu_dump_hook_out")
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    hook = NpuDumpHook(output_dir=args.output_dir)
    losses = train_fn(hook.options, hooks=[hook], steps=args.steps)
    print("steps run: {}, loss: {}".format(len(losses), losses[-1] if losses else None))
    print("run folder:", hook.run_dir)
    return 0
