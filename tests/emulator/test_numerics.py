"""NPU numerics in the graph: float16 Cube ops whose rounding propagates, and injected kernel faults."""
import json

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook.emulator import numerics
from npu_dump_hook.emulator.numerics import FP16_OP_TYPES, Fault, apply, parse_fault
from npu_dump_hook.errors import BackendError, OptionError

v1 = tf.compat.v1
F16 = np.float16


def _f16_exact(array):
    array = np.asarray(array)
    with np.errstate(over="ignore", invalid="ignore"):
        back = array.astype(F16).astype(array.dtype)
    return bool(np.all((back == array) | (np.isnan(back) & np.isnan(array))))


class Model(object):
    """A graph with one GradientDescent train step, fixed initial values and fixed feeds."""

    def __init__(self, kind, dtype=np.float32):
        rng = np.random.RandomState(7)
        self.graph = tf.Graph()
        with self.graph.as_default():
            build = {"mlp": _mlp, "cnn": _cnn, "depthwise_bmm": _depthwise_bmm}[kind]
            self.feeds = build(rng, dtype)
            self.train = v1.train.GradientDescentOptimizer(0.05).minimize(
                self.graph.get_tensor_by_name("loss:0"), name="train")
            self.init = v1.global_variables_initializer()
        self.before = {op.name for op in self.graph.get_operations()}

    def apply(self, fp16=True, faults=None, seed=0):
        self.plan = apply(self.graph, fp16, faults or {}, seed=seed)
        return self.plan

    def run(self, names, train=True):
        """Values of ``names`` (tensor names) in one step, and the variables after it."""
        with v1.Session(graph=self.graph) as sess:
            sess.run(self.init)
            fetches = [self.graph.get_tensor_by_name(n) for n in names]
            values = sess.run(fetches + ([self.train] if train else []), self.feeds)[:len(names)]
            variables = {v.op.name: sess.run(v) for v in v1.global_variables()}
        return dict(zip(names, values)), variables

    def npu(self, name):
        return self.plan.npu_tensor(name)


def _mlp(rng, dtype):
    x = v1.placeholder(dtype, [8, 5], name="x")
    y = v1.placeholder(dtype, [8, 3], name="y")
    w1 = v1.get_variable("w1", initializer=rng.randn(5, 16).astype(dtype))
    b1 = v1.get_variable("b1", initializer=(rng.randn(16) * 0.1).astype(dtype))
    w2 = v1.get_variable("w2", initializer=(rng.randn(16, 3) * 0.3).astype(dtype))
    mm1 = tf.matmul(x, w1, name="mm1")
    relu1 = tf.nn.relu(tf.nn.bias_add(mm1, b1, name="bias1"), name="relu1")
    logits = tf.matmul(relu1, w2, name="mm2")
    v1.reduce_mean(tf.square(logits - y), name="loss")
    return {x: (rng.randn(8, 5) * 3).astype(dtype), y: rng.randn(8, 3).astype(dtype)}


def _cnn(rng, dtype):
    x = v1.placeholder(dtype, [2, 8, 8, 3], name="x")
    y = v1.placeholder(dtype, [2, 2], name="y")
    k1 = v1.get_variable("k1", initializer=(rng.randn(3, 3, 3, 4) * 0.5).astype(dtype))
    b1 = v1.get_variable("b1", initializer=(rng.randn(4) * 0.1).astype(dtype))
    k2 = v1.get_variable("k2", initializer=(rng.randn(3, 3, 4, 4) * 0.5).astype(dtype))
    w = v1.get_variable("w", initializer=(rng.randn(256, 2) * 0.1).astype(dtype))
    conv1 = tf.nn.conv2d(x, k1, strides=[1, 1, 1, 1], padding="SAME", name="conv1")
    relu1 = tf.nn.relu(tf.nn.bias_add(conv1, b1, name="bias1"), name="relu1")
    relu2 = tf.nn.relu(tf.nn.conv2d(relu1, k2, strides=[1, 1, 1, 1], padding="SAME", name="conv2"), name="relu2")
    logits = tf.matmul(tf.reshape(relu2, [2, 256]), w, name="fc")
    v1.reduce_mean(tf.square(logits - y), name="loss")
    return {x: rng.randn(2, 8, 8, 3).astype(dtype), y: rng.randn(2, 2).astype(dtype)}


