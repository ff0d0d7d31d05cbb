"""compare --replay: a row's original TF op(s) rebuilt from the NPU bundle's TF graph and run on CPU
with the NPU's dumped inputs (docs/compare.md, "Replay"). On the emulator's ascend profile with a
scale=1.05 fault on a fused convolution (dump_mode all): the faulted row replays as `kernel`, the
next breaching row as `inherited`, a healthy float16 convolution as `precision`; dump_mode output
says replay needs the inputs; a graph's py_func / file ops are refused, never run."""
import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare import compare, render_html
from npu_dump_hook.compare.replay import REPLAY_FACTOR, make_replay_spec
from npu_dump_hook.errors import OptionError

_REALISTIC = "faults" in inspect.signature(NpuDumpHook).parameters
FAULTED = "conv5/Relu"  # the last op of the fused Conv2D+BiasAdd+Relu node
FUSED = ["conv5/Conv2D", "conv5/BiasAdd", FAULTED]
_CLEARED = ("DUMP_GRAPH_PATH", "NPU_DUMP_ENABLE", "NPU_DUMP_PATH", "NPU_DUMP_STEP", "NPU_DUMP_MODE", "RANK_ID",
            "DEVICE_ID", "ASCEND_DEVICE_ID")


def _pair(root, dump_mode, faults):
    from npu_dump_hook.sample_models import deep_cnn

    options = DumpOptions(enable_dump=True, dump_path=str(root / "dump"), dump_mode=dump_mode)
    npu = NpuDumpHook(options, output_dir=str(root / "npu"), backend="emulated", emulate_profile="ascend",
                      faults=faults)
    deep_cnn.train(options, hooks=[npu], optimizer="momentum")
    golden = NpuDumpHook(options, output_dir=str(root / "golden"), initial_state=npu.bundle.location)
    deep_cnn.train(options, hooks=[golden], optimizer="momentum")
    return npu.bundle.location, golden.bundle.location


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    if not _REALISTIC:
        pytest.skip("this emulator has no realistic profile / faults")
    root = tmp_path_factory.mktemp("replay_fault")
    patch = pytest.MonkeyPatch()
    try:
        patch.chdir(root)
        for name in _CLEARED:
            patch.delenv(name, raising=False)
        yield _pair(root, "all", {FAULTED: "scale=1.05"})
    finally:
        patch.undo()


def _entry(result):
    section = result.doc["replay"]
    assert len(section["rows"]) == 1, section
    return section["rows"][0]


def test_the_faulted_fused_convolution_replays_as_kernel(faulted):
    result = compare(*faulted, workers=1, replay=True)
    first = result.doc["first_divergence"]
    assert result.exit_code == 1 and first["original_ops"] == FUSED, result.summary_text()
    entry = _entry(result)
    assert entry["row"] == first["row"] and entry["original_ops"] == FUSED
    assert entry["verdict"] == "kernel", result.summary_text()
    # the NPU output is 5 % off CPU on the same inputs; CPU float32 itself is not
    assert entry["local_f64"]["rel_euclid"] == pytest.approx(0.05, abs=0.003)
    assert entry["local_f32"]["rel_euclid"] == pytest.approx(0.05, abs=0.003)
    assert entry["cpu_f32_vs_f64"]["rel_euclid"] < 1e-5
    assert 0 < entry["expected"] < 1e-3 and entry["tolerance"] == pytest.approx(REPLAY_FACTOR * entry["expected"])
    assert entry["network"]["rel_euclid"] == pytest.approx(0.05, abs=0.003)
    text = result.summary_text()
    assert "replay (first 1 root cause(s)" in text and ": KERNEL" in text
    page = render_html(result.doc)
    assert 'id="replay"' in page and "replay-kernel" in page
    json.dumps(result.doc, allow_nan=False)  # what --json writes


def _next_breaching_output(result, after):
    rows = result.doc["rows"]
    later = sorted((r for r in rows if r["order"] > rows[after]["order"] and r["direction"] == "output"
                    and r["breached"] and r["ground_truth"]), key=lambda r: r["order"])
    assert later, result.summary_text()
    return later[0]


