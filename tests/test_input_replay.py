"""Input replay end to end: batches a golden run cannot make again by itself, through the command line.

Each shape of tests/helpers/replay_scripts.py (numpy-shuffled feed_dict batches with a placeholder
keep_prob; a GAN's two optimizers fed np.random noise; an Estimator's numpy_input_fn queue; a
tf.data map drawing from numpy plus a py_func of the step) runs as on two machines:

    npu-dump-hook run --backend emulated --emulate-profile ascend [--fault OP=SPEC] -- replay_scripts.py SHAPE
    npu-dump-hook run --golden-for NPU_BUNDLE -- replay_scripts.py SHAPE
    npu-dump-hook compare NPU_BUNDLE GOLDEN_BUNDLE

The NPU bundle keeps the step's inputs (data/inputs/, bundle.json ``inputs``); the golden run
feeds them, so its batch fingerprints match by construction, and compare gives the verdict:
exit 0 without a fault, exit 1 naming the faulted op first with one. Then the size cap (hashes
only, the golden run says it cannot replay) and hostile bundles (refused before anything is
restored, the path named).
"""
import json
import os
import shutil
import sys

import pytest

from npu_dump_hook import NpuDumpHook, OptionError
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.train.late import LATE_NOTE

from helpers.bundles import list_bundle_json
from helpers.runs import HELPERS, clean_env, run

SCRIPT = os.path.join(HELPERS, "replay_scripts.py")
CLI = [sys.executable, "-m", "npu_dump_hook"]
FAULT = "hidden/MatMul"
GAN_FAULT = "generator/g1/MatMul"  # the GAN has no hidden/ layer


def _run(cwd, name, shape, flags):
    """``npu-dump-hook run FLAGS -- replay_scripts.py SHAPE FOLDER`` in ``cwd/name``:
    (status, bundle or None, stderr)."""
    folder = os.path.join(str(cwd), name)
    os.makedirs(folder)
    argv = CLI + ["run", "--output-dir", os.path.join(folder, "out")] + list(flags) + [
        "--", sys.executable, SCRIPT, shape, folder]
    code, lines, err = run(argv, folder, clean_env(), timeout=600)
    bundle = lines[-1] if lines and os.path.isdir(lines[-1]) else None
    return code, bundle, err


def _npu(cwd, shape, fault=None, flags=()):
    extra = ["--fault", "{}=scale=1.05".format(fault)] if fault else []
    code, bundle, err = _run(cwd, "npu_{}_{}".format(shape, "fault" if fault else "healthy"), shape,
                             ["--backend", "emulated", "--emulate-profile", "ascend"] + extra + list(flags))
    assert code == 0 and bundle, err[-3000:]
    return bundle


def _golden(cwd, shape, npu, name, flags=()):
    return _run(cwd, name, shape, ["--golden-for", npu] + list(flags))


def _compare(cwd, npu, golden):
    target = os.path.join(str(cwd), "compare-{}.json".format(len(os.listdir(str(cwd)))))
    code, lines, err = run(CLI + ["compare", npu, golden, "--json", target], str(cwd), clean_env())
    assert code in (0, 1), err[-3000:]
    with open(target) as handle:
        return code, "\n".join(lines), json.load(handle)


def _workflow(cwd, shape, fault=None):
    """NPU run, golden run, compare: (npu bundle, golden bundle, compare status, its JSON document)."""
    npu = _npu(cwd, shape, fault)
    code, golden, err = _golden(cwd, shape, npu, "golden_{}_{}".format(shape, "fault" if fault else "healthy"))
    assert code == 0 and golden, err[-3000:]
    status, out, doc = _compare(cwd, npu, golden)
    return npu, golden, status, doc, out


