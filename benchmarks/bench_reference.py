"""Reference capture of one training step vs TensorFlow's own tfdbg v1 ``DumpingDebugHook``.

Model: the sample CNN (``npu_dump_hook.sample_models.cnn_estimator``: its model_fn and
input_fn) trained with ``tf.estimator`` for ``step + 2`` steps, with the same seeds on every side
(graph, Python, numpy), so all compute the same values; local step ``step`` is captured, in a
fresh process per side and repeat. Two steps are measured by default: step 0 (the default of ``NpuDumpHook`` and ``ReferenceCapture``: TF builds the step's
executor then anyway) and step 1 (a later step: a capture changes the fetch set, so TF builds
another executor, Grappler included, unless that fetch set ran before: tfdbg's debug watches
always pay it; ours, when the step's tensors are fetched (no dump op), has the steps before
the captured one fetch them too, so the session's first step built that executor).

* ``ours``:  :class:`npu_dump_hook.reference.ReferenceCapture` with its default memory budget
  (every output tensor of every executed op, msaccucmp-ready ``.npy`` files plus the
  manifest; on the sample CNN the tensors fit the budget, so they are fetched with the step);
* ``stream``: the same with ``memory_budget=0``, which forces the streaming path (one
  ``DebugIdentity`` dump op per tensor, each file turned into its ``.npy`` in place);
* ``tfdbg``: ``DumpingDebugHook`` (tensorflow.python.debug.wrappers.hooks) active for the same
  step, watching every node; then, to get what the comparison needs (msaccucmp ``.npy``
  files, the tfdbg ``lt``/``pt -w`` routine automated), ``DebugDumpDir`` + ``np.save`` per tensor;
* ``none``:  no capture, for the plain step time.

Reported per side (median of ``--repeats`` runs): capture-step wall time (from the first
hook's ``before_run`` to the last hook's ``after_run``), the step after it (``next s``: where a
later step pays for its own executor when the capture's was built at the first step), setup in
``begin()``, tfdbg's conversion to ``.npy``, tensors written, peak RSS of the process and its
growth during the capture step (``ru_maxrss``). Target: ours at least 2x faster than tfdbg
producing the same ``.npy`` files, at step 0 and step 1, printed side by side at the end; the
ratio of the process CPU time (all threads) in the same window, which other processes on a
shared machine disturb less, the dump-only ratio, the ratio of the capture costs (time above
the plain step) and the ratio including our ``begin()`` are printed too. Each repeat also checks
that the two sides agree: ours and tfdbg's ``.npy`` files with the same msaccucmp key (name
without the timestamp) are compared (bit-identical / within 1e-5 / differ). Nothing of ours runs
after the captured step's ``after_run`` returns (its writer and reader threads are joined there),
so the step time is all the capture costs.

``--gc off`` disables Python's cyclic garbage collector in every side's process from its start
(as a sitecustomize would), to compare the sides without the graph's full collection, which lands
inside or outside the measured window at random; the default (``on``) measures the collector as
users have it (ours pauses it for the captured step itself: :mod:`npu_dump_hook.train.collector`).

    .venv/bin/python benchmarks/bench_reference.py [--quick] [--batch N] [--repeats N] [--step N] [--gc on|off]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = 2.0
SEED = 19  # tf_random_seed of every side's RunConfig: the same values on both sides


SIDES = ("none", "ours", "stream", "tfdbg")
_GC = {"mode": "on"}  # --gc, handed to every child


def _child(side: str, workdir: str, step: int, batch: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import random

    import numpy as np
    import tensorflow as tf

    random.seed(SEED)  # Keras' initializers (TF 2.x v1.layers) draw their seeds from Python's random
    np.random.seed(SEED)

    from npu_dump_hook.reference import ReferenceCapture
    from npu_dump_hook.sample_models import cnn_estimator

    v1 = tf.compat.v1
    v1.logging.set_verbosity(v1.logging.ERROR)
    box = {"step": 0}  # type: dict
    _time_tf_calls(box)

    class Clock(v1.train.SessionRunHook):
        """First hook: starts the step clock; last hook: stops it and counts steps."""

        def __init__(self, first: bool) -> None:
            self.first = first

        def before_run(self, run_context):
            if self.first:
                if box["step"] == step:
                    box["rss_before"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                box["t0"], box["c0"] = time.perf_counter(), time.process_time()
            elif box["step"] == step:  # the last before_run: the step's own session.run starts
                box["in_run"], box["run_c0"] = True, time.process_time()

        def after_run(self, run_context, run_values):
            if self.first:  # the first after_run: the step's own session.run has returned
                if box.pop("in_run", False):
                    box["run_cpu_s"] = time.process_time() - box["run_c0"]
                return
            elapsed, cpu = time.perf_counter() - box["t0"], time.process_time() - box["c0"]
            if box["step"] == step:
                box["capture_s"], box["capture_cpu_s"] = elapsed, cpu
                box["rss_after"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            elif box["step"] == step + 1:
                box["plain_s"] = elapsed
            box["step"] += 1
            if box["step"] >= step + 2:
                run_context.request_stop()

    def phase(name, call, *args):
        """Run a hook call; on the captured step, add its wall time to the phase ``name``."""
        start = time.perf_counter()
        try:
            return call(*args)
        finally:
            if box["step"] == step:
                box[name] = box.get(name, 0.0) + time.perf_counter() - start

    class Ours(v1.train.SessionRunHook):
        def __init__(self, memory_budget=None) -> None:
            self.reference = ReferenceCapture(os.path.join(workdir, "golden"), step=step,
                                              memory_budget=memory_budget)

        def begin(self):
            start = time.perf_counter()
            self.reference.begin()
            box["begin_s"] = time.perf_counter() - start

        def after_create_session(self, session, coord):
            start = time.perf_counter()  # setup, counted with begin(): the variable read's executor
            self.reference.after_create_session(session, coord)
            box["begin_s"] += time.perf_counter() - start

        def before_run(self, run_context):
            return phase("prep_s", self.reference.before_run, run_context)

        def after_run(self, run_context, run_values):
            phase("finish_s", self.reference.after_run, run_context, run_values)

    class Tfdbg(v1.train.SessionRunHook):
        """DumpingDebugHook, active for the captured step only (it would dump every step)."""

        def __init__(self) -> None:
            from tensorflow.python.debug.wrappers.hooks import DumpingDebugHook

            self.hook = DumpingDebugHook(os.path.join(workdir, "tfdbg"))
            self.local = 0
            self.active = False

        def begin(self):
            start = time.perf_counter()
            self.hook.begin()
            box["begin_s"] = time.perf_counter() - start

        def after_create_session(self, session, coord):
            self.hook.after_create_session(session, coord)

        def before_run(self, run_context):
            self.active = self.local == step
            self.local += 1
            return phase("prep_s", self.hook.before_run, run_context) if self.active else None

        def after_run(self, run_context, run_values):
            if self.active:
                phase("finish_s", self.hook.after_run, run_context, run_values)

    capture = {"ours": Ours, "stream": lambda: Ours(memory_budget=0), "tfdbg": Tfdbg, "none": None}[side]
    hooks = [Clock(True)] + ([capture()] if capture else []) + [Clock(False)]
    _train(cnn_estimator, workdir, hooks, step, batch)
    result = {"side": side, "capture_s": box["capture_s"], "plain_s": box.get("plain_s"),
              "capture_cpu_s": box["capture_cpu_s"], "convert_cpu_s": 0.0,
              "begin_s": box.get("begin_s", 0.0), "convert_s": 0.0,
              "prep_s": box.get("prep_s", 0.0), "finish_s": box.get("finish_s", 0.0),
              "tf_call_s": box.get("tf_call_s", 0.0), "run_cpu_s": box.get("run_cpu_s", 0.0),
              "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
              "rss_growth_mb": (box["rss_after"] - box["rss_before"]) / 1024.0}
    if side in ("ours", "stream"):
        golden = os.path.join(workdir, "golden")
        result["tensors"] = sum(1 for f in os.listdir(golden) if f.endswith(".npy"))
        result["bytes"] = sum(os.path.getsize(os.path.join(golden, f)) for f in os.listdir(golden))
    elif side == "tfdbg":
        start, cpu = time.perf_counter(), time.process_time()
        result["tensors"], result["bytes"] = _tfdbg_to_npy(os.path.join(workdir, "tfdbg"),
                                                           os.path.join(workdir, "tfdbg_npy"), np)
        result["convert_s"], result["convert_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        result["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return result


def _time_tf_calls(box: dict) -> None:
    """Time TensorFlow's own run call (``TF_SessionRun_wrapper``: prune, Grappler, executor
    build at a new fetch set, the kernels, the fetched values) inside the captured step's
    ``session.run`` (between the last hook's ``before_run`` and the first hook's ``after_run``), so
    the phases split that ``session.run`` into TensorFlow's call and the Python fetch handling
    around it. Instrumentation of the benchmark only: the call is made unchanged."""
    try:
        from tensorflow.python.client import pywrap_tf_session as binding
    except ImportError:  # TF 1.15
        from tensorflow.python import pywrap_tensorflow as binding
    real = binding.TF_SessionRun_wrapper

    def timed(*args):
        start = time.perf_counter()
        try:
            return real(*args)
        finally:
            if box.get("in_run"):
                box["tf_call_s"] = box.get("tf_call_s", 0.0) + time.perf_counter() - start

    binding.TF_SessionRun_wrapper = timed


def _train(cnn_estimator, workdir, hooks, step, batch):
    """The sample CNN's training (its default RunConfig) with a graph seed: every side computes the
    same values, so ours and tfdbg's files can be compared (:func:`_agreement`)."""
    import tensorflow as tf

    model_dir = os.path.join(workdir, "model")
    config = tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=None, log_step_count_steps=None,
                                    tf_random_seed=SEED)
    estimator = cnn_estimator.make_estimator(model_dir, run_config=config)
    estimator.train(lambda: cnn_estimator.input_fn(batch_size=batch), hooks=hooks, steps=step + 2)


