"""The emulated NPU backend end to end with real TF: Build graph, dump tree, golden folder."""
import glob
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from npu_dump_hook import DumpOptions, NpuDumpHook, OptionError
from npu_dump_hook.emulator.backend import EmulatedNpu
from npu_dump_hook.formats import dump_schema, ge_graph, names, stats_csv
from npu_dump_hook.formats.dump_file import DumpFile
from npu_dump_hook.formats.mapping_csv import read_mapping
from npu_dump_hook.formats.opdebug import read_opdebug_file
from npu_dump_hook.sample_models import cnn_estimator, mlp_session, text_model

from helpers.graphs import run_long_named_graph
from helpers.hooks import FetchHook, VariablesAtEndHook

v1 = tf.compat.v1
OFFLINE_PATTERN = re.compile(
    r"^[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[0-9]+(\.[0-9]+)?\.[0-9]{1,255}(\.[0-9]+\.[0-9]+\.[0-9]+)?(\.[0-9]+)?")
NUMPY_PATTERN = re.compile(r"^([\.A-Za-z0-9_-]+\.[0-9]+)\.[0-9]{1,255}\.npy$")


def step_dir_of(hook):
    steps = [s for s in hook.summary["emulator"]["steps"] if s["dir"]]
    assert len(steps) == 1
    return steps[0]["dir"]


def dump_files(folder):
    return sorted(p for p in glob.glob(os.path.join(folder, "*")) if os.path.basename(p) != "mapping.csv")


def run_model(model, hook, workdir, fetch=()):
    extra = [FetchHook(fetch)] if fetch else []
    if model == "cnn":
        cnn_estimator.train(str(workdir / "model"), hooks=[hook] + extra, steps=1000)
    elif model == "mlp":
        mlp_session.train(hook.options, hooks=[hook] + extra, steps=1000)
    else:
        text_model.train(hook.options, hooks=[hook] + extra, steps=1000)
    return extra[0].values if extra else None


def assert_header_is_protobufs(path):
    """The file's header is byte for byte what protobuf serializes for the message it decodes to
    (the writer puts headers together from cached pieces), and its payloads fill the rest."""
    with open(path, "rb") as handle:
        data = handle.read()
    length = int.from_bytes(data[:8], "little")
    header = dump_schema.DumpData()
    header.ParseFromString(data[8:8 + length])
    assert header.SerializeToString(deterministic=True) == data[8:8 + length], path
    sizes = [t.size for t in list(header.input) + list(header.output)]
    assert len(data) == 8 + length + sum(sizes), path


FETCH = {"cnn": ["loss:0", "logits/BiasAdd:0", "conv1/Relu:0"],
         "mlp": ["loss:0", "logits/BiasAdd:0", "hidden1/Relu:0"],
         "text": ["loss:0", "logits/BiasAdd:0"]}


