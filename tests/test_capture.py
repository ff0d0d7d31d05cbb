"""TensorCapture with real TF graphs: values, executed set, control flow, skipped tensors, no side effects."""
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook.train.capture import (
    BUDGET_ENV, DEFAULT_MEMORY_BUDGET, WRITE_SCOPE, CaptureResult, TensorCapture,
)
from npu_dump_hook.errors import BackendError
from npu_dump_hook.train._capture_memory import IN_MEMORY_BYTES

v1 = tf.compat.v1
STAMP = 1700000000000000


class CaptureHook(v1.train.SessionRunHook):
    """Captures local step ``step`` with a TensorCapture; keeps the fetched results of every step."""

    def __init__(self, scratch, npy_dir=None, step=0):
        self.scratch, self.npy_dir, self.step = scratch, npy_dir, step
        self.capture = None
        self.result = None  # type: CaptureResult
        self._steps = 0
        self._on = False

    def begin(self):
        self.capture = TensorCapture(v1.get_default_graph(), self.scratch, npy_dir=self.npy_dir)

    def before_run(self, run_context):
        self._on = self._steps == self.step
        self._steps += 1
        return self.capture.run_args(run_context) if self._on else None

    def after_run(self, run_context, run_values):
        if self._on:
            self.result = self.capture.finish(STAMP)


def _cnn(seed=7):
    """A deterministic small CNN training step: returns (train_op, loss, names of interest)."""
    v1.set_random_seed(seed)
    rng = np.random.RandomState(seed)
    images = tf.constant(rng.rand(4, 8, 8, 1).astype(np.float32), name="images")
    labels = tf.constant(rng.randint(0, 3, size=4).astype(np.int64), name="labels")
    x = v1.layers.conv2d(images, 4, 3, padding="same", activation=tf.nn.relu, name="conv1",
                         kernel_initializer=v1.glorot_uniform_initializer(seed=seed))
    x = v1.layers.max_pooling2d(x, 2, 2, name="pool1")
    x = v1.layers.flatten(x, name="flatten")
    logits = v1.layers.dense(x, 3, name="logits", kernel_initializer=v1.glorot_uniform_initializer(seed=seed + 1))
    loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(labels, logits), name="loss")
    step = v1.train.get_or_create_global_step()
    train_op = v1.train.AdamOptimizer(0.01).minimize(loss, global_step=step)
    return train_op, loss


def _ref_variable_of(tensor):
    """The name of the TF 1.x reference variable ``tensor`` aliases (itself or via Identity), else None."""
    while tensor.op.type == "Identity" and tensor.op.inputs[0].dtype._is_ref_dtype:
        tensor = tensor.op.inputs[0]
    return tensor.op.name if tensor.op.type == "VariableV2" and tensor.dtype._is_ref_dtype else None


def _resource_or_ref(resource, ref):
    """What a graph holds for variables on this stack: resource variables (TF 2 default) or VariableV2 (TF 1.15)."""
    return resource if v1.resource_variables_enabled() else ref


def _run_monitored(build, hooks=(), steps=1):
    """Runs ``steps`` steps of ``build()``'s train op; returns (losses, trainable variable values)."""
    with tf.Graph().as_default():
        train_op, loss = build()
        variables = v1.trainable_variables()
        losses = []
        with v1.train.MonitoredSession(hooks=list(hooks)) as session:
            for _ in range(steps):
                losses.append(session.run([train_op, loss])[1])
            values = {v.op.name: session.run(v) for v in variables}
    return losses, values


def _capture_run(tmp_path, build, step=0, npy_dir=True, steps=1):
    hook = CaptureHook(str(tmp_path / "scratch"), str(tmp_path / "npy") if npy_dir else None, step=step)
    losses, values = _run_monitored(build, [hook], steps=steps)
    return hook.result, losses, values


def test_cnn_values_equal_a_plain_session_fetch_and_training_is_unchanged(tmp_path):
    result, losses, values = _capture_run(tmp_path, _cnn, step=1, steps=2)
    # Graph tensors with a value (update outputs beyond TF's own and resource handles are checked
    # in test_update_ops_get_the_variable_values_before_and_after_the_step).
    outputs = {op.name: len(op.output_dtypes) for op in result.executed_ops}
    names = [t.tensor_name for t in result.tensors if t.op_type != "VarHandleOp" and t.output_index < outputs[t.op_name]]
    assert {"loss:0", "conv1/Conv2D:0", "conv1/BiasAdd:0", "conv1/Relu:0", "pool1/MaxPool:0",
            "logits/MatMul:0", "images:0"} <= set(names)
    assert all(t.in_memory is None for t in result.tensors)  # kept only when asked (an emulated step)
    # A second, identical graph without capture: one plain step, then the captured step's
    # tensors fetched together with its train op.
    # TF 1.x reference variables (the TF 1.15 default) and their `read` Identity alias the buffer
    # the step updates: their captured value is the one before the step, which a fetch with the
    # step cannot show; resource-variable reads copy, so the fetch shows it too.
    with tf.Graph().as_default() as graph:
        train_op, loss = _cnn()
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            first = session.run([train_op, loss])[1]
            before = {v.op.name: session.run(v) for v in v1.global_variables()}
            fetched = session.run({"train": train_op, "values": {n: n for n in names}})["values"]
            plain_values = {v.op.name: session.run(v) for v in v1.trainable_variables()}
        aliases = {n: _ref_variable_of(graph.get_tensor_by_name(n)) for n in names}
    assert losses[0] == first
    if not v1.resource_variables_enabled():
        assert {"conv1/kernel:0", "conv1/kernel/read:0"} <= {n for n, v in aliases.items() if v}
    for name in names:
        expected = before[aliases[name]] if aliases[name] else fetched[name]
        np.testing.assert_array_equal(result.array(name), expected, err_msg=name)
    # Training results with capture on equal those without.
    plain_losses, plain_vars = _run_monitored(_cnn, steps=2)
    assert losses == plain_losses
    assert values.keys() == plain_vars.keys() == plain_values.keys()
    for key in values:
        np.testing.assert_array_equal(values[key], plain_vars[key], err_msg=key)


