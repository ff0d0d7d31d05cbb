"""The golden run elsewhere: an emulated NPU run in one process, the golden run from its bundle in another.

Each run is ``tests/helpers/golden_probe.py`` in a fresh interpreter (the same script and data,
as on two machines); the NPU run computes with NPU numerics and a kernel fault, so its own
bundle holds no golden tensors and the golden bundle must come from the second run.
"""
import hashlib
import json
import os
import pickle
import sys
import tarfile

import numpy as np
import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook, OptionError
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.errors import FingerprintMismatchError
from npu_dump_hook.fingerprints import array_digest
from npu_dump_hook.reference import MANIFEST_NAME

from helpers.bundles import list_bundle_json
from helpers.runs import HELPERS, clean_env, run

PROBE = os.path.join(HELPERS, "golden_probe.py")
FAULT = {"hidden/MatMul": "scale=1.05"}
FEED = ["--feed", "1.0"]


def _probe(cwd, hook_kwargs, *args):
    """The probe's last JSON line and its exit status."""
    code, out, err = run([sys.executable, PROBE, json.dumps(hook_kwargs)] + list(args), cwd, clean_env())
    assert out, err[-3000:]
    return code, json.loads(out[-1]), err


@pytest.fixture(scope="module")
def npu_bundle(tmp_path_factory):
    """The emulated NPU run: ascend profile, one faulted kernel, a fed scale."""
    cwd = tmp_path_factory.mktemp("npu")
    code, result, err = _probe(cwd, {"backend": "emulated", "output_dir": "out", "emulate_profile": "ascend",
                                     "faults": FAULT}, *FEED)
    assert code == 0 and result["bundle"], err[-3000:]
    assert "computed with NPU numerics (profile ascend, faults on hidden/MatMul)" in err
    assert result["compare_loaded"] is True  # the golden-free checks ran on its bundle
    return result["bundle"]


def _golden(tmp_path, npu_bundle, *args, **kwargs):
    hook_kwargs = dict({"output_dir": "out", "initial_state": npu_bundle}, **kwargs)
    return _probe(tmp_path, hook_kwargs, *args)


def _golden_files(bundle):
    with open(os.path.join(bundle, "data", "golden", MANIFEST_NAME)) as handle:
        manifest = json.load(handle)
    return {entry["tensor"]: os.path.join(bundle, "data", "golden", entry["file"]) for entry in manifest["files"]}


def test_the_npu_bundle_has_its_checkpoint_and_fingerprints_but_no_golden(npu_bundle):
    doc = read_bundle(npu_bundle)
    kinds = {f["kind"] for f in doc["files"]}
    assert "init" in kinds and "dump" in kinds and "golden" not in kinds
    assert doc["run"]["reference"] is None and doc["run"]["emulator"]["golden_in_run"] is False
    fingerprints = doc["fingerprints"]
    assert {e["name"] for e in fingerprints["batch"]} == {"IteratorGetNext:0", "IteratorGetNext:1", "scale:0"}
    assert "hidden/kernel" in {e["name"] for e in fingerprints["state"]}
    assert "golden_for" not in doc and verify_bundle(npu_bundle) == []