def _depthwise_bmm(rng, dtype):
    x = v1.placeholder(dtype, [2, 6, 6, 3], name="x")
    y = v1.placeholder(dtype, [2, 36, 4], name="y")
    d1 = v1.get_variable("d1", initializer=(rng.randn(3, 3, 3, 1) * 0.5).astype(dtype))
    d2 = v1.get_variable("d2", initializer=(rng.randn(3, 3, 3, 1) * 0.5).astype(dtype))
    w = v1.get_variable("w", initializer=(rng.randn(2, 3, 4) * 0.5).astype(dtype))
    h = tf.nn.relu(tf.nn.depthwise_conv2d(x, d1, [1, 1, 1, 1], "SAME", name="dw1"))
    h = tf.nn.depthwise_conv2d(h, d2, [1, 1, 1, 1], "SAME", name="dw2")
    out = tf.matmul(tf.reshape(h, [2, 36, 3]), w, name="bmm")
    v1.reduce_mean(tf.square(out - y), name="loss")
    return {x: rng.randn(2, 6, 6, 3).astype(dtype), y: rng.randn(2, 36, 4).astype(dtype)}


EXPECTED_TYPES = {
    "mlp": {"MatMul"},
    "cnn": {"MatMul", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"},
    "depthwise_bmm": {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                      "DepthwiseConv2dNativeBackpropFilter"},
}


# -- float16 ops ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(EXPECTED_TYPES))
def test_fp16_ops_read_and_write_float16_values_forward_and_backward(kind):
    model = Model(kind)
    plan = model.apply(fp16=True)
    ops = [model.graph.get_operation_by_name(name) for name in sorted(plan.fp16_ops)]
    types = {op.type for op in ops}
    assert EXPECTED_TYPES[kind] <= types <= FP16_OP_TYPES
    if kind == "depthwise_bmm":  # BatchMatMul (TF 1.15) or BatchMatMulV2 (TF 2.x), forward and gradient
        assert len([op for op in ops if op.type.startswith("BatchMatMul")]) >= 3
    assert any(op.name.startswith("train/") or op.name.startswith("gradients/") for op in ops)
    # every FP16-type op of the graph, forward and gradient, was rewritten
    assert {op.name for op in ops} == {n for n in model.before
                                       if model.graph.get_operation_by_name(n).type in FP16_OP_TYPES}
    inputs = [t.name for op in ops for t in op.inputs if t.dtype == tf.float32]
    outputs = [t.name for op in ops for t in op.outputs]
    values, _ = model.run(inputs + outputs + [model.npu(n) for n in outputs])
    for name in inputs:
        assert _f16_exact(values[name]), name
    changed = 0
    for name in outputs:
        rounded = values[model.npu(name)]
        assert rounded.dtype == np.float32 and _f16_exact(rounded), name
        # the rounded tensor is the op's own float32 result rounded to float16 (the Cube's fp32 accumulation)
        assert np.array_equal(rounded, values[name].astype(F16).astype(np.float32)), name
        changed += int(not np.array_equal(rounded, values[name]))
    assert changed == len(outputs)  # rounding did something to every output, so the checks can fail


def test_downstream_bias_add_is_exactly_rounded_plus_bias():
    model = Model("mlp")
    model.apply(fp16=True)
    b1 = model.graph.get_operation_by_name("bias1").inputs[1].name
    # no train op: TF 1.15's ref variable reads share the variable's buffer, so a fetch would show the update
    values, _ = model.run(["mm1:0", model.npu("mm1:0"), b1, "bias1:0", "relu1:0"], train=False)
    expected = values[model.npu("mm1:0")] + values[b1]
    assert np.array_equal(values["bias1:0"], expected)
    assert not np.array_equal(values["bias1:0"], values["mm1:0"] + values[b1])
    assert np.array_equal(values["relu1:0"], np.maximum(expected, 0))


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_loss_and_update_differ_from_fp32_within_float16_tolerance(kind):
    reference, npu = Model(kind), Model(kind)
    npu.apply(fp16=True)
    ref_values, ref_vars = reference.run(["loss:0"])
    npu_values, npu_vars = npu.run(["loss:0"])
    ref_loss, npu_loss = float(ref_values["loss:0"]), float(npu_values["loss:0"])
    assert npu_loss != ref_loss
    assert abs(npu_loss - ref_loss) <= 1e-2 * abs(ref_loss)
    assert set(ref_vars) == set(npu_vars)
    differ = [name for name in ref_vars if not np.array_equal(ref_vars[name], npu_vars[name])]
    assert differ
    for name in ref_vars:
        scale = np.abs(ref_vars[name]).max()
        assert np.abs(ref_vars[name] - npu_vars[name]).max() <= 1e-2 * scale, name


def test_plan_names_aliases_added_ops_and_origins():
    model = Model("mlp")
    plan = model.apply(fp16=True)
    graph = model.graph
    after = {op.name for op in graph.get_operations()}
    assert plan.added_ops == frozenset(after - model.before)
    assert all("/npu_dump_hook_numerics/" in name for name in plan.added_ops)
    fp16_ops = [graph.get_operation_by_name(n) for n in plan.fp16_ops]
    assert plan.fp16_tensors == frozenset(t.name for op in fp16_ops for t in op.outputs)
    assert set(plan.alias) == set(plan.fp16_tensors)
    for original, npu in plan.alias.items():
        tensor = graph.get_tensor_by_name(npu)
        assert tensor.op.name in plan.added_ops and tensor.op.name.startswith(original.split(":")[0] + "/")
        assert plan.original_of(npu) == original
        assert tensor.dtype == graph.get_tensor_by_name(original).dtype
        # every consumer of the original now reads the NPU tensor: only the rewrite reads the original
        assert {c.name for c in graph.get_tensor_by_name(original).consumers()} <= plan.added_ops
    rounded_x = graph.get_operation_by_name("mm1").inputs[0]
    assert rounded_x.op.name in plan.added_ops and plan.original_of(rounded_x.name) == "x:0"
    assert plan.original_of("relu1:0") == "relu1:0" and plan.npu_tensor("relu1:0") == "relu1:0"
    report = plan.report
    assert report["fp16"] is True and report["fp16_op_types"] == {"MatMul": len(plan.fp16_ops)}
    assert report["added_ops"] == len(plan.added_ops) and report["rounded_outputs"] == len(plan.alias)
    assert report["faults"] == {} and report["skipped"] == [] and report["precision_mode"] == "allow_fp32_to_fp16"
    assert json.loads(json.dumps(report)) == report  # goes into run.json as is



def test_a_float16_consumer_of_a_faulted_op_reads_a_rounding_that_stands_for_the_faulted_output():
    """relu1 is no float16 op; its fault's output feeds mm2 (float16), which rounds it: that
    rounding stands for relu1:0 (the TF output the golden run has), not for the fault's tensor."""
    model = Model("mlp")
    plan = model.apply(fp16=True, faults={"relu1": "scale=1.05"})
    rounded = model.graph.get_operation_by_name("mm2").inputs[0]
    assert rounded.op.name in plan.added_ops and plan.original_of(rounded.name) == "relu1:0"
    assert all(plan.original_of(name).split(":")[0] not in plan.added_ops for name in plan._origins)

def test_fp16_false_without_faults_changes_nothing():
    model = Model("mlp")
    plan = model.apply(fp16=False)
    assert {op.name for op in model.graph.get_operations()} == model.before
    assert plan.alias == {} and plan.added_ops == frozenset() and plan.fp16_tensors == frozenset()


def test_unconsumed_output_is_declared_float16_but_not_rounded_in_graph():
    graph = tf.Graph()
    with graph.as_default():
        a = v1.placeholder(tf.float32, [2, 2], name="a")
        tf.matmul(a, a, name="product")
    plan = apply(graph, True, {})
    assert "product:0" in plan.fp16_tensors and "product:0" not in plan.alias
    assert [n["tensor"] for n in plan.report["notes"]] == ["product:0"]
    assert graph.get_operation_by_name("product").inputs[0].op.name in plan.added_ops


def test_float64_and_control_flow_ops_are_skipped_with_reasons():
    graph = tf.Graph()
    with graph.as_default():
        d = v1.placeholder(tf.float64, [2, 2], name="d")
        tf.identity(tf.matmul(d, d, name="double"), name="use_double")
        h = v1.placeholder(tf.float16, [2, 2], name="h")
        tf.identity(tf.matmul(h, h, name="half"), name="use_half")
        m = v1.placeholder(tf.float32, [2, 2], name="m")
        loop = v1.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, tf.matmul(x, m, name="inner")),
                             [tf.constant(0), m])
        tf.identity(loop[1], name="use_loop")
    plan = apply(graph, True, {})
    reasons = {s["op"]: s["reason"] for s in plan.report["skipped"]}
    assert "float64" in reasons["double"] and reasons["half"] == "already computes in float16"
    inner = [op for op in reasons if "while" in op or op.endswith("inner")]
    assert inner, reasons
    assert any("control-flow" in reasons[op] or "function" in reasons[op] for op in inner)
    assert plan.fp16_ops == frozenset()
    with v1.Session(graph=graph) as sess:  # the graph still runs
        value = np.eye(2, dtype=np.float32) * 1.5
        assert np.allclose(sess.run("use_loop:0", {m: value}), value @ value @ value)


