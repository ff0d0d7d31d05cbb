"""The two-process comparison workflow end to end, through the command line, real TensorFlow.

An unmodified CNN script (tests/helpers/unmodified_cnn.py: the sample CNN, its shuffled data)
runs three ways, each in its own process, as on two machines:

    npu-dump-hook run --backend emulated --emulate-profile ascend [--fault OP=SPEC] -- unmodified_cnn.py
    npu-dump-hook run --golden-for NPU_BUNDLE -- unmodified_cnn.py          # the golden run
    npu-dump-hook compare NPU_BUNDLE GOLDEN_BUNDLE

A kernel fault must be the first divergence, with every op upstream of it within float16
tolerance (the compare defaults) and the ops between it and the logits beyond it; the same
workflow without a fault must pass; a golden run fed another batch (--no-replay-inputs: by default
it replays the NPU step's batch) must be refused, or (--on-mismatch warn) compared as "input
inconsistent". Last, ``npu-dump-hook demo --compare``,
which runs the same three acts on the bundled sample model.
"""
import json
import os
import re
import shlex
import sys

import pytest

from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.cli import main
from npu_dump_hook.cli._demo import DEFAULT_FAULT_OPS, DEFAULT_FAULT_SPEC

from npu_dump_hook._cli_conventions import EXIT_SCRIPT_ERROR

from helpers.runs import HELPERS, SESSION, clean_env, run

SCRIPT = os.path.join(HELPERS, "unmodified_cnn.py")
CLI = [sys.executable, "-m", "npu_dump_hook"]
FAULT_OP = "conv2/Conv2D"  # the second convolution: conv1/pool1 upstream, pool2/fc1/logits downstream
FAULT_SCALE = 1.05
LOGITS = "logits/BiasAdd"


def _run_script(cwd, name, flags, *script_args):
    """``npu-dump-hook run FLAGS -- unmodified_cnn.py MODEL_DIR ARGS`` in ``cwd/name``:
    (status, the bundle path it printed last or None, stderr)."""
    folder = os.path.join(str(cwd), name)
    os.makedirs(folder)
    argv = CLI + ["run", "--output-dir", os.path.join(folder, "out")] + list(flags) + [
        "--", SCRIPT, os.path.join(folder, "model")] + list(script_args)
    code, lines, err = run(argv, folder, clean_env(), timeout=600)
    bundle = lines[-1] if lines and os.path.isdir(lines[-1]) else None
    return code, bundle, err


def _npu_run(cwd, name, faults=()):
    flags = ["--backend", "emulated", "--emulate-profile", "ascend"]
    for op, spec in faults:
        flags += ["--fault", "{}={}".format(op, spec)]
    code, bundle, err = _run_script(cwd, name, flags)
    assert code == 0 and bundle, err[-3000:]
    return bundle


def _golden_run(cwd, name, npu_bundle, flags=(), data_seed=None):
    """The golden run of ``npu_bundle`` (``--golden-for``), fed the images of ``data_seed``."""
    return _run_script(cwd, name, ["--golden-for", npu_bundle] + list(flags),
                       *([str(data_seed)] if data_seed is not None else []))


def _compare(tmp_path, npu, golden):
    """``npu-dump-hook compare NPU GOLDEN --json F``: (exit code, stdout, the JSON document)."""
    target = os.path.join(str(tmp_path), "compare-{}.json".format(len(os.listdir(str(tmp_path)))))
    code, lines, err = run(CLI + ["compare", npu, golden, "--json", target], str(tmp_path), clean_env())
    assert code in (0, 1), err[-3000:]
    with open(target) as handle:
        return code, "\n".join(lines), json.load(handle)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The four runs of the workflow: a faulted and a healthy NPU run, the golden run of each."""
    cwd = tmp_path_factory.mktemp("two_process")
    faulted = _npu_run(cwd, "npu_faulted", [(FAULT_OP, "scale={}".format(FAULT_SCALE))])
    healthy = _npu_run(cwd, "npu_healthy")
    result = {"cwd": cwd, "faulted": faulted, "healthy": healthy}
    for key, npu in (("faulted_golden", faulted), ("healthy_golden", healthy)):
        code, bundle, err = _golden_run(cwd, key, npu)
        assert code == 0 and bundle, err[-3000:]
        result[key] = bundle
    return result


# -- the graph: what is upstream and downstream of the faulted op --------------------------------


def _tf_inputs(bundle):
    """``{op: [data input ops]}`` of the TF graph the bundle recorded (data/tf/graph.pbtxt)."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    with open(os.path.join(bundle, "data", "tf", "graph.pbtxt")) as handle:
        text_format.Parse(handle.read(), graph)
    return {node.name: [name.split(":")[0] for name in node.input if not name.startswith("^")]
            for node in graph.node}


