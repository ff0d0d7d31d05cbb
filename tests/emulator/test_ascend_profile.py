"""EmulatedNpu(profile="ascend") end to end with real TF: GE fusion, device formats with Cast/TransData
nodes, optimizer updates, coverage, and faults that show in their op's dump and downstream."""
import glob
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook, OptionError
from npu_dump_hook.emulator import fusion, layout
from npu_dump_hook.emulator.backend import NUMERICS_NOTE, PROFILES, EmulatedNpu
from npu_dump_hook.bundle.describe import graph_ops
from npu_dump_hook.formats import device_format, ge_graph, ge_handover, ge_json
from npu_dump_hook.formats.dump_file import DumpFile

from helpers.hooks import FetchHook, VariablesAtEndHook

v1 = tf.compat.v1
TRANS = re.compile(r"trans_(Cast|TransData)_[0-9]+\Z")


def _cnn(batch_norm=False):
    """Conv2D+BiasAdd+Relu, MaxPool, flatten, Dense+Relu, Dense logits, Adam: deterministic values."""
    rng = np.random.RandomState(3)
    images = tf.constant(rng.rand(4, 8, 8, 3).astype(np.float32), name="images")
    labels = tf.constant(rng.randint(0, 3, size=4).astype(np.int64), name="labels")
    init = v1.glorot_uniform_initializer(seed=5)
    if batch_norm:  # a frozen backbone in inference mode (BatchNorm statistics fixed, no gradient)
        x = v1.layers.conv2d(images, 20, 3, padding="same", name="conv1", kernel_initializer=init)
        x = v1.layers.batch_normalization(x, training=False, fused=True, name="bn1")
        x = tf.stop_gradient(tf.nn.relu(x, name="relu1"), name="frozen")
    else:
        x = v1.layers.conv2d(images, 20, 3, padding="same", activation=tf.nn.relu, name="conv1",
                             kernel_initializer=init)
    x = v1.layers.max_pooling2d(x, 2, 2, name="pool1")
    x = v1.layers.flatten(x, name="flatten")
    x = v1.layers.dense(x, 18, activation=tf.nn.relu, name="fc1", kernel_initializer=init)
    logits = v1.layers.dense(x, 3, name="logits", kernel_initializer=init)
    loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(labels, logits), name="loss")
    step = v1.train.get_or_create_global_step()
    return v1.train.AdamOptimizer(0.01).minimize(loss, global_step=step)


class VariablesAtStartHook(v1.train.SessionRunHook):
    """Reads every trainable variable once the session is created, before the first step."""

    def __init__(self):
        self.values = None

    def after_create_session(self, session, coord):
        variables = v1.trainable_variables()
        self.values = dict(zip([v.op.name for v in variables], session.run(variables)))


def _run(emulator, fetch=(), batch_norm=False, collect=False, mode="all"):
    """One dumped training step through NpuDumpHook; returns (hook, fetched values with the
    variables before the step as "before:{name}", variables after the step)."""
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_mode=mode), output_dir="out",
                       backend=emulator, reference=False, collect=collect)
    fetcher, before, after = FetchHook(list(fetch)), VariablesAtStartHook(), VariablesAtEndHook()
    with tf.Graph().as_default():
        train_op = _cnn(batch_norm)
        with v1.train.MonitoredSession(hooks=[hook, fetcher, before, after]) as session:
            while not session.should_stop():
                session.run(train_op)
    fetched = dict(fetcher.values or {})
    fetched.update({"before:" + name: value for name, value in before.values.items()})
    return hook, fetched, after.values


def _dumps(hook):
    """{op name in the header: path} of the one dumped step."""
    (entry,) = [s for s in hook.summary["emulator"]["steps"] if s["dir"]]
    result = {}
    for path in glob.glob(os.path.join(entry["dir"], "*")):
        if os.path.basename(path) == "mapping.csv":
            continue
        with DumpFile.open(path) as dump:
            assert dump.op_name not in result, dump.op_name
            result[dump.op_name] = path
    return result


def _graph_ops(hook):
    model = ge_graph.parse_model(hook.summary["emulator"]["graph_file"])
    return {op.name: op for op in model.graph[0].op}


