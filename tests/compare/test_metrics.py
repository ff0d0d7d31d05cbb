"""compute_metrics against msaccucmp's definitions (docs/_compare_metrics.md).

Every expected value is derived here from the stated formula with plain Python floats
(math), not from the implementation; benchmarks/bench_compare.py checks the same
definitions against msaccucmp's own numbers.
"""
import math
import tracemalloc

import numpy as np
import pytest

from npu_dump_hook.compare import metrics
from npu_dump_hook.compare.metrics import METRIC_NAMES, MetricResult, compute_metrics, not_compared
from npu_dump_hook.errors import OptionError

EPS = 2.0 ** -52  # msaccucmp's FLOAT_EPSILON (float64 eps)
EPS32 = 2.0 ** -23  # its KL floor (float32 eps)
NPU_FILE = "/dumps/Add.add_1.2.1700000000000000"
GOLDEN_FILE = "/golden/add_1.0.1700000000000000.npy"

MSACCUCMP_HEADER = ("CosineSimilarity,MaxAbsoluteError,AccumulatedRelativeError,RelativeEuclideanDistance,"
                    "KullbackLeiblerDivergence,StandardDeviation,MeanAbsoluteError,RootMeanSquareError,"
                    "MaxRelativeError,MeanRelativeError")


def _expected(xs, ys):
    """The nine numeric metrics and the std pair from the formulas, in Python floats."""
    n = len(xs)
    dot = sum(a * b for a, b in zip(xs, ys))
    nx = math.sqrt(sum(a * a for a in xs))
    ny = math.sqrt(sum(b * b for b in ys))
    # msaccucmp divides and subtracts in float32 (its inputs are cast to float32)
    rel = [float(abs(np.float32(np.float32(a) / np.float32(b)) - np.float32(1))) if abs(b) > EPS else 0.0
           for a, b in zip(xs, ys)]
    diffs = [a - b for a, b in zip(xs, ys)]

    def normalised(vs):
        low, high = min(vs), max(vs)
        spread = high - low
        ps = [(v - low) / spread if spread != 0 else v for v in vs]
        ps = [max(p, EPS32) for p in ps]
        total = sum(ps)
        return [p / total for p in ps]

    p, q = normalised(xs), normalised(ys)

    def mean_std(vs):
        mean = sum(vs) / len(vs)
        return mean, math.sqrt(sum((v - mean) ** 2 for v in vs) / len(vs))

    return {
        "CosineSimilarity": min(dot / (nx * ny), 1.0),
        "MaxAbsoluteError": max(abs(d) for d in diffs),
        "AccumulatedRelativeError": sum(rel),
        "RelativeEuclideanDistance": math.sqrt(sum(d * d for d in diffs) / (ny * ny)),
        "KullbackLeiblerDivergence": sum(a * math.log(a / b) for a, b in zip(p, q)),
        "MeanAbsoluteError": sum(abs(d) for d in diffs) / n,
        "RootMeanSquareError": math.sqrt(sum(d * d for d in diffs) / n),
        "MaxRelativeError": max(rel),
        "MeanRelativeError": sum(rel) / n,
    }, (mean_std(xs), mean_std(ys))


def _f32(values):
    """The values as msaccucmp sees them: cast to float32, back to Python floats."""
    return [float(v) for v in np.asarray(values, dtype=np.float32).reshape(-1)]


def _assert_matches(result, xs, ys, rel=1e-6):
    want, _ = _expected(_f32(xs), _f32(ys))
    for name, value in want.items():
        assert result.values[name] == pytest.approx(value, rel=rel, abs=1e-9), name


def test_metric_names_are_msaccucmps_csv_columns_in_order():
    assert ",".join(METRIC_NAMES) == MSACCUCMP_HEADER
    result = compute_metrics(np.arange(1.0, 5.0), np.arange(2.0, 6.0))
    assert set(result.values) == set(METRIC_NAMES) - {"StandardDeviation"}
    assert len(result.csv_cells()) == len(METRIC_NAMES)


