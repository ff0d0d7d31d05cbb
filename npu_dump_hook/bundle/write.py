"""Writing a bundle: plan what goes where, place and hash the payload, stream bundle.json,
write the BagIt tag files, then one rename (:class:`~npu_dump_hook.bundle._staging.Staging`).

Order of work::

    Staging(dest)                      # a hidden sibling folder; removed on any failure
      fork a child reading the graph   # where forking is safe; else read below, here
      plan = _plan(...)                # what goes where (symlinked dump folders skipped, reported)
      graph, ops = _graph_section(...) # the child's read, or this process's
      _compress_graph(...)             # statistics bundles: graph text as .txt.gz (rule 9)
      write_payload_and_json(...)      # _placing: files (on every core for many small ones)
      write the BagIt tag files
      commit (one rename), or pack the archive

``checksum="none"`` leaves ``sha256`` null in bundle.json, but the BagIt manifest is still
complete and correct (RFC 8493 requires a digest for every payload file), so the bytes are
hashed anyway, in the same read that copies them. Memory stays flat in the file count:
``files`` entries are streamed into bundle.json.
"""
import collections
import dataclasses
import datetime
import json
import os
import platform
import shutil
import sys
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from .._version import __version__
from ..constants import ARCHIVES, BUNDLE_SCHEMA, CHECKSUMS, COMPLETE_STEP_MARKER, LINK_MODES
from ..errors import BundleError, BundleExistsError, FormatError, NpuDumpError
from .._forked import ForkedCall, fork_is_safe, usable_cores
from .._signals import test_pause
from ..formats.ge_handover import handed_ops
from ..formats.ge_json import write_msaccucmp_json
from ..formats.mapping_csv import read_mapping
from ..formats.names import parse_graph_file_name
from .selection import is_stats_options, layer_names_of_options
from . import _bagit, _fs
from ._placing import FileError, write_payload_and_json
from ._archive import archive_format, pack_archive, strip_archive_ext
from ._graph_text import stage_compressed_graph
from ._listing import DumpListing
from ._progress import ProgressFn, make_progress
from ._staging import Staging, is_nonempty
from ._spec import BACKENDS, BUNDLE_JSON_PATH, DATA_DIR, GOLDEN_BACKEND, MAPPING_FILE
from .describe import GraphOps, graph_ops
from .schema import run_section

__all__ = ["BundleResult", "write_bundle"]


@dataclasses.dataclass
class BundleResult:
    """What :func:`write_bundle` produced: the bundle folder (None when only an archive was
    asked for), the archive (or None), counts, bytes, coverage and warnings; ``listing``: what it
    placed under the folder's data/dump, for a reader in this process (:mod:`._listing`), or None."""

    path: Optional[str]
    archive: Optional[str]
    files: int
    bytes: int
    linked: int
    copied: int
    steps: List[str]
    coverage: Dict[str, Any]
    warnings: List[str]
    backend: str
    listing: Optional[DumpListing] = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def location(self) -> str:
        """The bundle folder, or the archive when no folder was kept."""
        return self.path or self.archive or ""


class _Planned(NamedTuple):
    rel: str            # relative to data/
    src: str
    size: int
    kind: str
    mapping: Optional[Dict[str, str]] = None  # mapping.csv of the file's folder (dump files)
    staged: bool = False  # already written into the staging folder (generated graph JSON)
    parse_error: Optional[str] = None  # why the file did not parse (recorded in its entry)


class _DumpFolder(object):
    """One folder of a dump step: its bundle path, its source path and its mapping.csv (shared by
    the folder's :class:`_PlannedDump` items)."""

    __slots__ = ("rel", "src", "mapping", "mapping_error")

    def __init__(self, rel: str, src: str, mapping: Optional[Dict[str, str]], mapping_error: Optional[str]) -> None:
        self.rel, self.src, self.mapping, self.mapping_error = rel, src, mapping, mapping_error


