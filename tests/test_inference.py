"""Online inference end to end (issue 22): one inference iteration dumped, bundled, golden-run, compared.

A small model is trained and saved first (tests/helpers/inference_scripts.py ``train``: a
checkpoint, an Estimator model_dir, a SavedModel, a frozen GraphDef). Each inference entry point
then runs in its own process, real TensorFlow, the emulated NPU on the ascend profile:

    by hand      NpuDumpHook in Estimator.predict(hooks=...), NpuDumpSession around the session
    the runner   npu-dump-hook run [--fault fc1/MatMul=scale=1.05] -- inference_scripts.py ENTRY MODEL

Each must bundle exactly one inference iteration -- the first real batch, not the restore, the
initializers or the warm-up run on constants -- that verifies, end the script with status 0, and
give a golden run (``--golden-for`` / ``initial_state=``) with matching fingerprints; ``compare``
passes without a fault and names the faulted op with one.
"""
import json
import os
import sys

import numpy as np
import pytest

from npu_dump_hook._cli_conventions import EXIT_NO_BUNDLE
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.cli import main
from npu_dump_hook.train.fingerprints import array_digest

from helpers import inference_data
from helpers.runs import HELPERS, clean_env, run

SCRIPT = os.path.join(HELPERS, "inference_scripts.py")
CLI = [sys.executable, "-m", "npu_dump_hook"]
NPU = {"backend": "emulated", "emulate_profile": "ascend"}
FAULT_OP = "fc1/MatMul"
ENTRIES = ("predict", "session", "savedmodel", "frozen")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inference_model")
    code, lines, err = run([sys.executable, SCRIPT, "train", str(folder / "model")], folder, clean_env())
    assert code == 0 and lines and lines[-1] == "trained", (code, lines, err[-3000:])
    return str(folder / "model")


def _one_bundle(output_dir):
    bundles = os.listdir(os.path.join(output_dir, "bundles"))
    runs = [name for name in os.listdir(output_dir) if name != "bundles"]
    assert len(bundles) == 1 and len(runs) == 1, (bundles, runs)
    return os.path.join(output_dir, "bundles", bundles[0])


def _by_hand(cwd, name, entry, model, options):
    out = os.path.join(str(cwd), name)
    options = dict(options, output_dir=out)
    code, lines, err = run([sys.executable, SCRIPT, entry, model, json.dumps(options)], cwd, clean_env())
    assert code == 0, err[-3000:]
    return _one_bundle(out), lines


def _runner(cwd, name, entry, model, flags, **env):
    out = os.path.join(str(cwd), name)
    code, lines, err = run(CLI + ["run", "--output-dir", out] + list(flags) + ["--", SCRIPT, entry, model], cwd,
                           clean_env(**env))
    assert code == 0, err[-3000:]
    bundle = _one_bundle(out)
    assert lines[-1] == bundle, lines[-3:]
    return bundle, lines


def _assert_first_batch_bundled(path, entry):
    """One inference iteration, the first real batch (its fingerprint), a bundle that verifies."""
    assert verify_bundle(path) == []
    assert main(["verify", "-q", path]) == 0
    doc = read_bundle(path)
    assert doc["run"]["mode"] == "infer" and doc["run"]["steps"] == 1 and doc["run"]["captured_step"] == 0
    x, _ = inference_data.data()
    first = array_digest(x[:inference_data.BATCH])["sha256"]
    batch = {entry["name"]: entry["sha256"] for entry in doc["fingerprints"]["batch"]}
    assert first in batch.values(), batch
    assert set(batch) == ({"IteratorGetNext:0", "IteratorGetNext:1"} if entry == "predict" else {"x:0"})
    state = [item["name"] for item in doc["fingerprints"]["state"]]
    if entry == "frozen":  # the weights are constants in the graph: no variables, no init/ checkpoint
        assert state == [] and not any(f["kind"] == "init" for f in doc["files"])
    else:
        assert {"fc1/kernel", "fc1/bias", "logits/kernel", "logits/bias"} <= set(state)
        assert any(f["kind"] == "init" for f in doc["files"])
    dumped = [f["op_name"] for f in doc["files"] if f["kind"] == "dump"]
    assert dumped and not any("Apply" in name or "gradients" in name for name in dumped), dumped
    graph = doc["run"]["emulator"]["graph"]  # the ascend profile: no updates, the inference BatchNorm folded
    assert graph["updates"] == 0
    assert any(m.startswith("bn/FusedBatchNorm") for group in graph["fused"].values() for m in group), graph
    return doc


