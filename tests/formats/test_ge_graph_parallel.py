"""ge_graph: a scan shared with forked workers (``workers=``) and the op-count scan give the
single-process result, or the same error at the same offset, whatever the workers do."""
import json
import os
import signal
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_dump_hook.cli import main
from npu_dump_hook.errors import GraphFormatError
from npu_dump_hook import _forked
from npu_dump_hook.formats import ge_graph

from .test_ge_graph import _MUTATIONS, _many_ops_bytes, golden_bytes, mutated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


@pytest.fixture(autouse=True)
def share_small_files(monkeypatch):
    """Workers for files and ops of any size (the real thresholds: 4 MB, 1 KB per op), also
    in a test process that other tests left with TensorFlow loaded or threads running (the
    children here run only the scanner; fork_is_safe itself is tested in test_forked)."""
    monkeypatch.setattr(ge_graph, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ge_graph, "_PARALLEL_MIN_OP_BYTES", 0)
    monkeypatch.setattr(ge_graph, "fork_is_safe", lambda: True)


@pytest.fixture
def handed_back(monkeypatch):
    """The (ops, stop) results this process took from workers."""
    taken = []
    original = ge_graph._FastOps._handed_back

    def record(self, pos):
        found = original(self, pos)
        if found is not None:
            taken.append(found)
        return found

    monkeypatch.setattr(ge_graph._FastOps, "_handed_back", record)
    return taken


def _scan(data, workers=1, count_only=False, fast=True):
    return list(ge_graph._scan_graphs(data, "mem", fast, workers=workers, count_only=count_only))


def _counts(graphs):
    return [(graph.name, len(graph.ops)) for graph in graphs]


def _outcome(data, **kwargs):
    """The scan's graphs (counts only for count_only), or its error's (offset, rule)."""
    try:
        graphs = _scan(data, **kwargs)
    except GraphFormatError as error:
        return ("error", error.offset, error.rule)
    return _counts(graphs) if kwargs.get("count_only") else graphs


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_shared_scan_gives_the_single_process_result(workers, handed_back):
    data = _many_ops_bytes(60)
    expected = _scan(data, fast=False)
    assert _scan(data, workers) == expected
    assert handed_back, "no worker's result was used"
    assert all(isinstance(op, ge_graph.OpSummary) and isinstance(op.outputs, tuple) and
               all(isinstance(o, ge_graph.OutputOrigin) for o in op.outputs)
               for ops, _ in handed_back for op in ops)
    del handed_back[:]
    assert _counts(_scan(data, workers, count_only=True)) == _counts(expected)
    assert handed_back


def test_iter_graphs_and_counts_with_workers_on_a_file(tmp_path):
    path = tmp_path / "ge_proto_00000001_graph_1_Build.txt"
    path.write_bytes(_many_ops_bytes(30))
    expected = ge_graph.scan_graph(str(path))
    assert list(ge_graph.iter_graphs(str(path), workers=2)) == expected
    assert list(ge_graph.iter_graph_counts(str(path), workers=2)) == [
        ge_graph.GraphCount(graph.name, len(graph.ops)) for graph in expected]


@settings(max_examples=25, derandomize=True, deadline=None)
@given(mutations=_MUTATIONS, workers=st.integers(2, 4))
def test_layout_changes_give_the_single_process_outcome(mutations, workers):
    """Whatever is changed where (before, at or after a share's first op), workers and the
    count scan give the general path's result or its error at the same offset."""
    data = mutated(_many_ops_bytes(8), mutations)
    expected = _outcome(data, fast=False)
    assert _outcome(data, workers=workers) == expected
    expected_counts = expected if expected[0] == "error" else _counts(expected)
    assert _outcome(data, workers=workers, count_only=True) == expected_counts


@pytest.mark.parametrize("failure", ["raises", "killed", "exits", "declines"])
def test_a_failing_worker_changes_nothing(monkeypatch, failure, handed_back):
    def worker(*args):
        if failure == "raises":
            raise MemoryError("worker out of memory")
        if failure == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        if failure == "exits":
            os._exit(3)
        return None  # as for a share whose first op is not canonical

    monkeypatch.setattr(ge_graph, "_read_share", worker)
    data = _many_ops_bytes(40)
    assert _scan(data, 3) == _scan(data, fast=False)
    assert _counts(_scan(data, 3, count_only=True)) == _counts(_scan(data))
    assert handed_back == []  # every share was read by this process


