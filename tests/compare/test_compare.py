"""compare(): matching, device formats, not-comparable rows, divergence analysis, input
consistency, on synthetic runs (no TensorFlow)."""
import json
import os
import tarfile
import tempfile

import numpy as np
import pytest

from npu_dump_hook.compare import DEFAULT_THRESHOLDS, compare
from npu_dump_hook.errors import CompareError, OptionError
from npu_dump_hook.formats.dump_file import write_dump_file

from helpers.compare_synth import Synth, chain

FUSED = "scope/conv_fused"
ORIGINALS = ["scope/Conv2D", "scope/BiasAdd", "scope/Relu"]


def _rows(result, **match):
    return [r for r in result.doc["rows"] if all(r[k] == v for k, v in match.items())]


def _fused_run(tmp_path, dump_mode, fault):
    """x -> pre -> fused Conv2D+BiasAdd+Relu (NC1HWC0) -> down/add_0..2; ``fault`` scales the fused output."""
    rng = np.random.default_rng(7)
    synth = Synth(tmp_path, dump_mode=dump_mode)
    x = rng.standard_normal((2, 5, 5, 20)).astype(np.float32)
    synth.op("x", "Data", x, no_task=True)
    pre = np.float32(2.0) * x
    synth.op("pre", "Mul", pre, inputs=["x:0"])
    conv = pre + np.float32(0.25)
    synth.golden_value("scope/Conv2D", conv)
    synth.golden_value("scope/BiasAdd", conv + np.float32(0.1))
    relu = np.maximum(conv + np.float32(0.1), 0).astype(np.float32)
    synth.op(FUSED, "Conv2D", relu, inputs=["pre:0"], npu=relu * np.float32(fault), original_names=ORIGINALS,
             origin=("scope/Relu", 0), fmt=("NC1HWC0", "NHWC"))
    chain(synth, 3, relu, prefix="down", first_input=FUSED + ":0", npu_start=relu * np.float32(fault))
    return synth


@pytest.mark.parametrize("dump_mode", ["output", "all"])
def test_fault_at_fused_node_is_the_first_divergence_and_downstream_is_propagated(tmp_path, dump_mode):
    synth = _fused_run(tmp_path, dump_mode, fault=1.05)
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1
    first = result.doc["first_divergence"]
    assert first["npu_op"] == FUSED
    assert first["original_ops"] == ORIGINALS
    assert first["tensor"] == FUSED + ":output:0"
    fused_row = result.doc["rows"][first["row"]]
    assert fused_row["status"] == "root_cause" and fused_row["npu_format"] == "NC1HWC0"
    assert fused_row["golden_tensor"] == "scope/Relu:0"
    assert fused_row["original_shape"] == [2, 5, 5, 20] and fused_row["shape"] != [2, 5, 5, 20]
    assert result.doc["root_causes"] == [first["row"]]
    for name in ("down/add_0", "down/add_1", "down/add_2"):
        assert {r["status"] for r in _rows(result, npu_op=name)} == {"propagated"}
    assert {r["status"] for r in _rows(result, npu_op="pre")} == {"ok"}
    upstream = [i["tensor"] for i in first["inputs"]]
    assert upstream == ([FUSED + ":input:0"] if dump_mode == "all" else ["pre:output:0"])
    summary = result.doc["summary"]
    assert summary["root_causes"] == 1 and summary["verdict"] == "fail"
    assert summary["propagated"] == (6 if dump_mode == "all" else 3)
    assert "scope/Relu" in result.summary_text() and FUSED in result.summary_text()


def test_same_run_without_fault_passes(tmp_path):
    synth = _fused_run(tmp_path, "all", fault=1.0)
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 0, result.summary_text()
    assert result.doc["first_divergence"] is None
    assert {r["status"] for r in result.doc["rows"]} == {"ok"}


