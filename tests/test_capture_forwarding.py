"""Value-forwarding outputs (_capture_derive.VALUE_FORWARDING) derived from their fetched input, not fetched:
the files are byte-identical to the stream path's (every tensor written by its own dump op, nothing derived)."""
import io

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook.train import capture as capture_module
from npu_dump_hook.train._capture_derive import Forwarding, forwarded_value

from test_capture import BudgetHook, _metadata, v1_control_flow  # noqa: F401 (a fixture)

v1 = tf.compat.v1


class FetchListHook(BudgetHook):
    """BudgetHook that also records the names of the tensors the captured step's ``session.run`` fetched."""

    fetched = None

    def before_run(self, run_context):
        args = super(FetchListHook, self).before_run(run_context)
        if self._on and hasattr(args.fetches, "tensors"):
            self.fetched = {tensor.name for tensor in args.fetches.tensors}
        return args


def _forwarding_graph():
    """Identity chains, IdentityN, Reshape with -1 (an unknown batch), ExpandDims (a negative axis too),
    Squeeze (fetched: its axes are an attribute), StopGradient, Shape, ShapeN, a Reshape with two unknown
    dimensions, a Reshape whose set_shape promises a shape the run does not keep, an Identity of a
    reference (an Assign's output), and Identity ops inside and after a TF 1.x tf.cond and tf.while_loop."""
    x = v1.placeholder(tf.float32, [None, 6], name="x")
    weight = v1.get_variable("w", initializer=tf.linspace(0.5, 1.5, 6))
    counter = v1.get_variable("counter", initializer=tf.constant(2.0), use_resource=False)
    h = tf.multiply(x, weight, name="h")
    first = tf.identity(h, name="first")
    second = tf.identity(first, name="second")
    pair = tf.identity_n([h, second], name="pair")
    flat = tf.reshape(pair[1], [-1, 3], name="flat")  # static [None, 3]: derivable
    wide = tf.expand_dims(flat, 1, name="wide")
    last = tf.expand_dims(flat, -1, name="last")
    narrow = tf.squeeze(wide, [1], name="narrow")
    stopped = tf.stop_gradient(narrow, name="stopped")
    free = tf.reshape(h, tf.stack([tf.shape(x)[0] * 2, -1]), name="free")  # static [None, None]: derived too
    promised = tf.reshape(h, tf.stack([tf.shape(x)[0] * 3, -1]), name="promised")  # the run: [6, 2]
    promised.set_shape([5, None])  # a promise TF does not check: a derivation must not trust it
    shapes = [tf.shape(flat, name="shape_of"), tf.shape(h, out_type=tf.int64, name="shape64")]
    shapes += tf.shape_n([h, wide], name="shapes")
    sizes = tf.add_n([tf.cast(tf.reduce_sum(shape), tf.float32) for shape in shapes])
    counted = tf.identity(v1.assign_add(counter, 1.0), name="counted")  # a reference input: fetched
    taken = tf.cond(tf.reduce_sum(x) > -1e6, lambda: tf.identity(h * 2.0, name="inside"), lambda: h - 1.0,
                    name="branch")
    after_cond = tf.identity(taken, name="after_cond")
    _, looped = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.identity(a, name="body") + 1.0),
                              [tf.constant(0), tf.reduce_sum(after_cond, 0)], name="loop")
    after_loop = tf.identity(looped, name="after_loop")  # (a static shape in the loop: sizes stay known)
    loss = tf.add_n([tf.reduce_sum(t) for t in (narrow, stopped, free, promised, last, after_loop)] + [counted, sizes],
                    name="loss")
    step = v1.train.get_or_create_global_step()
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), loss


