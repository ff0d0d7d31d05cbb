"""The emulated HCCL (npu_dump_hook.emulator.hccl): the file exchange between ranks (threads here;
processes in tests/compare/test_ranks.py), its clean-up, timeout and stale-folder refusal, GE's names
for the collectives, and the one-rank graph ops on real TensorFlow."""
import os
import threading

import numpy as np
import pytest

from npu_dump_hook.emulator import hccl
from npu_dump_hook.errors import BackendError, OptionError


def _all_ranks(folder, size, arrays, key="g/HcomAllReduce", timeout=30.0):
    results, errors = [None] * size, []
    peers = [hccl.Rendezvous(str(folder), rank, size, timeout) for rank in range(size)]

    def run(rank):
        try:
            results[rank] = peers[rank].exchange(key, arrays[rank])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results, peers


def test_every_rank_gets_every_array_in_rank_order_and_the_round_is_removed(tmp_path):
    arrays = [np.full((2, 3), r, np.float32) for r in range(3)]
    results, peers = _all_ranks(tmp_path, 3, arrays)
    for got in results:
        assert [a.tolist() for a in got] == [a.tolist() for a in arrays]
    assert os.listdir(str(tmp_path / "g__HcomAllReduce")) == []  # every rank read it: removed
    stamps = [p.take_completed() for p in peers]
    assert len(stamps[0]) == 1 and stamps.count(stamps[0]) == 3  # one completion time, the same on every rank
    assert peers[0].take_completed() == []


def test_a_missing_rank_times_out_naming_it(tmp_path):
    peer = hccl.Rendezvous(str(tmp_path), 0, 3, timeout=0.2)
    with pytest.raises(BackendError, match=r"rank\(s\) \[1, 2\] did not arrive"):
        peer.exchange("x/HcomAllGather", np.zeros(2, np.float32))


def test_an_earlier_jobs_round_is_refused(tmp_path):
    stale = tmp_path / "HcomBroadcast" / "0"
    stale.mkdir(parents=True)
    np.save(str(stale / "rank_1.npy"), np.zeros(1))
    with pytest.raises(BackendError, match="earlier job"):
        hccl.Rendezvous(str(tmp_path), 1, 2, timeout=0.2).exchange("HcomBroadcast", np.ones(1))


def test_reductions_and_names():
    arrays = [np.array([1.0, -2.0], np.float32), np.array([3.0, 5.0], np.float32)]
    assert hccl._reduce(arrays, "sum").tolist() == [4.0, 3.0]
    assert hccl._reduce(arrays, "max").tolist() == [3.0, 5.0] and hccl._reduce(arrays, "sum").dtype == np.float32
    assert hccl.ge_collective_type("opt_Allreduce/HcomAllReduce_3", "PyFunc") == "HcomAllReduce"
    assert hccl.ge_collective_type("HcomAllGather", "PyFunc") == "HcomAllGather"
    assert hccl.ge_collective_type("opt_Allreduce/HcomAllReduce", "Identity") is None  # not the emulated op
    assert hccl.ge_collective_type("my/HcomAllReduceX", "PyFunc") is None
    with pytest.raises(OptionError, match="RANK_SIZE"):
        hccl.rank_size({"RANK_SIZE": "zero"})
    with pytest.raises(OptionError, match="RANK_ID"):
        hccl.Rendezvous("unused", 2, 2)


def test_one_rank_graph_ops_are_identities_named_as_npu_bridge_names_them(monkeypatch):
    import tensorflow as tf

    monkeypatch.delenv("RANK_SIZE", raising=False)
    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        value = tf.constant([[1.0, 2.0]])
        with tf.name_scope("opt_Allreduce"):
            first, second = hccl.allreduce(value, "sum"), hccl.allreduce(value * 2, "sum")
        gathered = hccl.allgather(value, 1)
        (sent,) = hccl.broadcast([value], 0)
        with v1.Session() as session:
            got = session.run([first, second, gathered, sent])
    assert [g.tolist() for g in got] == [[[1.0, 2.0]], [[2.0, 4.0]], [[1.0, 2.0]], [[1.0, 2.0]]]
    assert [first.op.name, second.op.name, gathered.op.name] == [
        "opt_Allreduce/HcomAllReduce", "opt_Allreduce/HcomAllReduce_1", "HcomAllGather"]
    assert [c.name for c in second.op.control_inputs] == ["opt_Allreduce/HcomAllReduce"]  # HCCL's order
    assert not gathered.op.control_inputs and first.shape.as_list() == [1, 2]
    assert graph.get_operation_by_name("HcomBroadcast").type == "PyFunc"
    with pytest.raises(OptionError, match="reduction"):
        hccl.allreduce(value, "mean")


def test_the_process_rendezvous_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK_SIZE", raising=False)
    assert hccl.rendezvous() is None and hccl.agreed_step_time(123) == 123
    monkeypatch.setenv("RANK_SIZE", "2")
    monkeypatch.setenv("RANK_ID", "1")
    monkeypatch.setenv("NPU_DUMP_HOOK_HCCL_DIR", str(tmp_path / "a"))
    first = hccl.rendezvous()
    assert first is hccl.rendezvous() and (first.rank, first.size, first.folder) == (1, 2, str(tmp_path / "a"))
    monkeypatch.setenv("NPU_DUMP_HOOK_HCCL_DIR", str(tmp_path / "b"))
    assert hccl.rendezvous().folder == str(tmp_path / "b")  # another job's folder: another rendezvous
    monkeypatch.delenv("RANK_ID")
    with pytest.raises(OptionError, match="RANK_ID"):
        hccl.rendezvous()