def _formats_run(tmp_path, fault_on=None):
    rng = np.random.default_rng(3)
    synth = Synth(tmp_path)
    cases = {
        "fm/nc1hwc0": (rng.standard_normal((2, 3, 4, 20)), ("NC1HWC0", "NHWC")),
        "fm/ndc1hwc0": (rng.standard_normal((1, 2, 3, 4, 18)), ("NDC1HWC0", "NDHWC")),
        "w/fractal_z": (rng.standard_normal((3, 3, 20, 36)), ("FRACTAL_Z", "HWCN")),
        "mm/fractal_nz": (rng.standard_normal((40, 50)), ("FRACTAL_NZ", "ND")),
    }
    for name, (value, fmt) in sorted(cases.items()):
        value = value.astype(np.float32)
        npu = value * np.float32(1.05) if name == fault_on else value
        synth.op(name, "Conv2D", value, npu=npu, fmt=fmt, dtype=np.float16)
    synth.op("plain/fp16", "Relu", rng.random((7, 9)).astype(np.float32), dtype=np.float16)
    return synth


def test_device_formats_and_float16_rows_equal_golden(tmp_path):
    graph, step, golden = _formats_run(tmp_path).write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 0, result.summary_text()
    formats = {r["npu_op"]: r["npu_format"] for r in result.doc["rows"]}
    assert formats == {"fm/nc1hwc0": "NC1HWC0", "fm/ndc1hwc0": "NDC1HWC0", "w/fractal_z": "FRACTAL_Z",
                       "mm/fractal_nz": "FRACTAL_NZ", "plain/fp16": "ND"}
    for row in result.doc["rows"]:
        assert row["status"] == "ok" and row["npu_dtype"] == "float16" and row["golden_dtype"] == "float32"
        assert row["metrics"]["CosineSimilarity"] > 0.9999
        assert row["metrics"]["RelativeEuclideanDistance"] < 1e-3
    shapes = {r["npu_op"]: r["original_shape"] for r in result.doc["rows"]}
    assert shapes["w/fractal_z"] == [3, 3, 20, 36] and shapes["mm/fractal_nz"] == [40, 50]


def test_a_fault_in_a_fractal_nz_tensor_is_found(tmp_path):
    graph, step, golden = _formats_run(tmp_path, fault_on="mm/fractal_nz").write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1
    assert result.doc["first_divergence"]["npu_op"] == "mm/fractal_nz"
    assert [r["npu_op"] for r in result.doc["rows"] if r["status"] != "ok"] == ["mm/fractal_nz"]


def test_rows_that_cannot_be_compared_have_reasons_and_are_counted(tmp_path):
    synth = Synth(tmp_path)
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    synth.op("good", "Relu", value)
    synth.op("nogolden", "Relu", value, golden=False)
    synth.op("badshape", "Relu", value)
    synth.golden[("badshape", 0)] = np.zeros((5, 5), np.float32)
    synth.op("text", "StringJoin", np.array([b"ab", b"cd"]))
    synth.op("nodump", "Relu", value, dump=False)
    synth.op("broken", "Relu", value)
    graph, step, golden = synth.write()
    broken = [name for name in os.listdir(step) if ".broken." in name][0]
    with open(os.path.join(step, broken), "wb") as handle:
        handle.write(b"\x05\x00\x00\x00\x00\x00\x00\x00garbage")
    result = compare(step, golden, graph=graph, workers=1, allow_uncompared=True)
    status = {r["npu_op"]: (r["status"], r["fail_reason"]) for r in result.doc["rows"]}
    assert status["good"][0] == "ok"
    assert status["nogolden"][0] == "not_compared" and status["nogolden"][1].startswith("no golden file: nogolden.0")
    assert status["badshape"][1].startswith("shape mismatch: NPU [3, 4]")
    assert status["text"][1] == "data type not comparable: DT_STRING"
    assert status["nodump"][1].startswith("no dump file")
    assert status["broken"][1].startswith("unreadable dump file")
    summary = result.doc["summary"]
    assert summary["not_compared"] == 5 and summary["compared"] == 1
    assert summary["not_compared_reasons"] == {"no golden file": 1, "shape mismatch": 1, "data type not comparable": 1,
                                               "no dump file": 1, "unreadable dump file": 1}
    assert result.exit_code == 0
    lines = result.csv().splitlines()
    assert len(lines) == 7
    assert all(line.count("NaN") >= 10 for line in lines[1:] if not line.startswith(("0,Relu,good", "0,")))


