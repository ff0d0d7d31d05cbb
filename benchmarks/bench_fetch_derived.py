"""The captured step's ``session.run`` with and without derived value-forwarding outputs (issue #21, branch
``fetchw5``): :func:`npu_dump_hook.train._capture_derive.derived_in_step` leaves out of the fetch every
Identity/IdentityN/Snapshot/StopGradient/PreventGradient output, and Reshape/ExpandDims/Squeeze output of
at most one unknown dimension, whose input the step fetches; ``finish`` takes their arrays from that input.
Since branch ``fetchw7`` also the pure data movement of Const (small values read at plan time), Split,
ConcatV2, Slice, Unpack and Fill outputs.

Each run is a fresh process (the executor TensorFlow builds for a fetch set is per session), the two
modes alternating: ``derive`` (as the package does) and ``fetch`` (``derived_in_step`` replaced by one
that derives nothing: every directly captured tensor fetched, as before). The child builds the RNN
cost benchmark's graph (``tests/helpers/rnn_scripts.py static``: a 20-step ``static_rnn`` LSTM) in a
plain session and drives a :class:`~npu_dump_hook.train.capture.TensorCapture` as the hook does:

* ``warm``: the step before the captured one with ``warm_args``'s fetches (TF builds the executor here);
* ``run``: the captured step's ``session.run`` with ``run_args``'s fetches (the executor reused);
* ``finish``: ``TensorCapture.finish`` (the golden ``.npy`` files written).

Printed: per mode and phase the median CPU seconds of the child (min-max), the tensors fetched.
``--before DIR`` adds a row ``before``: the ``derive`` child of another checkout ``DIR`` (its own copy of
this script and its package, e.g. a ``git archive`` of main), alternating with the others.

``--in-process N`` instead runs N captured steps per mode in this one process and session, the modes
alternating step by step (each mode's executor built once, before the first; the first step of each
left out), with the emulated run's in-memory copies (``in_memory_bytes``): the median CPU seconds of
the captured ``session.run`` and of ``finish`` (``.npy`` files in a temporary folder, removed).

    python benchmarks/bench_fetch_derived.py [--repeat N] [--python PY] [--in-process N] [--before DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("warm", "run", "finish")


def _rnn_graph():
    """The RNN cost benchmark's static RNN: ``(train op, feeds)`` in the default graph."""
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "helpers")]
    import numpy as np
    import tensorflow as tf
    import rnn_scripts
    v1 = tf.compat.v1
    size = 20
    x = v1.placeholder(tf.float32, [None, size, rnn_scripts.FEATURES], name="x")
    y = v1.placeholder(tf.int64, [None], name="y")
    cell = v1.nn.rnn_cell.LSTMCell(rnn_scripts.UNITS, initializer=v1.glorot_uniform_initializer(seed=1), name="lstm")
    outputs, _ = v1.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
    train = v1.train.GradientDescentOptimizer(0.3).minimize(rnn_scripts._head(outputs[-1], y))
    data, labels = rnn_scripts._data(size)
    return train, {x: data, y: labels.astype(np.int64)}


def _context(train, feeds, session):
    """What ``run_args``/``warm_args`` read of a hook's run context."""
    import tensorflow as tf

    class Context(object):
        original_args = tf.compat.v1.train.SessionRunArgs(train, feed_dict=feeds)

    Context.session = session
    return Context()


