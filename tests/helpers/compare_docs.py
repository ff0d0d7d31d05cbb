"""Compare documents (schema npu_dump_hook/compare@1) built by hand, for the report tests and
benchmarks: no TensorFlow, no bundle, the shape compare() writes (docs/compare.md, "JSON"):
thresholds as ``Thresholds.as_dict()`` (``check_scalars`` included), rows with
``golden_tensor``, ``magnitude_error`` and ``breached`` (the checked values crossed, from
compare/_thresholds.py's own ``breaches``), ``npu.step_dir`` and ``warnings``.

``synthetic_doc(n_ops)`` is a chain of ``n_ops`` ops in execution order, each with one output
row, every third with an input row too. Before ``fault_at`` every tensor agrees (float16-sized
errors); the op at ``fault_at`` (a fused node with two original TF ops) breaches the thresholds
with good inputs (the first divergence), later ops inherit it (propagated, recovering slowly);
one later op is a second, independent root cause; every 37th op has no golden file
(not_compared), one overflows (inf on the NPU side, which compare() would write as null: it
tests the embedding of non-finite floats). Metrics are drawn from a seeded generator as a
cosine c and a norm ratio r, with RelativeEuclideanDistance = sqrt(r^2 - 2rc + 1), so
MagnitudeError (= |r - c|) means what it does on real tensors.
"""
import math
import random

from npu_dump_hook.compare._thresholds import breaches, magnitude_error, make_thresholds

METRICS9 = ("CosineSimilarity", "MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance",
            "KullbackLeiblerDivergence", "MeanAbsoluteError", "RootMeanSquareError", "MaxRelativeError",
            "MeanRelativeError")
HOSTILE = "net/</script><img src=x onerror=alert(1)>&amp;\"q\"'s<!--"
# Every check on (the defaults keep only cosine and magnitude), so each threshold line is drawn.
THRESHOLDS = make_thresholds({"rel_euclid_max": 0.05, "max_rel_err": 0.5, "mean_rel_err": 0.05}).as_dict()
WARNING = "golden /data/bundles/run_golden was made for another NPU bundle (golden_for.bundle_json_sha256 " \
          "0123456789ab, NPU bundle b-0001)"


def _metrics(rng, cos, ratio):
    """msaccucmp-like metrics of a tensor at cosine ``cos`` whose norm is ``ratio`` x the golden's."""
    distance = math.sqrt(max(0.0, ratio * ratio - 2 * ratio * cos + 1))
    return {"CosineSimilarity": cos, "MaxAbsoluteError": distance * rng.uniform(1, 3),
            "AccumulatedRelativeError": distance * rng.uniform(50, 90), "RelativeEuclideanDistance": distance,
            "KullbackLeiblerDivergence": distance * distance, "MeanAbsoluteError": distance * 0.1,
            "RootMeanSquareError": distance * 0.2, "MaxRelativeError": distance * rng.uniform(4, 9),
            "MeanRelativeError": distance * rng.uniform(0.3, 0.6)}


def _ok_metrics(rng):
    return _metrics(rng, 1.0 - rng.uniform(0, 5e-6), 1.0 + rng.uniform(-3e-4, 3e-4))


def _breached(metrics, status):
    if metrics is None:
        return []
    crossed = breaches(metrics, make_thresholds(THRESHOLDS))
    return ["overflow"] + crossed if status == "overflow" else crossed


def _row(position, order, name, op_type, metrics, status, direction="output", originals=None, reason=""):
    tensor = "{}:{}:0".format(name, direction)
    if status in ("root_cause", "propagated") and not _breached(metrics, status):
        raise AssertionError("{} row {} within the thresholds: {}".format(status, tensor, metrics))
    return {"index": position, "order": order, "op_type": op_type, "npu_op": name, "npu_dtype": "DT_FLOAT16",
            "address": "0x{:012x}".format(0x100000 + position * 4096),
            "ground_truth": list(originals) if originals is not None else [name],
            "golden_dtype": "DT_FLOAT", "tensor": tensor, "direction": direction, "slot": 0,
            "shape": [1, 2, 8, 8, 16], "npu_format": "NC1HWC0", "original_shape": [1, 8, 8, 32],
            "metrics": metrics, "std": None if metrics is None else [[0.01, 1.02], [0.01, 1.0]],
            "fail_reason": reason, "status": status, "timestamp": 1764580000000000 + order * 10,
            "golden_tensor": None if metrics is None else "{}:0".format((originals or [name])[-1]),
            "magnitude_error": None if metrics is None else magnitude_error(metrics),
            "breached": _breached(metrics, status)}


