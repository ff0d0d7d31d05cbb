"""The ten tensor metrics of msaccucmp, with its definitions, edge cases and CSV text.

:func:`compute_metrics` compares one NPU tensor with its golden tensor the way msaccucmp
(PyPI ``mindstudio-probe`` 26.2.0, ``msaccucmp/algorithm_manager``) does, so that a row of
our CSV carries the same ten cells as msaccucmp's. The definitions, and every rule for
zeros, NaN/Inf, scalars, empty and bool tensors, are stated in ``docs/_compare_metrics.md``;
in short, with x the NPU values and y the golden values, both flattened and cast to float32
(float16 is widened, float64 and integers are narrowed, exactly as msaccucmp casts):

* CosineSimilarity           sum(x*y) / (|x| |y|), capped at 1; "1.0" when both are zero
* MaxAbsoluteError           max |x - y|
* AccumulatedRelativeError   sum over |y| > eps of |x/y - 1|
* RelativeEuclideanDistance  sqrt(sum((x - y)^2) / sum(y^2)); 0 when |y| <= eps
* KullbackLeiblerDivergence  KL of the min-max normalised, eps-floored distributions
* StandardDeviation          "(mean;std),(mean;std)" of x and of y, 3 decimals
* MeanAbsoluteError          mean |x - y|
* RootMeanSquareError        sqrt(mean((x - y)^2))
* MaxRelativeError           max over all elements of (|x/y - 1| if |y| > eps else 0)
* MeanRelativeError          mean of the same

The relative errors are computed element-wise in float32, as msaccucmp computes them
(their float32 rounding near 1e-7 is visible in the sums); differences, squares and
products in float64 (BLAS dot products), with msaccucmp's float32 overflow (a square or a
sum past 3.4e38 is inf) and underflow (squares of |v| < 1e-19 are 0) reproduced. Sums are
accumulated in float64 over chunks of ``CHUNK`` elements, so the results differ from
msaccucmp's only by its float32 rounding of the sums (about 1e-7 relative).

Cost: time linear in the element count (two reads of each input: the second one, for the
KL divergence, only when both inputs are finite); memory: scratch buffers of CHUNK
elements, about 23 MB, kept per thread and reused (fresh large arrays cost a page fault
per page), independent of the tensor size. Memory-mapped inputs are read chunk by chunk.
"""
import math
import threading
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from npu_dump_hook.errors import OptionError

__all__ = ["METRIC_NAMES", "MetricResult", "compute_metrics", "not_compared", "CHUNK"]

METRIC_NAMES = (
    "CosineSimilarity",
    "MaxAbsoluteError",
    "AccumulatedRelativeError",
    "RelativeEuclideanDistance",
    "KullbackLeiblerDivergence",
    "StandardDeviation",
    "MeanAbsoluteError",
    "RootMeanSquareError",
    "MaxRelativeError",
    "MeanRelativeError",
)  # type: Tuple[str, ...]

#: Elements per chunk: temporaries are a few float32/float64 arrays of this length.
CHUNK = 1 << 19

#: msaccucmp's ConstManager.FLOAT_EPSILON: float64 machine epsilon (2**-52, exact in float32).
_EPS = float(np.finfo(np.float64).eps)
_EPS32 = np.float32(_EPS)
#: msaccucmp's KL floor: float32 machine epsilon.
_KL_FLOOR = np.float32(np.finfo(np.float32).eps)
#: msaccucmp's ConstManager.MINIMUM_VALUE: StandardDeviation's mean/std under it print as 0.
_STD_ZERO = 0.001
_F32_MAX = float(np.finfo(np.float32).max)
_NAN_CELL = "NaN"
_BOOL_METRICS = ("CosineSimilarity", "RelativeEuclideanDistance")
_EMPTY_MAX = "zero-size array to reduction operation maximum which has no identity"
_BOOL_SUBTRACT = (
    "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
    "the `^` operator, or the logical_xor function instead."
)

