"""Issue #20 items 8 and 10 (bounds): compare survives a killed worker, never opens a FIFO
(named like a dump file, linked, or as mapping.csv), and its golden header cache is bounded
by bytes. Every hostile input is built here; each compare runs under a timeout."""
import os

import numpy as np
import pytest

from npu_dump_hook.compare import compare
from npu_dump_hook.compare import _golden
from npu_dump_hook.compare._pool import TEST_KILL_ENV
from npu_dump_hook.compare._worker import HEADER_CACHE_BYTES

from helpers.timing import bounded
from helpers.compare_synth import T0, Synth, chain

TIMEOUT_S = 120


def _bounded(call):
    return bounded(call, TIMEOUT_S, "compare hung")


def _chain_run(root, count=8):
    synth = Synth(root)
    start = np.linspace(1, 2, 24, dtype=np.float32)
    synth.op("x", "Data", start, no_task=True)
    chain(synth, count, start)
    return synth.write()


def test_a_worker_killed_on_every_try_is_a_row_naming_the_file(tmp_path, monkeypatch):
    graph, step, golden = _chain_run(tmp_path)
    monkeypatch.setenv(TEST_KILL_ENV, ".op_add_3.")
    result = _bounded(lambda: compare(step, golden, graph=graph, workers=2))
    rows = {r["npu_op"]: r for r in result.doc["rows"]}
    reason = rows["op/add_3"]["fail_reason"]
    assert reason.startswith("worker died: the worker comparing ") and ".op_add_3." in reason
    assert "SIGKILL" in reason and "2 times" in reason
    assert all(r["status"] == "ok" for name, r in rows.items() if name != "op/add_3")
    assert result.doc["summary"]["verdict"] == "incomplete" and result.exit_code == 1


def test_a_worker_killed_once_is_redone(tmp_path, monkeypatch):
    graph, step, golden = _chain_run(tmp_path)
    flag = str(tmp_path / "killed-once")
    monkeypatch.setenv(TEST_KILL_ENV, ".op_add_5.@" + flag)
    seen = []
    result = _bounded(lambda: compare(step, golden, graph=graph, workers=2,
                                      progress=lambda done, total: seen.append(done)))
    assert os.path.exists(flag)  # the worker did die once
    assert {r["status"] for r in result.doc["rows"]} == {"ok"} and result.exit_code == 0
    assert seen == list(range(1, 9))


@pytest.mark.parametrize("once", [False, True])
def test_a_worker_killed_inside_a_batch_of_files(tmp_path, monkeypatch, once):
    """40 files: the workers get several files per message; the batch whose worker dies is redone
    one file at a time, so a file that kills every worker is still the only row with a reason."""
    graph, step, golden = _chain_run(tmp_path, count=40)
    flag = str(tmp_path / "killed-once")
    monkeypatch.setenv(TEST_KILL_ENV, ".op_add_21." + ("@" + flag if once else ""))
    seen = []
    result = _bounded(lambda: compare(step, golden, graph=graph, workers=2,
                                      progress=lambda done, total: seen.append(done)))
    rows = {r["npu_op"]: r for r in result.doc["rows"]}
    assert len(rows) == 40 and seen == list(range(1, 41))
    assert all(r["status"] == "ok" for name, r in rows.items() if name != "op/add_21")
    if once:
        assert os.path.exists(flag) and rows["op/add_21"]["status"] == "ok" and result.exit_code == 0
    else:
        reason = rows["op/add_21"]["fail_reason"]
        assert reason.startswith("worker died: the worker comparing ") and ".op_add_21." in reason
        assert "2 times" in reason and result.doc["summary"]["verdict"] == "incomplete"


def _fifo_instead_of(step, op, link=False):
    path = os.path.join(step, [n for n in os.listdir(step) if ".{}.".format(op) in n][0])
    os.remove(path)
    if link:
        target = os.path.join(os.path.dirname(step), "elsewhere.fifo")
        os.mkfifo(target)
        os.symlink(target, path)
    else:
        os.mkfifo(path)


@pytest.mark.parametrize("link", [False, True], ids=["fifo", "symlink-to-fifo"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_fifo_named_like_a_dump_file_is_skipped_and_reported(tmp_path, link, workers):
    graph, step, golden = _chain_run(tmp_path)
    _fifo_instead_of(step, "op_add_2", link)
    result = _bounded(lambda: compare(step, golden, graph=graph, workers=workers))
    # skipped by the step folder scan, never opened, reported; the comparison fails closed
    assert any("op_add_2" in w and w.startswith(("skipped special file", "skipped symlink"))
               for w in result.doc["warnings"]), result.doc["warnings"]
    assert result.doc["summary"]["verdict"] == "incomplete"


def test_a_fifo_golden_file_is_skipped_and_reported(tmp_path):
    graph, step, golden = _chain_run(tmp_path)
    path = os.path.join(golden, [n for n in os.listdir(golden) if n.startswith("op_add_1.")][0])
    os.remove(path)
    os.mkfifo(path)
    result = _bounded(lambda: compare(step, golden, graph=graph, workers=1))
    reasons = {r["npu_op"]: r["fail_reason"] for r in result.doc["rows"]}
    # the golden index skips what is no regular file: the tensor has no golden file
    assert reasons["op/add_1"].startswith(("no golden file", "not a regular file"))
    assert result.exit_code == 1


def test_a_fifo_mapping_csv_never_blocks(tmp_path):
    graph, step, golden = _chain_run(tmp_path)
    os.mkfifo(os.path.join(step, "mapping.csv"))
    result = _bounded(lambda: compare(step, golden, graph=graph, workers=1))
    # skipped and reported by the step folder scan, never opened
    assert any("mapping.csv" in w and "skipped special file" in w for w in result.doc["warnings"]), \
        result.doc["warnings"]


def _padded_npy(path, array, padding):
    """np.save's header (version 1) padded with ``padding`` spaces: valid, and large."""
    text = "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}".format(
        array.dtype.str, repr(tuple(array.shape)))
    text += " " * padding + "\n"
    with open(path, "wb") as handle:
        handle.write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1"))
        handle.write(array.tobytes())


def test_the_golden_header_cache_is_bounded_by_bytes(tmp_path):
    synth = Synth(tmp_path)
    values = {}
    for i in range(300):
        values[i] = np.full(4, i, np.float32)
        synth.op("op{}".format(i), "Relu", values[i], timestamp=T0 + i)
    graph, step, golden = synth.write()
    for i in range(300):  # 300 distinct padded headers, 60 KB each: 18 MB of header text
        path = os.path.join(golden, [n for n in os.listdir(golden) if n.startswith("op{}.".format(i))][0])
        _padded_npy(path, values[i], 60000 + i)
    _golden._LAYOUTS.clear()
    result = compare(step, golden, graph=graph, workers=1)
    assert {r["status"] for r in result.doc["rows"]} == {"ok"}
    assert sum(len(key) for key in _golden._LAYOUTS) <= HEADER_CACHE_BYTES
