"""The large-model path (issue 23, "Two phases, automated"): statistics first, suspects, a dump of
the suspects only (dump_layer), its golden, the tensor compare.

* suspect selection on synthetic comparisons (compare --suspects-out, npu_dump_hook.suspects);
* run --dump-layer-from and its usage errors; the emulated NPU's dump_layer (Data inputs too);
* end to end with real TF (unmodified CNN, emulated NPU, ascend profile, scale fault on
  conv2/Conv2D): ``run --two-phase`` names the fault, the stats-only compare ranks it among the
  suspects, and the two-machine command sequence gives the same verdict.
"""
import json
import os
import sys

import pytest

from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare
from npu_dump_hook.errors import OptionError
from npu_dump_hook.suspects import SUSPECTS_SCHEMA, dump_layer_of, read_suspects, write_suspects

from helpers.runs import HELPERS, clean_env, run
from compare.test_stats_compare import _chain

SCRIPT = os.path.join(HELPERS, "unmodified_cnn.py")
SESSION_SCRIPT = os.path.join(HELPERS, "unmodified_session.py")
CLI = [sys.executable, "-m", "npu_dump_hook"]
FAULT_OP = "conv2/Conv2D"
NPU_FLAGS = ["--backend", "emulated", "--emulate-profile", "ascend", "--fault", FAULT_OP + "=scale=1.05"]


# -- suspect selection (synthetic: x -> a -> b -> c, b scaled) ------------------------------------

def test_suspects_are_the_first_divergence_and_its_producer_not_its_consumers(tmp_path):
    graph, step, golden = _chain(tmp_path, fault=1.05)
    doc = compare(step, golden, graph=graph, workers=1, suspects=5).doc
    found = doc["suspects"]
    assert found["schema"] == SUSPECTS_SCHEMA and found["source"]["mode"] == "stats"
    assert [(op["name"], op["reasons"]) for op in found["ops"]] == [("b", ["first_divergence"]), ("a", ["producer"])]
    assert found["ops"][1]["of"] == "b" and found["dump_layer"] == "b a"  # c (propagated) is no suspect
    assert found["first_divergence"]["npu_op"] == "b"


def test_a_nan_origin_is_a_suspect_without_any_golden(tmp_path):
    graph, step, _golden = _chain(tmp_path, nan_at=5)
    found = compare(step, graph=graph, workers=1, suspects=1).doc["suspects"]
    assert found["source"]["mode"] == "checks"
    assert [op["name"] for op in found["ops"]] == ["b", "a"] and found["ops"][0]["reasons"] == ["nan_inf_origin"]


def test_a_clean_comparison_has_no_suspects_and_writes_no_file(tmp_path, capsys):
    graph, step, golden = _chain(tmp_path, fault=1.0)
    target = str(tmp_path / "suspects.json")
    assert main(["compare", step, golden, "--graph", graph, "--workers", "1", "--suspects-out", target]) == 0
    assert not os.path.exists(target) and "suspects: none" in capsys.readouterr().err


def test_cli_suspects_out_writes_the_file_run_reads(tmp_path):
    graph, step, golden = _chain(tmp_path, fault=1.05)
    target = str(tmp_path / "suspects.json")
    assert main(["compare", step, golden, "--graph", graph, "--workers", "1", "--suspects-out", target,
                 "--suspects", "1"]) == 1
    assert dump_layer_of(target) == "b a" and read_suspects(target)["limit"] == 1
    assert main(["compare", step, golden, "--graph", graph, "--suspects", "2"]) == 2  # needs --suspects-out