def test_executed_ops_are_topological_with_increasing_timestamps(tmp_path):
    result, _, _ = _capture_run(tmp_path, _cnn)
    order = {op.name: op.order for op in result.executed_ops}
    assert [op.order for op in result.executed_ops] == list(range(len(result.executed_ops)))
    for op in result.executed_ops:
        for producer in [i.rsplit(":", 1)[0] for i in op.inputs] + op.control_inputs:
            if producer in order:
                assert order[producer] < order[op.name], (producer, op.name)
    assert not any(op.name.startswith(WRITE_SCOPE) for op in result.executed_ops)
    types = {op.type for op in result.executed_ops}
    assert {"Const", "NoOp"} | _resource_or_ref({"VarHandleOp", "ResourceApplyAdam"}, {"VariableV2", "ApplyAdam"}) <= types
    assert [t.order for t in result.tensors] == sorted(t.order for t in result.tensors)
    for tensor in result.tensors:
        assert tensor.timestamp_us == STAMP + tensor.order and len(str(tensor.timestamp_us)) == 16
        assert tensor.path.endswith(".npy") and os.path.exists(tensor.path)
    # The reference naming, and nothing left behind in the scratch folder.
    assert all(re.match(r"^([\.A-Za-z0-9_-]+\.[0-9]+)\.[0-9]{1,255}\.npy$", os.path.basename(t.path))
               for t in result.tensors)
    assert not os.path.exists(str(tmp_path / "scratch"))
    reads = ["conv1/kernel/Read/ReadVariableOp:0", "conv1/Conv2D/ReadVariableOp:0", "conv1/kernel/read:0"]
    kernel = result.by_name[[name for name in reads if name in result.by_name][0]]
    assert kernel.shape == (3, 3, 1, 4) and kernel.dtype == "float32"
    skipped = {s.tensor_name: s.reason for s in result.skipped}
    # a reference variable's output, or a resource handle an update takes, is its value before the step
    assert "conv1/kernel:0" not in skipped and result.by_name["conv1/kernel:0"].shape == (3, 3, 1, 4)


def _metric_graph():
    x = tf.constant([1.0, 2.0, 3.0], name="x")
    # A resource variable: with a TF 1.x reference variable this loss races its own update (its
    # gradient does not depend on the weight, so the update may run before the forward read).
    weight = v1.get_variable("w", initializer=tf.constant(2.0), use_resource=True)
    loss = tf.reduce_sum(x * weight, name="loss")
    v1.metrics.mean(loss, name="mean_loss")  # update op exists, never fetched
    step = v1.train.get_or_create_global_step()
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), loss


def test_ops_the_step_does_not_run_are_never_triggered(tmp_path):
    hook = CaptureHook(str(tmp_path / "s"), str(tmp_path / "npy"))
    with tf.Graph().as_default():
        train_op, loss = _metric_graph()
        total = [v for v in v1.local_variables() if v.op.name == "mean_loss/total"][0]
        count = [v for v in v1.local_variables() if v.op.name == "mean_loss/count"][0]
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run([train_op, loss])
            assert session.run([total, count]) == [0.0, 0.0]
    executed = {op.name for op in hook.result.executed_ops}
    assert not any(name.startswith("mean_loss") for name in executed)
    assert "loss" in executed and "GradientDescent" in executed
    assert hook.result.array("loss:0") == 12.0


def _control_flow_graph():
    x = v1.placeholder(tf.float32, [2], name="x")
    weight = v1.get_variable("w", initializer=tf.constant(1.0))
    y = tf.multiply(x, weight, name="y")
    taken = tf.cond(tf.reduce_sum(y) > 0, lambda: y * 2.0, lambda: y - 100.0, name="branch")
    _, looped = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + 1.0), [tf.constant(0), taken],
                              name="loop")
    loss = tf.reduce_sum(looped, name="loss")
    step = v1.train.get_or_create_global_step()
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), loss


def _run_fed(hook):
    with tf.Graph().as_default():
        train_op, loss = _control_flow_graph()
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            _, value = session.run([train_op, loss], feed_dict={"x:0": np.array([1.0, 2.0], np.float32)})
    return value