@pytest.mark.parametrize("model", ["cnn", "mlp", "text"])
def test_sample_model_produces_graph_dump_and_golden(in_tmp_cwd, model):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", collect=False)
    fetched = run_model(model, hook, in_tmp_cwd, FETCH[model])
    summary = hook.summary["emulator"]
    assert hook.summary["backend"] == "emulated"

    # Build graph: named as GE names it, parses with the scanner and the full parser alike.
    graph_file = summary["graph_file"]
    assert re.match(r"ge_proto_\d{8}_Build\.txt$", os.path.basename(graph_file))
    assert os.path.dirname(graph_file) == os.path.join(hook.run_dir, "graph")
    (scanned,) = ge_graph.scan_graph(graph_file)
    model_def = ge_graph.parse_model(graph_file)
    assert scanned.name == model_def.graph[0].name == summary["graph_name"]
    assert re.match(r"ge_default_\d{14}_1$", scanned.name)
    assert [op.name for op in scanned.ops] == [op.name for op in model_def.graph[0].op]
    ops = {op.name: op for op in scanned.ops}
    no_task = {name for name, op in ops.items() if op.no_task}
    assert no_task and len(no_task) < len(ops)

    # Dump tree: {dump_path}/{time}/{device}/{model_name}/{model_id}/{data_index}
    folder = step_dir_of(hook)
    rel = os.path.relpath(folder, str(in_tmp_cwd / "dump")).split(os.sep)
    assert re.match(r"\d{14}$", rel[0]) and rel[1:] == ["0", names.sanitize(scanned.name), "1", "0"]
    files = dump_files(folder)
    assert len(files) > 10
    dumped_ops = set()
    for path in files:
        base = os.path.basename(path)
        assert OFFLINE_PATTERN.match(base), base
        parsed = names.parse_dump_name(base)
        assert len(str(parsed.timestamp)) == 16
        with DumpFile.open(path) as dump:
            assert dump.op_name in ops, dump.op_name
            assert dump.op_name not in no_task
            assert parsed.op_name == names.sanitize(dump.op_name)
            assert parsed.op_type == names.sanitize(ops[dump.op_name].type)
            dumped_ops.add(dump.op_name)
        assert_header_is_protobufs(path)
    # Tensor values equal what TF computed in that very step (fetched independently).
    by_op = {}
    for path in files:
        with DumpFile.open(path) as dump:
            by_op[dump.op_name] = (dump.array("output", 0, copy=True), dump.outputs[0].original_name)
    for tensor_name, expected in fetched.items():
        op_name = tensor_name.split(":")[0]
        if op_name in ops and not ops[op_name].no_task:
            actual, original = by_op[op_name]
            assert original == op_name
            np.testing.assert_array_equal(actual, expected, err_msg=tensor_name)

    # Golden folder: msaccucmp-ready .npy files of the same step.
    golden = sorted(os.listdir(hook.golden_dir))
    npys = [g for g in golden if g.endswith(".npy")]
    assert npys and all(NUMPY_PATTERN.match(g) for g in npys)
    loss_files = [g for g in npys if g.startswith("loss.0.")]
    assert len(loss_files) == 1
    assert np.load(os.path.join(hook.golden_dir, loss_files[0])) == fetched["loss:0"]


def test_training_results_identical_with_and_without_emulation(in_tmp_cwd):
    results = []
    for emulate in (False, True):
        options = DumpOptions(enable_dump=True, dump_path="dump") if emulate else DumpOptions()
        hook = NpuDumpHook(options, output_dir="out", reference=emulate, collect=False)
        fetch, variables = FetchHook(["loss:0"]), VariablesAtEndHook()
        mlp_session.train(options, hooks=[hook, fetch, variables], steps=1000)
        assert (hook._capture is not None) is emulate
        results.append((fetch.values["loss:0"], variables.values))
    (loss_a, vars_a), (loss_b, vars_b) = results
    assert loss_a == loss_b
    assert sorted(vars_a) == sorted(vars_b)
    for name in vars_a:
        np.testing.assert_array_equal(vars_a[name], vars_b[name], err_msg=name)


def _ops_in(folder):
    result = {}
    for path in dump_files(folder):
        with DumpFile.open(path) as dump:
            result[dump.op_name] = (len(dump.inputs), len(dump.outputs))
    return result


@pytest.mark.parametrize("mode", ["input", "output", "all"])
def test_dump_mode(in_tmp_cwd, mode):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_mode=mode), output_dir="out",
                       reference=False, collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    counts = _ops_in(step_dir_of(hook))
    matmul = counts["hidden1/MatMul"]
    assert matmul == {"input": (2, 0), "output": (0, 1), "all": (2, 1)}[mode]


def test_dump_layer_and_dump_step(in_tmp_cwd):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_layer="hidden1/MatMul logits/BiasAdd",
                          dump_step="1")
    hook = NpuDumpHook(options, max_steps=2, output_dir="out", reference=False, collect=False)
    mlp_session.train(options, hooks=[hook])
    assert hook.summary["steps"] == 2
    folder = step_dir_of(hook)
    assert os.path.basename(folder) == "1"  # data_index = the dumped step when dump_step is given
    assert sorted(_ops_in(folder)) == ["hidden1/MatMul", "logits/BiasAdd"]


