"""A dynamic_rnn LSTM with recurrent dropout through the whole workflow (issue 21, control flow):

    npu-dump-hook run --backend emulated --emulate-profile ascend [--fault OP=scale=1.05] -- rnn_scripts.py SHAPE
    npu-dump-hook run --golden-for NPU_BUNDLE -- rnn_scripts.py SHAPE
    npu-dump-hook compare NPU_BUNDLE GOLDEN_BUNDLE

With TF 1.x control flow (TF 1.15; TF 2.15 with ``disable_control_flow_v2``) the loop body is dumped
and captured per iteration (one dump file and one golden file per iteration) and compare matches
them iteration by iteration: exit 0 without a fault, exit 1 naming the faulted loop-body op first,
with its iteration. With TF 2.x control flow v2 the loop is a functional While: its body ops are
function-internal, so they have no dump file, and the coverage and a bundle warning say so.
"""
import json
import os
import sys

import pytest
import tensorflow as tf

from npu_dump_hook.bundle import read_bundle, verify_bundle
from npu_dump_hook.bundle.describe import graph_ops
from npu_dump_hook.formats import ge_json

from helpers.runs import HELPERS, clean_env, run

SCRIPT = os.path.join(HELPERS, "rnn_scripts.py")
CLI = [sys.executable, "-m", "npu_dump_hook"]
TIME = 6  # rnn_scripts.TIME: the loop's iterations
LOOP_OP = "rnn/while/lstm/MatMul"
V1_FLOW = "dynamic_v1flow"


def _run(cwd, name, flags, shape):
    folder = os.path.join(str(cwd), name)
    os.makedirs(folder)
    argv = CLI + ["run", "--output-dir", os.path.join(folder, "out")] + list(flags) + [
        "--", sys.executable, SCRIPT, shape, folder]
    code, lines, err = run(argv, folder, clean_env(), timeout=900)
    return code, (lines[-1] if lines and os.path.isdir(lines[-1]) else None), err


def _workflow(cwd, shape, fault=None):
    extra = ["--fault", "{}=scale=1.05".format(fault)] if fault else []
    label = "{}_{}".format(shape, "fault" if fault else "healthy")
    code, npu, err = _run(cwd, "npu_" + label, ["--backend", "emulated", "--emulate-profile", "ascend"] + extra, shape)
    assert code == 0 and npu, err[-3000:]
    code, golden, err = _run(cwd, "golden_" + label, ["--golden-for", npu], shape)
    assert code == 0 and golden, err[-3000:]
    target = os.path.join(str(cwd), "compare_{}.json".format(label))
    code, lines, err = run(CLI + ["compare", npu, golden, "--json", target], str(cwd), clean_env())
    assert code in (0, 1), err[-3000:]
    with open(target) as handle:
        return npu, golden, code, "\n".join(lines), json.load(handle)


def _assert_graph_forms_are_the_read_ones(bundle, doc):
    """The emulated run's graph JSON and op count (handed over in its process, ge_handover) are
    what converting and scanning the bundle's graph text give here (nothing noted in this process)."""
    text = os.path.join(bundle, "data", *doc["graph"]["file"].split("/"))
    ge_json.write_msaccucmp_json(text, text + ".converted")
    with open(os.path.join(bundle, "data", *doc["graph"]["json"].split("/")), "rb") as handed, \
            open(text + ".converted", "rb") as converted:
        assert handed.read() == converted.read()
    os.remove(text + ".converted")
    assert doc["graph"]["op_count"] == graph_ops(text).count


def _dump_files(doc, op_name):
    return sorted((f for f in doc["files"] if f["kind"] == "dump" and f["op_name"] == op_name.replace("/", "_")),
                  key=lambda f: f["timestamp"])