@pytest.fixture
def v2_control_flow():
    """Control flow v2 (the TF 2 default; TF 1.15 builds v1 cond/while unless asked), restored after."""
    was_v2 = v1.control_flow_v2_enabled()
    v1.enable_control_flow_v2()
    try:
        yield
    finally:
        if not was_v2:
            v1.disable_control_flow_v2()


def test_tf2_control_flow_outputs_are_captured(tmp_path, v2_control_flow):
    hook = CaptureHook(str(tmp_path / "s"), str(tmp_path / "npy"))
    assert _run_fed(hook) == 12.0  # (2 + 4) + 2 * 3
    result = hook.result
    types = {op.name: op.type for op in result.executed_ops}
    assert types["branch"] in ("If", "StatelessIf") and types["loop"] in ("While", "StatelessWhile")
    np.testing.assert_array_equal(result.array("branch:0"), [2.0, 4.0])
    np.testing.assert_array_equal(result.array("loop:3"), [5.0, 7.0])
    assert result.array("loop:2") == 3  # outputs: loop counter, maximum iterations, i, a
    np.testing.assert_array_equal(result.array("x:0"), [1.0, 2.0])  # the fed value


@pytest.fixture
def v1_control_flow():
    was_v2 = v1.control_flow_v2_enabled()
    v1.disable_control_flow_v2()
    try:
        yield
    finally:
        if was_v2:
            v1.enable_control_flow_v2()


def test_v1_control_flow_captures_values_and_skips_with_reasons(tmp_path, v1_control_flow):
    hook = CaptureHook(str(tmp_path / "s"), str(tmp_path / "npy"))
    assert _run_fed(hook) == 12.0
    result = hook.result
    types = {op.name: op.type for op in result.executed_ops}
    assert types["branch/Merge"] == "Merge"
    np.testing.assert_array_equal(result.array("branch/Merge:0"), [2.0, 4.0])
    np.testing.assert_array_equal(result.array("branch/mul:0"), [2.0, 4.0])
    exits = [n for n, t in types.items() if t == "Exit" and n.startswith("loop/")]
    np.testing.assert_array_equal(result.array(exits[0] + ":0"), [5.0, 7.0])
    skipped = {s.tensor_name: s.reason for s in result.skipped}
    assert skipped["branch/sub:0"] == "no value in this step (untaken TF 1.x tf.cond branch)"
    _assert_per_iteration(result)
    assert "branch/sub:0" not in result.by_name


def _assert_per_iteration(result):
    """The loop body's ``a + 1.0`` has one value per iteration (a starts at [2, 4]), in order, each a
    golden file of its own with a growing timestamp; the loop's Exit comes after its last iteration."""
    values = result.by_iteration["loop/add_1:0"]
    assert [t.iteration for t in values] == [0, 1, 2] and "loop/add_1:0" not in result.by_name
    for tensor, expected in zip(values, ([3.0, 5.0], [4.0, 6.0], [5.0, 7.0])):
        np.testing.assert_array_equal(np.load(tensor.path), expected)
    stamps = [t.timestamp_us for t in values]
    assert stamps == sorted(set(stamps))
    exits = [t for t in result.tensors if t.op_type == "Exit" and t.op_name.startswith("loop/")]
    assert exits and all(e.timestamp_us > stamps[-1] for e in exits)


