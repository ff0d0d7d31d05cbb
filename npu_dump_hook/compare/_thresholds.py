"""Thresholds a compared row must stay within, and how a row's metrics are checked against them.

A row *breaches* when any enabled threshold is crossed (a metric that is None -- msaccucmp's
NaN, e.g. the cosine of two all-zero tensors -- is not checked; a NaN or infinite one breaches)::

    CosineSimilarity          <  cosine_min         (default 0.99)   direction
    MagnitudeError            >  magnitude_err_max  (default 0.01)   size
    RelativeEuclideanDistance >  rel_euclid_max     (default None: off)
    MaxRelativeError          >  max_rel_err        (default None: off)
    MeanRelativeError         >  mean_rel_err       (default None: off)

MagnitudeError is derived from two msaccucmp metrics, not computed on the tensors: with
cosine c and relative Euclidean distance d = ||x - y|| / ||y||, and r = ||x|| / ||y||,
d^2 = r^2 - 2 r c + 1, so ``sqrt(max(0, d^2 - (1 - c^2)))`` is the part of d the angle does
not explain, |r - 1| up to (1 - c) (:func:`magnitude_error`; d alone when c is NaN).

How the defaults were measured (float16 mixed precision must pass, a 5% scale fault must
fail) is in docs/compare.md, "Thresholds". In short: a scale leaves the cosine at 1.0 and
puts the magnitude error at 0.05; float16 rounding that flips an argmax (MaxPoolGrad routes a
gradient to another element of its window) moves direction, not size (relative Euclidean
distance 0.027, magnitude error under 0.001 on the emulator's CNN); the two relative errors
are dominated by elements whose golden value is near zero, so propagated float16 reaches a
mean of 2 and a max of 1.7e4 on healthy tensors.
"""
import math
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ..errors import OptionError

__all__ = ["Thresholds", "DEFAULT_THRESHOLDS", "breaches", "severity", "make_thresholds", "magnitude_error",
           "checked_values", "checks_row", "PRECISION_CLASSES", "op_precision", "Extent", "cancellation_excess",
           "UNIT_ROUNDOFF"]


class Thresholds(NamedTuple):
    """Limits per row; None disables one. ``check_scalars``: also check one-element tensors
    (off by default: see :func:`checks_row`)."""

    cosine_min: Optional[float] = 0.99
    magnitude_err_max: Optional[float] = 0.01
    rel_euclid_max: Optional[float] = None
    max_rel_err: Optional[float] = None
    mean_rel_err: Optional[float] = None
    check_scalars: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return dict(self._asdict())

    def describe(self) -> str:
        """One line for the terminal summary."""
        on, off = [], []
        for key, label, sign in _CHECKS_TEXT:
            value = getattr(self, key)
            if value is None:
                off.append(label)
            else:
                on.append("{} {} {:g}".format(label, sign, value))
        if not self.check_scalars:
            off.append("scalars")
        return (", ".join(on) or "none") + (" (off: {})".format(", ".join(off)) if off else "")


def checks_row(element_count: int, thresholds: "Thresholds") -> bool:
    """Whether a compared tensor of ``element_count`` elements is checked against the limits.

    One-element tensors are not, unless ``check_scalars``: msaccucmp gives them no cosine
    ("This tensor is scalar."), so only their relative error is left, and a scalar is most
    often a reduction (a loss, the gradient of a scale) whose terms cancel, where float16
    rounding of correct inputs gives any relative error at all (1.2% seen on the emulator's
    MLP under TF 1.15, inputs within 1e-4). A real fault upstream shows in the tensors
    before it; overflow (Inf/NaN) is still called out for scalars.
    """
    return thresholds.check_scalars or element_count != 1


DEFAULT_THRESHOLDS = Thresholds()

# (threshold field, metric, True when a value below the limit breaches)
_CHECKS = (
    ("cosine_min", "CosineSimilarity", True),
    ("magnitude_err_max", "MagnitudeError", False),
    ("rel_euclid_max", "RelativeEuclideanDistance", False),
    ("max_rel_err", "MaxRelativeError", False),
    ("mean_rel_err", "MeanRelativeError", False),
)
_CHECKS_TEXT = (("cosine_min", "cosine", ">="), ("magnitude_err_max", "magnitude", "<="),
                ("rel_euclid_max", "rel. euclidean", "<="),
                ("max_rel_err", "max rel. err", "<="), ("mean_rel_err", "mean rel. err", "<="))