def _closure(start, edges):
    seen, todo = set(), [start]
    while todo:
        for other in edges.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def _consumers(inputs):
    out = {}
    for op, sources in inputs.items():
        for source in sources:
            out.setdefault(source, []).append(op)
    return out


def _row_ops(row):
    """The TF ops a row shows: a fused node's originals, else the op of its golden tensor."""
    if row["ground_truth"]:
        return set(row["ground_truth"])
    return {row["golden_tensor"].rsplit(":", 1)[0]} if row["golden_tensor"] else set()


# -- (a) a faulted kernel, and the same run without it --------------------------------------------


def test_npu_and_golden_runs_start_from_the_same_state_and_batch(runs):
    for npu_key in ("faulted", "healthy"):
        npu, golden = read_bundle(runs[npu_key]), read_bundle(runs[npu_key + "_golden"])
        assert npu["backend"] == "emulated" and golden["backend"] == "reference"
        assert npu["run"]["emulator"]["profile"] == "ascend" and npu["run"]["emulator"]["golden_in_run"] is False
        assert npu["run"]["emulator"]["faults"] == ({FAULT_OP: "scale={}".format(FAULT_SCALE)} if npu_key == "faulted"
                                                    else {})
        assert golden["fingerprints"]["state"] == npu["fingerprints"]["state"]
        assert golden["fingerprints"]["batch"] == npu["fingerprints"]["batch"]
        assert {e["name"] for e in npu["fingerprints"]["batch"]} == {"IteratorGetNext:0", "IteratorGetNext:1"}
        assert golden["golden_for"]["match"] is True and golden["golden_for"]["path"] == runs[npu_key]
        assert verify_bundle(runs[npu_key]) == [] and verify_bundle(runs[npu_key + "_golden"]) == []


def test_the_faulted_op_is_the_first_divergence(runs, tmp_path):
    code, out, doc = _compare(tmp_path, runs["faulted"], runs["faulted_golden"])
    assert code == 1, out
    first = doc["first_divergence"]
    assert FAULT_OP in first["original_ops"], first
    assert doc["summary"]["input_inconsistent"] is False
    assert "first divergence: " in out and FAULT_OP in out.split("first divergence: ")[1].splitlines()[0]
    # the fault's size, as the comparison measures it: |npu| / |golden| - 1 = scale - 1
    assert first["metrics"]["RelativeEuclideanDistance"] == pytest.approx(FAULT_SCALE - 1, abs=0.005)


def test_upstream_ops_match_within_float16_tolerance_and_downstream_ones_do_not(runs, tmp_path):
    _code, _out, doc = _compare(tmp_path, runs["faulted"], runs["faulted_golden"])
    limits = doc["thresholds"]
    inputs = _tf_inputs(runs["faulted"])
    upstream = _closure(FAULT_OP, inputs)
    downstream = _closure(FAULT_OP, _consumers(inputs))
    to_logits = downstream & (_closure(LOGITS, inputs) | {LOGITS})  # on a path from the fault to the logits
    assert {"conv1/Relu", "pool1/MaxPool", "IteratorGetNext"} <= upstream and "pool2/MaxPool" in to_logits
    rows = [r for r in doc["rows"] if r["status"] != "not_compared"]
    above = [r for r in rows if _row_ops(r) and _row_ops(r) <= upstream]
    below = [r for r in rows if _row_ops(r) & to_logits]
    at = [r for r in rows if FAULT_OP in _row_ops(r)]
    assert len(above) >= 8 and len(below) >= 6 and at, (len(above), len(below))
    for row in above:  # within float16 tolerance: the compare defaults
        assert row["status"] == "ok" and row["breached"] == [], row
        assert row["metrics"]["CosineSimilarity"] >= limits["cosine_min"], row
        assert row["magnitude_error"] <= limits["magnitude_err_max"], row
    for row in at + below:  # beyond it: the faulted op's own output and everything it feeds on
        assert row["breached"], row
        assert row["magnitude_error"] > 2 * limits["magnitude_err_max"], row
    assert [r["status"] for r in at if r["npu_op"] == doc["first_divergence"]["npu_op"]] == ["root_cause"]
    assert {r["status"] for r in below} == {"propagated"}
    assert doc["summary"]["root_causes"] == 1