# -- faults ----------------------------------------------------------------------------------
def test_scale_fault_changes_consumers_by_the_factor_and_leaves_upstream_alone():
    clean, faulty = Model("mlp"), Model("mlp")
    clean.apply(fp16=False)
    plan = faulty.apply(fp16=False, faults={"mm1": "scale=1.05"})
    assert plan.faults == {"mm1": Fault("mm1", "scale", 1.05)} and plan.report["faults"] == {"mm1": "scale=1.05"}
    b1 = faulty.graph.get_operation_by_name("bias1").inputs[0].name
    assert b1 == plan.alias["mm1:0"]
    upstream = ["x:0", "mm1:0", faulty.graph.get_operation_by_name("mm1").inputs[1].name]
    faulty_values, _ = faulty.run(upstream + [b1, "relu1:0", "mm2:0", "loss:0"], train=False)
    clean_values, _ = clean.run(upstream + ["relu1:0", "mm2:0", "loss:0"], train=False)
    for name in upstream:
        assert np.array_equal(faulty_values[name], clean_values[name]), name
    assert np.array_equal(faulty_values[b1], faulty_values["mm1:0"] * np.float32(1.05))
    for name in ("relu1:0", "mm2:0", "loss:0"):
        assert not np.allclose(faulty_values[name], clean_values[name], rtol=1e-3), name


