"""Calibration of compare's expected precision per op class on the emulator (docs/compare.md,
"Expected precision per op class").

Trains ``npu_dump_hook.sample_models.deep_cnn`` (4 to 10 convolutions, 3 dense layers; SGD,
momentum and Adam; batch 8 and 16; ``dump_mode`` output and all) on the emulated ``ascend``
profile, without a fault and with ``scale=1.05`` and ``scale=1.02`` faults on fused convolutions (on their
last op, ``convN/Relu``: a faulted op ends a fused group) and on a max pool (a selection), each against a
golden run from the same initial state, and prints for every op class of
:data:`npu_dump_hook.compare.OP_PRECISION` the ratio of a row's relative Euclidean distance
to the largest one upstream of it: the worst ratio of the healthy runs beside the factor the
class allows, the worst ratio over the row's cancellation excess (what the factor is compared
with for a reduction: :func:`npu_dump_hook.compare._thresholds.cancellation_excess`), and for
every fault the faulted row's ratio, its allowance and the verdict; for the ``selection`` class
also the worst absolute ratio of a healthy row, breaching or not (its absolute error over its
upstream rows' plus its own rounding: docs/compare.md, "Selections"). Needs TensorFlow;
about 2 minutes on one core::

    PYTHONPATH=. .venv/bin/python benchmarks/compare_op_precision.py [--quick]
"""
import argparse
import collections
import logging
import math
import shutil
import sys
import tempfile

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import PRECISION_CLASSES, compare, op_precision
from npu_dump_hook.compare import _thresholds
from npu_dump_hook.compare._analysis import allowance, golden_norm
from npu_dump_hook.sample_models import deep_cnn

HEALTHY = [dict(optimizer=o, convs=c, batch_size=b, dump_mode=m)
           for o in ("sgd", "momentum", "adam") for c, b, m in ((4, 8, "output"), (8, 8, "output"),
                                                                (8, 16, "all"), (10, 8, "all"))]
#: none before the selection class (so that the tree before it, on PYTHONPATH, prints its figures)
UNIT_ROUNDOFF = getattr(_thresholds, "UNIT_ROUNDOFF", {})
FAULTS = [dict(optimizer=o, convs=8, batch_size=8, dump_mode="output", fault=(op, scale))
          for o in ("momentum", "adam") for op in ("conv2/Relu", "conv5/Relu", "conv8/Relu")
          for scale in (1.05, 1.02)] + [
    dict(optimizer="momentum", convs=8, batch_size=8, dump_mode="output", fault=("pool1/MaxPool", scale))
    for scale in (1.05, 1.02)]  # a selection: found by the absolute rule too


def run(root, config):
    options = DumpOptions(enable_dump=True, dump_path=root + "/dump", dump_mode=config["dump_mode"])
    kwargs = dict(optimizer=config["optimizer"], convs=config["convs"], batch_size=config["batch_size"])
    fault = config.get("fault")
    npu = NpuDumpHook(options, output_dir=root + "/npu", backend="emulated", emulate_profile="ascend",
                      faults={fault[0]: "scale={}".format(fault[1])} if fault else None)
    deep_cnn.train(options, hooks=[npu], **kwargs)
    golden = NpuDumpHook(options, output_dir=root + "/golden", initial_state=npu.bundle.location)
    deep_cnn.train(options, hooks=[golden], **kwargs)
    return compare(npu.bundle.location, golden.bundle.location, workers=1)


def _distance(row):
    return (row.metrics or {}).get("RelativeEuclideanDistance")


def absolute_ratio(row):
    """A selection row's absolute error over what its rule allows it (its upstream rows' absolute
    errors in quadrature, plus its own rounding): None for other rows or unknown metrics."""
    if op_precision(row.op_type, row.direction, row.slot)[0] != "selection":
        return None
    error = _absolute(row)
    inherited = [e for e in (_absolute(u) for u in row.upstream) if e is not None]
    if error is None or not inherited:
        return None
    rounding = UNIT_ROUNDOFF.get(row.npu_dtype, 0.0) * (golden_norm(row) or 0.0)
    allowed = math.sqrt(sum(e * e for e in inherited)) + rounding
    return error / allowed if allowed > 0 else float("inf")


