"""CLI contract of collect / verify / inspect (exit codes 0, 1, 2, 3; --json output)."""
import json
import os

import pytest

from npu_dump_hook import bundle
from npu_dump_hook.cli import main

from helpers.bundles import CONV, GRAPH_NAME, RELU, TIME_DIR, make_run, write

CHAIN = os.path.join("data", "dump", TIME_DIR, "0", GRAPH_NAME, "1", "0")


@pytest.fixture
def good(tmp_path):
    write(tmp_path / "b", make_run(tmp_path / "src"))
    return tmp_path / "b"


def test_verify_good_exit_0(good, capsys):
    assert main(["verify", str(good)]) == 0
    assert capsys.readouterr().out.strip() == "{}: ok".format(good)


def test_verify_tampered_exit_1(good, capsys):
    with open(str(good / CHAIN / CONV), "ab") as fh:
        fh.write(b"x")
    os.unlink(str(good / CHAIN / RELU))
    assert main(["verify", str(good)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert any(line.startswith("changed: data/dump/") and line.split(": ")[1].endswith(CONV) for line in lines)
    assert any(line.startswith("missing: data/dump/") and RELU in line for line in lines)
    assert "problem(s)" in captured.err


def test_verify_hostile_archive_exit_1(tmp_path, capsys):
    import io
    import tarfile

    evil = tmp_path / "evil.tar"
    with tarfile.open(str(evil), "w") as tar:
        info = tarfile.TarInfo("../escape")
        tar.addfile(info, io.BytesIO(b""))
    assert main(["verify", str(evil)]) == 1
    assert capsys.readouterr().out.startswith("unsafe: <bundle>: archive ")
    assert not (tmp_path.parent / "escape").exists()


def test_inspect_text_and_json(good, capsys):
    assert main(["inspect", str(good)]) == 0
    text = capsys.readouterr().out
    assert "backend emulated" in text and text.splitlines()[-1].split() == ["verify", "ok"]
    assert main(["inspect", "--json", str(good)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "npu_dump_hook/bundle@1"
    assert doc["verification"] == {"ok": True, "problems": []}
    assert doc["graph"]["name"] == GRAPH_NAME


def test_inspect_json_reports_problems(good, capsys):
    os.unlink(str(good / CHAIN / RELU))
    assert main(["inspect", "--json", str(good)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verification"]["ok"] is False
    assert {"kind": "missing", "path": "data/dump/{}/0/{}/1/0/{}".format(TIME_DIR, GRAPH_NAME, RELU),
            "detail": "listed in manifest-sha256.txt but absent"} in doc["verification"]["problems"]


def test_inspect_missing_bundle_exit_2(tmp_path, capsys):
    # a path given on the command line that does not exist is a usage error
    assert main(["inspect", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == "npu-dump-hook: {}: no such file or folder\n".format(tmp_path / "nope")


def test_usage_error_exit_2(capsys):
    assert main(["verify"]) == 2
    assert main(["collect", "--dump-path", "x", "--graph-dir", "y", "--out", "z", "--link", "reflink"]) == 2


def test_collect_end_to_end(tmp_path, capsys):
    located = make_run(tmp_path / "src")
    out = tmp_path / "out"
    argv = ["collect", "--dump-path", located.dump_path, "--graph-dir", os.path.dirname(located.graph_file),
            "--out", str(out), "--link", "copy"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("bundle {}: 10 files".format(out))
    doc = bundle.read_bundle(str(out))
    assert doc["backend"] == "npu"
    assert doc["dump"]["time_dir"] == TIME_DIR and doc["dump"]["steps"] == ["0"]
    assert doc["run"]["global_step"] == 0
    assert bundle.verify_bundle(str(out)) == []
    assert main(argv) == 3  # destination exists now
    assert capsys.readouterr().err.splitlines()[-1] == (
        "npu-dump-hook: --out {}: exists and is not empty (add --force to replace it)".format(out))
    assert main(argv + ["--force", "--archive", "tar.gz"]) == 0
    assert bundle.verify_bundle(str(out) + ".tar.gz") == []


def test_collect_nothing_found_exit_3(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "g").mkdir()
    assert main(["collect", "--dump-path", str(tmp_path / "d"), "--graph-dir", str(tmp_path / "g"),
                 "--out", str(tmp_path / "o")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("npu-dump-hook: --graph-dir {}: no Build graph file".format(tmp_path / "g"))
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()