def test_string_resource_and_variant_tensors_are_skipped_with_reasons(tmp_path):
    def build():
        dataset = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)).batch(4)
        batch = v1.data.make_one_shot_iterator(dataset).get_next(name="batch")
        single = tf.data.experimental.get_single_element(tf.data.Dataset.from_tensors(5.0).repeat(2).batch(2))
        words = tf.constant(["a", "bcd"], name="words")
        lengths = tf.cast(tf.strings.length(words, name="lengths"), tf.float32)
        weight = v1.get_variable("w", initializer=tf.constant(1.0), use_resource=True)
        loss = tf.add(tf.reduce_sum(batch * weight), tf.reduce_sum(lengths) + tf.reduce_sum(single), name="loss")
        step = v1.train.get_or_create_global_step()
        return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), loss

    result, losses, _ = _capture_run(tmp_path, build)
    assert losses == [20.0]  # 0+1+2+3, lengths 1+3, 5+5
    skipped = {s.tensor_name: s.reason for s in result.skipped}
    assert skipped["words:0"] == "string tensor: the comparison handles numeric tensors only"
    assert "w:0" not in skipped  # the handle the update takes: the variable's value before the step
    assert result.array("w:0") == 1.0
    assert "resource handle: no array value" in skipped.values()  # the iterator's handle
    variant = [name for name, reason in skipped.items() if reason.startswith("variant tensor")]
    assert len(variant) >= 2  # the datasets of get_single_element
    np.testing.assert_array_equal(result.array("batch:0"), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(result.array("lengths:0"), [1, 3])


def test_fed_intermediate_ends_the_walk(tmp_path):
    with tf.Graph().as_default() as graph:
        source = tf.constant([1.0, 2.0], name="source")
        hidden = tf.multiply(source, 10.0, name="hidden")
        out = tf.add(hidden, 1.0, name="out")
        capture = TensorCapture(graph, str(tmp_path / "s"))
        context = v1.train.SessionRunContext(v1.train.SessionRunArgs(out, feed_dict={hidden: [5.0, 6.0]}), None)
        args = capture.run_args(context)
        with v1.Session() as session:
            session.run([out, args.fetches], feed_dict={hidden: [5.0, 6.0]})
    result = capture.finish(STAMP)
    executed = [op.name for op in result.executed_ops]
    assert executed == ["hidden", "out/y", "out"]
    np.testing.assert_array_equal(result.array("hidden:0"), [5.0, 6.0])
    np.testing.assert_array_equal(result.array("out:0"), [6.0, 7.0])
    # Without npy_dir the files stay in the scratch folder until cleanup().
    assert all(os.path.dirname(t.path) == str(tmp_path / "s") for t in result.tensors)
    capture.cleanup()
    assert not os.path.exists(str(tmp_path / "s"))


@pytest.mark.parametrize("dtype,expected_dtype", [
    (tf.float16, "float16"), (tf.bfloat16, "float32"), (tf.int64, "int64"), (tf.bool, "bool"),
    (tf.uint8, "uint8"), (tf.complex64, "complex64"), (tf.float64, "float64"),
])
def test_dtypes_round_trip(tmp_path, dtype, expected_dtype):
    values = np.array([[0.0, 1.5], [-2.0, 3.0]], np.float32)
    with tf.Graph().as_default() as graph:
        tensor = tf.cast(tf.constant(values), dtype, name="value")
        empty = tf.zeros([0, 3], dtype, name="empty")
        scalar = tf.cast(tf.constant(3.0), dtype, name="scalar")
        group = tf.group(tensor, empty, scalar, name="all")
        capture = TensorCapture(graph, str(tmp_path / "s"), npy_dir=str(tmp_path / "npy"))
        args = capture.run_args(v1.train.SessionRunContext(v1.train.SessionRunArgs(group), None))
        with v1.Session() as session:
            session.run([group, args.fetches])
    result = capture.finish(STAMP)
    expected = values.astype(expected_dtype if expected_dtype != "bool" else bool)
    if dtype == tf.uint8:
        expected = np.array([[0, 1], [0, 3]], np.uint8)  # TF casts negatives to 0 here
    captured = result.by_name["value:0"]
    assert captured.dtype == expected_dtype and captured.shape == (2, 2)
    array = result.array("value:0")
    assert array.dtype == np.dtype(expected_dtype)
    if dtype != tf.uint8:
        np.testing.assert_array_equal(array, expected)
    assert result.array("empty:0").shape == (0, 3)
    assert result.array("scalar:0").shape == () and result.array("scalar:0") == (True if dtype == tf.bool else 3)


def test_finish_checks_its_calls(tmp_path):
    with tf.Graph().as_default() as graph:
        out = tf.constant(1.0, name="c")
        capture = TensorCapture(graph, str(tmp_path / "s"))
        with pytest.raises(BackendError, match="without run_args"):
            capture.finish(STAMP)
        capture.run_args(v1.train.SessionRunContext(v1.train.SessionRunArgs(out), None))
        with pytest.raises(BackendError, match="16-digit"):
            capture.finish(12345)


class BudgetHook(CaptureHook):
    """CaptureHook with an explicit memory budget; records which path the captured step took."""

    def __init__(self, scratch, npy_dir, budget, step=0):
        super(BudgetHook, self).__init__(scratch, npy_dir, step=step)
        self.budget, self.path, self.dump_ops = budget, None, None

    def begin(self):
        graph = v1.get_default_graph()
        self.capture = TensorCapture(graph, self.scratch, npy_dir=self.npy_dir, memory_budget=self.budget)
        self.capture.in_memory_bytes = IN_MEMORY_BYTES  # as dump_run sets it for an emulated step
        self.dump_ops = sum(1 for op in graph.get_operations() if op.name.startswith(WRITE_SCOPE + "/")
                            and op.type == "DebugIdentity")
        # TF 1.x Apply*/Assign* reference outputs keep a dump op (used only when a step feeds their variable).
        self.ref_outputs = sum(1 for op in graph.get_operations() if op.type != "VariableV2"
                               and not op.name.startswith(WRITE_SCOPE + "/")
                               for t in op.outputs if t.dtype._is_ref_dtype)

    def after_run(self, run_context, run_values):
        super(BudgetHook, self).after_run(run_context, run_values)
        if self._on:
            self.path = self.capture.last_path


def _metadata(result, root):
    """Everything a CaptureResult says, with file paths relative to ``root``."""
    tensors = [(t.op_name, t.op_type, t.output_index, t.dtype, t.shape, os.path.relpath(t.path, root), t.order,
                t.timestamp_us) for t in result.tensors]
    skipped = [(s.tensor_name, s.op_type, s.reason) for s in result.skipped]
    ops = [(o.name, o.type, o.inputs, o.control_inputs, o.order, o.output_dtypes, o.output_shapes)
           for o in result.executed_ops]
    return tensors, skipped, ops


def _capture_with_budget(tmp_path, name, build, budget, run=None, step=1, steps=2):
    root = tmp_path / name
    hook = BudgetHook(str(root / "scratch"), str(root / "npy"), budget, step=step)
    if run is None:
        losses, _ = _run_monitored(build, [hook], steps=steps)
    else:
        losses = [run(hook)]
    return hook, losses, str(root)


def test_fetch_and_stream_paths_give_identical_arrays_and_metadata(tmp_path):
    fetch, fetch_losses, fetch_root = _capture_with_budget(tmp_path, "fetch", _cnn, 1 << 30)
    stream, stream_losses, stream_root = _capture_with_budget(tmp_path, "stream", _cnn, 0)
    assert (fetch.path, stream.path) == ("fetch", "stream")
    # A graph whose tensors fit the budget gets no dump op at all; budget 0 gets one per capturable tensor.
    assert fetch.dump_ops == fetch.ref_outputs and stream.dump_ops > len(fetch.result.tensors)
    assert fetch.ref_outputs == 0 if v1.resource_variables_enabled() else fetch.ref_outputs >= 10
    assert fetch_losses == stream_losses
    assert _metadata(fetch.result, fetch_root) == _metadata(stream.result, stream_root)
    assert len(fetch.result.tensors) > 50
    for tensor in fetch.result.tensors:
        a, b = fetch.result.array(tensor.tensor_name), stream.result.array(tensor.tensor_name)
        assert a.dtype == b.dtype and a.shape == b.shape, tensor.tensor_name
        assert a.tobytes() == b.tobytes(), tensor.tensor_name  # bit-identical values
    # The fetch path keeps a read-only copy of what it wrote for the emulated NPU (train._capture_memory):
    # exactly the file's dtype, shape and bytes; the stream path's converted dump files have none.
    held = [t for t in fetch.result.tensors if t.in_memory is not None]
    assert len(held) > 50 and not any(t.in_memory is not None for t in stream.result.tensors)
    for tensor in held:
        on_disk = np.load(tensor.path)
        assert (tensor.in_memory.dtype, tensor.in_memory.shape) == (on_disk.dtype, on_disk.shape), tensor.tensor_name
        assert tensor.in_memory.tobytes() == on_disk.tobytes(), tensor.tensor_name
        assert not tensor.in_memory.flags.writeable and tensor.in_memory.base is None, tensor.tensor_name
    fetch.result.release_arrays()
    assert all(t.in_memory is None for t in fetch.result.tensors)
    # The fetch path writes regular np.save-style files: 64-byte aligned header.
    with open(fetch.result.tensors[0].path, "rb") as handle:
        assert (10 + int.from_bytes(handle.read(10)[8:10], "little")) % 64 == 0
    assert not os.path.exists(os.path.join(fetch_root, "scratch"))


def test_budget_switch_is_per_step_on_the_executed_tensors(tmp_path):
    def build():
        big = tf.ones([256, 256], name="big")  # 262144 bytes, computed only by the train op's side
        small = tf.constant([1.0, 2.0], name="small")
        weight = v1.get_variable("w", initializer=tf.constant(1.0), use_resource=True)  # no update race
        loss = tf.reduce_sum(small * weight, name="loss")
        tf.reduce_sum(big, name="unused")  # never executed: does not count against the budget
        step = v1.train.get_or_create_global_step()
        return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), loss

    # The graph as a whole exceeds 4096 bytes, so dump ops exist; the step's tensors do not.
    small_step, _, _ = _capture_with_budget(tmp_path, "a", build, 4096, step=0, steps=1)
    assert small_step.dump_ops > 0 and small_step.path == "fetch"
    assert "big:0" not in small_step.result.by_name and small_step.result.array("loss:0") == 3.0
    tiny_budget, _, _ = _capture_with_budget(tmp_path, "b", build, 8, step=0, steps=1)
    assert tiny_budget.path == "stream" and tiny_budget.result.array("loss:0") == 3.0