def _assert_golden_matches(npu, golden):
    doc = read_bundle(golden)
    assert doc["backend"] == "reference" and doc["run"]["mode"] == "infer"
    assert doc["golden_for"]["match"] is True and doc["golden_for"]["path"] == npu
    assert doc["fingerprints"]["batch"] == read_bundle(npu)["fingerprints"]["batch"]
    assert doc["fingerprints"]["state"] == read_bundle(npu)["fingerprints"]["state"]
    assert verify_bundle(golden) == []


def _compare(cwd, npu, golden):
    target = os.path.join(str(cwd), "compare-{}.json".format(len(os.listdir(str(cwd)))))
    code, lines, err = run(CLI + ["compare", npu, golden, "--json", target], cwd, clean_env())
    assert code in (0, 1), err[-3000:]
    with open(target) as handle:
        return code, "\n".join(lines), json.load(handle)


def _assert_names_the_fault(code, out, doc):
    assert code == 1, out
    assert FAULT_OP in doc["first_divergence"]["original_ops"], doc["first_divergence"]
    assert FAULT_OP in out.split("first divergence: ")[1].splitlines()[0]


@pytest.mark.parametrize("entry", ENTRIES)
def test_by_hand_one_inference_iteration_golden_run_and_compare(entry, model, tmp_path):
    # mode auto throughout: a SavedModel wrapped after loader.load keeps its optimizer, but those
    # update ops came with the load (imported), so the script built none: inference.
    for name, options in (("healthy", NPU), ("faulted", dict(NPU, faults={FAULT_OP: "scale=1.05"}))):
        npu, lines = _by_hand(tmp_path, name, entry, model, options)
        _assert_first_batch_bundled(npu, entry)
        if entry == "predict":  # the generator ends after the dumped batch, as train() stops after the dumped step
            assert lines[-1] == "predicted {}".format(inference_data.BATCH)
        else:  # NpuDumpSession(stop="exit"): the script ends with status 0 after the dumped run, the bundle last
            assert lines[-1] == npu and not any(line.startswith("batches") for line in lines)
        golden, _ = _by_hand(tmp_path, name + "_golden", entry, model, {"initial_state": npu})
        _assert_golden_matches(npu, golden)
        code, out, doc = _compare(tmp_path, npu, golden)
        if name == "healthy":
            assert code == 0, out
        else:
            _assert_names_the_fault(code, out, doc)


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_runner_dumps_one_inference_iteration_and_compare_names_the_fault(entry, model, tmp_path):
    record = str(tmp_path / "sessions.jsonl")
    healthy, lines = _runner(tmp_path, "healthy", entry, model, ["--backend", "emulated", "--emulate-profile",
                                                                 "ascend"], NPU_BRIDGE_DOUBLE_RECORD=record)
    doc = _assert_first_batch_bundled(healthy, entry)
    assert not any(line.startswith("batches") for line in lines)  # stop=exit after the dumped run
    _assert_sessions_had_the_dump_options(record, doc, entry)
    faulted, _ = _runner(tmp_path, "faulted", entry, model, ["--backend", "emulated", "--emulate-profile", "ascend",
                                                             "--fault", FAULT_OP + "=scale=1.05"])
    for name, npu in (("healthy", healthy), ("faulted", faulted)):
        golden, _ = _runner(tmp_path, name + "_golden", entry, model, ["--golden-for", npu])
        _assert_golden_matches(npu, golden)
        code, out, doc = _compare(tmp_path, npu, golden)
        if name == "healthy":
            assert code == 0, out
        else:
            _assert_names_the_fault(code, out, doc)


