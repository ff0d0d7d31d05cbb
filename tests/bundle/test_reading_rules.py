"""The reading rules (docs/bundle-format.md section 4, issue #20 "One way in"): every hostile bundle
is built here, and each consumer (the golden run's target, compare, verify, inspect) refuses it
with the package's error, naming the path and the rule, before anything is read or restored."""
import hashlib
import io
import json
import os
import signal
import tarfile
import time

import numpy as np
import pytest

from npu_dump_hook import bundle
from npu_dump_hook.bundle import _archive, _bagit, _fs
from npu_dump_hook.cli import main
from npu_dump_hook.compare import compare
from npu_dump_hook.errors import BundleError, OptionError, UnsafePathError
from npu_dump_hook.golden_run import NpuBundleTarget

from helpers.bundles import list_bundle_json, make_run, write
from helpers.compare_synth import Synth, chain

INDEX = "init/model.ckpt.index"
DATA = "init/model.ckpt.data-00000-of-00001"


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _npu_bundle(root, files=None, sha256=True):
    """A hand-made NPU bundle whose data/init/ holds a two-file checkpoint (bytes, not TF's)."""
    data = os.path.join(str(root), "data")
    os.makedirs(os.path.join(data, "init"))
    entries = []
    for rel, payload in (files or {INDEX: b"index bytes", DATA: b"weights"}).items():
        with open(os.path.join(data, *rel.split("/")), "wb") as handle:
            handle.write(payload)
        entries.append({"path": rel, "kind": "init", "size": len(payload),
                        "sha256": _sha(payload) if sha256 else None})
    _write_doc(root, {"backend": "emulated", "created": "now", "run": {"captured_step": 0}, "files": entries})
    return str(root)


def _write_doc(root, doc):
    with open(os.path.join(str(root), "data", "bundle.json"), "w") as handle:
        json.dump(doc, handle)
    list_bundle_json(root)


def _doc(root):
    with open(os.path.join(str(root), "data", "bundle.json")) as handle:
        return json.load(handle)


# -- 1. the golden run refuses before restoring anything ---------------------------------------------
def test_a_good_hand_made_target_passes_and_hashes_its_checkpoint(tmp_path):
    root = _npu_bundle(tmp_path / "b")
    target = NpuBundleTarget.open(root)
    assert target.checkpoint_prefix(str(tmp_path / "scratch")) == os.path.join(root, "data", "init", "model.ckpt")
    target.close()


def test_a_null_sha256_on_an_init_file_is_not_verifiable(tmp_path):
    root = _npu_bundle(tmp_path / "b", sha256=False)
    with pytest.raises(OptionError, match=r"data/init/model\.ckpt\.\S+: not verifiable") as info:
        NpuBundleTarget.open(root)
    assert info.value.option == "initial_state"


def test_a_symlinked_init_file_is_refused_and_its_target_never_read(tmp_path):
    victim = tmp_path / "victim.index"
    victim.write_bytes(b"index bytes")
    root = _npu_bundle(tmp_path / "b")
    os.unlink(os.path.join(root, "data", *INDEX.split("/")))
    os.symlink(str(victim), os.path.join(root, "data", *INDEX.split("/")))
    with pytest.raises(OptionError, match=r"data/init/model\.ckpt\.index is a symlink"):
        NpuBundleTarget.open(root)


def test_a_symlinked_init_folder_is_refused(tmp_path):
    root = _npu_bundle(tmp_path / "b")
    os.rename(os.path.join(root, "data", "init"), str(tmp_path / "elsewhere"))
    os.symlink(str(tmp_path / "elsewhere"), os.path.join(root, "data", "init"))
    with pytest.raises(OptionError, match="data/init is a symlink"):
        NpuBundleTarget.open(root)


def test_a_checkpoint_whose_bytes_differ_is_refused_before_the_restore(tmp_path):
    root = _npu_bundle(tmp_path / "b")
    with open(os.path.join(root, "data", *DATA.split("/")), "r+b") as handle:
        handle.write(b"W")  # same size, other bytes
    target = NpuBundleTarget.open(root)  # cheap checks pass: sizes agree
    with pytest.raises(OptionError, match=r"model\.ckpt\.data-00000-of-00001: sha256 differs"):
        target.checkpoint_prefix(str(tmp_path / "scratch"))


