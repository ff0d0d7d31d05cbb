"""Where the default thresholds of ``npu-dump-hook compare`` come from (docs/compare.md, "Thresholds").

Float16 mixed precision must pass and a kernel that scales its output by 1.05 must fail. This
script measures, with numpy only, what each threshold metric shows for

* float16 rounding of correct values (no propagation: the exact profile's ``fp16`` dump);
* float16 computation that propagates (inputs and weights cast to float16, output rounded to
  float16 and fed to the next dense+ReLU layer), after 6 and 30 layers;
* a 5% scale fault on top of the propagated float16 values;
* MaxPoolGrad after a float16 forward pass: rounding creates or breaks ties in a 2x2 window,
  so part of the gradient goes to another element (direction changes, size does not);

* a selection (a Select / ReLU keeping the positive logits of a float16 product) that keeps k
  of 16 logits, down to one tiny one: its relative Euclidean distance over its input's (what the
  element-wise factor 1 was compared with) and its absolute error over its input's plus its own
  float16 rounding (the selection rule, docs/compare.md "Selections"), healthy and with a 5% scale
  fault on it;

and prints the worst / median / p99 values side by side with the defaults. The formulas are
msaccucmp's (npu_dump_hook.compare.metrics computes the same numbers). Deterministic (fixed
seeds); about 20 s on one core.

How much more than its inputs' error an op of each class may show (reductions, second moments,
sign-sensitive ops: docs/compare.md, "Expected precision per op class") is calibrated on the
emulator with TensorFlow by ``benchmarks/compare_op_precision.py``.
"""
import numpy as np

from npu_dump_hook.compare import DEFAULT_THRESHOLDS
from npu_dump_hook.compare._thresholds import checked_values
from npu_dump_hook.compare.metrics import compute_metrics

KEYS = ("CosineSimilarity", "MagnitudeError", "RelativeEuclideanDistance", "MaxRelativeError", "MeanRelativeError")


def f16(x):
    return x.astype(np.float16).astype(np.float32)


def metrics(npu, golden):
    values = checked_values(compute_metrics(npu, golden).values)
    return [values[k] for k in KEYS]


