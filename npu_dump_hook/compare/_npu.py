"""The NPU side: which dump files of which step folder, which Build graph, which bundle.

Accepted (``kind``):

* ``"bundle"``: a bundle folder (``data/bundle.json``); the graph is the bundle's
  ``graph.file`` (``data/graph/ge_proto_*_Build.txt``) unless ``graph`` is given;
* ``"archive"``: a bundle packed as ``.tar``/``.tar.gz``; extracted (bounded and checked by
  :func:`npu_dump_hook.bundle._archive.extract_archive`) into a temporary folder that
  :meth:`NpuSide.close` removes;
* ``"dump_dir"``: a dump step folder (or a folder above step folders), with ``graph`` required.

A step folder is a folder holding dump files (names per docs/reference/ascend-dump-formats.md §5,
hashed names through its ``mapping.csv``). With several, ``step`` picks the one whose name is that number;
without ``step`` a bundle's captured step (``run.captured_step``, the step its golden tensors
and a golden run's are of) is used when a folder has that name, else the lowest-numbered
one; the others are named in a warning.
Stats CSVs, Opdebug files and anything else are ignored.
"""
import hashlib
import logging
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from ..bundle._archive import extract_archive, looks_like_tar
from ..bundle._spec import BUNDLE_JSON, DATA_DIR, MAPPING_FILE
from ..bundle.read import read_bundle
from ..errors import CompareError, NameFormatError
from ..formats.mapping_csv import read_mapping
from ..formats.names import KIND_DUMP, DumpName, parse_dump_name

__all__ = ["DumpRef", "NpuSide", "load_npu", "open_bundle", "bundle_identity"]

logger = logging.getLogger(__name__)


class DumpRef(object):
    """One dump file of the step: ``path`` and its parsed ``name``."""

    __slots__ = ("path", "name")

    def __init__(self, path: str, name: DumpName) -> None:
        self.path = path
        self.name = name


class NpuSide(object):
    """What :func:`load_npu` found. ``root`` is the bundle folder (extracted for archives),
    ``golden_dir`` its ``data/golden`` when present, ``warnings`` what the caller should hear."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        self.root = None  # type: Optional[str]
        self.graph_path = None  # type: Optional[str]
        self.bundle_json = None  # type: Optional[Dict[str, Any]]
        self.bundle_id = None  # type: Optional[str]
        self.step_dir = None  # type: Optional[str]
        self.step = None  # type: Optional[str]
        self.dumps = []  # type: List[DumpRef]
        self.golden_dir = None  # type: Optional[str]
        self.warnings = []  # type: List[str]
        self._tmp = None  # type: Optional[str]

    def describe(self) -> Dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "graph": self.graph_path, "bundle_id": self.bundle_id,
                "step_dir": self.step_dir}

    def close(self) -> None:
        """Remove the temporary extraction of an archive (nothing for folders)."""
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def load_npu(path: str, graph: Optional[str] = None, step: Optional[int] = None) -> NpuSide:
    """Load the NPU side of a comparison (see the module doc); CompareError naming ``path``
    when it is none of the accepted kinds or holds no dump file."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, DATA_DIR, BUNDLE_JSON)):
            side = NpuSide(path, "bundle")
            _open_bundle(side, path, graph, step)
        else:
            side = NpuSide(path, "dump_dir")
            if graph is None:
                raise CompareError("NPU {} is not a bundle (no data/bundle.json); for a dump step folder give "
                                   "--graph (its Build graph, .txt or msaccucmp .json)".format(path), path)
            side.graph_path = graph
            _pick_step(side, path, step)
        return side
    if os.path.isfile(path) and looks_like_tar(path):
        side = NpuSide(path, "archive")
        side._tmp = tempfile.mkdtemp(prefix="npu_dump_hook_compare_")
        try:
            extract_archive(path, side._tmp)
            _open_bundle(side, _bundle_root(side._tmp, path), graph, step)
        except BaseException:
            side.close()
            raise
        return side
    if not os.path.exists(path):
        raise CompareError("NPU {}: no such file or folder".format(path), path)
    raise CompareError("NPU {}: not a bundle (folder or .tar/.tar.gz) nor a dump folder".format(path), path)