class _PlannedDump(object):
    """A dump-folder file in the plan, read like a :class:`_Planned`: its paths are built from its
    folder's when asked for, so 100,000 planned files hold one name each, not two full paths
    (the plan was half of the peak memory of 100,000 small files)."""

    __slots__ = ("folder", "name", "size")
    kind = "dump"
    staged = False

    def __init__(self, folder: _DumpFolder, name: str, size: int) -> None:
        self.folder, self.name, self.size = folder, name, size

    @property
    def rel(self) -> str:
        return self.folder.rel + "/" + self.name

    @property
    def src(self) -> str:
        return self.folder.src + os.sep + self.name

    @property
    def mapping(self) -> Optional[Dict[str, str]]:
        return self.folder.mapping

    @property
    def parse_error(self) -> Optional[str]:
        return self.folder.mapping_error if self.name == MAPPING_FILE else None


# ---------------------------------------------------------------------------------- writing
def write_bundle(dest: str, located: Any, *, backend: str, options: Any = None, run: Optional[Mapping[str, Any]] = None,
                 randomness: Any = None, tf_graph: Optional[str] = None, golden_dir: Optional[str] = None,
                 init_dir: Optional[str] = None, link: str = "auto", checksum: str = "sha256",
                 archive: Optional[str] = None, force: bool = False, progress: Optional[ProgressFn] = None,
                 workers: Optional[int] = None, fingerprints: Optional[Mapping[str, Any]] = None,
                 golden_for: Optional[Mapping[str, Any]] = None, warnings: Optional[List[str]] = None,
                 inputs_dir: Optional[str] = None, inputs: Optional[Mapping[str, Any]] = None,
                 control_flow: Optional[Mapping[str, Any]] = None) -> BundleResult:
    """Write the bundle of ``located`` (a :class:`npu_dump_hook.locate.LocatedRun`) to ``dest``.

    With ``archive`` ("tar" or "tar.gz"): when ``dest`` ends in ``.tar``/``.tar.gz`` only
    the archive is written there; otherwise the folder ``dest`` and ``dest + ".tar[.gz]"``.
    Raises BundleExistsError when a destination is non-empty and not ``force``.
    Memory stays flat in the file count: ``files`` entries are streamed into bundle.json.

    ``located`` may be None for a bundle without graph and dump (``backend="reference"``: a
    golden bundle); its coverage is then not applicable. ``fingerprints`` and ``golden_for``
    become the bundle.json keys of the same names (docs/bundle-format.md §2.2, §2.3), and so does
    ``inputs`` (the manifest of the ``.npy`` files in ``inputs_dir``, which go to ``data/inputs/``,
    §2.4); ``warnings`` are added to the located run's. ``control_flow``: the hook's census of the
    step's control-flow ops (``coverage.control_flow``, :func:`~npu_dump_hook.bundle.describe.control_flow_coverage`).
    """
    _check_choice("backend", backend, BACKENDS)
    _check_choice("link", link, LINK_MODES)
    _check_choice("checksum", checksum, CHECKSUMS)
    if archive is not None:
        _check_choice("archive", archive, ARCHIVES)
    dest = os.path.abspath(dest)
    archive_only = archive is not None and archive_format(dest) == archive
    archive_path = dest if archive_only else (dest + "." + archive if archive else None)
    folder_dest = strip_archive_ext(dest) if archive_only else dest
    if archive_path is not None and not force and is_nonempty(archive_path):
        raise BundleExistsError("destination {} exists (pass force=True to replace it)".format(archive_path), archive_path)
    extra_warnings = warnings
    warnings = list(getattr(located, "warnings", []) or []) + list(extra_warnings or [])
    doing = _Doing(folder_dest if not archive_only else archive_path)
    try:
        return _write(dest, located, doing, archive_only, archive_path, folder_dest, warnings, backend=backend,
                      options=options, run=run, randomness=randomness, tf_graph=tf_graph, golden_dir=golden_dir,
                      init_dir=init_dir, link=link, checksum=checksum, archive=archive, force=force,
                      progress=progress, workers=workers, fingerprints=fingerprints, golden_for=golden_for,
                      inputs=(inputs_dir, inputs), control_flow=control_flow)
    except NpuDumpError:  # BundleExistsError and LocateError are OSErrors too: already ours
        raise
    except OSError as exc:  # ENOSPC, EACCES, EROFS, ...: the staging folder is already removed
        raise doing.error(exc) from exc