def _run_unknown_batch(rows, unique=False):
    """A step over a placeholder whose static size is unknown (``[None]``), fed ``rows`` values;
    ``unique``: the loss goes through ``tf.unique``, whose size no fed shape decides."""
    def run(hook):
        with tf.Graph().as_default():
            x = v1.placeholder(tf.float32, [None], name="x")
            values = tf.unique(x, name="unique").y if unique else x
            loss = tf.reduce_sum(values * v1.get_variable("w", initializer=tf.constant(2.0)), name="loss")
            train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=v1.train.get_or_create_global_step())
            with v1.train.MonitoredSession(hooks=[hook]) as session:
                return session.run([train_op, loss], feed_dict={x: np.arange(rows, dtype=np.float32) % 3})[1]
    return run


def test_unknown_static_size_is_fetched_when_the_feeds_decide_it_within_the_budget(tmp_path):
    # The batch dimension is None, but the fed value's shape decides every size of the step (TF's
    # shape inference on a copy of the graph): the step is fetched, with the same files as streamed.
    fetch, losses, fetch_root = _capture_with_budget(tmp_path, "f", None, 1 << 30, run=_run_unknown_batch(3), step=0)
    stream, _, stream_root = _capture_with_budget(tmp_path, "s", None, 0, run=_run_unknown_batch(3), step=0)
    assert losses == [6.0] and (fetch.path, stream.path) == ("fetch", "stream")
    assert fetch.dump_ops > 0  # made in begin(): before the feed is known the step might have had to stream
    np.testing.assert_array_equal(fetch.result.array("x:0"), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(fetch.result.array("mul:0"), [0.0, 2.0, 4.0])
    assert _metadata(fetch.result, fetch_root) == _metadata(stream.result, stream_root)
    for tensor in fetch.result.tensors:
        assert fetch.result.array(tensor.tensor_name).tobytes() == stream.result.array(tensor.tensor_name).tobytes()


def test_unknown_static_size_streams_when_the_feeds_do_not_bound_it(tmp_path):
    # A data-dependent size (tf.unique): no fed shape decides it, so the step streams.
    unique, losses, _ = _capture_with_budget(tmp_path, "u", None, 1 << 30, run=_run_unknown_batch(3, unique=True),
                                             step=0)
    assert losses == [6.0] and unique.path == "stream"
    np.testing.assert_array_equal(unique.result.array("unique:0"), [0.0, 1.0, 2.0])
    # Sizes the feed decides, but over the budget (2,000 rows: 8,000 bytes each for x and mul).
    big, losses, _ = _capture_with_budget(tmp_path, "b", None, 4096, run=_run_unknown_batch(2000), step=0)
    assert losses == [2 * float(np.sum(np.arange(2000) % 3))] and big.path == "stream"
    assert big.result.array("x:0").shape == (2000,)


def _own_dump_ops(graph):
    return sum(1 for op in graph.get_operations() if op.name.startswith(WRITE_SCOPE + "/") and op.type == "DebugIdentity")


def _editable_step(root, rows, budget, unique=False):
    """The unknown-batch step on a plain session whose graph stays editable (``editable=True``, as
    NpuDumpSession gives it): ``(dump ops after begin, dump ops after the step, path, result, loss)``,
    the dump ops counted without those of TF 1.x reference outputs."""
    with tf.Graph().as_default() as graph:
        x = v1.placeholder(tf.float32, [None], name="x")
        values = tf.unique(x, name="unique").y if unique else x
        loss = tf.reduce_sum(values * v1.get_variable("w", initializer=tf.constant(2.0)), name="loss")
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        capture = TensorCapture(graph, str(root / "scratch"), npy_dir=str(root / "npy"), memory_budget=budget,
                                editable=True)
        # TF 1.x Apply*/Assign* reference outputs keep theirs from begin() (used only when a step feeds their variable).
        references = sum(1 for op in graph.get_operations() if op.type != "VariableV2"
                         and not op.name.startswith(WRITE_SCOPE + "/") for t in op.outputs if t.dtype._is_ref_dtype)
        begun = _own_dump_ops(graph) - references
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            feeds = {x: np.arange(rows, dtype=np.float32) % 3}
            args = capture.run_args(v1.train.SessionRunContext(v1.train.SessionRunArgs([train_op, loss], feeds),
                                                               session))
            (_, value), _ = session.run([[train_op, loss], args.fetches], feed_dict=feeds, options=args.options)
            result = capture.finish(STAMP)
        return begun, _own_dump_ops(graph) - references, capture.last_path, result, value


def test_an_editable_graph_gets_dump_ops_only_for_a_step_that_streams(tmp_path):
    # Sizes the feeds decide within the budget: fetched, and no dump op is ever made.
    fetch = _editable_step(tmp_path / "f", 3, 1 << 30)
    assert fetch[:3] == (0, 0, "fetch") and fetch[4] == 6.0
    # Over the budget (budget 0) or undecided by the feeds (tf.unique): the step's tensors get their
    # dump ops in run_args, none in begin(), and the files are the fetched ones bit for bit.
    stream = _editable_step(tmp_path / "s", 3, 0)
    unique = _editable_step(tmp_path / "u", 3, 1 << 30, unique=True)
    assert stream[0] == 0 and stream[1] >= 5 and stream[2] == "stream" and stream[4] == 6.0
    assert unique[0] == 0 and unique[1] > 0 and unique[2] == "stream"
    np.testing.assert_array_equal(unique[3].array("unique:0"), [0.0, 1.0, 2.0])
    assert _metadata(fetch[3], str(tmp_path / "f")) == _metadata(stream[3], str(tmp_path / "s"))
    assert len(fetch[3].tensors) > 5
    for tensor in fetch[3].tensors:
        assert fetch[3].array(tensor.tensor_name).tobytes() == stream[3].array(tensor.tensor_name).tobytes()


def test_v1_control_flow_fetch_path_keeps_skip_rules(tmp_path, v1_control_flow):
    fetch, _, fetch_root = _capture_with_budget(tmp_path, "f", None, 1 << 30, run=_run_fed, step=0)
    stream, _, stream_root = _capture_with_budget(tmp_path, "s", None, 0, run=_run_fed, step=0)
    assert (fetch.path, stream.path) == ("fetch", "stream")
    # Tensors that may be dead (cond branches, Switch outputs and what they feed) keep their dump
    # ops on the fetch path; fetching one that is dead would fail the whole step.
    assert 0 < fetch.dump_ops < stream.dump_ops
    assert _metadata(fetch.result, fetch_root) == _metadata(stream.result, stream_root)
    skipped = {s.tensor_name: s.reason for s in fetch.result.skipped}
    assert skipped["branch/sub:0"] == "no value in this step (untaken TF 1.x tf.cond branch)"
    _assert_per_iteration(fetch.result)
    _assert_per_iteration(stream.result)
    np.testing.assert_array_equal(fetch.result.array("branch/Merge:0"), [2.0, 4.0])


@pytest.mark.parametrize("value,message", [
    ("lots", "must be a byte count (an integer), got 'lots'"),
    ("-1", "must be a byte count >= 0, got -1"),
])
def test_budget_from_the_environment_is_checked(tmp_path, monkeypatch, value, message):
    monkeypatch.setenv(BUDGET_ENV, value)
    with tf.Graph().as_default() as graph:
        tf.constant(1.0, name="c")
        with pytest.raises(BackendError) as error:
            TensorCapture(graph, str(tmp_path / "s"))
    assert message in str(error.value) and BUDGET_ENV in str(error.value)


def test_budget_from_the_environment_and_the_default(tmp_path, monkeypatch):
    with tf.Graph().as_default() as graph:
        tf.constant(1.0, name="c")
        assert TensorCapture(graph, str(tmp_path / "a")).memory_budget == 256 * 1024 * 1024 == DEFAULT_MEMORY_BUDGET
        monkeypatch.setenv(BUDGET_ENV, "4096")
        assert TensorCapture(graph, str(tmp_path / "b")).memory_budget == 4096
        assert TensorCapture(graph, str(tmp_path / "c"), memory_budget=7).memory_budget == 7
        with pytest.raises(BackendError, match="memory_budget must be a byte count >= 0, got True"):
            TensorCapture(graph, str(tmp_path / "d"), memory_budget=True)


def _ref_variable_step():
    x = tf.constant(np.ones((2, 3), np.float32), name="x")
    weight = v1.get_variable("w", initializer=np.arange(3, dtype=np.float32).reshape(3, 1), use_resource=False)
    loss = tf.reduce_sum(tf.matmul(x, weight) ** 2, name="loss")
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss), loss


