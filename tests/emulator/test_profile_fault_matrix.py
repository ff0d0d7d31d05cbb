"""The emulated NPU writes what GE writes in statistics mode and in debug (overflow) mode, for every
profile and every fault kind (issue 23): one stats CSV per op with a task in the Build graph, its
rows the op's inputs then outputs as reference §3.2 spells them; Opdebug records for ``overflow``
(and ``nan``) faults, each beside the dump file of its op. One training step of the MLP each (real
TensorFlow)."""
import os

import numpy as np
import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.compare._graph import load_graph
from npu_dump_hook.formats import names, stats_csv
from npu_dump_hook.formats.opdebug import read_opdebug_file
from npu_dump_hook.sample_models import mlp_session

FAULTED = "hidden2/MatMul"
FAULTS = {"none": None, "scale": "scale=1.05", "noise": "add_noise=1e-2", "nan": "nan", "overflow": "overflow"}
#: bytes per element of the data types a stats row names
_WIDTH = {"DT_FLOAT": 4, "DT_FLOAT16": 2, "DT_INT32": 4, "DT_INT64": 8, "DT_BOOL": 1, "DT_DOUBLE": 8,
          "DT_UINT8": 1, "DT_INT8": 1}


def _run(options, profile, fault):
    faults = {FAULTED: FAULTS[fault]} if FAULTS[fault] else None
    hook = NpuDumpHook(options, output_dir="out", backend="emulated", emulate_profile=profile, faults=faults,
                       reference=False, collect=False)
    mlp_session.train(hook.options, hooks=[hook])
    report = hook.summary["emulator"]
    steps = [s for s in report["steps"] if s["dir"]]
    return report, (steps[0]["dir"] if steps else None)


def _by_op(folder):
    found = {}
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(".") or entry == "mapping.csv":
            continue
        parsed = names.parse_dump_name(entry)
        found.setdefault(parsed.kind, {}).setdefault(parsed.op_name, []).append((parsed, os.path.join(folder, entry)))
    return found


def _check_row(row, fault_here):
    assert row.data_type in _WIDTH, row
    assert row.count == int(np.prod(row.shape)) and row.data_size == row.count * _WIDTH[row.data_type], row
    assert row.format in ("ND", "NHWC", "NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ"), row
    if row.count and row.data_type != "DT_BOOL":
        assert None not in (row.max_value, row.min_value, row.avg_value, row.nan_count), row
        if not (row.nan_count or row.negative_inf_count or row.positive_inf_count):
            slack = 1e-5 * max(abs(row.max_value), abs(row.min_value), 1e-30)  # 6 significant digits (%g)
            assert row.min_value - slack <= row.avg_value <= row.max_value + slack, row
    if fault_here == "nan":
        assert row.nan_count >= 1, row
    if fault_here == "overflow":
        assert row.positive_inf_count + row.negative_inf_count >= 1, row


@pytest.mark.parametrize("profile", ["exact", "ascend"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_stats_mode_one_csv_per_op_a_row_per_tensor(in_tmp_cwd, profile, fault):
    options = DumpOptions(enable_dump=True, dump_path="dump", dump_mode="all", dump_data="stats")
    report, folder = _run(options, profile, fault)
    files = _by_op(folder)
    assert set(files) == {names.KIND_STATS}, set(files)
    stats = files[names.KIND_STATS]
    graph = load_graph(report["graph_file"])
    skipped = {entry["op"] for entry in report["skipped"]}
    tasks = [op for op in graph.ops if not op.no_task and op.name not in skipped]
    assert len(tasks) > 20 and sorted(names.sanitize(op.name) for op in tasks) == sorted(stats)
    assert all(len(found) == 1 for found in stats.values())
    header = ",".join(stats_csv.STATS_HEADER)
    for op in tasks:
        (_, path), = stats[names.sanitize(op.name)]
        with open(path) as handle:
            assert handle.readline().rstrip("\n") == header
        rows = list(stats_csv.read_stats_csv(path).rows)
        inputs = [r for r in rows if r.direction == "Input"]
        outputs = [r for r in rows if r.direction == "Output"]
        assert rows == inputs + outputs, path  # inputs first, then outputs
        assert [r.index for r in inputs] == list(range(len(inputs))) and [r.index for r in outputs] == \
            list(range(len(outputs)))
        assert len(outputs) == len(op.outputs) and len(inputs) == len([i for i in op.inputs if not i.endswith(":-1")])
        here = fault if FAULTED in ((op.original_op_names or ()) + (op.name,)) else None
        for row in outputs:
            _check_row(row, here if here in ("nan", "overflow") and row.data_type != "DT_BOOL" else None)
        for row in inputs:
            _check_row(row, None)


@pytest.mark.parametrize("profile", ["exact", "ascend"])
@pytest.mark.parametrize("fault", ["overflow", "nan"])
def test_debug_mode_writes_an_opdebug_record_beside_each_overflowing_op(in_tmp_cwd, profile, fault):
    report, folder = _run(DumpOptions(enable_dump_debug=True, dump_path="dump"), profile, fault)
    files = _by_op(folder)
    assert set(files) == {names.KIND_DUMP, names.KIND_OPDEBUG}, set(files)
    dumps, debug = files[names.KIND_DUMP], files[names.KIND_OPDEBUG]["Node_OpDebug"]
    assert len(debug) == len(dumps) >= 2  # the faulted op and the ops its NaN/Inf reaches
    assert names.sanitize(FAULTED) in dumps, sorted(dumps)
    task_ids = {parsed.task_id for found in dumps.values() for parsed, _ in found}
    stamps = sorted(parsed.timestamp for found in dumps.values() for parsed, _ in found)
    first_dump = min(parsed.timestamp for parsed, _ in dumps[names.sanitize(FAULTED)])
    assert first_dump == stamps[0]  # the faulted op overflows first
    for parsed, path in debug:
        _, record = read_opdebug_file(path)
        assert record.layout == "new" and record.valid == 1 and record.entries
        entry = record.entries[0]
        assert entry.get("model_id") == 1 and entry.get("task_id") in task_ids and entry.status
        assert parsed.timestamp > stamps[0]
