"""Issue #20 item 6, the CLI side: a hostile name (an ESC sequence that clears the screen, one
that sets the terminal title, a lone surrogate from undecodable file name bytes, a C1 control)
never reaches stdout or stderr raw -- in the one-line errors, collect's summary and warnings,
verify's problem lines, inspect's text and bundle warnings, parse's output, the log lines the
CLI prints for the library, and compare's summary. Each command gets the name from a file,
folder or bundle.json it reads, built in the test."""
import json
import logging
import os
import re

import numpy as np
import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.formats.dump_file import write_dump_file

from helpers.bundles import CONV, GRAPH_NAME, TIME_DIR, list_bundle_json, make_run, write
from helpers.compare_synth import Synth

HOSTILE = "x\x1b[2J\x1b]0;title\x07\udcff\x9b"
ESCAPED = "x\\x1b[2J\\x1b]0;title\\x07\\udcff\\x9b"
# the same inside a document (bundle.json, a graph, a dump header): text there is valid UTF-8
TEXT = "x\x1b[2J\x1b]0;title\x07\x9b"
TEXT_ESCAPED = "x\\x1b[2J\\x1b]0;title\\x07\\x9b"
# what a terminal must never get raw: C0 controls but the line break, DEL, C1, lone surrogates
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
CHAIN = os.path.join("data", "dump", TIME_DIR, "0", GRAPH_NAME, "1", "0")


def _inert(capsys):
    """(stdout, stderr) of the last command, asserted free of raw control characters."""
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        found = RAW.search(text)
        assert found is None, "raw {!r} in {!r}".format(found.group(0), text)
    return captured.out, captured.err


def test_the_one_line_error_escapes_the_path(tmp_path, capsys):
    assert main(["verify", str(tmp_path / HOSTILE)]) == 2
    _out, err = _inert(capsys)
    assert err == "npu-dump-hook: {}: no such file or folder\n".format(tmp_path / ESCAPED)


def test_the_debug_traceback_is_escaped_too(tmp_path, capsys):
    assert main(["--debug", "parse", str(tmp_path / HOSTILE)]) == 2
    assert ESCAPED in _inert(capsys)[1]


def test_library_warnings_printed_by_the_cli_are_escaped(capsys):
    from npu_dump_hook.cli import _Logging

    with _Logging(logging.WARNING):
        logging.getLogger("npu_dump_hook.bundle").warning("skipped special file %s", HOSTILE)
    assert _inert(capsys)[1] == "npu-dump-hook: warning: skipped special file {}\n".format(ESCAPED)


def test_collect_summary_and_warnings(tmp_path, capsys):
    located = make_run(tmp_path / "src")
    step = os.path.join(located.steps[0].path)
    os.mkfifo(os.path.join(step, CONV + HOSTILE))  # skipped and reported by the walk
    out = tmp_path / ("out" + HOSTILE)
    assert main(["collect", "--dump-path", located.dump_path, "--graph-dir", os.path.dirname(located.graph_file),
                 "--out", str(out), "--link", "copy"]) == 0
    stdout, err = _inert(capsys)
    assert stdout.startswith("bundle {}: ".format(tmp_path / ("out" + ESCAPED)))
    assert "warning: skipped special file" in err and CONV + ESCAPED in err


@pytest.fixture
def hostile_bundle(tmp_path):
    """A written bundle whose bundle.json carries the name in a warning and the graph section,
    and whose dump folder holds an unlisted file of that name (a verify problem)."""
    dest = tmp_path / "b"
    write(dest, make_run(tmp_path / "src"))
    path = dest / "data" / "bundle.json"
    doc = json.loads(path.read_text())
    doc["warnings"] = ["bad graph " + TEXT]
    doc["graph"]["name"] = TEXT
    path.write_text(json.dumps(doc))
    list_bundle_json(dest)
    (dest / CHAIN / ("Relu." + HOSTILE + ".4.2.1700000000000009")).write_bytes(b"x")
    return dest


def test_verify_problem_lines(hostile_bundle, capsys):
    assert main(["verify", str(hostile_bundle)]) == 1
    out, _err = _inert(capsys)
    assert "Relu." + ESCAPED + ".4.2" in out


def test_inspect_text_and_bundle_warnings(hostile_bundle, capsys):
    assert main(["inspect", str(hostile_bundle)]) == 1
    out, _err = _inert(capsys)
    assert "bad graph " + TEXT_ESCAPED in out and "name " + TEXT_ESCAPED in out and "Relu." + ESCAPED in out


def test_inspect_json_escapes_as_json_does(hostile_bundle, capsys):
    assert main(["inspect", "--json", str(hostile_bundle)]) == 1
    out, _err = _inert(capsys)
    assert json.loads(out)["warnings"] == ["bad graph " + TEXT]  # the data kept, escaped in transit


def test_parse_output_and_errors(tmp_path, capsys):
    folder = tmp_path / HOSTILE
    folder.mkdir()
    write_dump_file(str(folder / "Relu.relu1.4.2.1700000000000002"), "relu" + TEXT,
                    outputs=[np.zeros(3, np.float32)])
    (folder / "mapping.csv").write_bytes("1,Relu.{}.4.2.1700000000000002\n".format(HOSTILE).encode(
        "utf-8", "surrogateescape"))
    (tmp_path / ("notes" + HOSTILE)).write_text("not a dump artefact")
    assert main(["parse", str(folder), str(tmp_path / ("notes" + HOSTILE))]) == 1
    out, err = _inert(capsys)
    assert str(tmp_path / ESCAPED) in out and "relu" in out
    assert "notes" + ESCAPED in err


def test_compare_summary_and_errors(tmp_path, capsys):
    synth = Synth(tmp_path)
    value = np.linspace(1, 2, 12, dtype=np.float32)
    synth.op("x", "Data", value, no_task=True)
    synth.op("evil", "Mul", value, inputs=["x:0"], npu=value * np.float32(1.5), original_names=["Mul" + TEXT])
    graph, step, golden = synth.write()
    open(os.path.join(golden, "notes" + HOSTILE), "w").close()
    assert main(["compare", step, golden, "--graph", graph, "--workers", "1"]) == 1
    out, err = _inert(capsys)
    assert "Mul" + TEXT_ESCAPED in out and "notes" + ESCAPED in err
    assert main(["compare", str(tmp_path / HOSTILE)]) == 2
    assert ESCAPED in _inert(capsys)[1]
