"""End to end with real TF: the emulated demo run compares clean; the emulator's realistic
("ascend") profile compared with a golden run from the same state passes, and with a faulted
kernel names that op as the first divergence."""
import inspect

import pytest

from npu_dump_hook import NpuDumpHook
from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare
from npu_dump_hook.sample_models import mlp_session

FAULTED = "hidden2/MatMul"
_REALISTIC = "faults" in inspect.signature(NpuDumpHook).parameters


def _train(hook):
    mlp_session.train(hook.options, hooks=[hook], steps=1000)
    assert hook.bundle is not None
    return hook.bundle.location


def _npu_and_golden(root, faults=None):
    npu = _train(NpuDumpHook(output_dir=str(root / "npu"), backend="emulated", emulate_profile="ascend",
                             faults=faults))
    golden = _train(NpuDumpHook(output_dir=str(root / "golden"), initial_state=npu))
    return npu, golden


def test_emulated_demo_bundle_compares_clean(in_tmp_cwd, capsys):
    bundle = _train(NpuDumpHook(output_dir=str(in_tmp_cwd / "out"), backend="emulated"))
    result = compare(bundle, workers=1)
    summary = result.doc["summary"]
    assert result.exit_code == 0, result.summary_text()
    assert summary["compared"] >= 50 and summary["breached"] == 0 and not summary["input_inconsistent"]
    assert set(summary["not_compared_reasons"]) <= {"no dump file", "no golden file", "data type not comparable"}
    assert main(["compare", bundle, "--workers", "1"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out


@pytest.mark.skipif(not _REALISTIC, reason="this emulator has no realistic profile / faults")
def test_realistic_profile_passes_and_a_faulted_kernel_is_the_first_divergence(in_tmp_cwd):
    npu, golden = _npu_and_golden(in_tmp_cwd / "clean")
    healthy = compare(npu, golden, workers=1)
    assert healthy.exit_code == 0, healthy.summary_text()
    assert any(r["npu_dtype"] == "float16" for r in healthy.doc["rows"])  # float16 really is in there

    npu, golden = _npu_and_golden(in_tmp_cwd / "fault", {FAULTED: "scale=1.05"})
    result = compare(npu, golden, workers=1)
    assert result.exit_code == 1
    first = result.doc["first_divergence"]
    assert first["npu_op"] == FAULTED and FAULTED in first["original_ops"]
    assert result.doc["root_causes"] == [first["row"]]
    assert result.doc["rows"][first["row"]]["magnitude_error"] == pytest.approx(0.05, abs=0.002)
    before = [r for r in result.doc["rows"] if r["order"] < result.doc["rows"][first["row"]]["order"]]
    assert before and all(r["status"] in ("ok", "not_compared") for r in before)
    assert result.doc["summary"]["propagated"] > 5


@pytest.mark.skipif(not _REALISTIC, reason="this emulator has no realistic profile / faults")
def test_realistic_cnn_with_fusion_and_device_formats_compares_clean(in_tmp_cwd):
    """Fused Conv2D+BiasAdd+Relu nodes, NC1HWC0/FRACTAL_Z/FRACTAL_NZ payloads and float16
    propagating through the graph (MaxPoolGrad sends some gradients elsewhere: a relative
    Euclidean distance of ~0.02, which the default thresholds must not call a fault)."""
    from npu_dump_hook.sample_models import cnn_estimator

    npu_hook = NpuDumpHook(output_dir=str(in_tmp_cwd / "npu"), backend="emulated", emulate_profile="ascend")
    cnn_estimator.train(str(in_tmp_cwd / "m1"), hooks=[npu_hook], steps=1000)
    golden_hook = NpuDumpHook(output_dir=str(in_tmp_cwd / "golden"), initial_state=npu_hook.bundle.location)
    cnn_estimator.train(str(in_tmp_cwd / "m2"), hooks=[golden_hook], steps=1000)
    result = compare(npu_hook.bundle.location, golden_hook.bundle.location, workers=1)
    assert result.exit_code == 0, result.summary_text()
    rows = result.doc["rows"]
    formats = {r["npu_format"] for r in rows if r["status"] == "ok"}
    assert {"NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ"} <= formats
    fused = [r for r in rows if len(r["ground_truth"]) == 3 and r["direction"] == "output"]
    assert fused and all(r["status"] == "ok" for r in fused)
    assert all(r["ground_truth"][-1].endswith("/Relu") and r["golden_tensor"] == r["ground_truth"][-1] + ":0"
               for r in fused)



def _train_dense_pair(hook):
    """fc1 (MatMul+BiasAdd+Relu, fused on the ascend profile) feeding fc2's MatMul directly,
    one SGD step on fixed data; returns the bundle."""
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default():
        rng = np.random.RandomState(7)
        x = tf.constant(rng.rand(8, 12).astype(np.float32), name="x")
        labels = tf.constant(rng.randint(0, 3, size=8).astype(np.int64), name="labels")
        init = v1.glorot_uniform_initializer(seed=11)
        hidden = v1.layers.dense(x, 16, activation=tf.nn.relu, name="fc1", kernel_initializer=init)
        logits = v1.layers.dense(hidden, 3, name="fc2", kernel_initializer=init)
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(train_op)
    assert hook.bundle is not None
    return hook.bundle.location


@pytest.mark.skipif(not _REALISTIC, reason="this emulator has no realistic profile / faults")
def test_a_fault_on_the_last_op_of_a_fused_group_is_the_only_root_cause(in_tmp_cwd):
    """A fault on fc1/Relu (the last op of the fused fc1 node, no float16 op) whose consumer fc2/MatMul
    is a float16 op (it rounds its input): fc2's input row is matched to fc1/Relu:0, which has a
    golden, never to the fault's internal tensor; so fc2 is no second root cause."""
    from npu_dump_hook import DumpOptions

    faulted = "fc1/Relu"
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_mode="all")
    npu = _train_dense_pair(NpuDumpHook(options, output_dir=str(in_tmp_cwd / "npu"), backend="emulated",
                                        emulate_profile="ascend", faults={faulted: "scale=1.05"}))
    golden = _train_dense_pair(NpuDumpHook(options, output_dir=str(in_tmp_cwd / "golden"), initial_state=npu))
    result = compare(npu, golden, workers=1)
    rows = result.doc["rows"]
    first = result.doc["first_divergence"]
    assert result.exit_code == 1 and first["original_ops"][-1] == faulted, result.summary_text()
    assert result.doc["root_causes"] == [first["row"]], result.summary_text()
    fc2_inputs = [r for r in rows if r["npu_op"].startswith("fc2/MatMul") and r["direction"] == "input"]
    assert fc2_inputs and fc2_inputs[0]["golden_tensor"] == faulted + ":0", fc2_inputs
    assert fc2_inputs[0]["status"] == "propagated", fc2_inputs
    assert not any("npu_dump_hook_numerics" in (r["golden_tensor"] or "") for r in rows)
