"""The statistics compare (compare/stats.py): a dump_data=stats NPU side against golden statistics
(golden_stats.json); on synthetic runs, and end to end with the emulated NPU (ascend profile) and
a golden run of the stats bundle (real TF)."""
import json
import re
import os

import numpy as np
import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.cli import main
from npu_dump_hook.compare import DEFAULT_STATS_THRESHOLDS, compare, render_html
from npu_dump_hook.errors import CompareError, OptionError
from npu_dump_hook.formats.device_format import from_original
from npu_dump_hook.formats.ge_text import format_model
from npu_dump_hook.formats.names import format_dump_name, golden_npy_name, parse_npy_name, sanitize
from npu_dump_hook.formats.stats_csv import StatsRow, compute_stats, write_stats_csv
from npu_dump_hook.train.golden_stats import STATS_SCHEMA, tensor_statistics

from helpers.compare_synth import GRAPH_NAME, T0, Synth


def _stats_row(direction, index, array, fmt="ND"):
    return StatsRow(direction=direction, index=index, data_size=int(array.nbytes), data_type="DT_FLOAT",
                    format=fmt, shape=tuple(array.shape), **compute_stats(array))


def _write(synth, root, fmt_of=None):
    """The synth's graph, one stats CSV per dumped op (outputs; NPU values, device format when
    ``fmt_of[op]`` = (device, layout)) and golden_stats.json of its golden values."""
    fmt_of = fmt_of or {}
    graph = os.path.join(root, "ge_proto_00000001_Build.txt")
    with open(graph, "w") as handle:
        handle.write(format_model(synth.model()))
    step = os.path.join(root, "dump", "20261201000000", "0", GRAPH_NAME, "1", "0")
    os.makedirs(step)
    for position, op in enumerate(synth.ops):
        if op.no_task:
            continue
        rows = []
        for index, array in enumerate(op.npu):
            device, layout = fmt_of.get(op.name, ("ND", None))
            held = from_original(array, device, layout) if layout else array
            rows.append(_stats_row("Output", index, held, device))
        name = format_dump_name(sanitize(op.type), sanitize(op.name), 2 + position, 0, T0 + 10 * position, stats=True)
        write_stats_csv(os.path.join(step, name), rows)
    tensors = []
    for number, ((tf_name, index), array) in enumerate(sorted(synth.golden.items())):
        entry = {"key": parse_npy_name(golden_npy_name(tf_name, index, T0 + number)).key,
                 "tensor": "{}:{}".format(tf_name, index), "dtype": str(array.dtype), "shape": list(array.shape)}
        entry.update(tensor_statistics(array))
        tensors.append(entry)
    golden = os.path.join(root, "golden_stats.json")
    with open(golden, "w") as handle:
        json.dump({"schema": STATS_SCHEMA, "tensors": tensors}, handle)
    return graph, step, golden


def _chain(tmp_path, fault=1.0, nan_at=None, fmt_of=None):
    """x -> a -> b -> c (Add-like, 6x4x4x32 values), ``fault`` scales b's NPU output."""
    rng = np.random.RandomState(3)
    synth = Synth(tmp_path)
    x = rng.standard_normal((2, 4, 4, 20)).astype(np.float32)
    synth.op("x", "Data", x, no_task=True)
    a = x * np.float32(2)
    synth.op("a", "Mul", a, inputs=["x:0"])
    b = a + np.float32(0.5)
    npu_b = b * np.float32(fault)
    if nan_at is not None:
        npu_b = npu_b.copy()
        npu_b.flat[nan_at] = np.nan
    synth.op("b", "Add", b, inputs=["a:0"], npu=npu_b)
    synth.op("c", "Relu", np.maximum(b, 0), inputs=["b:0"], npu=np.maximum(npu_b, 0))
    return _write(synth, str(tmp_path), fmt_of)