def _assert_replayed(npu, golden, sources):
    """The NPU bundle kept every input of ``sources`` kinds; the golden run fed them all and matched."""
    npu_doc, golden_doc = read_bundle(npu), read_bundle(golden)
    assert verify_bundle(npu) == [] and verify_bundle(golden) == []
    inputs = npu_doc["inputs"]
    assert inputs["kept"] is True and inputs["reason"] is None and inputs["step"] == 0
    assert {t["source"] for t in inputs["tensors"]} == set(sources), inputs["tensors"]
    listed = {f["path"]: f for f in npu_doc["files"] if f["kind"] == "inputs"}
    assert sorted(listed) == sorted(t["file"] for t in inputs["tensors"])
    assert all(f["sha256"] for f in listed.values())
    batch = {e["name"]: e["sha256"] for e in npu_doc["fingerprints"]["batch"]}
    assert {t["name"]: t["sha256"] for t in inputs["tensors"]} == batch  # the manifest is the batch, kept
    target = golden_doc["golden_for"]
    assert target["match"] is True and target["path"] == npu
    assert golden_doc["fingerprints"]["batch"] == npu_doc["fingerprints"]["batch"]
    assert golden_doc["fingerprints"]["state"] == npu_doc["fingerprints"]["state"]
    assert sorted(t["name"] for t in target["replayed"]["tensors"]) == sorted(batch)
    assert "inputs" not in golden_doc  # a golden bundle keeps nothing to replay
    return npu_doc


def _first_divergence_is(doc, out, op):
    first = doc["first_divergence"]
    assert first is not None and op in first["original_ops"], first
    assert "first divergence: " in out and op in out.split("first divergence: ")[1].splitlines()[0]


# -- (a) plain Session, numpy-shuffled feed_dict batches, placeholder keep_prob dropout ----------------