@pytest.fixture(scope="module")
def v1_flow(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("rnn_v1flow")
    return {"healthy": _workflow(cwd, V1_FLOW), "fault": _workflow(cwd, V1_FLOW, LOOP_OP)}


def test_loop_body_is_dumped_and_captured_per_iteration(v1_flow):
    npu, golden, _code, _out, _doc = v1_flow["healthy"]
    assert verify_bundle(npu) == [] and verify_bundle(golden) == []
    npu_doc, golden_doc = read_bundle(npu), read_bundle(golden)
    assert golden_doc["golden_for"]["match"] is True
    _assert_graph_forms_are_the_read_ones(npu, npu_doc)
    assert golden_doc["fingerprints"] == npu_doc["fingerprints"]
    files = _dump_files(npu_doc, LOOP_OP)
    assert len(files) == TIME, [f["path"] for f in files]  # one per iteration, GE's name, later timestamps
    assert len({f["task_id"] for f in files}) == 1 and len({f["timestamp"] for f in files}) == TIME
    golden_files = [f["path"] for f in golden_doc["files"] if f["kind"] == "golden"
                    and os.path.basename(f["path"]).startswith("rnn_while_lstm_MatMul.0.")]
    assert len(golden_files) == TIME, golden_files
    flow = npu_doc["coverage"]["control_flow"]
    assert flow["while"]["executed"] > 50 and flow["while"]["dumped"] >= flow["while"]["executed"] - 20, flow
    assert LOOP_OP.replace("/", "_") not in flow["not_dumped"]
    warning = [w for w in npu_doc["warnings"] if w.startswith("control flow: ")]
    assert len(warning) == (1 if flow["not_dumped"] else 0)
    assert all("{} of {} executed op(s)".format(len(flow["not_dumped"]), flow["executed"]) in w for w in warning)
    # ops TensorFlow pruned from the gradient loop (e.g. the gradient towards the dropout mask: no value in any
    # iteration, for the emulated NPU as for the golden capture) did not run: "not executed", as an untaken
    # branch, neither counted as executed without a dump file nor missing (they used to be both, with a warning)
    cov = npu_doc["coverage"]
    pruned = [name for name in cov["not_executed"] if name.startswith("gradients_rnn_while_")]
    assert pruned and not set(pruned) & set(flow["not_dumped"]) and not set(pruned) & set(cov["missing"]), cov
    # and the fused MatMul+BiasAdd node's dump counts for its BiasAdd: every executed loop op has its files
    assert flow["not_dumped"] == [] and warning == [] and cov["missing"] == [], cov
    # the recurrent dropout inside the loop is stripped (not left to differ between the runs)
    dropouts = [s for s in npu_doc["randomness"]["sources"] if "while/dropout" in s["op"]]
    assert dropouts and all(s["action"].startswith("stripped inside a control-flow context") for s in dropouts)


def test_healthy_loop_compares_iteration_by_iteration_and_passes(v1_flow):
    _npu, _golden, code, out, doc = v1_flow["healthy"]
    assert code == 0, out
    assert doc["summary"]["verdict"] == "pass" and doc["first_divergence"] is None
    rows = [r for r in doc["rows"] if r["npu_op"] == LOOP_OP and r["direction"] == "output"]
    assert sorted(r["iteration"] for r in rows) == list(range(TIME))
    # (the ascend profile fuses MatMul+BiasAdd: the node's output is the BiasAdd's tensor)
    assert all(r["status"] == "ok" and r["golden_tensor"] in (LOOP_OP + ":0", "rnn/while/lstm/BiasAdd:0")
               for r in rows), rows
    assert len({r["golden_tensor"] for r in rows}) == 1 and len({r["timestamp"] for r in rows}) == TIME
    assert not [w for w in doc["warnings"] if w.startswith("nested while loops")]  # one loop level here


def test_fault_inside_the_loop_is_named_first_with_its_iteration(v1_flow):
    _npu, _golden, code, out, doc = v1_flow["fault"]
    assert code == 1, out
    first = doc["first_divergence"]
    assert first["npu_op"] == LOOP_OP and LOOP_OP in first["original_ops"] and first["iteration"] == 0, first
    line = out.split("first divergence: ")[1].splitlines()[0]
    assert LOOP_OP in line and line.endswith("iteration 0"), line
    # the fault's own scale op (the emulator's numerics rewrite, no GE op) is no loop op without a dump file
    flow = read_bundle(_npu)["coverage"]["control_flow"]
    assert flow["not_dumped"] == [], flow["not_dumped"]


def test_loop_gradient_rows_fed_through_the_stack_are_propagated_not_root_causes(v1_flow):
    """The gradient loop reads the forward values through StackPopV2 (no data edge to the push):
    before, its Mul rows (gradients/rnn/while/lstm/mul*_grad/Mul) were 5 more root causes."""
    _npu, _golden, _code, out, doc = v1_flow["fault"]
    causes = [doc["rows"][i] for i in doc["root_causes"]]
    assert [(r["npu_op"], r["iteration"]) for r in causes] == [(LOOP_OP, 0)], out
    assert "other root causes" not in out
    gradient = [r for r in doc["rows"] if r["npu_op"].startswith("gradients/rnn/while/lstm/mul")
                and r["npu_op"].endswith("_grad/Mul") and r["breached"]]
    assert gradient and {r["status"] for r in gradient} == {"propagated"}, gradient[:3]


@pytest.mark.skipif(not tf.__version__.startswith("2."), reason="TF 1.15 has no control flow v2")
def test_control_flow_v2_loop_body_is_reported_not_dumped(tmp_path):
    npu, _golden, code, out, doc = _workflow(tmp_path, "dynamic")
    assert code == 0, out
    npu_doc = read_bundle(npu)
    flow = npu_doc["coverage"]["control_flow"]
    assert flow["while"]["executed"] == 0 and flow["function"]["executed"] > 50, flow
    assert flow["function"]["dumped"] == 0 and "rnn_while_lstm_MatMul" in " ".join(flow["not_dumped"])
    assert any(w.startswith("control flow: ") and "If/While function bodies: 0/" in w for w in npu_doc["warnings"])
    # compare says what it cannot see
    assert any(w.startswith("NPU bundle: {} of {} executed op(s) inside control flow".format(
        len(flow["not_dumped"]), flow["executed"])) for w in doc["warnings"]), doc["warnings"]
    # a fault on a body op cannot be injected there: refused, the op named
    code, bundle, err = _run(tmp_path, "npu_v2_fault", ["--backend", "emulated", "--fault", LOOP_OP + "=scale=1.05"],
                             "dynamic")
    assert code != 0 and bundle is None and LOOP_OP in err and "names no op of the graph" in err
