"""Issue 23's statistics targets, side by side in one run:

1. **Size**: a TF model of >= 1,000 dumped ops (a chain of ``--blocks`` dense blocks, MatMul +
   BiasAdd + Tanh each, batch 64 x width 256, one training step with plain SGD), run through the
   emulated NPU (``ascend`` profile) twice: ``dump_data="tensor"`` and ``dump_data="stats"``;
   the bytes of the two dump folders and of the two bundles, and their ratio (target: the stats
   bundle at most 2% of the tensor bundle, every file of each bundle counted; the stats bundle's
   Build graph is its gzip-compressed ``.txt.gz``, docs/bundle-format.md rule 9). Also the golden
   side: a tensor golden vs the golden statistics file of the stats bundle's golden run. Twice:
   the small model (its weights, the initial-state checkpoint both bundles carry, are 15% of its
   tensor bundle) and a model with a large model's weights / activations ratio (batch
   ``--large-batch`` x width ``--large-width``, default 2048 x 64: weights 0.57% of one step's
   dump; a 7B model's are ~14 GB against 2.3 TB, 0.6%).
2. **Speed**: the statistics compare of a synthetic run of ``--rows`` rows (a chain of ops, one
   input and one output row each; stats CSVs + golden_stats.json), beside the tensor compare of
   the same ops (dump files of ``--elements`` elements + golden .npy files); wall time of
   ``compare()`` in this process, best of 3, wall and CPU side by side with the tensor compare as
   the named baseline, and the load average before and after (target: stats compare of 10,000
   rows under 2 s wall; on a shared machine the wall time is the CPU time stretched by the load).

    .venv/bin/python benchmarks/bench_stats.py [--blocks 120] [--rows 10000] [--elements 4096] [--skip-size]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from npu_dump_hook.compare import compare  # noqa: E402
from npu_dump_hook.formats.dump_file import DumpTensor, write_dump_file  # noqa: E402
from npu_dump_hook.formats.ge_build import make_model, make_op, make_tensor_desc  # noqa: E402
from npu_dump_hook.formats.ge_text import format_model  # noqa: E402
from npu_dump_hook.formats.names import format_dump_name, golden_npy_name, parse_npy_name, sanitize  # noqa: E402
from npu_dump_hook.formats.stats_csv import StatsRow, compute_stats, write_stats_csv  # noqa: E402
from npu_dump_hook.train.golden_stats import STATS_SCHEMA, tensor_statistics  # noqa: E402

GRAPH_NAME = "ge_default_20261201000000_1"
T0 = 1700000000000000


def tree_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


# -- 1. size ------------------------------------------------------------------------------------

def _train_deep(hook, blocks, batch=64, width=256):
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default():
        rng = np.random.RandomState(5)
        x = tf.constant(rng.standard_normal((64, width)).astype(np.float32), name="x")
        if batch != 64:  # rows repeated: the graphs hold 64 rows of constant, not the whole batch
            x = tf.tile(x, [batch // 64, 1], name="x_batch")
        hidden = x
        init = v1.glorot_uniform_initializer(seed=3)
        for i in range(blocks):
            hidden = v1.layers.dense(hidden, width, activation=tf.nn.tanh, name="block{:04d}".format(i),
                                     kernel_initializer=init)
        loss = tf.reduce_mean(tf.square(hidden))
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(train_op)
    return hook


def size_figures(blocks, tmp, batch=64, width=256):
    """Bytes of the tensor and the stats bundle of one model: every file of each bundle counted
    (``bundle``), split into the dump, the initial-state checkpoint, the graphs and the rest."""
    from npu_dump_hook import DumpOptions, NpuDumpHook

    found = {}
    for data in ("tensor", "stats"):
        options = DumpOptions(enable_dump=True, dump_path=os.path.join(tmp, data, "dump"), dump_data=data)
        hook = _train_deep(NpuDumpHook(options, output_dir=os.path.join(tmp, data, "npu"), backend="emulated",
                                       emulate_profile="ascend"), blocks, batch, width)
        bundle = hook.bundle.location
        dump = os.path.join(bundle, "data", "dump")
        files = sum(len(f) for _, _, f in os.walk(dump))
        golden = _train_deep(NpuDumpHook(output_dir=os.path.join(tmp, data, "golden"), initial_state=bundle), blocks,
                             batch, width)
        parts = {name: tree_bytes(os.path.join(bundle, "data", name)) for name in ("dump", "init", "graph", "tf")}
        found[data] = {"files": files, "dump": parts["dump"], "bundle": tree_bytes(bundle), "init": parts["init"],
                       "graphs": parts["graph"] + parts["tf"],
                       "golden": tree_bytes(os.path.join(golden.bundle.location, "data", "golden"))}
        found[data]["other"] = found[data]["bundle"] - parts["dump"] - parts["init"] - found[data]["graphs"]
        shutil.rmtree(os.path.join(tmp, data))  # the next model's run needs the room
    return found


def print_size(label, sizes):
    """One model's table; True when the whole stats bundle is at most 2% of the tensor bundle."""
    t, s = sizes["tensor"], sizes["stats"]
    print(label)
    print("  {:<40} {:>14} {:>14} {:>9}".format("", "tensor dump", "stats dump", "ratio"))
    print("  {:<40} {:>14} {:>14} {:>9}".format("dumped ops (files)", t["files"], s["files"], ""))
    for key, text in (("dump", "data/dump bytes"), ("init", "data/init bytes (initial state)"),
                      ("graphs", "data/graph + data/tf bytes"), ("other", "bundle.json, bag files"),
                      ("bundle", "whole NPU bundle bytes (every file)"), ("golden", "golden data/golden bytes")):
        print("  {:<40} {:>14,} {:>14,} {:>8.2%}".format(text, t[key], s[key], s[key] / float(t[key] or 1)))
    met = s["bundle"] <= 0.02 * t["bundle"]
    print("  weights (data/init) / full tensor dump: {:.2%} (a 7B model: ~14 GB / 2.3 TB = 0.6%)".format(
        t["init"] / float(t["dump"])))
    print("  target: whole stats bundle <= 2% of the whole tensor bundle: {} ({:.2%}); dump alone {:.2%}".format(
        "met" if met else "NOT met", s["bundle"] / float(t["bundle"]), s["dump"] / float(t["dump"])))
    return met