def make_thresholds(value: object = None, **overrides: Optional[float]) -> Thresholds:
    """A :class:`Thresholds` from None (defaults), a Thresholds, or a mapping of its fields,
    with ``overrides`` applied; OptionError for unknown keys and values that are not finite
    numbers >= 0 (cosine_min also <= 1)."""
    if value is None:
        fields = DEFAULT_THRESHOLDS.as_dict()
    elif isinstance(value, Thresholds):
        fields = value.as_dict()
    elif isinstance(value, dict):
        unknown = sorted(set(value) - set(Thresholds._fields))
        if unknown:
            raise OptionError("thresholds", unknown, "unknown key(s); known: " + ", ".join(Thresholds._fields))
        fields = DEFAULT_THRESHOLDS.as_dict()
        fields.update(value)
    else:
        raise OptionError("thresholds", value, "must be None, a Thresholds or a dict of its fields")
    fields.update({k: v for k, v in overrides.items() if v is not None})
    for key, limit in fields.items():
        if key == "check_scalars":
            if not isinstance(limit, bool):
                raise OptionError(key, limit, "must be True or False")
            continue
        if limit is None:
            continue
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit < 0:
            raise OptionError(key, limit, "must be a finite number >= 0 (or None to turn it off)")
        if key == "cosine_min" and limit > 1:
            raise OptionError(key, limit, "a cosine similarity is at most 1")
        fields[key] = float(limit)
    return Thresholds(**fields)


def magnitude_error(values: Dict[str, Optional[float]]) -> Optional[float]:
    """sqrt(max(0, d^2 - (1 - c^2))) from RelativeEuclideanDistance d and CosineSimilarity c
    (module doc); d when c is None (not computable); None when d is."""
    distance = values.get("RelativeEuclideanDistance")
    if distance is None:
        return None
    cosine = values.get("CosineSimilarity")
    if cosine is None or math.isnan(cosine) or math.isnan(distance) or math.isinf(distance):
        return distance
    cosine = min(1.0, max(-1.0, cosine))
    return math.sqrt(max(0.0, distance * distance - (1.0 - cosine * cosine)))


def checked_values(values: Dict[str, Optional[float]]) -> Dict[str, Optional[float]]:
    """The metrics with MagnitudeError added (what the thresholds are checked against)."""
    found = dict(values)
    found["MagnitudeError"] = magnitude_error(values)
    return found


def breaches(values: Dict[str, Optional[float]], thresholds: Thresholds) -> List[str]:
    """Names of the metrics of ``values`` that cross their threshold (empty: within)."""
    values = checked_values(values)
    crossed = []
    for key, metric, below in _CHECKS:
        limit = getattr(thresholds, key)
        value = values.get(metric)
        if limit is None or value is None:
            continue
        if math.isnan(value) or (value < limit if below else value > limit):
            crossed.append(metric)
    return crossed


def severity(values: Dict[str, Optional[float]], thresholds: Thresholds) -> float:
    """How far a row is from passing: the largest metric/threshold ratio (>1 breaches;
    cosine counts as (1 - cos) / (1 - cosine_min)). Used to rank the worst rows."""
    values = checked_values(values)
    worst = 0.0
    for key, metric, below in _CHECKS:
        limit = getattr(thresholds, key)
        value = values.get(metric)
        if limit is None or value is None:
            continue
        if math.isnan(value):
            return math.inf
        if below:
            gap, allowed = 1.0 - value, 1.0 - limit
        else:
            gap, allowed = value, limit
        ratio = gap / allowed if allowed > 0 else (math.inf if gap > 0 else 0.0)
        worst = max(worst, ratio)
    return worst