def test_hand_computed_small_tensor():
    x = [1.0, 2.0, 3.0, -4.0, 0.5, 6.0]
    y = [1.5, 2.0, 2.0, -3.0, 0.25, 6.5]
    result = compute_metrics(np.array(x, np.float32).reshape(2, 3), np.array(y, np.float32).reshape(2, 3))
    _assert_matches(result, x, y)
    # spot values by hand: |x-y| = .5 0 1 1 .25 .5; |x/y-1| = 1/3 0 .5 1/3 1 1/13
    assert result.values["MaxAbsoluteError"] == pytest.approx(1.0)
    assert result.values["MeanAbsoluteError"] == pytest.approx(3.25 / 6)
    assert result.values["AccumulatedRelativeError"] == pytest.approx(1 / 3 + .5 + 1 / 3 + 1 + 1 / 13)
    assert result.values["MaxRelativeError"] == pytest.approx(1.0)
    assert result.fail_reason == ""
    (npu_mean, npu_std), (golden_mean, golden_std) = result.std
    assert npu_mean == pytest.approx(8.5 / 6) and golden_mean == pytest.approx(9.25 / 6)
    assert npu_std == pytest.approx(math.sqrt(sum((v - 8.5 / 6) ** 2 for v in x) / 6))


def test_zeros_in_golden_are_left_out_of_the_relative_errors_but_count_in_the_mean():
    x = [1.0, 5.0, 2.0, 3.0]
    y = [2.0, 0.0, 2.0, 0.0]
    result = compute_metrics(np.array(x, np.float32), np.array(y, np.float32))
    assert result.values["AccumulatedRelativeError"] == pytest.approx(0.5)
    assert result.values["MaxRelativeError"] == pytest.approx(0.5)
    assert result.values["MeanRelativeError"] == pytest.approx(0.5 / 4)
    assert result.values["RelativeEuclideanDistance"] == pytest.approx(math.sqrt((1 + 25 + 9) / 8.0))
    _assert_matches(result, x, y)


def test_golden_values_at_or_below_eps_count_as_zero():
    result = compute_metrics(np.array([1.0, 1.0], np.float32), np.array([EPS, 2 * EPS], np.float32))
    # |y| > eps holds only for 2*eps: |1/(2 eps) - 1| in float32
    assert result.values["MaxRelativeError"] == pytest.approx(1 / (2 * EPS) - 1, rel=1e-6)
    assert result.values["MeanRelativeError"] == pytest.approx((1 / (2 * EPS) - 1) / 2, rel=1e-6)


def test_both_all_zero():
    result = compute_metrics(np.zeros(5, np.float32), np.zeros(5, np.float32))
    cells = dict(zip(METRIC_NAMES, result.csv_cells()))
    assert cells["CosineSimilarity"] == "1.0"  # msaccucmp's literal, not its 6-decimal format
    assert result.values["CosineSimilarity"] == 1.0
    assert cells["StandardDeviation"] == "(0.000;0.000),(0.000;0.000)"
    for name in METRIC_NAMES[1:]:
        if name != "StandardDeviation":
            assert cells[name] == "0.000000", name
    assert result.fail_reason == ""


def test_npu_all_zero_cosine_is_nan_with_msaccucmps_reason():
    y = [1.0, -2.0, 3.0]
    result = compute_metrics(np.zeros(3, np.float32), np.array(y, np.float32), NPU_FILE, GOLDEN_FILE)
    assert result.values["CosineSimilarity"] is None
    assert result.csv_cells()[0] == "NaN"
    assert result.fail_reason == "Cannot compare by Cosine Similarity. All the data is zero in " + NPU_FILE + "."
    assert result.values["RelativeEuclideanDistance"] == pytest.approx(1.0)
    assert result.values["MaxRelativeError"] == pytest.approx(1.0)
    # KL: x constant 0 -> floored to eps32 everywhere -> uniform P; Q from y's min-max scaling
    q = [max((v - (-2.0)) / 5.0, EPS32) for v in y]
    q = [v / sum(q) for v in q]
    assert result.values["KullbackLeiblerDivergence"] == pytest.approx(sum(1 / 3 * math.log(1 / 3 / b) for b in q))