def _propagated(rng, order, fault_at):
    """Inherited error, recovering slowly with the distance to the fault (still past cosine_min)."""
    return _metrics(rng, 0.95 + 0.035 * (1 - 1.0 / (1 + order - fault_at)), 1.15 + rng.uniform(-0.05, 0.05))


def _status(order, fault_at, second_at):
    if order == fault_at or order == second_at:
        return "root_cause"
    return "propagated" if order > fault_at else "ok"


def synthetic_doc(n_ops=60, fault_at=None, fault_name="net/conv2/BiasAdd_fused", seed=7, overflow=True,
                  warnings=(WARNING,)):
    """A compare@1 document of ``n_ops`` ops (see the module docstring); rows ~ 1.33 x n_ops.

    ``overflow=False`` leaves out the overflow row, so every value is finite (plain JSON);
    ``warnings`` the document's warnings.
    """
    rng = random.Random(seed)
    fault_at = n_ops // 3 if fault_at is None else fault_at
    second_at = fault_at + max(2, n_ops // 3)
    overflow_at = fault_at + 1 if overflow else -1
    rows, nc_reasons = [], {}
    for order in range(n_ops):
        name = fault_name if order == fault_at else "net/layer_{}/op".format(order)
        op_type = "Conv2D" if order == fault_at else ("MatMul", "Add", "Relu", "Mul")[order % 4]
        originals = [fault_name + "/Conv2D", fault_name + "/BiasAdd"] if order == fault_at else None
        if order % 3 == 0 and order > 0:   # the input it reads from the op before it
            before = order <= fault_at
            rows.append(_row(len(rows), order, name, op_type,
                             _ok_metrics(rng) if before else _propagated(rng, order, fault_at),
                             "ok" if before else "propagated", direction="input", originals=originals))
        if order % 37 == 36:
            nc_reasons["No golden data."] = nc_reasons.get("No golden data.", 0) + 1
            rows.append(_row(len(rows), order, name, op_type, None, "not_compared", reason="No golden data.",
                             originals=originals))
            continue
        status = _status(order, fault_at, second_at)
        if status == "root_cause":
            metrics = _metrics(rng, 0.62 if order == fault_at else 0.8, 1.5)
        elif status == "propagated":
            metrics = _propagated(rng, order, fault_at)
        else:
            metrics = _ok_metrics(rng)
        if order == overflow_at:
            status = "overflow"
            metrics.update(MaxRelativeError=float("inf"), MaxAbsoluteError=float("inf"), CosineSimilarity=None)
        if order == 1:
            metrics["MaxRelativeError"] = 0.0   # drawn on the log axis floor
        rows.append(_row(len(rows), order, name, op_type, metrics, status, originals=originals))
    fault_row = next(i for i, row in enumerate(rows) if row["order"] == fault_at and row["direction"] == "output")
    second_row = next(i for i, row in enumerate(rows) if row["order"] == second_at and row["direction"] == "output")
    statuses = [row["status"] for row in rows]
    previous = rows[fault_row - 1]
    first = {"row": fault_row, "npu_op": fault_name, "op_type": "Conv2D",
             "original_ops": rows[fault_row]["ground_truth"], "tensor": rows[fault_row]["tensor"],
             "metrics": rows[fault_row]["metrics"], "breached": rows[fault_row]["breached"],
             "inputs": [{"tensor": previous["tensor"], "row": fault_row - 1, "metrics": previous["metrics"]},
                        {"tensor": "net/weights:output:0", "row": None, "metrics": {name: None for name in METRICS9}}]}
    summary = {"rows": len(rows), "compared": len(rows) - statuses.count("not_compared"),
               "not_compared": statuses.count("not_compared"), "not_compared_reasons": nc_reasons,
               "breached": sum(1 for row in rows if row["breached"]),
               "root_causes": statuses.count("root_cause"), "propagated": statuses.count("propagated"),
               "overflow": statuses.count("overflow"), "input_inconsistent": False,
               "input_inconsistent_detail": [], "verdict": "fail", "elapsed_s": 1.25}
    return {"schema": "npu_dump_hook/compare@1",
            "npu": {"path": "/data/bundles/run_npu", "kind": "bundle", "graph": "ge_proto_00001_Build.txt",
                    "bundle_id": "b-0001", "step_dir": "/data/bundles/run_npu/data/dump/20261201000000/0/"
                                                      "ge_default_20261201000000_1/1/0"},
            "golden": {"path": "/data/bundles/run_npu/data/golden", "kind": "embedded"},
            "thresholds": dict(THRESHOLDS), "summary": summary, "first_divergence": first,
            "root_causes": [fault_row, second_row], "rows": rows, "warnings": list(warnings)}
