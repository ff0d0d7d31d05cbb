"""Control flow counted honestly (issue 21 point 5): executed ops inside TF 1.x ``while_loop``
bodies, ``cond`` branches and functional ``If``/``While`` bodies are counted in
``coverage.control_flow`` with how many have dump files, a bundle warning names the ones without,
and the ops of an untaken branch are "not executed", never "missing". Real TF, the emulated backend."""
import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.cli import main

v1 = tf.compat.v1
V2_CONTROL_FLOW = tf.__version__.startswith("2.")


def _train(graph_fn, flow_v2):
    """One hooked training step of ``graph_fn``'s loss (TF 1.x control flow unless ``flow_v2``);
    the bundle's bundle.json."""
    if V2_CONTROL_FLOW:
        (v1.enable_control_flow_v2 if flow_v2 else v1.disable_control_flow_v2)()
    try:
        with tf.Graph().as_default():
            x = v1.placeholder(tf.float32, [2, 3], name="x")
            w = v1.get_variable("w", initializer=np.full([3, 3], 0.5, np.float32))
            loss = graph_fn(x, w)
            train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out")
            with v1.train.MonitoredSession(hooks=[hook]) as sess:
                sess.run(train, {x: np.ones([2, 3], np.float32)})
    finally:
        if V2_CONTROL_FLOW:
            v1.enable_control_flow_v2()
    assert verify_bundle(hook.bundle.path) == []
    return hook.bundle.path, read_bundle(hook.bundle.path)


def _cond(x, w):
    hidden = tf.matmul(x, w)
    taken = v1.cond(tf.constant(True), lambda: tf.tanh(hidden) * 2.0, lambda: tf.sin(hidden) * 3.0)
    return tf.reduce_sum(taken)


def _loop(x, w):
    _, out = v1.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))), [tf.constant(0), x])
    return tf.reduce_sum(out)


def test_untaken_tf1_branch_is_not_executed_not_missing(in_tmp_cwd):
    path, doc = _train(_cond, flow_v2=False)
    cov = doc["coverage"]
    untaken = cov["not_executed"]
    # the false branch and its gradient (downstream of the gradient's Switch) did not run
    assert {"cond_Sin", "gradients_cond_Sin_grad_Cos"} <= set(untaken), cov
    assert not any("Tanh" in name for name in untaken)
    assert cov["missing"] == [] and cov["dumped"] == cov["expected"], cov
    flow = cov["control_flow"]
    # the taken branch: Tanh and the gradient ops on its side (TanhGrad, the mul's gradient)
    assert flow["cond"]["executed"] >= 3 and flow["while"]["executed"] == 0, flow
    assert flow["executed"] == flow["cond"]["executed"] + flow["function"]["executed"]
    assert flow["dumped"] == flow["executed"] - len(flow["not_dumped"])
    # the taken branch's ops get dump files (the emulator dumps executed TF 1.x cond ops)
    assert flow["cond"]["dumped"] == flow["cond"]["executed"], flow
    assert main(["inspect", path]) == 0


def test_tf1_while_body_ops_are_counted_with_their_per_iteration_dumps(in_tmp_cwd, capsys):
    path, doc = _train(_loop, flow_v2=False)
    flow = doc["coverage"]["control_flow"]
    assert flow["while"]["executed"] >= 2, flow
    assert not any("Tanh" in name or "MatMul" in name for name in flow["not_dumped"]), flow  # dumped per iteration
    tanh = [f for f in doc["files"] if f["kind"] == "dump" and f["op_name"] == "while_Tanh"]
    assert len(tanh) == 3  # three iterations
    warning = [w for w in doc["warnings"] if w.startswith("control flow: ")]
    if flow["not_dumped"]:  # (TF's debug watch sees what Grappler left of the body)
        assert len(warning) == 1 and "while-loop bodies: {}/{} dumped".format(
            flow["while"]["dumped"], flow["while"]["executed"]) in warning[0]
    else:
        assert warning == []
    capsys.readouterr()
    assert main(["inspect", path]) == 0
    assert "control flow: {}/{} executed op(s) have dump files (while-loop bodies".format(
        flow["dumped"], flow["executed"]) in capsys.readouterr().out


@pytest.mark.skipif(not V2_CONTROL_FLOW, reason="TF 1.15 builds no functional If/While from tf.cond/while_loop")
def test_warning_names_control_flow_ops_without_dump_files(in_tmp_cwd):
    """(TF 1.15: tests/test_rnn_workflow.py checks the warning for the loop-body ops TF's watch did not see.)"""
    _path, doc = _train(_loop, flow_v2=True)
    kind, label = "function", "If/While function bodies"
    flow = doc["coverage"]["control_flow"]
    assert flow[kind]["executed"] > flow[kind]["dumped"] and flow["not_dumped"], flow
    warning = [w for w in doc["warnings"] if w.startswith("control flow: ")]
    assert len(warning) == 1 and "{}: {}/{} dumped".format(
        label, flow[kind]["dumped"], flow[kind]["executed"]) in warning[0] and flow["not_dumped"][0] in warning[0]


@pytest.mark.skipif(not V2_CONTROL_FLOW, reason="TF 1.15 builds no functional If/While from tf.cond/while_loop")
def test_functional_if_counts_the_taken_branch_body(in_tmp_cwd):
    path, doc = _train(_cond, flow_v2=True)
    flow = doc["coverage"]["control_flow"]
    assert flow["function"]["executed"] >= 2 and flow["function"]["dumped"] == 0, flow
    names = flow["not_dumped"]
    assert any("Tanh" in name for name in names) and not any("Sin" in name for name in names), names
    assert any(w.startswith("control flow: ") and "If/While function bodies: 0/" in w for w in doc["warnings"])


@pytest.mark.skipif(not V2_CONTROL_FLOW, reason="TF 1.15 builds no functional If/While from tf.cond/while_loop")
def test_functional_while_counts_its_body(in_tmp_cwd):
    _path, doc = _train(_loop, flow_v2=True)
    flow = doc["coverage"]["control_flow"]
    assert flow["function"]["executed"] >= 2 and any("Tanh" in n for n in flow["not_dumped"]), flow


def test_straight_line_graph_has_nothing_in_control_flow(in_tmp_cwd):
    _path, doc = _train(lambda x, w: tf.reduce_sum(tf.tanh(tf.matmul(x, w))), flow_v2=False)
    assert doc["coverage"]["control_flow"] == {
        "executed": 0, "dumped": 0, "not_dumped": [], "while": {"executed": 0, "dumped": 0},
        "cond": {"executed": 0, "dumped": 0}, "function": {"executed": 0, "dumped": 0}}
    assert doc["coverage"]["not_executed"] == [] and not any(w.startswith("control flow") for w in doc["warnings"])