Std = Tuple[Tuple[float, float], Tuple[float, float]]


def _format_value(value: float) -> str:
    """msaccucmp's utils.format_value: six decimals ('nan', 'inf' for those)."""
    return "{:.6f}".format(value)


def _format_std(std: Optional[Std]) -> str:
    if std is None:
        return _NAN_CELL
    (npu_mean, npu_std), (golden_mean, golden_std) = std
    return "(%.3f;%.3f),(%.3f;%.3f)" % (npu_mean, npu_std, golden_mean, golden_std)


class MetricResult(NamedTuple):
    """The ten metrics of one tensor pair.

    ``values``: every name of :data:`METRIC_NAMES` but StandardDeviation; None where msaccucmp
    prints ``NaN`` (metric not computable: its reason is in ``fail_reason``), float('nan')
    where it prints ``nan`` (a computed NaN, e.g. NaN in the data). ``std``:
    ((npu_mean, npu_std), (golden_mean, golden_std)) after msaccucmp's rounding of values
    under 0.001 to 0, or None where it prints NaN. ``fail_reason``: msaccucmp's messages
    joined by ",", "" when none. ``cells``: the ten CSV cells as msaccucmp prints them (they
    are not all derivable from ``values``: a cosine of two all-zero tensors prints "1.0");
    empty when built by hand, then :meth:`csv_cells` derives them from the values.
    ``finite``: (every NPU value is finite, every golden value is finite), found on the way
    (a NaN/Inf on the NPU side with a finite golden is a float16 overflow, for instance).
    """

    values: Dict[str, Optional[float]]
    std: Optional[Std]
    fail_reason: str
    cells: Tuple[str, ...] = ()
    finite: Tuple[bool, bool] = (True, True)

    def csv_cells(self) -> List[str]:
        """The ten metric cells, in METRIC_NAMES order, exactly as msaccucmp's CSV has them."""
        if self.cells:
            return list(self.cells)
        out = []
        for name in METRIC_NAMES:
            if name == "StandardDeviation":
                out.append(_format_std(self.std))
                continue
            value = self.values.get(name)
            out.append(_NAN_CELL if value is None else _format_value(value))
        return out


def not_compared(reason: str) -> MetricResult:
    """A row msaccucmp could not compare: every cell "NaN", ``reason`` as the fail reason."""
    values = dict((name, None) for name in METRIC_NAMES if name != "StandardDeviation")
    return MetricResult(values, None, reason, (_NAN_CELL,) * len(METRIC_NAMES))


def _is_scalar_shape(shape: Sequence[int]) -> bool:
    """msaccucmp's utils.get_shape_type rule: sum(shape) == len(shape) (so (), (1,), (1, 1))."""
    return sum(int(d) for d in shape) == len(shape)


def _flat(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).reshape(-1)


class _Workspace(object):
    """Chunk-sized scratch arrays, kept per thread and reused across calls.

    Fresh large arrays cost a page fault per 4 KiB page on first touch (about 9 ms per 4 MB
    on the benchmark VM, more than the arithmetic); reusing them keeps the metrics at memory
    speed. Size: 5 float32 + 3 float64 + 1 bool arrays of CHUNK elements (about 23 MB).
    """

    def __init__(self) -> None:
        self.f32 = [np.empty(CHUNK, np.float32) for _ in range(5)]
        self.f64 = [np.empty(CHUNK, np.float64) for _ in range(3)]
        self.mask = np.empty(CHUNK, np.bool_)


_LOCAL = threading.local()


def _workspace() -> _Workspace:
    space = getattr(_LOCAL, "space", None)
    if space is None or space.mask.size < CHUNK:
        space = _LOCAL.space = _Workspace()
    return space