def test_golden_run_matches_the_npu_run_and_names_it(tmp_path, npu_bundle):
    code, result, err = _golden(tmp_path, npu_bundle, *FEED)
    assert code == 0 and result["failures"] == [] and result["warnings"] == [], err[-3000:]
    assert result["compare_loaded"] is False  # no checks on a golden bundle: the compare package never loads
    golden = result["bundle"]
    npu, doc = read_bundle(npu_bundle), read_bundle(golden)
    assert doc["backend"] == "reference" and verify_bundle(golden) == []
    assert doc["fingerprints"]["state"] == npu["fingerprints"]["state"]
    assert doc["fingerprints"]["batch"] == npu["fingerprints"]["batch"]
    with open(os.path.join(npu_bundle, "data", "bundle.json"), "rb") as handle:
        npu_json = handle.read()
    target = doc["golden_for"]
    assert target["bundle_json_sha256"] == hashlib.sha256(npu_json).hexdigest()
    assert (target["path"], target["created"], target["backend"]) == (npu_bundle, npu["created"], "emulated")
    assert target["match"] is True and target["captured_step"] == npu["run"]["captured_step"] == 0
    assert {f["kind"] for f in doc["files"]} == {"golden", "tf_graph"}  # no dump, no graph, no init
    assert doc["dump"]["steps"] == [] and doc["graph"]["file"] is None
    assert doc["coverage"]["expected"] is None and "not_applicable" in doc["coverage"]
    # The golden tensors are the NPU run's batch and start: the same bytes its fingerprints hash.
    files = _golden_files(golden)
    batch = {e["name"]: e for e in npu["fingerprints"]["batch"]}
    state = {e["name"]: e for e in npu["fingerprints"]["state"]}
    assert array_digest(np.load(files["IteratorGetNext:0"])) == {k: batch["IteratorGetNext:0"][k]
                                                                 for k in ("dtype", "shape", "sha256")}
    # the variable's value as the step read it (TF 1.15: the VariableV2 read before the step; TF 2:
    # the resource variable's value before its update)
    assert array_digest(np.load(files["hidden/kernel:0"]))["sha256"] == state["hidden/kernel"]["sha256"]
    assert "hidden/MatMul:0" in files  # the faulted op's golden value, for the comparison
    assert "golden bundle {}".format(golden) in err and "fingerprints match" in err
    assert not {"dump", "graph"} & set(os.listdir(result["run_dir"]))  # nothing wrote there: no empty folders


def test_golden_run_from_another_initial_state_fails_naming_the_variables(tmp_path, npu_bundle):
    code, result, _ = _golden(tmp_path, npu_bundle, "--model-seed", "2", *FEED, restore_initial_state=False)
    assert code == 3 and result["error"] == "FingerprintMismatchError"
    message = result["message"]
    assert "initial state: 2 variable(s) differ in value: hidden/kernel, logits/kernel" in message
    assert "different initial state" in message and "batch" not in message.split("Likely cause")[0]
    assert not os.listdir(os.path.join(str(tmp_path), "out", "bundles"))  # failed before writing
    (run_dir,) = [d for d in os.listdir(os.path.join(str(tmp_path), "out")) if d != "bundles"]
    with open(os.path.join(str(tmp_path), "out", run_dir, "run.json")) as handle:
        recorded = json.load(handle)
    assert recorded["golden_for"]["match"] is False
    assert recorded["golden_for"]["differences"]["state"]["values"] == ["hidden/kernel", "logits/kernel"]
    assert recorded["failures"][-1]["error"].startswith("FingerprintMismatchError")


def test_golden_run_on_another_data_order_fails_naming_the_inputs(tmp_path, npu_bundle):
    code, result, _ = _golden(tmp_path, npu_bundle, "--data-seed", "3", *FEED, replay_inputs=False)
    assert code == 3 and result["error"] == "FingerprintMismatchError"
    assert "batch: 2 input(s) differ in value: IteratorGetNext:0, IteratorGetNext:1" in result["message"]
    assert "shuffle not removed" in result["message"] and "initial state" not in result["message"]


def test_golden_run_that_keeps_the_shuffle_fails_and_says_the_policies_differ(tmp_path, npu_bundle):
    # randomness="pin" seeds the shuffle instead of removing it: another order than the NPU run's.
    code, result, _ = _golden(tmp_path, npu_bundle, *FEED, randomness="pin", replay_inputs=False)
    assert code == 3 and "batch: 2 input(s) differ in value: IteratorGetNext:0, IteratorGetNext:1" in result["message"]
    assert "the NPU run used randomness policy='strip', this run 'pin'" in result["message"]


def test_golden_run_fed_another_value_fails_naming_the_feed(tmp_path, npu_bundle):
    code, result, _ = _golden(tmp_path, npu_bundle, "--feed", "2.0", replay_inputs=False)
    assert code == 3 and "batch: 1 input(s) differ in value: scale:0" in result["message"]
    assert "the NPU step's inputs were not replayed: replay_inputs=False" in result["message"]