# TF 1.15 initialises the CNN differently; there its healthy float16 backward pass crosses the
# magnitude limit (0.01) in conv1's gradient reductions (BiasAddGrad 0.0137, Conv2DBackpropFilter
# 0.0114, the Adam updates fed by them up to 0.0228), each explained by its ReluGrad /
# Conv2DBackpropInput input, which is further from golden (relative Euclidean distance 0.072) while
# within the limits: propagated, no root cause, so the comparison passes. TF 2.15 stays under 0.001.
def test_without_a_fault_the_comparison_passes(runs, tmp_path):
    code, out, doc = _compare(tmp_path, runs["healthy"], runs["healthy_golden"])
    assert code == 0, out
    summary = doc["summary"]
    assert summary["verdict"] == "pass" and summary["root_causes"] == 0 and summary["not_compared"] == 0
    breached = [r for r in doc["rows"] if r["breached"]]
    assert len(breached) == summary["breached"] == summary["propagated"]
    assert all(r["status"] == "propagated" for r in breached), [(r["npu_op"], r["status"]) for r in breached]
    assert len(breached) <= 10, [r["npu_op"] for r in breached]  # a few gradient reductions at most
    assert summary["compared"] > 100 and doc["first_divergence"] is None
    # float16 numerics did run: the Cube ops' outputs differ from the fp32 golden, within tolerance
    fused = [r for r in doc["rows"] if len(r["ground_truth"]) > 1]
    assert fused and any(r["magnitude_error"] > 0 or r["metrics"]["CosineSimilarity"] < 1 for r in fused)
    assert any(r["npu_dtype"] == "float16" for r in doc["rows"])


# -- (b) a golden run that saw another batch ------------------------------------------------------


def test_a_golden_run_fed_another_batch_is_refused_naming_the_inputs(runs):
    code, bundle, err = _golden_run(runs["cwd"], "other_batch_refused", runs["healthy"], ["--no-replay-inputs"],
                                    data_seed=3)
    assert code != 0 and bundle is None
    assert "FingerprintMismatchError" in err
    assert "batch: 2 input(s) differ in value: IteratorGetNext:0, IteratorGetNext:1" in err
    assert not os.listdir(os.path.join(str(runs["cwd"]), "other_batch_refused", "out", "bundles"))
    # the hook's own error, not the script's crash: one line, no traceback through our frames (issue 21)
    assert code == EXIT_SCRIPT_ERROR and "Traceback" not in err, err[-3000:]
    assert err.splitlines()[-1].startswith("npu-dump-hook: FingerprintMismatchError: fingerprints differ "), err[-3000:]


def test_a_golden_run_of_other_model_code_is_one_line_and_its_traceback_comes_with_verbose(runs):
    """The issue-21 case: ``--golden-for`` with a script whose model differs from the bundle's
    (the MLP of unmodified_session.py for the CNN's bundle); ``-v`` adds the traceback."""
    folder = os.path.join(str(runs["cwd"]), "other_model")
    os.makedirs(folder)
    argv = CLI + ["run", "-v", "--output-dir", os.path.join(folder, "out"), "--golden-for", runs["healthy"],
                  "--", SESSION]
    code, lines, err = run(argv, folder, clean_env(), timeout=600)
    assert code == EXIT_SCRIPT_ERROR and not [line for line in lines if os.path.isdir(line)], err[-3000:]
    last = err.splitlines()[-1]
    assert last.startswith("npu-dump-hook: FingerprintMismatchError: initial_state "), err[-3000:]
    assert "variable(s) of this graph are not in its checkpoint" in last and "different model code" in last
    traceback = err[err.index("Traceback (most recent call last):"):]
    assert os.path.join("train", "golden.py") in traceback and SESSION in traceback
    assert os.path.join("runner", "_child.py") not in traceback and "runpy" not in traceback


def test_two_bundles_fed_different_batches_compare_as_input_inconsistent(runs, tmp_path):
    code, golden, err = _golden_run(runs["cwd"], "other_batch", runs["healthy"], ["--on-mismatch", "warn",
                                                                                  "--no-replay-inputs"], data_seed=3)
    assert code == 0 and golden, err[-3000:]
    target = read_bundle(golden)["golden_for"]
    assert target["match"] is False and target["on_mismatch"] == "warn"
    code, out, doc = _compare(tmp_path, runs["healthy"], golden)
    assert code == 1, out
    assert doc["summary"]["input_inconsistent"] is True and doc["summary"]["verdict"] == "fail"
    detail = " ".join(doc["summary"]["input_inconsistent_detail"])
    assert "IteratorGetNext:0" in detail, detail
    assert "INPUT INCONSISTENT" in out