def test_a_scaled_op_is_the_first_divergence_and_its_consumer_propagated(tmp_path):
    graph, step, golden = _chain(tmp_path, fault=1.05)
    result = compare(step, golden, graph=graph, workers=1)
    doc = result.doc
    assert doc["mode"] == "stats" and result.exit_code == 1 and doc["summary"]["verdict"] == "fail"
    rows = {r["npu_op"]: r for r in doc["rows"]}
    assert rows["a"]["status"] == "ok" and rows["a"]["rel_diff"]["max"] < 1e-5  # the CSV keeps 6 digits
    assert rows["b"]["status"] == "root_cause" and rows["c"]["status"] == "propagated"
    assert rows["b"]["rel_diff"]["max"] == pytest.approx(0.05, rel=1e-4)
    assert set(rows["b"]["breached"]) >= {"max", "min"}
    assert doc["first_divergence"]["npu_op"] == "b" and [doc["rows"][n]["npu_op"] for n in doc["root_causes"]] == ["b"]
    assert doc["first_divergence"]["inputs"][0]["tensor"] == "a:output:0"
    text = result.summary_text()
    assert "compare (statistics)" in text and "first divergence: row 1 b (Add)" in text
    csv_lines = result.csv().splitlines()
    assert csv_lines[0].startswith("Index,OpType,NPUDump,GroundTruth,TensorIndex,GoldenTensor")
    assert len(csv_lines) == 4 and ",root_cause," in csv_lines[2]
    assert 'id="verdict"' in render_html(doc)


def test_clean_run_passes_and_the_limits_decide(tmp_path):
    graph, step, golden = _chain(tmp_path, fault=1.02)
    assert compare(step, golden, graph=graph, workers=1).exit_code == 0  # 2% < the default 3%
    strict = compare(step, golden, graph=graph, workers=1, stats_thresholds={"value_rel_max": 0.01})
    assert strict.exit_code == 1 and strict.doc["first_divergence"]["npu_op"] == "b"
    off = compare(step, golden, graph=graph, workers=1, stats_thresholds={"value_rel_max": None})
    assert off.exit_code == 0 and off.doc["thresholds"]["value_rel_max"] is None
    with pytest.raises(OptionError):
        compare(step, golden, graph=graph, stats_thresholds={"value_rel": 0.1})
    with pytest.raises(OptionError):
        compare(step, golden, graph=graph, stats_thresholds={"value_rel_max": -1})


def test_nan_counts_make_an_overflow_row_and_the_golden_free_check_still_works(tmp_path):
    graph, step, golden = _chain(tmp_path, nan_at=5)
    doc = compare(step, golden, graph=graph, workers=1).doc
    rows = {r["npu_op"]: r for r in doc["rows"]}
    assert rows["b"]["status"] == "overflow" and rows["b"]["count_diff"]["nan"] == 1
    assert rows["b"]["breached"][0] == "overflow" and rows["a"]["status"] == "ok"
    alone = compare(step, graph=graph, workers=1).doc  # no golden: checks only, from the stats CSVs
    assert alone["checks"]["nan_inf"]["source"] == "stats"
    assert [o["npu_op"] for o in alone["checks"]["nan_inf"]["origins"]] == ["b"]


def test_a_padded_device_format_is_compared_as_padded(tmp_path):
    """NC1HWC0 pads 20 channels to 32 with zeros: the counts differ, the statistics still match."""
    graph, step, golden = _chain(tmp_path, fmt_of={"a": ("NC1HWC0", "NHWC")})
    doc = compare(step, golden, graph=graph, workers=1).doc
    row = [r for r in doc["rows"] if r["npu_op"] == "a"][0]
    assert row["npu"]["count"] == 2 * 2 * 4 * 4 * 16 and row["golden_stats"]["count"] == 2 * 4 * 4 * 20
    assert row["status"] == "ok" and max(row["rel_diff"][k] for k in ("max", "min", "avg")) < 1e-5
    assert "zero-padded" in row["note"] and doc["summary"]["verdict"] == "pass"


