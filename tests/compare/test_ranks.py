"""Every rank (docs/compare.md, "Every rank"): a 4-rank data-parallel job, ranks as processes on this
machine (RANK_ID/RANK_SIZE, the emulated HCCL through the npu_bridge double), a fault on rank 2.
compare over the rank index names rank 2's op as the earliest divergence and the collective check
passes; a tampered collective output on one rank fails the check naming that rank; the per-node
documents merge to the same verdict."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from npu_dump_hook.bundle import read_bundle, read_index
from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare_ranks, is_rank_index, load_rank_doc, merge_rank_docs
from npu_dump_hook.errors import CompareError

from helpers.runs import clean_env

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(TESTS, "helpers", "rank_script.py")
DOUBLE = os.path.join(TESTS, "npu_bridge_double")
REPO = os.path.dirname(TESTS)
RANKS = 4
FAULT = {"fc1/MatMul": "scale=1.05"}


def _job(root, name, args_of_rank):
    """Run the RANKS processes of one job at once (one rendezvous folder); every one must exit 0."""
    env = clean_env(PYTHONPATH=os.pathsep.join([DOUBLE, REPO]), RANK_SIZE=str(RANKS), JOB_ID=name,
                    NPU_DUMP_HOOK_HCCL_DIR=str(root / ("hccl_" + name)), NPU_DUMP_HOOK_HCCL_TIMEOUT="240")
    procs = []
    for rank in range(RANKS):
        env_rank = dict(env, RANK_ID=str(rank), DEVICE_ID=str(rank))
        procs.append(subprocess.Popen([sys.executable, SCRIPT] + args_of_rank(rank), cwd=str(root), env=env_rank,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outcomes = [(p.wait(timeout=600), p.stdout.read().decode(), p.stderr.read().decode()) for p in procs]
    for rank, (code, out, err) in enumerate(outcomes):
        assert code == 0, "rank {} of {}: exit {}\n{}\n{}".format(rank, name, code, out[-2000:], err[-4000:])
    return outcomes


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    _job(root, "npu", lambda r: ["npu", str(root / "npu")] + ([json.dumps(FAULT)] if r == 2 else []))
    npu = str(root / "npu" / "bundles")
    _job(root, "golden", lambda r: ["golden", str(root / "golden"), npu])
    return {"root": root, "npu": npu, "golden": str(root / "golden" / "bundles")}


def test_the_emulated_job_dumps_hccl_ops_as_ge_names_them(job):
    index = read_index(job["npu"])
    assert sorted(index["ranks"], key=int) == [str(r) for r in range(RANKS)]
    assert [index["ranks"][str(r)]["device_id"] for r in range(RANKS)] == [str(r) for r in range(RANKS)]
    doc = read_bundle(os.path.join(job["npu"], index["ranks"]["1"]["path"]))
    dumped = {f["op_name"]: f["op_type"] for f in doc["files"] if f["kind"] == "dump"}
    reduce_ops = [n for n, t in dumped.items() if t == "HcomAllReduce"]
    assert len(reduce_ops) == 4 and all(n.startswith("DistributedMomentumOptimizer_Allreduce_HcomAllReduce")
                                        for n in reduce_ops), dumped  # one per gradient, the optimizer's scope
    assert dumped.get("HcomAllGather") == "HcomAllGather"
    with open(os.path.join(job["npu"], index["ranks"]["1"]["path"], "data", doc["graph"]["file"])) as handle:
        graph = handle.read()
    assert 'type: "HcomAllReduce"' in graph and 'name: "DistributedMomentumOptimizer_Allreduce/HcomAllReduce"' in graph
    assert is_rank_index(job["npu"]) and not is_rank_index(os.path.join(job["npu"], "rank_0"))


def test_a_fault_on_rank_2_is_named_as_rank_2s_op_and_collectives_agree(job, tmp_path, capsys):
    result = compare_ranks(job["npu"], job["golden"], workers=2)
    doc = result.doc
    earliest = doc["earliest"]
    assert earliest["rank"] == 2 and earliest["npu_op"] == "fc1/MatMul", result.summary_text()
    assert doc["ranks"]["2"]["first_divergence"]["npu_op"] == "fc1/MatMul"
    # the fault reached every rank through the gradients' AllReduce: they fail later, at a collective or after
    for rank in ("0", "1", "3"):
        first = doc["ranks"][rank]["first_divergence"]
        assert doc["ranks"][rank]["verdict"] == "fail" and first["timestamp"] > earliest["timestamp"], first
    assert doc["collectives"]["verdict"] == "pass" and len(doc["collectives"]["ops"]) == 5, doc["collectives"]
    assert all(op["ranks"] == [0, 1, 2, 3] for op in doc["collectives"]["ops"])
    assert result.exit_code == 1 and doc["summary"]["failing_ranks"] == [0, 1, 2, 3]

    out = tmp_path / "ranks.json"
    assert main(["compare", job["npu"], job["golden"], "--workers", "2", "--json", str(out),
                 "--html", str(tmp_path / "ranks.html"), "--csv", str(tmp_path / "ranks.csv")]) == 1
    text = capsys.readouterr().out
    assert "earliest divergence across ranks: rank 2 fc1/MatMul" in text, text
    assert "collectives: PASS, 5 op(s) identical on every rank" in text
    assert load_rank_doc(str(out))["earliest"] == earliest
    assert "fc1/MatMul" in (tmp_path / "ranks.html").read_text()
    assert (tmp_path / "ranks.csv").read_text().splitlines()[3].startswith("2,fail,fc1/MatMul,")


def test_per_node_documents_merge_to_the_same_verdict(job, tmp_path, capsys):
    whole = compare_ranks(job["npu"], job["golden"], workers=2).doc
    paths = []
    for node, ranks in enumerate((("0", "1"), ("2", "3"))):
        part = dict(whole, ranks={r: whole["ranks"][r] for r in ranks})
        paths.append(str(tmp_path / "node{}.json".format(node)))
        with open(paths[-1], "w") as handle:
            json.dump(part, handle)
    assert main(["compare", "--merge"] + paths + ["--json", str(tmp_path / "all.json")]) == 1
    merged = load_rank_doc(str(tmp_path / "all.json"))
    assert merged["earliest"] == whole["earliest"] and merged["collectives"] == whole["collectives"]
    assert "earliest divergence across ranks: rank 2 fc1/MatMul" in capsys.readouterr().out
    with pytest.raises(CompareError, match="rank 0 is also in an earlier document"):
        merge_rank_docs([load_rank_doc(paths[0]), load_rank_doc(paths[0])], [paths[0], paths[0]])
    assert main(["compare", "--merge", str(tmp_path / "node0.json"), job["npu"]]) == 2  # a folder is no document


def test_a_tampered_collective_output_on_one_rank_fails_the_check_naming_it(job, tmp_path, capsys):
    copy = str(tmp_path / "npu")
    shutil.copytree(job["npu"], copy)
    rank1 = os.path.join(copy, read_index(copy)["ranks"]["1"]["path"])
    entry = next(f for f in read_bundle(rank1)["files"] if f["kind"] == "dump" and f["op_type"] == "HcomAllGather")
    path = os.path.join(rank1, "data", *entry["path"].split("/"))
    with open(path, "r+b") as handle:  # the last bytes of the file: its (only) output's payload
        handle.seek(-1, os.SEEK_END)
        last = handle.read(1)
        handle.seek(-1, os.SEEK_END)
        handle.write(bytes([last[0] ^ 0x40]))
    result = compare_ranks(copy, job["golden"], workers=2, ops="^HcomAllGather$")
    check = result.doc["collectives"]
    assert check["verdict"] == "fail" and check["differing_ops"] == ["HcomAllGather"], check
    assert check["differing_ranks"] == [1] and result.exit_code == 1
    assert "collectives: FAIL HcomAllGather (HcomAllGather) differs on rank(s) 1" in result.summary_text()


def test_a_golden_index_without_a_rank_is_refused(job, tmp_path):
    copy = str(tmp_path / "golden")
    shutil.copytree(job["golden"], copy)
    index = read_index(copy)
    del index["ranks"]["3"]
    with open(os.path.join(copy, "index.json"), "w") as handle:
        json.dump(index, handle)
    with pytest.raises(CompareError, match="every NPU rank needs its golden rank"):
        compare_ranks(job["npu"], copy, workers=1)


def test_compare_of_one_side_refuses_a_rank_index(job):
    from npu_dump_hook.compare import compare
    from npu_dump_hook.errors import OptionError

    with pytest.raises(OptionError, match="compare_ranks"):
        compare(job["npu"], job["golden"])


def test_merge_refuses_malformed_documents_and_the_command_needs_a_side(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "npu_dump_hook/compare-ranks@1", "ranks": {
        "0": {"verdict": "fail", "first_divergence": "fc1", "collectives": {}}}}))
    with pytest.raises(CompareError, match="rank 0: first_divergence"):
        merge_rank_docs([load_rank_doc(str(bad))], [str(bad)])
    assert main(["compare", "--merge", str(bad)]) == 3
    (tmp_path / "other.json").write_text(json.dumps({"schema": "npu_dump_hook/compare@1", "ranks": {}}))
    with pytest.raises(CompareError, match="not a npu_dump_hook/compare-ranks@1 document"):
        load_rank_doc(str(tmp_path / "other.json"))
    assert main(["compare"]) == 2
    assert "give NPU [GOLDEN], or --merge" in capsys.readouterr().err


# compare_ranks in a fresh process without TensorFlow (this one may have loaded it: then nothing forks),
# compare() wrapped: each call appends "pid workers bundle" to a log (forked ranks write there too); in a
# forked process, the rank whose bundle path holds KILL kills itself; the document is printed as JSON
_RECORDING = """
import json, os, sys
import npu_dump_hook.compare as package
from npu_dump_hook.compare import compare_ranks
npu, golden, workers, log, kill = sys.argv[1:6]
real, parent = package.compare, os.getpid()
def recording(npu, golden=None, **kwargs):
    with open(log, "a") as handle:
        handle.write("{} {} {}\\n".format(os.getpid(), kwargs.get("workers"), os.path.basename(npu)))
    if kill and os.getpid() != parent and kill in npu:
        os.kill(os.getpid(), 9)
    return real(npu, golden, **kwargs)