# -- 2. speed -----------------------------------------------------------------------------------

def write_synthetic(root, ops, elements, tensors=True, faults=None, drop_golden=(), padded=()):
    """A chain of ``ops`` ops: stats CSVs (input + output rows) in stats/, dump files in dump/,
    golden_stats.json and golden .npy files; returns the paths. ``tensors`` False: no dump or
    .npy files (their folders stay empty). For the output checks of ``stats_same_as.py``:
    ``faults`` (op number -> function of the value) changes the NPU side of those ops (the
    consumer's input row sees it too), ``drop_golden`` op numbers have no golden statistics,
    ``padded`` op numbers have an NC1HWC0 output 16 zeros longer."""
    faults = faults or {}
    rng = np.random.RandomState(9)
    graph_path = os.path.join(root, "ge_proto_00000001_Build.txt")
    stats_dir, dump_dir, npy_dir = (os.path.join(root, p, "20261201000000", "0", GRAPH_NAME, "1", "0")
                                    for p in ("stats", "dump", "golden_npy"))
    for folder in (stats_dir, dump_dir, npy_dir):
        os.makedirs(folder)
    op_defs, golden_entries, previous = [], [], None
    for i in range(ops):
        name = "net/block_{:05d}/Add".format(i)
        value = rng.standard_normal(elements).astype(np.float32)
        npu = faults[i](value) if i in faults else value
        desc = make_tensor_desc("DT_FLOAT", value.shape, layout="ND", origin_name=name, origin_output_index=0)
        op_defs.append(make_op(name, "Add", i, inputs=[previous[0] + ":0"] if previous else [], output_descs=[desc]))
        stamp = T0 + 10 * i
        rows = [StatsRow("Input", 0, int(previous[1].nbytes), "DT_FLOAT", "ND", previous[1].shape,
                         **compute_stats(previous[1]))] if previous else []
        if i in padded:
            held = np.concatenate([npu, np.zeros(16, np.float32)])
            rows.append(StatsRow("Output", 0, int(held.nbytes), "DT_FLOAT", "NC1HWC0", held.shape,
                                 **compute_stats(held)))
        else:
            rows.append(StatsRow("Output", 0, int(npu.nbytes), "DT_FLOAT", "ND", npu.shape, **compute_stats(npu)))
        base = format_dump_name("Add", sanitize(name), 2 + i, 0, stamp)
        write_stats_csv(os.path.join(stats_dir, base + ".csv"), rows)
        npy = golden_npy_name(name, 0, stamp)
        if tensors:
            write_dump_file(os.path.join(dump_dir, base), name, outputs=[DumpTensor(npu, original_name=name)],
                            inputs=[DumpTensor(previous[1])] if previous else [], dump_time=stamp)
            np.save(os.path.join(npy_dir, npy), value)
        entry = {"key": parse_npy_name(npy).key, "tensor": name + ":0", "dtype": "float32", "shape": [elements]}
        entry.update(tensor_statistics(value))
        if i not in drop_golden:
            golden_entries.append(entry)
        previous = (name, npu)
    with open(graph_path, "w") as handle:
        handle.write(format_model(make_model([(GRAPH_NAME, op_defs)], name=GRAPH_NAME)))
    golden_stats = os.path.join(root, "golden_stats.json")
    with open(golden_stats, "w") as handle:
        json.dump({"schema": STATS_SCHEMA, "tensors": golden_entries}, handle)
    return graph_path, stats_dir, dump_dir, golden_stats, npy_dir