@pytest.mark.parametrize("change, rule", [
    (lambda d: d.update(schema="other"), "schema must be"),
    (lambda d: d.update(ops=[]), "non-empty list"),
    (lambda d: d["ops"][0].update(name="two words"), "without spaces"),
    (lambda d: d["ops"][0].update(reasons=["guess"]), "reasons must be"),
    (lambda d: d.update(dump_layer="x"), "joined by single spaces"),
])
def test_a_bad_suspects_file_is_an_option_error_naming_it(tmp_path, change, rule):
    doc = {"schema": SUSPECTS_SCHEMA, "dump_layer": "b a", "ops": [
        {"name": "b", "rank": 1, "reasons": ["first_divergence"]}, {"name": "a", "rank": 2, "reasons": ["producer"]}]}
    path = str(tmp_path / "s.json")
    write_suspects(path, doc)
    assert dump_layer_of(path) == "b a"
    change(doc)
    with open(path, "w") as handle:
        json.dump(doc, handle)
    with pytest.raises(OptionError, match=rule) as info:
        read_suspects(path)
    assert info.value.value == path


def test_run_dump_layer_from_usage_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    script = str(tmp_path / "train.py")
    open(script, "w").close()
    assert main(["run", "--dump-layer-from", str(bad), "--", script]) == 2
    assert "--dump-layer-from" in capsys.readouterr().err
    good = str(tmp_path / "good.json")
    write_suspects(good, {"schema": SUSPECTS_SCHEMA, "dump_layer": "a", "ops": [
        {"name": "a", "rank": 1, "reasons": ["first_divergence"]}]})
    assert main(["run", "--dump-layer-from", good, "--dump-layer", "b", "--", script]) == 2
    assert main(["run", "--suspects", "3", "--", script]) == 2
    assert main(["run", "--two-phase", "--dump-data", "stats", "--", script]) == 2
    err = capsys.readouterr().err
    assert "give one" in err and "--suspects needs --two-phase" in err and "--dump-data does not go" in err


# -- the emulated NPU honours dump_layer (real TF, the runner) ------------------------------------

def test_dump_layer_dumps_the_chosen_op_and_its_data_input(tmp_path):
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([HELPERS, env.get("PYTHONPATH", "")])
    code, lines, err = run(CLI + ["run", "--backend", "emulated", "--dump-layer", "MatMul", "--output-dir",
                                  str(tmp_path / "out"), "--", SESSION_SCRIPT], str(tmp_path), env, timeout=600)
    assert code == 0, err[-3000:]
    dumped = sorted(name.split(".")[1] for _, _, files in os.walk(os.path.join(lines[-1], "data", "dump"))
                    for name in files)
    assert dumped == ["MatMul", "x"]  # the chosen op and the Data op feeding it, nothing else
    with open(os.path.join(lines[-1], "data", "bundle.json")) as handle:
        coverage = json.load(handle)["coverage"]
    assert coverage["selected"] == 1 and coverage["missing"] == [] and coverage["not_selected"] > 3
    assert coverage["expected"] == coverage["dumped"] + coverage["not_selected"]  # nothing missing
    code, shown, err = run(CLI + ["inspect", lines[-1]], str(tmp_path), env, timeout=300)
    line = [text for text in shown if text.startswith("coverage")][0]
    assert code == 0 and "1/1 chosen op(s) have dump files (dump_layer), {} not selected (not dumped by choice)".format(
        coverage["not_selected"]) in line and "missing" not in line, shown
    assert [text for text in shown if text.startswith("verify")][0].endswith("ok")


# -- end to end: --two-phase and the two-machine sequence -----------------------------------------

def _new_bundle(out, before):
    bundles = os.path.join(out, "bundles")
    new = sorted(set(os.listdir(bundles)) - before)
    assert len(new) == 1, new
    before.add(new[0])
    return os.path.join(bundles, new[0])


def _cli(cwd, argv):
    code, lines, err = run(CLI + argv, str(cwd), clean_env(), timeout=900)
    return code, lines, err