class _Doing(object):
    """What the writer is doing now, so an OS error becomes a BundleError saying so."""

    def __init__(self, dest: str) -> None:
        self.dest = dest
        self.what = "preparing"
        self.path = dest

    def __call__(self, what: str, path: str) -> None:
        self.what, self.path = what, path

    def error(self, exc: OSError) -> BundleError:
        what, path = self.what, self.path
        if isinstance(exc, FileError):  # one payload file: say which, and from where
            what, path, exc = exc.what, exc.target, exc.cause
        where = exc.filename if isinstance(exc.filename, str) else path
        reason = "[Errno {}] {}".format(exc.errno, exc.strerror) if exc.errno else str(exc)
        if where == path:
            message = "cannot write bundle {}: {} {}: {}".format(self.dest, what, path, reason)
        else:
            message = "cannot write bundle {}: {} {}: {}: {}".format(self.dest, what, path, where, reason)
        err = BundleError(message + " (the destination is left as it was)", where)
        err.errno = exc.errno
        return err


def _write(dest: str, located: Any, doing: _Doing, archive_only: bool, archive_path: Optional[str], folder_dest: str,
           warnings: List[str], *, backend: str, options: Any, run: Optional[Mapping[str, Any]], randomness: Any,
           tf_graph: Optional[str], golden_dir: Optional[str], init_dir: Optional[str], link: str, checksum: str,
           archive: Optional[str], force: bool, progress: Optional[ProgressFn], workers: Optional[int],
           fingerprints: Optional[Mapping[str, Any]], golden_for: Optional[Mapping[str, Any]],
           inputs: Tuple[Optional[str], Optional[Mapping[str, Any]]],
           control_flow: Optional[Mapping[str, Any]]) -> BundleResult:
    # archive only: the folder is built beside the archive, packed, then dropped
    staging_dest = archive_path if archive_only else folder_dest
    doing("creating the staging folder beside", staging_dest)
    with Staging(staging_dest, force=force or archive_only) as stage:
        plain_options = _plain(options) if options is not None else None
        layers = layer_names_of_options(plain_options)
        # a statistics bundle serves no tensor comparison: no msaccucmp JSON form, no TF graph (for replay)
        tensors = not is_stats_options(plain_options)
        graph_call = _fork_graph_read(located, stage.path, workers, layers, tensors)  # reads the graph while we list
        try:
            doing("listing the source files for", dest)
            plan = _plan(located, tf_graph if tensors else None, golden_dir, init_dir, warnings, inputs[0])
            doing("reading the graph and writing its JSON form into", stage.path)
            graph, ops = _graph_section(located, stage.path, plan, warnings, graph_call, layers, tensors)
            if not tensors:  # the graph text was most of a statistics bundle: kept gzip-compressed
                doing("compressing the graph into", stage.path)
                _compress_graph(stage.path, plan, graph)
        finally:
            if graph_call is not None:
                graph_call.abandon()
                _remove_graph_scratch(stage.path)
        plan.sort(key=lambda p: p.rel)
        report = make_progress(progress, len(plan), sum(p.size for p in plan))
        head = _head(located, backend, options, run, randomness, graph, fingerprints, golden_for, inputs[1])
        doing("placing the payload and writing data/bundle.json in", stage.path)
        tally = write_payload_and_json(stage.path, head, plan, ops, link, checksum, report, workers, warnings,
                                       dumps=backend != GOLDEN_BACKEND, control_flow=control_flow)
        report.close()
        test_pause("collect")  # the files are in the staging folder (test-only, npu_dump_hook._phases)
        # what only placement needed goes before the tag files are built (about 100 bytes a file)
        plan[:] = []
        ops = tally.dumped = None  # the graph's op names (the tally holds them too)
        doing("writing the BagIt tag files in", stage.path)
        _bagit.write_tag_files(stage.path, tally.payload, "npu_dump_hook {}".format(__version__),
                               datetime.date.today().isoformat(),
                               "npu_dump_hook bundle ({}), see {}".format(backend, BUNDLE_JSON_PATH))
        if archive_only:
            doing("packing the archive", archive_path)
            _pack_to(stage.path, archive_path, archive, os.path.basename(folder_dest), force)
            stage.abort()
            folder = None  # type: Optional[str]
        elif archive_path is not None:
            # pack before anything is committed: a full disk then leaves neither folder nor archive
            suffix = "." + archive
            doing("packing the archive", archive_path)
            with Staging(archive_path, force=force, as_file=True, suffix=suffix) as packed:
                pack_archive(stage.path, packed.path, archive, os.path.basename(folder_dest))
                doing("renaming the finished bundle into place at", folder_dest)
                folder = stage.commit()
                doing("renaming the finished archive into place at", archive_path)
                packed.commit()
        else:
            doing("renaming the finished bundle into place at", folder_dest)
            folder = stage.commit()
    return BundleResult(folder, archive_path, len(tally.payload), sum(size for _, size, _ in tally.payload),
                        tally.counts["hardlink"], tally.counts["copy"], head["dump"]["steps"],
                        tally.coverage, warnings, backend, tally.listing if folder is not None else None)


