"""The Python cost of ``session.run``'s fetch handling for a captured step's ~2,000 tensors, by the
structure the capture hands them in (issue #21, branch ``beforew4``).

TensorFlow's ``Session.run`` walks a nested fetch structure in Python: every list or dict level
(``_ListFetchMapper``/``_DictFetchMapper``) uniquifies all the tensors below it once more, and each
leaf is looked up with ``as_graph_element``. The same step (one graph of 1,960 cheap ops, the same
tensors fetched, the same values) is run in one process, the variants alternating, with the
structure a session gives a hook (``[user fetches, {hook: hook fetches}]``), the hook's own
fetches being ``{"batch": [tensor], "capture": ...}``:

* ``beside``: ``[sink, dump ops]``, the capture's fetch until ``beforew4`` (the baseline);
* ``one``:    the sink alone, its dump ops in it (``FetchedValues(ops=)``);
* ``carried``: the sink as the hook's whole fetch, carrying the hook's batch tensors too
  (``FetchedValues.also_fetch``: results ``{"batch": ...}`` as the dict gave; as now);
* ``list``:   the tensors as a plain list, no fetch conversion (``[tensors, []]``);
* ``names``:  the sink of tensor names instead of ``Tensor`` objects.

Printed: the median CPU and wall milliseconds of each variant's ``session.run`` (executor
included, the same for all) and its ratio to ``beside``.

    python benchmarks/bench_fetch_structure.py [--repeat N]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from npu_dump_hook.train._capture_fetch import FetchedValues, register_fetch_conversion  # noqa: E402

v1 = tf.compat.v1
TENSORS = 1960


def _graph():
    graph = v1.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        tensors = [x]
        for number in range(TENSORS):  # chains of 20, as a static RNN's steps
            tensors.append(tf.identity(tensors[-1] if number % 20 else x, name="t{}".format(number)))
        train = tf.group(tensors[-1], name="train")
    return graph, x, tensors[1:], train


def _variants(session, x, tensors, train):
    """``[(name, run)]``: each runs the step with the hook's fetches (the batch and the capture) in
    its structure and returns the captured values and the batch's."""
    feed, hook, batch = {x: np.ones(4, np.float32)}, "hook", [x]
    names = [t.name for t in tensors]

    def run(hook_fetches):
        return session.run([train, {hook: hook_fetches}], feed)[1][hook]

    def beside():
        sink = FetchedValues(tensors)
        got = run({"batch": batch, "capture": [sink, []]})["batch"]
        return sink.values, got

    def one():
        sink = FetchedValues(tensors, ops=[])
        got = run({"batch": batch, "capture": sink})["batch"]
        return sink.values, got

    def carried():
        sink = FetchedValues(tensors, ops=[])
        sink.also_fetch({"batch": batch})
        got = run(sink)["batch"]
        return sink.values, got

    def plain_list():
        results = run({"batch": batch, "capture": [tensors, []]})
        return results["capture"][0], results["batch"]

    def by_name():
        sink = FetchedValues(names)
        got = run({"batch": batch, "capture": [sink, []]})["batch"]
        return sink.values, got

    return [("beside", beside), ("one", one), ("carried", carried), ("list", plain_list), ("names", by_name)]


def _same(got, expected):
    (values, batch), (want, want_batch) = got, expected
    return len(values) == len(want) and all((a == b).all() for a, b in zip(values + batch, want + want_batch))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    v1.disable_eager_execution()
    if not register_fetch_conversion():
        sys.exit("this TensorFlow has no session-run fetch conversions")
    graph, x, tensors, train = _graph()
    with v1.Session(graph=graph) as session:
        variants = _variants(session, x, tensors, train)
        expected = variants[0][1]()
        for name, variant in variants:  # each builds its executor untimed; all fetch the same values
            if not _same(variant(), expected):
                sys.exit("variant {} fetched other values".format(name))
        times = {name: ([], []) for name, _ in variants}
        for _ in range(args.repeat):
            for name, variant in variants:  # alternating: the machine's load falls on all alike
                wall, cpu = time.perf_counter(), time.process_time()
                variant()
                times[name][0].append(time.process_time() - cpu)
                times[name][1].append(time.perf_counter() - wall)
    base_cpu, base_wall = (statistics.median(v) for v in times["beside"])
    print("{:<8} {:>10} {:>10} {:>10} {:>10}   ({} tensors, median of {}; TF {}; load {:.1f})".format(
        "", "CPU ms", "wall ms", "CPU x", "wall x", TENSORS, args.repeat, tf.__version__, os.getloadavg()[0]))
    for name, (cpus, walls) in times.items():
        cpu, wall = statistics.median(cpus), statistics.median(walls)
        print("{:<8} {:>10.1f} {:>10.1f} {:>10.2f} {:>10.2f}".format(name, 1e3 * cpu, 1e3 * wall, cpu / base_cpu,
                                                                     wall / base_wall))


if __name__ == "__main__":
    main()