@pytest.fixture(scope="module")
def two_phase(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("two_phase")
    out = str(cwd / "out")
    code, lines, err = _cli(cwd, ["run", "--two-phase", "-v", "--suspects", "3"] + NPU_FLAGS + [
        "--output-dir", out, "--", SCRIPT, str(cwd / "model")])
    folders = [name for name in os.listdir(out) if name.startswith("two_phase_")]
    assert len(folders) == 1, err[-3000:]
    with open(os.path.join(out, folders[0], "two_phase.json")) as handle:
        record = json.load(handle)
    return {"code": code, "lines": lines, "err": err, "record": record, "folder": os.path.join(out, folders[0])}


def test_two_phase_names_the_faulted_convolution(two_phase):
    record = two_phase["record"]
    assert two_phase["code"] == 1 and record["exit_code"] == 1 and record["verdict"] == "fail", two_phase["err"][-3000:]
    assert record["first_divergence"]["npu_op"] == FAULT_OP and FAULT_OP in record["first_divergence"]["original_ops"]
    assert [p["phase"] for p in record["phases"]] == ["stats", "stats_golden", "targeted", "targeted_golden"]
    coverage = record["coverage"]
    assert coverage["missing_ops"] == 0 and coverage["not_selected_ops"] > 50 and coverage["dumped_ops"] >= 1
    assert any(line.startswith("verdict: FAIL; first divergence: " + FAULT_OP) for line in two_phase["lines"])
    for name in ("suspects.json", "stats_compare.json", "stats_compare.html", "compare.json", "compare.html"):
        assert os.path.isfile(os.path.join(two_phase["folder"], name)), name
    phases = {p["phase"]: p for p in record["phases"]}
    assert phases["targeted"]["dump_bytes"] > 0 and phases["stats_golden"]["dump_bytes"] == 0


def test_two_phase_verbose_reaches_every_pass(two_phase):
    """-v of run --two-phase: every pass's run gets it (their INFO logs), the comparisons show it."""
    commands = [line for line in two_phase["lines"] if line.startswith("[")]
    runs = [line for line in commands if "$ npu-dump-hook run " in line]
    assert len(runs) == 4 and all(" $ npu-dump-hook run -v " in line for line in runs), commands
    compares = [line for line in commands if "$ npu-dump-hook compare " in line]
    assert len(compares) == 2 and all(" $ npu-dump-hook compare -v " in line for line in compares), commands
    assert sum(1 for line in two_phase["err"].splitlines() if line.startswith("npu-dump-hook: info: ")) >= 4


def test_the_stats_only_compare_ranks_the_fault_among_the_suspects(two_phase):
    record = two_phase["record"]
    assert record["stats_first_divergence"]["npu_op"] == FAULT_OP
    found = read_suspects(record["suspects"]["file"])
    assert found["ops"][0]["name"] == FAULT_OP and found["ops"][0]["reasons"] == ["first_divergence"]
    assert found["source"]["mode"] == "stats" and found["limit"] == 3
    assert record["suspects"]["dump_layer"] == found["dump_layer"]


def test_two_machines_give_the_same_verdict(two_phase, tmp_path):
    """NPU box: stats run; golden box: its golden; compare --suspects-out; NPU box: --dump-layer-from;
    golden box: its golden; compare."""
    out, seen = str(tmp_path / "out"), set()
    os.makedirs(os.path.join(out, "bundles"))
    model = ["--", SCRIPT, str(tmp_path / "model")]
    assert _cli(tmp_path, ["run", "--dump-data", "stats", "--output-dir", out] + NPU_FLAGS + model)[0] == 0
    stats = _new_bundle(out, seen)
    assert _cli(tmp_path, ["run", "--golden-for", stats, "--output-dir", out] + model)[0] == 0
    stats_golden = _new_bundle(out, seen)
    suspects = str(tmp_path / "suspects.json")
    code, _, err = _cli(tmp_path, ["compare", stats, stats_golden, "--suspects-out", suspects, "--suspects", "3"])
    assert code == 1 and os.path.isfile(suspects), err[-3000:]
    assert dump_layer_of(suspects) == two_phase["record"]["suspects"]["dump_layer"]
    assert _cli(tmp_path, ["run", "--dump-layer-from", suspects, "--output-dir", out] + NPU_FLAGS + model)[0] == 0
    targeted = _new_bundle(out, seen)
    assert _cli(tmp_path, ["run", "--golden-for", targeted, "--output-dir", out] + model)[0] == 0
    golden = _new_bundle(out, seen)
    report = str(tmp_path / "compare.json")
    code, lines, err = _cli(tmp_path, ["compare", targeted, golden, "--json", report])
    with open(report) as handle:
        doc = json.load(handle)
    record = two_phase["record"]
    assert code == record["exit_code"] == 1
    assert doc["summary"]["verdict"] == record["verdict"]
    assert doc["first_divergence"]["npu_op"] == record["first_divergence"]["npu_op"] == FAULT_OP
    assert doc["coverage"] == record["coverage"]
    assert any(line.startswith("partial dump (dump_layer") for line in lines)
    with open(os.path.join(golden, "data", "golden", "golden_manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["dump_layer"]["dropped_files"] > 0  # the golden keeps what compare needs, not every tensor


def test_merged_suspects_keep_the_first_documents_ops_first():
    from npu_dump_hook.two_phase import merge_suspects

    def doc(*names):
        ops = [{"name": n, "rank": i + 1, "reasons": [r], "npu_op": n, "of": None} for i, (n, r) in enumerate(names)]
        return {"schema": SUSPECTS_SCHEMA, "dump_layer": " ".join(n for n, _ in names), "ops": ops,
                "source": {"mode": "x"}}

    merged = merge_suspects(doc(("o", "overflow"), ("a", "producer")), doc(("b", "first_divergence"), ("a", "producer"),
                                                                            ("o", "root_cause")))
    assert merged["dump_layer"] == "o a b" and [op["rank"] for op in merged["ops"]] == [1, 2, 3]
    assert merged["ops"][0]["reasons"] == ["overflow", "root_cause"]
    assert merge_suspects(None, doc(("b", "breached")))["dump_layer"] == "b"


def test_two_phase_overflow_first_dumps_the_overflowing_op(tmp_path):
    """The guide's session script (a plain Session: an Estimator's NaN-loss hook would end the
    script first), its MatMul overflowing: the overflow pass's first entry leads the suspects."""
    out = str(tmp_path / "out")
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([HELPERS, env.get("PYTHONPATH", "")])
    flags = ["--backend", "emulated", "--emulate-profile", "ascend", "--fault", "MatMul=overflow"]
    code, lines, err = run(CLI + ["run", "--two-phase", "-q", "--overflow-first", "--suspects", "1"] + flags + [
        "--output-dir", out, "--", SESSION_SCRIPT], str(tmp_path), env, timeout=900)
    folder = [os.path.join(out, n) for n in os.listdir(out) if n.startswith("two_phase_")][0]
    with open(os.path.join(folder, "two_phase.json")) as handle:
        record = json.load(handle)
    assert code == 1 and [p["phase"] for p in record["phases"]][:2] == ["overflow", "stats"], err[-3000:]
    assert os.path.isfile(os.path.join(folder, "overflow_report.json"))
    found = read_suspects(os.path.join(folder, "suspects.json"))
    assert found["ops"][0]["name"] == "MatMul" and "overflow" in found["ops"][0]["reasons"]
    assert record["first_divergence"]["npu_op"] == "MatMul" and record["coverage"]["missing_ops"] == 0
    runs = [line for line in lines if "$ npu-dump-hook run " in line]  # -q reaches every pass: no notice, no log
    assert len(runs) == 5 and all(" $ npu-dump-hook run -q " in line for line in runs), runs
    assert not [line for line in err.splitlines() if line.startswith("npu-dump-hook")], err[-3000:]