def test_header_original_op_is_used_when_the_graph_has_no_origin_attrs(tmp_path):
    synth = Synth(tmp_path)
    value = np.linspace(1, 2, 10, dtype=np.float32)
    synth.op("npu_node", "Relu", value, origin=("tf/Relu", 0), graph_origin=False)
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    row = result.doc["rows"][0]
    assert row["golden_tensor"] == "tf/Relu:0" and row["status"] == "ok"


def test_inputs_are_compared_with_the_producer_through_transdata_and_cast(tmp_path):
    synth = Synth(tmp_path, dump_mode="all")
    value = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    synth.op("x", "Data", value, no_task=True)
    synth.op("prod", "Relu", np.maximum(value, 0), inputs=["x:0"])
    synth.op("trans", "TransData", np.maximum(value, 0), inputs=["prod:0", "x:-1"], golden=False,
             original_names=[""])
    synth.op("cast", "Cast", np.maximum(value, 0), inputs=["trans:0"], golden=False, original_names=[""])
    synth.op("cons", "Neg", -np.maximum(value, 0), inputs=["cast:0"])
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 0, result.summary_text()
    by_tensor = {r["tensor"]: r for r in result.doc["rows"]}
    assert by_tensor["cons:input:0"]["golden_tensor"] == "prod:0"
    assert by_tensor["trans:output:0"]["golden_tensor"] == "prod:0"
    assert by_tensor["cast:output:0"]["golden_tensor"] == "prod:0"
    assert by_tensor["trans:output:0"]["ground_truth"] == []
    assert by_tensor["trans:output:0"]["status"] == "ok"
    assert "trans:input:1" not in by_tensor  # the control input is no tensor
    assert "\n2,TransData,trans,float32,NaN,*,float32,trans:output:0," in result.csv()


def _iterator_run(root, batch, extra=None):
    synth = Synth(root)
    synth.op("IteratorGetNext", "IteratorGetNext", batch)
    chain(synth, 2, batch, prefix="net", first_input="IteratorGetNext:0")
    return synth.bundle(extra)