def _moving_graph():
    """Const (a scalar, int vectors; one over _CONST_BYTES: fetched), Split (a negative axis and axis 0, an
    unknown batch), ConcatV2 (axes -1 and 0, and of int shapes), Slice (a -1 size), Unpack (a negative axis
    attribute), Fill (from a derived shape and from a derived concat), their gradients (Slice with
    ConcatOffset begins, Pack, Pad), and a Split of a TF 1.x reference (an AssignAdd's output): fetched."""
    x = v1.placeholder(tf.float32, [None, 6], name="x")
    weight = v1.get_variable("w", initializer=tf.linspace(0.5, 1.5, 6))
    vector = v1.get_variable("vector", initializer=tf.constant([1.0, 2.0, 3.0, 4.0]), use_resource=False)
    h = tf.multiply(x, weight, name="h")
    scale = tf.constant(0.5, name="scale")
    offsets = tf.constant([1, 2, 3], dtype=tf.int64, name="offsets")
    big = tf.constant(np.linspace(-1.0, 1.0, 80, dtype=np.float32), name="big")  # 320 bytes: fetched
    left, middle, right = tf.split(h, 3, axis=-1, name="thirds")  # static [None, 2] each
    top, bottom = tf.split(h, 2, axis=0, name="rows")
    joined = tf.concat([right, left], axis=-1, name="joined")
    stacked = tf.concat([middle, middle * scale, bottom[:, :2]], 0, name="stacked")
    cut = tf.slice(h, [1, 2], [-1, 3], name="cut")
    unstacked = tf.unstack(tf.reshape(h, [-1, 2, 3]), axis=-2, name="unstacked")
    filled = tf.fill(tf.shape(h), scale, name="filled")
    dims = tf.concat([tf.shape(h), tf.constant([1], name="one")], 0, name="dims")
    filled3 = tf.fill(dims, scale, name="filled3")
    halves = tf.split(v1.assign_add(vector, [1.0, 1.0, 1.0, 1.0]), 2, name="ref_halves")  # a reference input
    parts = [joined, stacked, cut, top, filled, filled3, halves[0], halves[1], big] + unstacked
    loss = tf.add_n([tf.reduce_sum(t) for t in parts] + [tf.reduce_sum(tf.cast(offsets, tf.float32))], name="loss")
    step = v1.train.get_or_create_global_step()
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step), loss


MOVED = {"scale:0", "offsets:0", "one:0", "thirds:0", "thirds:1", "thirds:2", "rows:0", "rows:1", "joined:0",
         "stacked:0", "cut:0", "unstacked:0", "unstacked:1", "filled:0", "dims:0", "filled3:0"}


def _run(hook, build=None):
    with tf.Graph().as_default():
        train_op, loss = (build or _forwarding_graph)()
        feed = {"x:0": np.arange(12, dtype=np.float32).reshape(2, 6) - 3.0}
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(train_op, feed_dict=feed)
            return session.run([train_op, loss], feed_dict=feed)[1]


def _captured(tmp_path, name, budget, build=None):
    root = tmp_path / name
    hook = FetchListHook(str(root / "scratch"), str(root / "npy"), budget, step=1)
    _run(hook, build)
    return hook, str(root)


def _assert_byte_identical(fetch, stream, derived):
    """Each file of the fetch path's capture has the bytes of the stream path's (each tensor its own dump op)."""
    for tensor, streamed in zip(fetch.result.tensors, stream.result.tensors):  # the same order (_metadata)
        a, b = np.load(tensor.path), np.load(streamed.path)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), tensor.tensor_name
        assert a.tobytes() == b.tobytes(), tensor.tensor_name
        if tensor.tensor_name in fetch.fetched | derived:  # written from arrays (not converted dump files)
            saved = io.BytesIO()
            np.save(saved, b)  # the fetch path writes np.save's bytes (stream files' headers are padded otherwise)
            with open(tensor.path, "rb") as mine:
                assert mine.read() == saved.getvalue(), tensor.tensor_name


def test_forwarded_outputs_are_derived_and_byte_identical_to_their_own_dump(tmp_path, v1_control_flow):  # noqa: F811
    fetch, fetch_root = _captured(tmp_path, "fetch", 1 << 30)
    stream, stream_root = _captured(tmp_path, "stream", 0)
    assert (fetch.path, stream.path) == ("fetch", "stream")
    derived = {"first:0", "second:0", "pair:0", "pair:1", "flat:0", "wide:0", "last:0", "stopped:0", "free:0",
               "promised:0", "after_cond:0", "after_loop:0", "shape_of:0", "shape64:0", "shapes:0", "shapes:1"}
    fetched = {"h:0", "narrow:0", "counted:0", "x:0"}
    assert fetched <= fetch.fetched and not derived & fetch.fetched
    captured = {t.tensor_name for t in fetch.result.tensors}
    assert derived | fetched <= captured
    # Inside the cond (may be dead: its dump op) and the loop body (per iteration: a debug watch): never fetched.
    assert "branch/inside:0" in captured and not {"branch/inside:0", "loop/body:0"} & fetch.fetched
    assert len([t for t in fetch.result.tensors if t.op_name == "loop/add_1"]) == 3
    assert _metadata(fetch.result, fetch_root) == _metadata(stream.result, stream_root)
    _assert_byte_identical(fetch, stream, derived)
    assert fetch.result.array("flat:0").shape == (4, 3) and fetch.result.array("wide:0").shape == (4, 1, 3)
    assert fetch.result.array("last:0").shape == (4, 3, 1) and fetch.result.array("promised:0").shape == (6, 2)
    assert fetch.result.array("shape64:0").dtype == np.int64 and list(fetch.result.array("shapes:1")) == [4, 1, 3]