def _check_choice(name: str, value: Any, allowed: Tuple[str, ...]) -> None:
    if value not in allowed:
        raise BundleError("{}={!r} is not one of {}".format(name, value, ", ".join(allowed)))


def _pack_to(src_dir: str, archive_path: str, fmt: str, arcroot: str, force: bool) -> None:
    suffix = "." + fmt
    with Staging(archive_path, force=force, as_file=True, suffix=suffix) as stage:
        pack_archive(src_dir, stage.path, fmt, arcroot)
        stage.commit()


# -- planning: what goes where -----------------------------------------------------------------
def _plan(located: Any, tf_graph: Optional[str], golden_dir: Optional[str], init_dir: Optional[str],
          warnings: List[str], inputs_dir: Optional[str] = None) -> List[Any]:
    """What goes where: a _Planned (or, for dump-folder files, a _PlannedDump) per file."""
    plan = []  # type: List[Any]
    graph_file = getattr(located, "graph_file", None)
    if graph_file:
        plan.append(_single("graph/" + os.path.basename(graph_file), graph_file, "graph"))
    if tf_graph:
        plan.append(_single("tf/graph.pbtxt", tf_graph, "tf_graph"))
    dump_path = getattr(located, "dump_path", None)
    for step in getattr(located, "steps", []) or []:
        prefix = "dump/" + "/".join((step.time_dir, step.device_id, step.model_name, step.model_id, step.step))
        link = _linked_folder(step.path, dump_path)
        if link is not None:
            _fs.warn(warnings, "skipped dump step folder {}: {} is a symlink to {} (symlinks on the dump "
                               "chain are never followed)".format(step.path, link, _fs._readlink(link)))
            continue
        plan.extend(_dump_files(_fs.safe_relpath(prefix), step.path, warnings))
    for folder, top, kind in ((golden_dir, "golden", "golden"), (init_dir, "init", "init"),
                              (inputs_dir, "inputs", "inputs")):
        if folder:
            plan.extend(_Planned(top + "/" + f.rel, f.path, f.size, kind) for f in _fs.walk_files(folder, warnings))
    _reject_duplicates(plan)
    return plan


def _linked_folder(step_path: str, dump_path: Optional[str]) -> Optional[str]:
    """The first symlink among ``step_path`` and its parents below ``dump_path`` (the chain
    ``{time}/{device}/{model}/{model_id}/{step}``), or None. ``dump_path`` itself may be a link."""
    path = os.path.abspath(step_path)
    root = os.path.abspath(dump_path) if dump_path else None
    if root is None or not _fs.is_within(path, root) or path == root:
        return path if os.path.islink(path) else None
    chain = []
    while path != root:
        chain.append(path)
        path = os.path.dirname(path)
    for folder in reversed(chain):
        if os.path.islink(folder):
            return folder
    return None


def _single(rel: str, src: str, kind: str) -> _Planned:
    if not os.path.isfile(src):
        raise BundleError("{} file {} not found".format(kind, src), src)
    return _Planned(_fs.safe_relpath(rel), os.path.realpath(src), os.path.getsize(src), kind)


