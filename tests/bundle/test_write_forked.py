"""bundle.write with the graph read and shares of the files placed by forked children: the
bundle is the one a single process writes (bundle.json, manifest, counts, warnings), whatever
the children do."""
import json
import os
import time

import pytest

from npu_dump_hook import bundle
from npu_dump_hook.bundle import _fs, _placing
from npu_dump_hook.bundle import write as write_mod
from npu_dump_hook.errors import BundleError

from helpers.bundles import TIME_DIR, GRAPH_NAME, make_run, write

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="shares are forked")

ZERO = "Conv2D.empty1.7.2.1700000000000009"  # a 0-byte dump file: its entry carries a warning


@pytest.fixture
def cuts(monkeypatch):
    """Fork for shares of any size on 3 cores (also in a test process that other tests left
    with TensorFlow loaded: the children here only place files); the cuts each write used."""
    monkeypatch.setattr(_placing, "_FORK_MIN_SHARE", 1)
    monkeypatch.setattr(write_mod, "_GRAPH_FORK_MIN_BYTES", 0)
    for module in (_placing, write_mod):
        monkeypatch.setattr(module, "fork_is_safe", lambda: True)
        monkeypatch.setattr(module, "usable_cores", lambda: 3)
    used = []
    original = _placing._share_cuts

    def record(plan, workers):
        found = original(plan, workers)
        used.append(found)
        return found

    monkeypatch.setattr(_placing, "_share_cuts", record)
    return used


@pytest.fixture
def run(tmp_path):
    located = make_run(tmp_path / "src")
    step = tmp_path / "src" / "dump" / TIME_DIR / "0" / GRAPH_NAME / "1" / "0"
    (step / ZERO).write_bytes(b"")
    (step / "123456789012").write_bytes(b"x")  # a hashed name without a mapping.csv entry: a warning
    return located


def _bundle(path):
    """What must not depend on the children: bundle.json without its time, the manifest, and
    every file and folder in the bundle (no part file or scratch folder left)."""
    doc = json.loads((path / "data" / "bundle.json").read_text())
    doc.pop("created")
    listing = sorted(os.path.relpath(os.path.join(d, name), str(path))
                     for d, dirs, files in os.walk(str(path)) for name in files + dirs)
    manifest = [line for line in (path / "manifest-sha256.txt").read_text().splitlines()
                if not line.endswith(" data/bundle.json")]  # its digest covers the time
    return doc, manifest, listing


def _result(result):
    return (result.files, result.bytes, result.linked, result.copied, result.coverage, result.warnings)


@pytest.mark.parametrize("link", ["auto", "copy"])
def test_forked_shares_write_the_single_process_bundle(tmp_path, run, cuts, monkeypatch, link):
    alone = write(tmp_path / "alone", run, link=link, workers=1)
    taken = []
    take = _placing._Shares._take
    monkeypatch.setattr(_placing._Shares, "_take", lambda *args: taken.append(take(*args)) or taken[-1])
    shared = write(tmp_path / "shared", run, link=link)
    assert len(cuts[0]) == 2 and len(cuts[1]) == 4  # one share, then three (two children)
    assert taken == [True, True]  # both children's shares were used
    assert _bundle(tmp_path / "shared") == _bundle(tmp_path / "alone")
    assert _result(shared) == _result(alone)
    assert shared.listing is None and alone.listing is not None  # children's files are not listed here
    assert any(ZERO in w for w in shared.warnings) and any("123456789012" in w for w in shared.warnings)
    assert bundle.verify_bundle(str(tmp_path / "shared")) == []
    assert not [name for name in os.listdir(str(tmp_path / "shared")) if name.endswith(".part")]


def _failing_child(kind, count_after=0.0):
    """A place_in_child that places its first file, counts it for progress (after
    ``count_after`` seconds), then fails in the way ``kind`` names."""

    def place_in_child(shares, child):
        start = shares.cuts[child + 1]
        _item, placed, _entry = _placing.place_one(shares.data, shares.plan[start], shares.link, shares.checksum)
        time.sleep(count_after)
        shares.counts.store(child, 1, placed.size)  # leaves a placed file, counted for progress
        with open(shares._part_path(child), "w") as part:  # and a part file
            part.write(",\n  {}")
        if kind == "raise":
            raise RuntimeError("child fails")
        if kind == "exit":
            os._exit(3)
        if kind == "kill":
            os.kill(os.getpid(), 9)
        return "not the result"  # a result of the wrong shape

    return place_in_child


@pytest.mark.parametrize("kind", ["raise", "exit", "kill", "garbage"])
def test_failed_child_share_is_redone_by_the_parent(tmp_path, run, cuts, monkeypatch, kind):
    alone = write(tmp_path / "alone", run, workers=1)
    monkeypatch.setattr(_placing._Shares, "place_in_child", _failing_child(kind))
    shared = write(tmp_path / "shared", run)
    assert len(cuts[-1]) == 4
    assert _bundle(tmp_path / "shared") == _bundle(tmp_path / "alone")
    assert _result(shared) == _result(alone)
    assert bundle.verify_bundle(str(tmp_path / "shared")) == []


def test_no_fork_where_forking_is_unsafe(tmp_path, run, cuts, monkeypatch):
    monkeypatch.setattr(_placing, "fork_is_safe", lambda: False)
    write(tmp_path / "b", run)
    assert cuts == [[0, cuts[0][-1]]]