# Expected precision per op class (docs/compare.md, "Expected precision per op class"): how far
# a healthy op's output may be from its golden tensor, relative to the error its inputs carry.
# A breaching row whose relative Euclidean distance is at most ``factor`` times the largest one
# upstream of it is explained by what it inherits (propagated, not a root cause); ``None``:
# any inherited error explains it. Calibrated on the emulator's ascend profile
# (benchmarks/compare_op_precision.py): worst healthy ratio per class, with a margin, and
# well below what a 1.03-1.05 scale fault on a fused convolution shows (its inputs carry
# forward float16 rounding only, the fault adds 0.03-0.05: ratios of 20 and more).
PRECISION_CLASSES = {
    # element-wise ops, layout/dtype conversions, inputs: the error passes through unchanged
    "elementwise": 1.0,
    # sums over many terms (bias/filter/input gradients, matrix products, Sum/Mean): terms of
    # both signs cancel, so the same absolute error is a larger relative error of the sum
    "reduction": 2.0,
    # squares of a gradient (Adam's v, RMSProp's ms, Adagrad's accumulator): the relative error
    # doubles, and the largest elements, which dominate the norm, weigh it further
    "second_moment": 4.0,
    # ops whose output elements are copies of some of their input elements (Select, Relu,
    # MaxPool, Slice, Gather...): the error passes through unchanged, but a subset's relative
    # error can be far above the whole input's (a Select keeping one tiny logit of a batch among
    # zeros: float16's 1e-4 on the logits is 10% of that logit), while its absolute error
    # cannot exceed what the selected elements carry; so a selection is also explained by
    # absolute error (docs/compare.md, "Selections")
    "selection": 1.0,
    # an element decided by the sign of an input: Adam's first update is lr * m / sqrt(v) =
    # lr * sign(gradient), ReluGrad passes a gradient where its feature is > 0, MaxPoolGrad
    # where it is its window's maximum; float16 noise on a value near the decision flips whole
    # elements whatever the noise's size (an Adam op's m and v outputs still show a kernel
    # fault of the op, the gradient ops' consumers the fault of theirs)
    "sign_sensitive": None,
}  # type: Dict[str, Optional[float]]

_REDUCTIONS = ("BiasAddGrad", "Sum", "ReduceSum", "ReduceSumD", "Mean", "ReduceMean", "ReduceMeanD", "L2Loss",
               "MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
               "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropFilterD", "Conv2DBackpropInput",
               "Conv2DBackpropInputD", "Conv2DTranspose", "Conv2DTransposeD", "DepthwiseConv2D",
               "DepthwiseConv2dNative", "DepthwiseConv2DBackpropFilter", "DepthwiseConv2DBackpropFilterD",
               "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2DBackpropInput",
               "DepthwiseConv2DBackpropInputD", "DepthwiseConv2dNativeBackpropInput", "Conv3D",
               "Conv3DBackpropFilter", "Conv3DBackpropFilterD", "Conv3DBackpropFilterV2", "Conv3DBackpropInput",
               "Conv3DBackpropInputD", "Conv3DBackpropInputV2", "BNTrainingReduce", "BNTrainingUpdateGrad",
               "FusedBatchNormGrad", "FusedBatchNormGradV3", "BNTrainingReduceGrad")
#: Adam-family update ops: output 0 (var) is sign-sensitive, the second moment its output 2
_ADAM = ("ApplyAdam", "ApplyAdamD", "ResourceApplyAdam", "ApplyAdamWithAmsgrad", "ResourceApplyAdamWithAmsgrad",
         "ApplyAdaMax", "ApplyAdaMaxD", "ResourceApplyAdaMax")
#: RMSProp-family: var (0) sign-sensitive at first steps, ms (1) a second moment
_RMSPROP = ("ApplyRMSProp", "ApplyRMSPropD", "ResourceApplyRMSProp", "ApplyCenteredRMSProp",
            "ResourceApplyCenteredRMSProp")
_ADAGRAD = ("ApplyAdagrad", "ApplyAdagradD", "ResourceApplyAdagrad", "ApplyAdagradV2", "ApplyAdagradV2D")
_SQUARES = ("Square", "SquareSumV1", "SquareSumV2")
#: Ops whose output elements are some of their (data) input elements, or clamped ones (Relu6, a
#: clip), or smaller ones (LeakyRelu's negatives times alpha < 1): each output element's error is at
#: most that of the input element it comes from
_SELECTIONS = ("Select", "SelectV2", "Relu", "Relu6", "LeakyRelu", "ClipByValue", "Maximum", "Minimum",
               "MaxPool", "MaxPoolV2", "MaxPoolV3", "MaxPool3D", "MaxPoolWithArgmax", "Slice", "SliceD",
               "StridedSlice", "StridedSliceD", "Gather", "GatherV2", "GatherV2D", "GatherNd", "ResourceGather",
               "Split", "SplitD", "SplitV", "SplitVD", "Unpack", "TopK", "TopKV2", "TopKD")
_GATES = ("ReluGrad", "ReluGradV2", "Relu6Grad", "LeakyReluGrad", "MaxPoolGrad", "MaxPoolGradWithArgmax",
          "MaxPoolV3Grad", "MaxPoolGradV2", "MaxPool3DGrad")