def _dump_files(prefix: str, folder: str, warnings: List[str]) -> Iterator[Any]:
    """The planned files of one dump step folder: a :class:`_PlannedDump` each (a _Planned for
    the rare file read from elsewhere: an in-tree symlink's target)."""
    folder = os.path.abspath(folder)  # as walk_files builds the paths it yields
    current = None  # type: Optional[_DumpFolder]
    current_dir = None  # type: Optional[str]
    for found in _fs.walk_files(folder, warnings):
        rel_dir, _, base = found.rel.rpartition("/")
        if base == COMPLETE_STEP_MARKER:  # collection's check, not data (locate/dumps.py)
            continue
        if current is None or rel_dir != current_dir:
            # walk_files yields a folder's files together: one mapping.csv read per folder
            current, current_dir = _dump_folder(prefix, folder, rel_dir, warnings), rel_dir
        if found.path == current.src + os.sep + base:
            yield _PlannedDump(current, base, found.size)
        else:
            yield _Planned(prefix + "/" + found.rel, found.path, found.size, "dump", current.mapping,
                           parse_error=current.mapping_error if base == MAPPING_FILE else None)


def _dump_folder(prefix: str, folder: str, rel_dir: str, warnings: List[str]) -> _DumpFolder:
    src = os.path.join(folder, rel_dir) if rel_dir else folder
    mapping_csv = os.path.join(src, MAPPING_FILE)
    mapping = mapping_error = None
    try:
        mapping = read_mapping(mapping_csv) if os.path.isfile(mapping_csv) else None
    except FormatError as exc:
        warnings.append("unreadable mapping.csv: {}".format(exc))
        mapping_error = exc.rule
    return _DumpFolder(prefix + "/" + rel_dir if rel_dir else prefix, src, mapping, mapping_error)


def _reject_duplicates(plan: List[Any]) -> None:
    """BundleError when two planned files have one bundle path. The files of one walked dump
    folder have distinct names, so when no two folders share a bundle path and no other file
    lies in one, only the other files are compared (not a set of 100,000 paths)."""
    folders = {}  # type: Dict[str, _DumpFolder]
    others = []  # type: List[_Planned]
    for item in plan:
        if isinstance(item, _PlannedDump):
            if folders.setdefault(item.folder.rel, item.folder) is not item.folder:
                return _reject_duplicate_paths(plan)
        else:
            others.append(item)
    if any(item.rel.rpartition("/")[0] in folders for item in others):
        return _reject_duplicate_paths(plan)
    return _reject_duplicate_paths(others)


def _reject_duplicate_paths(plan: List[Any]) -> None:
    seen = set()
    for item in plan:
        rel = item.rel
        if rel in seen:
            raise BundleError("two sources map to bundle path data/{}".format(rel), item.src)
        seen.add(rel)


# -- graph ------------------------------------------------------------------------------------
#
# Reading the graph (its ops, for coverage) and writing its msaccucmp JSON form cost about as
# much as listing the dump: where forking is safe, a child does it while the parent lists, into
# a scratch folder of the staging folder. Its result is taken only when whole; otherwise the
# parent reads the graph itself (the scratch folder goes either way).
_GRAPH_FORK_MIN_BYTES = 1 << 20  # smaller graphs: the fork costs more than the overlap saves
_GRAPH_SCRATCH = ".graph-share"


class _GraphRead(NamedTuple):
    """What reading the graph file gave, marshal-able: the rule it broke (None when it was
    scannable), its ops as (expected, names, count, selected), the JSON form's bundle path, warnings."""
    parse_error: Optional[str]
    ops: Optional[Tuple[List[str], Set[str], int, Optional[List[str]]]]
    json_rel: Optional[str]
    warnings: List[str]


