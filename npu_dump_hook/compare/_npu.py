"""The NPU side: which dump files of which step folder, which Build graph, which bundle.

Accepted (``kind``):

* ``"bundle"``: a bundle folder (``data/bundle.json``); the graph is the bundle's
  ``graph.file`` (``data/graph/ge_proto_*_Build.txt``) unless ``graph`` is given;
* ``"archive"``: a bundle packed as ``.tar``/``.tar.gz``; opened (bounded, every member
  checked before anything is written) by :func:`npu_dump_hook.bundle.open_bundle` into a
  temporary folder that :meth:`NpuSide.close` removes;
* ``"dump_dir"``: a dump step folder (or a folder above step folders), with ``graph`` required.

Bundles (folder or archive) are opened with :func:`npu_dump_hook.bundle.open_bundle`, so the
graph, dump and golden paths they yield follow its reading rules (docs/bundle-format.md
section 4: inside the bag, through no symlink, no special file, listed sizes; the dump files'
digests are not re-hashed here: ``verify`` checks them). Dump folders are walked without
recursion and without opening anything but regular files: a symlink leaving the tree (in a
bundle: any symlink), a FIFO (also one named like a dump file or ``mapping.csv``), a device or
a socket is skipped and named in ``warnings``.

A step folder is a folder holding dump files (names per docs/reference/ascend-dump-formats.md §5,
hashed names through its ``mapping.csv``). With several, ``step`` picks the one whose name is that number;
without ``step`` a bundle's captured step (``run.captured_step``, the step its golden tensors
and a golden run's are of) is used when a folder has that name, else the lowest-numbered
one; the others are named in a warning.
The chosen step folder's stats CSVs (``dump_data="stats"``) are ``stats`` and its Opdebug files
(``enable_dump_debug``) ``opdebug``: a folder holding only those is a step folder too (for the
statistics compare and the golden-free checks, :mod:`.checks`); anything else is ignored.
A chosen step folder holding
:data:`~npu_dump_hook.constants.INCOMPLETE_STEP_MARKER` (its dump stopped part-way) is refused.
"""
import collections
import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..bundle import BUNDLE_JSON, DATA_DIR, BundleView, DumpListing, looks_like_tar, open_bundle, walk_files
from ..constants import INCOMPLETE_STEP_MARKER
from ..errors import CompareError, NameFormatError
from ..formats.mapping_csv import MAPPING_FILE_NAME, read_mapping
from ..formats.names import KIND_DUMP, KIND_OPDEBUG, KIND_STATS, DumpName, base_op_name, parse_dump_name

__all__ = ["DumpRef", "NpuSide", "load_npu", "load_written", "newest_per_op"]

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
        #: Where reports say the graph is, when that is not graph_path: the bundle's own member, not
        #: the temporary file an archive's extraction or a compressed graph was expanded into.
        self.graph_shown = None  # type: Optional[str]
        self.bundle_json = None  # type: Optional[Dict[str, Any]]
        self.bundle_id = None  # type: Optional[str]
        self.step_dir = None  # type: Optional[str]
        self.step = None  # type: Optional[str]
        self.dumps = []  # type: List[DumpRef]
        #: The step folder's stats CSVs and Opdebug files.
        self.stats = []  # type: List[DumpRef]
        self.opdebug = []  # type: List[DumpRef]
        self.golden_dir = None  # type: Optional[str]
        self.warnings = []  # type: List[str]
        #: Entries of the dump tree the scan skipped unopened (special files, links out of the tree).
        self.skipped = []  # type: List[str]
        self.view = None  # type: Optional[BundleView]

    def describe(self) -> Dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "graph": self.graph_shown or self.graph_path,
                "bundle_id": self.bundle_id,
                "step_dir": self.step_dir}

    def close(self) -> None:
        """Close the opened bundle: an archive's temporary extraction is removed."""
        view, self.view = self.view, None
        if view is not None:
            view.close()