def test_fault_on_fp16_op_applies_after_rounding_and_is_written_in_float16():
    model = Model("mlp")
    plan = model.apply(fp16=True, faults={"mm1": "scale=1.05"})
    values, _ = model.run(["mm1:0", plan.alias["mm1:0"], "bias1:0"])
    expected = (values["mm1:0"].astype(F16).astype(np.float32) * np.float32(1.05)).astype(F16).astype(np.float32)
    assert np.array_equal(values[plan.alias["mm1:0"]], expected)
    assert "mm1:0" in plan.fp16_tensors


def test_overflow_fault_puts_inf_at_the_largest_element_and_it_propagates():
    model = Model("mlp")
    plan = model.apply(fp16=False, faults={"mm1": "overflow"})
    values, _ = model.run(["mm1:0", plan.alias["mm1:0"], "relu1:0", "mm2:0", "loss:0"])
    raw, faulted = values["mm1:0"], values[plan.alias["mm1:0"]]
    largest = np.abs(raw) == np.abs(raw).max()
    assert np.isposinf(faulted[largest]).all() and np.array_equal(faulted[~largest], raw[~largest])
    assert np.isposinf(values["relu1:0"]).any()
    assert not np.isfinite(values["mm2:0"]).all() and not np.isfinite(values["loss:0"])