def test_golden_all_zero_cosine_names_the_golden_file():
    result = compute_metrics(np.array([1.0, 2.0], np.float32), np.zeros(2, np.float32), NPU_FILE, GOLDEN_FILE)
    assert result.values["CosineSimilarity"] is None
    assert result.fail_reason == "Cannot compare by Cosine Similarity. All the data is zero in " + GOLDEN_FILE + "."
    assert result.values["RelativeEuclideanDistance"] == 0.0  # sqrt(sum y^2) <= eps -> 0
    assert result.values["AccumulatedRelativeError"] == 0.0
    assert result.values["MaxAbsoluteError"] == pytest.approx(2.0)


def test_nan_on_the_npu_side_propagates_except_through_nothing():
    x = np.array([1.0, np.nan, 3.0], np.float32)
    y = np.array([1.0, 2.0, 4.0], np.float32)
    result = compute_metrics(x, y)
    for name, cell in zip(METRIC_NAMES, result.csv_cells()):
        if name == "StandardDeviation":
            assert cell == "(nan;nan),(%.3f;%.3f)" % (7 / 3, math.sqrt(sum((v - 7 / 3) ** 2 for v in (1, 2, 4)) / 3))
        else:
            assert cell == "nan", name
            assert math.isnan(result.values[name])
    assert result.fail_reason == ""


def test_nan_in_golden_is_skipped_by_the_relative_errors():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([2.0, np.nan, 3.0], np.float32)
    result = compute_metrics(x, y)
    assert result.values["AccumulatedRelativeError"] == pytest.approx(0.5)  # NaN > eps is false -> 0
    assert result.values["MaxRelativeError"] == pytest.approx(0.5)
    assert result.values["MeanRelativeError"] == pytest.approx(0.5 / 3)
    for name in ("CosineSimilarity", "MaxAbsoluteError", "RelativeEuclideanDistance", "KullbackLeiblerDivergence",
                 "MeanAbsoluteError", "RootMeanSquareError"):
        assert math.isnan(result.values[name]), name


def test_float16_overflow_inf_on_the_npu_side():
    golden = np.array([1.0, 70000.0, 2.0], np.float32)
    with np.errstate(over="ignore"):
        npu = golden.astype(np.float16)  # 70000 overflows float16 to inf
    assert np.isinf(npu[1])
    result = compute_metrics(npu, golden)
    cells = dict(zip(METRIC_NAMES, result.csv_cells()))
    assert cells["MaxAbsoluteError"] == "inf"
    assert cells["AccumulatedRelativeError"] == "inf" and cells["MaxRelativeError"] == "inf"
    assert cells["MeanAbsoluteError"] == "inf" and cells["RootMeanSquareError"] == "inf"
    assert cells["RelativeEuclideanDistance"] == "inf"
    # cosine divides inf by an inf norm (NaN); KL's min-max scaling with an inf is NaN
    assert cells["CosineSimilarity"] == "nan" and cells["KullbackLeiblerDivergence"] == "nan"
    assert cells["StandardDeviation"].startswith("(inf;nan),")