def _as_f32(part: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """``part`` as float32 (msaccucmp's astype('float32')): itself if it is float32, else in ``buf``."""
    if part.dtype == np.float32:
        return part
    out = buf[:part.size]
    if part.dtype == np.float16 and part.size >= _F16_TABLE_FROM:
        # numpy's own cast, looked up: 3-7x faster (mode "wrap": every uint16 is an index, and no
        # buffered copy of ``out`` as mode "raise" makes)
        np.take(_f16_table(), part.view(np.uint16), out=out, mode="wrap")
    else:
        np.copyto(out, part, casting="unsafe")
    return out


#: float16 arrays from this many elements are widened through the table (building it: ~1 ms).
_F16_TABLE_FROM = 4096
_F16_TABLE = []  # type: List[np.ndarray]


def _f16_table() -> np.ndarray:
    """Every float16 bit pattern's float32 value, made by numpy's cast (so the lookup is bit-identical)."""
    if not _F16_TABLE:
        _F16_TABLE.append(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32))
    return _F16_TABLE[0]


def _chunks(x: np.ndarray, y: np.ndarray, space: _Workspace):
    """Yield float32 chunks of x and y; they live in ``space.f32[0:2]`` until the next one."""
    n = x.size
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        yield _as_f32(x[start:stop], space.f32[0]), _as_f32(y[start:stop], space.f32[1])


def _f32_sum(total: float) -> float:
    """A non-negative float64 sum as msaccucmp's float32 sum: inf once it passes float32's max."""
    return math.inf if total > _F32_MAX else total


class _Moments(object):
    """Running count, float64 sum, min, max and centred sum of squares of one side.

    Chunks merge with Chan et al.'s formula, so the std is as exact as numpy's two-pass one.
    """

    __slots__ = ("count", "total", "mean", "m2", "min", "max")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.mean = 0.0
        self.m2 = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, chunk32: np.ndarray, chunk64: np.ndarray, squares: float) -> None:
        """Add one chunk: float32 values, the same as float64 (may be overwritten), sum of squares."""
        n = chunk64.size
        total = float(np.add.reduce(chunk64))
        self.total += total
        self.min = min(self.min, float(np.minimum.reduce(chunk32)))
        self.max = max(self.max, float(np.maximum.reduce(chunk32)))
        if not math.isfinite(total):
            self.count += n
            return
        mean = total / n
        m2 = squares - total * mean
        if not m2 > _CANCEL * squares:  # most of sum(x^2) is the mean's: centre for an exact m2
            chunk64 -= mean
            m2 = float(np.dot(chunk64, chunk64))
        merged = self.count + n
        delta = mean - self.mean
        self.mean += delta * n / merged
        self.m2 += m2 + delta * delta * self.count * n / merged
        self.count = merged

    def mean_std(self) -> Tuple[float, float]:
        """np.mean / np.std (dtype float64): NaN std as soon as a value is not finite."""
        if self.count == 0:
            return math.nan, math.nan
        mean = self.total / self.count
        if not math.isfinite(self.total):
            return mean, math.nan
        return mean, math.sqrt(max(self.m2, 0.0) / self.count)


#: m2 = sum(x^2) - n mean^2 is used while it keeps more than this share of sum(x^2) (it then
#: loses at most ~1e-13 relative); below, the chunk is centred and m2 summed directly.
_CANCEL = 1e-3

#: Below this (and above 0) a float64 sum of squares may differ from msaccucmp's float32 one
#: because float32 squares of |v| < 1e-19 underflow: such sums are recomputed in float32.
_UNDERFLOW_SUM = 1e-20