@pytest.mark.parametrize("damage, rule", [("size", "size 3 but bundle.json says 7"), ("fifo", "is a FIFO")])
def test_an_init_file_of_another_size_or_a_fifo_is_refused_at_open(tmp_path, damage, rule):
    root = _npu_bundle(tmp_path / "b")
    local = os.path.join(root, "data", *DATA.split("/"))
    os.unlink(local)
    if damage == "size":
        with open(local, "wb") as handle:
            handle.write(b"abc")
    else:
        os.mkfifo(local)
    with pytest.raises(OptionError, match=rule):
        NpuBundleTarget.open(root)


def test_an_init_path_leaving_the_bag_is_refused_even_with_a_sha256(tmp_path):
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "model.ckpt.index").write_bytes(b"x")
    root = _npu_bundle(tmp_path / "b")
    doc = _doc(root)
    doc["files"][0].update(path="init/../../victim/model.ckpt.index", sha256=_sha(b"x"), size=1)
    _write_doc(root, doc)
    with pytest.raises(OptionError, match=r"init/\.\./\.\./victim/model\.ckpt\.index: .*escapes"):
        NpuBundleTarget.open(root)


# -- 2. types of every known key: verify, inspect, the golden run, compare ----------------------------
def _mutations():
    def at(section, key, value):
        return lambda doc: doc[section].__setitem__(key, value)

    def entry(key, value):
        return lambda doc: doc["files"][0].__setitem__(key, value)

    def top(key, value):
        return lambda doc: doc.__setitem__(key, value)

    return [
        ("graph list", top("graph", [])), ("graph string", top("graph", "g")), ("files object", top("files", {})),
        ("files of numbers", top("files", [1])), ("run list", top("run", [])), ("dump string", top("dump", "d")),
        ("coverage list", top("coverage", [])), ("warnings string", top("warnings", "w")),
        ("versions list", top("versions", [])), ("randomness list", top("randomness", [])),
        ("fingerprints list", top("fingerprints", [])), ("created number", top("created", 5)),
        ("graph.file number", at("graph", "file", 5)), ("graph.op_count string", at("graph", "op_count", "7")),
        ("run.steps string", at("run", "steps", "1")), ("run.captured_step string", at("run", "captured_step", "0")),
        ("dump.steps string", at("dump", "steps", "0")), ("dump.steps of numbers", at("dump", "steps", [0])),
        ("dump.chains object", at("dump", "chains", {})), ("coverage.missing string", at("coverage", "missing", "a")),
        ("coverage.dumped string", at("coverage", "dumped", "5")), ("file size string", entry("size", "12")),
        ("file size bool", entry("size", True)), ("file path number", entry("path", 5)),
        ("file header string", entry("header", "h")), ("file kind list", entry("kind", ["dump"])),
    ]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    write(root / "b", make_run(root / "src"), run={"steps": 1, "global_step": 0, "rank": 0, "device_id": 0,
                                                   "captured_step": 0})
    return root / "b"


def _hostile_copy(good, dest, mutate):
    """``good`` copied to ``dest`` with its bundle.json mutated and the bag's manifests rewritten, so
    that only the schema is wrong."""
    import shutil

    shutil.copytree(str(good), str(dest))
    doc = _doc(dest)
    mutate(doc)
    _write_doc(dest, doc)
    payload = []
    for found in _fs.walk_files(str(dest / "data")):
        size, digest = _fs.sha256_file(found.path)
        payload.append((found.rel, size, digest))
    _bagit.write_tag_files(str(dest), payload, "test", "2024-01-01", "rehashed")
    return dest