# -- the options themselves, before anything runs -------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--fault", "conv2/Conv2D=bigger"], "option --fault='conv2/Conv2D=bigger': entry 'conv2/Conv2D=bigger': "
                                          "unknown fault kind 'bigger'"),
    (["--fault", "conv2/Conv2D"], "option --fault='conv2/Conv2D': entry 'conv2/Conv2D' is not OP=SPEC"),
    (["--fault", "a=nan;b=nan"], "option --fault='a=nan;b=nan': one OP=SPEC per --fault"),
    (["--fault", "a=nan", "--fault", "a=overflow"], "option --fault='a=overflow': op 'a' is given twice"),
    (["--fault", "a=scale=0"], "option --fault='a=scale=0': entry 'a=scale=0': scale must be a finite number > 0"),
    (["--emulate-profile", "gpu"], "option --emulate-profile='gpu': must be one of exact|ascend"),
    (["--on-mismatch", "ignore"], "--on-mismatch: invalid choice: 'ignore'"),
    (["--golden-for", "no/such/bundle"], "option --golden-for='no/such/bundle': no such file or folder"),
    (["--golden-for", ".", "--backend", "emulated"], "option --golden-for="),
    (["--backend", "reference", "--fault", "a=nan"], "option --fault='a=nan': applies to the emulated NPU run only, "
                                                     "not to the golden run"),
    (["--golden-for", ".", "--emulate-profile", "ascend"], "option --emulate-profile='ascend': applies to the "
                                                           "emulated NPU run only, not to the golden run"),
])
def test_run_options_of_the_workflow_fail_before_the_script_starts(capsys, monkeypatch, tmp_path, argv, message):
    from npu_dump_hook.cli import _run as cli_run

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("raise SystemExit('the script was started')\n")
    monkeypatch.setattr(cli_run, "_run_child", lambda *a, **k: pytest.fail("the script was started"))
    code = main(["run"] + argv + ["--", "train.py"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


# -- (c) the demo's second act ---------------------------------------------------------------------


def test_demo_compare_runs_the_three_acts_and_catches_the_fault(tmp_path):
    out = tmp_path / "demo"
    code, lines, err = run(CLI + ["demo", "--compare", "--out", str(out)], tmp_path, clean_env(), timeout=900)
    text = "\n".join(lines)
    assert code == 0, text[-3000:] + err[-3000:]
    fault = DEFAULT_FAULT_OPS["cnn"]
    assert "injected fault {}={}".format(fault, DEFAULT_FAULT_SPEC) in text
    npu = re.search(r"NPU bundle: +(\S+)", text).group(1)
    golden = re.search(r"golden bundle: +(\S+)", text).group(1)
    assert os.path.dirname(os.path.dirname(npu)) == str(out / "npu")
    assert os.path.dirname(os.path.dirname(golden)) == str(out / "golden")
    assert verify_bundle(npu) == [] and verify_bundle(golden) == []
    assert read_bundle(golden)["golden_for"]["path"] == npu and read_bundle(golden)["golden_for"]["match"] is True
    assert "fingerprints match" in text and "verdict: FAIL" in text
    assert re.search(r"first divergence: row \d+ {} ".format(re.escape(fault)), text), text
    assert "the comparison caught the injected fault: first divergence {}".format(fault) in text
    assert (out / "compare.html").is_file()
    # the command it prints repeats the comparison
    (command,) = [line.strip() for line in lines if line.strip().startswith("npu-dump-hook compare ")]
    words = shlex.split(command)
    assert words[2:4] == [npu, golden] and words[-2:] == ["--html", "report.html"]
    code, _lines, err = run(CLI + words[1:], tmp_path, clean_env())
    assert code == 1 and (tmp_path / "report.html").is_file(), err


@pytest.mark.parametrize("argv, message", [
    (["--fault", "conv2/Conv2D=nan"], "demo: --fault needs --compare"),
    (["--compare", "--backend", "reference"], "demo: --compare injects a fault into the emulated NPU"),
    (["--compare", "--golden-for", "."], "demo: --golden-for is the second process of --compare"),
    (["--golden-for", "no/such/bundle"], "demo: --golden-for no/such/bundle: no such file or folder"),
    (["--compare", "--fault", "conv2/Conv2D=x"], "option --fault='conv2/Conv2D=x': entry 'conv2/Conv2D=x': "
                                                 "unknown fault kind 'x'"),
])
def test_demo_options_fail_before_anything_trains(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code = main(["demo"] + argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not os.path.exists(str(tmp_path / "demo_out"))