class _Pass1(object):
    """Everything but the KL divergence, in one read of both inputs.

    Element-wise steps whose float32 rounding shows in the result (the relative errors)
    are done in float32; differences, squares and products in float64 (BLAS dot products),
    with float32 overflow reproduced on the sums and float32 underflow by a recount of the
    tiny sums (:meth:`fix_underflow`).
    """

    def __init__(self, space: _Workspace) -> None:
        self.space = space
        self.n = 0
        self.sum_xx = 0.0
        self.sum_yy = 0.0
        self.sum_xy = 0.0
        self.sum_abs = 0.0
        self.sum_sq = 0.0
        self.sum_rel = 0.0
        self.max_abs = []  # type: List[float]
        self.max_rel = []  # type: List[float]
        self.x = _Moments()
        self.y = _Moments()

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        m = x.size
        self.n += m
        space = self.space
        rel = _relative_errors(x, y, space.f32[2][:m], space.f32[3][:m], space.mask[:m])
        self.max_rel.append(float(np.maximum.reduce(rel)))
        self.sum_rel += float(np.add.reduce(rel, dtype=np.float64))
        x64, y64, diff = (buf[:m] for buf in space.f64)
        np.copyto(x64, x)
        np.copyto(y64, y)
        xx = float(np.dot(x64, x64))
        yy = float(np.dot(y64, y64))
        self.sum_xx += xx
        self.sum_yy += yy
        self.sum_xy += float(np.dot(x64, y64))
        np.subtract(x64, y64, out=diff)
        self.sum_sq += float(np.dot(diff, diff))
        np.abs(diff, out=diff)
        self.max_abs.append(float(np.maximum.reduce(diff)))
        self.sum_abs += float(np.add.reduce(diff))
        self.x.add(x, x64, xx)
        self.y.add(y, y64, yy)

    def fix_underflow(self, x: np.ndarray, y: np.ndarray) -> None:
        """Recount sums of squares that are tiny with float32 squares, as msaccucmp has them."""
        names = [name for name in ("sum_xx", "sum_yy", "sum_sq") if 0 < getattr(self, name) < _UNDERFLOW_SUM]
        if not names:
            return
        sums = dict((name, 0.0) for name in names)
        for xc, yc in _chunks(x, y, self.space):
            parts = {"sum_xx": (xc, xc), "sum_yy": (yc, yc), "sum_sq": (xc - yc,) * 2}
            for name in names:
                left, right = parts[name]
                sums[name] += float(np.add.reduce(left * right, dtype=np.float64))
        for name in names:
            setattr(self, name, sums[name])


def _relative_errors(x: np.ndarray, y: np.ndarray, out: np.ndarray, scratch: np.ndarray,
                     mask: np.ndarray) -> np.ndarray:
    """|x/y - 1| in float32 where |y| > eps, else 0 (NaN golden values count as 0), in ``out``."""
    np.divide(x, y, out=out)
    np.subtract(out, np.float32(1), out=out)
    np.abs(out, out=out)
    np.abs(y, out=scratch)
    if np.minimum.reduce(scratch) > _EPS32:  # no |y| <= eps and no NaN (the common case): nothing to zero
        return out
    np.greater(scratch, _EPS32, out=mask)
    np.logical_not(mask, out=mask)
    np.copyto(out, np.float32(0), where=mask)
    return out


def _f32_max(value: float) -> float:
    """A float64 |x - y| as msaccucmp's float32 one: inf past float32's max."""
    return math.inf if value > _F32_MAX else value


def _nan_max(maxima: List[float]) -> float:
    """np.max over chunk maxima: NaN wins, as in one np.max over the whole array."""
    if any(math.isnan(v) for v in maxima):
        return math.nan
    return max(maxima)