package.compare = recording
doc = compare_ranks(npu, golden, workers=int(workers)).doc
assert "tensorflow" not in sys.modules
print(json.dumps({"pid": parent, "doc": doc}))
"""


def _recorded(job, tmp_path, workers, kill=""):
    log = tmp_path / "calls_{}_{}.txt".format(workers, bool(kill))
    done = subprocess.run([sys.executable, "-c", _RECORDING, job["npu"], job["golden"], str(workers), str(log), kill],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return out["doc"], str(out["pid"]), [line.split() for line in log.read_text().splitlines()]


def test_ranks_are_compared_in_parallel_within_the_core_budget_with_the_same_document(job, tmp_path):
    one_by_one = json.loads(json.dumps(compare_ranks(job["npu"], job["golden"], workers=1).doc))
    parallel, parent, calls = _recorded(job, tmp_path, 4)
    assert parallel == one_by_one
    assert len(calls) == RANKS and len({pid for pid, _, _ in calls}) == RANKS, calls  # 4 ranks at once
    assert parent not in {pid for pid, _, _ in calls}
    assert {workers for _, workers, _ in calls} == {"1"}  # 4 ranks x 1 worker: the budget of 4, not 4 x 4
    two, _parent, calls = _recorded(job, tmp_path, 2)
    assert two == one_by_one
    assert len(calls) == RANKS and {workers for _, workers, _ in calls} == {"1"}, calls  # 2 at a time x 1


def test_a_rank_whose_process_dies_is_compared_again_in_this_process(job, tmp_path):
    one_by_one = json.loads(json.dumps(compare_ranks(job["npu"], job["golden"], workers=1).doc))
    rank1 = os.path.basename(read_index(job["npu"])["ranks"]["1"]["path"].rstrip("/"))
    doc, parent, calls = _recorded(job, tmp_path, 2, kill=rank1)
    assert doc == one_by_one
    again = [c for c in calls if c[0] == parent]
    assert len(calls) == RANKS + 1 and len(again) == 1 and again[0][2] == rank1, calls


_ERRORING = """
import os, sys
import npu_dump_hook.compare as package
from npu_dump_hook.compare import compare_ranks
from npu_dump_hook.errors import CompareError
root, log = sys.argv[1:3]
real = package.compare
def recording(npu, golden=None, **kwargs):
    with open(log, "a") as handle:
        handle.write("{} {}\\n".format(os.getpid(), os.path.basename(npu)))
    return real(npu, golden, **kwargs)
package.compare = recording
try:
    compare_ranks(root, workers=2)
except CompareError as exc:
    print("CompareError", exc.path)
"""


def test_a_rank_whose_compare_raises_is_compared_once_and_its_error_raised(tmp_path):
    """Both ranks' bundles are empty folders: each forked compare raises CompareError. The parent raises
    rank 0's error from its process, without comparing either rank a second time (it used to: 4 compares)."""
    from npu_dump_hook.bundle.index import INDEX_SCHEMA

    for rank in (0, 1):
        (tmp_path / "rank_{}".format(rank)).mkdir()
    (tmp_path / "index.json").write_text(json.dumps({"schema": INDEX_SCHEMA, "ranks": {
        str(rank): {"path": "rank_{}".format(rank)} for rank in (0, 1)}}))
    log = tmp_path / "calls.txt"
    done = subprocess.run([sys.executable, "-c", _ERRORING, str(tmp_path), str(log)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert done.stdout.decode().split() == ["CompareError", str(tmp_path / "rank_0")]
    calls = [line.split() for line in log.read_text().splitlines()]
    assert sorted(name for _, name in calls) == ["rank_0", "rank_1"], calls  # once each
    assert len({pid for pid, _ in calls}) == 2, calls  # in two forked processes, none in the parent
