"""Run in a fresh process: a small MLP trained in a MonitoredSession with one NpuDumpHook.

usage: golden_probe.py HOOK_KWARGS_JSON [--model-seed N] [--data-seed N] [--feed X] [--extra-variable]
                        [--dump-step STEPS]

The input pipeline shuffles (the hook's randomness="strip" removes it), ``--data-seed``
permutes the rows first (another data order), ``--model-seed`` seeds the initializers (the
hook keeps user seeds), ``--feed`` scales the input through a fed placeholder, and
``--extra-variable`` adds a variable the other run does not have, ``--dump-step`` passes
``DumpOptions(enable_dump=True, dump_path="dump", dump_step=STEPS)``. The last stdout line is
JSON: ``{"bundle", "failures", "warnings"}`` or, when the hook raised, ``{"error", "message"}``
(exit status 3).
"""
import argparse
import json
import sys

import numpy as np
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.errors import NpuDumpError

v1 = tf.compat.v1


def build(model_seed, data_seed, feed, extra_variable):
    rows = np.random.RandomState(7)
    x_all = rows.uniform(-1, 1, size=(64, 4)).astype(np.float32)
    y_all = (x_all.sum(axis=1) > 0).astype(np.int32)
    if data_seed is not None:
        order = np.random.RandomState(data_seed).permutation(len(x_all))
        x_all, y_all = x_all[order], y_all[order]
    dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).shuffle(64).repeat().batch(8)
    x, y = v1.data.make_one_shot_iterator(dataset).get_next()
    feeds = {}
    if feed is not None:
        scale = v1.placeholder(tf.float32, [], name="scale")
        x = x * scale
        feeds[scale] = feed
    init = v1.glorot_uniform_initializer(seed=model_seed)
    hidden = v1.layers.dense(x, 8, activation=tf.nn.relu, kernel_initializer=init, name="hidden")
    if extra_variable:
        hidden = hidden + v1.get_variable("extra_bias", [8], initializer=v1.zeros_initializer())
    logits = v1.layers.dense(hidden, 2, kernel_initializer=init, name="logits")
    loss = v1.losses.sparse_softmax_cross_entropy(y, logits)
    global_step = v1.train.get_or_create_global_step()
    train_op = v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, global_step=global_step)
    return train_op, feeds


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("hook_kwargs")
    parser.add_argument("--model-seed", type=int, default=1)
    parser.add_argument("--data-seed", type=int, default=None)
    parser.add_argument("--feed", type=float, default=None)
    parser.add_argument("--extra-variable", action="store_true")
    parser.add_argument("--dump-step", default=None)
    args = parser.parse_args(argv)
    try:
        kwargs = json.loads(args.hook_kwargs)
        if args.dump_step is not None:
            kwargs["options"] = DumpOptions(enable_dump=True, dump_path="dump", dump_step=args.dump_step)
        hook = NpuDumpHook(**kwargs)
        with tf.Graph().as_default():
            train_op, feeds = build(args.model_seed, args.data_seed, args.feed, args.extra_variable)
            with v1.train.MonitoredSession(hooks=[hook]) as session:
                while not session.should_stop():
                    session.run(train_op, feed_dict=feeds or None)
    except NpuDumpError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        return 3
    print(json.dumps({"bundle": hook.bundle.location if hook.bundle is not None else None,
                      "failures": hook.failures, "warnings": hook.warnings, "run_dir": hook.run_dir,
                      "compare_loaded": "npu_dump_hook.compare" in sys.modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