def test_the_next_breaching_row_replays_as_inherited(faulted):
    first = compare(*faulted, workers=1).doc["first_divergence"]["row"]
    result = compare(*faulted, workers=1, replay_op=FAULTED)
    assert _entry(result)["row"] == first and _entry(result)["verdict"] == "kernel"
    following = _next_breaching_output(result, first)
    assert following["ground_truth"][0].startswith("conv6/"), following  # the next fused convolution
    result = compare(*faulted, workers=1, replay_op=following["ground_truth"][-1])
    entry = _entry(result)
    assert entry["tensor"] == following["tensor"] and entry["verdict"] == "inherited", result.summary_text()
    assert entry["breached_inputs"] and entry["local_f64"]["rel_euclid"] <= entry["tolerance"]
    assert entry["network"]["rel_euclid"] > 100 * entry["local_f64"]["rel_euclid"]


def test_a_healthy_float16_convolution_replays_as_precision(faulted):
    result = compare(*faulted, workers=1, replay_op="conv2/Conv2D")
    entry = _entry(result)
    assert entry["original_ops"] == ["conv2/Conv2D", "conv2/BiasAdd", "conv2/Relu"]
    assert entry["verdict"] == "precision", result.summary_text()
    local = entry["local_f64"]["rel_euclid"]
    assert entry["float16_vs_f64"] is not None and 0 < local <= entry["tolerance"]
    # float16 really is the error: CPU float32 is far closer to float64 than the NPU is
    assert entry["cpu_f32_vs_f64"]["rel_euclid"] < local / 100