@pytest.mark.parametrize("budget", [1 << 30, 0, 8], ids=["fetch", "stream", "one-variable-per-read"])
def test_reference_variable_reads_are_the_values_before_the_step(tmp_path, budget):
    # A VariableV2 output and its `read` Identity alias the buffer the step's ApplyGradientDescent
    # updates in place: fetched with the step they show the updated value (TF 1.15's default).
    hook = BudgetHook(str(tmp_path / "s"), str(tmp_path / "npy"), budget)
    with tf.Graph().as_default():
        train_op, loss = _ref_variable_step()
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(train_op)
            after = session.run("w:0")
    result = hook.result
    before = np.arange(3, dtype=np.float32).reshape(3, 1)
    assert not np.array_equal(after, before)  # the step did update the variable
    np.testing.assert_array_equal(result.array("w:0"), before)
    np.testing.assert_array_equal(result.array("w/read:0"), before)
    np.testing.assert_array_equal(result.array("MatMul:0"), np.full((2, 1), 3.0, np.float32))
    # The update's own output is the updated buffer.
    np.testing.assert_array_equal(result.array("GradientDescent/update_w/ApplyGradientDescent:0"), after)
    assert [t.order for t in result.tensors] == sorted(t.order for t in result.tensors)


class WarmHook(CaptureHook):
    """CaptureHook whose steps before the captured one fetch what it will (``warm_args``)."""

    warmed = None  # type: list

    def begin(self):
        super(WarmHook, self).begin()
        self.warmed = []

    def before_run(self, run_context):
        if self._steps < self.step:
            self._steps += 1
            self.warmed.append(self.capture.warm_args(run_context))
            return self.warmed[-1]
        return super(WarmHook, self).before_run(run_context)