def test_different_batches_are_input_inconsistent(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    npu = _iterator_run(tmp_path / "npu", base)
    other = _iterator_run(tmp_path / "other", base[::-1].copy())
    result = compare(npu, other, workers=1)
    summary = result.doc["summary"]
    assert summary["input_inconsistent"] is True and result.exit_code == 1
    assert any("IteratorGetNext:output:0" in line for line in summary["input_inconsistent_detail"])
    assert "INPUT INCONSISTENT" in result.summary_text()
    same = compare(npu, _iterator_run(tmp_path / "same", base), workers=1)
    assert same.doc["summary"]["input_inconsistent"] is False and same.exit_code == 0


def _fingerprints(batch_digest):
    return {"fingerprints": {"algorithm": "sha256", "step": 0,
                             "state": [{"name": "w", "dtype": "float32", "shape": [2], "sha256": "aa"}],
                             "batch": [{"name": "IteratorGetNext:0", "dtype": "float32", "shape": [4, 6],
                                        "sha256": batch_digest}]}}


def test_fingerprints_that_differ_are_input_inconsistent(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    npu = _iterator_run(tmp_path / "npu", base, _fingerprints("11"))
    golden = _iterator_run(tmp_path / "golden", base, _fingerprints("22"))
    result = compare(npu, golden, workers=1)
    detail = result.doc["summary"]["input_inconsistent_detail"]
    assert result.exit_code == 1 and result.doc["summary"]["input_inconsistent"]
    assert detail == ["fingerprints.batch: IteratorGetNext:0 differs (NPU float32 [4, 6] sha256 11, "
                      "golden float32 [4, 6] sha256 22)"]
    assert result.doc["summary"]["breached"] == 0
    matching = compare(npu, _iterator_run(tmp_path / "g2", base, _fingerprints("11")), workers=1)
    assert matching.exit_code == 0
    unrecorded = compare(npu, _iterator_run(tmp_path / "g3", base), workers=1)
    assert unrecorded.exit_code == 0


def test_float16_overflow_is_called_out(tmp_path):
    synth = Synth(tmp_path)
    value = np.array([1.0, 70000.0, 3.0], np.float32)
    synth.op("big", "Mul", value, dtype=np.float16)
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    row = result.doc["rows"][0]
    assert row["status"] == "overflow" and row["breached"][0] == "overflow"
    assert result.doc["summary"]["overflow"] == 1 and result.exit_code == 1
    assert result.doc["root_causes"] == [0]


def test_independent_faults_are_root_causes_in_execution_order(tmp_path):
    synth = Synth(tmp_path)
    start = np.ones((3, 3), np.float32)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 3, start, fault_at=1, prefix="b")
    chain(synth, 3, start, fault_at=0, prefix="a")
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    causes = [result.doc["rows"][i]["npu_op"] for i in result.doc["root_causes"]]
    assert causes == ["b/add_1", "a/add_0"]  # b's ops run first (earlier dump timestamps)
    orders = [result.doc["rows"][i]["order"] for i in result.doc["root_causes"]]
    assert orders == sorted(orders)
    assert result.doc["summary"]["propagated"] == 3


def test_a_process_pool_gives_the_same_rows(tmp_path):
    synth = _fused_run(tmp_path, "all", fault=1.05)
    graph, step, golden = synth.write()
    one = compare(step, golden, graph=graph, workers=1)
    many = compare(step, golden, graph=graph, workers=3)
    assert many.doc["rows"] == one.doc["rows"] and many.csv() == one.csv()


def test_archive_bundle_compares_like_its_folder(tmp_path):
    folder = _iterator_run(tmp_path / "run", np.ones((2, 3), np.float32))
    archive = str(tmp_path / "run.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="bundle")
    before = set(os.listdir(tempfile.gettempdir()))
    from_folder = compare(folder, workers=1)
    from_archive = compare(archive, workers=1)
    assert from_archive.doc["npu"]["kind"] == "archive"
    assert from_archive.csv() == from_folder.csv()
    assert from_archive.doc["npu"]["bundle_id"] == from_folder.doc["npu"]["bundle_id"]
    golden_archive = compare(folder, archive, workers=1)  # a golden bundle may be an archive too
    assert golden_archive.doc["golden"]["kind"] == "bundle" and golden_archive.csv() == from_folder.csv()
    assert not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("npu_dump_hook_compare_")
                and n not in before]  # the extractions are gone


def test_ops_filter_and_latest_golden_file_wins(tmp_path):
    synth = Synth(tmp_path)
    value = np.ones(4, np.float32)
    synth.op("keep/a", "Relu", value)
    synth.op("drop/b", "Relu", value)
    graph, step, golden = synth.write()
    np.save(os.path.join(golden, "keep_a.0.1600000000000000.npy"), value * 7)  # older: not used
    result = compare(step, golden, graph=graph, ops="^keep/", workers=1)
    assert [r["npu_op"] for r in result.doc["rows"]] == ["keep/a"] and result.exit_code == 0


def test_json_document_has_the_contract_keys(tmp_path):
    synth = _fused_run(tmp_path, "output", fault=1.05)
    graph, step, golden = synth.write()
    doc = compare(step, golden, graph=graph, workers=1).doc
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text)["schema"] == "npu_dump_hook/compare@1"
    assert set(doc) >= {"schema", "npu", "golden", "thresholds", "summary", "first_divergence", "root_causes", "rows"}
    assert doc["npu"]["kind"] == "dump_dir" and doc["golden"]["kind"] == "npy_dir"
    assert doc["thresholds"] == DEFAULT_THRESHOLDS.as_dict()
    row_keys = {"index", "order", "op_type", "npu_op", "npu_dtype", "address", "ground_truth", "golden_dtype",
                "tensor", "direction", "slot", "shape", "npu_format", "original_shape", "metrics", "std",
                "fail_reason", "status", "timestamp"}
    assert all(row_keys <= set(row) for row in doc["rows"])
    assert sorted(r["order"] for r in doc["rows"]) == list(range(len(doc["rows"])))


def test_thresholds_change_the_verdict(tmp_path):
    synth = Synth(tmp_path)
    value = np.linspace(1, 2, 16, dtype=np.float32)
    synth.op("a", "Relu", value, npu=value * np.float32(1.02))
    graph, step, golden = synth.write()
    assert compare(step, golden, graph=graph, workers=1).exit_code == 1
    loose = compare(step, golden, graph=graph, workers=1, thresholds={"magnitude_err_max": 0.05})
    assert loose.exit_code == 0
    strict = compare(step, golden, graph=graph, workers=1,
                     thresholds={"magnitude_err_max": None, "mean_rel_err": 0.01})
    assert strict.exit_code == 1 and strict.doc["rows"][0]["breached"] == ["MeanRelativeError"]
    euclid = compare(step, golden, graph=graph, workers=1,
                     thresholds={"magnitude_err_max": None, "rel_euclid_max": 0.01})
    assert euclid.doc["rows"][0]["breached"] == ["RelativeEuclideanDistance"]