def _cosine(sums: Tuple[float, float, float], finite: bool, scalar: bool, npu_file: str,
            golden_file: str) -> Tuple[Optional[float], str, str]:
    """(value, cell, message) of CosineSimilarity from sum(x*x), sum(y*y), sum(x*y).

    ``finite``: no NaN/Inf in the data (decides a cosine whose float32 norm overflowed).
    """
    if scalar:
        return 1.0, _format_value(1), "This tensor is scalar."
    sum_xx, sum_yy, sum_xy = sums
    norm_x = math.sqrt(_f32_sum(sum_xx)) if not math.isnan(sum_xx) else math.nan
    norm_y = math.sqrt(_f32_sum(sum_yy)) if not math.isnan(sum_yy) else math.nan
    zero = _cosine_zero_message(norm_x, norm_y, npu_file, golden_file)
    if zero is not None:
        return zero
    if math.isnan(norm_x) or math.isnan(norm_y):
        value = math.nan
    elif math.isinf(norm_x) or math.isinf(norm_y):
        # msaccucmp divides by the overflowed norm first: finite/inf = 0, inf/inf = NaN.
        value = 0.0 if finite else math.nan
    else:
        value = sum_xy / (norm_x * norm_y)
    if not math.isnan(value):
        value = min(value, 1.0)
    return value, _format_value(value), ""


def _cosine_zero_message(norm_x: float, norm_y: float, npu_file: str, golden_file: str):
    """msaccucmp's all-zero branches of CosineSimilarity, or None when neither applies."""
    if norm_x <= _EPS and norm_y < _EPS:
        return 1.0, "1.0", ""
    if norm_x ** 0.5 <= _EPS:
        return None, _NAN_CELL, "Cannot compare by Cosine Similarity. All the data is zero in " + npu_file + "."
    if norm_y ** 0.5 <= _EPS:
        return None, _NAN_CELL, "Cannot compare by Cosine Similarity. All the data is zero in " + golden_file + "."
    return None


def _red(acc: _Pass1) -> float:
    """RelativeEuclideanDistance: 0 when sqrt(sum y^2) <= eps, else sqrt(sum d^2 / sum y^2)."""
    golden = _f32_sum(acc.sum_yy) if not math.isnan(acc.sum_yy) else math.nan
    if golden ** 0.5 <= _EPS:
        return 0.0
    diff = _f32_sum(acc.sum_sq) if not math.isnan(acc.sum_sq) else math.nan
    if math.isinf(golden):
        ratio = math.nan if math.isinf(diff) else 0.0
    else:
        ratio = diff / golden
    return math.sqrt(ratio) if not math.isnan(ratio) else math.nan


def _mean_of_sum(total: float, n: int) -> float:
    if n == 0:
        return math.nan
    return _f32_sum(total) / n if not math.isnan(total) else math.nan


def _std_pair(moments: _Moments) -> Tuple[float, float]:
    mean, std = moments.mean_std()
    return (0.0 if abs(mean) < _STD_ZERO else mean, 0.0 if abs(std) < _STD_ZERO else std)


def _kl_bounds(minimum: float, maximum: float) -> Tuple[np.float32, np.float32]:
    """(offset, range) of msaccucmp's min-max normalisation, in float32; range 0 = none."""
    low = np.float32(minimum)
    spread = np.float32(np.float32(maximum) - low)
    return low, spread


def _kl_normalised(chunk: np.ndarray, low: np.float32, spread: np.float32, out: np.ndarray,
                   mask: np.ndarray) -> np.ndarray:
    """msaccucmp's _normalized: (v - min) / (max - min) (v itself when max == min), floored at eps32."""
    if spread != 0:
        np.subtract(chunk, low, out=out)
        np.divide(out, spread, out=out)
    else:
        np.copyto(out, chunk)
    # np.maximum(out, floor) without its cost (a slow loop on numpy 1.18): few values are below
    # the floor, NaN stays NaN either way
    below = np.less(out, _KL_FLOOR, out=mask)
    if below.any():
        np.copyto(out, _KL_FLOOR, where=below)
    return out


