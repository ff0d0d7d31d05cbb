"""Where the golden capture's extra ``session.run`` time at step 0 goes (issue #19).

At step 0 every side of ``bench_reference.py`` builds the step's executor; ours builds it for a
bigger fetch set (every output tensor of every executed op, the graph as written) than the plain
step (the train op). This script runs the sample CNN's step 0 in fresh processes, alternating,
with these fetch sets added to the step (nothing else of the capture runs: no files, no reads):

* ``plain``:   the train op only (what ``none`` of ``bench_reference.py`` runs);
* ``tensors``: plus the tensors ``ReferenceCapture`` fetches (its ``run_args`` fetch list);
* ``names``:   the same tensors fetched by name (is it the Python fetch handling?);
* ``targets``: their ops as run targets, no values fetched (is it moving the values out?);

each with Grappler on (the session default) and, with ``--grappler-off``, off
(``rewrite_options.disable_meta_optimizer``) to separate Grappler from the rest of the build.
Reported per variant, medians: the ``session.run`` wall time, TensorFlow's run call inside it
(``TF_SessionRun_wrapper``, timed, called unchanged), the process CPU of that window and,
from TensorFlow's own log (``TF_CPP_VMODULE=meta_optimizer=1``), Grappler's summed optimizer
time for the step's graph and the node count it leaves (everything fetched must be kept).

    python benchmarks/bench_step0_executor.py [--repeats N] [--grappler-off]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_reference import _time_tf_calls  # one timing of TF's run call for both benches

SEED = 19
FETCHES = ("plain", "tensors", "names", "targets")
_RESULT = re.compile(r"Graph size after: (\d+) nodes \(([-\d]+)\).*time = ([\d.]+)ms")


def _child(fetch: str, grappler: str, workdir: str) -> dict:
    import random

    import numpy as np
    import tensorflow as tf

    random.seed(SEED)
    np.random.seed(SEED)
    from npu_dump_hook.reference import ReferenceCapture
    from npu_dump_hook.sample_models import cnn_estimator

    v1 = tf.compat.v1
    box = {}  # type: dict
    _time_tf_calls(box)

    class Extra(v1.train.SessionRunHook):
        """Step 0: the capture's fetch list, taken from ReferenceCapture's run_args, in one form."""

        def __init__(self) -> None:
            self.reference = ReferenceCapture(os.path.join(workdir, "golden"), step=0)
            self.steps = 0

        def begin(self):
            self.reference.begin()

        def before_run(self, run_context):
            self.steps += 1
            if self.steps != 1 or fetch == "plain":
                return None
            tensors = list(self.reference.before_run(run_context).fetches[0].tensors)
            self.reference.end()  # its collector pause back: only the fetch set differs between variants
            box["fetched"] = len(tensors)
            chosen = {"tensors": tensors, "names": [t.name for t in tensors],
                      "targets": sorted({t.op for t in tensors}, key=lambda op: op.name)}[fetch]
            return v1.train.SessionRunArgs(chosen)

    class Window(v1.train.SessionRunHook):
        """Last hook's before_run to first hook's after_run of step 0: its session.run."""

        def __init__(self, first: bool) -> None:
            self.first, self.steps = first, 0

        def before_run(self, run_context):
            if not self.first and not self.steps:
                sys.stderr.write("\nSTEP0_BEGIN\n")
                sys.stderr.flush()
                box["in_run"] = True
                box["t0"], box["c0"] = time.perf_counter(), time.process_time()

        def after_run(self, run_context, run_values):
            if self.first and not self.steps:
                box["run_s"], box["run_cpu_s"] = time.perf_counter() - box["t0"], time.process_time() - box["c0"]
                box["in_run"] = False
                sys.stderr.write("\nSTEP0_END\n")
                sys.stderr.flush()
            self.steps += 1
            run_context.request_stop()

    session_config = v1.ConfigProto()
    if grappler == "off":
        session_config.graph_options.rewrite_options.disable_meta_optimizer = True
    model_dir = os.path.join(workdir, "model")
    config = tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=None, log_step_count_steps=None,
                                    tf_random_seed=SEED, session_config=session_config)
    estimator = cnn_estimator.make_estimator(model_dir, run_config=config)
    estimator.train(lambda: cnn_estimator.input_fn(batch_size=8), hooks=[Window(True), Extra(), Window(False)],
                    steps=1)
    return {"run_s": box["run_s"], "run_cpu_s": box["run_cpu_s"], "tf_call_s": box.get("tf_call_s", 0.0),
            "fetched": box.get("fetched", 0)}


def _grappler(stderr: str) -> tuple:
    """Grappler's summed optimizer time (ms) and the node count it left, for the graphs it
    optimized inside step 0's session.run (between the child's markers)."""
    inside = stderr.split("STEP0_BEGIN", 1)[-1].split("STEP0_END", 1)[0]
    found = [(int(m.group(1)), float(m.group(3))) for m in _RESULT.finditer(inside)]
    return sum(ms for _, ms in found), (found[-1][0] if found else 0)


def _run(fetch: str, grappler: str) -> dict:
    workdir = tempfile.mkdtemp(prefix="bench_step0_")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="meta_optimizer=1")
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", fetch, grappler, workdir],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                              check=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["grappler_ms"], result["nodes"] = _grappler(done.stderr)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per variant (default 3)")
    parser.add_argument("--grappler-off", action="store_true", help="also every variant with Grappler off")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    variants = [(fetch, "on") for fetch in FETCHES] + ([(f, "off") for f in ("plain", "tensors")]
                                                        if args.grappler_off else [])
    runs = {variant: [] for variant in variants}  # type: dict
    for _ in range(args.repeats):  # alternating: one process per variant per round
        for variant in variants:
            runs[variant].append(_run(*variant))
    print("sample CNN step 0, session.run by fetch set, median of {} fresh processes each "
          "(load {})".format(args.repeats, " ".join("%.1f" % x for x in os.getloadavg())))
    print("{:<16} {:>8} {:>12} {:>8} {:>9} {:>8} {:>11} {:>12}".format(
        "fetch set", "fetched", "session.run", "TF call", "Python", "run CPU", "Grappler ms", "nodes after"))
    for (fetch, grappler), results in runs.items():
        median = {key: statistics.median(r[key] for r in results)
                  for key in ("run_s", "tf_call_s", "run_cpu_s", "grappler_ms", "nodes")}
        print("{:<16} {:>8} {:>12.3f} {:>8.3f} {:>9.3f} {:>8.3f} {:>11.1f} {:>12.0f}".format(
            "{} (Grappler {})".format(fetch, grappler), results[0]["fetched"], median["run_s"], median["tf_call_s"],
            median["run_s"] - median["tf_call_s"], median["run_cpu_s"], median["grappler_ms"], median["nodes"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
