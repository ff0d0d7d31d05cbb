"""With dump_mode "all" an input is its producer's output dumped again: a worker reuses the metrics of
the output it just compared when the input is that output bit for bit against the same golden file
(compare/_worker.py), and computes them when anything differs. The rows are the same either way."""
import numpy as np
import pytest

from npu_dump_hook.compare import compare, metrics
from npu_dump_hook.compare import _worker

from helpers.compare_synth import Synth, chain


def _chain(tmp_path, change_input_of=None, nan=False):
    synth = Synth(tmp_path, dump_mode="all")
    start = np.linspace(1, 2, 4096, dtype=np.float32)
    if nan:
        start[7] = np.nan
    synth.op("x", "Data", start, no_task=True)
    names = chain(synth, 6, start, fault_at=3)
    if change_input_of is not None:  # what the consumer's input dump holds: one value off
        changed = np.array(synth.values[(change_input_of, 0)], copy=True)
        changed[11] += np.float32(0.25)
        synth.values[(change_input_of, 0)] = changed
    return synth.write(), names


def _rows(result):
    return [dict(r, order=None) for r in result.doc["rows"]]


def _counted(monkeypatch):
    calls = []
    real = metrics.compute_metrics

    def counting(*args, **kwargs):
        calls.append(args[2] if len(args) > 2 else "")
        return real(*args, **kwargs)

    monkeypatch.setattr(metrics, "compute_metrics", counting)
    return calls


@pytest.mark.parametrize("nan", [False, True])
def test_an_input_equal_to_the_last_output_takes_its_metrics(tmp_path, monkeypatch, nan):
    (graph, step, golden), names = _chain(tmp_path, nan=nan)
    calls = _counted(monkeypatch)
    reused = compare(step, golden, graph=graph, workers=1)
    outputs_and_inputs = len(reused.doc["rows"])
    assert outputs_and_inputs == 12  # 6 outputs, 6 inputs (op/add_0's is x, which is no task: no output row)
    assert len(calls) == 7  # 5 inputs were their producers' outputs again
    monkeypatch.setattr(_worker, "REUSE_MAX_BYTES", 0)
    computed = compare(step, golden, graph=graph, workers=1)
    assert len(calls) == 7 + 12
    assert _rows(reused) == _rows(computed)
    assert reused.csv() == computed.csv()


def test_an_input_that_differs_from_the_output_is_computed(tmp_path, monkeypatch):
    (graph, step, golden), names = _chain(tmp_path, change_input_of="op/add_1")
    calls = _counted(monkeypatch)
    result = compare(step, golden, graph=graph, workers=1)
    assert len(calls) == 8
    rows = {(r["npu_op"], r["direction"]): r for r in result.doc["rows"]}
    output, seen_again = rows[("op/add_1", "output")], rows[("op/add_2", "input")]
    assert output["metrics"]["MaxAbsoluteError"] == 0
    assert seen_again["metrics"]["MaxAbsoluteError"] == pytest.approx(0.25)
    monkeypatch.setattr(_worker, "REUSE_MAX_BYTES", 0)
    assert _rows(compare(step, golden, graph=graph, workers=1)) == _rows(result)


def test_reuse_with_two_workers_gives_the_same_rows(tmp_path, monkeypatch):
    (graph, step, golden), names = _chain(tmp_path)
    pooled = compare(step, golden, graph=graph, workers=2)
    monkeypatch.setattr(_worker, "REUSE_MAX_BYTES", 0)
    assert _rows(pooled) == _rows(compare(step, golden, graph=graph, workers=1))


def test_a_reused_input_does_not_read_its_golden_file_again(tmp_path, monkeypatch):
    (graph, step, golden), names = _chain(tmp_path)
    reads = []
    real = _worker.load_golden

    def counting(path, *args, **kwargs):
        reads.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(_worker, "load_golden", counting)
    reused = compare(step, golden, graph=graph, workers=1)
    assert len(reads) == 7  # 6 outputs and op/add_0's input; the 5 inputs seen again read nothing
    monkeypatch.setattr(_worker, "REUSE_MAX_BYTES", 0)
    computed = compare(step, golden, graph=graph, workers=1)
    assert len(reads) == 7 + 12
    assert _rows(reused) == _rows(computed)


def test_each_pool_worker_compares_a_contiguous_run_so_inputs_are_reused(tmp_path, monkeypatch):
    synth = Synth(tmp_path, dump_mode="all")
    start = np.linspace(1, 2, 4096, dtype=np.float32)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, 64, start)
    graph, step, golden = synth.write()
    log = tmp_path / "computed.txt"
    real = metrics.compute_metrics

    def counting(*args, **kwargs):  # the pool's workers are forked: they append to a file
        with open(str(log), "a") as handle:
            handle.write("{}\n".format(args[2] if len(args) > 2 else ""))
        return real(*args, **kwargs)

    monkeypatch.setattr(metrics, "compute_metrics", counting)
    pooled = compare(step, golden, graph=graph, workers=2)
    computed = log.read_text().splitlines()
    # 64 outputs and op/add_0's input; the second worker's run starts at an input whose producer the
    # first worker compared, and each half of a run handed over at the end starts another such input
    # (a few, with the timing); one shared queue of batches had 15 such inputs here (80 computed)
    assert 65 <= len(computed) <= 72, len(computed)
    monkeypatch.setattr(_worker, "REUSE_MAX_BYTES", 0)
    assert _rows(pooled) == _rows(compare(step, golden, graph=graph, workers=1))