@pytest.mark.parametrize("args", [["--data-seed", "3"] + FEED, ["--feed", "2.0"]], ids=["data_order", "feed"])
def test_replay_gives_the_golden_run_the_npu_steps_batch_whatever_it_makes(tmp_path, npu_bundle, args):
    # The same runs as the two tests above, replaying (the default): the NPU step's batch by construction.
    code, result, err = _golden(tmp_path, npu_bundle, *args)
    assert code == 0 and result["failures"] == [] and result["warnings"] == [], err[-3000:]
    npu, doc = read_bundle(npu_bundle), read_bundle(result["bundle"])
    assert doc["fingerprints"]["batch"] == npu["fingerprints"]["batch"]
    replayed = doc["golden_for"]["replayed"]
    assert doc["golden_for"]["match"] is True and replayed["reason"] is None
    assert {(t["name"], t["source"]) for t in replayed["tensors"]} == {
        ("IteratorGetNext:0", "iterator"), ("IteratorGetNext:1", "iterator"), ("scale:0", "feed")}
    assert "(fingerprints match, 3 input(s) replayed)" in err


def test_golden_run_of_other_model_code_fails_before_training(tmp_path, npu_bundle):
    code, result, _ = _golden(tmp_path, npu_bundle, "--extra-variable", *FEED)
    assert code == 3 and result["error"] == "FingerprintMismatchError"
    assert "are not in its checkpoint: extra_bias, extra_bias/Momentum" in result["message"]
    assert "different model code" in result["message"]


def test_on_mismatch_warn_writes_the_golden_bundle_with_the_differences(tmp_path, npu_bundle):
    code, result, err = _golden(tmp_path, npu_bundle, "--data-seed", "3", *FEED, on_mismatch="warn",
                                replay_inputs=False)
    assert code == 0 and result["bundle"], err[-3000:]
    doc = read_bundle(result["bundle"])
    assert verify_bundle(result["bundle"]) == []
    assert doc["golden_for"]["match"] is False and doc["golden_for"]["on_mismatch"] == "warn"
    assert doc["golden_for"]["differences"]["batch"]["values"] == ["IteratorGetNext:0", "IteratorGetNext:1"]
    assert any("IteratorGetNext:0" in w for w in doc["warnings"]) and result["warnings"]
    assert "fingerprints DIFFER" in err


def test_golden_run_from_an_archived_npu_bundle(tmp_path, npu_bundle):
    archive = str(tmp_path / "npu.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(npu_bundle, arcname=os.path.basename(npu_bundle))
    code, result, err = _golden(tmp_path, archive, *FEED)
    assert code == 0 and result["failures"] == [], err[-3000:]
    doc = read_bundle(result["bundle"])
    assert doc["golden_for"]["match"] is True and doc["golden_for"]["path"] == archive
    assert not [d for d in os.listdir(str(tmp_path / "out")) if os.path.isdir(
        os.path.join(str(tmp_path / "out"), d, ".initial_state"))]  # the extracted checkpoint is removed


def test_golden_run_captures_the_npu_runs_step_and_reproduces_its_golden(tmp_path):
    # An exact-profile NPU run dumping step 2 has its own golden tensors: the golden run, restored
    # from its checkpoint right before its step 2, must compute the same tensors.
    (tmp_path / "npu").mkdir()
    code, npu, err = _probe(tmp_path / "npu", {"backend": "emulated", "output_dir": "out"}, "--dump-step", "2", *FEED)
    assert code == 0, err[-3000:]
    assert read_bundle(npu["bundle"])["run"]["captured_step"] == 2
    code, golden, err = _golden(tmp_path, npu["bundle"], *FEED)
    assert code == 0 and golden["failures"] == [], err[-3000:]
    doc = read_bundle(golden["bundle"])
    assert doc["golden_for"]["match"] and doc["golden_for"]["captured_step"] == 2 and doc["fingerprints"]["step"] == 2
    assert doc["run"]["steps"] == 3 and doc["run"]["captured_step"] == 2
    ours, theirs = _golden_files(golden["bundle"]), _golden_files(npu["bundle"])
    assert set(ours) == set(theirs) and len(ours) > 20
    for tensor, path in sorted(ours.items()):
        np.testing.assert_allclose(np.load(path), np.load(theirs[tensor]), rtol=1e-6, atol=1e-7, err_msg=tensor)


# --------------------------------------------------------------------------- options, in process


def test_initial_state_options_fail_before_training(tmp_path, npu_bundle):
    with pytest.raises(OptionError, match="is for the golden run"):
        NpuDumpHook(output_dir=str(tmp_path), backend="emulated", initial_state=npu_bundle)
    with pytest.raises(OptionError, match="neither a bundle folder nor a bundle archive"):
        NpuDumpHook(output_dir=str(tmp_path), initial_state=str(tmp_path / "absent"))
    with pytest.raises(OptionError) as info:
        NpuDumpHook(output_dir=str(tmp_path), initial_state=npu_bundle, on_mismatch="ignore")
    assert info.value.option == "on_mismatch"
    hook = NpuDumpHook(output_dir=str(tmp_path), initial_state=npu_bundle)
    assert hook.backend.name == "reference" and hook.reference and hook.captured_step == 0 and hook.max_steps == 1
    assert not hook.save_initial_state


def test_a_golden_bundle_cannot_be_an_initial_state(tmp_path, npu_bundle):
    code, result, _ = _golden(tmp_path, npu_bundle, *FEED)
    assert code == 0
    with pytest.raises(OptionError, match="is a 'reference' bundle"):
        NpuDumpHook(output_dir=str(tmp_path), initial_state=result["bundle"])


def test_a_bundle_without_checkpoint_can_only_be_compared(tmp_path):
    bundle = tmp_path / "b"
    (bundle / "data").mkdir(parents=True)
    (bundle / "data" / "bundle.json").write_text(json.dumps(
        {"backend": "emulated", "run": {"captured_step": 2}, "files": [], "created": "now"}))
    list_bundle_json(bundle)
    with pytest.raises(OptionError, match="has no data/init/ checkpoint"):
        NpuDumpHook(output_dir=str(tmp_path), initial_state=str(bundle))
    hook = NpuDumpHook(output_dir=str(tmp_path), initial_state=str(bundle), restore_initial_state=False)
    assert (hook.captured_step, hook.max_steps) == (2, 3)
    with pytest.raises(OptionError, match="captured step 2: a golden run needs at least 3 step"):
        NpuDumpHook(output_dir=str(tmp_path), initial_state=str(bundle), restore_initial_state=False, max_steps=2)


def _bundle_without_checkpoint(folder, backend):
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "bundle.json").write_text(json.dumps(
        {"backend": backend, "run": {"captured_step": 0}, "files": [], "created": "now"}))
    return list_bundle_json(folder)


