"""The reduction class is data-aware: a matrix product whose terms cancel amplifies the float16
error of its inputs by its cancellation excess ||A|| ||B|| / (sqrt(K) ||C||), and that is
explained, while a scale fault on a product that does not cancel is still a root cause
(docs/compare.md, "Expected precision per op class"; issue #24: the healthy GAN's
``MatMul_grad/MatMul`` with ratio 2.8 against the reduction factor 2)."""
import math

import numpy as np
import pytest

from npu_dump_hook.compare import PRECISION_CLASSES, compare
from npu_dump_hook.compare._thresholds import Extent, cancellation_excess

from helpers.compare_synth import Synth

M, K, N = 4, 64, 8


def _operands(rng, cancel):
    """A (M x K), B (K x N) and their product C = A B; ``cancel``: the share of B in A's row space
    removed (C shrinks by 1 - cancel while B barely does: the terms of every dot product cancel)."""
    a = rng.standard_normal((M, K))
    b = rng.standard_normal((K, N))
    projector = a.T @ np.linalg.solve(a @ a.T, a)  # onto A's row space (M of K dims)
    b = b - cancel * projector @ b
    return a, b


def _product_chain(synth, prefix, a, b, noise, rng, scale=1.0):
    """``prefix``/a (NPU: A with relative noise ``noise``), ``prefix``/b (exact on the NPU, a
    float32 weight), ``prefix``/mm = a . b (MatMulV2; the NPU's from its noisy A, times ``scale``)."""
    a_npu = a + noise * np.linalg.norm(a) / math.sqrt(a.size) * rng.standard_normal(a.shape)
    synth.op(prefix + "/a", "Mul", a.astype(np.float32), npu=a_npu.astype(np.float32))
    synth.op(prefix + "/b", "Mul", b.astype(np.float32))
    synth.op(prefix + "/mm", "MatMulV2", (a @ b).astype(np.float32), inputs=[prefix + "/a:0", prefix + "/b:0"],
             npu=(scale * (a_npu @ b)).astype(np.float32))


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    rng = np.random.default_rng(24)
    synth = Synth(tmp_path_factory.mktemp("cancel"))
    _product_chain(synth, "cancel", *_operands(rng, 0.7), noise=0.05, rng=rng)  # healthy, cancelling
    _product_chain(synth, "plain", *_operands(rng, 0.0), noise=0.05, rng=rng)  # healthy, no cancellation
    _product_chain(synth, "fault", *_operands(rng, 0.0), noise=0.01, rng=rng, scale=1.05)  # a 5% kernel fault
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    return result, {r["npu_op"]: r for r in result.doc["rows"]}


def _ratio(rows, prefix):
    own = rows[prefix + "/mm"]["metrics"]["RelativeEuclideanDistance"]
    return own / rows[prefix + "/a"]["metrics"]["RelativeEuclideanDistance"]


def test_a_cancelling_product_amplifies_its_inputs_error_and_is_explained(products):
    result, rows = products
    assert rows["cancel/a"]["status"] == "ok" and rows["cancel/b"]["metrics"]["RelativeEuclideanDistance"] == 0
    assert rows["cancel/mm"]["breached"] and rows["cancel/mm"]["precision_class"] == "reduction"
    # beyond the flat reduction factor (the rule before: a root cause on a healthy run) ...
    assert _ratio(rows, "cancel") > 1.4 * PRECISION_CLASSES["reduction"]
    # ... and what its cancellation explains: the row's allowance (factor x excess) covers the ratio
    assert rows["cancel/mm"]["precision_allowance"] >= _ratio(rows, "cancel")
    assert rows["cancel/mm"]["status"] == "propagated", result.summary_text()


def test_a_scale_fault_on_a_product_that_does_not_cancel_is_the_only_root_cause(products):
    result, rows = products
    assert _ratio(rows, "plain") < PRECISION_CLASSES["reduction"]  # healthy without cancellation: about 1
    assert rows["fault/mm"]["status"] == "root_cause"
    factor = PRECISION_CLASSES["reduction"]
    assert factor <= rows["fault/mm"]["precision_allowance"] < 1.5 * factor  # excess about 1
    assert _ratio(rows, "fault") > rows["fault/mm"]["precision_allowance"]
    assert rows["fault/a"]["precision_allowance"] == 1.0  # element-wise
    assert [result.doc["rows"][i]["npu_op"] for i in result.doc["root_causes"]] == ["fault/mm"]
    assert result.doc["first_divergence"]["npu_op"] == "fault/mm" and result.exit_code == 1


def test_the_excess_is_about_one_without_cancellation_and_grows_with_it():
    rng = np.random.default_rng(3)
    for cancel, low, high in ((0.0, 0.7, 1.4), (0.9, 6.0, 14.0)):
        a, b = _operands(rng, cancel)
        c = a @ b
        excess = cancellation_excess("MatMulV2", _extent(c), [_extent(a), _extent(b), _extent(np.ones(N))])
        assert low < excess < high, (cancel, excess)
        # a matrix product however transposed: the same contraction length from the element counts
        assert cancellation_excess("MatMul", _extent(c.T), [_extent(b.T), _extent(a.T)]) == pytest.approx(excess)


def test_a_batched_product_counts_its_batch_and_sums_take_their_one_operand():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, M, K)), rng.standard_normal((6, K, N))
    assert 0.7 < cancellation_excess("BatchMatMulV2", _extent(a @ b), [_extent(a), _extent(b)]) < 1.4
    x = rng.standard_normal((256, 8))
    assert 0.7 < cancellation_excess("BiasAddGrad", _extent(x.sum(axis=0)), [_extent(x)]) < 1.4
    assert cancellation_excess("Mean", _extent(x.mean(axis=0)), [_extent(x)]) == pytest.approx(
        cancellation_excess("Sum", _extent(x.sum(axis=0)), [_extent(x)]))
    positive = np.abs(x)  # terms of one sign: no cancellation at all
    assert cancellation_excess("Sum", _extent(positive.sum(axis=0)), [_extent(positive)]) < 0.2


def test_unknown_norms_or_other_ops_keep_the_flat_factor():
    c, a = Extent(8, 1.0, (8,)), Extent(64, 4.0, (8, 8))
    assert cancellation_excess("MatMulV2", c, [a]) is None  # one operand known
    assert cancellation_excess("MatMulV2", c, [a, Extent(64, -1.0)]) is None  # a norm unknown
    assert cancellation_excess("MatMulV2", Extent(8, 0.0), [a, a]) is None  # an all-zero output
    assert cancellation_excess("L2Loss", c, [a]) is None
    assert cancellation_excess("Add", c, [a, a]) is None


def _extent(array):
    array = np.asarray(array, np.float64)
    return Extent(array.size, float(np.linalg.norm(array.ravel())), array.shape)