def load_npu(path: str, graph: Optional[str] = None, step: Optional[int] = None, golden: bool = True) -> NpuSide:
    """Load the NPU side of a comparison (see the module doc); CompareError naming ``path``
    when it is none of the accepted kinds or holds no dump file. ``golden=False``: a bundle's
    ``data/golden`` is neither checked nor given (``golden_dir`` None), for the checks that
    read no golden tensor (its 1,000s of files would be looked at for nothing)."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, DATA_DIR, BUNDLE_JSON)):
            return _bundle_side(path, "bundle", graph, step, golden)
        side = NpuSide(path, "dump_dir")
        if graph is None:
            raise CompareError("NPU {} is not a bundle (no data/bundle.json); for a dump step folder give "
                               "--graph (its Build graph, .txt or msaccucmp .json)".format(path), path)
        side.graph_path = graph
        _pick_step(side, path, step, in_tree_links=True)
        return side
    if os.path.isfile(path) and looks_like_tar(path):
        return _bundle_side(path, "archive", graph, step, golden)
    if not os.path.exists(path):
        raise CompareError("NPU {}: no such file or folder".format(path), path)
    raise CompareError("NPU {}: not a bundle (folder or .tar/.tar.gz) nor a dump folder".format(path), path)


def _bundle_side(path: str, kind: str, graph: Optional[str], step: Optional[int], golden: bool) -> NpuSide:
    """The NPU side of the bundle folder or archive at ``path`` (closed again on any error)."""
    side = NpuSide(path, kind)
    side.view = open_bundle(path)
    try:
        _read_bundle(side, side.view, graph, step, golden)
    except BaseException:
        side.close()
        raise
    return side


def _read_bundle(side: NpuSide, view: BundleView, graph: Optional[str], step: Optional[int], golden: bool) -> None:
    side.root = view.root
    side.bundle_json = view.doc
    side.bundle_id = view.bundle_json_sha256
    if graph is not None:
        side.graph_path = graph
    else:
        side.graph_path = view.graph_file()
        if side.graph_path is None:
            raise CompareError("NPU {}: its bundle.json names no graph file; give --graph".format(side.path),
                               side.path)
        member = "{}/{}".format(DATA_DIR, view.doc["graph"]["file"])
        side.graph_shown = (os.path.join(side.path, member) if side.kind == "bundle"
                            else "{}: {}".format(side.path, member))
    side.golden_dir = view.golden_dir() if golden else None
    dump_root = view.dump_dir()
    if dump_root is None:
        raise CompareError("NPU {}: the bundle has no data/dump folder".format(side.path), side.path)
    captured = (side.bundle_json.get("run") or {}).get("captured_step")
    preferred = str(captured) if isinstance(captured, int) and not isinstance(captured, bool) else None
    _pick_step(side, dump_root, step, preferred, in_tree_links=False)


def load_written(path: str, listing: DumpListing) -> Optional[NpuSide]:
    """:func:`load_npu` ``(path, golden=False)`` of the bundle folder this process has just written
    at ``path``, from its writer's ``listing`` (:class:`~npu_dump_hook.bundle.DumpListing`) instead
    of re-opening it and walking its dump tree; None (read it with :func:`load_npu`) unless the
    folders under its data/dump hold exactly the folders and regular files (of the sizes) listed, and it names
    an uncompressed graph file. The dump files' contents are not vouched for: their readers check
    each against its write-time note and read a changed one again (:mod:`npu_dump_hook._ledger`)."""
    if listing.graph is None:
        return None
    data = os.path.join(os.path.abspath(path), DATA_DIR)
    dump_root = os.path.join(data, "dump")
    by_folder = _listed_folders(dump_root, listing)
    if by_folder is None:
        return None
    side = NpuSide(path, "bundle")
    side.root = path
    side.graph_path = side.graph_shown = os.path.join(data, *listing.graph.split("/"))
    captured = listing.captured_step
    preferred = str(captured) if isinstance(captured, int) and not isinstance(captured, bool) else None
    parsed = {folder[len("dump/"):]: names for folder, names in listing.parsed.items()}
    _choose_step(side, dump_root, _parsed_folders(dump_root, by_folder, parsed), None, preferred)
    return side


def _listed_folders(dump_root: str, listing: DumpListing) -> Optional[Dict[str, Dict[str, str]]]:
    """Folder (relative to ``dump_root``) -> {file name: path} of ``listing``, looked at on disk:
    None when any folder under ``dump_root`` holds another entry than the listed folders and
    regular files of the listed sizes (a symlink, a special file, an added, missing or resized one)."""
    wanted = {}  # type: Dict[str, Dict[str, int]]
    for folder, sizes in listing.folders.items():
        if not folder.startswith("dump/"):
            return None
        wanted[folder[len("dump/"):]] = sizes
    if os.path.islink(dump_root):
        return None
    dirs = {""}
    for folder in wanted:
        parts = folder.split("/")
        dirs.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    by_folder = collections.OrderedDict()  # type: Dict[str, Dict[str, str]]
    for folder in sorted(dirs):
        files = _listed_files(dump_root, folder, wanted.get(folder, {}), dirs)
        if files is None:
            return None
        if files:
            by_folder[folder] = files
    return by_folder


def _listed_files(dump_root: str, folder: str, sizes: Dict[str, int], dirs: Set[str]) -> Optional[Dict[str, str]]:
    """{file name: path} of ``folder`` (under ``dump_root``) when it holds exactly the files of
    ``sizes`` (name -> size), regular, and no other entry than the folders of ``dirs``; else None."""
    files = {}  # type: Dict[str, str]
    try:
        with os.scandir(os.path.join(dump_root, *folder.split("/")) if folder else dump_root) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    if entry.stat(follow_symlinks=False).st_size != sizes.get(entry.name):
                        return None
                    files[entry.name] = entry.path
                elif not (entry.is_dir(follow_symlinks=False)
                          and (folder + "/" + entry.name if folder else entry.name) in dirs):
                    return None
    except OSError:
        return None
    return files if len(files) == len(sizes) else None  # each one found is listed: the same names


def _step_folders(root: str, warnings: List[str], skipped: List[str],
                  in_tree_links: bool) -> List[Tuple[str, List[DumpRef]]]:
    """(folder, its dump, stats and Opdebug files) of every folder under ``root`` holding any. Only regular
    files are read (:func:`~npu_dump_hook.bundle.walk_files`, no recursion): symlinks leaving the
    tree (every symlink in a bundle, ``in_tree_links=False``), links to folders, FIFOs, devices
    and sockets are skipped and named in ``warnings``, never opened."""
    by_folder = collections.OrderedDict()  # type: Dict[str, Dict[str, str]]
    for found in walk_files(root, warnings, in_tree_links=in_tree_links, skipped=skipped):
        folder, _, name = found.rel.rpartition("/")
        by_folder.setdefault(folder, {})[name] = found.path
    return _parsed_folders(root, by_folder)


def _parsed_folders(root: str, by_folder: Dict[str, Dict[str, str]],
                    known: Optional[Dict[str, Dict[str, DumpName]]] = None) -> List[Tuple[str, List[DumpRef]]]:
    """(folder, its files with a dump, stats or Opdebug name) of every folder of ``by_folder``
    (folder relative to ``root`` -> {file name: path}) holding any. ``known``: the same folder ->
    file name -> what :func:`parse_dump_name` gives for it, already parsed (a writer's listing:
    plain names only, which no mapping.csv changes); the other names are parsed here."""
    folders = []
    for folder, files in by_folder.items():
        mapping = read_mapping(files[MAPPING_FILE_NAME]) if MAPPING_FILE_NAME in files else None
        parsed_here = known.get(folder, {}) if known else {}
        refs = []
        for name in sorted(files):
            parsed = parsed_here.get(name)
            if parsed is None:
                try:
                    parsed = parse_dump_name(name, mapping)
                except NameFormatError:
                    continue
            refs.append(DumpRef(files[name], parsed))
        if refs:
            folders.append((os.path.join(root, *folder.split("/")) if folder else root, refs))
    return folders


def _step_number(folder: str) -> Tuple[int, str]:
    base = os.path.basename(folder)
    return (int(base) if base.isdigit() and len(base) < 20 else 1 << 62, folder)


def _pick_step(side: NpuSide, root: str, step: Optional[int], preferred: Optional[str] = None,
               in_tree_links: bool = True) -> None:
    _choose_step(side, root, _step_folders(root, side.warnings, side.skipped, in_tree_links), step, preferred)


def _choose_step(side: NpuSide, root: str, folders: List[Tuple[str, List[DumpRef]]], step: Optional[int],
                 preferred: Optional[str]) -> None:
    """Take the step folder of ``folders`` (the module doc's rule) and its dump, stats and Opdebug files."""
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
    side.step_dir, refs = folders[0]
    side.step = os.path.basename(side.step_dir)
    side.dumps = [r for r in refs if r.name.kind == KIND_DUMP and r.name.op_type != "Opdebug"]
    side.stats = [r for r in refs if r.name.kind == KIND_STATS]
    side.opdebug = [r for r in refs if r.name.kind == KIND_OPDEBUG]
    if os.path.lexists(os.path.join(side.step_dir, INCOMPLETE_STEP_MARKER)):
        raise CompareError("NPU {}: step folder {} was left incomplete by a failed dump, or an interrupted or "
                           "killed one (it holds {}): its dump files are not the whole step, so it is not "
                           "compared".format(side.path, side.step_dir, INCOMPLETE_STEP_MARKER), side.path)


def newest_per_op(refs: Sequence[Any]) -> Dict[str, Any]:
    """The newest file (by timestamp, then path) of each op in ``refs`` (DumpRefs), by base op name:
    an op dumped at several iterations is compared at its last."""
    newest = {}  # type: Dict[str, Any]
    for ref in refs:
        key = base_op_name(ref.name.op_name)
        held = newest.get(key)
        if held is None or (ref.name.timestamp, ref.path) > (held.name.timestamp, held.path):
            newest[key] = ref
    return newest
