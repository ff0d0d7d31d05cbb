"""Golden (reference) bundles: no graph, no dump, coverage not applicable; golden_for and fingerprints checked."""
import json
import os

import numpy as np

from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.bundle.describe import NOT_APPLICABLE
from npu_dump_hook.bundle.verify import check_bundle_json
from npu_dump_hook.fingerprints import array_digest, fingerprints_section

from helpers.bundles import make_run, write

TARGET = {"bundle_json_sha256": "a" * 64, "path": "/npu/bundle", "created": "2026-12-01T12:00:00+00:00",
          "backend": "emulated", "captured_step": 0, "match": True, "on_mismatch": "error",
          "differences": {"match": True}}


def _golden_folder(root):
    folder = root / "golden"
    folder.mkdir(parents=True)
    np.save(str(folder / "w.0.1000000000000000.npy"), np.ones(3, np.float32))
    (folder / "golden_manifest.json").write_text(json.dumps({"schema": "npu_dump_hook/golden@1", "files": []}))
    return str(folder)


def _fingerprints():
    return fingerprints_section(0, [dict(name="w", **array_digest(np.ones(3, np.float32)))],
                                [dict(name="IteratorGetNext:0", source="iterator", op_type="IteratorGetNext",
                                      **array_digest(np.zeros((2, 2))))])


def test_a_golden_bundle_has_no_graph_or_dump_and_verifies(tmp_path):
    result = write(tmp_path / "b", None, backend="reference", golden_dir=_golden_folder(tmp_path / "src"),
                   fingerprints=_fingerprints(), golden_for=TARGET, warnings=["from the run"])
    doc = read_bundle(result.path)
    assert verify_bundle(result.path) == []
    assert doc["backend"] == "reference" and doc["golden_for"] == TARGET
    assert doc["fingerprints"] == json.loads(json.dumps(_fingerprints()))
    assert doc["coverage"] == {"expected": None, "dumped": 0, "missing": [], "not_in_graph": [],
                               "not_applicable": NOT_APPLICABLE}
    assert doc["graph"]["file"] is None and doc["dump"]["steps"] == [] and doc["dump"]["chains"] == []
    assert sorted(f["kind"] for f in doc["files"]) == ["golden", "golden"]
    assert doc["warnings"] == ["from the run"] and result.warnings == ["from the run"]
    assert not os.path.exists(os.path.join(result.path, "data", "dump"))


def test_an_npu_bundle_has_fingerprints_and_no_golden_for(tmp_path):
    result = write(tmp_path / "b", make_run(tmp_path / "src"), fingerprints=_fingerprints())
    doc = read_bundle(result.path)
    assert "golden_for" not in doc and doc["fingerprints"]["state"][0]["name"] == "w"
    assert "not_applicable" not in doc["coverage"] and verify_bundle(result.path) == []


def test_verify_refuses_golden_for_outside_reference_bundles_and_dumps_inside_them(tmp_path):
    doc = read_bundle(write(tmp_path / "b", make_run(tmp_path / "src")).path)
    assert check_bundle_json(doc) == []
    doc["golden_for"] = dict(TARGET)
    assert check_bundle_json(doc) == ["golden_for in a 'emulated' bundle (only reference bundles are made for "
                                      "another)"]
    doc["backend"] = "reference"
    problems = check_bundle_json(doc)
    assert len(problems) == 1 and problems[0].startswith("a reference bundle holds no NPU dump, but files lists")
    doc["files"] = [f for f in doc["files"] if f["kind"] not in ("dump", "stats", "opdebug")]
    assert check_bundle_json(doc) == []
    doc["golden_for"].update(bundle_json_sha256="xyz", captured_step=True)
    del doc["golden_for"]["path"]
    assert sorted(check_bundle_json(doc)) == sorted([
        "golden_for: missing key 'path'", "golden_for.captured_step has type bool",
        "golden_for.bundle_json_sha256 is not 64 lowercase hex digits"])


def test_inspect_text_names_the_npu_bundle_and_says_coverage_does_not_apply(tmp_path):
    from npu_dump_hook.bundle import summarize

    result = write(tmp_path / "b", None, backend="reference", golden_dir=_golden_folder(tmp_path / "src"),
                   fingerprints=_fingerprints(), golden_for=TARGET)
    lines = summarize(read_bundle(result.path)).splitlines()
    assert "coverage  not applicable: " + NOT_APPLICABLE in lines
    assert "prints    step 0: state of 1 variable(s), batch of 1 tensor(s) (sha256)" in lines
    assert ("golden    for /npu/bundle (bundle.json sha256 aaaaaaaaaaaaaaaa, created 2026-12-01T12:00:00+00:00); "
            "fingerprints match") in lines
    differing = dict(TARGET, match=False, on_mismatch="warn")
    text = summarize(dict(read_bundle(result.path), golden_for=differing))
    assert "fingerprints DIFFER (on_mismatch=warn)" in text


def test_readers_take_a_recorded_golden_backend_as_reference(tmp_path):
    from npu_dump_hook.bundle._spec import read_backend

    assert read_backend("golden") == read_backend("reference") == "reference"
    assert read_backend("emulated") == "emulated" and read_backend(None) is None
    doc = read_bundle(write(tmp_path / "b", None, backend="reference", golden_dir=_golden_folder(tmp_path / "src"),
                            fingerprints=_fingerprints(), golden_for=TARGET).path)
    doc["backend"] = "golden"
    assert check_bundle_json(doc) == []  # a golden bundle, golden_for in its place
    doc["files"].append({"path": "dump/x", "size": 1, "sha256": None, "kind": "dump"})
    problems = check_bundle_json(doc)
    assert any(p.startswith("a reference bundle holds no NPU dump, but files lists") for p in problems), problems
    doc["backend"] = "gpu"
    assert "backend 'gpu' is not one of npu, emulated, reference" in check_bundle_json(doc)
