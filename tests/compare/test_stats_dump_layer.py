"""A statistics dump of chosen ops (``dump_data="stats"`` with ``dump_layer``; issue 23): the
emulated NPU writes stats CSVs of the chosen ops (and the Data ops feeding them) only, the golden
run keeps the statistics of the tensors compare needs for them only, and the statistics compare
says "not selected" for the other ops of the graph, never "missing" (real TF, ascend profile). A
statistics bundle holds what its golden run and compare need (Build graph, initial checkpoint),
not the msaccucmp JSON form or the TF graph, which serve tensor comparisons only."""
import json
import os

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import read_bundle, summarize, verify_bundle
from npu_dump_hook.compare import compare

FAULT_OP = "conv2/Conv2D"


def _cnn(model_dir, hook):
    from npu_dump_hook.sample_models import cnn_estimator

    cnn_estimator.train(str(model_dir), hooks=[hook], steps=1000)


def _stats_files(bundle):
    return [name for _, _, files in os.walk(os.path.join(bundle, "data", "dump")) for name in files
            if name.endswith(".csv")]


def _golden_stats(bundle):
    with open(os.path.join(bundle, "data", "golden", "golden_stats.json")) as handle:
        return json.load(handle)["tensors"]


def test_a_stats_dump_of_chosen_ops_compares_them_and_says_not_selected_for_the_rest(in_tmp_cwd):
    options = DumpOptions(enable_dump=True, dump_path=str(in_tmp_cwd / "dump"), dump_data="stats",
                          dump_layer=FAULT_OP)
    npu = NpuDumpHook(options, output_dir=str(in_tmp_cwd / "npu"), backend="emulated", emulate_profile="ascend",
                      faults={FAULT_OP: "scale=1.05"})
    _cnn(in_tmp_cwd / "m1", npu)
    bundle = npu.bundle.location
    csvs = _stats_files(bundle)
    assert csvs and all(".conv2_Conv2D." in name for name in csvs), csvs  # the chosen op only (no Data input)

    doc = read_bundle(bundle)  # bundle.json: left out by choice, not missing
    cov = doc["coverage"]
    assert cov["selected"] == 1 and cov["missing"] == [] and cov["dumped"] == 1 and cov["not_selected"] > 50
    assert cov["expected"] == cov["dumped"] + cov["not_selected"]
    assert "1/1 chosen op(s) have dump files (dump_layer), {} not selected".format(cov["not_selected"]) in \
        summarize(doc)
    assert verify_bundle(bundle) == []
    kinds = {entry["kind"] for entry in doc["files"]}  # serves no tensor comparison: no msaccucmp JSON, no TF graph
    assert doc["graph"]["file"] and doc["graph"]["json"] is None and "tf_graph" not in kinds and "init" in kinds

    golden = NpuDumpHook(output_dir=str(in_tmp_cwd / "golden"), initial_state=bundle)
    _cnn(in_tmp_cwd / "m2", golden)
    kept = _golden_stats(golden.bundle.location)
    with open(os.path.join(golden.bundle.location, "data", "golden", "golden_manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["dump_layer"]["dropped_statistics"] > 10 * len(kept)  # the chosen op's neighbourhood only
    assert FAULT_OP + ":0" in {entry["tensor"] for entry in kept}

    result = compare(bundle, golden.bundle.location, workers=1)
    doc = result.doc
    assert doc["mode"] == "stats" and result.exit_code == 1
    assert doc["first_divergence"]["npu_op"] == FAULT_OP
    assert {row["npu_op"] for row in doc["rows"]} == {FAULT_OP}
    assert all(row["reason"] == "" or row["reason"] is None for row in doc["rows"])  # its golden statistics are kept
    coverage = doc["coverage"]
    assert coverage["dump_layer"] == [FAULT_OP] and coverage["dumped_ops"] == 1 and coverage["missing_ops"] == 0
    assert coverage["not_selected_ops"] == cov["not_selected"]
    assert "partial dump (dump_layer, 1 name(s)): 1 op(s) dumped, {} not selected".format(
        cov["not_selected"]) in result.summary_text()