def _kl(x: np.ndarray, y: np.ndarray, acc: _Pass1, golden_file: str) -> Tuple[float, str]:
    """KullbackLeiblerDivergence (second read of both inputs): (value, message)."""
    if not (math.isfinite(acc.x.total) and math.isfinite(acc.y.total)):
        return math.nan, ""  # a NaN or Inf turns every normalised value into NaN
    x_low, x_spread = _kl_bounds(acc.x.min, acc.x.max)
    y_low, y_spread = _kl_bounds(acc.y.min, acc.y.max)
    if x_spread == 0 and y_spread == 0 and _f32_sum(acc.n * max(abs(acc.x.max), abs(acc.y.max))) < math.inf:
        return 0.0, ""  # two constant tensors: both distributions are uniform
    space = acc.space
    sum_p = sum_q = weighted = 0.0
    for xc, yc in _chunks(x, y, space):
        m = xc.size
        p = _kl_normalised(xc, x_low, x_spread, space.f32[2][:m], space.mask[:m])
        q = _kl_normalised(yc, y_low, y_spread, space.f32[3][:m], space.mask[:m])
        sum_p += float(np.add.reduce(p, dtype=np.float64))
        sum_q += float(np.add.reduce(q, dtype=np.float64))
        np.divide(p, q, out=q)  # float32 ratio and log, as msaccucmp's
        np.log(q, out=q)
        np.multiply(q, p, out=q)
        weighted += float(np.add.reduce(q, dtype=np.float64))
    if _f32_sum(sum_p) == math.inf:
        return math.nan, ""  # every p/sum(p) is 0 in float32: 0 * log(0) terms
    if _f32_sum(sum_q) == math.inf:
        value = math.inf  # every q/sum(q) is 0: log(p/0)
    else:
        # sum(p/P * log((p/P) / (q/Q))) = sum(p log(p/q)) / P + log(Q/P)
        value = weighted / sum_p + math.log(sum_q / sum_p)
    if abs(value) < _EPS:
        value = 0.0
    message = ""
    if value == math.inf:
        message = "Cannot compare by KL Divergence. The data contains 0 in %r." % golden_file
    return value, message


def _empty_failure(name: str) -> str:
    return "Failed to execute 'compare' in '%s'. %s" % (name, _EMPTY_MAX)


def _numeric(x: np.ndarray, y: np.ndarray, scalar: bool, npu_file: str, golden_file: str) -> MetricResult:
    acc = _Pass1(_workspace())
    with np.errstate(all="ignore"):
        if x.size <= CHUNK:  # one chunk: cast once for both reads
            x = _as_f32(x, acc.space.f32[0])
            y = _as_f32(y, acc.space.f32[1])
        for xc, yc in _chunks(x, y, acc.space):
            acc.add(xc, yc)
        acc.fix_underflow(x, y)
        finite = math.isfinite(acc.x.total) and math.isfinite(acc.y.total)
        cos_value, cos_cell, cos_message = _cosine(
            (acc.sum_xx, acc.sum_yy, acc.sum_xy), finite, scalar, npu_file, golden_file)
        values = {"CosineSimilarity": cos_value}  # type: Dict[str, Optional[float]]
        messages = {"CosineSimilarity": cos_message}
        empty = acc.n == 0
        values["MaxAbsoluteError"] = None if empty else _f32_max(_nan_max(acc.max_abs))
        values["AccumulatedRelativeError"] = _f32_sum(acc.sum_rel) if not math.isnan(acc.sum_rel) else math.nan
        values["RelativeEuclideanDistance"] = _red(acc)
        if empty:
            values["KullbackLeiblerDivergence"] = None
        else:
            values["KullbackLeiblerDivergence"], messages["KullbackLeiblerDivergence"] = _kl(x, y, acc, golden_file)
        values["MeanAbsoluteError"] = _mean_of_sum(acc.sum_abs, acc.n)
        sq_mean = _mean_of_sum(acc.sum_sq, acc.n)
        values["RootMeanSquareError"] = math.sqrt(sq_mean) if not math.isnan(sq_mean) else math.nan
        values["MaxRelativeError"] = None if empty else _nan_max(acc.max_rel)
        values["MeanRelativeError"] = _mean_of_sum(acc.sum_rel, acc.n)
    if empty:
        for name in ("MaxAbsoluteError", "KullbackLeiblerDivergence", "MaxRelativeError"):
            messages[name] = _empty_failure(name)
    std = (_std_pair(acc.x), _std_pair(acc.y))
    cells = []
    for name in METRIC_NAMES:
        if name == "CosineSimilarity":
            cells.append(cos_cell)
        elif name == "StandardDeviation":
            cells.append(_format_std(std))
        else:
            value = values[name]
            cells.append(_NAN_CELL if value is None else _format_value(value))
    reason = ",".join(messages[name] for name in METRIC_NAMES if messages.get(name))
    # a float64 sum of float32 values cannot overflow: it is finite exactly when every value is
    finite_sides = (math.isfinite(acc.x.total), math.isfinite(acc.y.total))
    return MetricResult(values, std, reason, tuple(cells), finite_sides)


