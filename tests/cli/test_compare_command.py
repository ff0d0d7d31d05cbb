"""``npu-dump-hook compare``: exit codes 0/1/2/3, the CSV header, the report files."""
import csv
import json
import os

import numpy as np
import pytest

from npu_dump_hook.cli import main

from helpers.compare_synth import Synth, chain

HEADER = ("Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,TensorIndex,Shape,CosineSimilarity,"
          "MaxAbsoluteError,AccumulatedRelativeError,RelativeEuclideanDistance,KullbackLeiblerDivergence,"
          "StandardDeviation,MeanAbsoluteError,RootMeanSquareError,MaxRelativeError,MeanRelativeError,"
          "CompareFailReason")


def _bundle(root, fault_at=None):
    synth = Synth(root, dump_mode="all")
    start = np.linspace(-2, 2, 30, dtype=np.float32).reshape(5, 6)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 4, start, fault_at=fault_at)
    return synth.bundle()


def test_clean_bundle_exits_0_and_writes_csv_json_with_msaccucmp_header(tmp_path, capsys):
    bundle = _bundle(tmp_path / "run")
    out_csv, out_json = str(tmp_path / "r.csv"), str(tmp_path / "r.json")
    assert main(["compare", bundle, "--csv", out_csv, "--json", out_json, "--workers", "1"]) == 0
    with open(out_csv) as handle:
        lines = handle.read().splitlines()
    assert lines[0] == HEADER
    rows = list(csv.reader(lines[1:]))
    assert [r[7] for r in rows] == ["op/add_{}:{}:0".format(i, d) for i in range(4) for d in ("input", "output")]
    with open(out_json) as handle:
        doc = json.load(handle)
    assert doc["summary"]["verdict"] == "pass" and len(doc["rows"]) == 8
    out = capsys.readouterr().out
    assert "verdict: PASS" in out and len(out.splitlines()) <= 25


def test_fault_exits_1_naming_the_op(tmp_path, capsys):
    bundle = _bundle(tmp_path / "run", fault_at=2)
    assert main(["compare", bundle, "--workers", "2"]) == 1
    out = capsys.readouterr().out
    assert "first divergence: row 5 op/add_2 (Add) output:0" in out


def test_thresholds_from_the_command_line(tmp_path, capsys):
    bundle = _bundle(tmp_path / "run", fault_at=2)
    assert main(["compare", bundle, "--magnitude-err-max", "0.1", "--workers", "1"]) == 0
    assert main(["compare", bundle, "--magnitude-err-max", "off", "--mean-rel-err", "0.01", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "thresholds: cosine >= 0.99, mean rel. err <= 0.01 (off: magnitude, rel. euclidean, max rel. err, " \
        "scalars)" in out


@pytest.mark.parametrize("argv, needle", [
    (["--cosine-min", "abc"], "--cosine-min"),
    (["--workers", "0"], "--workers"),
    (["--max-rel-err", "-1"], "--max-rel-err"),
    (["--ops", "("], "ops"),
])
def test_bad_option_values_exit_2(tmp_path, capsys, argv, needle):
    bundle = _bundle(tmp_path / "run")
    assert main(["compare", bundle] + argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_missing_paths_exit_2(tmp_path, capsys):
    bundle = _bundle(tmp_path / "run")
    assert main(["compare", str(tmp_path / "nope")]) == 2
    assert main(["compare", bundle, str(tmp_path / "nogolden")]) == 2
    assert main(["compare", bundle, "--graph", str(tmp_path / "g.txt")]) == 2
    assert main(["compare", bundle, "--csv", str(tmp_path / "no" / "r.csv")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "NPU {}".format(tmp_path / "nope") in err[0] and "GOLDEN" in err[1] and "--graph" in err[2]
    assert "--csv" in err[3]


def test_unusable_inputs_exit_3(tmp_path, capsys):
    assert main(["compare", str(tmp_path)]) == 3  # a folder that is no bundle, without --graph
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar")
    assert main(["compare", str(junk)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert str(tmp_path) in err[0] and "--graph" in err[0]
    assert str(junk) in err[1]


def test_html_report_is_written(tmp_path):
    bundle = _bundle(tmp_path / "run", fault_at=1)
    target = str(tmp_path / "r.html")
    assert main(["compare", bundle, "--html", target, "--workers", "1"]) == 1
    with open(target, encoding="utf-8") as handle:
        text = handle.read()
    assert text.lstrip().lower().startswith("<!doctype html") and "op/add_1" in text
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".r.html")]


def test_help_shows_the_library_defaults_without_loading_numpy(capsys):
    import subprocess
    import sys

    from npu_dump_hook.cli._compare import HELP_DEFAULTS
    from npu_dump_hook.compare import DEFAULT_THRESHOLDS

    shown = {k: v for k, v in DEFAULT_THRESHOLDS.as_dict().items() if isinstance(v, float)}
    assert HELP_DEFAULTS == shown
    code = ("import sys; from npu_dump_hook.cli import build_parser; build_parser(); "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, check=True).stdout
    assert out.decode().strip() == "False"