@pytest.fixture(scope="module")
def feed_runs(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("replay_feed")
    return {"cwd": cwd, "healthy": _workflow(cwd, "feed"), "fault": _workflow(cwd, "feed", FAULT)}


def test_feed_dict_batches_are_kept_and_replayed(feed_runs):
    npu, golden, _status, _doc, _out = feed_runs["healthy"]
    doc = _assert_replayed(npu, golden, {"feed"})
    assert {t["name"] for t in doc["inputs"]["tensors"]} == {"x:0", "y:0", "keep_prob:0"}
    assert doc["warnings"] == []


def test_feed_dict_workflow_passes_without_a_fault(feed_runs):
    _npu_bundle, _golden_bundle, status, doc, out = feed_runs["healthy"]
    assert status == 0, out
    assert doc["summary"]["verdict"] == "pass" and doc["summary"]["input_inconsistent"] is False


def test_feed_dict_workflow_names_the_faulted_op_first(feed_runs):
    npu, golden, status, doc, out = feed_runs["fault"]
    _assert_replayed(npu, golden, {"feed"})
    assert status == 1, out
    _first_divergence_is(doc, out, FAULT)


# -- (b) GAN: two optimizers in one run, np.random noise feeds ----------------------------------------


def test_gan_noise_feeds_are_replayed_and_compare_passes(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "gan")
    npu_doc = _assert_replayed(npu, golden, {"feed"})
    assert {t["name"] for t in npu_doc["inputs"]["tensors"]} == {"noise:0", "real:0"}
    assert npu_doc["run"]["steps"] == 1
    assert status == 0, out


def test_gan_workflow_names_the_faulted_generator_op_first(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "gan", GAN_FAULT)
    npu_doc = _assert_replayed(npu, golden, {"feed"})
    assert npu_doc["run"]["steps"] == 1
    assert status == 1, out
    _first_divergence_is(doc, out, GAN_FAULT)


# -- (c) Estimator with numpy_input_fn(shuffle=True): queue input ------------------------------------


def test_estimator_queue_batch_is_replayed_and_compare_names_the_fault_not_the_dequeue(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "estimator", FAULT)
    npu_doc = _assert_replayed(npu, golden, {"queue"})
    assert all(t["op_type"].startswith("QueueDequeue") for t in npu_doc["inputs"]["tensors"])
    assert status == 1, out
    _first_divergence_is(doc, out, FAULT)
    assert not any("QueueDequeue" in row["npu_op"] for row in doc["rows"] if row["status"] == "root_cause")
    assert doc["summary"]["root_causes"] == 1


def test_estimator_queue_workflow_passes_without_a_fault(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "estimator")
    _assert_replayed(npu, golden, {"queue"})
    assert status == 0, out
    assert doc["first_divergence"] is None and doc["summary"]["input_inconsistent"] is False


# -- (d) tf.data map drawing from numpy, py_func outputs that feed the model --------------------------


def test_pyfunc_and_random_map_inputs_are_replayed(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "pyfunc")
    npu_doc = _assert_replayed(npu, golden, {"iterator", "py_func"})
    assert {t["name"]: t["source"] for t in npu_doc["inputs"]["tensors"]} == {
        "IteratorGetNext:0": "iterator", "labels_of:0": "py_func"}
    assert status == 0, out


def test_pyfunc_workflow_names_the_faulted_op_first(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "pyfunc", FAULT)
    _assert_replayed(npu, golden, {"iterator", "py_func"})
    assert status == 1, out
    _first_divergence_is(doc, out, FAULT)


def test_a_late_string_handle_pipeline_with_a_clock_seed_is_replayed(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "late")
    npu_doc = _assert_replayed(npu, golden, {"feed", "iterator"})
    sources = {t["name"]: (t["source"], t["dtype"]) for t in npu_doc["inputs"]["tensors"]}
    assert sources["handle:0"] == ("feed", "string")  # kept exactly, as packed bytes
    assert sources["IteratorGetNext:0"] == ("iterator", "float32")
    assert status == 0, out
    # the pipeline was built after the runner wrapped the session (at the initializer's random ops):
    # its shuffle is audited at the captured step and reported, not pinned
    late = [s for s in npu_doc["randomness"]["sources"] if s["action"].endswith(LATE_NOTE)]
    assert any(s["type"].startswith("ShuffleDataset") for s in late), npu_doc["randomness"]["sources"]


def test_a_late_string_handle_pipeline_workflow_names_the_faulted_op_first(tmp_path):
    npu, golden, status, doc, out = _workflow(tmp_path, "late", FAULT)
    _assert_replayed(npu, golden, {"feed", "iterator"})
    assert status == 1, out
    _first_divergence_is(doc, out, FAULT)


# -- (e) above max_input_bytes: hashes only, and the golden run says it cannot replay ----------------


def test_inputs_above_the_cap_keep_hashes_only_and_the_golden_run_cannot_replay(tmp_path):
    # Shuffled by a clock-seeded generator: no seed policy makes that batch again, only replay could.
    npu = _npu(tmp_path, "clockfeed", flags=["--max-input-bytes", "100"])
    doc = read_bundle(npu)
    inputs = doc["inputs"]
    assert inputs["kept"] is False and inputs["max_input_bytes"] == 100 and inputs["total_bytes"] > 100
    assert "above max_input_bytes=100" in inputs["reason"]
    assert all(t["file"] is None and len(t["sha256"]) == 64 for t in inputs["tensors"])
    assert not [f for f in doc["files"] if f["kind"] == "inputs"] and verify_bundle(npu) == []
    assert any("a golden run cannot replay them" in w for w in doc["warnings"]), doc["warnings"]
    code, golden, err = _golden(tmp_path, "clockfeed", npu, "golden_capped")
    assert code != 0 and golden is None
    assert "cannot replay the NPU step's inputs: the NPU bundle keeps only the sha256 of its inputs" in err
    assert "FingerprintMismatchError" in err and "x:0" in err and "y:0" in err
    assert "the NPU step's inputs were not replayed" in err


def test_numpy_shuffles_without_kept_inputs_are_made_again_by_the_seeded_generator(tmp_path):
    # np.random.permutation without a seed: strip seeds numpy's global generator in both runs, so
    # a golden run that cannot replay (the cap) says so, makes the same batch and matches.
    npu = _npu(tmp_path, "feed", flags=["--max-input-bytes", "0"])
    assert read_bundle(npu)["inputs"]["kept"] is False
    code, golden, err = _golden(tmp_path, "feed", npu, "golden_seeded")
    assert code == 0 and golden, err[-3000:]
    target = read_bundle(golden)["golden_for"]
    assert target["match"] is True and target["replayed"]["count"] == 0
    assert "keeps only the sha256 of its inputs" in target["replayed"]["reason"]
    assert any("cannot replay" in w for w in read_bundle(golden)["warnings"])
    assert "(fingerprints match, inputs not replayed)" in err


# -- (f) hostile bundles: refused before anything is restored, the path named -------------------------


def _damaged(src, dest, damage):
    shutil.copytree(src, dest, symlinks=True)
    path = os.path.join(dest, "data", "bundle.json")
    with open(path) as handle:
        doc = json.load(handle)
    tensor = doc["inputs"]["tensors"][0]
    entry = next(f for f in doc["files"] if f["path"] == tensor["file"])
    local = os.path.join(dest, "data", tensor["file"])
    if damage == "escape":
        tensor["file"] = "inputs/../init/x.npy"
    elif damage == "symlink":
        aside = os.path.join(os.path.dirname(dest), "victim.npy")
        shutil.copyfile(local, aside)
        os.unlink(local)
        os.symlink(aside, local)
    elif damage == "null_sha256":
        entry["sha256"] = None
    elif damage == "changed":
        with open(local, "ab") as handle:
            handle.write(b"\0")
        entry["size"] += 1
    with open(path, "w") as handle:
        json.dump(doc, handle)
    list_bundle_json(dest)  # the bundle.json edit itself is not what is refused here
    return tensor["file"]


@pytest.mark.parametrize("damage, rule", [("escape", "file is neither null nor a path inputs/"),
                                          ("symlink", "symlink"), ("null_sha256", "not verifiable"),
                                          ("changed", "sha256 differs")])
def test_a_hostile_inputs_part_is_refused_before_anything_is_restored(feed_runs, tmp_path, damage, rule):
    import tensorflow as tf

    npu = feed_runs["healthy"][0]
    bundle = str(tmp_path / "hostile")
    rel = _damaged(npu, bundle, damage)
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("w", [2])
        with pytest.raises(OptionError, match=rule) as info:
            hook = NpuDumpHook(output_dir=str(tmp_path / "out"), initial_state=bundle)
            hook.begin()
    assert info.value.option == "initial_state" and bundle in str(info.value)
    assert (rel if damage != "escape" else "inputs") in str(info.value)


def test_an_input_the_golden_graph_cannot_take_is_named_with_the_reason(feed_runs, tmp_path):
    npu = feed_runs["healthy"][0]
    bundle = str(tmp_path / "renamed")
    shutil.copytree(npu, bundle)
    path = os.path.join(bundle, "data", "bundle.json")
    with open(path) as handle:
        doc = json.load(handle)
    for tensor in doc["inputs"]["tensors"]:
        if tensor["name"] == "x:0":
            tensor["name"] = "no_such_input:0"
    with open(path, "w") as handle:
        json.dump(doc, handle)
    list_bundle_json(bundle)
    code, golden, err = _golden(tmp_path, "feed", bundle, "golden_renamed")
    assert code != 0 and golden is None
    assert "ReplayError" in err and "no_such_input:0 (not a tensor of this graph)" in err, err[-3000:]


def test_the_cap_is_a_settings_row_with_its_variable_and_flag():
    from npu_dump_hook import settings

    row = {r.name: r for r in settings.rows()}["max_input_bytes"]
    assert row.env == "NPU_DUMP_HOOK_MAX_INPUT_BYTES" and row.flag == "--max-input-bytes"
    assert row.default == 256 << 20
    with pytest.raises(OptionError, match="max_input_bytes"):
        NpuDumpHook(max_input_bytes=-1)


# -- the parts on their own: string packing, the manifest's shape, feeding a real graph --------------


def test_string_inputs_are_kept_exactly_without_pickles():
    import numpy as np

    from npu_dump_hook.train.fingerprints import array_digest
    from npu_dump_hook.train.inputs import storable, unpack_strings

    value = np.array([[b"a\0", b""], [b"xyz", b"\0\0"]], dtype=object)
    stored, why = storable(value)
    assert why is None and stored.dtype == np.uint8
    back = unpack_strings(stored, [2, 2])
    assert back.tolist() == value.tolist() and array_digest(back) == array_digest(value)
    with pytest.raises(ValueError, match="runs past the end"):
        unpack_strings(stored[:-1], [2, 2])
    assert storable(np.array([{"a": 1}], dtype=object))[1] == "holds Python objects that are not bytes"
    scalar, _ = storable(b"handle\0")  # a fed bytes scalar: its trailing NUL kept, as its digest keeps it
    assert unpack_strings(scalar, []).item() == b"handle\0"
    assert array_digest(unpack_strings(scalar, [])) == array_digest(b"handle\0") != array_digest(b"handle")


def test_the_inputs_manifest_shape_is_checked():
    from npu_dump_hook.bundle.schema import input_problems

    entry = {"name": "x:0", "source": "feed", "op_type": "Placeholder", "dtype": "float32", "shape": [2],
             "sha256": "0" * 64, "file": "inputs/0000_x_0.npy"}
    good = {"step": 0, "max_input_bytes": 10, "total_bytes": 8, "kept": True, "reason": None, "tensors": [entry]}
    assert input_problems(good) == [] and input_problems(None) == []
    for path in ("inputs/../init/x.npy", "inputs/sub/x.npy", "init/x.npy", "inputs/x.txt", "inputs/.npy"):
        assert input_problems(dict(good, tensors=[dict(entry, file=path)])) == [
            "inputs.tensors[0]: file is neither null nor a path inputs/*.npy"], path
    assert "file is null but inputs.kept is true" in input_problems(dict(good, tensors=[dict(entry, file=None)]))[0]
    assert "source 'disk' is not one of" in input_problems(dict(good, tensors=[dict(entry, source="disk")]))[0]
    assert input_problems(dict(good, kept="yes")) == ["inputs.kept is not true or false"]


def _replay(values):
    from npu_dump_hook.train.fingerprints import array_digest
    from npu_dump_hook.train.replay import InputReplay

    entries = []
    for name, value in values:
        entry = dict(array_digest(value), name=name, source="feed", file="inputs/x.npy")
        entries.append((entry, value))
    return InputReplay("/npu/bundle", entries)


def test_replay_sets_the_scripts_own_feeds_for_one_run_and_feeds_the_rest_itself():
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        x = v1.placeholder(tf.float32, [None, 2], name="x")
        batch = v1.placeholder_with_default(tf.zeros([3], tf.int64), [3], name="batch")
        replay = _replay([("x:0", np.ones((4, 2), np.float32)), ("batch:0", np.arange(3, dtype=np.int64))])
        mine = np.zeros((4, 2), np.float32)
        user_feed = {x: mine}
        feeds = replay.feeds(graph, user_feed)
        assert list(feeds) == [batch] and feeds[batch].tolist() == [0, 1, 2]
        assert user_feed[x].tolist() == [[1.0, 1.0]] * 4
        with v1.Session() as sess:
            assert sess.run(x * 2, dict(user_feed, **{"batch:0": feeds[batch]})).sum() == 16
        replay.undo()
        assert user_feed[x] is mine
        assert [t["name"] for t in replay.record()["tensors"]] == ["batch:0", "x:0"]


def test_replay_names_every_tensor_the_graph_cannot_take_and_why():
    import numpy as np
    import tensorflow as tf

    from npu_dump_hook import ReplayError

    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        v1.placeholder(tf.float32, [None, 2], name="x")
        v1.placeholder(tf.int32, [None], name="y")
        replay = _replay([("x:0", np.ones((4, 3), np.float32)), ("y:0", np.ones(4, np.int64)),
                          ("gone:0", np.ones(1, np.float32))])
        user_feed = {"x:0": 1}
        with pytest.raises(ReplayError) as info:
            replay.feeds(graph, user_feed)
    message = str(info.value)
    assert "3 of the NPU step's input(s) cannot be fed" in message
    assert "gone:0 (not a tensor of this graph)" in message
    assert "x:0 (shape [None, 2] here, [4, 3] in the NPU bundle)" in message
    assert "y:0 (dtype int32 here, int64 in the NPU bundle)" in message
    assert [t["name"] for t in info.value.tensors] == ["gone:0", "x:0", "y:0"]
    assert user_feed == {"x:0": 1}  # nothing set before every tensor is known to be feedable