def _boolean(x: np.ndarray, y: np.ndarray, scalar: bool, npu_file: str, golden_file: str) -> MetricResult:
    """Both sides bool: msaccucmp computes only CosineSimilarity and RelativeEuclideanDistance."""
    count_x = int(np.count_nonzero(x))
    count_y = int(np.count_nonzero(y))
    both = _workspace().mask
    count_xy = 0
    for start in range(0, x.size, CHUNK):
        part = np.logical_and(x[start:start + CHUNK], y[start:start + CHUNK], out=both[:min(CHUNK, x.size - start)])
        count_xy += int(np.count_nonzero(part))
    values = {}  # type: Dict[str, Optional[float]]
    cells = []
    messages = []
    for name in METRIC_NAMES:
        if name == "CosineSimilarity":
            sums = (float(count_x), float(count_y), float(count_xy))
            value, cell, message = _cosine(sums, True, scalar, npu_file, golden_file)
        elif name == "RelativeEuclideanDistance" and count_y ** 0.5 <= _EPS:
            value, cell, message = 0.0, _format_value(0.0), ""
        elif name == "RelativeEuclideanDistance":
            value, cell, message = None, _NAN_CELL, "Failed to execute 'compare' in '%s'. %s" % (name, _BOOL_SUBTRACT)
        else:
            value, cell = None, _NAN_CELL
            message = "Algorithm %s does not support Boolean types." % name
        if name != "StandardDeviation":
            values[name] = value
        cells.append(cell)
        if message:
            messages.append(message)
    return MetricResult(values, None, ",".join(messages), tuple(cells))


def compute_metrics(npu: np.ndarray, golden: np.ndarray, npu_file: str = "", golden_file: str = "") -> MetricResult:
    """The ten msaccucmp metrics of ``npu`` against ``golden``.

    Both arrays hold the same number of elements (the NPU tensor already converted to the
    original shape; its shape decides msaccucmp's "scalar" rule, sum(shape) == len(shape)).
    Any bool/int/float dtype: cast to float32 chunk by chunk (float16 widened), unless both
    are bool (then only CosineSimilarity and RelativeEuclideanDistance are computed, as in
    msaccucmp). ``npu_file``/``golden_file`` are the paths msaccucmp names in its messages
    (the NPU dump file, the golden .npy). Never raises for NaN/Inf/zeros/scalars/empty
    tensors; raises OptionError only when the element counts differ.
    """
    x = _flat(npu)
    y = _flat(golden)
    if x.size != y.size:
        raise OptionError("golden", tuple(np.shape(golden)),
                          "must hold as many elements as the NPU tensor {} ({} vs {})".format(
                              tuple(np.shape(npu)), y.size, x.size))
    scalar = _is_scalar_shape(np.shape(npu))
    if x.dtype == np.bool_ and y.dtype == np.bool_:
        return _boolean(x, y, scalar, npu_file, golden_file)
    return _numeric(x, y, scalar, npu_file, golden_file)