def _assert_sessions_had_the_dump_options(record, doc, entry):
    """What the npu_bridge double saw at session creation (the config the adapter reads): the
    session that ran the dumped iteration was made with the run's dump options, which the
    adapter's and GE's checks accept -- also where the script made it before its graph was loaded
    (the SavedModel loader) or on a graph without training ops (the other entry points)."""
    with open(record) as handle:
        events = [json.loads(line) for line in handle]
    made = {event["session"]: event for event in events if event["event"] == "session"}
    model_runs = [event["session"] for event in events if event["event"] == "run"
                  and (entry == "predict" or any(name.startswith("predictions") for name in event["fetches"]))]
    assert made and model_runs, events
    claimed = made[model_runs[0]]
    options = claimed["options"]
    assert claimed["error"] is None and options["enable_dump"] is True, claimed
    assert options["dump_path"] == doc["dump"]["source"] and options["iterations_per_loop"] == 1, claimed
    if entry == "savedmodel":
        assert claimed["graph_ops"] == 0, claimed  # made before loader.load put the model in its graph


@pytest.mark.parametrize("entry, last", [("evaluate", "evaluated ['accuracy', 'global_step', 'loss']"),
                                         ("monitored", "batches 1")])
def test_the_runner_dumps_evaluate_and_a_monitored_inference_loop(entry, last, model, tmp_path):
    bundle, lines = _runner(tmp_path, "npu", entry, model, ["--backend", "emulated"])
    assert lines[-2] == last  # evaluate: over the dumped batch; the monitored loop: stopped after it
    doc = read_bundle(bundle)
    assert doc["run"]["mode"] == "infer" and doc["run"]["steps"] == 1 and verify_bundle(bundle) == []


@pytest.mark.parametrize("by_hand", [True, False], ids=["by_hand", "runner"])
def test_auto_dumps_the_training_step_of_a_script_that_evaluates_after_its_restore(by_hand, model, tmp_path):
    """restore, a fed evaluation through the model, then training: the script built an optimizer,
    so under mode auto the evaluation is no inference iteration; the first training step is dumped."""
    if by_hand:
        bundle, lines = _by_hand(tmp_path, "npu", "restore_train", model, {"backend": "emulated"})
    else:
        bundle, lines = _runner(tmp_path, "npu", "restore_train", model, ["--backend", "emulated"])
    assert lines[0].startswith("evaluated ") and lines[-1] == bundle
    doc = read_bundle(bundle)
    assert doc["run"]["mode"] == "train" and doc["run"]["steps"] == 1 and verify_bundle(bundle) == []
    dumped = [f["op_name"] for f in doc["files"] if f["kind"] == "dump"]
    assert any("GradientDescent" in name or "gradients" in name for name in dumped), dumped
    ys = inference_data.data()[1][:inference_data.BATCH]
    batch = {entry["name"]: entry["sha256"] for entry in doc["fingerprints"]["batch"]}
    assert array_digest(ys)["sha256"] == batch["y:0"], batch  # the training batch, labels fed


def test_mode_train_leaves_an_inference_script_undumped(model, tmp_path):
    out = str(tmp_path / "out")
    code, lines, err = run(CLI + ["run", "--mode", "train", "--output-dir", out, "--", SCRIPT, "frozen", model],
                           tmp_path, clean_env())
    assert code == EXIT_NO_BUNDLE, err[-3000:]  # dumping was asked and nothing was bundled
    assert lines[-1].startswith("batches {}".format(inference_data.BATCHES))  # every batch ran, none dumped
    assert "no training was seen" in err and not os.path.isdir(os.path.join(out, "bundles"))


def test_the_batches_are_what_the_rule_sees():
    """The data the scripts feed: BATCHES distinct batches (so the first one's fingerprint is its own)."""
    x, _ = inference_data.data()
    digests = {array_digest(x[i * inference_data.BATCH:(i + 1) * inference_data.BATCH])["sha256"]
               for i in range(inference_data.BATCHES)}
    assert len(digests) == inference_data.BATCHES and np.all(x == inference_data.data()[0])