def test_bad_golden_statistics_are_errors_naming_the_file(tmp_path):
    graph, step, golden = _chain(tmp_path)
    with open(golden, "w") as handle:
        json.dump({"schema": STATS_SCHEMA, "tensors": [{"key": "a.0", "max": "big"}]}, handle)
    with pytest.raises(CompareError, match=r"golden_stats.json: tensors\[0\]"):
        compare(step, golden, graph=graph)
    with open(golden, "w") as handle:
        handle.write("{not json")
    with pytest.raises(CompareError, match="not readable as JSON"):
        compare(step, golden, graph=graph)
    assert main(["compare", step, golden, "--graph", graph]) == 3


def test_cli_stats_limits_and_reports(tmp_path, capsys):
    graph, step, golden = _chain(tmp_path, fault=1.02)
    out = str(tmp_path / "r")
    assert main(["compare", step, golden, "--graph", graph, "--workers", "1", "--stats-value-rel-max", "0.01",
                 "--csv", out + ".csv", "--json", out + ".json", "--html", out + ".html"]) == 1
    assert "max/min/avg rel. diff <= 0.01" in capsys.readouterr().out
    with open(out + ".json") as handle:
        assert json.load(handle)["first_divergence"]["npu_op"] == "b"
    assert main(["compare", step, golden, "--graph", graph, "--workers", "1", "--stats-value-rel-max", "off"]) == 0


def test_help_shows_the_stats_defaults():
    from npu_dump_hook.cli._compare import STATS_HELP_DEFAULTS

    shown = {k: v for k, v in DEFAULT_STATS_THRESHOLDS.as_dict().items() if isinstance(v, float)}
    assert STATS_HELP_DEFAULTS == shown


def _stats_run_and_golden(root, train, faults=None):
    options = DumpOptions(enable_dump=True, dump_path=str(root / "dump"), dump_data="stats")
    npu = NpuDumpHook(options, output_dir=str(root / "npu"), backend="emulated", emulate_profile="ascend",
                      faults=faults)
    train(root / "m1", npu)
    golden = NpuDumpHook(output_dir=str(root / "golden"), initial_state=npu.bundle.location)
    train(root / "m2", golden)
    return npu.bundle.location, golden.bundle.location


def _cnn(model_dir, hook):
    from npu_dump_hook.sample_models import cnn_estimator

    cnn_estimator.train(str(model_dir), hooks=[hook], steps=1000)


def _mlp(model_dir, hook):
    from npu_dump_hook.sample_models import mlp_session

    mlp_session.train(hook.options, hooks=[hook], steps=1000)


def test_emulated_conv_scale_fault_is_the_stats_first_divergence(in_tmp_cwd):
    npu, golden = _stats_run_and_golden(in_tmp_cwd, _cnn, {"conv2/Conv2D": "scale=1.05"})
    golden_dir = os.path.join(golden, "data", "golden")
    assert sorted(os.listdir(golden_dir)) == ["golden_manifest.json", "golden_stats.json"]  # no tensors
    npu_files = os.listdir(os.path.join(npu, "data", "dump"))
    assert npu_files
    result = compare(npu, golden, workers=1)
    doc = result.doc
    first = doc["first_divergence"]
    assert doc["mode"] == "stats" and result.exit_code == 1
    assert first["npu_op"] == "conv2/Conv2D" and "conv2/Conv2D" in first["original_ops"]
    assert doc["root_causes"] == [first["row"]]
    assert first["rel_diff"]["max"] == pytest.approx(0.05, abs=0.003)
    before = [r for r in doc["rows"] if r["order"] < doc["rows"][first["row"]]["order"]]
    assert before and all(r["status"] == "ok" for r in before)
    assert doc["summary"]["propagated"] > 5


