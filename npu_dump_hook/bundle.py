"""Bundles: write, verify, read and summarise (contract: docs/bundle-format.md, DESIGN §5).

A bundle is a BagIt bag whose ``data/bundle.json`` (schema ``npu_dump_hook/bundle@1``)
describes the Build graph, the dump chain ``data/dump/{time}/{device_id}/{model_name}/
{model_id}/{step}/`` (original file names, mapping.csv kept), the TF graph, golden and
init files. Writing is atomic (:class:`npu_dump_hook._fs.Staging`): payload first, then
``bundle.json``, the manifests and ``bagit.txt``, then one rename.

``checksum="none"`` leaves ``sha256`` null in bundle.json, but the BagIt manifest is still
complete and correct (RFC 8493 requires a digest for every payload file), so the bytes are
hashed anyway, in the same read that copies them.

Several processes (one per rank) may share one root: :func:`write_rank_bundle` writes
``{root}/rank_{rank}/`` and records it in ``{root}/index.json`` under a file lock.
"""
import collections
import dataclasses
import datetime
import json
import logging
import os
import platform
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple

from . import _bagit, _fs
from ._bagit import Problem
from ._bundle_schema import BACKENDS, FILE_KINDS, check_payload
from ._progress import ProgressFn, make_progress
from ._version import __version__
from .constants import ARCHIVES, BUNDLE_SCHEMA, CHECKSUMS, ENV_DEVICE_ID, ENV_RANK_ID
from .errors import BundleError, BundleExistsError, FormatError, UnsafePathError

__all__ = [
    "BundleResult",
    "Problem",
    "BACKENDS",
    "FILE_KINDS",
    "CHECKSUMS",
    "ARCHIVES",
    "BUNDLE_JSON",
    "INDEX_JSON",
    "INDEX_SCHEMA",
    "write_bundle",
    "verify_bundle",
    "read_bundle",
    "summarize",
    "write_rank_bundle",
    "update_index",
    "read_index",
    "rank_from_env",
]

logger = logging.getLogger(__name__)

BUNDLE_JSON = "bundle.json"
INDEX_JSON = "index.json"
INDEX_SCHEMA = "npu_dump_hook/bundle-index@1"
_RUN_KEYS = ("steps", "global_step", "started", "ended", "rank", "device_id")
_MAPPING = "mapping.csv"


@dataclasses.dataclass
class BundleResult:
    """What :func:`write_bundle` produced: the bundle folder (None when only an archive was
    asked for), the archive (or None), counts, bytes, coverage and warnings."""

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


class _Tally(object):
    """What placement accumulates: BagIt payload rows, link/copy counts, dumped op names."""

    def __init__(self) -> None:
        self.payload = []  # type: List[Tuple[str, int, str]]
        self.counts = {"hardlink": 0, "copy": 0, "staged": 0}
        self.dumped = {}  # type: Dict[str, int]
        self.coverage = {}  # type: Dict[str, Any]