def _graph_section(located: Any, stage: str, plan: List[Any], warnings: List[str],
                   call: Optional[ForkedCall] = None,
                   layers: Sequence[str] = (), json_form: bool = True) -> Tuple[Dict[str, Any], Optional[GraphOps]]:
    """The ``graph`` key and the graph's ops (for coverage; ``layers``: the dump's ``dump_layer``
    names), read from the source graph file (by ``call``, a child's :func:`_read_graph`, when it
    succeeded); the msaccucmp JSON form (with ``json_form``) is staged and appended to ``plan``."""
    graph_file = getattr(located, "graph_file", None)
    section = {"file": None, "name": getattr(located, "graph_name", None), "stage": None, "op_count": None,
               "json": None, "choice": getattr(located, "graph_choice", None)}  # type: Dict[str, Any]
    if not graph_file:
        return section, None
    rel = "graph/" + os.path.basename(graph_file)
    parsed_name = parse_graph_file_name(os.path.basename(graph_file))
    section.update(file=rel, stage=parsed_name.stage if parsed_name else None)
    read = _taken_graph_read(call, stage, rel)
    if read is None:
        read = _read_graph(graph_file, rel, os.path.join(stage, DATA_DIR), layers, json_form)
    warnings.extend(read.warnings)
    if read.ops is None:
        plan[:] = [p._replace(parse_error=read.parse_error) if p.kind == "graph" and p.rel == rel else p
                   for p in plan]
        return section, None
    ops = GraphOps(*read.ops)
    section["op_count"] = ops.count
    section["json"] = read.json_rel
    if read.json_rel is not None:
        target = os.path.join(stage, DATA_DIR, *read.json_rel.split("/"))
        plan.append(_Planned(read.json_rel, target, os.path.getsize(target), "graph", staged=True))
    return section, ops


