"""Issue 23's size target: the dump size estimated before the dumped step vs the bytes written.

Each sample model (``npu_dump_hook.sample_models``: mlp_session, deep_cnn, text_model,
cnn_estimator) trains one step under the hook with the emulated NPU, once per dump mode
(``output``, ``input``, ``all``) and once with ``dump_data="stats"``; the hook's estimate
(``run.json`` ``size.estimate``, made before the step) is printed beside the actual bytes
(``size.actual``: the dump files the emulator wrote, without its own step marks; the golden
``.npy`` files + manifest when the run captures a golden) and their ratio. Both emulated profiles run
by default: ``exact`` (every TF op one GE op, TF dtypes and layouts) and ``ascend`` (GE fusion, float16
Cube ops, NC1HWC0/FRACTAL_Z/FRACTAL_NZ padding, inserted Cast/TransData), which the estimate models
from the graph (npu_dump_hook/train/_sizing_graph.py). Target: every ratio within 0.8-1.2 (+-20%).

    .venv/bin/python benchmarks/bench_size_estimate.py [--models mlp_session deep_cnn] [--profiles exact ascend]

Exit status 0 when every ratio is within the target, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from npu_dump_hook import DumpOptions, NpuDumpHook  # noqa: E402
from npu_dump_hook.sample_models import cnn_estimator, deep_cnn, mlp_session, text_model  # noqa: E402

def dense_chain(options, hook, root, blocks=120):
    """A chain of ``blocks`` dense blocks (MatMul + BiasAdd + Tanh, batch 64 x width 256), one SGD
    step in a MonitoredSession: about 10 dumped ops a block with its gradients and updates."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default():
        x = v1.random.stateless_uniform([64, 256], seed=[1, 2]) if hasattr(v1.random, "stateless_uniform") else \
            tf.ones([64, 256])
        for index in range(blocks):
            x = v1.layers.dense(x, 256, activation=tf.nn.tanh, name="block{}".format(index),
                                kernel_initializer=v1.glorot_uniform_initializer(seed=index))
        loss = tf.reduce_mean(tf.square(x))
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(train_op)


MODELS = {
    "mlp_session": lambda options, hook, root: mlp_session.train(options, hooks=[hook]),
    "deep_cnn": lambda options, hook, root: deep_cnn.train(options, hooks=[hook]),
    "text_model": lambda options, hook, root: text_model.train(options, hooks=[hook]),
    "cnn_estimator": lambda options, hook, root: cnn_estimator.train(os.path.join(root, "model"), hooks=[hook],
                                                                     options=options),
    "dense_chain": dense_chain,
}
DEFAULT_MODELS = ("cnn_estimator", "deep_cnn", "mlp_session", "text_model")
CASES = (("output", "tensor"), ("input", "tensor"), ("all", "tensor"), ("output", "stats"))
LOW, HIGH = 0.8, 1.2


def one_run(model, profile, mode, data):
    root = tempfile.mkdtemp(prefix="bench_size_")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        options = DumpOptions(enable_dump=True, dump_path=os.path.join(root, "dump"), dump_mode=mode, dump_data=data)
        hook = NpuDumpHook(options, output_dir=os.path.join(root, "out"), backend="emulated", emulate_profile=profile,
                           verbose=False)
        MODELS[model](hook.options, hook, root)
        with open(os.path.join(hook.run_dir, "run.json")) as handle:
            return json.load(handle)["size"]
    finally:
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)


def ratio(estimate, actual):
    return None if not actual else estimate / float(actual)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=sorted(MODELS),
                        help="dense_chain: a model of about 1,200 dumped ops (not in the default list)")
    parser.add_argument("--profiles", nargs="+", default=["exact", "ascend"], choices=["exact", "ascend"])
    args = parser.parse_args(argv)
    header = "{:<14} {:<7} {:<14} {:>12} {:>12} {:>6}   {:>12} {:>12} {:>6}  {}".format(
        "model", "profile", "mode", "dump est", "dump actual", "ratio", "golden est", "golden act", "ratio",
        "unknown shapes (assumed)")
    print(header)
    print("-" * len(header))
    failed, stats_ratios = [], []
    for model in args.models:
        for profile in args.profiles:
            actual_by_case = {}
            for mode, data in CASES:
                size = one_run(model, profile, mode, data)
                est, act = size["estimate"], size["actual"]
                dump_ratio = ratio(est["dump_bytes"], act["dump_bytes"])
                golden_ratio = ratio(est["golden_bytes"], act["golden_bytes"])
                label = mode if data == "tensor" else "stats/" + mode
                print("{:<14} {:<7} {:<14} {:>12,} {:>12,} {:>6.3f}   {:>12,} {:>12,} {:>6}  {}".format(
                    model, profile, label, est["dump_bytes"], act["dump_bytes"] or 0, dump_ratio or 0,
                    est["golden_bytes"], act["golden_bytes"] or 0,
                    "{:.3f}".format(golden_ratio) if golden_ratio else "-",
                    "{} ({})".format(est["unknown"], est["assumed"].split(";")[0]) if est["unknown"] else "0"),
                    flush=True)
                actual_by_case[(mode, data)] = act["dump_bytes"] or 0
                ratios = [r for r in (dump_ratio, golden_ratio) if r is not None]
                if any(not LOW <= r <= HIGH for r in ratios):
                    failed.append((model, label))
            full = actual_by_case.get(("all", "tensor"))
            if full:
                stats_ratios.append((model, profile, est["ops"], actual_by_case[("output", "stats")], full))
    print("\nstats bundle vs full tensor dump (dump_mode=all), actual bytes:")
    for model, profile, ops, stats, full in stats_ratios:
        print("  {:<14} {:<7} {:>5} dumped ops: stats {:>10,} vs tensors {:>12,} = {:.2%}".format(
            model, profile, ops, stats, full, stats / float(full)))
    print("\ntarget: estimate within {:.0%}-{:.0%} of the actual size (every model, profile and mode): {}".format(
        LOW, HIGH, "met" if not failed else "NOT met for " + ", ".join("/".join(f) for f in failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