@pytest.mark.parametrize("backend", ["golden", "reference", "auto"])
def test_backend_golden_and_its_alias_make_the_golden_run(tmp_path, backend):
    bundle = _bundle_without_checkpoint(tmp_path / "b", "emulated")
    hook = NpuDumpHook(output_dir=str(tmp_path), initial_state=bundle, restore_initial_state=False, backend=backend)
    assert hook.backend.name == "reference" and hook.golden_only and hook.reference
    alone = NpuDumpHook(output_dir=str(tmp_path), backend=backend if backend != "auto" else "golden")
    assert alone.backend.name == "reference" and alone.golden_only


@pytest.mark.parametrize("recorded", ["golden", "reference"])
def test_a_bundle_recorded_golden_or_its_alias_cannot_be_an_initial_state(tmp_path, recorded):
    bundle = _bundle_without_checkpoint(tmp_path / "b", recorded)
    with pytest.raises(OptionError, match="is a '{}' bundle: a golden run is made for an NPU bundle".format(recorded)):
        NpuDumpHook(output_dir=str(tmp_path), initial_state=bundle, restore_initial_state=False)


def test_reference_is_off_when_the_emulator_computes_npu_numerics(tmp_path):
    exact = NpuDumpHook(DumpOptions(), output_dir=str(tmp_path), backend="emulated")
    assert exact.reference and exact.backend.golden_in_run
    ascend = NpuDumpHook(DumpOptions(), output_dir=str(tmp_path), backend="emulated", emulate_profile="ascend")
    assert ascend.backend.profile == "ascend" and not ascend.reference
    faulty = NpuDumpHook(DumpOptions(), output_dir=str(tmp_path), backend="emulated", faults=FAULT)
    assert faulty.backend.faults == FAULT and not faulty.reference
    with pytest.raises(OptionError) as info:
        NpuDumpHook(DumpOptions(), output_dir=str(tmp_path), backend="emulated", faults=FAULT, reference=True)
    assert info.value.option == "reference" and "backend='reference', initial_state=" in str(info.value)
    with pytest.raises(OptionError, match="only product is the golden capture"):
        NpuDumpHook(DumpOptions(), output_dir=str(tmp_path), backend="reference", reference=False)


