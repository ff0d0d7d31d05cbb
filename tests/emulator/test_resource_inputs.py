"""Ops with a resource input (issue #21 item 7): ``IteratorGetNext`` and a queue's dequeue get their
dump file under ``dump_mode="all"``/``"input"``, with their outputs and non-resource inputs; the
handle itself is left out, as GE does. Bundle coverage and compare then count them.
"""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import read_bundle
from npu_dump_hook.compare import compare
from npu_dump_hook.formats.dump_file import DumpFile
from npu_dump_hook.sample_models import mlp_session

v1 = tf.compat.v1


def _dumped(hook):
    """{op name: (inputs, outputs)} of the one dumped step's files."""
    steps = [s for s in hook.summary["emulator"]["steps"] if s["dir"]]
    assert len(steps) == 1
    result = {}
    for path in glob.glob(os.path.join(steps[0]["dir"], "*")):
        if os.path.basename(path) != "mapping.csv":
            with DumpFile.open(path) as dump:
                result[dump.op_name] = (len(dump.inputs), len(dump.outputs))
    return result


def _skipped(hook):
    return [entry["op"] for entry in hook.summary["emulator"]["skipped"]]


@pytest.mark.parametrize("mode", ["all", "output", "input"])
def test_iterator_get_next_is_dumped_without_its_iterator_handle(in_tmp_cwd, mode):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_mode=mode), output_dir="out",
                       reference=False, collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    dumped = _dumped(hook)
    # x and y as outputs; the IteratorV2 handle is no dumped input (and no reason to skip the op)
    assert dumped.get("IteratorGetNext") == {"all": (0, 2), "output": (0, 2), "input": None}[mode]
    assert "IteratorGetNext" not in _skipped(hook)
    assert dumped["hidden1/MatMul"] == {"all": (2, 1), "output": (0, 1), "input": (2, 0)}[mode]


def _queue_graph():
    rows = np.arange(32, dtype=np.float32).reshape(8, 4)
    queue = v1.FIFOQueue(16, [tf.float32], shapes=[[4]], name="rows")
    enqueue = queue.enqueue_many([tf.constant(rows)])
    batch = queue.dequeue_many(tf.constant(4, name="count"), name="batch")
    w = v1.get_variable("w", initializer=tf.ones([4, 1]))
    loss = tf.reduce_sum(tf.matmul(batch, w), name="loss")
    train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    return enqueue, train_op


@pytest.mark.parametrize("mode", ["all", "input"])
def test_a_queue_dequeue_keeps_its_count_input_and_leaves_the_queue_handle_out(in_tmp_cwd, mode):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_mode=mode), output_dir="out",
                       reference=False, collect=False)
    with tf.Graph().as_default():
        enqueue, train_op = _queue_graph()
        with v1.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(enqueue)
            sess.run(train_op)
    dumped = _dumped(hook)
    assert dumped["batch"] == {"all": (1, 1), "input": (1, 0)}[mode]  # count in; the rows out under all
    assert "batch" not in _skipped(hook)


def test_compare_and_coverage_count_iterator_get_next(in_tmp_cwd):
    npu_hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_mode="all"),
                           output_dir=str(in_tmp_cwd / "npu"), backend="emulated", emulate_profile="ascend")
    mlp_session.train(npu_hook.options, hooks=[npu_hook], steps=1000)
    npu = npu_hook.bundle.location
    coverage = read_bundle(npu)["coverage"]
    assert coverage["missing"] == [] and coverage["dumped"] == coverage["expected"], coverage
    dumped = {entry["op_name"] for entry in read_bundle(npu)["files"] if entry["kind"] == "dump"}
    assert "IteratorGetNext" in dumped
    golden_hook = NpuDumpHook(output_dir=str(in_tmp_cwd / "golden"), initial_state=npu)
    mlp_session.train(golden_hook.options, hooks=[golden_hook], steps=1000)
    result = compare(npu, golden_hook.bundle.location, workers=1)
    assert result.exit_code == 0, result.summary_text()
    rows = [r for r in result.doc["rows"] if r["npu_op"] == "IteratorGetNext"]
    assert sorted((r["direction"], r["slot"], r["status"]) for r in rows) == [("output", 0, "ok"), ("output", 1, "ok")]
    assert [r["golden_tensor"] for r in sorted(rows, key=lambda r: r["slot"])] == ["IteratorGetNext:0",
                                                                                  "IteratorGetNext:1"]
    assert result.doc["summary"]["input_inconsistent"] is False
