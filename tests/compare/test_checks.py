"""Checks that need no golden (compare/checks.py): the NaN/Inf origin on tensor dumps and on
stats CSVs, and the overflow report of an enable_dump_debug run; on synthetic runs and on the
emulated NPU with its ``nan`` / ``overflow`` faults (real TF)."""
import json
import os
import time

import numpy as np
import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook, _ledger
from npu_dump_hook.bundle import write_bundle
from npu_dump_hook.cli import main
from npu_dump_hook.errors import UnsafePathError
from npu_dump_hook.compare import compare, golden_free_checks, render_html
from npu_dump_hook.compare._graph import load_graph
from npu_dump_hook.compare._npu import load_npu, load_written
from npu_dump_hook.locate import locate_run
from npu_dump_hook.compare.checks import run_checks, run_checks_loading_graph
from npu_dump_hook.sample_models import mlp_session

from helpers.compare_synth import Synth

FAULTED = "hidden2/MatMul"
NAN = np.float32("nan")


def _synthetic(tmp_path, dump_mode="output"):
    """x -> a -> b (NaN: origin) -> c (NaN) -> d (finite again); p (no dump) -> e (+Inf: origin, inputs
    unknown); f (finite) -> g (-Inf: origin, later)."""
    synth = Synth(tmp_path, dump_mode=dump_mode)
    x = np.arange(1, 7, dtype=np.float32)
    synth.op("x", "Data", x, no_task=True)
    synth.op("a", "Mul", x * 2, inputs=["x:0"])
    bad = (x * 2).copy()
    bad[3] = NAN
    synth.op("b", "Div", x, inputs=["a:0"], npu=bad)
    synth.op("c", "Relu", x, inputs=["b:0"], npu=bad)
    synth.op("d", "IsFiniteSelect", x, inputs=["c:0"])
    synth.op("p", "Mul", x, inputs=["x:0"], dump=False)
    inf = x.copy()
    inf[0] = np.inf
    synth.op("e", "Exp", x, inputs=["p:0"], npu=inf)
    synth.op("f", "Neg", -x, inputs=["x:0"])
    ninf = -x
    ninf[1] = -np.inf
    synth.op("g", "Log", x, inputs=["f:0"], npu=ninf)
    graph, step, _ = synth.write()
    return graph, step


@pytest.mark.parametrize("dump_mode", ["output", "all"])
def test_nan_origin_names_the_first_op_whose_inputs_are_finite(tmp_path, dump_mode):
    graph, step = _synthetic(tmp_path, dump_mode)
    result = compare(step, graph=graph, workers=1)
    doc = result.doc
    assert doc["golden"] is None and doc["rows"] == [] and result.exit_code == 1
    assert doc["summary"]["verdict"] == "fail" and doc["summary"]["golden_free"]
    part = doc["checks"]["nan_inf"]
    assert part["source"] == "tensors" and part["ops_nonfinite"] == 4 + (dump_mode == "all")  # d reads c's NaN
    origins = {o["npu_op"]: o for o in part["origins"]}
    assert [o["npu_op"] for o in part["origins"]] == ["b", "e", "g"]  # execution order
    assert origins["b"]["propagates_to"] == ["c"] + (["d"] if dump_mode == "all" else [])
    assert origins["b"]["tensors"] == [{"tensor": "b:output:0", "count": 6, "nan": 1, "neg_inf": 0, "pos_inf": 0}]
    assert origins["g"]["tensors"][0]["neg_inf"] == 1 and origins["e"]["tensors"][0]["pos_inf"] == 1
    checked = "dumped" if dump_mode == "all" else "graph"
    assert origins["b"]["inputs_checked"] == checked and origins["g"]["inputs_checked"] == checked
    # e's producer p was not dumped and p reads only x (no task): nothing upstream to judge by
    assert origins["e"]["inputs_checked"] == ("dumped" if dump_mode == "all" else "none")
    assert "c" not in origins and part["unexplained"] == [] and part["unreadable"] == []
    text = result.summary_text()
    assert "no golden" in text and "NaN/Inf origin: b (Div)" in text and "verdict: FAIL" in text
    page = render_html(doc)
    assert 'id="checks"' in page and "NaN/Inf origin" in page


def test_a_finite_run_without_golden_passes_and_says_it_compared_nothing(tmp_path):
    synth = Synth(tmp_path)
    x = np.arange(4, dtype=np.float32)
    synth.op("x", "Data", x, no_task=True)
    synth.op("a", "Mul", x, inputs=["x:0"])
    graph, step, _ = synth.write()
    result = compare(step, graph=graph, workers=1)
    assert result.exit_code == 0 and result.doc["checks"]["nan_inf"]["ops_checked"] == 1
    assert result.doc["checks"]["nan_inf"]["origins"] == [] and result.doc["checks"]["overflow"] is None
    assert "give GOLDEN" in result.summary_text() and "NaN/Inf: 0 of 1 dumped ops non-finite" in result.summary_text()


