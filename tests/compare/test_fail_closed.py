"""Issue #20 item 9 (first half) and item 10 (golden dtype): compare never passes on what it
did not compare. Each hostile input is built here; without ``allow_uncompared`` the verdict
is "incomplete" (exit 1), with it the compared rows are judged alone."""
import os

import numpy as np
import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare

from helpers.compare_synth import Synth, chain


def _run(root, dump_mode="output"):
    synth = Synth(root, dump_mode=dump_mode)
    start = np.linspace(1, 2, 24, dtype=np.float32).reshape(4, 6)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 3, start)
    return synth


def _golden_file(golden, op):
    return os.path.join(golden, [n for n in os.listdir(golden) if n.startswith(op.replace("/", "_") + ".")][0])


def _dump_file(step, op):
    return os.path.join(step, [n for n in os.listdir(step) if ".{}.".format(op.replace("/", "_")) in n][0])


def _pickled(golden, step):
    path = _golden_file(golden, "op/add_1")
    os.remove(path)
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)


def _f3_descr(golden, step):
    path = _golden_file(golden, "op/add_1")
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data.replace(b"'descr': '<f4'", b"'descr': '<f3'"))


def _truncated_golden(golden, step):
    path = _golden_file(golden, "op/add_1")
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) - 16)


def _truncated_dump(golden, step):
    path = _dump_file(step, "op/add_1")
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) - 16)


def _shape_mismatch(golden, step):
    path = _golden_file(golden, "op/add_1")
    np.save(path[:-len(".npy")], np.zeros((5, 5), np.float32))


def _lying_header(golden, step):
    """The .npy header claims 10x more elements than the file holds."""
    path = _golden_file(golden, "op/add_1")
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data.replace(b"'shape': (4, 6)", b"'shape': (40, 6)"))


def _wrong_golden_folder(golden, step):
    for name in os.listdir(golden):
        os.rename(os.path.join(golden, name), os.path.join(golden, name.replace("op_add", "other_add")))


HOSTILE = {"pickled golden": (_pickled, "unreadable golden file"),
           "<f3 golden": (_f3_descr, "unreadable golden file"),
           "truncated golden": (_truncated_golden, "unreadable golden file"),
           "truncated dump": (_truncated_dump, "unreadable dump file"),
           "shape mismatch": (_shape_mismatch, "shape mismatch"),
           "lying .npy header": (_lying_header, "unreadable golden file"),
           "wrong golden folder": (_wrong_golden_folder, "no golden file")}


@pytest.mark.parametrize("dump_mode", ["output", "all"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_uncompared_dumps_make_the_verdict_incomplete(tmp_path, case, dump_mode):
    spoil, category = HOSTILE[case]
    synth = _run(tmp_path, dump_mode)
    graph, step, golden = synth.write()
    spoil(golden, step)
    result = compare(step, golden, graph=graph, workers=1)
    summary = result.doc["summary"]
    assert category in summary["not_compared_reasons"], summary
    assert summary["verdict"] == "incomplete" and summary["incomplete"] and result.exit_code == 1
    assert "verdict: INCOMPLETE" in result.summary_text() and "--allow-uncompared" in result.summary_text()
    allowed = compare(step, golden, graph=graph, workers=1, allow_uncompared=True)
    assert allowed.doc["summary"]["incomplete"] and allowed.doc["summary"]["allow_uncompared"]
    if allowed.doc["summary"]["compared"]:
        assert allowed.doc["summary"]["verdict"] == "pass" and allowed.exit_code == 0
    else:  # nothing compared: nothing to pass on, allowed or not
        assert allowed.doc["summary"]["verdict"] == "incomplete" and allowed.exit_code == 1


def test_an_f3_golden_is_a_row_with_a_reason_not_an_error(tmp_path):
    synth = _run(tmp_path)
    graph, step, golden = synth.write()
    _f3_descr(golden, step)
    rows = {r["npu_op"]: r for r in compare(step, golden, graph=graph, workers=1).doc["rows"]}
    assert rows["op/add_1"]["fail_reason"].startswith("unreadable golden file: ")
    assert rows["op/add_0"]["status"] == rows["op/add_2"]["status"] == "ok"


def test_a_fault_still_fails_rather_than_incomplete(tmp_path):
    synth = Synth(tmp_path)
    start = np.linspace(1, 2, 24, dtype=np.float32)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 3, start, fault_at=0)
    graph, step, golden = synth.write()
    _truncated_dump(golden, step)
    result = compare(step, golden, graph=graph, workers=1)
    assert result.doc["summary"]["verdict"] == "fail" and result.doc["summary"]["incomplete"]


def test_tensors_without_numbers_do_not_make_it_incomplete(tmp_path):
    synth = _run(tmp_path)
    synth.op("text", "StringJoin", np.array([b"ab", b"cd"]))
    graph, step, golden = synth.write()
    result = compare(step, golden, graph=graph, workers=1)
    assert result.doc["summary"]["not_compared_reasons"] == {"data type not comparable": 1}
    assert result.doc["summary"]["verdict"] == "pass" and result.exit_code == 0


def test_the_cli_exits_1_incomplete_unless_allowed(tmp_path, capsys):
    synth = _run(tmp_path)
    synth.write()
    _pickled(synth.golden_dir, synth.step_dir)
    bundle = synth.bundle()
    html = str(tmp_path / "r.html")
    assert main(["compare", bundle, "--workers", "1", "--html", html]) == 1
    with open(html, encoding="utf-8") as handle:
        page = handle.read()
    assert "verdict-incomplete" in page and 'id="incomplete"' in page
    out = capsys.readouterr().out
    assert "verdict: INCOMPLETE" in out and "unreadable golden file" in out
    assert main(["compare", bundle, "--workers", "1", "--allow-uncompared"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    assert main(["compare", "--help"]) == 0
    assert "--allow-uncompared" in capsys.readouterr().out