def test_reference_update_outputs_come_from_the_read_after_the_step_and_the_step_is_warmed(tmp_path):
    # ApplyGradientDescent:0 is the reference variable's buffer: it is taken from the read after
    # the step, so the step fetches every tensor (no dump op runs) and a step before it can warm it.
    hook = WarmHook(str(tmp_path / "s"), str(tmp_path / "npy"), step=2)  # runs: train, read, train
    with tf.Graph().as_default():
        train_op, _ = _ref_variable_step()
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(train_op)
            before = session.run("w:0")
            session.run(train_op)
            after = session.run("w:0")
    assert hook.warmed[0] is not None and hook.capture.last_path == "fetch"  # the first train step warmed
    update = "GradientDescent/update_w/ApplyGradientDescent"
    assert hook.result.updates == {update: ["w:0"]}
    np.testing.assert_array_equal(hook.result.array(update + ":0"), after)
    np.testing.assert_array_equal(hook.result.array("w/read:0"), before)
    assert not np.array_equal(before, after)
    assert [t.tensor_name for t in hook.result.tensors].count(update + ":0") == 1


def test_uninitialized_reference_variable_is_skipped_with_the_reason(tmp_path):
    # Capturing the initializer run itself: the variable has no value before that step.
    hook = CaptureHook(str(tmp_path / "s"), str(tmp_path / "npy"))
    with tf.Graph().as_default():
        _ref_variable_step()
        init = v1.global_variables_initializer()
        with v1.Session() as session:
            args = TensorCapture(v1.get_default_graph(), hook.scratch, npy_dir=hook.npy_dir)
            context = v1.train.SessionRunContext(v1.train.SessionRunArgs(init), session)
            fetches = args.run_args(context)
            session.run([init, fetches.fetches])
            result = args.finish(STAMP)
    skipped = {s.tensor_name: s.reason for s in result.skipped}
    assert skipped["w:0"] == "uninitialized variable: no value before this step"
    assign = [t for t in result.tensors if t.op_type == "Assign"][0]  # the initializer's output
    np.testing.assert_array_equal(result.array(assign.tensor_name), [[0.0], [1.0], [2.0]])