# ---------------------------------------------------------------------------------- writing
def write_bundle(dest: str, located: Any, *, backend: str, options: Any = None, run: Optional[Mapping[str, Any]] = None,
                 randomness: Any = None, tf_graph: Optional[str] = None, golden_dir: Optional[str] = None,
                 init_dir: Optional[str] = None, link: str = "auto", checksum: str = "sha256",
                 archive: Optional[str] = None, force: bool = False, progress: Optional[ProgressFn] = None,
                 workers: Optional[int] = None) -> BundleResult:
    """Write the bundle of ``located`` (a :class:`npu_dump_hook.locate.LocatedRun`) to ``dest``.

    With ``archive`` ("tar" or "tar.gz"): when ``dest`` ends in ``.tar``/``.tar.gz`` only
    the archive is written there; otherwise the folder ``dest`` and ``dest + ".tar[.gz]"``.
    Raises BundleExistsError when a destination is non-empty and not ``force``.
    Memory stays flat in the file count: ``files`` entries are streamed into bundle.json.
    """
    _check_choice("backend", backend, BACKENDS)
    _check_choice("link", link, _fs.LINK_MODES)
    _check_choice("checksum", checksum, CHECKSUMS)
    if archive is not None:
        _check_choice("archive", archive, ARCHIVES)
    dest = os.path.abspath(dest)
    archive_only = archive is not None and _fs.archive_format(dest) == archive
    archive_path = dest if archive_only else (dest + "." + archive if archive else None)
    folder_dest = _strip_archive_ext(dest) if archive_only else dest
    if archive_path is not None and not force and _fs.is_nonempty(archive_path):
        raise BundleExistsError("destination {} exists (use force / --force)".format(archive_path), archive_path)
    warnings = list(getattr(located, "warnings", []) or [])
    plan = _plan(located, tf_graph, golden_dir, init_dir, warnings)
    # archive only: the folder is built beside the archive, packed, then dropped
    with _fs.Staging(archive_path if archive_only else folder_dest, force=force or archive_only) as stage:
        graph, ops = _graph_section(located, stage.path, plan, warnings)
        plan.sort(key=lambda p: p.rel)
        report = make_progress(progress, len(plan), sum(p.size for p in plan))
        head = _head(located, backend, options, run, randomness, graph)
        tally = _write_payload_and_json(stage.path, head, plan, ops, link, checksum, report, workers, warnings)
        report.close()
        _bagit.write_tag_files(stage.path, tally.payload, "npu_dump_hook {}".format(__version__),
                               datetime.date.today().isoformat(),
                               "npu_dump_hook bundle ({}), see data/{}".format(backend, BUNDLE_JSON))
        if archive_only:
            _pack_to(stage.path, archive_path, archive, os.path.basename(folder_dest), force)
            stage.abort()
            folder = None  # type: Optional[str]
        else:
            folder = stage.commit()
            if archive_path is not None:
                _pack_to(folder, archive_path, archive, os.path.basename(folder), force)
    return BundleResult(folder, archive_path, len(tally.payload), sum(size for _, size, _ in tally.payload),
                        tally.counts["hardlink"], tally.counts["copy"], head["dump"]["steps"],
                        tally.coverage, warnings, backend)


def _check_choice(name: str, value: Any, allowed: Tuple[str, ...]) -> None:
    if value not in allowed:
        raise BundleError("{}={!r} is not one of {}".format(name, value, ", ".join(allowed)))


def _strip_archive_ext(path: str) -> str:
    for ext in (".tar.gz", ".tgz", ".tar"):
        if path.lower().endswith(ext):
            return path[: -len(ext)]
    return path


def _pack_to(src_dir: str, archive_path: str, fmt: str, arcroot: str, force: bool) -> None:
    suffix = "." + fmt
    with _fs.Staging(archive_path, force=force, as_file=True, suffix=suffix) as stage:
        _fs.pack_archive(src_dir, stage.path, fmt, arcroot)
        stage.commit()


# -- planning: what goes where -----------------------------------------------------------------
def _plan(located: Any, tf_graph: Optional[str], golden_dir: Optional[str], init_dir: Optional[str],
          warnings: List[str]) -> List[_Planned]:
    plan = []  # type: List[_Planned]
    graph_file = getattr(located, "graph_file", None)
    if graph_file:
        plan.append(_single("graph/" + os.path.basename(graph_file), graph_file, "graph"))
    if tf_graph:
        plan.append(_single("tf/graph.pbtxt", tf_graph, "tf_graph"))
    for step in getattr(located, "steps", []) or []:
        prefix = "dump/" + "/".join((step.time_dir, step.device_id, step.model_name, step.model_id, step.step))
        plan.extend(_dump_files(_fs.safe_relpath(prefix), step.path, warnings))
    for folder, top, kind in ((golden_dir, "golden", "golden"), (init_dir, "init", "init")):
        if folder:
            plan.extend(_Planned(top + "/" + f.rel, f.path, f.size, kind) for f in _fs.walk_files(folder, warnings))
    _reject_duplicates(plan)
    return plan


