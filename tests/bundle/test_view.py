"""bundle.open_bundle: the one way to open a bundle (folder or archive) and the view it returns;
the one file classifier (describe.classify_file)."""
import hashlib
import io
import json
import os
import tarfile

import pytest

from npu_dump_hook import bundle
from npu_dump_hook._cli_conventions import EXIT_ERROR, EXIT_OK
from npu_dump_hook.bundle import _bagit
from npu_dump_hook.cli import main
from npu_dump_hook.bundle.describe import classify_file, dump_folder_kind
from npu_dump_hook.errors import BundleError, OptionError, UnsafePathError
from npu_dump_hook.golden_run import NpuBundleTarget

from helpers.bundles import HASHED, LONG_NAME, RELU, STATS, list_bundle_json, make_run, tree_state, write


@pytest.fixture
def folder(tmp_path):
    write(tmp_path / "b", make_run(tmp_path / "src"))
    return str(tmp_path / "b")


def _pack(folder, archive, arcname="b"):
    with tarfile.open(archive, "w:gz" if archive.endswith(".gz") else "w") as tar:
        tar.add(folder, arcname=arcname)
    return archive


def _raw_json(folder):
    with open(os.path.join(folder, "data", "bundle.json"), "rb") as handle:
        return handle.read()


def _hand_written(root, doc):
    """A bag holding only the bundle.json ``doc`` (what a hostile or hand-made bundle looks like)."""
    os.makedirs(os.path.join(root, "data"))
    with open(os.path.join(root, "data", "bundle.json"), "w") as handle:
        json.dump(doc, handle)
    return list_bundle_json(root)


# -- a folder --------------------------------------------------------------------------------------
def test_a_folder_is_read_in_place_and_described(folder):
    before = tree_state(folder)
    with bundle.open_bundle(folder) as view:
        assert (view.root, view.archive, view.location) == (folder, False, folder)
        assert view.doc == bundle.read_bundle(folder)
        assert view.bundle_json_sha256 == hashlib.sha256(_raw_json(folder)).hexdigest()
        assert view.identity() == {"bundle_json_sha256": view.bundle_json_sha256, "path": folder,
                                   "created": view.doc["created"], "backend": "emulated"}
        assert len(view.files()) == len(view.doc["files"])
        dumps = view.files("dump")
        assert dumps and all(e["kind"] == "dump" for e in dumps)
        assert os.path.isfile(view.path(dumps[0]["path"]))
        assert view.graph_file() == os.path.join(folder, "data", *view.doc["graph"]["file"].split("/"))
        assert view.dump_dir() == os.path.join(folder, "data", "dump")
        assert (view.golden_dir(), view.golden_manifest(), view.init_files()) == (None, None, [])
        with pytest.raises(ValueError, match="not one of"):
            view.files("dumps")
    assert tree_state(folder) == before


def test_a_folder_without_bundle_json_or_nothing_at_all(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match="has no data/bundle.json"):
        bundle.open_bundle(str(tmp_path / "empty"))
    with pytest.raises(BundleError, match="does not exist"):
        bundle.open_bundle(str(tmp_path / "nope"))


# -- an archive ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, arcname", [("b.tar.gz", "b"), ("b.tar", ".")])
def test_an_archive_is_extracted_and_removed_on_close(tmp_path, folder, name, arcname):
    archive = _pack(folder, str(tmp_path / name), arcname)
    work = tmp_path / "work"
    work.mkdir()
    with bundle.open_bundle(archive, workdir=str(work)) as view:
        assert view.archive and view.location == archive and view.root.startswith(str(work))
        assert view.doc == bundle.read_bundle(folder)
        assert view.bundle_json_sha256 == hashlib.sha256(_raw_json(folder)).hexdigest()
        assert os.path.isfile(view.path(view.files("dump")[0]["path"]))
        assert bundle.verify_bundle(view.root) == []
    assert os.listdir(str(work)) == []


