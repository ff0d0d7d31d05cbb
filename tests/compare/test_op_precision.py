"""Expected precision per op class: healthy float16 runs of a deeper CNN (8 convolutions,
3 dense layers) trained with SGD, momentum and Adam compare with exit 0 on the emulator's
ascend profile, and a 1.05 or 1.02 scale fault on a fused convolution is still the first
divergence and the only root cause (docs/compare.md, "Expected precision per op class")."""
import inspect

import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import PRECISION_CLASSES, compare, op_precision

_REALISTIC = "faults" in inspect.signature(NpuDumpHook).parameters
pytestmark = pytest.mark.skipif(not _REALISTIC, reason="this emulator has no realistic profile / faults")


def _npu_and_golden(root, optimizer, faults=None, dump_mode="output"):
    from npu_dump_hook.sample_models import deep_cnn

    options = DumpOptions(enable_dump=True, dump_path="dump", dump_mode=dump_mode)
    npu = NpuDumpHook(options, output_dir=str(root / "npu"), backend="emulated", emulate_profile="ascend",
                      faults=faults)
    deep_cnn.train(options, hooks=[npu], optimizer=optimizer)
    golden = NpuDumpHook(options, output_dir=str(root / "golden"), initial_state=npu.bundle.location)
    deep_cnn.train(options, hooks=[golden], optimizer=optimizer)
    return npu.bundle.location, golden.bundle.location


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_healthy_deep_cnn_compares_clean(in_tmp_cwd, optimizer):
    result = compare(*_npu_and_golden(in_tmp_cwd, optimizer), workers=1)
    rows = result.doc["rows"]
    assert result.exit_code == 0, result.summary_text(top=10)
    assert sum(1 for r in rows if r["op_type"] == "Conv2D" and r["direction"] == "output") == 8
    assert any(r["npu_dtype"] == "float16" for r in rows)
    assert result.doc["summary"]["breached"] > 0  # float16 does breach the flat thresholds here ...
    breached = [r for r in rows if r["breached"]]
    assert all(r["status"] == "propagated" for r in breached)  # ... and each breach is explained
    if optimizer == "adam":  # Adam's first update (lr * sign(gradient)) and second moment breach
        classes = {r["precision_class"] for r in breached if r["op_type"] == "ApplyAdam"}
        assert {"sign_sensitive", "second_moment"} <= classes, classes


@pytest.mark.parametrize("optimizer,scale", [("adam", "1.05"), ("momentum", "1.02")])
def test_a_scale_fault_on_a_fused_convolution_is_still_named(in_tmp_cwd, optimizer, scale):
    faulted = "conv5/Relu"  # the last op of the fused Conv2D+BiasAdd+Relu node (a fault ends a fused group)
    result = compare(*_npu_and_golden(in_tmp_cwd, optimizer, {faulted: "scale=" + scale}), workers=1)
    first = result.doc["first_divergence"]
    assert result.exit_code == 1 and first is not None, result.summary_text()
    assert first["original_ops"] == ["conv5/Conv2D", "conv5/BiasAdd", faulted], result.summary_text()
    assert result.doc["root_causes"] == [first["row"]], result.summary_text()
    row = result.doc["rows"][first["row"]]
    assert row["precision_class"] == "reduction"
    assert row["magnitude_error"] == pytest.approx(float(scale) - 1, abs=0.003)


def test_healthy_deep_cnn_with_inputs_dumped_compares_clean(in_tmp_cwd):
    """dump_mode all: an op's upstream rows are its own input rows (ReluGrad's feature input
    flips the gate of whole gradient elements)."""
    result = compare(*_npu_and_golden(in_tmp_cwd, "adam", dump_mode="all"), workers=1)
    assert result.exit_code == 0, result.summary_text(top=10)
    assert any(r["direction"] == "input" for r in result.doc["rows"])


def test_op_classes():
    assert op_precision("BiasAddGrad", "output", 0) == ("reduction", PRECISION_CLASSES["reduction"])
    assert op_precision("Conv2DBackpropFilter", "output", 0)[0] == "reduction"
    assert op_precision("ApplyAdam", "output", 0) == ("sign_sensitive", None)
    assert op_precision("ResourceApplyAdam", "output", 1)[0] == "elementwise"
    assert op_precision("ApplyAdam", "output", 2)[0] == "second_moment"
    assert op_precision("ReluGrad", "output", 0)[0] == "sign_sensitive"
    assert op_precision("ReluGrad", "input", 0)[0] == "elementwise"  # an input is its producer's output again
    assert op_precision("Add", "output", 0) == ("elementwise", 1.0)
    assert 1.0 < PRECISION_CLASSES["reduction"] < PRECISION_CLASSES["second_moment"]
