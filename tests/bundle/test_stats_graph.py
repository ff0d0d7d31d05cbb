"""The compressed Build graph of a statistics bundle (issue 23's 2% target; docs/bundle-format.md
rule 9): one stats bundle of the MLP (emulated NPU, real TF, built once for the module) checked
for the member and its record, then rewritten three ways: as the old writer wrote it (plain
``.txt``, still opens, verifies and compares), with a decompression bomb as its graph (refused
naming the file, nothing written), and tampered within the bounds (refused by the sha256)."""
import gzip
import hashlib
import json
import os
import shutil
import tempfile

import pytest

from npu_dump_hook import DumpOptions, NpuDumpHook
from npu_dump_hook.bundle import open_bundle, verify_bundle
from npu_dump_hook.bundle import _bagit
from npu_dump_hook.bundle._graph_text import (GRAPH_RATIO_FREE_BYTES, expand_graph, expansion_bound,
                                              graph_text_problems)
from npu_dump_hook.compare import compare
from npu_dump_hook.errors import BundleError, UnsafePathError


@pytest.fixture(scope="module")
def stats_bundle(tmp_path_factory):
    """A statistics bundle of the MLP, exact profile (it is its own golden: compare needs no second run)."""
    from npu_dump_hook.sample_models import mlp_session

    root = tmp_path_factory.mktemp("stats_graph")
    options = DumpOptions(enable_dump=True, dump_path=str(root / "dump"), dump_data="stats")
    hook = NpuDumpHook(options, output_dir=str(root / "npu"), backend="emulated")
    mlp_session.train(hook.options, hooks=[hook], steps=1000)
    return hook.bundle.location


def _doc(bundle):
    with open(os.path.join(bundle, "data", "bundle.json")) as handle:
        return json.load(handle)


def _rewrite(bundle, target, graph_bytes, graph_rel, text=None):
    """A copy of ``bundle`` at ``target`` whose graph is ``graph_bytes`` at ``graph_rel`` (files[],
    graph.file, graph.text and the BagIt manifests made to agree): what another writer could ship."""
    shutil.copytree(bundle, target)
    doc = _doc(target)
    old = os.path.join(target, "data", *doc["graph"]["file"].split("/"))
    os.unlink(old)
    with open(os.path.join(target, "data", *graph_rel.split("/")), "wb") as handle:
        handle.write(graph_bytes)
    entry = next(e for e in doc["files"] if e["path"] == doc["graph"]["file"])
    entry.update(path=graph_rel, size=len(graph_bytes), sha256=hashlib.sha256(graph_bytes).hexdigest())
    doc["graph"]["file"] = graph_rel
    doc["graph"].pop("text", None)
    if text is not None:
        doc["graph"]["text"] = text
    with open(os.path.join(target, "data", "bundle.json"), "w") as handle:
        json.dump(doc, handle)
    rows = []
    for folder, _, names in os.walk(os.path.join(target, "data")):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                body = handle.read()
            rows.append((os.path.relpath(path, os.path.join(target, "data")).replace(os.sep, "/"), len(body),
                         hashlib.sha256(body).hexdigest()))
    _bagit.write_tag_files(target, rows, "test", "2026-12-02", "rewritten")
    return target


def _plain_text(bundle):
    doc = _doc(bundle)
    with gzip.open(os.path.join(bundle, "data", *doc["graph"]["file"].split("/"))) as handle:
        return handle.read()


def test_the_stats_bundle_keeps_its_graph_compressed_and_checkable(stats_bundle):
    doc = _doc(stats_bundle)
    graph = doc["graph"]
    assert graph["file"].endswith("_Build.txt.gz") and graph["json"] is None
    assert os.listdir(os.path.join(stats_bundle, "data", "graph")) == [graph["file"].split("/")[-1]]
    text = _plain_text(stats_bundle)
    assert graph["text"] == {"compression": "gzip", "size": len(text), "sha256": hashlib.sha256(text).hexdigest()}
    member = next(e for e in doc["files"] if e["path"] == graph["file"])
    assert member["kind"] == "graph" and member["size"] * 10 < len(text)  # the size bound: >= 10:1 (measured ~37:1)
    assert b"\ngraph {\n" in text and graph["op_count"] > 50
    assert verify_bundle(stats_bundle) == []
    before = sorted(os.listdir(os.path.join(stats_bundle, "data", "graph")))
    with open_bundle(stats_bundle) as view:
        expanded = view.graph_file()
        assert not expanded.startswith(stats_bundle) and expanded.endswith("_Build.txt")
        with open(expanded, "rb") as handle:
            assert handle.read() == text
    assert not os.path.exists(expanded)  # the view's scratch folder went at close
    assert sorted(os.listdir(os.path.join(stats_bundle, "data", "graph"))) == before  # nothing written in it
    result = compare(stats_bundle, workers=1)
    assert result.doc["mode"] == "stats" and result.exit_code == 0, result.summary_text()
    assert result.doc["summary"]["compared"] > 50
    # The report names the bundle's own member, not the scratch file it was expanded into (gone now).
    assert result.doc["npu"]["graph"] == os.path.join(stats_bundle, "data", graph["file"])