def test_an_unreadable_dump_is_named_not_an_origin(tmp_path):
    graph, step = _synthetic(tmp_path)
    victim = [n for n in os.listdir(step) if ".b." in n][0]
    with open(os.path.join(step, victim), "r+b") as handle:
        handle.truncate(20)
    part = compare(step, graph=graph, workers=1).doc["checks"]["nan_inf"]
    assert [u["file"] for u in part["unreadable"]] == [os.path.join(step, victim)]
    assert "b" not in [o["npu_op"] for o in part["origins"]]


def _emulated(root, options, faults):
    hook = NpuDumpHook(options, output_dir=str(root), backend="emulated", emulate_profile="ascend", faults=faults)
    mlp_session.train(hook.options, hooks=[hook], steps=1000)
    assert hook.bundle is not None
    return hook.bundle.location


@pytest.mark.parametrize("dump_data", ["tensor", "stats"])
def test_emulated_nan_fault_is_the_origin_not_its_consumers(in_tmp_cwd, capsys, dump_data):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_mode="all" if dump_data == "tensor" else "output",
                          dump_data=dump_data)
    bundle = _emulated(in_tmp_cwd / "npu", options, {FAULTED: "nan"})
    result = compare(bundle, workers=1)
    part = result.doc["checks"]["nan_inf"]
    assert part["source"] == ("tensors" if dump_data == "tensor" else "stats")
    assert [o["npu_op"] for o in part["origins"]] == [FAULTED]
    origin = part["origins"][0]
    assert origin["original_ops"] == [FAULTED] and origin["tensors"][0]["nan"] >= 1
    consumers = {"hidden2/BiasAdd", "hidden2/Tanh", "logits/MatMul"}
    assert consumers <= set(origin["propagates_to"])
    assert origin["propagated"] + 1 == part["ops_nonfinite"] and part["ops_nonfinite"] > 10
    assert main(["compare", bundle, "--workers", "1", "--json", "r.json", "--html", "r.html"]) == 1
    out = capsys.readouterr().out
    assert "NaN/Inf origin: {} (MatMulV2)".format(FAULTED) in out
    with open("r.json") as handle:
        assert json.load(handle)["checks"]["nan_inf"]["origins"][0]["npu_op"] == FAULTED
    with open("r.html") as handle:
        assert 'id="checks"' in handle.read()
    if dump_data == "tensor":  # the counts noted when the emulator wrote the files are what a read finds
        noted = [p for p in _files_under(bundle) if _ledger.dump_health(p) is not None]
        assert len(noted) == part["ops_checked"] > 10
        _ledger.forget_all()
        assert compare(bundle, workers=1).doc["checks"]["nan_inf"] == part


def _files_under(root):
    return [os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names]


def test_emulated_overflow_fault_is_the_first_overflow_entry_with_its_tf_op(in_tmp_cwd, capsys):
    options = DumpOptions(enable_dump_debug=True, dump_path="dump")
    bundle = _emulated(in_tmp_cwd / "npu", options, {FAULTED: "overflow"})
    result = compare(bundle, workers=1)
    report = result.doc["checks"]["overflow"]
    entries = report["entries"]
    assert report["opdebug_files"] == len(entries) >= 2 and report["unreadable"] == []
    assert entries[0]["npu_op"] == FAULTED and entries[0]["original_ops"] == [FAULTED]
    assert entries[0]["op_type"] == "MatMulV2" and entries[0]["unit"] == "AIC"
    assert [e["timestamp"] for e in entries] == sorted(e["timestamp"] for e in entries)
    assert len({e["npu_op"] for e in entries}) == len(entries)  # one record per overflowing op
    assert result.doc["checks"]["nan_inf"]["origins"][0]["npu_op"] == FAULTED
    assert result.exit_code == 1
    assert main(["compare", bundle, "--workers", "1", "--top", "1"]) == 1
    out = capsys.readouterr().out
    assert "overflow: {} entr(ies)".format(len(entries)) in out and "first: {} (MatMulV2)".format(FAULTED) in out
    assert "AIC {} (MatMulV2): {}".format(FAULTED, FAULTED) in out


def _lazily_and_eagerly(step, graph):
    """(run_checks_loading_graph's result, how many times it loaded the graph, run_checks' result)."""
    side = load_npu(step, graph=graph)
    loads = []

    def load():
        loads.append(graph)
        return load_graph(graph)
    return run_checks_loading_graph(load, side), len(loads), run_checks(load_graph(graph), side)