def _agreement(ours_dir: str, tfdbg_dir: str) -> dict:
    """Ours vs tfdbg's ``.npy`` files of the same run (same seed), by msaccucmp key (file name
    without the timestamp): how many keys both have, how many are bit-identical, how many agree
    within 1e-5 (tfdbg dumps the graph after Grappler, whose fused kernels may round differently)."""
    import numpy as np

    def keys(folder):
        return {f.rsplit(".", 2)[0]: os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".npy")}

    ours, theirs = keys(ours_dir), keys(tfdbg_dir)
    common = sorted(set(ours) & set(theirs))
    same = close = 0
    differ = []
    for key in common:
        a, b = np.load(ours[key]), np.load(theirs[key])
        if a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes():
            same += 1
        elif a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True):
            close += 1
        else:
            differ.append(key)
    return {"common": len(common), "identical": same, "close": close, "differ": differ}


def _tfdbg_to_npy(session_root: str, out_dir: str, np) -> tuple:
    """tfdbg's dump -> msaccucmp .npy files (what ``lt`` + ``pt -w`` produce by hand)."""
    from tensorflow.python.debug.lib import debug_data

    os.makedirs(out_dir)
    (run_dir,) = [os.path.join(session_root, d) for d in os.listdir(session_root) if d.startswith("run_")]
    dump = debug_data.DebugDumpDir(run_dir)
    written, size = 0, 0
    for datum in dump.dumped_tensor_data:
        value = datum.get_tensor()
        if not isinstance(value, np.ndarray) or value.dtype.kind in "OSUV":
            continue
        stamp = 1000000000000000 + datum.timestamp % 1000000000000000
        name = "{}.{}.{}.npy".format(datum.node_name.replace("/", "_").replace(".", "_"), datum.output_slot, stamp)
        path = os.path.join(out_dir, name)
        np.save(path, value)
        written += 1
        size += os.path.getsize(path)
    return written, size


