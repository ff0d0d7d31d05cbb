"""Tests for npu_dump_hook.bundle: layout, bundle.json, BagIt validity, atomicity, archives, ranks."""
import errno
import hashlib
import io
import json
import multiprocessing
import os
import subprocess
import sys
import tarfile

import bagit
import numpy as np
import pytest

from npu_dump_hook import bundle
from npu_dump_hook.bundle import _archive, _bagit, _fs, _listing, _placing, _staging
from npu_dump_hook.constants import BUNDLE_SCHEMA
from npu_dump_hook.errors import BundleError, BundleExistsError, UnsafePathError
from npu_dump_hook.formats.dump_file import write_dump_file
from npu_dump_hook.formats.mapping_csv import write_mapping
from npu_dump_hook.locate import LocatedRun, StepDir

from helpers.bundles import (CONV, FFTS, GRAPH_NAME, GRAPH_TEXT, HASHED, LONG_NAME, LONG_OP, RELU, STATS, TIME_DIR,
                             TOP_KEYS, entries_by_name, make_run, tree_state, write)


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path / "src")


# -- layout and bundle.json --------------------------------------------------------------------
def test_layout_and_bundle_json(tmp_path, run):
    result = write(tmp_path / "b", run)
    b = tmp_path / "b"
    chain = "dump/{}/0/{}/1/0".format(TIME_DIR, GRAPH_NAME)
    assert sorted(os.listdir(str(b))) == ["bag-info.txt", "bagit.txt", "data", "manifest-sha256.txt",
                                          "tagmanifest-sha256.txt"]
    assert sorted(os.listdir(str(b / "data" / chain))) == sorted(
        [CONV, RELU, HASHED, "mapping.csv", STATS, FFTS, "notes.txt"])
    doc = json.loads((b / "data" / "bundle.json").read_text())
    assert set(doc) == TOP_KEYS
    assert doc["schema"] == BUNDLE_SCHEMA == "npu_dump_hook/bundle@1"
    assert doc["backend"] == "emulated"
    assert doc["run"] == {"steps": 1, "global_step": 0, "started": None, "ended": None, "rank": 0, "device_id": 0}
    assert doc["graph"]["file"] == "graph/ge_proto_00000123_graph_1_Build.txt"
    assert doc["graph"]["name"] == GRAPH_NAME
    assert doc["graph"]["stage"] == "Build"
    assert doc["graph"]["op_count"] == 7
    assert doc["graph"]["choice"] == {"method": "test", "candidates": []}
    assert {k: doc["dump"][k] for k in ("time_dir", "device_id", "model_name", "model_id", "steps")} == {
        "time_dir": TIME_DIR, "device_id": "0", "model_name": GRAPH_NAME, "model_id": "1", "steps": ["0"]}
    by = entries_by_name(doc)
    conv = by[CONV]
    assert conv["path"] == chain + "/" + CONV
    assert conv["kind"] == "dump"
    assert (conv["op_type"], conv["op_name"], conv["task_id"], conv["stream_id"], conv["timestamp"]) == (
        "Conv2D", "conv1_Conv2D", 3, 2, 1700000000000001)
    assert conv["header"]["outputs"] == [{"dtype": "DT_FLOAT", "shape": [1, 2, 2, 1], "format": "ND"}]
    assert [t["dtype"] for t in conv["header"]["inputs"]] == ["DT_FLOAT", "DT_FLOAT16"]
    data = (b / "data" / chain / CONV).read_bytes()
    assert conv["size"] == len(data) and conv["sha256"] == hashlib.sha256(data).hexdigest()
    assert by[HASHED]["kind"] == "dump" and by[HASHED]["op_type"] == "MatMul"
    assert by[HASHED]["original_name"] == LONG_NAME
    assert by["mapping.csv"]["kind"] == "mapping"
    assert by[STATS]["kind"] == "stats" and by[STATS]["op_name"] == "add1" and "header" not in by[STATS]
    assert by[FFTS]["context_id"] == 1 and by[FFTS]["op_name"] == "mul1_lxslice1"
    assert by["notes.txt"]["kind"] == "other"
    assert by["ge_proto_00000123_graph_1_Build.txt"]["kind"] == "graph"
    assert doc["graph"]["json"] == "graph/ge_proto_00000123_graph_1_Build.json"
    assert by["ge_proto_00000123_graph_1_Build.json"]["kind"] == "graph"
    graph_json = json.loads((b / "data" / "graph" / "ge_proto_00000123_graph_1_Build.json").read_text())
    assert [op["name"] for op in graph_json["graph"][0]["op"]][:2] == ["conv1/Conv2D", "relu1"]
    assert [e["path"] for e in doc["files"]] == sorted(e["path"] for e in doc["files"])
    # 6 ops need a task (reshape1 has _no_task); sub1 has no dump file
    assert doc["coverage"]["expected"] == 6
    assert doc["coverage"]["dumped"] == 5
    assert doc["coverage"]["missing"] == ["sub1"]
    assert result.files == len(doc["files"]) + 1  # bundle.json is payload but not in files
    assert result.steps == ["0"]
    assert bundle.verify_bundle(str(b)) == []