def test_no_fork_while_another_thread_runs(monkeypatch):
    def no_fork(*args):
        raise AssertionError("forked with another thread running")

    monkeypatch.setattr(ge_graph, "ForkedCall", no_fork)
    monkeypatch.setattr(ge_graph, "fork_is_safe", _forked.fork_is_safe)  # the real check
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not _forked.fork_is_safe()
        data = _many_ops_bytes(20)
        assert _scan(data, 2) == _scan(data, fast=False)
    finally:
        stop.set()
        thread.join()


def test_workers_are_reaped_when_the_caller_stops_early(monkeypatch, tmp_path):
    calls = []
    original = ge_graph.ForkedCall

    def recording(*args):
        call = original(*args)
        calls.append(call)
        return call

    monkeypatch.setattr(ge_graph, "ForkedCall", recording)
    path = tmp_path / "ge_proto_00000001_graph_1_Build.txt"
    path.write_bytes(_many_ops_bytes(40))
    graphs = ge_graph.iter_graphs(str(path), workers=3)
    assert next(graphs).name == "g_many"
    graphs.close()
    assert len(calls) == 2
    for call in calls:  # reaped: no pipe left open, no child left to wait for
        assert call._fd == -1
        with pytest.raises(ChildProcessError):
            os.waitpid(call._pid, os.WNOHANG)


def test_error_in_a_workers_share_is_raised_at_its_offset():
    data = _many_ops_bytes(40)
    cut = len(data) * 3 // 4
    bad = data[:cut] + data[cut:].replace(b"    type: ", b"    type: {", 1)
    expected = _outcome(bad, fast=False)
    assert expected[0] == "error" and expected[1] > cut
    assert _outcome(bad, workers=2) == _outcome(bad, workers=4) == expected
    assert _outcome(bad, workers=2, count_only=True) == expected


def test_cli_parse_counts_ops_of_a_shared_scan(tmp_path, capsys):
    path = tmp_path / "ge_proto_00000001_graph_1_Build.txt"
    path.write_bytes(_many_ops_bytes(30) + golden_bytes()[golden_bytes().index(b"graph {"):])
    expected = [{"name": graph.name, "op_count": len(graph.ops)}
                for graph in ge_graph.scan_graph(str(path))]
    assert main(["parse", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"][0]["graphs"] == expected


def test_scan_without_a_fork_left_reads_everything_itself(monkeypatch, handed_back):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    data = _many_ops_bytes(30)
    assert _scan(data, 3) == _scan(data, fast=False)
    assert handed_back == []


def test_summaries_of_small_ops_are_not_shared_but_their_count_is(monkeypatch, handed_back):
    # handing back a summary costs about what scanning a 1 KB op does
    monkeypatch.setattr(ge_graph, "_PARALLEL_MIN_OP_BYTES", 1024)
    small = ge_graph.format_model(ge_graph.make_model([("g", [
        ge_graph.make_op("op_{}".format(i), "Conv2D", i) for i in range(400)])])).encode()
    assert len(small) < 400 * 1024
    assert _scan(small, 2) == _scan(small, fast=False)
    assert handed_back == []
    assert _counts(_scan(small, 2, count_only=True)) == [("g", 400)]
    assert handed_back


def test_workers_are_capped_by_size_and_count(monkeypatch):
    calls = []
    original = ge_graph.ForkedCall

    def recording(*args):
        calls.append(args[3])  # the share's first op line
        return original(*args)

    monkeypatch.setattr(ge_graph, "ForkedCall", recording)
    data = _many_ops_bytes(80)
    monkeypatch.setattr(ge_graph, "_PARALLEL_MIN_BYTES", len(data) // 3)
    assert _scan(data, 64) == _scan(data, fast=False)
    assert len(calls) == 3  # 1 + (three minimum sizes) processes: three workers
    del calls[:]
    monkeypatch.setattr(ge_graph, "_PARALLEL_MIN_BYTES", 1)
    assert _scan(data, 64) == _scan(data, fast=False)
    assert 0 < len(calls) <= ge_graph._MAX_WORKERS - 1