def test_moved_values_of_the_right_size_pass_and_a_scale_fails(tmp_path):
    """float16 rounding that flips an argmax (MaxPoolGrad sends a gradient to another element
    of its window) changes direction, not size: relative Euclidean distance 0.02, cosine
    0.9998, magnitude error ~0. A 5% scale is the opposite: cosine 1, magnitude 0.05."""
    rng = np.random.default_rng(11)
    golden = rng.standard_normal(20000).astype(np.float32)
    moved = golden.copy()
    pairs = rng.choice(golden.size, size=(2, 4), replace=False)
    moved[pairs[0]], moved[pairs[1]] = golden[pairs[1]], golden[pairs[0]]
    synth = Synth(tmp_path)
    synth.op("routed", "MaxPoolGrad", golden, npu=moved)
    synth.op("scaled", "MatMulV2", golden, npu=golden * np.float32(1.05))
    graph, step, gold = synth.write()
    rows = {r["npu_op"]: r for r in compare(step, gold, graph=graph, workers=1).doc["rows"]}
    routed, scaled = rows["routed"], rows["scaled"]
    assert routed["metrics"]["RelativeEuclideanDistance"] > 0.01 and routed["metrics"]["CosineSimilarity"] < 0.9999
    assert routed["magnitude_error"] < 1e-3 and routed["status"] == "ok"
    assert scaled["metrics"]["CosineSimilarity"] == pytest.approx(1.0)
    assert scaled["magnitude_error"] == pytest.approx(0.05, rel=1e-3) and scaled["status"] == "root_cause"


def test_unusable_inputs_are_errors_naming_them(tmp_path):
    with pytest.raises(CompareError, match="--graph"):
        compare(str(tmp_path))
    with pytest.raises(CompareError, match="no such file"):
        compare(str(tmp_path / "missing"))
    with pytest.raises(OptionError):
        compare(str(tmp_path), thresholds={"cosine": 1})
    with pytest.raises(OptionError):
        compare(str(tmp_path), workers=0)
    folder = _iterator_run(tmp_path / "run", np.ones(3, np.float32))
    with pytest.raises(CompareError, match="holds no"):
        compare(folder, str(tmp_path / "run"))  # a folder with neither .npy files nor data/bundle.json
    os.rename(os.path.join(folder, "data", "golden"), str(tmp_path / "moved"))
    # no golden anywhere: only the checks that need none (NaN/Inf origin, overflow), said so
    alone = compare(folder)
    assert alone.doc["golden"] is None and alone.doc["rows"] == [] and alone.doc["checks"]["nan_inf"] is not None
    assert "no golden" in alone.summary_text() and "give GOLDEN" in alone.summary_text()


def test_an_error_that_hides_under_the_thresholds_and_returns_is_still_propagated(tmp_path):
    synth = Synth(tmp_path)
    start = np.linspace(1, 2, 12, dtype=np.float32)
    synth.op("x", "Data", start, no_task=True)
    synth.op("a", "Mul", start, inputs=["x:0"], npu=start * np.float32(1.05))
    synth.op("b", "Add", start + 100, inputs=["a:0"], npu=start * np.float32(1.05) + 100)  # hidden: rel. 5e-4
    synth.op("c", "Sub", start, inputs=["b:0"], npu=start * np.float32(1.05))  # back to 5%
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    status = {r["npu_op"]: r["status"] for r in result.doc["rows"]}
    assert status == {"a": "root_cause", "b": "ok", "c": "propagated"}
    assert result.doc["summary"]["root_causes"] == 1


