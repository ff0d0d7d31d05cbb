"""Speed of ``compare --replay`` (docs/compare.md, "Replay"): replay of one root cause on the sample
CNN (``npu_dump_hook.sample_models.cnn_estimator``, ascend profile, ``dump_mode all``, a
``scale=1.05`` fault on its second fused convolution ``conv2/Relu``), target under 5 s.

Printed side by side, each the best of ``--repeat`` runs: ``npu-dump-hook compare`` alone (the
baseline) and with ``--replay`` as a user runs them (a fresh CLI process, which never imports
TensorFlow: the replay's own ``python -m npu_dump_hook.op_replay`` imports it), the replay's
share (the difference), the import of TensorFlow alone in a fresh process beside what the replay
process imports instead (``_tf.graph_runtime(lean=True)``: TensorFlow's graph modules without
``tensorflow/__init__``'s public API, TF 2.x; the floor of the subprocess), and the replay
inside a process that already has TensorFlow (a training script, a notebook: no subprocess);
wall and CPU time (the CPU time of a process and the children it waited for: less sensitive to
a loaded machine than the wall time). Needs TensorFlow::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_replay.py [--repeat 3]
"""
import argparse
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import compare
from npu_dump_hook.sample_models import cnn_estimator

TARGET_S = 5.0
LEAN_IMPORT = "from npu_dump_hook import _tf; _tf.graph_runtime(lean=True)"
FAULTED = "conv2/Relu"


def bundles(root):
    os.chdir(root)  # the Estimator's dump-run model_dir (npu_dump_hook_out/) goes here, not into the checkout
    options = DumpOptions(enable_dump=True, dump_path=root + "/dump", dump_mode="all")
    npu = NpuDumpHook(options, output_dir=root + "/npu", backend="emulated", emulate_profile="ascend",
                      faults={FAULTED: "scale=1.05"})
    cnn_estimator.train(root + "/m1", hooks=[npu], steps=1000, options=options)
    golden = NpuDumpHook(options, output_dir=root + "/golden", initial_state=npu.bundle.location)
    cnn_estimator.train(root + "/m2", hooks=[golden], steps=1000, options=options)
    return npu.bundle.location, golden.bundle.location


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv):
    """(wall s, CPU s of the process and everything it waited for, stdout) of ``python argv``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TF_CPP_MIN_LOG_LEVEL="2")
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    return time.perf_counter() - started, _children_cpu() - cpu, done.stdout.decode()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    logging.getLogger("npu_dump_hook").setLevel(logging.ERROR)
    root, cwd = tempfile.mkdtemp(prefix="bench_replay_"), os.getcwd()
    try:
        npu, golden = bundles(root)
        base = ["-m", "npu_dump_hook", "compare", npu, golden, "--workers", "1"]
        alone, alone_cpu, _text = min(timed(base) for _ in range(args.repeat))
        replayed, replayed_cpu, text = min(timed(base + ["--replay"]) for _ in range(args.repeat))
        tf_import, tf_cpu, _text = min(timed(["-c", "import tensorflow"]) for _ in range(args.repeat))
        lean, lean_cpu, _text = min(timed(["-c", LEAN_IMPORT]) for _ in range(args.repeat))
        loaded = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = compare(npu, golden, workers=1, replay=True)
            loaded.append(time.perf_counter() - started)
        in_process = min(loaded) - min(_compare_only(npu, golden) for _ in range(args.repeat))
    finally:
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)
    verdicts = [e["verdict"] for e in result.doc["replay"]["rows"]]
    print("replay of one root cause on the sample CNN (cnn_estimator, fault {} scale=1.05), best of {}:".format(
        FAULTED, args.repeat))
    line = "  {:<56} {:>7.2f} s wall {:>7.2f} s CPU"
    print(line.format("npu-dump-hook compare (baseline, fresh process)", alone, alone_cpu))
    print(line.format("npu-dump-hook compare --replay (fresh process)", replayed, replayed_cpu))
    print(line.format("  the replay's share (difference)", replayed - alone, replayed_cpu - alone_cpu)
          + "  target < {:g} s: {}".format(TARGET_S, "OK" if replayed - alone < TARGET_S else "MISSED"))
    print(line.format("  import tensorflow (fresh process)", tf_import, tf_cpu))
    print(line.format("  what the replay process imports (fresh process)", lean, lean_cpu))
    print("  {:<56} {:>7.2f} s wall".format("replay with TensorFlow already loaded (in-process)", in_process))
    print("  load average {:.1f} on {} cores".format(os.getloadavg()[0], os.cpu_count()))
    print("  ratio compare --replay / compare: {:.2f}x; verdicts {}".format(replayed / alone, verdicts))
    ok = "KERNEL" in text and verdicts == ["kernel"] and replayed - alone < TARGET_S
    return 0 if ok else 1


def _compare_only(npu, golden):
    started = time.perf_counter()
    compare(npu, golden, workers=1)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