def in_process(steps):
    """``--in-process``: both modes in one session, alternating step by step (module doc)."""
    import time
    train, feeds = _rnn_graph()
    import tensorflow as tf
    from npu_dump_hook.train import capture as capture_module
    from npu_dump_hook.train._capture_memory import IN_MEMORY_BYTES
    derive = capture_module.derived_in_step
    times = {mode: {"run": [], "finish": []} for mode in ("fetch", "derive")}
    with tempfile.TemporaryDirectory(prefix="bench_fetch_derived_") as work:
        captures = {mode: capture_module.TensorCapture(tf.compat.v1.get_default_graph(), os.path.join(work, mode))
                    for mode in times}
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for step in range(steps + 1):
                for mode, capture in captures.items():
                    capture.in_memory_bytes = IN_MEMORY_BYTES
                    capture_module.derived_in_step = derive if mode == "derive" else (lambda direct, fed: (direct, []))
                    args = capture.run_args(_context(train, feeds, session))
                    start = time.process_time()
                    session.run([train, args.fetches], feeds)
                    middle = time.process_time()
                    capture.finish(1700000000000000 + step)
                    end = time.process_time()
                    capture.cleanup()
                    if step:
                        times[mode]["run"].append(middle - start)
                        times[mode]["finish"].append(end - middle)
    print("{} captured steps per mode in one process, alternating; CPU s: median (min-max)".format(steps))
    for mode, phases in times.items():
        print("{:7} {}".format(mode, "  ".join("{} {:.4f} ({:.4f}-{:.4f})".format(
            phase, statistics.median(values), min(values), max(values)) for phase, values in phases.items())))


def child(mode, work):
    """One fresh process's figures: ``{phase: CPU seconds, "fetched": n, "derived": n}`` as JSON."""
    import time
    train, feeds = _rnn_graph()
    import tensorflow as tf
    from npu_dump_hook.train import capture as capture_module
    v1 = tf.compat.v1
    if mode == "fetch":
        capture_module.derived_in_step = lambda direct, fed: (direct, [])
    capture = capture_module.TensorCapture(v1.get_default_graph(), os.path.join(work, "scratch"),
                                           npy_dir=os.path.join(work, "npy"))
    figures = {}
    with v1.Session() as session:
        session.run(v1.global_variables_initializer())
        args = capture.warm_args(_context(train, feeds, session))
        start = time.process_time()
        session.run([train, args.fetches], feeds)
        figures["warm"] = time.process_time() - start
        args = capture.run_args(_context(train, feeds, session))
        start = time.process_time()
        session.run([train, args.fetches], feeds, options=args.options)
        figures["run"] = time.process_time() - start
        figures["fetched"], figures["derived"] = len(args.fetches.tensors), len(capture._derived)
        start = time.process_time()
        result = capture.finish(1700000000000000)
        figures["finish"] = time.process_time() - start
        figures["files"] = len(result.tensors)
    print(json.dumps(figures))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--in-process", type=int, default=0, metavar="N")
    parser.add_argument("--before", metavar="DIR", help="also run the derive child of checkout DIR")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    if args.in_process:
        return in_process(args.in_process)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    scripts = {"fetch": os.path.abspath(__file__), "derive": os.path.abspath(__file__)}
    if args.before:
        scripts["before"] = os.path.join(os.path.abspath(args.before), "benchmarks", "bench_fetch_derived.py")
    runs = {mode: [] for mode in scripts}  # type: dict
    for _ in range(args.repeat):
        for mode, script in scripts.items():
            with tempfile.TemporaryDirectory(prefix="bench_fetch_derived_") as work:
                done = subprocess.run([args.python, script, "--child", "derive" if mode == "before" else mode, work],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
            runs[mode].append(json.loads(done.stdout.decode().strip().splitlines()[-1]))
    print("{} runs per mode, fresh processes alternating; CPU s: median (min-max)".format(args.repeat))
    for mode, figures in runs.items():
        cells = []
        for phase in PHASES:
            values = [f[phase] for f in figures]
            cells.append("{} {:.3f} ({:.3f}-{:.3f})".format(phase, statistics.median(values), min(values),
                                                              max(values)))
        print("{:7} fetched {:5} derived {:4} files {:5}  {}".format(
            mode, figures[0]["fetched"], figures[0]["derived"], figures[0]["files"], "  ".join(cells)))


if __name__ == "__main__":
    main()