def _assert_handed_graph_forms_are_the_read_ones(hook):
    """The bundle's graph JSON, handed over by the emulator (ge_handover), is the converter's
    output for the graph text, and the handed ops give the scanned coverage (a fused graph)."""
    graph = hook.summary["emulator"]["graph_file"]
    handed = ge_handover.handed_ops(graph)
    assert handed is not None and ge_handover.handed_json(graph) is not None  # (else nothing is tested)
    assert graph_ops(graph, (), handed) == graph_ops(graph)
    (bundled,) = glob.glob(os.path.join(hook.bundle.path, "data", "graph", "*_Build.json"))
    ge_handover.forget_graphs()
    ge_json.write_msaccucmp_json(graph, bundled + ".converted")
    with open(bundled, "rb") as handed_json, open(bundled + ".converted", "rb") as converted:
        assert handed_json.read() == converted.read()
    os.remove(bundled + ".converted")


def _strings(attr):
    return [s.decode() for s in attr.list.s]


def _fp16(array):
    return np.asarray(array).astype(np.float16)


def _original(dump, kind, index):
    return dump.array(kind, index, original_shape=True, copy=True)


def test_fused_conv_and_matmul_nodes_device_formats_updates_and_coverage(in_tmp_cwd):
    emulator = EmulatedNpu(profile="ascend")
    assert PROFILES == ("exact", "ascend") and not emulator.golden_in_run
    fetch = ["images:0", "conv1/Relu:0", "flatten/Reshape:0", "fc1/Relu:0", "logits/BiasAdd:0",
             "gradients/conv1/Conv2D_grad/Conv2DBackpropFilter:0"]
    hook, fetched, after = _run(emulator, fetch, collect=True)
    ops = _graph_ops(hook)
    dumps = _dumps(hook)

    # Conv2D+BiasAdd+Relu: one node named as GE's UB fusion names it, listing its TF originals.
    conv = ops["conv1/Conv2Dconv1/Relu"]
    assert conv.type == "Conv2D"
    assert _strings(conv.attr["_datadump_original_op_names"]) == ["conv1/Conv2D", "conv1/BiasAdd", "conv1/Relu"]
    assert _strings(conv.attr["_datadump_original_op_types"]) == ["Conv2D", "BiasAdd", "Relu"]
    (out_desc,) = conv.output_desc
    assert out_desc.attr["_datadump_origin_name"].s.decode() == "conv1/Relu"
    assert out_desc.attr["_datadump_origin_output_index"].i == 0
    for gone in ("conv1/Conv2D", "conv1/BiasAdd", "conv1/Relu", "fc1/MatMul", "fc1/BiasAdd", "fc1/Relu"):
        assert gone not in ops and gone not in dumps  # intermediates: no node, no dump file
    assert ops["pool1/MaxPool"].input[0] == "conv1/Conv2Dconv1/Relu:0"  # consumers read the fused node
    assert [i.layout for i in conv.input_desc] == ["NC1HWC0", "FRACTAL_Z", "ND"]
    with DumpFile.open(dumps["conv1/Conv2Dconv1/Relu"]) as dump:
        (output,) = dump.outputs
        assert (output.original_name, dump.header.output[0].original_op.output_index) == ("conv1/Relu", 0)
        np.testing.assert_array_equal(_original(dump, "output", 0), fetched["conv1/Relu:0"])
        assert [t.format_name for t in dump.inputs] == ["NC1HWC0", "FRACTAL_Z", "ND"]
        assert dump.inputs[0].dtype_name == dump.inputs[1].dtype_name == "DT_FLOAT16"
        assert dump.inputs[0].shape == (4, 1, 8, 8, 16) and dump.inputs[0].original_shape == (4, 8, 8, 3)
        np.testing.assert_array_equal(_original(dump, "input", 0), _fp16(fetched["images:0"]))
        np.testing.assert_array_equal(_original(dump, "input", 1), _fp16(fetched["before:conv1/kernel"]))
        np.testing.assert_array_equal(_original(dump, "input", 2), fetched["before:conv1/bias"])

    # MatMul+BiasAdd+Relu and MatMul+BiasAdd: graph fusion keeps the MatMul's name, UB fusion appends.
    fc1, logits = ops["fc1/MatMulfc1/Relu"], ops["logits/MatMul"]
    assert fc1.type == logits.type == "MatMulV2"
    assert _strings(logits.attr["_datadump_original_op_names"]) == ["logits/MatMul", "logits/BiasAdd"]
    assert logits.output_desc[0].attr["_datadump_origin_name"].s.decode() == "logits/BiasAdd"
    with DumpFile.open(dumps["fc1/MatMulfc1/Relu"]) as dump:
        assert [t.format_name for t in dump.inputs[:2]] == ["FRACTAL_NZ", "FRACTAL_NZ"]
        np.testing.assert_array_equal(_original(dump, "input", 0), _fp16(fetched["flatten/Reshape:0"]))
        np.testing.assert_array_equal(_original(dump, "input", 1), _fp16(fetched["before:fc1/kernel"]))
        np.testing.assert_array_equal(_original(dump, "output", 0), fetched["fc1/Relu:0"])
    with DumpFile.open(dumps["logits/MatMul"]) as dump:
        np.testing.assert_array_equal(_original(dump, "output", 0), fetched["logits/BiasAdd:0"])

    # A float16 filter gradient is held in FRACTAL_Z; the reader turns it back into the TF filter.
    with DumpFile.open(dumps["gradients/conv1/Conv2D_grad/Conv2DBackpropFilter"]) as dump:
        assert dump.outputs[0].format_name == "FRACTAL_Z" and dump.outputs[0].dtype_name == "DT_FLOAT16"
        np.testing.assert_array_equal(_original(dump, "output", 0),
                                      _fp16(fetched["gradients/conv1/Conv2D_grad/Conv2DBackpropFilter:0"]))

    # Cast/TransData nodes: GE's names, [""] as originals, no origin, a dump file each; walking
    # input 0 through them reaches a TF op.
    trans = {name: op for name, op in ops.items() if op.type in ("Cast", "TransData")}
    assert {op.type for op in trans.values()} == {"Cast", "TransData"}
    for name, op in trans.items():
        assert TRANS.match(name), name
        assert _strings(op.attr["_datadump_original_op_names"]) == [""]
        assert "_datadump_origin_name" not in op.output_desc[0].attr
        assert name in dumps
        source = op
        while source.type in ("Cast", "TransData"):
            source = ops[source.input[0].rsplit(":", 1)[0]]
        assert not TRANS.match(source.name)
    assert conv.input[0] in {n + ":0" for n in trans}  # images -> Cast -> TransData -> conv
    with DumpFile.open(dumps[conv.input[0].rsplit(":", 1)[0]]) as dump:  # the TransData to NC1HWC0
        assert dump.inputs[0].format_name == "ND" and dump.outputs[0].format_name == "NC1HWC0"
        np.testing.assert_array_equal(_original(dump, "output", 0), _fp16(fetched["images:0"]))

    # Optimizer updates: a dump file each, variables before the step in, updated variables out.
    apply_type = "ResourceApplyAdam" if v1.resource_variables_enabled() else "ApplyAdam"
    updates = {name: op for name, op in ops.items() if op.type == "ApplyAdam"}
    assert len(updates) == 6 and all(name in dumps for name in updates)
    (kernel_update,) = [n for n in updates if n == "Adam/update_conv1/kernel/" + apply_type]
    with DumpFile.open(dumps[kernel_update]) as dump:
        assert len(dump.inputs) == 10 and len(dump.outputs) == 3
        np.testing.assert_array_equal(dump.array("input", 0, copy=True), fetched["before:conv1/kernel"])
        np.testing.assert_array_equal(dump.array("output", 0, copy=True), after["conv1/kernel"])
        assert dump.outputs[0].original_name == kernel_update
    assert any(op.type == "AssignAdd" for name, op in ops.items() if name in dumps)  # the global step

    # Nothing the graph runs as a task is missing from the dump; the summary says why values differ.
    coverage = hook.bundle.coverage
    assert coverage["missing"] == [] and coverage["dumped"] == coverage["expected"] > 40
    _assert_handed_graph_forms_are_the_read_ones(hook)
    emulated = hook.summary["emulator"]
    assert emulated["profile"] == "ascend" and emulated["note"] == NUMERICS_NOTE
    assert emulated["numerics"]["fp16_op_types"]["Conv2D"] == 1
    assert set(emulated["graph"]["fused"]) == {"conv1/Conv2Dconv1/Relu", "fc1/MatMulfc1/Relu", "logits/MatMul"}
    assert emulated["skipped"] == []