def test_update_ops_get_the_variable_values_before_and_after_the_step(tmp_path):
    """Every in-place update the step executes lists its variables; each variable input is its value
    before the step, the update's output k its k-th variable after the step (TF 1.15 ApplyAdam on
    reference variables, TF 2 ResourceApplyAdam on resource handles)."""
    def build():
        train_op, loss = _cnn()
        return train_op, loss

    hook = CaptureHook(str(tmp_path / "scratch"), str(tmp_path / "npy"), step=2)  # runs: train, read, train
    with tf.Graph().as_default():
        train_op, loss = build()
        kernel = [v for v in v1.trainable_variables() if v.op.name == "conv1/kernel"][0]
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(train_op)
            before = session.run(kernel)
            session.run(train_op)
            after = session.run(kernel)
    result = hook.result
    assert result.updates
    types = {op.name: op.type for op in result.executed_ops}
    apply_type = _resource_or_ref("ResourceApplyAdam", "ApplyAdam")
    (kernel_update,) = [name for name, inputs in result.updates.items()
                        if types[name] == apply_type and inputs[0] == "conv1/kernel:0"]
    variables = result.updates[kernel_update]
    assert len(variables) == 3  # var, m, v
    np.testing.assert_array_equal(result.array("conv1/kernel:0"), before)
    np.testing.assert_array_equal(result.array(kernel_update + ":0"), after)
    assert not np.array_equal(before, after)
    for index, name in enumerate(variables):
        assert name in result.by_name and "{}:{}".format(kernel_update, index) in result.by_name
    # the global step's increment is an update too, with its value before and after
    (step_update,) = [name for name, inputs in result.updates.items() if inputs == ["global_step:0"]]
    assert result.array("global_step:0") == 1 and result.array(step_update + ":0") == 2
    skipped = {s.tensor_name for s in result.skipped}
    assert "conv1/kernel:0" not in skipped
    golden = os.listdir(str(tmp_path / "npy"))
    assert any(g.startswith(names_of(kernel_update) + ".2.") for g in golden)
    assert not os.path.exists(str(tmp_path / "scratch"))


def names_of(op_name):
    return op_name.replace("/", "_").replace(".", "_")


def test_one_fetch_carries_the_dump_ops_and_the_callers_own_tensors():
    """The capture's fetch holds its tensors, its dump ops and a hook's own fetches in one structure
    level: the values land in the sink, the carried ones come back as ``{key: values}`` (what a dict
    beside it gave), a tensor fetched twice (a fed batch also captured) included."""
    from npu_dump_hook.train._capture_fetch import FetchedValues, register_fetch_conversion

    assert register_fetch_conversion()
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [2], name="x")
        doubled = tf.multiply(x, 2.0, name="doubled")
        counter = v1.get_variable("counter", initializer=0.0, use_resource=True)
        bump = v1.assign_add(counter, 1.0).op  # an op run with the step, as a dump op is
        sink = FetchedValues([x, doubled], ops=[bump])
        assert sink.also_fetch({"batch": [x, doubled]}) and not FetchedValues([x]).also_fetch({"batch": x})
        with v1.Session() as session:
            session.run(counter.initializer)
            plain, results = session.run([tf.identity(doubled), {"hook": sink}], {x: [1.0, 3.0]})
            after = session.run(counter.read_value())
    assert [list(v) for v in sink.values] == [[1.0, 3.0], [2.0, 6.0]] and list(plain) == [2.0, 6.0]
    assert [list(v) for v in results["hook"]["batch"]] == [[1.0, 3.0], [2.0, 6.0]] and after == 1.0
    warm = FetchedValues([doubled], keep=False)
    assert warm.also_fetch({}) and warm.receive([np.zeros(2)]) == {} and warm.values is None