def best_of(times, call):
    """(best wall s, best CPU s of this process, result): on a shared machine the wall time
    includes waiting for a core; the CPU time is what the compare itself costs."""
    best, cpu, result = None, None, None
    for _ in range(times):
        started, began = time.perf_counter(), time.process_time()
        result = call()
        elapsed, used = time.perf_counter() - started, time.process_time() - began
        best = elapsed if best is None else min(best, elapsed)
        cpu = used if cpu is None else min(cpu, used)
    return best, cpu, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=120, help="dense blocks of the size model (about 10 dumped "
                        "ops each: forward, backward, update, Cast/TransData)")
    parser.add_argument("--large-batch", type=int, default=2048, help="batch of the large-model-ratio run "
                        "(a multiple of 64; 2048: weights 0.57%% of the dump, a 7B model's 0.6%%)")
    parser.add_argument("--skip-small", action="store_true", help="only the large-model-ratio size run")
    parser.add_argument("--large-width", type=int, default=64, help="width of the large-model-ratio run")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--elements", type=int, default=4096, help="elements per tensor of the speed run")
    parser.add_argument("--skip-size", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_size and not args.skip_small:
            print_size("size, small model ({} dense blocks of 64 x 256, ascend profile, one step; its weights are "
                       "large beside its activations):".format(args.blocks),
                       size_figures(args.blocks, os.path.join(tmp, "size"), 64, 256))
        if not args.skip_size:
            print_size("size, large-model ratio ({} dense blocks, batch {} x width {}: weights / one step's dump "
                       "as a 7B model's):".format(args.blocks, args.large_batch, args.large_width),
                       size_figures(args.blocks, os.path.join(tmp, "large"), args.large_batch, args.large_width))
        if args.skip_speed:
            return 0
        ops = args.rows // 2 + 1
        paths = write_synthetic(os.path.join(tmp, "speed"), ops, args.elements)
        graph, stats_dir, dump_dir, golden_stats, npy_dir = paths
        load_before = os.getloadavg()[0]
        stats_s, stats_cpu, stats_result = best_of(3, lambda: compare(stats_dir, golden_stats, graph=graph,
                                                                      workers=1))
        tensor_s, tensor_cpu, tensor_result = best_of(3, lambda: compare(dump_dir, npy_dir, graph=graph, workers=1))
        print("speed ({} ops, {} elements a tensor, one process, best of 3; load average {:.1f} before, {:.1f} "
              "after, {} cores):".format(ops, args.elements, load_before, os.getloadavg()[0], os.cpu_count()))
        print("  {:<34} {:>10} {:>10} {:>10}".format("", "rows", "wall s", "CPU s"))
        print("  {:<34} {:>10} {:>10.2f} {:>10.2f}".format("statistics compare", stats_result.doc["summary"]["rows"],
                                                           stats_s, stats_cpu))
        print("  {:<34} {:>10} {:>10.2f} {:>10.2f}".format("tensor compare (same ops, workers=1)",
                                                           tensor_result.doc["summary"]["rows"], tensor_s, tensor_cpu))
        rows = stats_result.doc["summary"]["rows"]
        print("  ratio tensor / stats: {:.1f}x wall, {:.1f}x CPU; target: stats compare of 10,000 rows under 2 s: "
              "wall {}, CPU {}".format(tensor_s / stats_s, tensor_cpu / stats_cpu,
                                       "met" if stats_s < 2.0 and rows >= 10000 else "NOT met",
                                       "met" if stats_cpu < 2.0 and rows >= 10000 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