def test_parts_limit_what_an_archive_extracts(tmp_path, folder):
    archive = _pack(folder, str(tmp_path / "b.tar"))
    with bundle.open_bundle(archive, parts=()) as view:
        assert view.dump_dir() is None and view.doc["files"]
        assert sorted(os.listdir(view.data_dir)) == ["bundle.json"]


def test_a_hostile_archive_is_refused_before_anything_is_written(tmp_path, folder):
    evil = str(tmp_path / "evil.tar")
    with tarfile.open(evil, "w") as tar:
        tar.add(folder, arcname="b")
        tar.addfile(tarfile.TarInfo("../escape"), io.BytesIO(b""))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(UnsafePathError, match="escape"):
        bundle.open_bundle(evil, workdir=str(work))
    assert os.listdir(str(work)) == [] and not (tmp_path / "escape").exists()


def test_an_archive_without_bundle_json(tmp_path):
    archive = str(tmp_path / "x.tar")
    with tarfile.open(archive, "w") as tar:
        tar.addfile(tarfile.TarInfo("b/bagit.txt"), io.BytesIO(b""))
    with pytest.raises(BundleError, match="holds no data/bundle.json"):
        bundle.open_bundle(archive)


# -- bundle.json is the one the manifest lists ---------------------------------------------------------
def _edit_json(folder, edit):
    """Change data/bundle.json of ``folder`` by ``edit(doc)`` after the bundle was written (its
    manifest row left as written)."""
    path = os.path.join(folder, "data", "bundle.json")
    doc = json.loads(_raw_json(folder))
    edit(doc)
    with open(path, "w") as handle:
        json.dump(doc, handle)


def _edited_dtype(doc):
    entry = next(e for e in doc["files"] if e["kind"] == "dump" and e.get("header"))
    tensor = (entry["header"].get("outputs") or entry["header"].get("inputs"))[0]
    tensor["dtype"] = "DT_INT8" if tensor["dtype"] != "DT_INT8" else "DT_FLOAT"


@pytest.mark.parametrize("edit", [_edited_dtype, lambda doc: doc.update(backend="stub"),
                                  lambda doc: doc["files"].pop()], ids=["dtype", "backend", "files"])
def test_a_bundle_json_edited_after_writing_is_refused_as_verify_reports_it(tmp_path, folder, edit):
    _edit_json(folder, edit)
    assert ("changed", "data/bundle.json") in [(p.kind, p.path) for p in bundle.verify_bundle(folder)]
    for path in (folder, _pack(folder, str(tmp_path / "b.tar.gz"))):
        for parts in (None, ()):
            with pytest.raises(BundleError) as info:
                bundle.open_bundle(path, parts=parts)
            message = str(info.value)
            assert message.startswith("bundle {}: data/bundle.json: sha256 ".format(path)), message
            assert "its row in manifest-sha256.txt says" in message, message
            assert "npu-dump-hook verify {} tells the rest".format(path) in message, message