def test_inference_batch_norm_fuses_into_the_convolution(in_tmp_cwd):
    hook, fetched, _ = _run(EmulatedNpu(profile="ascend"), ["relu1:0"], batch_norm=True, mode="output")
    ops = _graph_ops(hook)
    (fused,) = [op for op in ops.values() if "_datadump_original_op_names" in op.attr
                and _strings(op.attr["_datadump_original_op_names"])[0] == "conv1/Conv2D"]
    names = _strings(fused.attr["_datadump_original_op_names"])
    assert names[:2] == ["conv1/Conv2D", "conv1/BiasAdd"] and names[-1] == "relu1"
    assert _strings(fused.attr["_datadump_original_op_types"])[2].startswith("FusedBatchNorm")
    assert fused.name == "conv1/Conv2Drelu1" and names[2].startswith("bn1/") and names[2] not in ops
    with DumpFile.open(_dumps(hook)[fused.name]) as dump:
        assert dump.outputs[0].original_name == "relu1"
        np.testing.assert_array_equal(_original(dump, "output", 0), fetched["relu1:0"])


def _output(hook, op_name):
    with DumpFile.open(_dumps(hook)[op_name]) as dump:
        return _original(dump, "output", 0).astype(np.float64)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_fault_shows_in_its_op_and_downstream_only(in_tmp_cwd, profile):
    clean, _, _ = _run(EmulatedNpu(profile=profile), mode="output")
    os.rename("out", "out_clean")
    faulted, fetched, _ = _run(EmulatedNpu(profile=profile, faults={"fc1/MatMul": "scale=2.0"}),
                               ["fc1/MatMul:0"], mode="output")
    ops = _graph_ops(faulted)
    # A faulted op is never an intermediate of a fused group: it keeps its own dump.
    assert "fc1/MatMul" in ops and faulted.summary["emulator"]["faults"] == {"fc1/MatMul": "scale=2.0"}
    np.testing.assert_allclose(_output(faulted, "fc1/MatMul"), 2.0 * fetched["fc1/MatMul:0"], rtol=1e-3)
    downstream = "logits/MatMul" if profile == "ascend" else "logits/BiasAdd"
    assert not np.allclose(_output(faulted, downstream), _output(clean, downstream), rtol=1e-2)
    assert not np.allclose(_output(faulted, "sparse_softmax_cross_entropy_loss/xentropy/xentropy"),
                           _output(clean, "sparse_softmax_cross_entropy_loss/xentropy/xentropy"), rtol=1e-2)
    upstream = "pool1/MaxPool"
    np.testing.assert_array_equal(_output(faulted, upstream), _output(clean, upstream))


