"""Reference (golden) capture with real TF: msaccucmp-ready names, manifest, values of the very step."""
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook.errors import NameFormatError
from npu_dump_hook.formats import names
from npu_dump_hook.reference import MANIFEST_NAME, MANIFEST_SCHEMA, ReferenceCapture, golden_file_name
from npu_dump_hook.sample_models import cnn_estimator

from helpers.hooks import FetchHook

v1 = tf.compat.v1
# msaccucmp's NUMPY_DUMP_PATTERN, written out here so a change in names.py cannot hide a break.
NUMPY_PATTERN = re.compile(r"^([\.A-Za-z0-9_-]+\.[0-9]+)\.[0-9]{1,255}\.npy$")


class ReferenceHook(v1.train.SessionRunHook):
    """The smallest SessionRunHook around ReferenceCapture."""

    def __init__(self, golden_dir, step=0):
        self.reference = ReferenceCapture(golden_dir, step=step)

    def begin(self):
        self.reference.begin()

    def before_run(self, run_context):
        return self.reference.before_run(run_context)

    def after_run(self, run_context, run_values):
        self.reference.after_run(run_context, run_values)


class StopAfter(v1.train.SessionRunHook):
    def __init__(self, steps):
        self.steps, self.done = steps, 0

    def after_run(self, run_context, run_values):
        self.done += 1
        if self.done >= self.steps:
            run_context.request_stop()


FETCHED = ["loss:0", "conv1/Conv2D:0", "conv1/Relu:0", "pool2/MaxPool:0", "fc1/MatMul:0", "logits/BiasAdd:0",
           "IteratorGetNext:0"]


def test_estimator_cnn_golden_folder(tmp_path):
    golden = str(tmp_path / "golden")
    hook = ReferenceHook(golden)
    fetch = FetchHook(FETCHED)
    cnn_estimator.train(str(tmp_path / "model"), hooks=[hook, fetch, StopAfter(1)], steps=1000)
    files = sorted(os.listdir(golden))
    npys = [f for f in files if f.endswith(".npy")]
    assert files == sorted(npys + [MANIFEST_NAME])
    assert len(npys) > 50 and all(NUMPY_PATTERN.match(f) for f in npys)
    # One file per tensor name; the values are those TF computed in that very step.
    by_key = {}
    for name in npys:
        parsed = names.parse_npy_name(name)
        assert len(str(parsed.timestamp)) == 16
        by_key.setdefault(parsed.key, []).append(name)
    assert all(len(v) == 1 for v in by_key.values())
    for tensor_name, expected in fetch.values.items():
        op_name, index = tensor_name.split(":")
        (file_name,) = by_key["{}.{}".format(op_name.replace("/", "_"), index)]
        actual = np.load(os.path.join(golden, file_name))
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected, err_msg=tensor_name)
    # The images entering the step are in TF layout (NHWC).
    (images,) = by_key["IteratorGetNext.0"]
    assert np.load(os.path.join(golden, images)).shape == (8, 28, 28, 1)

    with open(os.path.join(golden, MANIFEST_NAME)) as handle:
        manifest = json.load(handle)
    assert manifest["schema"] == MANIFEST_SCHEMA
    assert sorted(entry["file"] for entry in manifest["files"]) == npys
    loss = [e for e in manifest["files"] if e["tensor"] == "loss:0"][0]
    assert loss["op_type"] == "Identity" and loss["dtype"] == "float32" and loss["shape"] == []
    reasons = {e["tensor"]: e["reason"] for e in manifest["skipped"]}
    report = hook.reference.report
    # A variable the step updates (TF 1.15 reference variable, or the resource handle its update
    # takes): the value it held before the step.
    assert "conv1/kernel:0" not in reasons
    kernel = [e for e in manifest["files"] if e["tensor"] == "conv1/kernel:0"][0]
    assert kernel["op_type"] == ("VarHandleOp" if v1.resource_variables_enabled() else "VariableV2")
    assert kernel["shape"] == [3, 3, 1, 8]
    if v1.resource_variables_enabled():  # handles nothing updates (the dataset's, the iterator's) stay skipped
        assert report["skip_reasons"]["resource handle: no array value"] >= 1
    assert manifest["renamed"] == [] and manifest["key_collisions"] == {}
    assert report["files"] == len(npys) and report["skipped"] == len(manifest["skipped"])