def open_bundle(path: str, what: str = "golden") -> NpuSide:
    """A bundle (folder or archive) opened for its ``bundle.json`` and ``data/golden`` only
    (no dump folder or graph needed): how a golden bundle is read. CompareError naming
    ``path`` when it is neither."""
    if os.path.isdir(path):
        side = NpuSide(path, "bundle")
        side.root = path
    elif os.path.isfile(path) and looks_like_tar(path):
        side = NpuSide(path, "archive")
        side._tmp = tempfile.mkdtemp(prefix="npu_dump_hook_compare_")
        try:
            extract_archive(path, side._tmp)
            side.root = _bundle_root(side._tmp, path)
        except BaseException:
            side.close()
            raise
    else:
        raise CompareError("{} {}: not a bundle (folder or .tar/.tar.gz) nor a folder of .npy files".format(
            what, path), path)
    try:
        side.bundle_json = read_bundle(side.root)
        side.bundle_id = bundle_identity(side.root)
    except BaseException:
        side.close()
        raise
    golden = os.path.join(side.root, DATA_DIR, "golden")
    side.golden_dir = golden if os.path.isdir(golden) else None
    return side


def _bundle_root(extracted: str, archive: str) -> str:
    if os.path.isfile(os.path.join(extracted, DATA_DIR, BUNDLE_JSON)):
        return extracted
    for name in sorted(os.listdir(extracted)):
        candidate = os.path.join(extracted, name)
        if os.path.isfile(os.path.join(candidate, DATA_DIR, BUNDLE_JSON)):
            return candidate
    raise CompareError("NPU {}: the archive holds no {}/{}".format(archive, DATA_DIR, BUNDLE_JSON), archive)


def bundle_identity(root: str) -> str:
    """sha256 of a bundle's ``data/bundle.json`` (what a golden bundle's ``golden_for`` records)."""
    with open(os.path.join(root, DATA_DIR, BUNDLE_JSON), "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _open_bundle(side: NpuSide, root: str, graph: Optional[str], step: Optional[int]) -> None:
    side.root = root
    side.bundle_json = read_bundle(root)
    side.bundle_id = bundle_identity(root)
    if graph is not None:
        side.graph_path = graph
    else:
        recorded = (side.bundle_json.get("graph") or {}).get("file")
        if not recorded:
            raise CompareError("NPU {}: its bundle.json names no graph file; give --graph".format(side.path),
                               side.path)
        side.graph_path = os.path.join(root, DATA_DIR, *str(recorded).split("/"))
    golden = os.path.join(root, DATA_DIR, "golden")
    side.golden_dir = golden if os.path.isdir(golden) else None
    dump_root = os.path.join(root, DATA_DIR, "dump")
    if not os.path.isdir(dump_root):
        raise CompareError("NPU {}: the bundle has no data/dump folder".format(side.path), side.path)
    captured = (side.bundle_json.get("run") or {}).get("captured_step")
    preferred = str(captured) if isinstance(captured, int) and not isinstance(captured, bool) else None
    _pick_step(side, dump_root, step, preferred)


def _step_folders(root: str) -> List[Tuple[str, List[DumpRef]]]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        mapping = None  # type: Optional[Dict[str, str]]
        if MAPPING_FILE in files:
            mapping = read_mapping(os.path.join(folder, MAPPING_FILE))
        refs = []
        for name in sorted(files):
            try:
                parsed = parse_dump_name(name, mapping)
            except NameFormatError:
                continue
            if parsed.kind == KIND_DUMP and parsed.op_type != "Opdebug":
                refs.append(DumpRef(os.path.join(folder, name), parsed))
        if refs:
            found.append((folder, refs))
    return found


def _step_number(folder: str) -> Tuple[int, str]:
    base = os.path.basename(folder)
    return (int(base) if base.isdigit() and len(base) < 20 else 1 << 62, folder)


def _pick_step(side: NpuSide, root: str, step: Optional[int], preferred: Optional[str] = None) -> None:
    folders = _step_folders(root)
    if not folders:
        raise CompareError("NPU {}: no dump file found under {}".format(side.path, root), side.path)
    if step is not None:
        chosen = [f for f in folders if os.path.basename(f[0]) == str(step)]
        if not chosen:
            raise CompareError("NPU {}: no step folder {} (found: {})".format(
                side.path, step, ", ".join(sorted({os.path.basename(f[0]) for f in folders}))), side.path)
        folders = chosen
    folders.sort(key=lambda item: (os.path.basename(item[0]) != preferred, _step_number(item[0])))
    if len(folders) > 1:
        side.warnings.append("NPU {}: {} step folders hold dump files; comparing {} (pick one with --step): {}".format(
            side.path, len(folders), folders[0][0], ", ".join(f[0] for f in folders[1:4])
            + (" ..." if len(folders) > 4 else "")))
    side.step_dir, side.dumps = folders[0]
    side.step = os.path.basename(side.step_dir)
