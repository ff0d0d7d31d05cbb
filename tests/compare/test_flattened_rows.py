"""Tensors whose shape differs from their golden's while the element count is the same (what a
folded Reshape/Flatten leaves on the device) are compared flattened, as msaccucmp does, with both
shapes in the row's ``shape_note``; a different element count stays a ``shape mismatch`` row."""
import numpy as np
import pytest

from npu_dump_hook.compare import compare
from npu_dump_hook.compare._worker import shape_note

from helpers.compare_synth import Synth

CONV_SHAPE = (1, 4, 5, 16)


def _run(tmp_path, fc_input_shape, fault=1.0):
    """conv (NC1HWC0 on the device, golden CONV_SHAPE) -> fc (MatMul, dump_mode all): fc's dumped
    input 0 is conv's NPU value in ``fc_input_shape`` (None: as conv's golden); ``fault`` scales conv."""
    rng = np.random.default_rng(3)
    synth = Synth(tmp_path, dump_mode="all")
    x = rng.standard_normal(CONV_SHAPE).astype(np.float32)
    synth.op("x", "Data", x, no_task=True)
    conv = (x * np.float32(2.0)).astype(np.float32)
    npu_conv = conv * np.float32(fault)
    synth.op("conv", "Conv2D", conv, inputs=["x:0"], npu=npu_conv, fmt=("NC1HWC0", "NHWC"))
    if fc_input_shape is not None:
        synth.values[("conv", 0)] = npu_conv.reshape(fc_input_shape)  # what fc's input dump holds
    weights = rng.standard_normal((conv.size, 3)).astype(np.float32)
    fc = conv.reshape(1, -1) @ weights
    synth.op("fc", "MatMul", fc, inputs=["conv:0"], npu=npu_conv.reshape(1, -1) @ weights)
    graph, step, golden = synth.write()
    return compare(step, golden, graph=graph, workers=1)


def _row(result, npu_op, direction):
    (row,) = [r for r in result.doc["rows"] if r["npu_op"] == npu_op and r["direction"] == direction]
    return row


def test_same_elements_in_another_shape_compare_flattened_with_both_shapes_noted(tmp_path):
    result = _run(tmp_path, (1, 320))
    row = _row(result, "fc", "input")
    assert row["status"] == "ok" and row["golden_tensor"] == "conv:0"
    assert row["shape_note"] == "compared flattened: NPU [1, 320] vs golden [1, 4, 5, 16] (320 elements)"
    assert row["original_shape"] == [1, 320] and row["metrics"]["CosineSimilarity"] == pytest.approx(1.0)
    assert _row(result, "conv", "output")["shape_note"] == ""  # NC1HWC0 converted first: the golden shape
    summary = result.doc["summary"]
    assert summary["compared_flattened"] == 1 and summary["not_compared_reasons"] == {}
    assert result.exit_code == 0, result.summary_text()
    assert "1 compared flattened" in result.summary_text()
    (line,) = [line for line in result.csv().splitlines() if ",fc:input:0," in line]
    assert '"[1,320]",1.000000,' in line  # Shape, then CosineSimilarity: compared


@pytest.mark.parametrize("fault", [1.0, 1.05])
def test_flattening_leaves_metrics_and_verdict_as_the_golden_shape_would(tmp_path, fault):
    same = _run(tmp_path / "same", None, fault)
    flat = _run(tmp_path / "flat", (320,), fault)
    assert flat.exit_code == same.exit_code == (0 if fault == 1.0 else 1)
    assert flat.doc["root_causes"] == same.doc["root_causes"]
    assert flat.doc["first_divergence"] == same.doc["first_divergence"]
    for a, b in zip(same.doc["rows"], flat.doc["rows"]):
        assert (a["tensor"], a["status"], a["metrics"], a["breached"]) == (b["tensor"], b["status"], b["metrics"],
                                                                           b["breached"])
    assert _row(flat, "fc", "input")["shape_note"].startswith("compared flattened: NPU [320] vs golden")
    assert _row(same, "fc", "input")["shape_note"] == ""


def test_a_different_element_count_stays_a_shape_mismatch(tmp_path):
    rng = np.random.default_rng(0)
    synth = Synth(tmp_path / "count")
    synth.op("short", "Reshape", np.zeros(CONV_SHAPE, np.float32),
             npu=rng.standard_normal(319).astype(np.float32))
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    row = _row(result, "short", "output")
    assert row["status"] == "not_compared" and row["shape_note"] == ""
    assert row["fail_reason"].startswith("shape mismatch: NPU [319]")
    assert "vs golden [1, 4, 5, 16] (319 vs 320 elements)" in row["fail_reason"]
    assert result.doc["summary"]["not_compared_reasons"] == {"shape mismatch": 1}
    assert result.doc["summary"]["compared_flattened"] == 0 and result.exit_code == 1


def test_shape_note_rule():
    assert shape_note((2, 3), (2, 3)) == "" and shape_note((1, 6), (6,)) == "" and shape_note((), (1, 1)) == ""
    assert shape_note((6,), (2, 3)) == "compared flattened: NPU [6] vs golden [2, 3] (6 elements)"
    assert shape_note((3, 2), (2, 3)).startswith("compared flattened")
    assert shape_note((5,), (2, 3)) is None and shape_note((0, 3), (3,)) is None