def _absolute_text(row):
    ratio = absolute_ratio(row)
    return "" if ratio is None else "; absolute ratio {:.3g}, allowed 1".format(ratio)


def _absolute(row):
    rmse = (row.metrics or {}).get("RootMeanSquareError")
    count = 1
    for dim in row.original_shape:
        count *= dim
    return None if rmse is None or not math.isfinite(rmse) else rmse * math.sqrt(count)


def excess(row):
    """The row's allowance over its class factor (its cancellation excess, at least 1)."""
    factor = op_precision(row.op_type, row.direction, row.slot)[1]
    allowed = allowance(row)
    return 1.0 if factor is None or allowed is None else allowed / factor


def ratios(result):
    """(op class, ratio, row) of every compared row with an upstream row."""
    found = []
    for row in result.rows:
        own = _distance(row)
        upstream = [d for d in (_distance(u) for u in row.upstream) if d is not None]
        if own is None or not upstream:
            continue
        klass, _ = op_precision(row.op_type, row.direction, row.slot)
        found.append((klass, own / max(upstream) if max(upstream) > 0 else float("inf"), row))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one healthy model per optimizer, two faults")
    args = parser.parse_args(argv)
    logging.getLogger("npu_dump_hook").setLevel(logging.ERROR)
    healthy = [c for c in HEALTHY if c["convs"] == 8] if args.quick else HEALTHY
    faults = FAULTS[:2] if args.quick else FAULTS
    worst = collections.defaultdict(lambda: (0.0, None))
    worst_scaled = collections.defaultdict(lambda: (0.0, None))
    worst_absolute = (0.0, None)
    root = tempfile.mkdtemp(prefix="op_precision_")
    try:
        print("healthy runs (want exit 0):")
        for number, config in enumerate(healthy):
            result = run("{}/h{}".format(root, number), config)
            summary = result.doc["summary"]
            print("  {:<70} exit {} breaches {:>3} root causes {}".format(
                str(config), result.exit_code, summary["breached"], len(result.doc["root_causes"])))
            for klass, ratio, row in ratios(result):
                where = "{} {}:{} ({})".format(row.op_type, row.direction, row.slot, config["optimizer"])
                if row.breached and ratio > worst[klass][0]:
                    worst[klass] = (ratio, where)
                if row.breached and ratio / excess(row) > worst_scaled[klass][0]:
                    worst_scaled[klass] = (ratio / excess(row), "{} excess {:.3g}".format(where, excess(row)))
                absolute = absolute_ratio(row)
                if absolute is not None and absolute > worst_absolute[0]:
                    worst_absolute = (absolute, where + (" (breaching)" if row.breached else ""))
        print("worst ratio (own distance / largest upstream distance) of a breaching healthy row, per class:")
        for klass, factor in sorted(PRECISION_CLASSES.items()):
            ratio, where = worst.get(klass, (0.0, None))
            print("  {:<16} allowed {:<8} worst {:<8.3g} {}".format(
                klass, "any" if factor is None else factor, ratio, where or "-"))
        print("worst ratio over the row's cancellation excess (>= 1), per class (what the factor is compared with):")
        for klass, factor in sorted(PRECISION_CLASSES.items()):
            ratio, where = worst_scaled.get(klass, (0.0, None))
            print("  {:<16} allowed {:<8} worst {:<8.3g} {}".format(
                klass, "any" if factor is None else factor, ratio, where or "-"))
        print("worst absolute ratio of a healthy selection row, breaching or not (its rule allows 1): {:.3g} {}".format(
            worst_absolute[0], worst_absolute[1] or "-"))
        print("faults (want: exit 1, the faulted op the first divergence):")
        for number, config in enumerate(faults):
            result = run("{}/f{}".format(root, number), config)
            first = result.doc["first_divergence"] or {}
            named = config["fault"][0] in (first.get("original_ops") or [])
            faulted = [(r, row) for k, r, row in ratios(result)
                       if config["fault"][0] in row.ground_truth and row.direction == "output"]
            print("  {:<70} exit {} named {} root causes {} faulted row ratio {}".format(
                str(config), result.exit_code, named, len(result.doc["root_causes"]),
                ", ".join("{:.3g} (allowed {:.3g}{})".format(r, allowance(row) or 0, _absolute_text(row))
                          for r, row in faulted)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