def test_overflow_fault_on_a_fused_head_breaks_the_fusion_and_propagates(in_tmp_cwd):
    hook, _, _ = _run(EmulatedNpu(profile="ascend", faults={"conv1/Conv2D": "overflow"}), mode="output")
    ops = _graph_ops(hook)
    assert "conv1/Conv2D" in ops and "conv1/Conv2Dconv1/Relu" not in ops
    conv = _output(hook, "conv1/Conv2D")
    assert np.isinf(conv).any() and not np.isnan(conv).any()
    assert np.isinf(_output(hook, "conv1/Relu")).any()  # BiasAdd and Relu no longer fuse (no head)


def test_profile_and_fault_options_are_checked():
    with pytest.raises(OptionError, match="profile"):
        EmulatedNpu(profile="gpu")
    with pytest.raises(OptionError, match="faults"):
        EmulatedNpu(faults={"a": "scale=-1"})
    with pytest.raises(OptionError, match="faults"):
        EmulatedNpu(faults=["a"])
    assert EmulatedNpu().golden_in_run and not EmulatedNpu(faults={"a": "nan"}).golden_in_run


class _Op(object):
    def __init__(self, name, op_type, inputs, outputs=1):
        self.name, self.type, self.inputs, self.output_dtypes = name, op_type, inputs, ["float32"] * outputs


def _consumers(ops):
    result = {}
    for op in ops:
        for tensor in op.inputs:
            result.setdefault(tensor, []).append(op.name)
    return result