def _run_side(side: str, step: int, batch: int, workdir: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", side, "--workdir", workdir,
               "--step", str(step), "--batch", str(batch), "--gc", _GC["mode"]]
    output = subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            universal_newlines=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def _run_repeat(step: int, batch: int, runs: dict) -> dict:
    """One fresh process per side, one after the other; then ours vs tfdbg's files compared."""
    root = tempfile.mkdtemp(prefix="bench_reference_")
    try:
        for side in runs:
            workdir = os.path.join(root, side)
            os.makedirs(workdir)
            runs[side].append(_run_side(side, step, batch, workdir))
        return _agreement(os.path.join(root, "ours", "golden"), os.path.join(root, "tfdbg", "tfdbg_npy"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _median(runs: list, key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _report(step: int, batch: int, runs: dict) -> float:
    """Print one step's table and ratios; return tfdbg dump + .npy / ours."""
    repeats = len(runs["none"])
    print("\nsample CNN, batch {}, capture of local step {}{}, median of {} fresh process(es) per side".format(
        batch, step, " (the hook's default)" if step == 0 else "", repeats))
    print("{:<7} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8} {:>10} {:>11}".format(
        "side", "step s", "next s", "begin s", "to-npy s", "tensors", "MB", "peak RSS", "RSS growth"))
    for side, results in runs.items():
        print("{:<7} {:>9.3f} {:>9.3f} {:>9.3f} {:>10.3f} {:>8} {:>8.2f} {:>8.0f}MB {:>9.1f}MB".format(
            side, _median(results, "capture_s"), _median(results, "plain_s"), _median(results, "begin_s"),
            _median(results, "convert_s"),
            results[0].get("tensors", 0), results[0].get("bytes", 0) / 1e6, _median(results, "rss_peak_mb"),
            _median(results, "rss_growth_mb")))
    plain = _median(runs["none"], "capture_s")
    print("plain step {} without capture: {:.3f} s; plain step after it: {:.3f} s".format(
        step, plain, _median(runs["none"], "plain_s")))
    ours = _median(runs["ours"], "capture_s")
    stream = _median(runs["stream"], "capture_s")
    tfdbg_dump = _median(runs["tfdbg"], "capture_s")
    tfdbg_npy = statistics.median(r["capture_s"] + r["convert_s"] for r in runs["tfdbg"])
    ours_total = statistics.median(r["capture_s"] + r["begin_s"] for r in runs["ours"])
    ratio = tfdbg_npy / ours
    met = ratio >= TARGET
    cpu = (statistics.median(r["capture_cpu_s"] + r["convert_cpu_s"] for r in runs["tfdbg"])
           / _median(runs["ours"], "capture_cpu_s"))
    print("tfdbg dump + .npy / ours (step incl. .npy): {:.2f}x  (target >= {:.1f}x: {})".format(
        ratio, TARGET, "met" if met else "NOT met"))
    print("  CPU time of the process (all threads) in that window, tfdbg dump + .npy / ours: {:.2f}x "
          "(less sensitive to other processes on a shared machine)".format(cpu))
    print("  capture cost above the plain step, tfdbg / ours: {:.2f}x ({:.3f} s vs {:.3f} s)".format(
        (tfdbg_npy - plain) / max(ours - plain, 1e-6), tfdbg_npy - plain, ours - plain))
    print("  including our begin() setup: {:.2f}x; tfdbg dump only / ours: {:.2f}x; "
          "tfdbg / ours forced to stream (budget 0): {:.2f}x".format(
              tfdbg_npy / ours_total, tfdbg_dump / ours, tfdbg_npy / stream))
    plain_cpu = _median(runs["none"], "capture_cpu_s")
    print("  ceiling, a capture costing nothing above the plain step: tfdbg dump + .npy / plain step = {:.2f}x wall, "
          "{:.2f}x CPU (at step 0 the plain step is mostly TF building its executor, which every side pays)".format(
              tfdbg_npy / plain, statistics.median(r["capture_cpu_s"] + r["convert_cpu_s"] for r in runs["tfdbg"])
              / plain_cpu))
    return ratio


def _report_phases(runs: dict) -> None:
    """The captured step's wall time per phase and side (medians): the capture hook's
    ``before_run`` (ours: the step's walk, the variable read before the step, the fetch list;
    tfdbg: its watch options), the ``session.run`` itself with the other hooks (the step time less
    both), the hook's ``after_run`` (ours: the .npy files and the variable read after the step;
    tfdbg: nothing of note) and tfdbg's .npy conversion after training."""
    print("  phases of the captured step (median s; TF call: TensorFlow's run call inside that session.run, "
          "run CPU: the process CPU from the last before_run to the first after_run):")
    print("  {:<7} {:>10} {:>12} {:>8} {:>8} {:>11} {:>9} {:>8}".format(
        "side", "before_run", "session.run", "TF call", "run CPU", "after_run", "to-npy", "total"))
    for side, results in runs.items():
        run_s = statistics.median(r["capture_s"] - r.get("prep_s", 0.0) - r.get("finish_s", 0.0) for r in results)
        print("  {:<7} {:>10.3f} {:>12.3f} {:>8.3f} {:>8.3f} {:>11.3f} {:>9.3f} {:>8.3f}".format(
            side, _median(results, "prep_s") if "prep_s" in results[0] else 0.0, run_s,
            _median(results, "tf_call_s"), _median(results, "run_cpu_s"),
            _median(results, "finish_s") if "finish_s" in results[0] else 0.0, _median(results, "convert_s"),
            statistics.median(r["capture_s"] + r["convert_s"] for r in results)))


def _report_agreement(agreements: list) -> None:
    for number, found in enumerate(agreements):
        print("  agreement, repeat {}: {} msaccucmp keys in both ours and tfdbg's .npy files: {} bit-identical, "
              "{} within 1e-5, {} differ{}".format(
                  number + 1, found["common"], found["identical"], found["close"], len(found["differ"]),
                  (": " + ", ".join(found["differ"][:5])) if found["differ"] else ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run per side")
    parser.add_argument("--repeats", type=int, default=None, help="fresh processes per side (default 3)")
    parser.add_argument("--batch", type=int, default=8, help="sample CNN batch size (its input_fn default: 8)")
    parser.add_argument("--step", type=int, default=None, help="local step to capture (default: 0 and 1)")
    parser.add_argument("--gc", choices=("on", "off"), default="on",
                        help="Python's cyclic garbage collector in every side's process (default: on, as users have it)")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _GC["mode"] = args.gc
    if args.child:
        if args.gc == "off":
            import gc

            gc.disable()
        print(json.dumps(_child(args.child, args.workdir, args.step, args.batch)))
        return 0
    repeats = args.repeats or (1 if args.quick else 3)
    steps = [args.step] if args.step is not None else [0, 1]
    results = {}
    for step in steps:
        runs = {side: [] for side in SIDES}  # type: dict
        # interleaved, sequential: one TF process at a time
        agreements = [_run_repeat(step, args.batch, runs) for _ in range(repeats)]
        results[step] = _report(step, args.batch, runs)
        _report_phases(runs)
        _report_agreement(agreements)
    print("\n(Python's garbage collector: {})".format(
        "on, as users have it" if args.gc == "on" else "off in every side's process (--gc off)"))
    print("tfdbg dump + .npy / ours, side by side: {}".format(", ".join(
        "step {} {:.2f}x".format(step, ratio) for step, ratio in results.items())))
    print("target (>= {:.1f}x, step incl. .npy): {}".format(TARGET, ", ".join(
        "step {} {}".format(step, "met" if ratio >= TARGET else "NOT met") for step, ratio in results.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