def test_the_compare_command_refuses_an_edited_bundle_json(tmp_path, folder, capsys):
    assert main(["compare", folder]) == EXIT_OK  # golden-free checks, nothing wrong
    capsys.readouterr()
    _edit_json(folder, lambda doc: doc.update(backend="stub"))
    assert main(["compare", folder]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "data/bundle.json" in err and "manifest-sha256.txt" in err and "npu-dump-hook verify" in err, err


def _manifest(folder):
    return os.path.join(folder, "manifest-sha256.txt")


def test_a_bundle_without_a_manifest_row_for_bundle_json_is_refused(tmp_path, folder):
    with open(_manifest(folder)) as handle:
        rows = handle.read().splitlines()
    with open(_manifest(folder), "w") as handle:
        handle.write("".join(row + "\n" for row in rows if not row.endswith(" data/bundle.json")))
    with pytest.raises(BundleError, match="manifest-sha256.txt has no row for it"):
        bundle.open_bundle(folder)
    os.unlink(_manifest(folder))
    with pytest.raises(BundleError, match="the bag has no manifest-sha256.txt"):
        bundle.open_bundle(folder)
    os.mkfifo(_manifest(folder))  # never waited on
    with pytest.raises(BundleError, match="manifest-sha256.txt cannot be read: .*a FIFO"):
        bundle.open_bundle(folder)


def test_a_symlinked_manifest_is_not_read(tmp_path, folder):
    real = tmp_path / "elsewhere.txt"
    os.rename(_manifest(folder), str(real))
    os.symlink(str(real), _manifest(folder))
    with pytest.raises(BundleError, match="manifest-sha256.txt cannot be read"):
        bundle.open_bundle(folder)


def test_the_row_is_found_as_verify_parses_it_past_long_and_malformed_lines(folder):
    digest = hashlib.sha256(_raw_json(folder)).hexdigest()
    other = "0" * 64
    text = ("junk\n" + other + "  data/" + "x" * (3 * _bagit.MAX_ROW_BYTES) + "\n"
            + "".join("{}  data/dump/f{:06d}\r\n".format(other, n) for n in range(20000))
            + "{}\t./data//bundle.json".format(digest.upper()))  # no final newline, CRLF before
    with open(_manifest(folder), "w") as handle:
        handle.write(text)
    with bundle.open_bundle(folder) as view:
        assert view.bundle_json_sha256 == digest
    assert _bagit.read_manifest(_manifest(folder), [], "m")["data/bundle.json"] == digest


def test_manifest_digest_reads_no_further_than_the_row(folder):
    with open(_manifest(folder), "ab") as handle:
        handle.write(b"x" * (4 * _bagit.MAX_ROW_BYTES))  # a long last line: never read
    with open(_manifest(folder), "rb") as handle:
        assert _bagit.manifest_digest(handle, "data/bundle.json") == hashlib.sha256(_raw_json(folder)).hexdigest()
        assert handle.tell() < 2 * _bagit.MAX_ROW_BYTES


# -- paths stay in the bag -------------------------------------------------------------------------
@pytest.mark.parametrize("rel, rule", [("../outside", "escapes"), ("init/../../x", "escapes"),
                                       ("/etc/passwd", "absolute"), ("", "empty")])
def test_path_refuses_leaving_the_bag(folder, rel, rule):
    with bundle.open_bundle(folder) as view:
        with pytest.raises(UnsafePathError, match=rule) as info:
            view.path(rel)
    assert folder in str(info.value) and "data/{}".format(rel) in str(info.value)


def test_path_refuses_going_through_a_symlink(tmp_path, folder):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(folder, "data", "init"))
    with bundle.open_bundle(folder) as view:
        with pytest.raises(UnsafePathError, match="data/init is a symlink"):
            view.path("init/model.ckpt.index")
        assert os.path.isfile(view.path(view.files("dump")[0]["path"]))


def test_a_symlinked_bundle_json_is_not_read(tmp_path, folder):
    real = tmp_path / "elsewhere.json"
    real.write_bytes(_raw_json(folder))
    os.unlink(os.path.join(folder, "data", "bundle.json"))
    os.symlink(str(real), os.path.join(folder, "data", "bundle.json"))
    with pytest.raises(UnsafePathError, match="data/bundle.json is a symlink"):
        bundle.open_bundle(folder)


def test_the_graph_and_init_paths_bundle_json_names_stay_in_the_bag(tmp_path):
    # refused when the bundle is opened (the document names them), before any accessor is reached
    graph = _hand_written(str(tmp_path / "graph"), {
        "backend": "emulated", "run": {"captured_step": 0}, "graph": {"file": "../../their_model/Build.txt"}})
    with pytest.raises(UnsafePathError, match=r"data/\.\./\.\./their_model/Build.txt") as info:
        bundle.open_bundle(graph)
    assert "named by data/bundle.json graph.file" in str(info.value), info.value
    init = _hand_written(str(tmp_path / "init"), {
        "backend": "emulated", "run": {"captured_step": 0},
        "files": [{"kind": "init", "path": "init/../../victim/model.ckpt.index", "size": 1, "sha256": None}]})
    with pytest.raises(UnsafePathError, match="victim") as info:
        bundle.open_bundle(init)
    assert "named by data/bundle.json files[0]" in str(info.value), info.value