def test_float32_overflow_of_squares_is_reproduced():
    # msaccucmp squares in float32: 1e20**2 overflows, its norms are inf, x/inf = 0
    x = np.array([1e20, 2e20], np.float32)
    y = np.array([1e20, 3e20], np.float32)
    result = compute_metrics(x, y)
    assert result.values["CosineSimilarity"] == 0.0
    assert math.isinf(result.values["RootMeanSquareError"])
    assert math.isnan(result.values["RelativeEuclideanDistance"])  # inf / inf
    assert result.values["MaxRelativeError"] == pytest.approx(1 / 3, rel=1e-6)


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (1, 1, 1)])
def test_scalars(shape):
    x, y = 3.0, 2.0
    result = compute_metrics(np.full(shape, x, np.float32), np.full(shape, y, np.float32))
    assert result.csv_cells()[0] == "1.000000"
    assert result.values["CosineSimilarity"] == 1.0
    assert result.fail_reason == "This tensor is scalar."
    assert result.values["MaxAbsoluteError"] == pytest.approx(1.0)
    assert result.values["RelativeEuclideanDistance"] == pytest.approx(0.5)
    assert result.values["MaxRelativeError"] == pytest.approx(0.5)
    assert result.values["KullbackLeiblerDivergence"] == 0.0  # one element: P = Q = [1]
    assert result.std == ((3.0, 0.0), (2.0, 0.0))


@pytest.mark.parametrize("shape", [(1, 3), (3, 1), (2,)])
def test_shapes_with_ones_are_not_scalars(shape):
    n = int(np.prod(shape))
    x = [float(v) for v in range(1, n + 1)]
    y = [v + 0.5 for v in x]
    result = compute_metrics(np.array(x, np.float32).reshape(shape), np.array(y, np.float32).reshape(shape))
    assert result.fail_reason == ""
    _assert_matches(result, x, y)


def test_float16_inputs_are_widened():
    x16 = np.array([0.1, -1.5, 2.3, 1000.7], np.float16)
    y = np.array([0.1, -1.5, 2.3, 1000.7], np.float32)
    result = compute_metrics(x16, y)
    _assert_matches(result, [float(v) for v in x16], [float(v) for v in y])
    assert result.values["MaxAbsoluteError"] == pytest.approx(abs(float(np.float16(1000.7)) - float(y[3])))


def test_int_and_float64_inputs_are_cast_to_float32():
    x = np.array([1, 2, 3, 2 ** 24 + 1], np.int64)  # 2**24 + 1 is not a float32
    y = np.array([1.0, 2.5, 2.0, 2.0 ** 24], np.float64)
    result = compute_metrics(x, y)
    assert result.values["MaxAbsoluteError"] == 1.0
    _assert_matches(result, x, y)
    last = compute_metrics(x[3:], y[3:])
    assert last.values["MaxAbsoluteError"] == 0.0  # equal once both are float32


def test_identical_tensors():
    x = np.linspace(-3, 5, 101, dtype=np.float32)
    result = compute_metrics(x, x.copy())
    cells = dict(zip(METRIC_NAMES, result.csv_cells()))
    assert cells["CosineSimilarity"] == "1.000000"
    for name in ("MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance",
                 "KullbackLeiblerDivergence", "MeanAbsoluteError", "RootMeanSquareError", "MaxRelativeError",
                 "MeanRelativeError"):
        assert cells[name] in ("0.000000", "-0.000000"), name
        assert abs(result.values[name]) < 1e-12, name
    assert result.fail_reason == ""


def test_empty_tensors_follow_msaccucmp():
    result = compute_metrics(np.zeros((0,), np.float32), np.zeros((0,), np.float32), NPU_FILE, GOLDEN_FILE)
    cells = dict(zip(METRIC_NAMES, result.csv_cells()))
    # norm 0 -> "1.0"; empty sums -> 0; empty means -> nan; max of nothing fails (NaN + reason)
    assert cells == {
        "CosineSimilarity": "1.0", "MaxAbsoluteError": "NaN", "AccumulatedRelativeError": "0.000000",
        "RelativeEuclideanDistance": "0.000000", "KullbackLeiblerDivergence": "NaN",
        "StandardDeviation": "(nan;nan),(nan;nan)", "MeanAbsoluteError": "nan", "RootMeanSquareError": "nan",
        "MaxRelativeError": "NaN", "MeanRelativeError": "nan"}
    failed = "Failed to execute 'compare' in '{}'. zero-size array to reduction operation maximum which has no identity"
    assert result.fail_reason == ",".join(failed.format(name) for name in (
        "MaxAbsoluteError", "KullbackLeiblerDivergence", "MaxRelativeError"))


