"""fingerprints: sha256 of the state before the captured step and of its batch, in run.json and bundle.json."""
import copy
import hashlib
import json
import os
import struct

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.bundle.verify import check_bundle_json
from npu_dump_hook.fingerprints import (CAUSES, StateReader, array_digest, batch_tensors, compare,
                                        fingerprints_section, section_problems)

v1 = tf.compat.v1
ROWS = np.arange(48, dtype=np.float32).reshape(12, 4) / 10.0


# --------------------------------------------------------------------------- hashing


def test_digest_is_over_c_order_little_endian_bytes():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    digest = array_digest(array)
    assert digest == {"dtype": "float32", "shape": [3, 4],
                      "sha256": hashlib.sha256(array.astype("<f4").tobytes(order="C")).hexdigest()}
    assert array_digest(np.asfortranarray(array)) == digest  # memory layout does not matter
    assert array_digest(array.astype(">f4")) == digest  # nor the byte order
    assert array_digest(array.T)["sha256"] != digest["sha256"]  # the C-order values do
    assert array_digest(array.reshape(4, 3))["shape"] == [4, 3]
    assert array_digest(np.float64(2.5)) == {"dtype": "float64", "shape": [],
                                             "sha256": hashlib.sha256(struct.pack("<d", 2.5)).hexdigest()}


def test_digest_of_strings_frames_each_element():
    digest = array_digest(np.array([b"ab", b"c"], dtype=object))
    framed = struct.pack("<Q", 2) + b"ab" + struct.pack("<Q", 1) + b"c"
    assert digest == {"dtype": "string", "shape": [2], "sha256": hashlib.sha256(framed).hexdigest()}
    assert array_digest(np.array([b"a", b"bc"], dtype=object))["sha256"] != digest["sha256"]


# --------------------------------------------------------------------------- comparison


def _section(state, batch):
    return fingerprints_section(0, [dict(name=n, **array_digest(v)) for n, v in state.items()],
                                [dict(name=n, source="iterator", op_type="IteratorGetNext", **array_digest(v))
                                 for n, v in batch.items()])


def test_compare_names_what_differs_and_why():
    npu = _section({"w": np.ones(3), "b": np.zeros(2), "gone": np.ones(1)}, {"IteratorGetNext:0": ROWS})
    same = compare(npu, copy.deepcopy(npu))
    assert same.match and same.causes() == [] and same.notes == []
    golden = _section({"w": np.ones(3) * 2, "b": np.zeros(3), "new": np.ones(1)},
                      {"IteratorGetNext:0": ROWS[::-1].copy()})
    diff = compare(npu, golden)
    assert not diff.match
    assert diff.state == {"values": ["w"], "mismatched": ["b"], "missing": ["gone"], "extra": ["new"]}
    assert diff.batch["values"] == ["IteratorGetNext:0"]
    assert diff.causes() == [CAUSES["state_values"], CAUSES["state_variables"], CAUSES["batch_values"]]
    message = diff.message("/npu/bundle")
    for expected in ("/npu/bundle", "1 variable(s) differ in value: w", "differ in dtype or shape: b",
                     "missing here (in the NPU bundle only): gone", "extra here (not in the NPU bundle): new",
                     "batch: 1 input(s) differ in value: IteratorGetNext:0", "shuffle not removed"):
        assert expected in message, (expected, message)
    assert json.loads(json.dumps(diff.as_dict()))["match"] is False


def test_compare_notes_parts_one_side_did_not_record():
    npu = _section({"w": np.ones(3)}, {})
    npu["batch"] = None
    diff = compare(npu, _section({"w": np.ones(3)}, {"x:0": ROWS}))
    assert diff.match and diff.notes == ["batch not compared: not recorded in the NPU bundle"]
    assert compare(None, npu).notes[0] == "state not compared: not recorded in the NPU bundle"


def test_section_shape_problems():
    good = _section({"w": np.ones(3)}, {"IteratorGetNext:0": ROWS})
    assert section_problems(good) == [] and section_problems(None) == []
    bad = copy.deepcopy(good)
    bad["state"][0]["sha256"] = "ABC"
    bad["batch"][0]["shape"] = [-1]
    del bad["batch"][0]["source"]
    bad["algorithm"] = "md5"
    problems = section_problems(bad)
    assert "fingerprints.algorithm is not 'sha256'" in problems
    assert "fingerprints.state[0]: sha256 missing or not 64 lowercase hex digits" in problems
    assert "fingerprints.batch[0]: source missing or not a string" in problems
    assert "fingerprints.batch[0]: shape missing or not a list of non-negative integers" in problems
    assert section_problems([]) == ["fingerprints is neither null nor an object"]


# --------------------------------------------------------------------------- session side


def _model(feed=False):
    dataset = tf.data.Dataset.from_tensor_slices(ROWS).repeat().batch(3)
    x = v1.data.make_one_shot_iterator(dataset).get_next()
    feeds = {}
    if feed:
        scale = v1.placeholder(tf.float32, [], name="scale")
        x = x * scale
        feeds = {scale: 0.5}
    w = v1.get_variable("w", [4, 2], initializer=v1.constant_initializer(0.25))
    b = v1.get_variable("b", [2], initializer=v1.zeros_initializer())
    loss = tf.reduce_sum(tf.matmul(x, w) + b)
    step = v1.train.get_or_create_global_step()
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), feeds