def _read_graph(graph_file: str, rel: str, data: str, layers: Sequence[str] = (),
                json_form: bool = True) -> _GraphRead:
    """Read the graph's ops (those ``layers``, the ``dump_layer`` names, select) and, with
    ``json_form``, write its msaccucmp JSON form (what ``atc --mode=5`` writes) under ``data``,
    the bundle's data folder (or a child's scratch folder)."""
    try:
        ops = graph_ops(graph_file, layers, handed_ops(graph_file))  # (the emulator's graph: not scanned)
    except FormatError as exc:
        return _GraphRead(exc.rule, None, None, ["graph not scannable, coverage unknown: {}".format(exc)])
    if not json_form:
        return _GraphRead(None, tuple(ops), None, [])
    json_rel = _json_rel(rel)
    target = os.path.join(data, *json_rel.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        write_msaccucmp_json(graph_file, target)
    except (FormatError, ValueError) as exc:
        return _GraphRead(None, tuple(ops), None, ["graph JSON export failed: {}".format(exc)])
    return _GraphRead(None, tuple(ops), json_rel, [])


def _compress_graph(stage: str, plan: List[Any], graph: Dict[str, Any]) -> None:
    """Rule 9: the planned copy of ``graph.file`` becomes a staged ``.gz``, ``graph.text`` its record."""
    for number, item in enumerate(plan):
        if item.kind == "graph" and item.rel == graph.get("file"):
            rel, target, text = stage_compressed_graph(os.path.join(stage, DATA_DIR), item.rel, item.src)
            graph.update(file=rel, text=text)
            plan[number] = _Planned(rel, target, os.path.getsize(target), "graph", staged=True,
                                    parse_error=item.parse_error)
            return


def _json_rel(rel: str) -> str:
    """The bundle path of the msaccucmp JSON form of the graph at bundle path ``rel``."""
    return (rel[: -len(".txt")] if rel.endswith(".txt") else rel) + ".json"


def _fork_graph_read(located: Any, stage: str, workers: Optional[int],
                     layers: Sequence[str] = (), json_form: bool = True) -> Optional[ForkedCall]:
    """A child running :func:`_read_graph` into the scratch folder, or None (no graph, a small
    one, one core or worker, forking unsafe, or the fork failed)."""
    graph_file = getattr(located, "graph_file", None)
    if not graph_file or workers == 1 or usable_cores() < 2 or not fork_is_safe():
        return None
    try:
        if os.path.getsize(graph_file) < _GRAPH_FORK_MIN_BYTES:
            return None
        return ForkedCall(_read_graph_plain, graph_file, "graph/" + os.path.basename(graph_file),
                          os.path.join(stage, _GRAPH_SCRATCH), tuple(layers), json_form)
    except OSError:  # no such file (the parent then says so) or no process left
        return None


def _read_graph_plain(graph_file: str, rel: str, data: str, layers: Sequence[str] = (),
                      json_form: bool = True) -> Tuple[Any, ...]:
    """:func:`_read_graph` as a plain tuple (marshal takes no NamedTuple)."""
    return tuple(_read_graph(graph_file, rel, data, layers, json_form))


def _taken_graph_read(call: Optional[ForkedCall], stage: str, rel: str) -> Optional[_GraphRead]:
    """The child's :class:`_GraphRead`, its JSON form moved into the data folder; None when
    there was no child or it failed in any way."""
    if call is None:
        return None
    ok, value = call.result()
    if not ok or not _is_graph_read(value):
        return None
    read = _GraphRead(*value)
    if read.json_rel is not None:
        if read.json_rel != _json_rel(rel):
            return None
        parts = read.json_rel.split("/")
        target = os.path.join(stage, DATA_DIR, *parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.replace(os.path.join(stage, _GRAPH_SCRATCH, *parts), target)
        except FileNotFoundError:
            return None
    return read


def _is_graph_read(value: Any) -> bool:
    if not (isinstance(value, tuple) and len(value) == 4 and isinstance(value[3], list)):
        return False
    ops = value[1]
    return ops is None or (isinstance(ops, tuple) and len(ops) == len(GraphOps._fields) and isinstance(ops[0], list)
                           and isinstance(ops[1], set) and isinstance(ops[2], int)
                           and (ops[3] is None or isinstance(ops[3], list))
                           and (ops[4] is None or isinstance(ops[4], dict)))


def _remove_graph_scratch(stage: str) -> None:
    shutil.rmtree(os.path.join(stage, _GRAPH_SCRATCH), ignore_errors=True)


# -- bundle.json head ----------------------------------------------------------------------------
def _head(located: Any, backend: str, options: Any, run: Optional[Mapping[str, Any]], randomness: Any,
          graph: Dict[str, Any], fingerprints: Optional[Mapping[str, Any]] = None,
          golden_for: Optional[Mapping[str, Any]] = None,
          inputs: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The bundle.json keys written before ``files`` (``coverage``/``warnings`` follow it):
    ``fingerprints`` always (null when unknown), ``golden_for`` in golden bundles only,
    ``inputs`` when the run kept its captured step's inputs."""
    head = collections.OrderedDict([
        ("schema", BUNDLE_SCHEMA),
        ("backend", backend),
        ("created", datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")),
        ("versions", _versions()),
        ("options", _plain(options) if options is not None else {}),
        ("run", run_section(**_plain(dict(run or {})))),
        ("randomness", _plain(randomness)),
        ("graph", _plain(graph)),
        ("dump", _dump_section(located)),
        ("fingerprints", _plain(fingerprints)),
    ])
    if golden_for is not None:
        head["golden_for"] = _plain(golden_for)
    if inputs is not None:
        head["inputs"] = _plain(inputs)
    return head


def _plain(value: Any) -> Any:
    """JSON-ready form: dataclasses become dicts, tuples lists, unknown objects strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if hasattr(value, "to_dict") and callable(value.to_dict):
        value = value.to_dict()
    return json.loads(json.dumps(value, default=str))


def _dump_section(located: Any) -> Dict[str, Any]:
    steps = list(getattr(located, "steps", []) or [])
    chains = [{"time_dir": s.time_dir, "device_id": s.device_id, "model_name": s.model_name,
               "model_id": s.model_id, "step": s.step,
               "path": "dump/" + "/".join((s.time_dir, s.device_id, s.model_name, s.model_id, s.step))}
              for s in steps]
    section = {}  # type: Dict[str, Any]
    for key in ("time_dir", "device_id", "model_name", "model_id"):
        values = sorted({c[key] for c in chains})
        section[key] = values[0] if len(values) == 1 else None  # several: see "chains"
    section["steps"] = sorted({c["step"] for c in chains}, key=lambda s: (len(s), s))
    section["chains"] = chains
    section["source"] = getattr(located, "dump_path", None)
    return section


def _versions() -> Dict[str, Optional[str]]:
    versions = {"npu_dump_hook": __version__, "python": platform.python_version()}  # type: Dict[str, Optional[str]]
    for name, module in (("numpy", "numpy"), ("protobuf", "google.protobuf"), ("tensorflow", "tensorflow")):
        mod = sys.modules.get(module)  # never import TensorFlow here: report it only when loaded
        if mod is None and name != "tensorflow":
            try:
                mod = __import__(module, fromlist=["__version__"])
            except ImportError:
                mod = None
        versions[name] = getattr(mod, "__version__", None) if mod is not None else None
    return versions
