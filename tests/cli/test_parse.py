"""``npu-dump-hook parse``: text, --json and --to-npy over files made with the writers; exit codes
(1 malformed / not a dump artefact / empty folder, 2 missing path) and one-line errors."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.formats.dump_file import DumpTensor, write_dump_file
from npu_dump_hook.formats.mapping_csv import write_mapping
from npu_dump_hook.formats.opdebug import decode_opdebug, write_opdebug_file
from npu_dump_hook.formats.stats_csv import StatsRow, write_stats_csv

TS = 1700000000123456
CONV = "Conv2D.scope_conv1_Conv2D.5.2.1700000000123456"
STATS = "Relu.scope_relu.6.2.1700000000123457.csv"
OPDEBUG = "Opdebug.Node_OpDebug.7.2.1700000000123458"
HASHED = "10981764720131403780"
HASHED_REAL = "MatMul." + "m" * 300 + ".8.2.1700000000123459"

GRAPH_TEXT = """name: "ge_default"
graph {
  name: "ge_default_20240101000000_1"
  op {
    name: "scope/conv1/Conv2D"
    type: "Conv2D"
    id: 1
  }
  op {
    name: "scope/relu"
    type: "Relu"
    input: "scope/conv1/Conv2D:0"
    id: 2
  }
  op {
    name: "scope/out"
    type: "NetOutput"
    input: "scope/relu:0"
    id: 3
  }
}
"""

# Original NHWC tensor (1, 2, 2, 3) = 0..11, and its NC1HWC0 (1, 1, 2, 2, 16) device form laid
# out by hand: dev[0, 0, h, w, c] = nhwc[0, h, w, c] for c < 3, zero padding elsewhere.
NHWC = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
DEVICE = np.zeros((1, 1, 2, 2, 16), np.float32)
DEVICE[0, 0, :, :, :3] = NHWC[0]
INPUT = np.array([1.0, 2.0, np.nan, np.inf], np.float32)  # min 1, max 2, mean 1.5, 1 NaN, 1 Inf


def _dump_dir(root):
    folder = root / "dump" / "20240101000000" / "0" / "ge_default_20240101000000_1" / "1" / "0"
    folder.mkdir(parents=True)
    write_dump_file(
        folder / CONV,
        "scope/conv1/Conv2D",
        inputs=[INPUT],
        outputs=[DumpTensor(DEVICE, format="NC1HWC0", original_shape=(1, 2, 2, 3), original_name="scope/conv1/Conv2D",
                            original_format="NHWC")],
        dump_time=TS,
    )
    write_stats_csv(folder / STATS, [StatsRow("Output", 0, 64, "DT_FLOAT", "ND", (4, 4), 3.0, -1.0, 0.5, 16, 0, 0, 0)])
    payload = bytes.fromhex("5a5a5a5a" "00000000" "01000000" "00000000" "00000000" "58000000")
    payload += struct.pack("<11Q", 0, 2, 5, 0, 0, 0, 0, 0, 3, 1, 0x40) + bytes(2048 - 24 - 88)
    write_opdebug_file(folder / OPDEBUG, decode_opdebug(payload), dump_time=TS + 2)
    write_dump_file(folder / HASHED, "matmul", outputs=[np.ones((2, 2), np.int32)], dump_time=TS + 3)
    write_mapping(folder / "mapping.csv", {HASHED: HASHED_REAL})
    (folder / "notes.txt").write_text("not an artefact")
    graphs = root / "graphs"
    graphs.mkdir()
    (graphs / "ge_proto_00000003_graph_1_Build.txt").write_text(GRAPH_TEXT)
    (graphs / "ge_onnx_00000003_graph_1_Build.pbtxt").write_text("ir_version: 3\n")
    return folder, graphs


def _run(capsys, argv):
    code = main(["parse"] + argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_over_a_dump_tree_and_graph_folder(tmp_path, capsys):
    folder, graphs = _dump_dir(tmp_path)
    code, out, err = _run(capsys, [str(tmp_path / "dump"), str(graphs), "--json"])
    assert code == 0, err
    assert err == ""
    doc = json.loads(out)
    by_name = {os.path.basename(item["path"]): item for item in doc["files"]}
    assert sorted(by_name) == sorted(
        [CONV, STATS, OPDEBUG, HASHED, "mapping.csv", "ge_proto_00000003_graph_1_Build.txt",
         "ge_onnx_00000003_graph_1_Build.pbtxt"]
    )
    assert doc["skipped"] == [str(folder / "notes.txt")]
    assert doc["errors"] == []

    conv = by_name[CONV]
    assert conv["kind"] == "dump"
    assert conv["name"] == {"op_type": "Conv2D", "op_name": "scope_conv1_Conv2D", "task_id": 5, "stream_id": 2,
                            "timestamp": TS}
    header = conv["header"]
    assert (header["version"], header["op_name"], header["dump_time"]) == ("2.0", "scope/conv1/Conv2D", TS)
    (inp,) = header["inputs"]
    assert (inp["dtype"], inp["format"], inp["shape"], inp["size"]) == ("DT_FLOAT", "ND", [4], 16)
    assert inp["stats"] == {"count": 4, "nan": 1, "inf": 1, "min": 1.0, "max": 2.0, "mean": 1.5}
    (output,) = header["outputs"]
    assert (output["format"], output["shape"], output["original_shape"], output["size"]) == (
        "NC1HWC0", [1, 1, 2, 2, 16], [1, 2, 2, 3], 256)
    assert output["stats"] == {"count": 64, "nan": 0, "inf": 0, "min": 0.0, "max": 11.0, "mean": 66.0 / 64}

    stats = by_name[STATS]
    assert stats["kind"] == "stats" and stats["variant"] == "default"
    assert stats["rows"][0]["shape"] == [4, 4] and stats["rows"][0]["max_value"] == 3.0

    opdebug = by_name[OPDEBUG]
    assert opdebug["kind"] == "opdebug"
    entry = opdebug["overflow"]["entries"][0]
    assert (entry["unit"], entry["stream_id"], entry["task_id"], entry["core_id"], entry["status"]) == ("AIC", 2, 5, 3, 0x40)

    hashed = by_name[HASHED]
    assert hashed["name"]["op_type"] == "MatMul" and hashed["name"]["file_name"] == HASHED_REAL
    assert hashed["header"]["outputs"][0]["stats"]["mean"] == 1.0
    assert by_name["mapping.csv"]["mapping"] == {HASHED: HASHED_REAL}

    graph = by_name["ge_proto_00000003_graph_1_Build.txt"]
    assert graph["graph_file"]["stage"] == "Build"
    assert graph["graphs"] == [{"name": "ge_default_20240101000000_1", "op_count": 3}]
    onnx = by_name["ge_onnx_00000003_graph_1_Build.pbtxt"]
    assert onnx["kind"] == "graph_ignored" and "graphs" not in onnx


def test_text_output(tmp_path, capsys):
    folder, graphs = _dump_dir(tmp_path)
    code, out, _err = _run(capsys, [str(folder / CONV), str(graphs / "ge_proto_00000003_graph_1_Build.txt")])
    assert code == 0
    assert "{}: dump".format(folder / CONV) in out
    assert "  input[0] DT_FLOAT ND shape [4] original [4] size 16  min 1 max 2 mean 1.5 nan 1 inf 1" in out
    assert "  output[0] DT_FLOAT NC1HWC0 shape [1, 1, 2, 2, 16] original [1, 2, 2, 3] size 256" in out
    assert "  graph 'ge_default_20240101000000_1': 3 ops" in out


def test_to_npy_writes_original_shapes(tmp_path, capsys):
    folder, _graphs = _dump_dir(tmp_path)
    out_dir = tmp_path / "npy"
    code, _out, err = _run(capsys, [str(folder), "--to-npy", str(out_dir)])
    assert code == 0, err
    assert sorted(os.listdir(out_dir)) == sorted(
        [CONV + ".input.0.npy", CONV + ".output.0.npy", OPDEBUG + ".output.0.npy", HASHED + ".output.0.npy"]
    )
    np.testing.assert_array_equal(np.load(out_dir / (CONV + ".output.0.npy")), NHWC)
    np.testing.assert_array_equal(np.load(out_dir / (CONV + ".input.0.npy")), INPUT)
    assert np.load(out_dir / (OPDEBUG + ".output.0.npy")).shape == (2048,)


def test_malformed_files_give_one_line_each_and_exit_1(tmp_path, capsys):
    folder, _graphs = _dump_dir(tmp_path)
    good = folder / CONV
    small = tmp_path / "Add.tiny.1.2.3"
    small.write_bytes(b"\x01\x02\x03")
    truncated = tmp_path / "Add.cut.1.2.3"
    truncated.write_bytes(good.read_bytes()[:-10])
    bad_csv = tmp_path / "Add.bad.1.2.3.csv"
    bad_csv.write_text("Input/Output,Index\n")
    code, out, err = _run(capsys, [str(small), str(truncated), str(bad_csv), str(good)])
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert lines[0].startswith("npu-dump-hook: {} at byte 0: file too small (3 bytes)".format(small))
    (header_len,) = struct.unpack_from("<Q", good.read_bytes(), 0)
    output_offset = 8 + header_len + 16  # after the 16-byte input payload
    assert lines[1] == (
        "npu-dump-hook: {} at byte {}: payload of output[0] (256 bytes) runs past end of file ({} bytes)".format(
            truncated, output_offset, good.stat().st_size - 10)
    )
    assert lines[2].startswith("npu-dump-hook: {} at byte 0: line 1: header is neither".format(bad_csv))
    assert "{}: dump".format(good) in out  # the good file after the bad ones is still shown


def test_missing_path_is_a_usage_error_before_anything_is_read(tmp_path, capsys):
    folder, _graphs = _dump_dir(tmp_path)
    code, out, err = _run(capsys, [str(folder / CONV), str(tmp_path / "missing")])
    assert code == 2
    assert out == ""
    assert err == "npu-dump-hook: {}: no such file or folder\n".format(tmp_path / "missing")


def test_malformed_mapping_and_graph_in_json(tmp_path, capsys):
    (tmp_path / "mapping.csv").write_text("1,../x\n")
    (tmp_path / "ge_proto_00001_Build.txt").write_text('graph {\n  name: "g"\n  op {\n    name: "a\n')
    code, out, err = _run(capsys, [str(tmp_path), "--json"])
    assert code == 1
    doc = json.loads(out)
    rules = {os.path.basename(e["path"]): e for e in doc["errors"]}
    assert rules["mapping.csv"]["offset"] == 2 and "contains a path separator" in rules["mapping.csv"]["rule"]
    assert "ge_proto_00001_Build.txt" in rules and rules["ge_proto_00001_Build.txt"]["offset"] is not None
    assert len(err.splitlines()) == 2


def test_python_dash_m_parse(tmp_path):
    folder, _graphs = _dump_dir(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "npu_dump_hook", "parse", str(folder / STATS), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["files"][0]["rows"][0]["count"] == 16


def test_unknown_name_is_not_a_dump_file_and_the_rest_is_processed(tmp_path, capsys):
    folder, _graphs = _dump_dir(tmp_path)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x7fELF" + bytes(range(256)) * 4)  # was read as a malformed dump
    code, out, err = _run(capsys, [str(junk), str(folder / CONV)])
    assert code == 1
    assert err.splitlines() == ["npu-dump-hook: {}: not a dump file (its name matches no dump file, stats CSV, "
                                "Opdebug file, mapping.csv or ge_proto graph rule)".format(junk)]
    assert "{}: dump".format(folder / CONV) in out and str(junk) not in out
    code, out, err = _run(capsys, [str(junk), "--json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["files"] == [] and [e["path"] for e in doc["errors"]] == [str(junk)]
    assert "not a dump file" in doc["errors"][0]["rule"]


def test_folder_with_nothing_recognisable(tmp_path, capsys):
    _folder, graphs = _dump_dir(tmp_path)
    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "README.txt").write_text("hello")
    code, out, err = _run(capsys, [str(empty), str(graphs)])
    assert code == 1
    assert err == ("npu-dump-hook: {}: no dump files, stats CSVs, Opdebug files, mapping.csv or graph files "
                   "found\n".format(empty))
    assert "ge_proto_00000003_graph_1_Build.txt: graph" in out  # the other folder is still shown


def test_to_npy_that_is_a_file_exits_2(tmp_path, capsys):
    folder, _graphs = _dump_dir(tmp_path)
    (tmp_path / "f").write_text("")
    code, out, err = _run(capsys, [str(folder), "--to-npy", str(tmp_path / "f")])
    assert (code, out, err) == (2, "", "npu-dump-hook: --to-npy {}: not a folder\n".format(tmp_path / "f"))


def test_statistics_of_a_large_tensor_cost_a_bounded_amount_of_memory(tmp_path):
    # parse of a big float32 dump once needed > 3x its size in temporaries (masks, the finite
    # subset, a float64 copy of all of it); chunked, the extra memory stays far below the tensor.
    import tracemalloc

    from npu_dump_hook.cli import _parse
    from npu_dump_hook.formats.dump_file import DumpFile, write_dump_file

    values = np.random.RandomState(0).standard_normal(8 << 20).astype(np.float32)  # 32 MiB
    values[::1000] = np.nan
    values[5::1000] = np.inf
    path = str(tmp_path / "Add.big.1.2.1700000000000001")
    write_dump_file(path, "big", outputs=[values])
    finite = values[np.isfinite(values)].astype(np.float64)
    with DumpFile.open(path) as dump:
        tracemalloc.start()
        stats = _parse._tensor_stats(dump, dump.outputs[0])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < values.nbytes, peak  # was over 3x values.nbytes
    assert stats["nan"] == np.isnan(values).sum() and stats["inf"] == np.isinf(values).sum()
    assert stats["min"] == finite.min() and stats["max"] == finite.max()
    assert stats["mean"] == pytest.approx(finite.mean(), rel=1e-12)
