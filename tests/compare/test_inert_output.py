"""Issue #20 item 6 and the writer half of item 10: what compare prints and writes is inert.

Control characters in names reach the terminal as visible escapes, CSV cells a spreadsheet
would run as formulas are neutralised, report files keep the umask, and lone surrogates in
names (undecodable file name bytes) never stop the reports from being written."""
import csv
import io
import json
import logging
import os
import stat

import numpy as np
import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare
from npu_dump_hook._inert import csv_cell, printable

from helpers.compare_synth import Synth

ESC_VERDICT = "\x1b[1A\x1b[2K\rverdict: PASS"


def _faulted_with_hostile_original_names(root):
    synth = Synth(root)
    value = np.linspace(1, 2, 12, dtype=np.float32)
    synth.op("x", "Data", value, no_task=True)
    synth.op("evil", "Mul", value, inputs=["x:0"], npu=value * np.float32(1.5),
             original_names=["scope/Mul" + ESC_VERDICT + "\x07\x7f\x9b"])
    return synth


def test_control_characters_in_names_are_escaped_in_the_summary(tmp_path):
    synth = _faulted_with_hostile_original_names(tmp_path)
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.exit_code == 1
    text = result.summary_text()
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7f <= ord(c) <= 0x9f for c in text)
    assert "scope/Mul\\x1b[1A\\x1b[2K\\x0dverdict: PASS\\x07\\x7f\\x9b" in text
    assert result.doc["first_divergence"]["original_ops"] == ["scope/Mul" + ESC_VERDICT + "\x07\x7f\x9b"]  # data kept


def test_control_characters_in_a_golden_file_name_are_escaped_in_the_warning(tmp_path, caplog):
    synth = Synth(tmp_path)
    synth.op("a", "Relu", np.ones(4, np.float32))
    graph, step, golden = synth.write()
    open(os.path.join(golden, "clear\x1b[2J\x1b[H.txt"), "w").close()
    with caplog.at_level(logging.WARNING):
        result = compare(step, golden, graph=graph, workers=1)
    assert any("clear\x1b[2J" in w for w in result.doc["warnings"])  # the document keeps the name
    logged = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert logged and "\x1b" not in logged[0] and "clear\\x1b[2J\\x1b[H.txt" in logged[0]


def test_the_cli_prints_no_escape_sequence(tmp_path, capsys):
    synth = _faulted_with_hostile_original_names(tmp_path)
    bundle = synth.bundle()
    assert main(["compare", bundle, "--workers", "1"]) == 1
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out and "\x1b" not in captured.err
    assert "verdict: FAIL" in captured.out and "\\x1b[1A" in captured.out


@pytest.mark.parametrize("text, cell", [
    ("=1+2", "'=1+2"), ("+SUM(A1)", "'+SUM(A1)"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("-0.5", "-0.5"), ("+1.5e-05", "+1.5e-05"), ("-12", "-12"),
    ("NaN", "NaN"), ("scope/op", "scope/op"), ("(0.1;0.2),(0.1;0.2)", "(0.1;0.2),(0.1;0.2)")])
def test_csv_cells_that_start_a_formula_are_prefixed_with_a_quote(text, cell):
    assert csv_cell(text) == cell


def test_csv_report_neutralises_formula_names_and_keeps_numbers(tmp_path):
    synth = Synth(tmp_path)
    value = np.linspace(-2, -1, 8, dtype=np.float32)
    names = ["=HYPERLINK(\"http://x\")", "+1+1", "-cmd", "@SUM(1)"]
    for number, name in enumerate(names):
        synth.op(name, "Relu", value, npu=value * np.float32(1.001), original_names=[name, "\tTAB"],
                 origin=("golden{}".format(number), 0))
    graph, step, golden = synth.write()
    rows = list(csv.reader(io.StringIO(compare(step, golden, graph=graph, workers=1).csv())))[1:]
    assert sorted(r[2] for r in rows) == sorted("'" + n for n in names)
    assert all(r[5] == "'" + r[2][1:] + ",\tTAB" for r in rows)  # the joined GroundTruth starts like the name
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")) and (not cell.startswith("-") or float(cell) < 0)
        assert float(row[9]) == pytest.approx(1.0)  # CosineSimilarity is a number


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_report_files_keep_the_umask(tmp_path, umask, mode):
    synth = Synth(tmp_path)
    synth.op("a", "Relu", np.ones(4, np.float32))
    bundle = synth.bundle()
    outputs = {ext: str(tmp_path / ("r." + ext)) for ext in ("csv", "json", "html")}
    previous = os.umask(umask)
    try:
        assert main(["compare", bundle, "--workers", "1"] + [a for ext, path in sorted(outputs.items())
                                                             for a in ("--" + ext, path)]) == 0
    finally:
        os.umask(previous)
    for path in outputs.values():
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, path


def _surrogate_run(root):
    """A dump file and its golden file whose op name holds the byte 0xff (a lone surrogate)."""
    synth = Synth(root)
    synth.op("known", "Relu", np.ones(4, np.float32))
    synth.op("stranger", "Relu", np.ones(4, np.float32) * 2)
    graph, step, golden = synth.write()
    other = Synth(os.path.join(str(root), "other"))
    other.op("known", "Relu", np.ones(4, np.float32))
    for folder in (step, golden):
        for name in os.listdir(folder):
            if "stranger" in name:
                os.rename(os.path.join(folder, name), os.path.join(folder, name.replace("stranger", "str\udcffanger")))
    return other.write()[0], step, golden


def test_lone_surrogates_in_names_never_stop_the_reports(tmp_path, capsys):
    graph, step, golden = _surrogate_run(tmp_path)
    outputs = [str(tmp_path / name) for name in ("r.csv", "r.json", "r.html")]
    code = main(["compare", step, golden, "--graph", graph, "--workers", "1",
                 "--csv", outputs[0], "--json", outputs[1], "--html", outputs[2]])
    assert code == 1, capsys.readouterr()  # incomplete: the golden file's name is no msaccucmp name
    with open(outputs[0], "rb") as handle:
        assert "str\\udcffanger".encode() in handle.read()
    with open(outputs[1], encoding="utf-8") as handle:
        rows = json.load(handle)["rows"]
    assert {r["npu_op"] for r in rows} == {"known", "str\udcffanger"}
    with open(outputs[2], "rb") as handle:
        handle.read().decode("utf-8")  # valid UTF-8
    captured = capsys.readouterr()
    assert "verdict: INCOMPLETE" in captured.out and "str\\udcffanger" in captured.err  # the skipped golden file


def test_printable_escapes_c0_del_c1_and_surrogates():
    assert printable("a\x00b\x1bc\x7fd\x85e\udcfff\u00e9") == "a\\x00b\\x1bc\\x7fd\\x85e\\udcfff\u00e9"