#: Reductions that multiply two operands (a dot product per output element): C = A . B
_BILINEAR = frozenset(t for t in _REDUCTIONS if "MatMul" in t or "Conv" in t)
#: ... with leading batch dims (the output's all but its last two)
_BATCHED = frozenset(t for t in _BILINEAR if t.startswith("BatchMatMul"))
#: Reductions that sum one operand's terms (Mean: the sum over the count)
_SUMS = frozenset(("BiasAddGrad", "Sum", "ReduceSum", "ReduceSumD"))
_MEANS = frozenset(("Mean", "ReduceMean", "ReduceMeanD"))


#: Largest relative error of rounding to a dtype (round to nearest: half its machine epsilon).
#: A selection that runs in float16 on float32 input adds its output's rounding to what it
#: inherits (allow_fp32_to_fp16): at most this times its golden norm.
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24,
                 "float64": 2.0 ** -53}  # type: Dict[str, float]


class Extent(NamedTuple):
    """A golden tensor's size: ``count`` elements, Frobenius ``norm``, ``shape``."""

    count: int
    norm: float
    shape: Tuple[int, ...] = ()


def _known(extent: Extent) -> bool:
    return extent.count > 0 and extent.norm > 0 and math.isfinite(extent.norm)


def cancellation_excess(op_type: str, output: Extent, operands: List[Extent]) -> Optional[float]:
    """How much more a reduction's output ``output`` cancels than a sum of random-signed terms
    would, from the golden norms of its ``operands`` (its upstream rows): about 1 without
    cancellation, large with it, below 1 when the terms agree in sign; None when unknown
    (another op type, a norm missing, too few operands).

    Relative float16 errors of the inputs are random-like and add in quadrature: a product
    C = A . B contracting K terms per element takes ||dA . B|| ~ ||dA|| ||B|| / sqrt(K), so its
    relative error is the inputs' times ``||A|| ||B|| / (sqrt(K) ||C||)`` (the Frobenius bound
    ``(e_A + e_B) ||A|| ||B|| / ||C||`` is loose by sqrt(K) for such errors). K is
    ``sqrt(|A| |B| / |C|)`` (element counts: exact for a matrix product however transposed,
    K / sqrt(kh kw) for a kh x kw convolution and its backprops, which errs on the lenient side);
    a batched product has ``|C| / (m n)`` products of K terms each. A sum of one operand x (BiasAddGrad, Sum)
    is the product with a vector of ones: ``||x|| / ||C||`` (a mean's output times its count).
    The operands are the two largest upstream tensors (a fused bias is the smallest).
    """
    if not _known(output):
        return None
    known = sorted((e for e in operands if _known(e)), key=lambda e: e.count, reverse=True)
    if op_type in _BILINEAR and len(known) >= 2:
        a, b = known[0], known[1]
        batch = 1
        if op_type in _BATCHED and len(output.shape) > 2 and output.shape[-1] * output.shape[-2] > 0:
            batch = max(1, output.count // (output.shape[-1] * output.shape[-2]))
        terms = math.sqrt(float(a.count) * b.count * batch / output.count)  # batch * K
        return a.norm * b.norm / (math.sqrt(max(terms, 1.0)) * output.norm)
    if (op_type in _SUMS or op_type in _MEANS) and known:
        x = known[0]
        norm = output.norm * (float(x.count) / output.count if op_type in _MEANS else 1.0)
        return x.norm / norm
    return None


def _output_class(op_type: str, slot: int) -> str:
    if op_type in _REDUCTIONS:
        return "reduction"
    if op_type in _GATES:
        return "sign_sensitive"
    if op_type in _SELECTIONS:
        return "selection"
    if op_type in _ADAM:
        return "sign_sensitive" if slot == 0 else ("second_moment" if slot == 2 else "elementwise")
    if op_type in _RMSPROP:
        return "sign_sensitive" if slot == 0 else ("second_moment" if slot == 1 else "elementwise")
    if op_type in _ADAGRAD:
        return "second_moment" if slot == 1 else "elementwise"
    return "second_moment" if op_type in _SQUARES else "elementwise"


def op_precision(op_type: str, direction: str, slot: int) -> Tuple[str, Optional[float]]:
    """(class, factor) of :data:`PRECISION_CLASSES` for output ``slot`` of an op of GE type
    ``op_type`` (an input row is its producer's output seen again: "elementwise")."""
    klass = "elementwise" if direction == "input" else _output_class(op_type, slot)
    return klass, PRECISION_CLASSES[klass]