def test_emulated_healthy_mlp_stats_pass(in_tmp_cwd, capsys):
    npu, golden = _stats_run_and_golden(in_tmp_cwd, _mlp)
    result = compare(npu, golden, workers=1)
    assert result.exit_code == 0, result.summary_text()
    assert result.doc["summary"]["compared"] > 50 and result.doc["summary"]["not_compared"] == 0
    assert main(["compare", npu, golden, "--workers", "1"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out


@pytest.mark.parametrize("body", [
    "Input,0,64,DT_FLOAT,NC1HWC0,2x3x4x5x16,1.5,-2,0.25,120,0,0,0\nOutput,0,64,DT_FLOAT16,ND,-,nan,inf,-INF,1,1,0,0\n",
    "Output,0,8,UNKNOW,-,2x2,1e+30,-1.5e-07,.5,4,0,2,1\r\nOutput,1,8,DT_INT32,ND,4,3,0,1.5,4,0,0,0\r\n",
    "Output,0,8,DT_FLOAT,ND,2x2,NA,,1,4,0,0,0\n",            # missing statistics: the full reader
    "Output,0,8,DT_FLOAT,ND,2X2,1,1,1,4,0,0,0\n",            # not a shape
    "output,0,8,DT_FLOAT,ND,2x2,1,1,1,4,0,0,0\n",            # not a direction
    "Output,0,8,DT_FLOAT,ND,2x2,1,1,1,4,0,0\n",              # a cell short
    "Output,0,8,DT_FLOAT,ND,2x2,1_0,1,1,4,0,0,0\n",          # float() would take it, the format does not
])
def test_the_fast_stats_reader_reads_what_the_full_reader_reads(tmp_path, body):
    from npu_dump_hook.compare._stats_fast import read_stats_rows
    from npu_dump_hook.errors import StatsFormatError
    from npu_dump_hook.formats.stats_csv import STATS_HEADER, read_stats_csv

    path = str(tmp_path / "Add.a.2.0.1700000000000000.csv")
    with open(path, "wb") as handle:
        handle.write((",".join(STATS_HEADER) + "\n" + body).encode("ascii"))
    try:
        expected = list(read_stats_csv(path).rows)
    except StatsFormatError as exc:
        with pytest.raises(StatsFormatError, match=re.escape(exc.rule)):
            read_stats_rows(path)
        return
    assert repr(read_stats_rows(path)) == repr(expected)  # repr: nan == nan


def test_a_tensor_golden_gives_its_statistics(tmp_path):
    """A folder of .npy files (no golden_stats.json): the statistics are computed from it."""
    graph, step, golden = _chain(tmp_path, fault=1.05)
    folder = tmp_path / "npy"
    folder.mkdir()
    with open(golden) as handle:
        keys = [t["key"] for t in json.load(handle)["tensors"]]
    assert keys
    rng = np.random.RandomState(3)  # _chain's values, again
    x = rng.standard_normal((2, 4, 4, 20)).astype(np.float32)
    for name, value in (("a", x * np.float32(2)), ("b", x * np.float32(2) + np.float32(0.5))):
        np.save(str(folder / golden_npy_name(name, 0, T0)), value)
    np.save(str(folder / golden_npy_name("c", 0, T0)), np.maximum(x * np.float32(2) + np.float32(0.5), 0))
    from_npy = compare(step, str(folder), graph=graph, workers=1).doc
    from_file = compare(step, golden, graph=graph, workers=1).doc
    assert from_npy["golden"]["statistics"].endswith("(.npy)")
    assert [r["status"] for r in from_npy["rows"]] == [r["status"] for r in from_file["rows"]]
    assert [r["rel_diff"] for r in from_npy["rows"]] == [r["rel_diff"] for r in from_file["rows"]]
    assert from_npy["first_divergence"]["npu_op"] == "b"


def test_an_exact_profile_stats_bundle_compares_with_its_own_golden(in_tmp_cwd):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_data="stats")
    hook = NpuDumpHook(options, output_dir=str(in_tmp_cwd / "npu"), backend="emulated")
    _mlp(None, hook)
    result = compare(hook.bundle.location, workers=1)
    assert result.doc["mode"] == "stats" and result.doc["golden"]["kind"] == "embedded"
    assert result.exit_code == 0, result.summary_text()
    assert result.doc["summary"]["compared"] > 50


def test_ops_selects_the_stats_rows(tmp_path):
    graph, step, golden = _chain(tmp_path, fault=1.05)
    doc = compare(step, golden, graph=graph, workers=1, ops="^[bc]$").doc
    assert [r["npu_op"] for r in doc["rows"]] == ["b", "c"]
    assert doc["first_divergence"]["npu_op"] == "b" and doc["summary"]["incomplete"] is False