def test_scalars_are_compared_but_only_checked_when_asked(tmp_path):
    synth = Synth(tmp_path)
    synth.op("loss", "Sum", np.float32(2.0), npu=np.float32(2.1))
    synth.op("inf", "Sum", np.float32(2.0), npu=np.float32(np.inf))
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    rows = {r["npu_op"]: r for r in result.doc["rows"]}
    assert rows["loss"]["status"] == "ok" and rows["loss"]["magnitude_error"] == pytest.approx(0.05, rel=1e-5)
    assert rows["loss"]["fail_reason"] == "This tensor is scalar."
    assert rows["inf"]["status"] == "overflow" and result.exit_code == 1  # overflow is still called out
    checked = compare(step, golden, graph=graph, workers=1, thresholds={"check_scalars": True})
    assert {r["npu_op"]: r["status"] for r in checked.doc["rows"]}["loss"] == "root_cause"
    with pytest.raises(OptionError):
        compare(step, golden, graph=graph, thresholds={"check_scalars": "yes"})


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_is_reported_for_every_dump_file(tmp_path, workers):
    synth = Synth(tmp_path)
    start = np.ones(5, np.float32)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 6, start)
    graph, step, golden = synth.write()
    seen = []
    compare(step, golden, graph=graph, workers=workers, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 6) for i in range(1, 7)]


def test_dump_files_the_graph_does_not_know_are_rows_with_a_warning(tmp_path, caplog):
    synth = Synth(tmp_path)
    value = np.ones(3, np.float32)
    synth.op("known", "Relu", value)
    synth.op("stranger", "Relu", value)
    graph, step, golden = synth.write()
    other = Synth(tmp_path / "other")
    other.op("known", "Relu", value)
    other_graph = other.write()[0]
    result = compare(step, golden, graph=other_graph, workers=1)
    rows = {r["npu_op"]: r for r in result.doc["rows"]}
    assert rows["stranger"]["status"] == "ok" and rows["stranger"]["index"] == 1
    assert any("1 of 2 dump file(s) match no op of the graph" in w and "stranger" in w
               for w in result.doc["warnings"])
    assert "match no op of the graph" in caplog.text


def test_several_step_folders_the_captured_step_or_step_picks_one(tmp_path, caplog):
    value = np.ones(4, np.float32)
    synth = Synth(tmp_path)
    synth.op("a", "Relu", value)
    synth.write()
    step0 = synth.step_dir
    step3 = os.path.join(os.path.dirname(step0), "3")
    os.makedirs(step3)
    for name in os.listdir(step0):  # step 3 holds a 5% different tensor
        write_dump_file(os.path.join(step3, name), "a", outputs=[value * np.float32(1.05)])
    bundle = synth.bundle({"run": {"captured_step": 3}})
    chosen = compare(bundle, workers=1)
    assert chosen.doc["npu"]["step_dir"].endswith(os.sep + "3") and chosen.exit_code == 1
    assert "2 step folders hold dump files" in caplog.text
    assert compare(bundle, step=0, workers=1).exit_code == 0
    with pytest.raises(CompareError, match="no step folder 7"):
        compare(bundle, step=7, workers=1)


def _reduction_after_a_direction_error(root, scale, op_type="BiasAddGrad"):
    """g: a gradient whose direction the NPU changed by ~7% (moved elements, same size: within
    the thresholds); s: a reduction of it (an op of ``op_type``; its golden value the sum of g's 500
    rows of 8), ``scale`` off on the NPU."""
    rng = np.random.default_rng(5)
    g = rng.standard_normal(4000).astype(np.float32)
    moved = g.copy()
    picks = rng.choice(g.size, size=(2, 6), replace=False)
    moved[picks[0]], moved[picks[1]] = g[picks[1]], g[picks[0]]
    # the reduction's golden value is the sum it computes (a random one would tell the rule the sum
    # cancels ~22x: ||g|| / ||s||, docs/compare.md "Expected precision per op class")
    s = g.reshape(500, 8).sum(axis=0, dtype=np.float64).astype(np.float32)
    synth = Synth(root)
    synth.op("g", "ReluGrad", g, npu=moved)
    synth.op("s", op_type, s, inputs=["g:0"], npu=s * np.float32(scale))
    graph, step, golden = synth.write()
    return compare(step, golden, graph=graph, workers=1)