def test_reference_capture_takes_the_requested_step_only(tmp_path):
    golden = str(tmp_path / "golden")
    hook = ReferenceHook(golden, step=1)
    with tf.Graph().as_default():
        counter = v1.get_variable("counter", initializer=tf.constant(0.0))
        bump = tf.identity(v1.assign_add(counter, 1.0), name="bump")
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            for _ in range(3):
                session.run(bump)
    loaded = {names.parse_npy_name(f).key: np.load(os.path.join(golden, f))
              for f in os.listdir(golden) if f.endswith(".npy")}
    assert loaded["bump.0"] == 2.0  # the second step's value, not the first's or the third's
    assert not os.path.exists(hook.reference.scratch_dir)


def _shared_key_manifest(tmp_path, last_name=None):
    """Capture a/b and a_b (one msaccucmp key), optionally followed by an op named ``last_name``."""
    golden = str(tmp_path / "golden")
    hook = ReferenceHook(golden)
    with tf.Graph().as_default():
        with tf.name_scope("a"):
            first = tf.constant(1.0, name="b")  # a/b
        last = tf.add(first, 1.0, name="a_b")  # a_b: the same msaccucmp key as a/b
        if last_name is not None:
            try:
                last = tf.identity(last, name=last_name)
            except ValueError:  # TF 1.15 allows only [A-Za-z0-9_.\-/] in op names: nothing to rename
                pytest.skip("this TensorFlow refuses op names msaccucmp cannot match")
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(last)
    with open(os.path.join(golden, MANIFEST_NAME)) as handle:
        return json.load(handle)


def test_names_that_share_an_msaccucmp_key_are_listed(tmp_path):
    manifest = _shared_key_manifest(tmp_path)
    assert manifest["key_collisions"] == {"a_b.0": ["a/b:0", "a_b:0"]} and manifest["renamed"] == []


def test_names_msaccucmp_cannot_match_are_renamed_and_shared_keys_listed(tmp_path):
    manifest = _shared_key_manifest(tmp_path, last_name="x.y>z")
    files = {e["tensor"]: e["file"] for e in manifest["files"]}
    assert files["x.y>z:0"].startswith("x_y_z.0.")
    assert manifest["renamed"] == [{"tensor": "x.y>z:0", "file": files["x.y>z:0"]}]
    assert manifest["key_collisions"] == {"a_b.0": ["a/b:0", "a_b:0"]}
    # msaccucmp uses the file with the largest timestamp: the later op's.
    first_stamp = names.parse_npy_name(files["a/b:0"]).timestamp
    assert names.parse_npy_name(files["a_b:0"]).timestamp > first_stamp
    assert np.load(os.path.join(str(tmp_path / "golden"), files["a_b:0"])) == 2.0


@pytest.mark.parametrize("op_name,expected", [
    ("conv1/Conv2D", "conv1_Conv2D.0.1700000000000000.npy"),
    ("block.1/dense/MatMul", "block_1_dense_MatMul.0.1700000000000000.npy"),
    ("a>b\\c", "a_b_c.0.1700000000000000.npy"),
])
def test_golden_file_name(op_name, expected):
    name = golden_file_name(op_name, 0, 1700000000000000)
    assert name == expected and NUMPY_PATTERN.match(name)


def test_golden_file_name_needs_a_16_digit_timestamp():
    with pytest.raises(NameFormatError, match="16-digit"):
        golden_file_name("op", 0, 17000)