def test_bagit_validator_accepts(tmp_path, run):
    write(tmp_path / "b", run)
    bagit.Bag(str(tmp_path / "b")).validate()
    proc = subprocess.run([sys.executable, "-m", "bagit", "--validate", str(tmp_path / "b")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert proc.returncode == 0, proc.stdout
    assert "valid" in proc.stdout


def test_checksum_none_keeps_manifest_valid(tmp_path, run):
    write(tmp_path / "b", run, checksum="none")
    doc = bundle.read_bundle(str(tmp_path / "b"))
    assert all(e["sha256"] is None for e in doc["files"])
    bagit.Bag(str(tmp_path / "b")).validate()
    assert bundle.verify_bundle(str(tmp_path / "b")) == []


def test_tf_golden_init_dirs(tmp_path, run):
    tf_graph = tmp_path / "g.pbtxt"
    tf_graph.write_text('node { name: "x" op: "Const" }\n')
    golden = tmp_path / "golden"
    (golden / "sub").mkdir(parents=True)
    np.save(str(golden / "sub" / "relu1.0.1700000000000000.npy"), np.zeros(2))
    init = tmp_path / "init"
    init.mkdir()
    (init / "checkpoint").write_text("model_checkpoint_path: \"m\"\n")
    write(tmp_path / "b", run, tf_graph=str(tf_graph), golden_dir=str(golden), init_dir=str(init))
    by = {e["path"]: e["kind"] for e in bundle.read_bundle(str(tmp_path / "b"))["files"]}
    assert by["tf/graph.pbtxt"] == "tf_graph"
    assert by["golden/sub/relu1.0.1700000000000000.npy"] == "golden"
    assert by["init/checkpoint"] == "init"
    bagit.Bag(str(tmp_path / "b")).validate()


def test_rejects_bad_arguments(tmp_path, run):
    for kwargs, part in (({"backend": "gpu"}, "backend='gpu'"), ({"link": "reflink"}, "link='reflink'"),
                         ({"checksum": "md5"}, "checksum='md5'"), ({"archive": "zip"}, "archive='zip'")):
        with pytest.raises(BundleError) as info:
            write(tmp_path / "b", run, **kwargs)
        assert part in str(info.value)
    assert not (tmp_path / "b").exists()


# -- destination handling, atomicity -----------------------------------------------------------
def test_existing_destination_refused_unless_force(tmp_path, run):
    dest = tmp_path / "b"
    dest.mkdir()
    (dest / "keep").write_text("mine")
    with pytest.raises(BundleExistsError):
        write(dest, run)
    assert os.listdir(str(dest)) == ["keep"]
    write(dest, run, force=True)
    assert not (dest / "keep").exists()
    assert bundle.verify_bundle(str(dest)) == []
    assert sorted(os.listdir(str(tmp_path))) == ["b", "src"]


def _no_bag_left(parent):
    for dirpath, _dirs, files in os.walk(str(parent)):
        if "bagit.txt" in files:
            return False
    return True


@pytest.mark.parametrize("target, after", [
    ("npu_dump_hook.bundle._fs.place_file", 0),
    ("npu_dump_hook.bundle._fs.place_file", 4),
    ("npu_dump_hook.bundle.write._graph_section", 0),
    ("npu_dump_hook.bundle.write.write_payload_and_json", 0),
    ("npu_dump_hook.bundle._placing.coverage", 0),
    ("npu_dump_hook.bundle._bagit.write_tag_files", 0),
    ("npu_dump_hook.bundle._staging.Staging.commit", 0),
])
def test_crash_leaves_nothing(tmp_path, monkeypatch, target, after):
    run = make_run(tmp_path / "src")
    out = tmp_path / "out"
    out.mkdir()
    module_name, attr = target.rsplit(".", 1)
    if module_name.endswith("Staging"):
        owner, real = _staging.Staging, _staging.Staging.commit
    else:
        import importlib

        owner = importlib.import_module(module_name)
        real = getattr(owner, attr)
    calls = {"n": 0}

    def crash(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after:
            raise RuntimeError("simulated crash in " + attr)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, attr, crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        write(out / "b", run, link="copy")
    assert os.listdir(str(out)) == []  # no destination, no staging folder
    assert _no_bag_left(tmp_path)
    monkeypatch.setattr(owner, attr, real)
    write(out / "b", run, link="copy")
    assert bundle.verify_bundle(str(out / "b")) == []


def _os_error(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


def _partial_tag_files(bag_dir, *args, **kwargs):
    with open(os.path.join(bag_dir, "bagit.txt"), "wb") as out:
        out.write(b"BagIt-Version: 1.0\n")  # half-written, then the file system turns read-only
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.path.join(bag_dir, "bag-info.txt"))


@pytest.mark.parametrize("target, fail, doing, archive", [
    ("npu_dump_hook.bundle._fs._copy_hashing", _os_error(errno.ENOSPC), "copying ", None),
    ("npu_dump_hook.bundle._placing._HashingWriter.write", _os_error(errno.ENOSPC), "writing data/bundle.json", None),
    ("npu_dump_hook.bundle._bagit.write_tag_files", _partial_tag_files, "writing the BagIt tag files", None),
    ("npu_dump_hook.bundle._staging.os.mkdir", _os_error(errno.EACCES), "creating the staging folder", None),
    ("npu_dump_hook.bundle._staging._rename_no_clobber", _os_error(errno.EACCES), "renaming the finished bundle",
     None),
    ("npu_dump_hook.bundle.write.pack_archive", _os_error(errno.ENOSPC), "packing the archive", "tar.gz"),
], ids=["ENOSPC-copy", "ENOSPC-bundle.json", "EROFS-tag-files", "EACCES-staging", "EACCES-rename", "ENOSPC-archive"])
def test_os_error_while_writing_is_a_bundle_error_naming_path_and_step(tmp_path, monkeypatch, target, fail, doing,
                                                                       archive):
    # Before: a bare "OSError: [Errno 28] No space left on device" without the path or the step.
    import importlib

    run = make_run(tmp_path / "src")
    out = tmp_path / "out"
    out.mkdir()
    module_name, attr = target.rsplit(".", 1)
    if module_name.endswith("._HashingWriter"):
        owner = bundle._placing._HashingWriter
    elif module_name.endswith("._staging.os"):
        owner = os
    else:
        owner = importlib.import_module(module_name)
    if owner is os:
        real = os.mkdir

        def fail_in_out(path, *args, **kwargs):  # only the bundle's own folders
            if str(out) in os.fspath(path):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)
            return real(path, *args, **kwargs)
        fail = fail_in_out
    monkeypatch.setattr(owner, attr, fail)
    with pytest.raises(BundleError) as info:
        write(out / "b", run, link="copy", archive=archive)
    monkeypatch.undo()
    err = info.value
    assert not isinstance(err, OSError) and isinstance(err.__cause__, OSError)
    text = str(err)
    assert text.startswith("cannot write bundle {}: ".format(out / "b")) and doing in text
    assert os.strerror(err.errno) in text and "[Errno {}]".format(err.errno) in text
    assert err.path and str(out) in err.path
    assert os.listdir(str(out)) == []  # nothing half-written: no destination, no staging folder
    write(out / "b", run, link="copy", archive=archive)
    assert bundle.verify_bundle(str(out / "b")) == []


def test_unreadable_source_is_a_bundle_error_naming_it(tmp_path, monkeypatch, run):
    real = os.scandir
    step = run.steps[0].path

    def no_access(path="."):
        if not isinstance(path, int) and os.fspath(path) == step:  # (rmtree lists by descriptor)
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real(path)

    monkeypatch.setattr(os, "scandir", no_access)
    with pytest.raises(BundleError) as info:
        write(tmp_path / "b", run)
    monkeypatch.undo()
    assert "listing the source files" in str(info.value) and step in str(info.value)
    assert "Permission denied" in str(info.value) and info.value.path == step
    assert not (tmp_path / "b").exists()


def test_force_crash_keeps_old_bundle(tmp_path, monkeypatch, run):
    dest = tmp_path / "b"
    write(dest, run)
    before = tree_state(dest)

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(bundle._placing, "coverage", crash)
    with pytest.raises(RuntimeError):
        write(dest, run, force=True)
    assert tree_state(dest) == before
    assert sorted(os.listdir(str(tmp_path))) == ["b", "src"]


@pytest.mark.parametrize("link", ["hardlink", "copy", "auto"])
def test_source_unmodified(tmp_path, run, link):
    before = tree_state(tmp_path / "src")
    write(tmp_path / "b", run, link=link)
    assert tree_state(tmp_path / "src") == before


def test_hardlink_vs_copy(tmp_path, run):
    src = os.path.join(run.steps[0].path, CONV)
    r1 = write(tmp_path / "h", run, link="hardlink")
    r2 = write(tmp_path / "c", run, link="copy")
    chain = os.path.join("data", "dump", TIME_DIR, "0", GRAPH_NAME, "1", "0", CONV)
    assert os.stat(str(tmp_path / "h" / chain)).st_ino == os.stat(src).st_ino
    assert os.stat(str(tmp_path / "c" / chain)).st_ino != os.stat(src).st_ino
    # bundle.json and the graph JSON are generated, neither linked nor copied
    assert (r1.linked, r1.copied) == (r1.files - 2, 0) == (8, 0)
    assert (r2.linked, r2.copied) == (0, r2.files - 2) == (0, 8)


def test_symlink_out_of_tree_not_followed(tmp_path, run):
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.symlink(str(secret), os.path.join(run.steps[0].path, "leak"))
    write(tmp_path / "b", run)
    doc = bundle.read_bundle(str(tmp_path / "b"))
    assert "leak" not in entries_by_name(doc)
    assert any("leak" in w and "outside the source tree" in w for w in doc["warnings"])
    assert not any("outside" == open(os.path.join(d, f)).read()
                   for d, _s, fs in os.walk(str(tmp_path / "b")) for f in fs if f.endswith((".txt", "leak")))


def test_in_tree_links_and_subfolders_of_a_dump_folder_are_bundled_with_their_headers(tmp_path, run):
    step = run.steps[0].path
    os.symlink(CONV, os.path.join(step, "Conv2D.alias.9.0.1700000000000009"))  # in-tree link: its target is read
    sub = os.path.join(step, "sub")
    os.mkdir(sub)
    write_dump_file(os.path.join(sub, "Relu.deep.3.0.1700000000000003"), "deep", outputs=[np.zeros(2, np.int8)])
    write(tmp_path / "b", run)
    doc = bundle.read_bundle(str(tmp_path / "b"))
    by = entries_by_name(doc)
    assert by["Conv2D.alias.9.0.1700000000000009"]["header"] == by[CONV]["header"] is not None
    assert by["Conv2D.alias.9.0.1700000000000009"]["sha256"] == by[CONV]["sha256"]
    deep = by["Relu.deep.3.0.1700000000000003"]
    assert deep["path"].endswith("/0/sub/Relu.deep.3.0.1700000000000003") and deep["op_name"] == "deep"
    assert deep["header"]["outputs"] == [{"dtype": "DT_INT8", "shape": [2], "format": "ND"}]
    assert [f["path"] for f in doc["files"]] == sorted(f["path"] for f in doc["files"])
    assert bundle.verify_bundle(str(tmp_path / "b")) == []


def test_two_located_steps_with_one_chain_are_refused(tmp_path, run):
    twin = tmp_path / "twin"
    twin.mkdir()
    write_dump_file(str(twin / RELU), "relu1", outputs=[np.zeros(3, np.int32)])
    step = run.steps[0]
    doubled = LocatedRun(run.graph_file, run.graph_name, {}, run.dump_path,
                         [step, StepDir(step.time_dir, step.device_id, step.model_name, step.model_id, step.step,
                                        str(twin))])
    with pytest.raises(BundleError, match="two sources map to bundle path data/dump/.*/" + RELU):
        write(tmp_path / "b", doubled)


@pytest.mark.parametrize("level", [5, 4, 1], ids=["step", "model_id", "time"])
def test_symlinked_dump_chain_folder_is_never_bundled(tmp_path, run, level):
    # A LocatedRun whose chain goes through a symlink (built by hand, or the tree changed after
    # locate): the writer does not take realpath(step) as a tree, it skips the step and says so.
    import shutil

    step = run.steps[0].path
    chain = [step]
    for _ in range(4):
        chain.append(os.path.dirname(chain[-1]))
    linked = chain[5 - level]  # 5: the step folder itself, 1: the time folder
    moved = str(tmp_path / "moved")
    shutil.move(linked, moved)
    os.symlink(moved if level != 5 else "/etc", linked)
    result = write(tmp_path / "b", run, link="copy")
    doc = bundle.read_bundle(str(tmp_path / "b"))
    assert not [e for e in doc["files"] if e["path"].startswith("dump/")]
    assert any(linked in w and "symlink" in w and "never followed" in w for w in result.warnings)
    assert doc["warnings"] == result.warnings
    assert bundle.verify_bundle(str(tmp_path / "b")) == []


@pytest.mark.parametrize("every, counts", [(1, list(range(1, 10))), (4, [4, 8, 9]), (64, [9])])
def test_progress_callback_every_few_files_and_at_the_end(tmp_path, run, monkeypatch, every, counts):
    """Counted in one loop, handed over every _COUNT_EVERY files and once all are placed."""
    monkeypatch.setattr(_placing, "_COUNT_EVERY", every)
    calls = []
    write(tmp_path / "b", run, progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == counts  # of 9: graph, its JSON form, 7 dump-folder files
    assert calls[-1][0] == calls[-1][1] == 9
    assert calls[-1][2] == calls[-1][3] > 0


def test_progress_callback_soon_after_large_files(tmp_path, run, monkeypatch):
    """A file of _COUNT_BYTES or more is handed over at once: the bar moves with the bytes."""
    monkeypatch.setattr(_placing, "_COUNT_BYTES", 1)
    calls = []
    write(tmp_path / "b", run, progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == list(range(1, 10))
    assert [c[2] for c in calls] == sorted(c[2] for c in calls) and calls[-1][2] == calls[-1][3]


# -- verify ------------------------------------------------------------------------------------
def test_verify_lists_every_problem(tmp_path, run):
    write(tmp_path / "b", run)
    data = tmp_path / "b" / "data" / "dump" / TIME_DIR / "0" / GRAPH_NAME / "1" / "0"
    with open(str(data / CONV), "r+b") as fh:
        fh.seek(-1, 2)
        fh.write(b"\xff")
    os.unlink(str(data / RELU))
    (data / "intruder").write_text("x")
    problems = bundle.verify_bundle(str(tmp_path / "b"))
    got = {(p.kind, p.path.rsplit("/", 1)[-1]) for p in problems}
    assert ("changed", CONV) in got
    assert ("missing", RELU) in got
    assert ("extra", "intruder") in got
    assert ("changed", "bag-info.txt") in got  # Payload-Oxum no longer matches
    assert all(str(p).startswith(p.kind + ": ") for p in problems)


def test_verify_unparsable_and_schema(tmp_path, run):
    write(tmp_path / "b", run)
    bj = tmp_path / "b" / "data" / "bundle.json"
    doc = json.loads(bj.read_text())
    del doc["coverage"]
    doc["backend"] = "gpu"
    doc["files"][0]["kind"] = "weird"
    bj.write_text(json.dumps(doc))
    problems = bundle.verify_bundle(str(tmp_path / "b"))
    schema = sorted(p.detail for p in problems if p.kind == "schema")
    assert "missing key 'coverage'" in schema
    assert any("backend 'gpu'" in d for d in schema)
    assert any(d.startswith("files[0]: kind 'weird'") for d in schema)
    assert ("changed", "data/bundle.json") in {(p.kind, p.path) for p in problems}
    bj.write_text("{not json")
    assert ("unparsable", "data/bundle.json") in {(p.kind, p.path) for p in bundle.verify_bundle(str(tmp_path / "b"))}


class _Touched(object):
    """Records every path verify stats, opens or lists, to prove nothing outside the bag is read."""

    def __init__(self, monkeypatch):
        import builtins

        self.paths = []
        for owner, name in ((os, "stat"), (os, "lstat"), (os, "scandir"), (os, "listdir"), (builtins, "open")):
            monkeypatch.setattr(owner, name, self._spy(getattr(owner, name)))

    def _spy(self, real):
        def spy(path=".", *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)):
                self.paths.append(os.path.abspath(os.fsdecode(path)))
            return real(path, *args, **kwargs)
        return spy

    def under(self, root):
        root = os.path.abspath(str(root))
        return [p for p in self.paths if p == root or p.startswith(root + os.sep)]


def _rehash(bag):
    """Rewrite the manifest/tag manifest/Payload-Oxum after an edit (a consistent hostile bag)."""
    payload = []
    for f in _fs.walk_files(str(bag / "data")):
        size, digest = _fs.sha256_file(f.path)
        payload.append((f.rel, size, digest))
    _bagit.write_tag_files(str(bag), payload, "test", "2024-01-01", "rehashed")


def test_verify_flags_a_payload_symlink_to_an_identical_payload_file(tmp_path, run):
    # Before: a payload file replaced by a link to a byte-identical payload file verified "ok".
    write(tmp_path / "b", run)
    chain = tmp_path / "b" / "data" / "dump" / TIME_DIR / "0" / GRAPH_NAME / "1" / "0"
    twin = chain / "twin.bin"
    os.link(str(chain / CONV), str(twin))  # same bytes, so only the link itself can be wrong
    doc = json.loads((tmp_path / "b" / "data" / "bundle.json").read_text())
    entry = dict(entries_by_name(doc)[CONV], path=entries_by_name(doc)[CONV]["path"].replace(CONV, "twin.bin"),
                 kind="other")
    doc["files"] = sorted(doc["files"] + [entry], key=lambda e: e["path"])
    (tmp_path / "b" / "data" / "bundle.json").write_text(json.dumps(doc))
    _rehash(tmp_path / "b")
    assert bundle.verify_bundle(str(tmp_path / "b")) == []  # the twin as a regular file is fine
    os.unlink(str(chain / CONV))
    os.symlink("twin.bin", str(chain / CONV))
    problems = bundle.verify_bundle(str(tmp_path / "b"))
    unsafe = [p for p in problems if p.kind == "unsafe"]
    assert len(unsafe) == 1 and CONV in unsafe[0].detail and "symlink" in unsafe[0].detail
    # the link is not counted as the payload file it replaces (not "missing", but not in the Oxum)
    assert {p.kind for p in problems} == {"unsafe", "changed"}


def test_verify_flags_data_replaced_by_a_link_and_reads_nothing_behind_it(tmp_path, run, monkeypatch):
    # Before: data/ replaced by a link to a copy outside the bag verified "ok".
    import shutil

    write(tmp_path / "b", run, link="copy")
    outside = tmp_path / "elsewhere"
    shutil.move(str(tmp_path / "b" / "data"), str(outside))
    os.symlink(str(outside), str(tmp_path / "b" / "data"))
    touched = _Touched(monkeypatch)
    problems = bundle.verify_bundle(str(tmp_path / "b"))
    monkeypatch.undo()
    assert [(p.kind, p.path) for p in problems] == [("unsafe", "data")]
    assert "symlink" in problems[0].detail and str(outside) in problems[0].detail
    assert touched.under(outside) == []


def test_verify_flags_top_level_tag_file_links(tmp_path, run):
    write(tmp_path / "b", run)
    bag = tmp_path / "b"
    os.rename(str(bag / "bag-info.txt"), str(tmp_path / "bag-info.txt"))
    os.symlink(str(tmp_path / "bag-info.txt"), str(bag / "bag-info.txt"))
    problems = bundle.verify_bundle(str(bag))
    assert ("unsafe", "bag-info.txt") in {(p.kind, p.path) for p in problems}


@pytest.mark.parametrize("escape", ["../../secret.bin", "dump/../../../secret.bin", "/abs/secret.bin"])
def test_verify_never_follows_a_files_path_out_of_the_bag(tmp_path, run, monkeypatch, escape):
    # Before: files[].path "../../x" was stat'ed outside the bag ("size 11 but bundle.json says 0":
    # a size leak); now it is an unsafe problem and nothing outside the bag is touched.
    secret_dir = tmp_path / "abs" if escape.startswith("/") else tmp_path
    secret_dir.mkdir(exist_ok=True)
    (secret_dir / "secret.bin").write_bytes(b"confidential")
    write(tmp_path / "b", run)
    if escape.startswith("/"):
        escape = str(secret_dir / "secret.bin")
    bj = tmp_path / "b" / "data" / "bundle.json"
    doc = json.loads(bj.read_text())
    doc["files"].append({"path": escape, "size": 0, "sha256": None, "kind": "other"})
    bj.write_text(json.dumps(doc))
    _rehash(tmp_path / "b")
    touched = _Touched(monkeypatch)
    problems = bundle.verify_bundle(str(tmp_path / "b"))
    monkeypatch.undo()
    assert [(p.kind, p.path) for p in problems] == [("unsafe", "data/bundle.json")]
    assert "files[{}]".format(len(doc["files"]) - 1) in problems[0].detail
    assert not [p for p in touched.paths if p == str(secret_dir / "secret.bin")]
    assert "size" not in problems[0].detail  # no size of the outside file


@pytest.mark.parametrize("content", [b"", b"\xff" * 8], ids=["empty", "header_length_2**64-1"])
def test_unreadable_dump_file_is_reported_and_verify_agrees(tmp_path, run, content):
    # Before: a 0-byte (or corrupt) dump file collected with a warning into a bundle that never
    # verified ("unparsable"). The writer describes it as unreadable (header null, parse_error)
    # and warns; verify agrees with that description.
    with open(os.path.join(run.steps[0].path, RELU), "wb") as fh:
        fh.write(content)
    result = write(tmp_path / "b", run)
    assert any(RELU in w and "header not readable" in w for w in result.warnings)
    entry = entries_by_name(bundle.read_bundle(str(tmp_path / "b")))[RELU]
    assert entry["header"] is None and entry["size"] == len(content)
    assert isinstance(entry["parse_error"], str) and entry["parse_error"] in " ".join(result.warnings)
    assert bundle.verify_bundle(str(tmp_path / "b")) == []
    bagit.Bag(str(tmp_path / "b")).validate()


def test_verify_unparsable_dump_file_described_as_readable(tmp_path, run, monkeypatch):
    # A bundle.json claiming a header for a file that does not parse is still a problem.
    from npu_dump_hook.bundle import describe

    with open(os.path.join(run.steps[0].path, RELU), "r+b") as fh:
        fh.write(b"\xff" * 8)
    monkeypatch.setattr(describe, "header_summary", lambda path, *read: {"format": "v2", "inputs": [], "outputs": []})
    result = write(tmp_path / "b", run)
    monkeypatch.undo()
    assert not any("header not readable" in w for w in result.warnings)
    problems = bundle.verify_bundle(str(tmp_path / "b"))
    assert [(p.kind, p.path.rsplit("/", 1)[-1]) for p in problems] == [("unparsable", RELU)]


def test_unreadable_mapping_and_graph_are_described_and_verify_agrees(tmp_path, run):
    with open(os.path.join(run.steps[0].path, "mapping.csv"), "w") as fh:
        fh.write("no comma here\n")
    with open(run.graph_file, "w") as fh:
        fh.write("graph { name: ")
    result = write(tmp_path / "b", run)
    assert any("unreadable mapping.csv" in w for w in result.warnings)
    assert any("graph not scannable" in w for w in result.warnings)
    by = entries_by_name(bundle.read_bundle(str(tmp_path / "b")))
    assert isinstance(by["mapping.csv"].get("parse_error"), str)
    assert isinstance(by[os.path.basename(run.graph_file)].get("parse_error"), str)
    assert bundle.verify_bundle(str(tmp_path / "b")) == []


def test_verify_not_a_bundle(tmp_path):
    (tmp_path / "x").mkdir()
    kinds = {(p.kind, p.path) for p in bundle.verify_bundle(str(tmp_path / "x"))}
    assert ("missing", "bagit.txt") in kinds and ("missing", "data/bundle.json") in kinds
    assert [p.kind for p in bundle.verify_bundle(str(tmp_path / "nope"))] == ["missing"]


def test_listing_names_every_file_of_the_dump_tree_the_graph_and_the_captured_step(tmp_path, run):
    result = write(tmp_path / "b", run, run={"captured_step": 7})
    data = str(tmp_path / "b" / "data")
    on_disk = sorted(os.path.relpath(os.path.join(top, name), data).replace(os.sep, "/")
                     for top, _, names in os.walk(os.path.join(data, "dump")) for name in names)
    listed = sorted(folder + "/" + name for folder, names in result.listing.folders.items() for name in names)
    assert listed == on_disk and len(listed) == result.listing.files > 3
    assert all(size == os.path.getsize(os.path.join(data, folder, name))
               for folder, names in result.listing.folders.items() for name, size in names.items())
    graph = json.load(open(os.path.join(data, "bundle.json")))["graph"]["file"]
    assert result.listing.graph == graph and result.listing.captured_step == 7


def test_listing_hands_over_the_plain_dump_names_it_parsed_and_never_a_hashed_one(tmp_path, run, monkeypatch):
    from npu_dump_hook.formats.names import parse_dump_name
    listing = write(tmp_path / "b", run).listing
    parsed = {folder + "/" + name: dump_name for folder, names in listing.parsed.items()
              for name, dump_name in names.items()}
    plain = []
    for folder, names in listing.folders.items():
        for name in names:
            try:
                dump_name = parse_dump_name(name)
            except Exception:  # not a dump name, or a hashed one (needs its mapping.csv)
                continue
            plain.append(folder + "/" + name)
            assert parsed[folder + "/" + name] == dump_name
    assert sorted(parsed) == sorted(plain) and len(plain) >= 3
    assert all(not name.isdigit() for key in parsed for name in [key.rpartition("/")[2]])
    monkeypatch.setattr(_listing, "PARSED_MAX_FILES", 2)
    capped = write(tmp_path / "c", run).listing
    assert capped.folders == listing.folders and sum(map(len, capped.parsed.values())) <= 2


def test_listing_over_its_cap_is_dropped(tmp_path, run, monkeypatch):
    monkeypatch.setattr(_listing, "LISTING_MAX_FILES", 2)
    assert write(tmp_path / "b", run).listing is None
    listing = _listing.DumpListing("graph/g.txt", 1)
    assert [listing.add(rel, 1) for rel in ("graph/g.txt", "dump/s/a", "dump/s/b", "dump/s/c")] == [True, True, True, False]
    assert _listing.DumpListing.of_head({"graph": {"file": "graph/g.txt.gz"}, "run": {}}).graph is None


# -- archives ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["tar", "tar.gz"])
def test_archive_round_trip(tmp_path, run, fmt):
    result = write(tmp_path / "b", run, archive=fmt)
    assert result.path == str(tmp_path / "b") and result.archive == str(tmp_path / "b") + "." + fmt
    assert bundle.verify_bundle(result.archive) == []
    assert bundle.read_bundle(result.archive) == bundle.read_bundle(result.path)
    only = write(tmp_path / ("only." + fmt), run, archive=fmt)
    assert only.path is None and os.path.isfile(only.archive)
    assert result.listing is not None and only.listing is None  # a listing describes a folder only
    assert sorted(os.listdir(str(tmp_path))) == sorted(["b", "b." + fmt, "only." + fmt, "src"])
    with tarfile.open(only.archive) as tar:
        names = tar.getnames()
    assert "only/bagit.txt" in names and "only/data/bundle.json" in names
    assert bundle.verify_bundle(only.archive) == []


def test_bundle_archived_with_tar_dot_verifies(tmp_path, run):
    # `tar -C b -czf x.tgz .`: members ".", "./bagit.txt", "./data/..." (was "unsafe: member '.'")
    write(tmp_path / "b", run)
    archive = tmp_path / "x.tgz"
    with tarfile.open(str(archive), "w:gz") as tar:
        tar.add(str(tmp_path / "b"), arcname=".")
    assert bundle.verify_bundle(str(archive)) == []
    assert bundle.read_bundle(str(archive)) == bundle.read_bundle(str(tmp_path / "b"))


def test_archive_tampered_and_malicious(tmp_path, run):
    result = write(tmp_path / "b", run, archive="tar")
    with tarfile.open(result.archive) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    bad = tmp_path / "tampered.tar"
    with tarfile.open(str(bad), "w") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        evil = tarfile.TarInfo("b/../../escape")
        tar.addfile(evil, io.BytesIO(b""))
    (problem,) = bundle.verify_bundle(str(bad))  # a failed check, listed, not an exception
    assert problem.kind == "unsafe" and "b/../../escape" in problem.detail
    (tmp_path / "x").mkdir()
    with pytest.raises(UnsafePathError):
        _archive.extract_archive(str(bad), str(tmp_path / "x"))
    assert not (tmp_path / "escape").exists()
    tampered = tmp_path / "t.tar"
    with tarfile.open(str(tampered), "w") as tar:
        for member, data in members:
            if member.name.endswith(RELU):
                data = data[:-1] + bytes([data[-1] ^ 1])
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    assert {(p.kind, p.path.rsplit("/", 1)[-1]) for p in bundle.verify_bundle(str(tampered))} == {("changed", RELU)}


def test_read_bundle_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match="no data/bundle.json"):
        bundle.read_bundle(str(tmp_path / "empty"))
    with pytest.raises(BundleError, match="does not exist"):
        bundle.read_bundle(str(tmp_path / "nope"))


def test_summarize(tmp_path, run):
    write(tmp_path / "b", run)
    text = bundle.summarize(bundle.read_bundle(str(tmp_path / "b")))
    assert "backend emulated" in text
    assert "graph     graph/ge_proto_00000123_graph_1_Build.txt (name {}, stage Build, 7 ops)".format(GRAPH_NAME) in text
    assert "coverage  5/6 ops of the graph have dump files; missing: sub1" in text


# -- multi-rank --------------------------------------------------------------------------------
def _rank_worker(args):
    base, root, rank = args
    os.environ["RANK_ID"] = str(rank)
    os.environ["DEVICE_ID"] = str(rank)
    import pathlib

    located = make_run(pathlib.Path(base) / "src{}".format(rank), device=str(rank))
    result = bundle.write_rank_bundle(root, None, located, backend="emulated", options={}, run={"rank": rank},
                                      randomness=None, link="copy")
    return result.files


def test_concurrent_ranks_share_one_root(tmp_path):
    root = str(tmp_path / "root")
    ranks = 4
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(ranks) as pool:
        counts = pool.map(_rank_worker, [(str(tmp_path), root, r) for r in range(ranks)])
    assert counts == [10] * ranks
    index = bundle.read_index(root)
    assert sorted(index["ranks"]) == ["0", "1", "2", "3"]
    for rank in range(ranks):
        entry = index["ranks"][str(rank)]
        assert entry["path"] == "rank_{}".format(rank) and entry["device_id"] == str(rank)
        assert bundle.verify_bundle(os.path.join(root, entry["path"])) == []
        assert bundle.read_bundle(os.path.join(root, entry["path"]))["dump"]["device_id"] == str(rank)
    # The index lock is a flock on the root itself: no lock file is left behind.
    assert sorted(os.listdir(root)) == ["index.json", "rank_0", "rank_1", "rank_2", "rank_3"]


def test_rank_bundle_records_its_device_id(tmp_path, monkeypatch):
    # Before: a rank given explicitly (as the hook does) left device_id null in index.json.
    monkeypatch.delenv("DEVICE_ID", raising=False)
    root = str(tmp_path / "root")
    kwargs = dict(backend="emulated", options={}, run={}, randomness=None, link="copy")
    bundle.write_rank_bundle(root, 0, make_run(tmp_path / "s0", device="3"), device_id=7, **kwargs)
    bundle.write_rank_bundle(root, 1, make_run(tmp_path / "s1", device="4"), **kwargs)  # from the dump chain
    ranks = bundle.read_index(root)["ranks"]
    assert (ranks["0"]["device_id"], ranks["1"]["device_id"]) == ("7", "4")


def test_rank_from_env():
    assert bundle.rank_from_env({"RANK_ID": "3", "DEVICE_ID": "5"}) == (3, "5")
    assert bundle.rank_from_env({}) == (0, None)
    with pytest.raises(BundleError, match="RANK_ID='x'"):
        bundle.rank_from_env({"RANK_ID": "x"})


def test_progress_bar_only_on_a_tty(monkeypatch):
    import io as _io

    from npu_dump_hook.bundle import _progress

    class FakeTty(_io.StringIO):
        def isatty(self):
            return True

    tty, log = FakeTty(), _io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    quiet = _progress.make_progress(None, 2, 2 * 2 ** 20)
    quiet.update(1, 2 ** 20)
    quiet.close()
    assert log.getvalue() == ""
    monkeypatch.setattr(sys, "stderr", tty)
    bar = _progress.make_progress(None, 2, 2 * 2 ** 20)
    bar.update(1, 2 ** 20)
    bar.update(1, 2 ** 20)
    bar.close()
    assert "\rcollecting [" in tty.getvalue()
    assert "100% 2/2 files 2.0/2.0 MiB" in tty.getvalue() and tty.getvalue().endswith("\n")


@pytest.mark.parametrize("cut", [0.5, 0.9], ids=["half", "tail"])
def test_truncated_compressed_archive_is_an_unparsable_problem(tmp_path, run, cut):
    # A .tar.gz cut short ends in EOFError / zlib.error inside tarfile: verify lists it as one
    # problem instead of raising.
    result = write(tmp_path / "b", run, archive="tar.gz")
    data = open(result.archive, "rb").read()
    short = tmp_path / "short.tar.gz"
    short.write_bytes(data[: int(len(data) * cut)])
    problems = bundle.verify_bundle(str(short))
    assert [p.kind for p in problems] == ["unparsable"] and "damaged tar archive" in problems[0].detail


def test_progress_callback_that_raises_sees_no_file_twice(tmp_path, run, monkeypatch):
    """A progress callback's error ends the write (nothing is left); the counts it was handed are
    not handed again on the way out."""
    monkeypatch.setattr(_placing, "_COUNT_EVERY", 4)
    calls = []

    def progress(*args):
        calls.append(args)
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        write(tmp_path / "b", run, progress=progress)
    assert [c[0] for c in calls] == [4]
    assert not (tmp_path / "b").exists()