def test_stats_mode_writes_csv_with_exact_header(in_tmp_cwd):
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump", dump_data="stats", dump_mode="all"),
                       output_dir="out", reference=False, collect=False)
    fetch = FetchHook(["hidden1/MatMul:0"])
    mlp_session.train(hook.options, hooks=[hook, fetch])
    files = dump_files(step_dir_of(hook))
    assert files and all(f.endswith(".csv") for f in files)
    (matmul,) = [f for f in files if ".hidden1_MatMul." in f]
    with open(matmul) as handle:
        assert handle.readline().rstrip("\n") == ",".join(stats_csv.STATS_HEADER)
    parsed = stats_csv.read_stats_csv(matmul)
    output = [r for r in parsed.rows if r.direction == "Output"][0]
    expected = fetch.values["hidden1/MatMul:0"]
    assert output.shape == expected.shape and output.count == expected.size
    assert output.max_value == pytest.approx(float(expected.max()), rel=1e-5)
    assert [r.direction for r in parsed.rows] == ["Input", "Input", "Output"]


def _overflow_graph():
    x = tf.constant([1.0, 0.0, 2.0])
    weight = v1.get_variable("w", initializer=tf.constant([1.0, 1.0, 1.0]))
    scaled = tf.multiply(x, weight, name="scaled")  # finite everywhere
    big = tf.multiply(scaled, 40000.0, name="big")  # beyond float16 range, finite in float32
    logged = tf.math.log(scaled, name="logged")  # -inf (and its gradient inf/NaN)
    loss = tf.reduce_sum(big) + tf.reduce_sum(tf.where(tf.math.is_finite(logged), logged, tf.zeros_like(logged)))
    step = v1.train.get_or_create_global_step()
    return [v1.train.GradientDescentOptimizer(0.0).minimize(loss, global_step=step), loss]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_overflow_mode_dumps_only_overflowing_ops(in_tmp_cwd, precision):
    options = DumpOptions(enable_dump_debug=True, dump_path="dump")
    hook = NpuDumpHook(options, output_dir="out", reference=False, collect=False, emulate_precision=precision)
    with tf.Graph().as_default():
        train_op = _overflow_graph()
        with v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(train_op)
    folder = step_dir_of(hook)
    files = [os.path.basename(f) for f in dump_files(folder)]
    debug = [f for f in files if f.startswith("Opdebug.Node_OpDebug.")]
    tensors = [f for f in files if f not in debug]
    assert len(debug) == len(tensors)  # one Opdebug record per overflowing op
    dumped = {}
    for name in tensors:
        with DumpFile.open(os.path.join(folder, name)) as dump:
            dumped[dump.op_name] = [dump.array("output", i, copy=True) for i in range(len(dump.outputs))]
    assert "logged" in dumped and "scaled" not in dumped
    assert ("big" in dumped) is (precision == "fp16")
    limit = 65504.0 if precision == "fp16" else np.inf
    for op_name, outputs in dumped.items():
        assert any(not np.all(np.isfinite(o.astype(np.float64))) or np.abs(o).max() > limit
                   for o in outputs if o.size), op_name
    _, record = read_opdebug_file(os.path.join(folder, debug[0]))
    assert record.layout == "new" and record.entries[0].get("model_id") == 1


def test_no_overflow_creates_no_folder(in_tmp_cwd):
    options = DumpOptions(enable_dump_debug=True, dump_path="dump")
    hook = NpuDumpHook(options, output_dir="out", reference=False, collect=False)
    mlp_session.train(options, hooks=[hook])
    assert [s["dir"] for s in hook.summary["emulator"]["steps"]] == [None]
    assert os.listdir(str(in_tmp_cwd / "dump")) == [] or not glob.glob(str(in_tmp_cwd / "dump" / "*" / "*" / "*"))


def test_fp16_precision_rounds_and_a_fault_scales(in_tmp_cwd):
    emulator = EmulatedNpu(emulate_precision="fp16", faults={"logits/BiasAdd": "scale=1.5"})
    assert not emulator.golden_in_run
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", backend=emulator,
                       collect=False, reference=False)
    fetch = FetchHook(["logits/BiasAdd:0", "hidden1/Relu:0"])
    mlp_session.train(hook.options, hooks=[hook, fetch])
    by_op = {}
    for path in dump_files(step_dir_of(hook)):
        with DumpFile.open(path) as dump:
            by_op[dump.op_name] = dump.array("output", 0, copy=True)
    relu = by_op["hidden1/Relu"]
    assert relu.dtype == np.float16
    np.testing.assert_array_equal(relu, fetch.values["hidden1/Relu:0"].astype(np.float16))
    np.testing.assert_allclose(by_op["logits/BiasAdd"].astype(np.float32),
                               fetch.values["logits/BiasAdd:0"] * 1.5, rtol=2e-3, atol=1e-3)