def max_pool_grad(rng, batch=16, size=28, channels=32):
    """Gradient routed to each 2x2 window's argmax, from the fp32 forward and the fp16 one."""
    x = np.maximum(rng.standard_normal((batch, size, size, channels)), 0).astype(np.float32)
    grad = rng.standard_normal((batch, size // 2, size // 2, channels)).astype(np.float32)

    def routed(forward):
        windows = forward.reshape(batch, size // 2, 2, size // 2, 2, channels).transpose(0, 1, 3, 5, 2, 4)
        flat = windows.reshape(batch, size // 2, size // 2, channels, 4)
        first_max = (flat == flat.max(axis=-1, keepdims=True)).cumsum(axis=-1) == 1
        first_max &= flat == flat.max(axis=-1, keepdims=True)
        out = (first_max * grad[..., None]).reshape(batch, size // 2, size // 2, channels, 2, 2)
        return out.transpose(0, 1, 4, 2, 5, 3).reshape(batch, size, size, channels)

    return metrics(f16(routed(f16(x))), routed(x))


def layers(rng, depth, width=256, batch=32, gain=2.0):
    """Per layer: (rounding only, propagated, propagated + 5% fault) metrics of the pre-activation."""
    x = rng.standard_normal((batch, width)).astype(np.float32)
    h32, h16 = x, f16(x)
    out = []
    for _ in range(depth):
        w = (rng.standard_normal((width, width)) * np.sqrt(gain / width)).astype(np.float32)
        z32 = h32 @ w
        z16 = f16(f16(h16) @ f16(w))
        out.append((metrics(f16(z32), z32), metrics(z16, z32), metrics(f16(z16 * np.float32(1.05)), z32)))
        h32, h16 = np.maximum(z32, 0), np.maximum(z16, 0)
    return out


def selection(rng, kept, scale=1.0, batch=16, width=10):
    """(relative ratio, absolute ratio) of relu(logits) keeping ``kept`` of ``batch`` logits, the
    smallest kept one 0.01 when ``kept`` is 1 (the CI case), against the float16 product's logits."""
    x = rng.random((batch, width)).astype(np.float32)
    w = rng.standard_normal((width, 1)).astype(np.float32)
    z = (x @ w)[:, 0]
    shift = np.sort(z)[batch - kept] - (0.01 if kept == 1 else 0.0)
    golden = z - shift
    npu = f16(f16(x) @ f16(w))[:, 0] - f16(np.float32(shift))  # a float32 bias add after the product
    picked = golden >= 0
    out32, out16 = np.where(picked, golden, 0), f16(np.where(picked, npu, 0) * np.float32(scale))  # fp16 relu
    own, inherited = np.linalg.norm(out16 - out32), np.linalg.norm(npu - golden)
    rounding = 2.0 ** -11 * np.linalg.norm(out32)  # the relu's own float16 rounding, at most
    return (own / np.linalg.norm(out32)) / (inherited / np.linalg.norm(golden)), own / (inherited + rounding)


def selections(rng):
    """Worst / median ratios per share kept, healthy and faulted (one line each)."""
    print("selection of k of 16 float16 logits (relu): own / input, relative Euclidean distance (the old rule,\n"
          "allowed 1) and absolute error over the input's plus the output's float16 rounding (the selection rule,\n"
          "allowed 1); worst and median over 200 draws")
    for kept in (1, 2, 4, 8, 16):
        for scale, label in ((1.0, "healthy"), (1.05, "5% fault")):
            found = np.array([selection(rng, kept, scale) for _ in range(200)])
            print("  k={:<2} {:<9} relative {:>8.3g} {:<8.3g} absolute {:>8.3g} {:<8.3g}".format(
                kept, label, found[:, 0].max(), np.median(found[:, 0]), found[:, 1].max() if scale == 1.0
                else found[:, 1].min(), np.median(found[:, 1])))
    print("  (for a fault: the absolute ratio's minimum, not its maximum)")


def main():
    rng = np.random.default_rng(0)
    samples = {"rounding only": [], "fp16 propagated, layers 1-6": [], "fp16 propagated, layer 30": [],
               "MaxPoolGrad after fp16": [], "5% scale fault": []}
    for _ in range(60):
        per_layer = layers(rng, 6)
        samples["rounding only"].extend(r for r, _, _ in per_layer)
        samples["fp16 propagated, layers 1-6"].extend(p for _, p, _ in per_layer)
        samples["5% scale fault"].extend(f for _, _, f in per_layer)
    for _ in range(10):
        samples["fp16 propagated, layer 30"].append(layers(rng, 30)[-1][1])
        samples["MaxPoolGrad after fp16"].append(max_pool_grad(rng))
    print("{:<36} {:>22} {:>22} {:>26} {:>22} {:>22}".format("", "1 - CosineSimilarity", *KEYS[1:]))
    for label, rows in samples.items():
        array = np.array(rows, dtype=np.float64)
        array[:, 0] = 1.0 - array[:, 0]
        worst, median, p99 = array.max(axis=0), np.median(array, axis=0), np.quantile(array, 0.99, axis=0)
        print("{:<36} {}".format(label + " (n={})".format(len(rows)), " ".join(
            "{:>9.3g} {:>5.2g}/{:<6.2g}".format(w, m, p) for w, m, p in zip(worst, median, p99))))
    print("(worst  median/p99)")
    fault = np.array(samples["5% scale fault"])
    healthy = np.array(samples["fp16 propagated, layers 1-6"] + samples["fp16 propagated, layer 30"]
                       + samples["MaxPoolGrad after fp16"])
    d = DEFAULT_THRESHOLDS
    print("defaults: cosine_min {} magnitude_err_max {} (rel_euclid_max {} max_rel_err {} mean_rel_err {})".format(
        d.cosine_min, d.magnitude_err_max, d.rel_euclid_max, d.max_rel_err, d.mean_rel_err))
    print("healthy fp16 tensors breaching the defaults: {} of {}".format(
        int(((healthy[:, 0] < d.cosine_min) | (healthy[:, 1] > d.magnitude_err_max)).sum()), len(healthy)))
    print("faulted tensors passing the defaults: {} of {}".format(
        int(((fault[:, 0] >= d.cosine_min) & (fault[:, 1] <= d.magnitude_err_max)).sum()), len(fault)))
    for column, name, limits in ((2, "RelativeEuclideanDistance", (0.01, 0.03)), (4, "MeanRelativeError", (0.02, 0.05))):
        for limit in limits:
            print("{}: healthy fp16 tensors > {}: {} of {}; faulted ones <= {}: {} of {}".format(
                name, limit, int((healthy[:, column] > limit).sum()), len(healthy), limit,
                int((fault[:, column] <= limit).sum()), len(fault)))
    selections(np.random.default_rng(1))


if __name__ == "__main__":
    main()
