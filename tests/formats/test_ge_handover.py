"""The writer's hand-over of a ge_proto text file's JSON form and ops (formats.ge_handover): taken
by write_msaccucmp_json and the bundle's op scan only for the very file noted, unchanged; any
change (rewrite, new mtime, another file of the same name) sends them back to reading the file.
Pure Python, the repository's GE graph text."""
import os
import shutil

import pytest

from npu_dump_hook.bundle.describe import graph_ops
from npu_dump_hook.formats import ge_handover, ge_json
from npu_dump_hook.formats.ge_handover import HandedOp

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data", "formats", "ge")
GOLDEN = os.path.join(DATA, "ge_proto_00000007_graph_1_Build.txt")
NOTED = '{\n    "noted": true\n}\n'  # not the file's JSON: shows which one was written
OPS = (HandedOp("a", False, None), HandedOp("b", True, None), HandedOp("f/b", False, ("f/a", "f/b")))


@pytest.fixture
def graph(tmp_path):
    path = str(tmp_path / "ge_proto_00000001_Build.txt")
    shutil.copyfile(GOLDEN, path)
    ge_handover.forget_graphs()
    yield path
    ge_handover.forget_graphs()


def _json(path, out):
    ge_json.write_msaccucmp_json(path, out)
    with open(out, encoding="utf-8") as handle:
        return handle.read()


def test_the_noted_form_is_written_for_the_file_noted(graph, tmp_path):
    converted = _json(graph, str(tmp_path / "converted.json"))
    ge_handover.note_graph(graph, NOTED, OPS)
    assert _json(graph, str(tmp_path / "handed.json")) == NOTED
    assert ge_handover.handed_ops(graph) == OPS
    ops = graph_ops(graph, (), ge_handover.handed_ops(graph))
    assert (ops.expected, ops.count, ops.fused) == (["a", "f_b"], 3, {"f_a": "f_b"})
    linked = str(tmp_path / "bundle" / os.path.basename(graph))
    os.makedirs(os.path.dirname(linked))
    os.link(graph, linked)  # the bundle's hard link is the same file
    assert _json(linked, str(tmp_path / "linked.json")) == NOTED
    ge_handover.forget_graphs()
    assert _json(graph, str(tmp_path / "again.json")) == converted != NOTED


@pytest.mark.parametrize("change", ["rewrite", "touch", "replace", "copy"])
def test_a_changed_or_other_file_is_read(graph, tmp_path, change):
    converted = _json(graph, str(tmp_path / "converted.json"))
    scanned = graph_ops(graph)
    ge_handover.note_graph(graph, NOTED, OPS)
    path = graph
    if change == "rewrite":  # the same size, a later mtime
        with open(graph, "r+b") as handle:
            data = handle.read()
            handle.seek(0)
            handle.write(data)
        stat = os.stat(graph)
        os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1000))
    elif change == "touch":
        stat = os.stat(graph)
        os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10 ** 9))
    elif change == "replace":  # another file (inode) in its place
        shutil.copyfile(graph, graph + ".new")
        os.replace(graph + ".new", graph)
    else:
        path = str(tmp_path / "copy" / os.path.basename(graph))
        os.makedirs(os.path.dirname(path))
        shutil.copy2(graph, path)
    assert ge_handover.handed_json(path) is None and ge_handover.handed_ops(path) is None
    assert _json(path, str(tmp_path / "after.json")) == converted
    assert graph_ops(path, (), ge_handover.handed_ops(path)) == scanned


def test_only_the_latest_graphs_are_kept(tmp_path):
    ge_handover.forget_graphs()
    paths = []
    for number in range(ge_handover.MAX_GRAPHS + 1):
        paths.append(str(tmp_path / "g{}.txt".format(number)))
        shutil.copyfile(GOLDEN, paths[-1])
        ge_handover.note_graph(paths[-1], NOTED, None)
    ge_handover.note_graph(str(tmp_path / "missing.txt"), NOTED, OPS)  # not there: not noted, no error
    assert ge_handover.handed_json(paths[0]) is None
    assert all(ge_handover.handed_json(path) == NOTED for path in paths[1:])
    assert ge_handover.handed_ops(paths[-1]) is None
    ge_handover.forget_graphs()


def test_a_json_form_over_the_cap_is_not_kept(graph, tmp_path, monkeypatch):
    converted = _json(graph, str(tmp_path / "converted.json"))
    monkeypatch.setattr(ge_handover, "MAX_JSON_CHARS", len(NOTED) - 1)
    ge_handover.note_graph(graph, NOTED, OPS)
    assert ge_handover.handed_json(graph) is None and ge_handover.handed_ops(graph) == OPS
    assert _json(graph, str(tmp_path / "after.json")) == converted


def test_the_graph_is_handed_only_with_its_name_and_every_op_type(graph):
    typed = tuple(op._replace(type="Add") for op in OPS)
    ge_handover.note_graph(graph, NOTED, OPS, "g")  # op types not known
    assert ge_handover.handed_graph(graph) is None
    ge_handover.note_graph(graph, NOTED, typed)  # graph name not known
    assert ge_handover.handed_graph(graph) is None
    ge_handover.note_graph(graph, NOTED, typed, "g")
    assert ge_handover.handed_graph(graph) == ("g", typed)
    stat = os.stat(graph)
    os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1000))  # no longer the file noted
    assert ge_handover.handed_graph(graph) is None