def test_fusion_needs_single_consumers_and_known_patterns():
    ops = [_Op("c", "Conv2D", ["x:0", "w:0"]), _Op("b", "BiasAdd", ["c:0", "bias:0"]), _Op("r", "Relu6", ["b:0"]),
           _Op("m", "MatMul", ["r:0", "k:0"]), _Op("mb", "BiasAdd", ["m:0", "kb:0"]), _Op("t", "Tanh", ["mb:0"]),
           _Op("g", "ReluGrad", ["t:0", "r:0"])]
    (conv, dense) = fusion.find_groups(ops, _consumers(ops), set(), lambda name: None)
    assert conv == fusion.FusedGroup("cr", ["c", "b", "r"], ["Conv2D", "BiasAdd", "Relu6"])
    assert dense.name == "mt" and dense.members == ["m", "mb", "t"]
    # an intermediate read twice (here BiasAdd's output by a second op) ends the group before it
    shared = ops + [_Op("extra", "Square", ["b:0"])]
    (conv,) = [g for g in fusion.find_groups(shared, _consumers(shared), set(), lambda n: None) if g.head == "c"]
    assert conv.members == ["c", "b"] and conv.name == "c"
    # a faulted intermediate is not fused; MatMul without BiasAdd is no pattern
    assert [g.head for g in fusion.find_groups(ops, _consumers(ops), {"c"}, lambda n: None)] == ["m"]
    plain = [_Op("m", "MatMul", ["a:0", "b:0"]), _Op("r", "Relu", ["m:0"])]
    assert fusion.find_groups(plain, _consumers(plain), set(), lambda n: None) == []
    # a training BatchNorm (or one of unknown mode) does not fold into the convolution
    bn = [_Op("c", "Conv2D", ["x:0", "w:0"]), _Op("n", "FusedBatchNormV3", ["c:0", "s:0", "o:0", "m:0", "v:0"], 6)]
    assert fusion.find_groups(bn, _consumers(bn), set(), lambda n: True) == []
    (group,) = fusion.find_groups(bn, _consumers(bn), set(), lambda n: False)
    assert group.name == "c" and group.members == ["c", "n"]
    assert fusion.fused_name(["a" * 300, "b" * 300], [False, True]) == "a" * 300 + "_ub_fusion"


def test_stats_rows_show_device_formats_and_precision_option_is_exact_only(in_tmp_cwd):
    from npu_dump_hook.formats import stats_csv

    with pytest.raises(OptionError, match="emulate_precision"):
        EmulatedNpu(profile="ascend", emulate_precision="fp16")
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_data="stats", dump_mode="all"),
                       output_dir="out", backend=EmulatedNpu(profile="ascend"), reference=False, collect=False)
    with tf.Graph().as_default():
        train_op = _cnn()
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            session.run(train_op)
    (entry,) = [s for s in hook.summary["emulator"]["steps"] if s["dir"]]
    (path,) = glob.glob(os.path.join(entry["dir"], "Conv2D.conv1_Conv2Dconv1_Relu.*.csv"))
    rows = stats_csv.read_stats_csv(path).rows
    assert [(r.direction, r.format, r.data_type) for r in rows] == [
        ("Input", "NC1HWC0", "DT_FLOAT16"), ("Input", "FRACTAL_Z", "DT_FLOAT16"), ("Input", "ND", "DT_FLOAT"),
        ("Output", "ND", "DT_FLOAT")]
    assert rows[0].shape == (4, 1, 8, 8, 16)


@pytest.mark.parametrize("shape, held", [
    ((4, 8, 8, 3), layout.Held("float16", "NC1HWC0", "NHWC")),
    ((2, 5, 5, 33), layout.Held("float16", "NC1HWC0", "NHWC")),
    ((3, 3, 3, 20), layout.Held("float16", "FRACTAL_Z", "HWCN")),
    ((4, 320), layout.Held("float16", "FRACTAL_NZ", "ND")),
    ((2, 7, 17, 5), layout.Held("float16", "FRACTAL_NZ", "NHWC")),
    ((6,), layout.Held("float32", "ND", "ND")),
])
def test_graph_desc_shapes_are_the_dumped_payload_shapes(shape, held):
    """The Build graph's desc dims (device_shape) equal the shape of the payload device_array writes,
    and the reader's conversion gives the framework array back."""
    array = np.random.RandomState(0).rand(*shape).astype(np.float32)
    device = layout.device_array(array, held)
    assert device.shape == layout.device_shape(shape, held) and device.dtype == np.dtype(held.dtype)
    back = device_format.to_original(device, held.format, shape, held.origin_format if held.format != "ND" else None)
    np.testing.assert_array_equal(back, array.astype(held.dtype))