def test_no_fork_for_large_files_or_few_files(run, cuts, monkeypatch):
    plan = [write_mod._Planned("f{}".format(i), "/nowhere", 10, "other") for i in range(9)]
    assert len(_placing._share_cuts(plan, None)) == 4
    assert _placing._share_cuts(plan, 1) == [0, 9]
    big = [p._replace(size=_fs.INLINE_BYTES + 1) for p in plan]
    assert _placing._share_cuts(big, None) == [0, 9]
    monkeypatch.setattr(_placing, "_FORK_MIN_SHARE", 5)
    assert _placing._share_cuts(plan, None) == [0, 9]


@pytest.fixture
def graph_forks(monkeypatch):
    """For each write: whether the graph read was forked, and whether the child's was taken."""
    forks = []
    fork, take = write_mod._fork_graph_read, write_mod._taken_graph_read

    def record_fork(located, stage, workers, *layers):
        call = fork(located, stage, workers, *layers)
        forks.append([call is not None, False])
        return call

    def record_take(call, stage, rel):
        read = take(call, stage, rel)
        forks[-1][1] = read is not None
        return read

    monkeypatch.setattr(write_mod, "_fork_graph_read", record_fork)
    monkeypatch.setattr(write_mod, "_taken_graph_read", record_take)
    return forks


def _failing_graph_read(kind):
    """A _read_graph that fails in the forked child (only there) in the way ``kind`` names,
    after writing its JSON form into the scratch folder."""
    real = write_mod._read_graph
    parent = os.getpid()

    def read_graph(graph_file, rel, data, *layers):
        found = real(graph_file, rel, data, *layers)
        if os.getpid() == parent:
            return found
        if kind == "raise":
            raise RuntimeError("child fails")
        if kind == "kill":
            os.kill(os.getpid(), 9)
        if kind == "wrong path":
            return found._replace(json_rel="graph/elsewhere.json")
        return ("garbage",)

    return read_graph


@pytest.mark.parametrize("kind", [None, "raise", "kill", "wrong path", "garbage"])
def test_graph_read_by_a_child_or_redone_gives_the_single_process_bundle(tmp_path, run, cuts, graph_forks,
                                                                         monkeypatch, kind):
    alone = write(tmp_path / "alone", run, workers=1)
    if kind is not None:
        monkeypatch.setattr(write_mod, "_read_graph", _failing_graph_read(kind))
    shared = write(tmp_path / "shared", run)
    assert graph_forks == [[False, False], [True, kind is None]]  # a failed child's read is never taken
    assert _bundle(tmp_path / "shared") == _bundle(tmp_path / "alone")
    assert _result(shared) == _result(alone)
    assert bundle.verify_bundle(str(tmp_path / "shared")) == []


def test_unscannable_graph_read_by_a_child_is_reported_as_alone(tmp_path, run, cuts, graph_forks):
    with open(run.graph_file, "a") as out:
        out.write("graph {\n  op {\n")  # never closed
    alone = write(tmp_path / "alone", run, workers=1)
    shared = write(tmp_path / "shared", run)
    assert graph_forks == [[False, False], [True, True]]
    assert any("graph not scannable" in w for w in shared.warnings)
    assert _bundle(tmp_path / "shared") == _bundle(tmp_path / "alone")
    assert _result(shared) == _result(alone)


@pytest.mark.parametrize("kind, count_after", [(None, 0), ("kill", 0), ("kill", 0.5)])
def test_progress_counts_every_file_once_with_children(tmp_path, run, cuts, monkeypatch, kind, count_after):
    """A killed child's count may be seen before its share is redone, or (counted late, after
    the parent's own share) only while it is redone: either way each file counts once."""
    monkeypatch.setattr(_placing, "_COUNT_EVERY", 1)  # children count every file
    if kind is not None:
        monkeypatch.setattr(_placing._Shares, "place_in_child", _failing_child(kind, count_after))
    calls = []
    write(tmp_path / "b", run, progress=lambda *args: calls.append(args))
    files, total_files, nbytes, total_bytes = calls[-1]
    assert (files, nbytes) == (total_files, total_bytes) and len(cuts[-1]) == 4
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)  # never backwards
    assert all(c[0] <= total_files and c[2] <= total_bytes for c in calls)


def _reaped(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # no such child any more: it was reaped
        return True
    return False


@pytest.mark.parametrize("where, code", [("last", 28), ("first", 13)])
def test_os_error_in_any_share_is_raised_naming_the_file_and_leaves_nothing(tmp_path, run, cuts, monkeypatch,
                                                                           where, code):
    """In the last share a child meets the error first (the parent then redoes that share and
    raises it); in the first one the parent raises while its children still run."""
    forked = []
    real_call = _placing.ForkedCall

    def forked_call(*args):
        call = real_call(*args)
        forked.append(call._pid)
        return call

    monkeypatch.setattr(_placing, "ForkedCall", forked_call)
    real = _fs.place_file
    names = sorted(os.listdir(str(tmp_path / "src" / "dump" / TIME_DIR / "0" / GRAPH_NAME / "1" / "0")))
    failing = names[-1] if where == "last" else names[0]

    def place_file(src, dst, **kwargs):
        if os.path.basename(src) == failing:
            raise OSError(code, os.strerror(code), dst)
        return real(src, dst, **kwargs)

    monkeypatch.setattr(_fs, "place_file", place_file)
    with pytest.raises(BundleError) as caught:
        write(tmp_path / "out" / "b", run)
    assert failing in str(caught.value) and os.strerror(code) in str(caught.value)
    assert len(cuts[-1]) == 4
    assert not os.path.exists(str(tmp_path / "out")) or os.listdir(str(tmp_path / "out")) == []
    assert len(forked) == 2 and all(_reaped(pid) for pid in forked)