def _train_probe_model(hook, model_seed=1, feed=1.0):
    import tensorflow as tf

    from helpers.golden_probe import build

    with tf.Graph().as_default():
        train_op, feeds = build(model_seed, None, feed, False)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(train_op, feed_dict=feeds)


def test_not_strict_mismatch_writes_run_json_and_no_bundle(in_tmp_cwd, npu_bundle):
    hook = NpuDumpHook(output_dir="out", initial_state=npu_bundle, restore_initial_state=False, strict=False)
    _train_probe_model(hook, model_seed=2)
    assert hook.bundle is None and hook.failures[-1]["error"].startswith("FingerprintMismatchError")
    with open(os.path.join(hook.run_dir, "run.json")) as handle:
        recorded = json.load(handle)
    assert recorded["golden_for"]["differences"]["state"]["values"] == ["hidden/kernel", "logits/kernel"]
    assert recorded["fingerprints"]["state"] and not os.listdir(os.path.join("out", "bundles"))


def test_a_reference_run_without_npu_bundle_writes_a_golden_bundle_for_nothing(in_tmp_cwd):
    hook = NpuDumpHook(output_dir="out", backend="reference")
    _train_probe_model(hook)
    doc = read_bundle(hook.bundle.path)
    assert doc["backend"] == "reference" and "golden_for" not in doc and verify_bundle(hook.bundle.path) == []
    assert doc["fingerprints"]["batch"] and {f["kind"] for f in doc["files"]} == {"golden", "tf_graph"}


def test_mismatch_error_carries_the_differences():
    error = FingerprintMismatchError("differs", "/b", {"state": {"values": ["w"]}})
    assert (error.target, error.differences["state"]["values"]) == ("/b", ["w"])
    assert pickle.loads(pickle.dumps(error)).differences == error.differences


@pytest.mark.parametrize("damage, rule", [("null_sha256", "not verifiable"), ("escape", "escapes"),
                                          ("symlink", "is a symlink")])
def test_the_hook_refuses_an_unverifiable_or_escaping_checkpoint_before_training(tmp_path, damage, rule):
    bundle = tmp_path / "b"
    (bundle / "data" / "init").mkdir(parents=True)
    payload = b"index bytes"
    (bundle / "data" / "init" / "model.ckpt.index").write_bytes(payload)
    entry = {"kind": "init", "path": "init/model.ckpt.index", "size": len(payload),
             "sha256": hashlib.sha256(payload).hexdigest()}
    if damage == "null_sha256":
        entry["sha256"] = None
    elif damage == "escape":
        entry["path"] = "init/../../victim/model.ckpt.index"
    else:
        (tmp_path / "victim.index").write_bytes(payload)
        os.unlink(str(bundle / "data" / "init" / "model.ckpt.index"))
        os.symlink(str(tmp_path / "victim.index"), str(bundle / "data" / "init" / "model.ckpt.index"))
    (bundle / "data" / "bundle.json").write_text(json.dumps(
        {"backend": "emulated", "run": {"captured_step": 0}, "files": [entry], "created": "now"}))
    list_bundle_json(bundle)
    with pytest.raises(OptionError, match=rule) as info:
        NpuDumpHook(output_dir=str(tmp_path / "out"), initial_state=str(bundle))
    assert info.value.option == "initial_state" and "model.ckpt.index" in str(info.value)


def test_golden_run_log_lines_escape_control_characters():
    """Paths and notes from an NPU bundle reach the training script's terminal through the hook's
    log lines: control characters there are shown as escapes, never sent raw."""
    from npu_dump_hook._inert import printable

    hostile = "bundle\x1b[2J\x9b\udc80"
    assert "\x1b" not in printable(hostile) and "\x9b" not in printable(hostile)
    assert printable(OSError(2, "No such file", hostile)).count("\\x1b") == 1


def test_the_variables_message_says_which_side_holds_each_variable():
    from npu_dump_hook.train.golden import _variables_message
    message = _variables_message("B", {"missing": ["here_only"], "extra": ["bundle_only"], "mismatched": ["w"]})
    assert "1 variable(s) of this graph are not in its checkpoint: here_only" in message
    assert "1 variable(s) of its checkpoint are not in this graph: bundle_only" in message
    assert "1 variable(s) of this graph have another shape there: w" in message