def test_an_old_stats_bundle_with_plain_graph_text_still_opens_verifies_and_compares(stats_bundle, tmp_path):
    doc = _doc(stats_bundle)
    old = _rewrite(stats_bundle, str(tmp_path / "old"), _plain_text(stats_bundle), doc["graph"]["file"][:-3])
    assert verify_bundle(old) == []
    with open_bundle(old) as view:
        assert view.graph_file() == os.path.join(old, "data", "graph", doc["graph"]["file"][6:-3])
    new_rows = compare(stats_bundle, workers=1).doc["rows"]
    old_rows = compare(old, workers=1).doc["rows"]
    assert [(r["npu_op"], r["status"]) for r in old_rows] == [(r["npu_op"], r["status"]) for r in new_rows]


def test_a_decompression_bomb_as_graph_is_refused_naming_the_file(stats_bundle, tmp_path, monkeypatch):
    doc = _doc(stats_bundle)
    expands_to = GRAPH_RATIO_FREE_BYTES + (8 << 20)  # past the floor; ~24 KB of gzip: far past 200:1
    bomb = gzip.compress(b"\0" * expands_to, 9)
    assert expansion_bound(len(bomb)) == GRAPH_RATIO_FREE_BYTES
    rel = doc["graph"]["file"]
    hostile = _rewrite(stats_bundle, str(tmp_path / "bomb"), bomb, rel,
                       {"compression": "gzip", "size": expands_to, "sha256": "0" * 64})  # the listing is no help
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    listing = sorted(os.path.join(d, f) for d, _, fs in os.walk(hostile) for f in fs)
    with pytest.raises(UnsafePathError, match=r"data/{}: expands past 16,777,216 bytes.*decompression bomb".format(
            rel.replace(".", r"\."))):
        compare(hostile, workers=1)
    problems = verify_bundle(hostile)
    assert [(p.kind, p.path) for p in problems] == [("unsafe", "data/" + rel)], problems
    assert sorted(os.path.join(d, f) for d, _, fs in os.walk(hostile) for f in fs) == listing
    assert os.listdir(str(scratch)) == []  # the partial text and the scratch folders are gone


@pytest.mark.parametrize("damage, error, words", [
    (lambda body, text: (body, dict(text, sha256="f" * 64)), BundleError, "graph.text lists"),
    (lambda body, text: (body, dict(text, size=text["size"] - 1)), BundleError, "past the .* bytes graph.text.size"),
    (lambda body, text: (body[: len(body) // 2], text), BundleError, "not a whole gzip stream"),
    (lambda body, text: (body, None), BundleError, "a compressed graph needs bundle.json graph.text"),
])
def test_a_compressed_graph_that_is_not_what_bundle_json_lists_is_refused(stats_bundle, tmp_path, damage, error,
                                                                          words):
    doc = _doc(stats_bundle)
    with open(os.path.join(stats_bundle, "data", *doc["graph"]["file"].split("/")), "rb") as handle:
        body, text = damage(handle.read(), doc["graph"]["text"])
    source = tmp_path / "g.txt.gz"
    source.write_bytes(body)
    target = str(tmp_path / "g.txt")
    with pytest.raises(error, match=words):
        expand_graph(str(source), target, text, "x: data/graph/g.txt.gz")
    assert sorted(os.listdir(str(tmp_path))) == ["g.txt.gz"]  # no text, no partial file
    present = {"data/" + doc["graph"]["file"]: type("Found", (), {"path": str(source)})}
    found = graph_text_problems(dict(doc, graph=dict(doc["graph"], text=text)), present)
    assert len(found) == 1 and found[0][0] in ("schema", "unparsable"), found