def _single(rel: str, src: str, kind: str) -> _Planned:
    if not os.path.isfile(src):
        raise BundleError("{} file {} not found".format(kind, src), src)
    return _Planned(_fs.safe_relpath(rel), os.path.realpath(src), os.path.getsize(src), kind)


def _dump_files(prefix: str, folder: str, warnings: List[str]) -> Iterator[_Planned]:
    from .formats.mapping_csv import read_mapping  # formats are loaded only when collecting

    mappings = {}  # type: Dict[str, Optional[Dict[str, str]]]
    for found in _fs.walk_files(folder, warnings):
        rel_dir = found.rel.rpartition("/")[0]
        if rel_dir not in mappings:
            mappings.clear()  # walk_files yields a folder's files together: keep only the current one
            mapping_csv = os.path.join(folder, rel_dir, _MAPPING)
            try:
                mappings[rel_dir] = read_mapping(mapping_csv) if os.path.isfile(mapping_csv) else None
            except FormatError as exc:
                warnings.append("unreadable mapping.csv: {}".format(exc))
                mappings[rel_dir] = None
        yield _Planned(prefix + "/" + found.rel, found.path, found.size, "dump", mappings[rel_dir])


def _reject_duplicates(plan: List[_Planned]) -> None:
    seen = set()
    for item in plan:
        if item.rel in seen:
            raise BundleError("two sources map to bundle path data/{}".format(item.rel), item.src)
        seen.add(item.rel)


# -- placing files and streaming bundle.json ---------------------------------------------------
class _HashingWriter(object):
    """A binary file that counts and hashes what is written (bundle.json is hashed once)."""

    def __init__(self, path: str) -> None:
        import hashlib

        self._out = open(path, "wb")
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._out.write(data)
        self._digest.update(data)
        self.size += len(data)

    def close(self) -> str:
        self._out.close()
        return self._digest.hexdigest()


def _write_payload_and_json(stage: str, head: Dict[str, Any], plan: List[_Planned], ops: Optional[List[str]],
                            link: str, checksum: str, report: Any, workers: Optional[int],
                            warnings: List[str]) -> _Tally:
    """Place every planned file and write data/bundle.json around the stream of entries:
    head keys, ``files`` (one line per entry), then ``coverage`` and ``warnings``."""
    data = os.path.join(stage, "data")
    for rel_dir in sorted({p.rel.rpartition("/")[0] for p in plan}):
        os.makedirs(_fs.safe_join(data, rel_dir), exist_ok=True)
    tally = _Tally()
    out = _HashingWriter(os.path.join(data, BUNDLE_JSON))
    try:
        out.write("{\n")
        for key, value in head.items():
            out.write(" {}: {},\n".format(json.dumps(key), json.dumps(value, sort_keys=True)))
        out.write(' "files": [')
        first = True
        placed_items = _fs.parallel_map(lambda p: _place_one(data, p, link, checksum), plan, workers,
                                        inline=lambda p: p.size < _fs.INLINE_BYTES)
        for item, placed, entry in placed_items:
            _tally_one(tally, item, placed, entry, warnings)
            out.write(("\n  " if first else ",\n  ") + json.dumps(entry))
            first = False
            report.update(1, placed.size)
        tally.coverage = _coverage(ops, tally.dumped)
        out.write("\n ],\n \"coverage\": {},\n \"warnings\": {}\n}}\n".format(
            json.dumps(tally.coverage), json.dumps(warnings)))
    finally:
        digest = out.close()
    tally.payload.append((BUNDLE_JSON, out.size, digest))
    return tally