@pytest.mark.parametrize("name, mutate", _mutations(), ids=[m[0] for m in _mutations()])
def test_a_known_key_of_the_wrong_type_is_a_schema_problem_and_the_packages_error(tmp_path, good, capsys, name,
                                                                                    mutate):
    root = _hostile_copy(good, tmp_path / "b", mutate)
    problems = bundle.verify_bundle(str(root))
    assert problems and {p.kind for p in problems} <= {"schema", "extra", "missing", "unsafe"}, problems
    assert any(p.kind == "schema" for p in problems), problems
    assert main(["verify", str(root)]) == 1
    for argv in (["inspect", str(root)], ["inspect", "--json", str(root)]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err and "wrong type" in err, err
    with pytest.raises(OptionError, match="wrong type"):
        NpuBundleTarget.open(str(root))
    with pytest.raises(BundleError, match="wrong type"):
        compare(str(root))


def test_the_good_bundle_has_no_type_problem(good, capsys):
    assert bundle.verify_bundle(str(good)) == []
    assert main(["inspect", "--json", str(good)]) == 0
    assert json.loads(capsys.readouterr().out)["verification"]["ok"] is True


@pytest.mark.parametrize("raw, rule", [
    (b"[" * 100000 + b"]" * 100000, "not a JSON object|deeper than 64"),
    (b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}", "deeper than 64"),
    (b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}", "deeper than 64"),
    (b'{"files": [{"path": "dump/\\ud800x", "size": 1, "kind": "other"}]}', "lone surrogate"),
    (b'{"created": "\\udcff"}', "lone surrogate"),
])
def test_deep_nesting_and_lone_surrogates_are_the_packages_error(tmp_path, capsys, raw, rule):
    root = tmp_path / "b"
    (root / "data").mkdir(parents=True)
    (root / "data" / "bundle.json").write_bytes(raw)
    list_bundle_json(root)
    with pytest.raises(BundleError, match=rule):
        bundle.open_bundle(str(root))
    problems = bundle.verify_bundle(str(root))
    assert any(p.kind == "unparsable" and p.path == "data/bundle.json" for p in problems), problems
    for argv in (["verify", str(root)], ["inspect", str(root)]):
        assert main(argv) == 1
        assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(OptionError):
        NpuBundleTarget.open(str(root))


def test_a_surrogate_pair_is_text_and_accepted(tmp_path):
    root = tmp_path / "b"
    (root / "data").mkdir(parents=True)
    (root / "data" / "bundle.json").write_bytes(b'{"created": "\\ud83d\\ude00"}')
    list_bundle_json(root)
    with bundle.open_bundle(str(root)) as view:
        assert view.doc["created"] == "\U0001F600"


def test_a_bundle_json_above_the_size_cap_is_refused_before_it_is_read(tmp_path, capsys):
    root = tmp_path / "b"
    (root / "data").mkdir(parents=True)
    with open(str(root / "data" / "bundle.json"), "wb") as handle:
        handle.write(b'{"warnings": ["')
        handle.truncate(bundle._document.MAX_BUNDLE_JSON_BYTES + 16)  # sparse: nothing to parse in time
    with pytest.raises(BundleError, match="above the 64 MiB a reader parses"):
        bundle.open_bundle(str(root))
    assert main(["inspect", "--json", str(root)]) == 1
    assert "above the 64 MiB" in capsys.readouterr().err


# -- verify checks the same read paths ------------------------------------------------------------------
def test_verify_reports_a_graph_file_leaving_the_bag_and_a_null_init_sha256(tmp_path, good):
    def mutate(doc):
        doc["graph"]["file"] = "../../someone_elses_model/ge_proto_1_Build.txt"
        doc["files"].append({"path": "init/model.ckpt.index", "kind": "init", "size": 1, "sha256": None})

    root = _hostile_copy(good, tmp_path / "b", mutate)
    details = [p.detail for p in bundle.verify_bundle(str(root)) if p.kind == "schema"]
    assert any(d.startswith("graph.file '../../someone_elses_model") and "escapes" in d for d in details), details
    assert any(d.startswith("files[") and "init/model.ckpt.index: not verifiable" in d for d in details), details


# -- 3. compare reads nothing outside the bundle -------------------------------------------------------------
def _synth_bundle(root, **extra):
    synth = Synth(root)
    chain(synth, 3, np.arange(6, dtype=np.float32))
    return synth.bundle(extra or None)


def _step_dir(folder):
    for dirpath, _dirs, files in os.walk(folder):
        if any(name.startswith("Add.") for name in files):
            return dirpath
    raise AssertionError("no step folder under {}".format(folder))


def test_compare_refuses_a_graph_file_leaving_the_bundle(tmp_path):
    (tmp_path / "someone_elses_model").mkdir()
    outside = tmp_path / "someone_elses_model" / "ge_proto_1_Build.txt"
    outside.write_text("not read")
    root = _synth_bundle(tmp_path / "run", graph={"file": "../../someone_elses_model/ge_proto_1_Build.txt"})
    with pytest.raises(UnsafePathError, match="escapes"):
        compare(root, workers=1)


_OUTSIDE = [("../../../etc/passwd", "escapes its root"), ("dump/../../../etc/passwd", "escapes its root"),
            ("/etc/passwd", "is absolute")]


@pytest.mark.parametrize("path, rule", _OUTSIDE)
def test_compare_refuses_a_bundle_json_listing_a_file_outside_the_bundle(tmp_path, path, rule):
    """compare never read it (it scans its dump folder) but compared as usual while the document
    lies; opening the bundle refuses it, naming bundle.json, the entry and verify's rule."""
    root = _synth_bundle(tmp_path / "run", files=[{"path": path, "kind": "dump", "size": 11, "sha256": None}])
    with pytest.raises(UnsafePathError) as info:
        compare(root, workers=1)
    message = str(info.value)
    assert "data/bundle.json files[0]" in message and repr(path) in message and rule in message, message


@pytest.mark.parametrize("path, rule", _OUTSIDE[:1] + _OUTSIDE[2:])
def test_inspect_refuses_it_and_verify_reports_it_by_the_same_rule(tmp_path, good, capsys, path, rule):
    root = _hostile_copy(good, tmp_path / "b", lambda doc: doc["files"].append(
        {"path": path, "kind": "dump", "size": 11, "sha256": None}))
    where = "files[{}]".format(len(_doc(root)["files"]) - 1)
    assert main(["inspect", str(root)]) == 1
    err = capsys.readouterr().err
    assert "data/bundle.json " + where in err and rule in err, err
    problems = [p for p in bundle.verify_bundle(str(root)) if p.kind == "unsafe"]
    assert any(p.detail.startswith(where) and rule in p.detail for p in problems), problems


def test_compare_skips_a_symlinked_dump_file_and_never_reads_its_target(tmp_path):
    root = _synth_bundle(tmp_path / "run")
    step = _step_dir(os.path.join(root, "data", "dump"))
    victim = tmp_path / "passwd"
    victim.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    name = sorted(n for n in os.listdir(step) if n.startswith("Add."))[-1]
    os.unlink(os.path.join(step, name))
    os.symlink(str(victim), os.path.join(step, name))
    result = compare(root, workers=1)
    assert "root:x" not in json.dumps(result.doc)
    assert all(row.get("npu_file") != name for row in result.doc["rows"])
    assert any("skipped symlink" in w and name in w for w in result.doc["warnings"]), result.doc["warnings"]


def test_compare_refuses_a_listed_dump_file_that_is_a_symlink(tmp_path):
    root = _synth_bundle(tmp_path / "run")
    step = _step_dir(os.path.join(root, "data", "dump"))
    name = sorted(n for n in os.listdir(step) if n.startswith("Add."))[-1]
    rel = os.path.relpath(os.path.join(step, name), os.path.join(root, "data")).replace(os.sep, "/")
    doc = _doc(root)
    doc["files"] = [{"path": rel, "kind": "dump", "size": os.path.getsize(os.path.join(step, name))}]
    _write_doc(root, doc)
    (tmp_path / "victim").write_bytes(b"root:x:0:0")
    os.unlink(os.path.join(step, name))
    os.symlink(str(tmp_path / "victim"), os.path.join(step, name))
    with pytest.raises(UnsafePathError, match="{} is a symlink".format(name)):
        compare(root, workers=1)


def test_compare_skips_symlinked_golden_files(tmp_path):
    root = _synth_bundle(tmp_path / "run")
    golden = os.path.join(root, "data", "golden")
    name = sorted(os.listdir(golden))[0]
    moved = tmp_path / name
    os.rename(os.path.join(golden, name), str(moved))
    os.symlink(str(moved), os.path.join(golden, name))
    result = compare(root, workers=1)
    assert any(name in w and "a symlink" in w for w in result.doc["warnings"]), result.doc["warnings"]


def _alarm(seconds):
    def _hung(signum, frame):
        raise AssertionError("blocked: compare opened a FIFO")

    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(seconds)


def test_compare_of_a_plain_dump_folder_never_opens_fifos_or_links_out(tmp_path):
    synth = Synth(tmp_path / "run")
    chain(synth, 3, np.arange(6, dtype=np.float32))
    graph, step, golden = synth.write()
    (tmp_path / "outside").write_bytes(b"root:x:0:0")
    os.mkfifo(os.path.join(step, "Add.op_add_9.9.0.1700000000000090"))
    os.mkfifo(str(tmp_path / "fifo"))
    os.symlink(str(tmp_path / "fifo"), os.path.join(step, "Add.op_add_8.8.0.1700000000000080"))
    os.symlink(str(tmp_path / "outside"), os.path.join(step, "Add.op_add_7.7.0.1700000000000070"))
    os.mkfifo(os.path.join(step, "mapping.csv"))
    _alarm(60)
    try:
        result = compare(step, golden, graph=graph, workers=1, allow_uncompared=True)  # skipped files: incomplete
    finally:
        signal.alarm(0)
    warnings = "\n".join(result.doc["warnings"])
    assert warnings.count("skipped special file") == 2, warnings  # the FIFO dump file and mapping.csv
    assert warnings.count("skipped symlink") == 2, warnings
    assert "root:x" not in json.dumps(result.doc)
    assert result.exit_code == 0, result.summary_text()


def test_a_plain_golden_folder_skips_fifos_and_links_out(tmp_path):
    from npu_dump_hook.compare._golden import index_npy_dir

    folder = tmp_path / "golden"
    folder.mkdir()
    np.save(str(folder / "a.0.1700000000000000.npy"), np.ones(2))
    os.mkfifo(str(folder / "b.0.1700000000000000.npy"))
    np.save(str(tmp_path / "c.npy"), np.ones(2))
    os.symlink(str(tmp_path / "c.npy"), str(folder / "c.0.1700000000000000.npy"))
    os.symlink("a.0.1700000000000000.npy", str(folder / "d.0.1700000000000000.npy"))
    files, skipped = index_npy_dir(str(folder))
    assert sorted(files) == ["a.0", "d.0"] and files["d.0"] == os.path.realpath(str(folder / "a.0.1700000000000000.npy"))
    assert skipped == ["b.0.1700000000000000.npy (a FIFO, device or socket; not read)",
                       "c.0.1700000000000000.npy (a symlink out of the folder; not read)"]


# -- 4. bounded cost ------------------------------------------------------------------------------------------
def test_an_archive_of_many_empty_members_is_refused_fast_and_writes_nothing(tmp_path):
    archive = str(tmp_path / "many.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for number in range(_archive.FREE_MEMBERS + 500):
            tar.addfile(tarfile.TarInfo("b/data/x{}".format(number)), io.BytesIO(b""))
    assert os.path.getsize(archive) // _archive.BYTES_PER_MEMBER < _archive.FREE_MEMBERS
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    with pytest.raises(UnsafePathError, match="more than {} members".format(_archive.FREE_MEMBERS)):
        bundle.open_bundle(archive, workdir=str(work))
    assert time.monotonic() - started < 30 and os.listdir(str(work)) == []
    assert [p.kind for p in bundle.verify_bundle(archive)] == ["unsafe"]


def test_sigterm_during_extraction_removes_the_temporary_folder_and_restores_the_default(tmp_path, good,
                                                                                          monkeypatch):
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM already has a handler in this process")
    archive = str(tmp_path / "b.tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(str(good), arcname="b")
    real = _archive._extract_member

    def _terminated_midway(*args):
        real(*args)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(_archive, "_extract_member", _terminated_midway)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(_archive.Terminated) as info:
        bundle.open_bundle(archive, workdir=str(work))
    assert info.value.code == 128 + signal.SIGTERM
    assert os.listdir(str(work)) == [] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_handler_the_process_chose_is_kept(tmp_path, good):
    archive = str(tmp_path / "b.tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(str(good), arcname="b")

    def _users(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, _users)
    try:
        with bundle.open_bundle(archive) as view:
            assert view.doc and signal.getsignal(signal.SIGTERM) is _users
        assert signal.getsignal(signal.SIGTERM) is _users
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_fifo_index_json_is_refused_without_blocking(tmp_path):
    from npu_dump_hook.bundle.index import read_index

    os.mkfifo(str(tmp_path / "index.json"))
    with pytest.raises(OSError, match="FIFO|not a regular file"):
        read_index(str(tmp_path))
