"""Value-forwarding outputs (_capture_plan.VALUE_FORWARDING) derived from their fetched input, not fetched:
the files are byte-identical to the stream path's (every tensor written by its own dump op, nothing derived)."""
import io

import numpy as np
import tensorflow as tf

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


def _run(hook):
    with tf.Graph().as_default():
        train_op, loss = _forwarding_graph()
        feed = {"x:0": np.arange(12, dtype=np.float32).reshape(2, 6) - 3.0}
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(train_op, feed_dict=feed)
            return session.run([train_op, loss], feed_dict=feed)[1]


def _captured(tmp_path, name, budget):
    root = tmp_path / name
    hook = FetchListHook(str(root / "scratch"), str(root / "npy"), budget, step=1)
    _run(hook)
    return hook, str(root)


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
    for tensor, streamed in zip(fetch.result.tensors, stream.result.tensors):  # the same order (_metadata)
        a, b = np.load(tensor.path), np.load(streamed.path)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), tensor.tensor_name
        assert a.tobytes() == b.tobytes(), tensor.tensor_name
        if tensor.tensor_name in fetch.fetched | derived:  # written from arrays (not converted dump files)
            saved = io.BytesIO()
            np.save(saved, b)  # the fetch path writes np.save's bytes (stream files' headers are padded otherwise)
            with open(tensor.path, "rb") as mine:
                assert mine.read() == saved.getvalue(), tensor.tensor_name
    assert fetch.result.array("flat:0").shape == (4, 3) and fetch.result.array("wide:0").shape == (4, 1, 3)
    assert fetch.result.array("last:0").shape == (4, 3, 1) and fetch.result.array("promised:0").shape == (6, 2)
    assert fetch.result.array("shape64:0").dtype == np.int64 and list(fetch.result.array("shapes:1")) == [4, 1, 3]