def _place_one(data: str, item: _Planned, link: str, checksum: str) -> Tuple[_Planned, _fs.PlacedFile, Dict[str, Any]]:
    target = _fs.safe_join(data, item.rel)
    if item.staged:
        size, digest = _fs.sha256_file(target)
        placed = _fs.PlacedFile(size, digest, "staged")
    else:
        placed = _fs.place_file(item.src, target, link=link, checksum=True)  # the manifest needs digests
    entry = {"path": item.rel, "size": placed.size, "sha256": placed.sha256 if checksum == "sha256" else None}
    entry.update(_describe(item, target))
    return item, placed, entry


def _tally_one(tally: _Tally, item: _Planned, placed: _fs.PlacedFile, entry: Dict[str, Any],
               warnings: List[str]) -> None:
    tally.payload.append((item.rel, placed.size, placed.sha256 or ""))
    tally.counts[placed.how] += 1
    warning = entry.pop("_warning", None)
    if warning:
        warnings.append(warning)
    if entry.get("kind") in ("dump", "stats") and entry.get("op_name"):
        from .formats.names import base_op_name

        key = base_op_name(entry["op_name"])
        tally.dumped[key] = tally.dumped.get(key, 0) + 1


def _describe(item: _Planned, placed_path: str) -> Dict[str, Any]:
    """``kind`` plus, for dump-folder files, the parsed name and header summary."""
    if item.kind != "dump":
        return {"kind": item.kind}
    from .formats.names import is_hashed_name, parse_dump_name

    base = item.rel.rpartition("/")[2]
    if base == _MAPPING:
        return {"kind": "mapping"}
    if is_hashed_name(base) and not (item.mapping and base in item.mapping):
        return {"kind": "other", "_warning": "data/{}: hashed name without a mapping.csv entry".format(item.rel)}
    try:
        name = parse_dump_name(base, item.mapping)
    except FormatError:
        return {"kind": "other"}
    entry = {"kind": name.kind, "op_type": name.op_type, "op_name": name.op_name, "task_id": name.task_id,
             "stream_id": name.stream_id, "timestamp": name.timestamp}  # type: Dict[str, Any]
    if name.hashed_name is not None:
        entry["original_name"] = name.file_name
    if name.is_ffts:
        entry.update(task_type=name.task_type, context_id=name.context_id, thread_id=name.thread_id,
                     device_id=name.device_id)
    if name.kind in ("dump", "opdebug"):
        try:
            entry["header"] = header_summary(placed_path)
        except FormatError as exc:
            entry["header"] = None
            entry["_warning"] = "data/{}: header not readable: {}".format(item.rel, exc.rule)
    return entry


def header_summary(path: str) -> Dict[str, Any]:
    """``{"format": "v2"|"legacy", "inputs": [...], "outputs": [...]}`` of a dump file's header,
    each tensor as ``{"dtype", "shape", "format"}`` (plus ``original_shape`` when recorded)."""
    from .formats.dump_file import read_header

    header = read_header(path)
    return {"format": header.version,
            "inputs": [_tensor_summary(t) for t in header.inputs],
            "outputs": [_tensor_summary(t) for t in header.outputs]}


def _tensor_summary(info: Any) -> Dict[str, Any]:
    summary = {"dtype": info.dtype_name, "shape": list(info.shape), "format": info.format_name}  # type: Dict[str, Any]
    if info.original_shape and tuple(info.original_shape) != tuple(info.shape):
        summary["original_shape"] = list(info.original_shape)
    return summary


# -- graph and coverage ------------------------------------------------------------------------
class _GraphOps(NamedTuple):
    expected: List[str]   # sanitized names of ops that get a task (no ``_no_task``), sorted
    names: Set[str]       # sanitized names of all ops
    count: int            # ops in the file (main graph and subgraphs)