def test_moved_outputs_are_derived_and_byte_identical_to_their_own_dump(tmp_path):
    fetch, fetch_root = _captured(tmp_path, "fetch", 1 << 30, _moving_graph)
    stream, stream_root = _captured(tmp_path, "stream", 0, _moving_graph)
    assert (fetch.path, stream.path) == ("fetch", "stream")
    fetched = {"h:0", "x:0", "big:0", "ref_halves:0", "ref_halves:1"}
    assert fetched <= fetch.fetched and not MOVED & fetch.fetched
    # The gradients' own Const, Slice, Split, ConcatV2 ... outputs are derived too: only the fallbacks are fetched.
    types = {t.tensor_name: t.op_type for t in fetch.result.tensors}
    moving = {"Const", "Split", "ConcatV2", "Slice", "Unpack", "Fill"}
    assert {name for name in fetch.fetched if types[name] in moving} == {"big:0", "ref_halves:0", "ref_halves:1"}
    captured = {t.tensor_name for t in fetch.result.tensors}
    assert MOVED | fetched <= captured
    assert _metadata(fetch.result, fetch_root) == _metadata(stream.result, stream_root)
    _assert_byte_identical(fetch, stream, MOVED)
    h = fetch.result.array("h:0")
    assert fetch.result.array("cut:0").shape == (1, 3) and (fetch.result.array("cut:0") == h[1:, 2:5]).all()
    assert (fetch.result.array("joined:0") == np.concatenate([h[:, 4:], h[:, :2]], -1)).all()
    assert (fetch.result.array("unstacked:1") == h.reshape(-1, 2, 3)[:, 1]).all()
    assert fetch.result.array("filled3:0").shape == (2, 6, 1) and fetch.result.array("offsets:0").dtype == np.int64


def test_a_derivation_that_fails_leaves_that_output_out_and_the_step_runs(tmp_path, monkeypatch):
    def failing(forwarding, values):
        if forwarding.kind == "concat":
            raise ValueError("made to fail")
        return forwarded_value(forwarding, values)

    monkeypatch.setattr(capture_module, "forwarded_value", failing)
    fetch, _ = _captured(tmp_path, "fetch", 1 << 30, _moving_graph)
    assert fetch.path == "fetch" and not {"joined:0", "stacked:0"} & fetch.fetched
    skipped = {s.tensor_name: s.reason for s in fetch.result.skipped}
    assert skipped["joined:0"] == skipped["stacked:0"] == "not derived from its inputs' values (ValueError: made to fail)"
    # What takes a failed one (filled3 from dims, a concat) is left out too; the others are written.
    assert skipped["filled3:0"].startswith("not derived from its inputs' values (KeyError")
    assert {"thirds:0", "cut:0", "filled:0", "h:0"} <= {t.tensor_name for t in fetch.result.tensors}


@pytest.mark.parametrize("kind, takes, values", [
    ("slice", ("x", "b", "s"), {"x": np.zeros((2, 3)), "b": np.array([0, -1]), "s": np.array([1, 1])}),
    ("slice", ("x", "b", "s"), {"x": np.zeros((2, 3)), "b": np.array([1, 0]), "s": np.array([2, -1])}),
    ("split", ("a", "x"), {"a": np.array(-3, np.int32), "x": np.zeros((2, 3))}),
    ("split", ("a", "x"), {"a": np.array(1.0), "x": np.zeros((2, 4))}),
    ("concat", ("x", "y", "a"), {"x": np.zeros((2, 3), np.float32), "y": np.zeros((2, 3)), "a": np.array(0)}),
    ("fill", ("d", "v"), {"d": np.array([2, -1]), "v": np.array(1.0)}),
])
def test_values_a_kernel_would_refuse_raise_instead_of_deriving(kind, takes, values):
    with pytest.raises(ValueError):
        forwarded_value(Forwarding(kind, takes, parts=2), values)