def test_nan_fault_propagates():
    model = Model("cnn")
    plan = model.apply(fp16=True, faults={"conv1": "nan"})
    values, variables = model.run([plan.alias["conv1:0"], "relu2:0", "loss:0"])
    assert np.isnan(values[plan.alias["conv1:0"]]).sum() >= 1
    assert np.isnan(values["relu2:0"]).any() and np.isnan(values["loss:0"])
    assert np.isnan(variables["k1"]).any()  # the gradients read the faulted tensor too


def test_noise_is_deterministic_across_graphs_and_follows_the_seed():
    runs = []
    for seed in (0, 0, 1):
        model = Model("mlp")
        plan = model.apply(fp16=False, faults={"mm1": "add_noise=1e-2"}, seed=seed)
        values, _ = model.run(["mm1:0", plan.alias["mm1:0"]])
        runs.append(values[plan.alias["mm1:0"]] - values["mm1:0"])
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    assert 0.005 < float(np.std(runs[0])) < 0.02 and abs(float(np.mean(runs[0]))) < 0.005


@pytest.mark.parametrize("spec", ["scale=0", "scale=-1", "scale=inf", "scale=nan", "scale=", "scale", "scale=x",
                                  "add_noise=0", "add_noise=abc", "overflow=1", "nan=2", "boom", "", 3, None, 1.05])
def test_bad_specs_are_option_errors_naming_faults(spec):
    with pytest.raises(OptionError) as info:
        parse_fault("mm1", spec)
    assert info.value.option == "faults" and info.value.value == {"mm1": spec}
    model = Model("mlp")
    with pytest.raises(OptionError) as info:
        model.apply(faults={"mm1": spec})
    assert info.value.option == "faults"
    assert {op.name for op in model.graph.get_operations()} == model.before  # nothing edited


@pytest.mark.parametrize("name, rule", [("nope", "names no op"), ("mm1:0", "not tensor names"),
                                        ("w1", "no floating"), ("train", "no floating")])
def test_faults_on_ops_that_cannot_be_faulted_are_refused_before_editing(name, rule):
    model = Model("mlp")
    with pytest.raises(OptionError) as info:
        model.apply(fp16=True, faults={"mm1": "nan", name: "overflow"})
    assert info.value.option == "faults" and rule in info.value.rule
    assert {op.name for op in model.graph.get_operations()} == model.before


def test_fault_on_an_output_nothing_reads_is_still_in_its_npu_tensor():
    graph = tf.Graph()
    with graph.as_default():
        a = v1.placeholder(tf.float32, [3], name="a")
        tf.multiply(a, 2.0, name="out")
    plan = apply(graph, True, {"out": "scale=3"})
    assert [n["tensor"] for n in plan.report["notes"]] == ["out:0"]
    assert plan.fp16_tensors == frozenset() and plan.fp16_ops == frozenset()  # Mul is a Vector op
    with v1.Session(graph=graph) as sess:
        value = sess.run(plan.alias["out:0"], {a: [1.0, 2.0, 3.0]})
    assert value.tolist() == [6.0, 12.0, 18.0]


def test_parse_fault_canonical_forms():
    assert parse_fault("a", " scale=1.05 ") == Fault("a", "scale", 1.05)
    assert parse_fault("a", "add_noise=1e-2").spec == "add_noise=0.01"
    assert parse_fault("a", "overflow") == Fault("a", "overflow", None)
    assert parse_fault("a", Fault("a", "nan", None)).spec == "nan"
    with pytest.raises(OptionError):
        parse_fault("a", Fault("b", "nan", None))
    assert parse_fault("a", "nondeterministic=1e-4") == Fault("a", "nondeterministic", 1e-4)
    with pytest.raises(OptionError, match="nondeterministic"):
        parse_fault("a", "nondeterministic")
    assert numerics.FAULT_KINDS == ("scale", "add_noise", "nondeterministic", "overflow", "nan")


def test_second_apply_and_finalized_graph_are_refused():
    model = Model("mlp")
    model.apply(fp16=True)
    with pytest.raises(BackendError):
        apply(model.graph, True, {})
    other = Model("mlp")
    other.graph.finalize()
    with pytest.raises(BackendError):
        apply(other.graph, True, {})