def _graph_section(located: Any, stage: str, plan: List[_Planned],
                   warnings: List[str]) -> Tuple[Dict[str, Any], Optional[_GraphOps]]:
    """The ``graph`` key and the graph's ops (for coverage), read from the source graph file;
    the msaccucmp JSON form is staged and appended to ``plan``."""
    graph_file = getattr(located, "graph_file", None)
    section = {"file": None, "name": getattr(located, "graph_name", None), "stage": None, "op_count": None,
               "json": None, "choice": getattr(located, "graph_choice", None)}  # type: Dict[str, Any]
    if not graph_file:
        return section, None
    from .formats.names import parse_graph_file_name

    rel = "graph/" + os.path.basename(graph_file)
    parsed_name = parse_graph_file_name(os.path.basename(graph_file))
    section.update(file=rel, stage=parsed_name.stage if parsed_name else None)
    try:
        ops = _graph_ops(graph_file)
    except FormatError as exc:
        warnings.append("graph not scannable, coverage unknown: {}".format(exc))
        return section, None
    section["op_count"] = ops.count
    section["json"] = _export_graph_json(graph_file, rel, stage, plan, warnings)
    return section, ops


def _graph_ops(path: str) -> _GraphOps:
    """Ops of every graph in the file (main graph and subgraphs), names sanitized as in dump names."""
    from .formats import ge_graph
    from .formats.names import sanitize

    expected, names, count = set(), set(), 0
    for graph in ge_graph.iter_graphs(path):
        for op in graph.ops:
            name = sanitize(op.name)
            names.add(name)
            count += 1
            if not op.no_task:
                expected.add(name)
    return _GraphOps(sorted(expected), names, count)


def _coverage(ops: Optional[_GraphOps], dumped: Dict[str, int]) -> Dict[str, Any]:
    if ops is None:
        return {"expected": None, "dumped": len(dumped), "missing": [], "not_in_graph": []}
    missing = [name for name in ops.expected if name not in dumped]
    return {
        "expected": len(ops.expected),
        "dumped": len(ops.expected) - len(missing),
        "missing": missing,
        "not_in_graph": sorted(name for name in dumped if name not in ops.names),
    }


