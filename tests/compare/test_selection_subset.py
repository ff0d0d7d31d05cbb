"""A selection (Select, Relu, MaxPool, Slice, Gather...) keeps some of its input's elements, so
its relative error can be far above its input's while its absolute error is not: such a row is
explained by the absolute error it inherits (docs/compare.md, "Selections").

Found in CI (ee0b453, TF 2.15, tests/test_keras_dropout_strip.py with random data): a batch
whose only positive logit was tiny made the emulated float16 MatMul's ~1e-4 error a 1.5%
magnitude error of the loss's ``Select`` (``sigmoid_cross_entropy_with_logits``' relu of the
logits: zeros but for that logit), and compare named that Select as the root cause of a healthy
run. Here the batch is built so: one logit of 0.01, the others negative (a 10% error of the
Select on both stacks before the rule, exit 1). A 5% scale fault on the same Select, where
it keeps a fair share of the logits, is still the first divergence and the only root cause.
"""
import inspect

import numpy as np
import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import compare

_REALISTIC = "faults" in inspect.signature(NpuDumpHook).parameters
pytestmark = pytest.mark.skipif(not _REALISTIC, reason="this emulator has no realistic profile / faults")

SELECT = "logistic_loss/Select"  # relu(logits) inside tf.nn.sigmoid_cross_entropy_with_logits


def _build(largest_logit):
    """A logistic regression step on a fixed batch of 16 whose largest logit is ``largest_logit``
    (the bias shifts them all; the others are below it by 0.4 to 4.3)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    rng = np.random.RandomState(0)
    x = rng.rand(16, 10).astype("float32")
    w = rng.randn(10, 1).astype("float32")
    bias = np.array([largest_logit - (x @ w).max()], "float32")
    kernel = v1.get_variable("kernel", initializer=w)
    offset = v1.get_variable("bias", initializer=bias)
    logits = tf.matmul(tf.constant(x), kernel) + offset
    labels = tf.constant(np.zeros((16, 1), "float32"))
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=v1.train.get_or_create_global_step())
    return {"loss": loss, "train_op": train_op}


def _compare(root, largest_logit, faults=None):
    from npu_dump_hook.sample_models import _session

    options = DumpOptions(enable_dump=True, dump_path="dump", dump_mode="output")
    npu = NpuDumpHook(options, output_dir=str(root / "npu"), backend="emulated", emulate_profile="ascend",
                      faults=faults)
    _session.train(lambda: _build(largest_logit), options, [npu], steps=1)
    golden = NpuDumpHook(options, output_dir=str(root / "golden"), initial_state=npu.bundle.location)
    _session.train(lambda: _build(largest_logit), options, [golden], steps=1)
    result = compare(npu.bundle.location, golden.bundle.location, workers=1)
    return result, {r["tensor"]: r for r in result.doc["rows"] if r["tensor"]}


def test_a_select_keeping_one_tiny_logit_is_explained_by_the_absolute_error_it_inherits(in_tmp_cwd):
    result, rows = _compare(in_tmp_cwd, 0.01)
    select = rows[SELECT + ":output:0"]
    # the float16 error of the logits is a large relative error of the one logit the Select keeps ...
    assert select["breached"] and select["magnitude_error"] > 0.05, select
    logits = [rows[t] for t in rows if t.startswith("add:output")]
    assert logits and logits[0]["metrics"]["RelativeEuclideanDistance"] < 0.002
    # ... and no more absolute error than the logits carry: inherited, a healthy run passes
    assert result.exit_code == 0 and not result.doc["root_causes"], result.summary_text()
    assert select["status"] == "propagated" and select["precision_class"] == "selection"


def test_a_scale_fault_on_a_select_is_still_the_root_cause(in_tmp_cwd):
    result, rows = _compare(in_tmp_cwd, 1.0, {SELECT: "scale=1.05"})
    first = result.doc["first_divergence"]
    assert result.exit_code == 1 and first is not None, result.summary_text()
    assert first["original_ops"] == [SELECT], result.summary_text()
    assert result.doc["root_causes"] == [first["row"]], result.summary_text()
    assert rows[SELECT + ":output:0"]["magnitude_error"] == pytest.approx(0.05, abs=0.003)