def test_ffts_names_and_device_id(in_tmp_cwd, monkeypatch):
    monkeypatch.setenv("ASCEND_DEVICE_ID", "3")
    emulator = EmulatedNpu(ffts_names=True)
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", backend=emulator,
                       collect=False, reference=False)
    mlp_session.train(hook.options, hooks=[hook])
    folder = step_dir_of(hook)
    assert folder.split(os.sep)[-4] == "3"
    for path in dump_files(folder):
        parsed = names.parse_dump_name(os.path.basename(path))
        assert parsed.is_ffts and parsed.device_id == 3 and parsed.task_type == 4
        assert OFFLINE_PATTERN.match(os.path.basename(path))


def test_long_names_go_through_mapping_csv(in_tmp_cwd):
    long_scope = "very_long_scope_name_" * 14
    hook = NpuDumpHook(DumpOptions(enable_dump=True, dump_path="dump"), output_dir="out", reference=False,
                       collect=False)
    run_long_named_graph(hook, long_scope)
    folder = step_dir_of(hook)
    mapping = read_mapping(os.path.join(folder, "mapping.csv"))
    assert mapping
    for hashed, original in mapping.items():
        assert hashed.isdigit() and os.path.exists(os.path.join(folder, hashed))
        assert len(original.encode()) > 255
    resolved = [names.parse_dump_name(h, mapping=mapping) for h in mapping]
    assert any(r.op_name == names.sanitize(long_scope + "/product") for r in resolved)


def test_bad_emulator_options():
    with pytest.raises(OptionError, match="emulate_precision"):
        EmulatedNpu(emulate_precision="int8")
    with pytest.raises(OptionError, match="backend"):
        NpuDumpHook(DumpOptions(), backend="gpu")
    with pytest.raises(OptionError, match="npu_bridge"):
        NpuDumpHook(DumpOptions(), backend="npu")


def test_every_selected_step_is_dumped_and_golden_is_the_first(in_tmp_cwd):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_step="0|2")
    hook = NpuDumpHook(options, max_steps=3, output_dir="out", collect=False)
    fetch = FetchHook(["loss:0"])
    losses = mlp_session.train(options, hooks=[hook, fetch])
    assert len(losses) == 3
    steps = hook.summary["emulator"]["steps"]
    assert [(s["step"], s["data_index"]) for s in steps] == [(0, 0), (2, 2)]
    assert [os.path.basename(s["dir"]) for s in steps] == ["0", "2"]
    assert all(s["files"] > 10 for s in steps)
    # each dump holds its own step: the loss value of step 0 and of step 2
    loss_values = []
    for entry in steps:
        (path,) = [p for p in dump_files(entry["dir"])
                   if ".sparse_softmax_cross_entropy_loss_value." in os.path.basename(p)]  # loss is an Identity
        with DumpFile.open(path) as dump:
            loss_values.append(float(dump.array("output", 0, copy=True)))
    assert loss_values[0] == losses[0] and loss_values[1] == losses[2]
    golden_losses = [g for g in os.listdir(hook.golden_dir) if g.startswith("loss.0.")]
    assert len(golden_losses) == 1
    assert float(np.load(os.path.join(hook.golden_dir, golden_losses[0]))) == losses[0]
    assert not os.path.exists(os.path.join(hook.run_dir, ".capture"))


def test_two_runs_in_one_second_never_share_a_time_folder(tmp_path):
    """GE names the dump's time folder by the second: the emulator claims a free one (mkdir), so
    two runs on one dump_path within a second get two folders, never one step folder of both."""
    from npu_dump_hook.emulator.backend import _claim_time_dir

    names = [_claim_time_dir(str(tmp_path)) for _ in range(3)]
    assert len(set(names)) == 3, names
    assert sorted(os.listdir(str(tmp_path))) == sorted(names)
