"""NpuDumpSession around a session that already ran (issue #21).

TensorFlow hands a session every op of its graph at its first run and ignores later edits of
them (it only logs "This mutation will have no effect"), so wrapping after ``sess.run(init)``
used to leave the randomness policy and the emulated numerics silently void: dropout kept
dropping. Wrapped by hand, such a session is now refused with an NpuDumpError saying to wrap
it before its first run; under the runner (which counts the bare runs itself) the bundle
carries a warning instead. One small graph per test, in this process.
"""
import numpy as np
import pytest

from npu_dump_hook import NpuDumpSession
from npu_dump_hook.bundle import read_bundle
from npu_dump_hook.constants import RUNS_BEFORE_MARK
from npu_dump_hook.errors import NpuDumpError

tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1


def _model():
    """A graph whose dropout the strip policy removes: h is all 8.0 with it removed."""
    graph = v1.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 8], name="x")
        w = v1.Variable(tf.ones([8, 2]), name="w")
        h = v1.nn.dropout(tf.matmul(x, w), rate=0.5)
        train = v1.train.GradientDescentOptimizer(0.0).minimize(tf.reduce_sum(h))
        init = v1.global_variables_initializer()
    return graph, x, h, train, init


def test_a_session_that_ran_its_initializer_is_refused(tmp_path):
    graph, x, h, _train, init = _model()
    with graph.as_default():
        _refused(graph, x, h, init, tmp_path / "out")


def _refused(graph, x, h, init, out):
    sess = v1.Session(graph=graph)
    sess.run(init)
    with pytest.raises(NpuDumpError, match="Wrap the session before its first run") as info:
        NpuDumpSession(sess, stop="continue", randomness="strip", backend="emulated", output_dir=str(out))
    assert "1 of the graph's 1 variable(s)" in str(info.value) and "dropout/" in str(info.value)
    assert [p.name for p in out.iterdir() if p.name != "bundles"] == []  # no run folder left behind
    assert not any((out / "bundles").iterdir())
    assert sess.run(h, {x: np.ones((4, 8))}).shape == (4, 2)  # the script's session still works
    sess.close()


def test_wrapped_before_its_first_run_the_policy_applies(tmp_path):
    """The control: wrapped first (the probe finds nothing initialized), the strip policy holds."""
    graph, x, h, _train, init = _model()
    with graph.as_default():
        _wrapped_first(graph, x, h, init, tmp_path)


def _wrapped_first(graph, x, h, init, tmp_path):
    sess = NpuDumpSession(v1.Session(graph=graph), stop="continue", randomness="strip", backend="emulated",
                          output_dir=str(tmp_path / "out"))
    sess.run(init)
    assert np.array_equal(sess.run(h, {x: np.ones((4, 8))}), np.full((4, 2), 8.0, np.float32))
    assert not any("before the hook began" in w for w in sess.hook.warnings)
    sess.abandon()  # no training step: no bundle wanted
    sess.session.close()


def test_under_the_runner_the_counted_runs_become_a_bundle_warning(tmp_path):
    """The runner counts the bare runs (RUNS_BEFORE_MARK): no probe, no refusal, a warning."""
    graph, x, _h, train, init = _model()
    with graph.as_default():
        _counted(graph, x, train, init, tmp_path)


def _counted(graph, x, train, init, tmp_path):
    session = v1.Session(graph=graph)
    session.run(init)
    session.__dict__[RUNS_BEFORE_MARK] = 1
    sess = NpuDumpSession(session, stop="continue", backend="emulated", output_dir=str(tmp_path / "out"))
    assert any("ran 1 time(s) before the hook began" in w for w in sess.hook.warnings), sess.hook.warnings
    sess.run(train, {x: np.ones((4, 8))})
    sess.close()
    assert any("ran 1 time(s) before the hook began" in w for w in read_bundle(sess.hook.bundle.path)["warnings"])


_SCRIPT = '''
import sys
import numpy as np, tensorflow as tf
v1 = tf.compat.v1
v1.disable_eager_execution()
x = v1.placeholder(tf.float32, [4, 8]); keep_prob = v1.placeholder(tf.float32)
w = v1.Variable(tf.ones([8, 2]))  # a constant initializer: no random op in the initializer run
h = v1.nn.dropout(tf.matmul(x, w), keep_prob)
feed = {x: np.ones((4, 8)), keep_prob: 0.8}
with v1.Session() as sess:
    if sys.argv[1] == "late":  # a run before the graph trains: the runner cannot wrap it yet
        sess.run(w.initializer)
    train = v1.train.GradientDescentOptimizer(0.0).minimize(tf.reduce_sum(h))
    sess.run(v1.global_variables_initializer())
    print("H", sess.run(h, feed).ravel().tolist(), flush=True)
    for _ in range(3):
        sess.run(train, feed)
'''


@pytest.mark.parametrize("case", ["first", "late"])
def test_the_runner_wraps_at_the_first_run_or_says_it_could_not(tmp_path, case):
    """``npu-dump-hook run``: a session on a training graph is wrapped at its first run (the
    initializer), so the strip policy holds in the script's own later runs (the dropout output is
    the undropped 8.0 everywhere); a session run before its graph trained (``late``) is wrapped
    later (here at the dropout run), and its bundle says how many runs came first."""
    import sys

    from helpers.runs import clean_env, run

    (tmp_path / "train.py").write_text(_SCRIPT)
    code, lines, err = run([sys.executable, "-m", "npu_dump_hook", "run", "--output-dir", "out", "--", "train.py",
                            case], tmp_path, clean_env())
    assert code == 0, err[-2000:]
    warnings = [w for w in read_bundle(lines[-1])["warnings"] if "before the hook began" in w]
    if case == "first":
        (printed,) = [line for line in lines if line.startswith("H ")]
        assert printed == "H " + str([8.0] * 8), printed
        assert warnings == []
    else:
        assert len(warnings) == 1 and "ran 2 time(s) before the hook began" in warnings[0], warnings  # both initializers