def test_golden_free_checks_of_a_clean_step_need_no_graph_and_say_the_same(tmp_path):
    synth = Synth(tmp_path)
    x = np.arange(4, dtype=np.float32)
    synth.op("x", "Data", x, no_task=True)
    synth.op("a", "Mul", x, inputs=["x:0"])
    synth.op("b", "Relu", x, inputs=["a:0"])
    graph, step, _ = synth.write()
    lazy, loads, eager = _lazily_and_eagerly(step, graph)
    assert loads == 0 and lazy == eager and lazy["nan_inf"]["ops_checked"] == 2


@pytest.mark.parametrize("damage", ["nan", "unreadable"])
def test_golden_free_checks_load_the_graph_when_a_finding_names_ops(tmp_path, damage):
    graph, step = _synthetic(tmp_path)
    if damage == "unreadable":
        victim = [n for n in os.listdir(step) if ".b." in n][0]
        with open(os.path.join(step, victim), "r+b") as handle:
            handle.truncate(20)
    lazy, loads, eager = _lazily_and_eagerly(step, graph)
    assert loads == 1 and lazy == eager and [o["npu_op"] for o in lazy["nan_inf"]["origins"]][-2:] == ["e", "g"]


def _written_bundle(tmp_path):
    """The NaN run of :func:`_synthetic` as a bundle this process has just written (its listing kept)."""
    graph, step = _synthetic(tmp_path / "src")
    located = locate_run(str(tmp_path / "src" / "dump"), graph_dirs=[os.path.dirname(graph)])
    return write_bundle(str(tmp_path / "bundle"), located, backend="emulated", run={"captured_step": 0})


def _side_facts(side):
    return (side.root, side.graph_path, side.graph_shown, side.step_dir, side.step, side.golden_dir, side.warnings,
            [(ref.path, ref.name) for ref in side.dumps + side.stats + side.opdebug])


def test_golden_free_checks_of_a_bundle_just_written_take_its_listing_and_say_the_same(tmp_path):
    result = _written_bundle(tmp_path)
    listed = load_written(result.path, result.listing)
    assert listed is not None and _side_facts(listed) == _side_facts(load_npu(result.path, golden=False))
    handed = {name for names in result.listing.parsed.values() for name in names.values()}
    assert handed and all(any(ref.name is name for name in handed) for ref in listed.dumps)  # not parsed again
    found = golden_free_checks(result.path, result.listing)
    assert found == golden_free_checks(result.path)
    assert [o["npu_op"] for o in found["checks"]["nan_inf"]["origins"]] == ["b", "e", "g"]


def _add_file(step):
    open(os.path.join(step, "Relu.late.9.0.1700000000000999"), "wb").close()


def _add_folder(step):
    os.mkdir(os.path.join(os.path.dirname(step), "late"))


def _add_symlink(step):
    os.symlink(os.path.join(step, sorted(os.listdir(step))[0]), os.path.join(step, "Relu.link.9.0.1700000000000999"))


def _remove_file(step):
    os.unlink(os.path.join(step, sorted(os.listdir(step))[0]))


@pytest.mark.parametrize("change", [_add_file, _add_folder, _add_symlink, _remove_file])
def test_a_dump_tree_changed_after_writing_is_read_again_not_taken_from_the_listing(tmp_path, change):
    result = _written_bundle(tmp_path)
    change(load_written(result.path, result.listing).step_dir)
    assert load_written(result.path, result.listing) is None
    assert golden_free_checks(result.path, result.listing) == golden_free_checks(result.path)


def test_a_dump_file_rewritten_after_writing_is_read_again_through_the_listing(tmp_path):
    result = _written_bundle(tmp_path)
    step = load_written(result.path, result.listing).step_dir
    victim = os.path.join(step, [n for n in os.listdir(step) if n.startswith("Mul.a.")][0])
    time.sleep(0.01)  # a new modification time, whatever the file system's clock tick
    with open(victim, "r+b") as handle:  # the same size; its last output value becomes NaN
        handle.seek(-4, os.SEEK_END)
        handle.write(np.float32("nan").tobytes())
    assert load_written(result.path, result.listing) is not None  # the same names and sizes: the listing holds
    found = golden_free_checks(result.path, result.listing)
    assert found == golden_free_checks(result.path)
    assert [o["npu_op"] for o in found["checks"]["nan_inf"]["origins"]] == ["a", "e", "g"]


def test_a_dump_file_resized_after_writing_meets_the_bundle_reading_rules(tmp_path):
    result = _written_bundle(tmp_path)
    step = load_written(result.path, result.listing).step_dir
    with open(os.path.join(step, [n for n in os.listdir(step) if n.startswith("Mul.a.")][0]), "r+b") as handle:
        handle.truncate(20)
    assert load_written(result.path, result.listing) is None
    with pytest.raises(UnsafePathError, match="size 20 but bundle.json says"):
        golden_free_checks(result.path, result.listing)