def test_a_breach_explained_by_a_larger_upstream_error_is_propagated_and_passes(tmp_path):
    result = _reduction_after_a_direction_error(tmp_path, 1.014)
    rows = {r["npu_op"]: r for r in result.doc["rows"]}
    assert rows["g"]["status"] == "ok" and rows["g"]["metrics"]["RelativeEuclideanDistance"] > 0.05
    assert rows["s"]["breached"] == ["MagnitudeError"] and rows["s"]["status"] == "propagated"
    assert result.doc["root_causes"] == [] and result.exit_code == 0
    assert "no root cause: every breach inherits" in result.summary_text()


@pytest.mark.parametrize("op_type,scale", [("Mul", 1.10), ("BiasAddGrad", 1.20)])
def test_an_error_larger_than_the_inherited_one_is_a_root_cause(tmp_path, op_type, scale):
    """Beyond what the op's class makes of the inherited distance (~0.07): an element-wise op
    passes it on (0.10 > 0.07), a reduction may double it (0.20 > 2 x 0.07; docs/compare.md,
    "Expected precision per op class")."""
    result = _reduction_after_a_direction_error(tmp_path, scale, op_type)
    assert [result.doc["rows"][i]["npu_op"] for i in result.doc["root_causes"]] == ["s"]
    assert result.exit_code == 1


def test_a_reduction_may_double_the_inherited_error(tmp_path):
    """0.10 from a BiasAddGrad whose input is ~0.07 off: within twice it (the reduction class)."""
    result = _reduction_after_a_direction_error(tmp_path, 1.10)
    rows = {r["npu_op"]: r for r in result.doc["rows"]}
    assert rows["s"]["status"] == "propagated" and rows["s"]["precision_class"] == "reduction"
    assert result.exit_code == 0


def _layout_ambiguous_run(root, graph_kind):
    """a (Relu, NC1HWC0 output) -> b (Neg, dump_mode all: NC1HWC0 input), NCHW tensors (1, 4, 4, 4) that also
    fit NHWC. The headers name no framework layout (a's original_op.format is ND, inputs have no original_op):
    only the graph's origin_format (NCHW) converts them right."""
    from npu_dump_hook.formats.device_format import from_original
    from npu_dump_hook.formats.dump_file import DumpTensor
    from npu_dump_hook.formats.ge_build import make_model, make_op, make_tensor_desc
    from npu_dump_hook.formats.ge_json import write_msaccucmp_json
    from npu_dump_hook.formats.ge_text import format_model
    from npu_dump_hook.formats.names import format_dump_name, format_npy_name

    rng = np.random.default_rng(3)
    a_value = np.abs(rng.standard_normal((1, 4, 4, 4))).astype(np.float32)
    b_value = -a_value
    device = from_original(a_value, "NC1HWC0", "NCHW")

    def desc(name):
        return make_tensor_desc("DT_FLOAT", device.shape, layout="NC1HWC0", origin_format="NCHW",
                                origin_shape=a_value.shape, origin_name=name, origin_output_index=0)

    ops = [make_op("a", "Relu", 0, output_descs=[desc("a")]),
           make_op("b", "Neg", 1, inputs=["a:0"], input_descs=[desc("a")],
                   output_descs=[make_tensor_desc("DT_FLOAT", b_value.shape, layout="NCHW", origin_name="b")])]
    model = make_model([("g", ops)], name="g")
    step, golden = os.path.join(str(root), "step"), os.path.join(str(root), "golden")
    os.makedirs(step)
    os.makedirs(golden)
    graph = os.path.join(str(root), "ge_proto_00000001_Build.txt")
    text = format_model(model)
    if graph_kind == "json":
        graph = os.path.join(str(root), "build.json")
        write_msaccucmp_json(model, graph)
    else:
        with open(graph, "w", newline="") as handle:  # CRLF: not the canonical layout, parsed in full
            handle.write(text.replace("\n", "\r\n") if graph_kind == "crlf" else text)
    nc1hwc0 = DumpTensor(device, format="NC1HWC0", original_shape=a_value.shape)
    write_dump_file(os.path.join(step, format_dump_name("Relu", "a", 2, 0, 1700000000000000)), "a",
                    outputs=[DumpTensor(device, format="NC1HWC0", original_shape=a_value.shape, original_name="a",
                                        original_format="ND")], dump_time=1700000000000000)
    write_dump_file(os.path.join(step, format_dump_name("Neg", "b", 3, 0, 1700000000000010)), "b",
                    outputs=[DumpTensor(b_value, format="NCHW", original_name="b")], inputs=[nc1hwc0],
                    dump_time=1700000000000010)
    for name, value in (("a", a_value), ("b", b_value)):
        np.save(os.path.join(golden, format_npy_name(name, 0, 1700000000000000)), value)
    return step, golden, graph


