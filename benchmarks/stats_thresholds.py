"""Where the default limits of the statistics compare come from (docs/compare.md, "Statistics
compare"), measured on the emulator's ``ascend`` profile (float16 Cube ops propagating, fusion,
device formats) against a golden run from the same initial state, both with TensorFlow.

For the sample MLP and CNN it makes a healthy ``dump_data="stats"`` run and one with a 5% scale
fault (``hidden2/MatMul`` / ``conv2/Conv2D``), their golden runs (statistics), compares each pair
with the limits off and prints, side by side, the worst relative difference of Max, Min, Avg
(and the L2 norm when the CSVs have it) over every healthy tensor and over the faulted op's own
output, with the defaults. Run from the repository: ``python benchmarks/stats_thresholds.py``
(about a minute; uses a temporary folder). Scalars (one-element tensors) are listed apart: as in
the tensor compare they are not checked unless ``check_scalars``.
"""
import os
import sys
import tempfile

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import DEFAULT_STATS_THRESHOLDS, compare
from npu_dump_hook.sample_models import cnn_estimator, mlp_session

STATS = ("max", "min", "avg", "l2norm")
FAULTS = {"mlp": "hidden2/MatMul", "cnn": "conv2/Conv2D"}


def _train(model, root, hook):
    if model == "mlp":
        mlp_session.train(hook.options, hooks=[hook], steps=1000)
    else:
        cnn_estimator.train(os.path.join(root, "model"), hooks=[hook], steps=1000)
    return hook.bundle.location


def stats_pair(model, root, fault=None):
    """(NPU stats bundle, its golden bundle) of one run of ``model``."""
    options = DumpOptions(enable_dump=True, dump_path=os.path.join(root, "dump"), dump_data="stats")
    faults = {FAULTS[model]: fault} if fault else None
    npu = _train(model, os.path.join(root, "n"), NpuDumpHook(options, output_dir=os.path.join(root, "npu"),
                                                              backend="emulated", emulate_profile="ascend",
                                                              faults=faults))
    golden = _train(model, os.path.join(root, "g"), NpuDumpHook(output_dir=os.path.join(root, "golden"),
                                                                 initial_state=npu))
    return npu, golden


def worst(rows, select):
    found = {}
    for row in rows:
        if not select(row):
            continue
        for name in STATS:
            value = (row["rel_diff"] or {}).get(name)
            if value is not None:
                found[name] = max(found.get(name, 0.0), value)
    return found


def main():
    off = {"value_rel_max": None, "norm_rel_max": None}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("mlp", "cnn"):
            for fault in (None, "scale=1.05"):
                root = os.path.join(tmp, model + ("_fault" if fault else ""))
                npu, golden = stats_pair(model, root, fault)
                rows = compare(npu, golden, workers=1, stats_thresholds=off).doc["rows"]
                if fault:
                    faulted = worst(rows, lambda r: r["npu_op"] == FAULTS[model] and r["direction"] == "output")
                    lines.append((model, "5% scale on " + FAULTS[model] + " (its output)", faulted, 1))
                else:
                    scalar = [r for r in rows if (r["golden_stats"] or {}).get("count") == 1]
                    lines.append((model, "healthy, tensors ({} rows; scalars not checked)".format(
                        len(rows) - len(scalar)), worst([r for r in rows if r not in scalar], bool), len(rows)))
                    lines.append((model, "healthy, scalars ({} rows)".format(len(scalar)), worst(scalar, bool),
                                  len(scalar)))
    limits = DEFAULT_STATS_THRESHOLDS
    print("{:<5} {:<46} {:>10} {:>10} {:>10} {:>10}".format("model", "run", *STATS))
    for model, label, found, _ in lines:
        print("{:<5} {:<46} {}".format(model, label, " ".join(
            "{:>10}".format("{:.3g}".format(found[s]) if s in found else "-") for s in STATS)))
    print("{:<5} {:<46} {:>10} {:>10} {:>10} {:>10}".format("", "default limit", limits.value_rel_max,
                                                            limits.value_rel_max, limits.value_rel_max,
                                                            limits.norm_rel_max))
    return 0


if __name__ == "__main__":
    sys.exit(main())