def test_the_golden_run_refuses_an_init_path_leaving_the_bundle(tmp_path):
    root = _hand_written(str(tmp_path / "b"), {
        "backend": "emulated", "run": {"captured_step": 0}, "created": "now",
        "files": [{"kind": "init", "path": "init/../../victim/model.ckpt.index", "size": 1, "sha256": None}]})
    with pytest.raises(OptionError, match="init/../../victim"):
        NpuBundleTarget.open(root, need_checkpoint=True)


def test_the_golden_manifest_name_is_the_one_the_capture_writes():
    from npu_dump_hook.reference import MANIFEST_NAME

    assert bundle.GOLDEN_MANIFEST == MANIFEST_NAME


# -- one file classifier ---------------------------------------------------------------------------
@pytest.mark.parametrize("base, mapped, kind, folder_kind, note", [
    ("mapping.csv", False, "mapping", "mapping", None),
    ("ge_proto_00000123_graph_1_Build.txt", False, "graph", "other", None),
    ("ge_onnx_00000123_graph_1_Build.pbtxt", False, "graph", "other", None),
    (RELU, False, "dump", "dump", None),
    (STATS, False, "stats", "stats", None),
    (HASHED, True, "dump", "dump", None),
    (HASHED, False, "dump", "other", "hashed name without a mapping.csv entry"),
    ("notes.txt", False, "other", "other", None),
])
def test_one_classifier_answers_for_parse_and_for_bundle_writing(base, mapped, kind, folder_kind, note):
    mapping = {HASHED: LONG_NAME} if mapped else {}
    found = classify_file(base, mapping)
    assert (found.kind, found.note) == (kind, note)
    assert (found.name is not None) == (folder_kind not in ("mapping", "other"))
    assert (found.graph is not None) == (kind == "graph")
    assert dump_folder_kind(base, mapping)[0::2] == (folder_kind, note)


def test_a_dump_file_replaced_by_a_symlink_is_refused_after_its_folder_was_checked(tmp_path, folder):
    """dump_dir() looks at each folder once (symlink_on's ``clean`` set): a link among the files
    of a folder already found clean is still refused, by its name."""
    with bundle.open_bundle(folder) as view:
        dumps = sorted(e["path"] for e in view.files("dump"))
    victim = dumps[-1]  # checked after its siblings in the same step folder
    local = os.path.join(folder, "data", *victim.split("/"))
    size = os.path.getsize(local)
    outside = tmp_path / "outside"
    outside.write_bytes(b"\0" * size)
    os.unlink(local)
    os.symlink(str(outside), local)
    with bundle.open_bundle(folder) as view:
        with pytest.raises(UnsafePathError, match="data/{} is a symlink".format(victim.replace(".", r"\."))):
            view.dump_dir()


def test_symlink_on_with_a_clean_set_answers_as_without_it(tmp_path):
    from npu_dump_hook.bundle._rules import symlink_on
    data = tmp_path / "data"
    (data / "a" / "b").mkdir(parents=True)
    for name in ("f1", "f2"):
        (data / "a" / "b" / name).write_bytes(b"x")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), str(data / "a" / "link"))
    os.symlink(str(data / "a" / "b" / "f1"), str(data / "a" / "b" / "flink"))
    paths = [["a", "b", "f1"], ["a", "b", "f2"], ["a", "link", "x"], ["a", "b", "flink"], ["a", "gone", "f"],
             ["a", "b", "f1", "below_a_file"], ["a", "b", "f2"]]
    clean = set()
    found = [symlink_on(str(data), parts, clean) for parts in paths]
    assert found == [symlink_on(str(data), parts) for parts in paths]
    assert found == [None, None, "data/a/link", "data/a/b/flink", None, None, None]
    assert {(), ("a",), ("a", "b")} <= clean and ("a", "link") not in clean