@pytest.mark.parametrize("graph_kind", ["canonical", "crlf", "json"])
def test_device_format_without_a_header_layout_converts_from_the_graphs_origin_format(tmp_path, graph_kind):
    step, golden, graph = _layout_ambiguous_run(tmp_path, graph_kind)
    result = compare(step, golden, graph=graph, workers=1)
    rows = {r["tensor"]: r for r in result.doc["rows"]}
    assert set(rows) == {"a:output:0", "b:input:0", "b:output:0"}
    for tensor in ("a:output:0", "b:input:0"):
        row = rows[tensor]
        assert row["npu_format"] == "NC1HWC0" and row["original_shape"] == [1, 4, 4, 4]
        assert row["status"] == "ok" and row["metrics"]["CosineSimilarity"] == pytest.approx(1.0, abs=1e-6)
        assert row["metrics"]["MaxAbsoluteError"] == 0.0
    assert result.exit_code == 0


def test_a_header_layout_wins_over_the_graphs(tmp_path):
    """The header's NHWC is used even where the graph says NCHW: the NCHW data then reads wrong."""
    step, golden, graph = _layout_ambiguous_run(tmp_path, "canonical")
    from npu_dump_hook.formats.dump_file import DumpFile, DumpTensor
    path = [os.path.join(step, n) for n in os.listdir(step) if ".a." in n][0]
    with DumpFile.open(path) as dump:
        device, stamp = np.array(dump.array("output", 0)), dump.dump_time
    write_dump_file(path, "a", outputs=[DumpTensor(device, format="NC1HWC0", original_shape=(1, 4, 4, 4),
                                                   original_name="a", original_format="NHWC")], dump_time=stamp)
    rows = {r["tensor"]: r for r in compare(step, golden, graph=graph, workers=1).doc["rows"]}
    assert rows["a:output:0"]["metrics"]["MaxAbsoluteError"] > 0.1
    assert rows["b:input:0"]["metrics"]["MaxAbsoluteError"] == 0.0


def test_comparing_in_process_leaves_the_callers_blas_threads_as_they_were(tmp_path):
    from npu_dump_hook.compare import _blas

    calls = _blas._openblas()
    if calls is None:
        pytest.skip("numpy is not linked with OpenBLAS here")
    getter, setter = calls
    before = getter()
    seen = []
    try:
        setter(2)
        synth = Synth(tmp_path)
        synth.op("x", "Data", np.arange(8, dtype=np.float32), no_task=True)
        chain(synth, 4, np.arange(8, dtype=np.float32))
        graph, step, golden = synth.write()
        result = compare(step, golden, graph=graph, workers=1, progress=lambda done, total: seen.append(getter()))
        assert result.exit_code == 0 and seen and set(seen) == {2}  # the caller's count between files
        assert getter() == 2
        with _blas.single_blas_thread():
            assert getter() == 1
        assert getter() == 2
    finally:
        setter(before)


def test_input_inconsistent_names_the_environment_differences(tmp_path):
    """A changed precision_mode is printed before any metric, and named as a likely cause."""
    from npu_dump_hook import environment

    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    env = environment.capture("2.15.1", None, {"numerics": {"precision_mode": "allow_fp32_to_fp16"}}, {})
    other = dict(env, session=dict(env["session"], precision_mode="force_fp32"))
    npu = _iterator_run(tmp_path / "npu", base, dict(_fingerprints("11"), run={"environment": env}))
    golden = _iterator_run(tmp_path / "golden", base, dict(_fingerprints("22"), run={"environment": other}))
    result = compare(npu, golden, workers=1)
    line = "session.precision_mode: NPU allow_fp32_to_fp16, golden force_fp32"
    assert result.doc["environment_differences"] == [line]
    assert "environment: " + line in result.doc["summary"]["input_inconsistent_detail"]
    text = result.summary_text()
    assert text.index(line) < text.index("rows ") and result.exit_code == 1