def _export_graph_json(graph_file: str, rel: str, stage: str, plan: List[_Planned],
                       warnings: List[str]) -> Optional[str]:
    """Stage the msaccucmp JSON form (what ``atc --mode=5`` writes) next to the graph."""
    from .formats import ge_graph

    json_rel = (rel[: -len(".txt")] if rel.endswith(".txt") else rel) + ".json"
    target = os.path.join(stage, "data", *json_rel.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        ge_graph.write_msaccucmp_json(graph_file, target)
    except (FormatError, ValueError) as exc:
        warnings.append("graph JSON export failed: {}".format(exc))
        return None
    plan.append(_Planned(json_rel, target, os.path.getsize(target), "graph", staged=True))
    return json_rel


# -- bundle.json head ----------------------------------------------------------------------------
def _head(located: Any, backend: str, options: Any, run: Optional[Mapping[str, Any]], randomness: Any,
          graph: Dict[str, Any]) -> Dict[str, Any]:
    """The bundle.json keys written before ``files`` (``coverage``/``warnings`` follow it)."""
    return collections.OrderedDict([
        ("schema", BUNDLE_SCHEMA),
        ("backend", backend),
        ("created", datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")),
        ("versions", _versions()),
        ("options", _plain(options) if options is not None else {}),
        ("run", _run_section(run)),
        ("randomness", _plain(randomness)),
        ("graph", _plain(graph)),
        ("dump", _dump_section(located)),
    ])


def _plain(value: Any) -> Any:
    """JSON-ready form: dataclasses become dicts, tuples lists, unknown objects strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if hasattr(value, "to_dict") and callable(value.to_dict):
        value = value.to_dict()
    return json.loads(json.dumps(value, default=str))


def _run_section(run: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    section = {key: None for key in _RUN_KEYS}  # type: Dict[str, Any]
    section.update(_plain(dict(run or {})))
    return section


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


# ---------------------------------------------------------------------------------- verifying
def verify_bundle(path: str, workers: Optional[int] = None) -> List[Problem]:
    """Every problem of the bundle folder or ``.tar``/``.tar.gz`` archive at ``path``.

    An empty list means: a valid BagIt bag whose bundle.json follows the schema, describes
    exactly the payload, and whose dump, mapping and graph files parse. Archives are
    extracted to a temporary folder first; hostile members raise UnsafePathError.
    """
    if os.path.isfile(path):
        if _fs.archive_format(path) is None and not _looks_like_tar(path):
            return [Problem("unparsable", "", "{} is neither a bundle folder nor a tar archive".format(path))]
        with tempfile.TemporaryDirectory(prefix="npu_dump_hook-verify-") as tmp:
            root = _extracted_root(path, tmp)
            return _verify_dir(root, workers)
    if not os.path.isdir(path):
        return [Problem("missing", "", "{} does not exist".format(path))]
    return _verify_dir(path, workers)


def _looks_like_tar(path: str) -> bool:
    import tarfile

    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def _extracted_root(archive: str, tmp: str) -> str:
    tops = _fs.extract_archive(archive, tmp)
    if os.path.isfile(os.path.join(tmp, _bagit.BAGIT_TXT)) or len(tops) != 1:
        return tmp
    return os.path.join(tmp, tops[0])


def _verify_dir(root: str, workers: Optional[int]) -> List[Problem]:
    digests = {}  # type: Dict[str, str]
    problems = _bagit.check_bag(root, digests, workers)
    problems.extend(check_payload(root, digests))
    return problems


# ---------------------------------------------------------------------------------- reading
def read_bundle(path: str) -> Dict[str, Any]:
    """The parsed ``data/bundle.json`` of a bundle folder or archive (BundleError if absent
    or not JSON; UnsafePathError for hostile archive members met on the way)."""
    if os.path.isdir(path):
        target = os.path.join(path, "data", BUNDLE_JSON)
        if not os.path.isfile(target):
            raise BundleError("{} has no data/{}".format(path, BUNDLE_JSON), path)
        with open(target, "rb") as fh:
            return _loads(fh.read(), target)
    if not os.path.isfile(path):
        raise BundleError("{} does not exist".format(path), path)
    return _read_from_archive(path)


def _loads(raw: bytes, where: str) -> Dict[str, Any]:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError("{} is not valid JSON: {}".format(where, exc), where)
    if not isinstance(doc, dict):
        raise BundleError("{} is not a JSON object".format(where), where)
    return doc


def _read_from_archive(path: str) -> Dict[str, Any]:
    import tarfile

    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise BundleError("{} is not a readable tar archive: {}".format(path, exc), path)
    with tar:
        for member in tar:
            try:
                rel = _fs.safe_relpath(member.name)
            except UnsafePathError as exc:
                raise UnsafePathError("archive {}: member {!r}: {}".format(path, member.name, exc), path)
            if member.issym() or member.islnk() or not (member.isfile() or member.isdir()):
                raise UnsafePathError("archive {}: member {!r} is a link or special file".format(
                    path, member.name), path)
            parts = rel.split("/")
            if member.isfile() and parts[-2:] == ["data", BUNDLE_JSON] and len(parts) <= 3:
                fh = tar.extractfile(member)
                if fh is None:  # pragma: no cover
                    break
                with fh:
                    return _loads(fh.read(), "{}:{}".format(path, rel))
    raise BundleError("{} holds no data/{}".format(path, BUNDLE_JSON), path)


def summarize(bundle: Mapping[str, Any]) -> str:
    """Human summary of a bundle.json document (what ``inspect`` prints)."""
    files = [f for f in bundle.get("files", []) if isinstance(f, dict)]
    kinds = {}  # type: Dict[str, int]
    for entry in files:
        kinds[str(entry.get("kind"))] = kinds.get(str(entry.get("kind")), 0) + 1
    graph = bundle.get("graph") or {}
    dump = bundle.get("dump") or {}
    run = bundle.get("run") or {}
    cov = bundle.get("coverage") or {}
    lines = [
        "bundle    {} (backend {}, created {})".format(bundle.get("schema"), bundle.get("backend"), bundle.get("created")),
        "graph     {} (name {}, stage {}, {} ops)".format(graph.get("file"), graph.get("name"), graph.get("stage"),
                                                         graph.get("op_count")),
        "dump      time {} device {} model {} id {} steps {}".format(
            dump.get("time_dir"), dump.get("device_id"), dump.get("model_name"), dump.get("model_id"),
            ", ".join(dump.get("steps") or []) or "-"),
        "run       rank {} device {} steps {} global_step {}".format(
            run.get("rank"), run.get("device_id"), run.get("steps"), run.get("global_step")),
        "files     {} ({} bytes): {}".format(len(files), sum(int(f.get("size") or 0) for f in files),
                                           ", ".join("{} {}".format(n, k) for k, n in sorted(kinds.items())) or "none"),
        "coverage  {}/{} ops of the graph have dump files{}".format(
            cov.get("dumped"), cov.get("expected"),
            "; missing: " + ", ".join(cov["missing"][:10]) + (" ..." if len(cov["missing"]) > 10 else "")
            if cov.get("missing") else ""),
    ]
    for warning in bundle.get("warnings") or []:
        lines.append("warning   {}".format(warning))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- multi-rank
def rank_from_env(environ: Optional[Mapping[str, str]] = None) -> Tuple[int, Optional[str]]:
    """(rank, device id) from RANK_ID / DEVICE_ID as HCCL jobs set them (rank 0 by default)."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_RANK_ID, "0").strip() or "0"
    if not text.isdigit():
        raise BundleError("{}={!r} is not a non-negative integer".format(ENV_RANK_ID, text))
    return int(text), env.get(ENV_DEVICE_ID)


def write_rank_bundle(root: str, rank: Optional[int], located: Any, **kwargs: Any) -> BundleResult:
    """Write ``{root}/rank_{rank}/`` (rank from RANK_ID when None) and record it in the index."""
    device_id = None
    if rank is None:
        rank, device_id = rank_from_env()
    os.makedirs(root, exist_ok=True)
    result = write_bundle(os.path.join(root, "rank_{}".format(int(rank))), located, **kwargs)
    update_index(root, int(rank), result, device_id=device_id)
    return result


def update_index(root: str, rank: int, result: BundleResult, device_id: Optional[str] = None,
                 timeout: float = 60.0) -> Dict[str, Any]:
    """Add or replace ``rank`` in ``{root}/index.json`` under ``{root}/index.json.lock``."""
    from filelock import FileLock

    index_path = os.path.join(root, INDEX_JSON)
    entry = {
        "path": os.path.relpath(result.location, root).replace(os.sep, "/"),
        "archive": os.path.relpath(result.archive, root).replace(os.sep, "/") if result.archive else None,
        "device_id": device_id,
        "backend": result.backend,
        "files": result.files,
        "bytes": result.bytes,
        "steps": result.steps,
        "updated": datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds"),
    }
    with FileLock(index_path + ".lock", timeout=timeout):
        index = read_index(root) if os.path.isfile(index_path) else {"schema": INDEX_SCHEMA, "ranks": {}}
        index["ranks"][str(rank)] = entry
        index["ranks"] = {k: index["ranks"][k] for k in sorted(index["ranks"], key=int)}
        _fs.atomic_write_bytes(index_path, json.dumps(index, indent=1).encode("utf-8") + b"\n")
    return index


def read_index(root: str) -> Dict[str, Any]:
    """The parsed ``{root}/index.json``."""
    path = os.path.join(root, INDEX_JSON)
    with open(path, "rb") as fh:
        index = _loads(fh.read(), path)
    if index.get("schema") != INDEX_SCHEMA or not isinstance(index.get("ranks"), dict):
        raise BundleError("{} is not a {} document".format(path, INDEX_SCHEMA), path)
    return index