def test_replay_through_the_cli_runs_tensorflow_in_a_subprocess(faulted, tmp_path):
    """The CLI process never imports TensorFlow: the replay runs in ``python -m npu_dump_hook.op_replay``."""
    out = tmp_path / "result.json"
    code = ("import sys\nfrom npu_dump_hook.cli import main\nstatus = main(sys.argv[1:])\n"
            "assert 'tensorflow' not in sys.modules, 'compare loaded TensorFlow'\nsys.exit(status)\n")
    done = subprocess.run([sys.executable, "-c", code, "compare", faulted[0], faulted[1], "--workers", "1",
                           "--replay", "all", "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=600, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    text = done.stdout.decode()
    assert done.returncode == 1, done.stderr.decode()[-2000:]
    assert "replay (all root causes" in text and ": KERNEL" in text, text
    section = json.loads(out.read_text())["replay"]
    assert [e["verdict"] for e in section["rows"]] == ["kernel"]


def test_no_root_cause_to_replay_ends_the_started_replay_process(faulted):
    """No root cause among the compared rows (--ops leaves the fault out): the TensorFlow process
    started with the comparison is ended unused, and the document says there was nothing to replay."""
    code = ("import sys, json\nfrom npu_dump_hook.compare import compare\n"
            "doc = compare(sys.argv[1], sys.argv[2], workers=1, ops='^conv[12]/', replay=True).doc\n"
            "assert 'tensorflow' not in sys.modules\nprint(json.dumps(doc['replay']))\n")
    done = subprocess.run([sys.executable, "-c", code, faulted[0], faulted[1]], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    section = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert section["rows"] == [] and section["note"] == "no root cause to replay"


def test_dump_mode_output_says_replay_needs_the_inputs(tmp_path_factory):
    if not _REALISTIC:
        pytest.skip("this emulator has no realistic profile / faults")
    root = tmp_path_factory.mktemp("replay_output_only")
    patch = pytest.MonkeyPatch()
    try:
        patch.chdir(root)
        npu, golden = _pair(root, "output", {FAULTED: "scale=1.05"})
    finally:
        patch.undo()
    result = compare(npu, golden, workers=1, replay=True)
    entry = _entry(result)
    assert entry["verdict"] is None
    assert "no inputs" in entry["reason"] and "dump_mode output" in entry["reason"]
    assert "dump_mode all or input" in entry["reason"]
    assert "dump_mode all or input" in result.summary_text()


def test_replay_options_are_checked(capsys):
    assert make_replay_spec(None) is None and make_replay_spec(True).count == 1
    assert make_replay_spec("all").count is None and make_replay_spec("3").count == 3
    assert make_replay_spec(replay_op="conv1/Conv2D").op == ("conv1/Conv2D",)
    assert make_replay_spec(replay_op=["a", "b"]).op == ("a", "b")
    with pytest.raises(OptionError, match="replay-op"):
        make_replay_spec(replay_op=["a", ""])
    for bad in ("0", "-1", "some", 0, 1.5):
        with pytest.raises(OptionError, match="replay"):
            make_replay_spec(bad)
    from npu_dump_hook.cli import main

    assert main(["compare", "npu", "--replay", "none"]) == 2
    assert "--replay: must be a positive number of root causes or 'all'" in capsys.readouterr().err


# -- the bundle's graph is data: only pure ops are rebuilt ----------------------------------------------


def _graph_text(path):
    import tensorflow as tf

    v1 = tf.compat.v1
    called = []
    with tf.Graph().as_default() as graph:
        x = v1.placeholder(tf.float32, [4], name="x")
        doubled = v1.py_func(lambda a: called.append(a) or a * 2, [x], tf.float32, name="doubled")
        v1.io.read_file(tf.constant(str(path / "secret.txt")), name="read")
        tf.identity(x * 3.0, name="tripled")
        v1.train.write_graph(graph.as_graph_def(), str(path), "graph.pbtxt", as_text=True)
    assert doubled is not None
    return str(path / "graph.pbtxt"), called


@pytest.mark.parametrize("chain,words", [(["doubled"], "pyfunc"), (["read"], "file"),
                                         (["nothere"], "not in the bundle's tf graph")])
def test_py_func_and_file_ops_are_refused(tmp_path, chain, words):
    from npu_dump_hook.op_replay.run import run_request

    graph, called = _graph_text(tmp_path)
    np.save(str(tmp_path / "in0.npy"), np.arange(4, dtype=np.float32))
    request = {"graph": graph, "jobs": [{"id": 0, "chain": chain, "fetch": chain[0] + ":0", "slot": 0,
                                         "inputs": [{"tensor": "x:0", "file": "in0.npy"}], "round16": False}]}
    (tmp_path / "request.json").write_text(json.dumps(request))
    job = run_request(str(tmp_path))["jobs"][0]
    assert job["outputs"] == {} and words in job["refused"].lower(), job
    assert called == []


def test_a_pure_op_of_the_graph_is_rebuilt_and_fed(tmp_path):
    from npu_dump_hook.op_replay.run import run_request

    graph, _called = _graph_text(tmp_path)
    np.save(str(tmp_path / "in0.npy"), np.arange(4, dtype=np.float32))
    request = {"graph": graph, "jobs": [{"id": 0, "chain": ["mul", "tripled"], "fetch": "tripled:0", "slot": 0,
                                         "inputs": [{"tensor": "x:0", "file": "in0.npy"}], "round16": True}]}
    (tmp_path / "request.json").write_text(json.dumps(request))
    job = run_request(str(tmp_path))["jobs"][0]
    assert job["refused"] is None and set(job["outputs"]) == {"f32", "f64", "f16"}, job
    f64 = np.load(str(tmp_path / job["outputs"]["f64"]))
    assert f64.dtype == np.float64 and np.array_equal(f64, [0.0, 3.0, 6.0, 9.0])


def test_the_replay_process_runs_the_graph_without_building_tensorflows_public_api(tmp_path):
    """``python -m npu_dump_hook.op_replay``: on TF 2.x the graph runs without ``tensorflow/__init__``
    (its public API: 2 of its 3.5 s of CPU); TF 1.15 is imported as usual. Same outputs either way."""
    graph, _called = _graph_text(tmp_path)
    np.save(str(tmp_path / "in0.npy"), np.arange(4, dtype=np.float32))
    request = {"graph": graph, "jobs": [{"id": 0, "chain": ["mul", "tripled"], "fetch": "tripled:0", "slot": 0,
                                         "inputs": [{"tensor": "x:0", "file": "in0.npy"}], "round16": False}]}
    (tmp_path / "request.json").write_text(json.dumps(request))
    code = ("import sys\nfrom npu_dump_hook.op_replay.run import main\nstatus = main(sys.argv[1:])\n"
            "print(hasattr(sys.modules['tensorflow'], 'compat'))\nsys.exit(status)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    import tensorflow as tf

    public_api = done.stdout.decode().split()[-1]
    assert public_api == str(tf.__version__.startswith("1.")), done.stdout.decode()
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["tensorflow"] == tf.__version__
    job = result["jobs"][0]
    assert job["refused"] is None, job
    assert np.array_equal(np.load(str(tmp_path / job["outputs"]["f64"])), [0.0, 3.0, 6.0, 9.0])


def test_replay_without_a_golden_is_a_usage_error(faulted, capsys):
    """A dump step folder (no golden, no TF graph): only the checks that need no golden could run."""
    from npu_dump_hook.cli import main

    bundle = faulted[0]
    with open(os.path.join(bundle, "data", "bundle.json"), encoding="utf-8") as handle:
        graph = os.path.join(bundle, "data", json.load(handle)["graph"]["file"])
    steps = [folder for folder, dirs, _files in os.walk(os.path.join(bundle, "data", "dump"))
             if not dirs and any(name.endswith(".0") or "." in name for name in os.listdir(folder))]
    assert steps
    with pytest.raises(OptionError, match="needs a tensor dump compared with a golden"):
        compare(steps[0], graph=graph, workers=1, replay=True)
    assert main(["compare", steps[0], "--graph", graph, "--replay"]) == 2
    assert "has no golden" in capsys.readouterr().err


_OUTSIDE_NODES = {
    # TensorFlow marks these pure, yet they write or read files through an attr
    "debug": ('node {\n  name: "debug"\n  op: "DebugIdentity"\n  input: "x"\n'
              '  attr {\n    key: "T"\n    value {\n      type: DT_FLOAT\n    }\n  }\n'
              '  attr {\n    key: "debug_urls"\n    value {\n      list {\n        s: "file://%s"\n      }\n    }\n  }\n}\n'),
    "region": ('node {\n  name: "region"\n  op: "ImmutableConst"\n'
               '  attr {\n    key: "dtype"\n    value {\n      type: DT_FLOAT\n    }\n  }\n'
               '  attr {\n    key: "shape"\n    value {\n      shape {\n        dim {\n          size: 4\n        }\n      }\n    }\n  }\n'
               '  attr {\n    key: "memory_region_name"\n    value {\n      s: "%s"\n    }\n  }\n}\n'),
    # a string input is a file name or a key, never what a numeric replay needs
    "number": ('node {\n  name: "number"\n  op: "StringToNumber"\n  input: "x"\n'
               '  attr {\n    key: "out_type"\n    value {\n      type: DT_FLOAT\n    }\n  }\n}\n'),
}


@pytest.mark.parametrize("name,words", [("debug", "debug"), ("region", "immutable"), ("number", "string input")])
def test_ops_reaching_outside_the_graph_are_refused(tmp_path, name, words):
    """A hostile bundle's graph can hold ops TensorFlow calls pure that write (DebugIdentity's
    debug_urls) or read (ImmutableConst's memory region) files: they are refused and nothing is written."""
    from npu_dump_hook.op_replay.run import run_request

    graph, _called = _graph_text(tmp_path)
    outside = tmp_path / "outside"
    node = _OUTSIDE_NODES[name]
    with open(graph, "a") as handle:
        handle.write(node % outside if "%s" in node else node)
    np.save(str(tmp_path / "in0.npy"), np.arange(4, dtype=np.float32))
    request = {"graph": graph, "jobs": [{"id": 0, "chain": [name], "fetch": name + ":0", "slot": 0,
                                         "inputs": [{"tensor": "x:0", "file": "in0.npy"}], "round16": False}]}
    (tmp_path / "request.json").write_text(json.dumps(request))
    job = run_request(str(tmp_path))["jobs"][0]
    assert job["outputs"] == {} and words in job["refused"].lower(), job
    assert not outside.exists()


def test_the_attr_rule_refuses_a_debug_url_whatever_the_op_type_is_called():
    from npu_dump_hook.op_replay._nodes import refusal
    from npu_dump_hook import _tf

    text = _OUTSIDE_NODES["debug"].replace('"DebugIdentity"', '"Identity"') % "/tmp/elsewhere"
    tf = _tf.tf_v1()
    graph_def = tf.GraphDef()
    from google.protobuf import text_format

    text_format.Merge(text, graph_def)
    why = refusal(graph_def.node[0], _tf.op_def("Identity"))
    assert why is not None and "debug_urls" in why and "outside the graph" in why


def test_a_constant_declaring_billions_of_elements_is_not_expanded(tmp_path):
    """A few bytes of graph text (one value filling a [65536, 65536] shape: 16 GiB) are refused with
    both counts, in the chain and as a chain input, instead of being expanded in the replay process."""
    from npu_dump_hook.op_replay.run import run_request

    graph, _called = _graph_text(tmp_path)
    with open(graph, "a") as handle:
        handle.write('node {\n  name: "huge"\n  op: "Const"\n'
                     '  attr {\n    key: "dtype"\n    value {\n      type: DT_FLOAT\n    }\n  }\n'
                     '  attr {\n    key: "value"\n    value {\n      tensor {\n        dtype: DT_FLOAT\n'
                     '        tensor_shape {\n          dim {\n            size: 65536\n          }\n'
                     '          dim {\n            size: 65536\n          }\n        }\n        float_val: 1.0\n'
                     '      }\n    }\n  }\n}\n'
                     'node {\n  name: "grown"\n  op: "Mul"\n  input: "huge"\n  input: "huge"\n'
                     '  attr {\n    key: "T"\n    value {\n      type: DT_FLOAT\n    }\n  }\n}\n')
    np.save(str(tmp_path / "in0.npy"), np.arange(4, dtype=np.float32))
    for chain in (["huge", "grown"], ["grown"]):
        request = {"graph": graph, "jobs": [{"id": 0, "chain": chain, "fetch": "grown:0", "slot": 0,
                                             "inputs": [], "round16": False}]}
        (tmp_path / "request.json").write_text(json.dumps(request))
        job = run_request(str(tmp_path))["jobs"][0]
        assert job["outputs"] == {} and "4294967296 elements but holds 1" in (job["refused"] or ""), job


def test_the_replay_process_starts_before_anything_is_read_and_ends_on_an_error(monkeypatch, tmp_path):
    """Its import of TensorFlow (seconds) overlaps the reading of the bundle too; a side that cannot be
    read ends it at once."""
    import npu_dump_hook.compare._compare as implementation  # where compare() finds its names

    events = []

    class Recording(object):
        def __init__(self):
            events.append("replay process started")

        def close(self):
            events.append("replay process ended")

    def unreadable(npu, graph, step):
        events.append("NPU side read")
        raise OptionError("npu", npu, "is not readable (test)")

    monkeypatch.setattr(implementation, "ReplayProcess", Recording)
    monkeypatch.setattr(implementation, "load_npu", unreadable)
    with pytest.raises(OptionError, match="not readable"):
        compare(str(tmp_path), str(tmp_path), workers=1, replay=True)
    assert events == ["replay process started", "NPU side read", "replay process ended"]
    events[:] = []
    with pytest.raises(OptionError, match="not readable"):
        compare(str(tmp_path), str(tmp_path), workers=1)
    assert events == ["NPU side read"]  # no replay asked: no process
