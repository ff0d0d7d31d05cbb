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


class _NoProcess(object):
    """A pool worker without a process: the batches the pool sends it are kept."""

    def __init__(self, context, golden):
        import collections

        self.jobs = collections.deque()
        self.sent = []
        self.conn = self

    def send(self, batch):
        self.sent.append([job.job for job in batch])


@pytest.mark.parametrize("pattern", ["alternating", "worker 0 three times as fast"])
def test_each_pool_worker_takes_a_contiguous_run_so_inputs_are_reused(monkeypatch, pattern):
    """The k-th worker starts at the k-th run of the files and goes on from where its last batch ended;
    only the start of a run (its own, or the back half of a run taken over at the end) follows a file
    another worker compared. One shared queue of batches split producer and consumer at every batch."""
    from npu_dump_hook.compare import _pool

    monkeypatch.setattr(_pool, "_Worker", _NoProcess)
    jobs = [_worker.FileJob(i, "file_{}".format(i), (), ()) for i in range(200)]
    pool = _pool._Pool(jobs, {}, 2)
    done = 0
    turn = 0
    while pool._left() or any(w.jobs for w in pool.workers):
        pool.feed()
        busy = [w for w in pool.workers if w.jobs]
        slot = turn % 2 if pattern == "alternating" else int(turn % 4 == 3)
        worker = busy[0] if len(busy) == 1 else pool.workers[slot]
        done += len(worker.jobs.popleft())
        turn += 1
    handed = [batch for w in pool.workers for batch in w.sent]
    assert sorted(j for batch in handed for j in batch) == list(range(200))  # each file once
    starts = 0
    for w in pool.workers:
        previous = None
        for batch in w.sent:
            assert batch == list(range(batch[0], batch[0] + len(batch)))  # a batch is contiguous
            starts += previous is None or batch[0] != previous + 1
            previous = batch[-1]
    assert pool.workers[1].sent[0][0] == 100  # the second worker starts at the second half
    assert starts <= 2 + 6, [w.sent for w in pool.workers]  # 2 runs, then a few halves taken over