def test_bool_tensors_only_cosine_and_red():
    x = np.array([True, False, True, True])
    y = np.array([True, True, False, True])
    result = compute_metrics(x, y, NPU_FILE, GOLDEN_FILE)
    # cosine of 0/1 vectors: |x and y| / sqrt(|x| |y|) = 2 / 3
    assert result.values["CosineSimilarity"] == pytest.approx(2 / 3)
    assert result.csv_cells()[0] == "0.666667"
    assert result.std is None
    unsupported = ["Algorithm %s does not support Boolean types." % name for name in METRIC_NAMES
                   if name not in ("CosineSimilarity", "RelativeEuclideanDistance")]
    red = ("Failed to execute 'compare' in 'RelativeEuclideanDistance'. numpy boolean subtract, the `-` operator, "
           "is not supported, use the bitwise_xor, the `^` operator, or the logical_xor function instead.")
    # messages in metric order, joined by ","
    assert result.fail_reason == ",".join(unsupported[:2] + [red] + unsupported[2:])
    assert result.csv_cells()[1:] == ["NaN"] * 9


def test_bool_with_all_false_golden():
    result = compute_metrics(np.array([True, False]), np.array([False, False]), NPU_FILE, GOLDEN_FILE)
    assert result.values["CosineSimilarity"] is None
    assert result.values["RelativeEuclideanDistance"] == 0.0
    assert result.fail_reason.startswith("Cannot compare by Cosine Similarity. All the data is zero in " + GOLDEN_FILE)


def test_bool_against_int_is_numeric():
    result = compute_metrics(np.array([True, False, True]), np.array([1, 1, 0], np.int32))
    _assert_matches(result, [1.0, 0.0, 1.0], [1.0, 1.0, 0.0])


def test_csv_cells_formatting():
    result = compute_metrics(np.array([1.0, 2.0, 4.0], np.float32), np.array([1.0, 2.0, 3.0], np.float32))
    cells = dict(zip(METRIC_NAMES, result.csv_cells()))
    want, _ = _expected([1.0, 2.0, 4.0], [1.0, 2.0, 3.0])
    for name, value in want.items():
        assert cells[name] == "{:.6f}".format(value), name
    assert cells["StandardDeviation"] == "(%.3f;%.3f),(%.3f;%.3f)" % (
        7 / 3, math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 3), 2.0, math.sqrt(2 / 3))


def test_standard_deviation_values_under_a_thousandth_print_as_zero():
    result = compute_metrics(np.full(4, -0.0004, np.float32), np.full(4, -0.0016, np.float32))
    assert result.csv_cells()[METRIC_NAMES.index("StandardDeviation")] == "(0.000;0.000),(-0.002;0.000)"
    assert result.std[0] == (0.0, 0.0)


def test_cells_derived_when_built_by_hand():
    values = dict((name, 0.25) for name in METRIC_NAMES if name != "StandardDeviation")
    values["KullbackLeiblerDivergence"] = None
    values["MaxAbsoluteError"] = float("nan")
    built = MetricResult(values, ((1.0, 2.0), (-3.0, 0.5)), "")
    cells = built.csv_cells()
    assert cells[METRIC_NAMES.index("KullbackLeiblerDivergence")] == "NaN"
    assert cells[METRIC_NAMES.index("MaxAbsoluteError")] == "nan"
    assert cells[METRIC_NAMES.index("StandardDeviation")] == "(1.000;2.000),(-3.000;0.500)"
    assert cells[0] == "0.250000"
    assert not_compared("There is no dump file").csv_cells() == ["NaN"] * 10
    assert not_compared("x").fail_reason == "x"


