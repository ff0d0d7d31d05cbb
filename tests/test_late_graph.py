"""What a plain-session script builds after wrapping (issue #21 items 4-5), real TensorFlow, both stacks.

``NpuDumpSession`` begins the hook at wrapping; the script then builds its optimizer (Adam's
slots and counters are variables made after ``begin()``, as Keras makes them in ``fit``) and a
string-handle pipeline with a clock-seeded random op. At the captured step they join the
bundle: the initial state and the state fingerprints hold every variable, ``tf/graph.pbtxt``
is the graph the step ran (the hook's own ops left out), the late ops are captured and dumped
(coverage complete), the late random sources are in the randomness report (not pinned, the
clock seed not reproducible); a golden run by hand restores all of it and matches.
"""
import json
import os
import time

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import NpuDumpSession
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.train.late import LATE_NOTE

v1 = tf.compat.v1
ROWS = np.linspace(-1.0, 1.0, 32 * 4, dtype=np.float32).reshape(32, 4)


def _script(root, name, **hook_options):
    """Wrap first, build the rest, train three steps; the hook's bundle path."""
    with tf.Graph().as_default():
        handle = v1.placeholder(tf.string, [], name="handle")
        iterator = v1.data.Iterator.from_string_handle(handle, tf.float32, [None, 4])
        x = iterator.get_next()
        with v1.variable_scope("model"):
            w = v1.get_variable("w", initializer=tf.constant(np.full((4, 1), 0.5, np.float32)))
        sess = NpuDumpSession(v1.Session(), stop="continue", output_dir=str(root / name), **hook_options)
        # built after wrapping: noise seeded from the clock, the loss, Adam (slots, beta powers)
        clock_seed = int(time.time())
        noise = v1.random_uniform([4, 1], -0.01, 0.01, seed=clock_seed, name="late_noise")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w + noise) - 1.0), name="loss")
        train = v1.train.AdamOptimizer(0.1).minimize(loss, name="late_train")
        sess.run(v1.global_variables_initializer())
        dataset = tf.data.Dataset.from_tensor_slices(ROWS).batch(8).repeat()
        token = sess.run(v1.data.make_one_shot_iterator(dataset).string_handle())
        for _ in range(3):
            sess.run(train, {handle: token})
        sess.close()
        assert sess.hook.bundle is not None
        return sess.hook.bundle.location


@pytest.fixture(scope="module")
def late_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("late")
    npu = _script(root, "npu", backend="emulated")
    golden = _script(root, "golden", initial_state=npu)
    return npu, golden


def _checkpoint_variables(bundle):
    prefix = os.path.join(bundle, "data", "init", "model.ckpt")
    index = [name for name in os.listdir(os.path.dirname(prefix)) if name.endswith(".index")]
    return {name for name, _ in tf.train.list_variables(os.path.join(bundle, "data", "init", index[0][:-6]))}


def test_variables_made_after_wrapping_are_in_the_initial_state_and_fingerprints(late_runs):
    npu, _golden = late_runs
    saved = _checkpoint_variables(npu)
    slots = {"model/w/Adam", "model/w/Adam_1"}
    assert {"model/w"} | slots <= saved, saved
    assert any(name.startswith("beta1_power") for name in saved), saved
    state = {entry["name"] for entry in read_bundle(npu)["fingerprints"]["state"]}
    assert saved == state


def test_graph_pbtxt_is_the_graph_the_captured_step_ran(late_runs):
    npu, _golden = late_runs
    with open(os.path.join(npu, "data", "tf", "graph.pbtxt")) as handle:
        text = handle.read()
    names = {line.split('"')[1] for line in text.splitlines() if line.startswith("  name: ")}
    assert {"late_noise", "loss", "late_train", "IteratorGetNext", "model/w/Adam"} <= names
    assert not [n for n in names if n.startswith(("npu_dump_hook_capture", "npu_dump_hook_initial_state",
                                                   "npu_dump_hook_golden_restore"))]


def test_ops_built_after_wrapping_are_captured_and_dumped(late_runs):
    npu, _golden = late_runs
    doc = read_bundle(npu)
    assert verify_bundle(npu) == []
    assert doc["coverage"]["missing"] == [] and doc["coverage"]["dumped"] == doc["coverage"]["expected"]
    dumped = {entry["op_name"] for entry in doc["files"] if entry["kind"] == "dump"}
    assert {"sub", "late_noise", "IteratorGetNext"} <= dumped, dumped
    assert any(name.startswith("late_train_update_model_w_") and "ApplyAdam" in name for name in dumped), dumped


def test_random_sources_built_after_wrapping_are_audited_and_reported(late_runs):
    npu, _golden = late_runs
    report = read_bundle(npu)["randomness"]
    late = {s["op"]: s for s in report["sources"] if s["action"].endswith(LATE_NOTE)}
    noise = [op for op in late if op.startswith("late_noise")]
    assert noise, report["sources"]
    assert late[noise[0]]["action"].startswith("clock-seeded")
    assert noise[0] in {s["op"] for s in report["not_reproducible"]}


def test_a_golden_run_by_hand_restores_the_late_variables_and_matches(late_runs):
    npu, golden = late_runs
    doc, npu_doc = read_bundle(golden), read_bundle(npu)
    assert doc["golden_for"]["match"] is True, json.dumps(doc["golden_for"])[:2000]
    assert doc["fingerprints"]["state"] == npu_doc["fingerprints"]["state"]
    assert doc["fingerprints"]["batch"] == npu_doc["fingerprints"]["batch"]