def test_state_reader_groups_within_the_budget_and_reads_the_same_values():
    with tf.Graph().as_default():
        _model()
        variables = v1.global_variables()
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            one_by_one = StateReader(variables, memory_budget=1)
            assert [len(g) for g in one_by_one.groups()] == [1] * len(variables)
            together = StateReader(variables, memory_budget=1 << 20)
            assert len(together.groups()) == 1
            assert one_by_one.read(session) == together.read(session)
            entries, skipped = together.read(session)
            assert skipped == [] and {e["name"] for e in entries} == {"w", "b", "global_step"}
            w = next(e for e in entries if e["name"] == "w")
            assert w == dict(name="w", **array_digest(np.full((4, 2), 0.25, np.float32)))


def test_state_reader_skips_uninitialized_variables_with_the_reason():
    with tf.Graph().as_default():
        _model()
        with v1.Session() as session:
            session.run(v1.variables_initializer([v for v in v1.global_variables() if v.op.name != "b"]))
            entries, skipped = StateReader(v1.global_variables(), 1 << 20).read(session)
    assert [s["name"] for s in skipped] == ["b"] and "uninitialized" in skipped[0]["reason"]
    assert {e["name"] for e in entries} == {"w", "global_step"}


def test_batch_tensors_are_the_iterator_outputs_the_step_runs_and_its_feeds():
    with tf.Graph().as_default() as graph:
        train_op, feeds = _model(feed=True)
        unused = v1.data.make_one_shot_iterator(tf.data.Dataset.range(3)).get_next()  # another pipeline
        chosen, skipped = batch_tensors(graph, train_op, feeds)
        assert [(t.name, source) for t, source in chosen] == [("IteratorGetNext:0", "iterator"),
                                                              ("scale:0", "feed")]
        assert skipped == [] and unused.op.name not in [t.op.name for t, _ in chosen]
        chosen, _ = batch_tensors(graph, train_op, {"IteratorGetNext:0": ROWS[:3], "scale:0": 1.0})
        assert [(t.name, source) for t, source in chosen] == [("IteratorGetNext:0", "feed"), ("scale:0", "feed")]


# --------------------------------------------------------------------------- through the hook


def _train(hook, steps=5, feed=False):
    with tf.Graph().as_default():
        train_op, feeds = _model(feed)
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            for _ in range(steps):
                if session.should_stop():
                    break
                session.run(train_op, feed_dict=feeds or None)


def _checkpoint_digests(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: array_digest(reader.get_tensor(name)) for name in reader.get_variable_to_shape_map()}


def test_run_and_bundle_record_the_state_before_the_captured_step_and_its_batch(in_tmp_cwd):
    # dump_step=1: the state is the one after step 0's update, the batch the second one (rows 3..5).
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_step="1"), output_dir="out")
    _train(hook, feed=True)
    with open(os.path.join(hook.run_dir, "run.json")) as handle:
        recorded = json.load(handle)["fingerprints"]
    doc = read_bundle(hook.bundle.path)
    assert doc["fingerprints"] == recorded and recorded["step"] == 1 and recorded["algorithm"] == "sha256"
    state = {e["name"]: {k: e[k] for k in ("dtype", "shape", "sha256")} for e in recorded["state"]}
    saved = _checkpoint_digests(hook.record.initial_state)  # the checkpoint saved before the same step
    assert state == saved and set(state) == {"w", "b", "global_step"}
    assert state["global_step"] == array_digest(np.int64(1))
    assert state["w"] != array_digest(np.full((4, 2), 0.25, np.float32))  # step 0 updated it
    batch = {e["name"]: e for e in recorded["batch"]}
    assert batch["IteratorGetNext:0"]["sha256"] == array_digest(ROWS[3:6])["sha256"]
    assert batch["IteratorGetNext:0"]["source"] == "iterator"
    assert batch["scale:0"] == dict(name="scale:0", source="feed", op_type="Placeholder",
                                    **array_digest(np.float32(0.5)))
    assert verify_bundle(hook.bundle.path) == []


def test_verify_checks_the_fingerprints_shape(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
    _train(hook)
    doc = read_bundle(hook.bundle.path)
    assert check_bundle_json(doc) == []
    doc["fingerprints"]["state"][0]["sha256"] = None
    assert check_bundle_json(doc) == ["fingerprints.state[0]: sha256 missing or not 64 lowercase hex digits"]
    doc["fingerprints"] = None  # unknown (post-hoc collection): allowed
    assert check_bundle_json(doc) == []


def test_a_real_npu_run_records_the_batch_without_capturing(in_tmp_cwd, npu_bridge_double):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    assert hook.backend.name == "npu" and not hook.reference
    _train(hook, steps=1)
    fingerprints = hook.record.fingerprints
    assert [e["name"] for e in fingerprints["batch"]] == ["IteratorGetNext:0"]
    assert fingerprints["batch"][0]["sha256"] == array_digest(ROWS[0:3])["sha256"]
    assert {e["name"] for e in fingerprints["state"]} == {"w", "b", "global_step"}
    assert not os.path.exists(os.path.join(hook.run_dir, "golden"))


@pytest.mark.parametrize("seed", [1, 2])
def test_state_fingerprints_follow_the_initial_values(in_tmp_cwd, seed):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    with tf.Graph().as_default():
        w = v1.get_variable("w", [3], initializer=v1.random_uniform_initializer(seed=seed))
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w), global_step=step)
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            initial = session.run(w)
            session.run(train_op)
    (entry,) = [e for e in hook.record.fingerprints["state"] if e["name"] == "w"]
    assert entry["sha256"] == array_digest(initial)["sha256"]
    assert hook.record.fingerprints["batch"] == []  # no input pipeline, nothing fed
