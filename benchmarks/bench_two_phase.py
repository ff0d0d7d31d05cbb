"""Issue 23's two-phase target, side by side in one run: on a faulted model, ``run --two-phase``
names the same first divergence as a full dump while writing at most 10% of its bytes.

The model: an unmodified ``tf.compat.v1.Session`` training script (written to a temporary
folder) of ``--blocks`` dense blocks (MatMul + BiasAdd + Tanh each, batch 64 x width 256, one SGD
step), run through the emulated NPU (``ascend`` profile) with ``--fault`` injected. Both paths
run the public commands in child processes, as a user would:

* **full**: ``run`` (a full tensor dump), ``run --golden-for`` (every golden tensor), ``compare``;
* **two-phase**: ``run --two-phase`` (stats run, golden statistics, suspects, a run dumping the
  suspects only, its golden, the tensor compare).

Printed: the first divergence of each, the NPU dump bytes (the bundles' ``data/dump``) and the
golden bytes (``data/golden``) of every pass, their totals and ratios, and the wall times.

    .venv/bin/python benchmarks/bench_two_phase.py [--blocks 100] [--fault block0050/MatMul=scale=1.05]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from npu_dump_hook.two_phase import tree_bytes  # noqa: E402

SCRIPT = '''"""A dense chain of {blocks} blocks trained with SGD (written by benchmarks/bench_two_phase.py)."""
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()
rng = np.random.RandomState(5)
x = tf.constant(rng.standard_normal((64, 256)).astype(np.float32), name="x")
hidden = x
init = v1.glorot_uniform_initializer(seed=3)
for i in range({blocks}):
    hidden = v1.layers.dense(hidden, 256, activation=tf.nn.tanh, name="block{{:04d}}".format(i),
                             kernel_initializer=init)
loss = tf.reduce_mean(tf.square(hidden))
step = v1.train.get_or_create_global_step()
train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    for _ in range(10):
        sess.run(train_op)
'''


def _cli(argv, cwd):
    """``npu-dump-hook ARGV`` in a child: (exit status, stdout lines, seconds)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               TF_CPP_MIN_LOG_LEVEL="2")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "npu_dump_hook", "-q"] + argv, cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit("npu-dump-hook {} exited with {}".format(" ".join(argv[:3]), done.returncode))
    return done.returncode, done.stdout.splitlines(), time.monotonic() - started


def _full(work, script, flags):
    out = os.path.join(work, "full")
    code, lines, npu_s = _cli(["run", "--output-dir", out] + flags + ["--", script], work)
    npu = lines[-1]
    code, lines, golden_s = _cli(["run", "--output-dir", out, "--golden-for", npu, "--", script], work)
    golden = lines[-1]
    report = os.path.join(work, "full_compare.json")
    code, _, compare_s = _cli(["compare", npu, golden, "--json", report], work)
    with open(report) as handle:
        doc = json.load(handle)
    return {"first": doc["first_divergence"], "exit": code,
            "dump": tree_bytes(os.path.join(npu, "data", "dump")),
            "golden": tree_bytes(os.path.join(golden, "data", "golden")),
            "seconds": {"npu run": npu_s, "golden run": golden_s, "compare": compare_s}}


def _two_phase(work, script, flags, suspects):
    out = os.path.join(work, "two")
    code, _, seconds = _cli(["run", "--two-phase", "--suspects", str(suspects), "--output-dir", out] + flags
                            + ["--", script], work)
    folder = [name for name in os.listdir(out) if name.startswith("two_phase_")][0]
    with open(os.path.join(out, folder, "two_phase.json")) as handle:
        record = json.load(handle)
    return {"first": record["first_divergence"], "exit": code, "record": record, "seconds": seconds,
            "dump": sum(p.get("dump_bytes") or 0 for p in record["phases"]),
            "golden": sum(p.get("golden_bytes") or 0 for p in record["phases"])}


def _name(first):
    return "none" if not first else "{} ({})".format(first["npu_op"], ", ".join(first.get("original_ops") or []))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--fault", default=None, help="OP=SPEC (default: the middle block's MatMul, scale=1.05)")
    parser.add_argument("--suspects", type=int, default=3)
    args = parser.parse_args()
    fault = args.fault or "block{:04d}/MatMul=scale=1.05".format(args.blocks // 2)
    flags = ["--backend", "emulated", "--emulate-profile", "ascend", "--fault", fault]
    work = tempfile.mkdtemp(prefix="bench_two_phase_")
    script = os.path.join(work, "train.py")
    with open(script, "w") as handle:
        handle.write(SCRIPT.format(blocks=args.blocks))
    print("model: {} dense blocks, fault {}; work folder {}".format(args.blocks, fault, work))
    full = _full(work, script, flags)
    two = _two_phase(work, script, flags, args.suspects)
    print("\n{:<34} {:>16} {:>16} {:>9}".format("", "full dump", "two-phase", "ratio"))
    for label, key in (("NPU dump bytes (data/dump)", "dump"), ("golden bytes (data/golden)", "golden")):
        print("{:<34} {:>16,} {:>16,} {:>8.1%}".format(label, full[key], two[key], two[key] / max(full[key], 1)))
    total_full, total_two = full["dump"] + full["golden"], two["dump"] + two["golden"]
    print("{:<34} {:>16,} {:>16,} {:>8.1%}".format("all bytes written", total_full, total_two,
                                                   total_two / max(total_full, 1)))
    full_s = sum(full["seconds"].values())
    print("{:<34} {:>15.1f}s {:>15.1f}s {:>8.2f}x".format("wall time (runs + compare)", full_s, two["seconds"],
                                                          two["seconds"] / full_s))
    print("\nfull dump: " + ", ".join("{} {:.1f} s".format(k, v) for k, v in full["seconds"].items()))
    print("two-phase: " + ", ".join("{} {:.1f} s".format(p["phase"], p["seconds"]) for p in two["record"]["phases"])
          + "; suspects: " + two["record"]["suspects"]["dump_layer"] if two["record"].get("suspects") else "")
    print("first divergence: full {} | two-phase {}".format(_name(full["first"]), _name(two["first"])))
    same = bool(full["first"] and two["first"] and full["first"]["npu_op"] == two["first"]["npu_op"])
    ratio = two["dump"] / max(full["dump"], 1)
    print("target: same first divergence: {}; two-phase NPU dump bytes {:.1%} of the full dump's (<= 10%: {})".format(
        "yes" if same else "NO", ratio, "yes" if ratio <= 0.10 else "NO"))
    return 0 if same and ratio <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