def test_chunked_equals_one_chunk(monkeypatch):
    rng = np.random.RandomState(3)
    y = rng.standard_normal(1000).astype(np.float32) * 3 + 1
    x = (y + rng.standard_normal(1000).astype(np.float32) * 0.01).astype(np.float16)
    x[::7] = 0
    whole = compute_metrics(x, y)
    monkeypatch.setattr(metrics, "CHUNK", 37)
    chunked = compute_metrics(x, y)
    for name in whole.values:
        assert chunked.values[name] == pytest.approx(whole.values[name], rel=1e-9, abs=1e-12), name
    for side in (0, 1):
        assert chunked.std[side] == pytest.approx(whole.std[side], rel=1e-9)
    assert chunked.csv_cells() == whole.csv_cells()
    _assert_matches(chunked, x, y)


def test_element_count_mismatch_is_an_option_error():
    with pytest.raises(OptionError):
        compute_metrics(np.zeros(3), np.zeros(4))


def test_memory_stays_at_chunk_size_for_a_large_pair():
    n = 1 << 23  # 8M elements: a float64 copy of one side would be 64 MB
    y = np.ones(n, np.float16)
    x = y.copy()
    x[::3] = 2
    compute_metrics(x[:10], y[:10])  # scratch buffers of this thread exist from here on
    tracemalloc.start()
    try:
        result = compute_metrics(x, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak  # far below one float32 copy (32 MB) of one side
    third = (n + 2) // 3
    assert result.values["MeanAbsoluteError"] == pytest.approx(third / n)


def test_std_of_values_far_from_zero_is_exact():
    # mean 1e4, std ~2e-3: sum(x^2) - n*mean^2 would lose the std; the centred sum is used
    x = np.float32(10000) + (np.arange(100000) % 7).astype(np.float32) * np.float32(2 ** -10)
    values = [float(v) for v in x]
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    result = compute_metrics(x, x)
    assert result.std[0][0] == pytest.approx(mean, rel=1e-12)
    assert result.std[0][1] == pytest.approx(std, rel=1e-9)


def test_finite_flags_say_which_side_has_nan_or_inf():
    finite = np.array([1.0, 2.0, 3.0], np.float32)
    assert compute_metrics(finite, finite).finite == (True, True)
    with np.errstate(over="ignore"):
        overflowed = np.array([1.0, 70000.0, 3.0], np.float32).astype(np.float16)
    assert compute_metrics(overflowed, finite).finite == (False, True)
    assert compute_metrics(finite, np.array([1.0, np.nan, 3.0], np.float32)).finite == (True, False)
    assert compute_metrics(np.array([True]), np.array([False])).finite == (True, True)
    assert compute_metrics(np.zeros(0), np.zeros(0)).finite == (True, True)


def test_float16_is_widened_exactly_as_numpy_casts_it():
    """The float16 lookup table (large float16 tensors) gives numpy's own cast, bit for bit, for every pattern."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    buf = np.empty(every.size, np.float32)
    widened = metrics._as_f32(every, buf)
    assert every.size >= metrics._F16_TABLE_FROM
    assert np.array_equal(widened.view(np.uint32), every.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("size", [100, 5000, 70000])
def test_a_float16_tensor_compares_as_its_float32_widening(size):
    """Small (numpy's cast) and large (table) float16 tensors: the same cells as the float32 values."""
    rng = np.random.RandomState(11)
    y = rng.standard_normal(size).astype(np.float32) * 2 + 0.5
    x = (y * (1 + rng.standard_normal(size).astype(np.float32) * 1e-3)).astype(np.float16)
    x[3] = 0
    y[5] = 0
    assert compute_metrics(x, y).csv_cells() == compute_metrics(x.astype(np.float32), y).csv_cells()
    x[7] = np.inf
    assert compute_metrics(x, y).csv_cells() == compute_metrics(x.astype(np.float32), y).csv_cells()