class RecordingReferenceHook(ReferenceHook):
    """Keeps what ``before_run`` asked each step to fetch."""

    def __init__(self, golden_dir, step=0):
        super().__init__(golden_dir, step=step)
        self.asked = []

    def before_run(self, run_context):
        args = super().before_run(run_context)
        self.asked.append(args)
        return args


def test_steps_before_the_captured_one_fetch_its_tensors_and_keep_nothing(tmp_path):
    """The captured step's fetch set is the one the session's first step ran (one executor for both)."""
    golden = str(tmp_path / "golden")
    hook = RecordingReferenceHook(golden, step=2)
    with tf.Graph().as_default():  # a resource variable: nothing streams (TF 1.x ref outputs would)
        counter = v1.get_variable("counter", initializer=tf.constant(0.0), use_resource=True)
        bump = tf.identity(v1.assign_add(counter, 1.0), name="bump")
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            for _ in range(2):
                session.run(bump)
                assert not os.path.exists(golden)  # a warm-up step writes nothing
            session.run(bump)
            session.run(bump)
    warm, captured, after = hook.asked[:2], hook.asked[2], hook.asked[3]
    fetched = [t.name for t in captured.fetches.tensors]  # one fetch: the tensors and the dump ops in it
    # bump is an Identity: derived from its input, which is fetched (_capture_derive.VALUE_FORWARDING)
    assert bump.op.inputs[0].name in fetched and "bump:0" not in fetched and after is None
    for args in warm:
        sink = args.fetches
        assert [t.name for t in sink.tensors] == fetched and sink.ops == [] and sink.values is None
    loaded = {names.parse_npy_name(f).key: np.load(os.path.join(golden, f))
              for f in os.listdir(golden) if f.endswith(".npy")}
    assert loaded["bump.0"] == 3.0  # the third step's value


def test_manifest_file_lines_are_json_dumps_of_each_entry(tmp_path):
    """The manifest's file lines come from a template: each must be json.dumps of its entry, byte for byte
    (non-ASCII and escaped characters, loop iterations, scalars; a field of another type takes json.dumps)."""
    from npu_dump_hook.train._capture_results import CaptureResult, CapturedTensor
    from npu_dump_hook.train.golden_capture import golden_report

    golden = str(tmp_path / "golden")
    os.makedirs(golden)
    stamp = 1700000000000000
    tensors = [CapturedTensor("a/b", "MatMul", 0, "float32", (2, 3), os.path.join(golden, "a_b.0.%d.npy" % stamp), 0, stamp),
               CapturedTensor("w\u00e9ight\"q\\", "Const", 1, "int64", (), os.path.join(golden, "w.1.%d.npy" % stamp), 1,
                              stamp + 1),
               CapturedTensor("loop/body", "Add", 0, "float16", (4,), os.path.join(golden, "loop_body.0.%d.npy" % stamp), 2,
                              stamp + 2, iteration=0),
               CapturedTensor("loop/body", "Add", 0, "float16", (4,), os.path.join(golden, "loop_body.0.%d.npy" % (stamp + 3)),
                              2, stamp + 3, iteration=1),
               CapturedTensor("odd", "Cast", 0, "bool", (1,), os.path.join(golden, "odd.0.%d.npy" % stamp), True, stamp)]
    golden_report(CaptureResult(tensors=tensors, skipped=[], executed_ops=[]), golden)
    with open(os.path.join(golden, MANIFEST_NAME), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    expected = []
    for tensor in tensors:
        entry = {"file": os.path.basename(tensor.path), "tensor": tensor.tensor_name, "op_type": tensor.op_type,
                 "dtype": tensor.dtype, "shape": list(tensor.shape), "order": tensor.order,
                 "timestamp": tensor.timestamp_us}
        if tensor.iteration is not None:
            entry["iteration"] = tensor.iteration
        expected.append("  " + json.dumps(entry))
    assert lines[3:3 + len(tensors)] == [line + "," for line in expected[:-1]] + expected[-1:]
    assert "\"order\": true" in lines[3 + len(tensors) - 1]  # the bool went through json.dumps
