"""``npu-dump-hook parse PATH... [--json] [--to-npy DIR]``: show what dump artefacts hold.

Each PATH is a file or a folder (walked recursively, in sorted order). Files are
recognised by name (:mod:`.formats.names`): ``mapping.csv``, ``ge_proto_*.txt`` graphs
(``ge_onnx``/``ge_readable`` dumps are listed as not used), stats ``*.csv``, Opdebug files,
dump files (hashed all-digit names are resolved through the folder's mapping.csv). Inside
folders other files are skipped (listed under ``skipped`` in --json). A file named on the
command line whose name matches none of these rules is reported as "not a dump file"
(it is not read); a folder holding no recognisable file is reported too.

Output: text by default, or with ``--json`` one document
``{"files": [...], "skipped": [...], "npy": [...], "errors": [...]}`` on stdout.
``--to-npy DIR`` writes each input/output tensor in its original (framework) shape as
``{file name}.{input|output}.{index}.npy``.

Exit codes: 0 when every file parsed; 1 when any file is malformed, unreadable or not a dump
artefact, or a folder holds none (one line on stderr each, ``npu-dump-hook: path at byte N:
rule``; the other paths are still processed); 2 when a PATH does not exist or ``--to-npy``
names something that is not a folder (checked before anything is read).
"""
import argparse
import json
import math
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..bundle.describe import classify_file
from ..errors import FormatError, NameFormatError
from ..formats import ge_graph, names
from .._forked import usable_cores
from ..formats.device_format import to_original
from ..formats.dump_file import DumpFile, bfloat16_bits_to_float32
from ..formats.mapping_csv import MAPPING_FILE_NAME, read_mapping
from ..formats.opdebug import read_opdebug_file
from ..formats.stats_csv import read_stats_csv
from ._exit import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE, CliError, pending
from ._output import say

__all__ = ["run"]


KIND_MAPPING = "mapping"
KIND_GRAPH = "graph"
KIND_GRAPH_IGNORED = "graph_ignored"
KIND_UNKNOWN = "unknown"

NOT_A_DUMP_FILE = ("not a dump file (its name matches no dump file, stats CSV, Opdebug file, mapping.csv "
                   "or ge_proto graph rule)")
NOTHING_FOUND = "no dump files, stats CSVs, Opdebug files, mapping.csv or graph files found"


class _Report(object):
    """What one run found: per-file entries, skipped files, written .npy files, errors."""

    def __init__(self, args: Optional[argparse.Namespace] = None) -> None:
        self.files = []  # type: List[Dict[str, Any]]
        self.skipped = []  # type: List[str]
        self.npy = []  # type: List[str]
        self.errors = []  # type: List[Dict[str, Any]]
        self._args = args

    def error(self, path: str, rule: str, offset: Optional[int] = None) -> None:
        self.errors.append({"path": path, "offset": offset, "rule": rule})
        if self._args is not None:
            pending(self._args, EXIT_CHECK_FAILED)
        where = path if offset is None else "{} at byte {}".format(path, offset)
        say("npu-dump-hook: {}: {}".format(where, " ".join(rule.split("\n"))), file=sys.stderr)

    def format_error(self, exc: FormatError) -> None:
        self.error(exc.path, exc.rule, exc.offset)


def _check_paths(args: argparse.Namespace) -> None:
    """Usage errors, before anything is read: a PATH that does not exist, a bad --to-npy."""
    missing = [p for p in args.paths if not os.path.lexists(p)]
    if missing:
        raise CliError("{}: no such file or folder".format(", ".join(missing)), EXIT_USAGE)
    if args.to_npy and os.path.lexists(args.to_npy) and not os.path.isdir(args.to_npy):
        raise CliError("--to-npy {}: not a folder".format(args.to_npy), EXIT_USAGE)


def run(args: argparse.Namespace) -> int:
    _check_paths(args)
    report = _Report(args)
    npy_dir = args.to_npy
    if npy_dir:
        try:
            os.makedirs(npy_dir, exist_ok=True)
        except OSError as exc:
            raise CliError("--to-npy {}: cannot create: {}".format(npy_dir, exc.strerror or exc))
    mappings = _MappingCache(report)

    def show(entry: Optional[Dict[str, Any]]) -> bool:
        if entry is None:
            return False
        report.files.append(entry)
        if not args.json:
            _print_entry(entry)
        return True

    for path in args.paths:
        if os.path.isdir(path):
            found = False
            for name in _files_under(path):
                if show(_parse_file(name, mappings, report, npy_dir)):
                    found = True
                else:
                    report.skipped.append(name)
            if not found:
                report.error(path, NOTHING_FOUND)
        elif not show(_parse_file(path, mappings, report, npy_dir)):
            report.error(path, NOT_A_DUMP_FILE)
    if args.json:
        document = {"files": report.files, "skipped": report.skipped, "npy": report.npy, "errors": report.errors}
        json.dump(_jsonable(document), sys.stdout, indent=2, sort_keys=False, allow_nan=False)
        sys.stdout.write("\n")
    return EXIT_CHECK_FAILED if report.errors else EXIT_OK


def _files_under(folder: str) -> Iterator[str]:
    """Every file under ``folder``, folders in sorted order."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            yield os.path.join(root, name)


class _MappingCache(object):
    """mapping.csv of each folder, read once (an unreadable one counts as empty)."""

    def __init__(self, report: _Report) -> None:
        self._by_dir = {}  # type: Dict[str, Dict[str, str]]
        self._report = report

    def get(self, folder: str) -> Dict[str, str]:
        if folder not in self._by_dir:
            path = os.path.join(folder, MAPPING_FILE_NAME)
            try:
                self._by_dir[folder] = read_mapping(path) if os.path.isfile(path) else {}
            except NameFormatError:
                self._by_dir[folder] = {}  # reported when mapping.csv itself is parsed
        return self._by_dir[folder]


def _classify(path: str, mappings: _MappingCache) -> Tuple[str, Optional[names.DumpName], Any]:
    """(kind, parsed dump name or None, parsed graph file name or None) from the file name
    (:func:`npu_dump_hook.bundle.describe.classify_file`, the one classifier)."""
    found = classify_file(os.path.basename(path), mappings.get(os.path.dirname(path)))
    if found.graph is not None:
        return (KIND_GRAPH if found.graph.usable_for_mapping else KIND_GRAPH_IGNORED), None, found.graph
    return {"mapping": KIND_MAPPING, "other": KIND_UNKNOWN}.get(found.kind, found.kind), found.name, None


def _parse_file(
    path: str, mappings: _MappingCache, report: _Report, npy_dir: Optional[str]
) -> Optional[Dict[str, Any]]:
    """The entry for one file, or None when its name is no dump artefact (it is not read)."""
    kind, dump_name, graph_name = _classify(path, mappings)
    if kind == KIND_UNKNOWN:
        return None
    entry = {"path": path, "kind": kind}  # type: Dict[str, Any]
    if dump_name is not None:
        entry["name"] = _name_fields(dump_name)
    try:
        if kind == KIND_MAPPING:
            entry["mapping"] = read_mapping(path)
        elif kind == KIND_GRAPH:
            _fill_graphs(entry, path, graph_name)
        elif kind == KIND_GRAPH_IGNORED:
            entry["graph_file"] = _graph_file_fields(graph_name)
        elif kind == names.KIND_STATS:
            entry.update(_stats_entry(path))
        elif kind == names.KIND_OPDEBUG:
            header, record = read_opdebug_file(path)
            entry["header"] = _header_entry(path, report, npy_dir)
            entry["overflow"] = record.as_dict()
        else:
            entry["header"] = _header_entry(path, report, npy_dir)
    except FormatError as exc:
        report.format_error(exc)
        entry["error"] = {"offset": exc.offset, "rule": exc.rule}
    except OSError as exc:
        report.error(path, "cannot read: {}".format(exc.strerror or exc))
        entry["error"] = {"offset": None, "rule": "cannot read: {}".format(exc.strerror or exc)}
    return entry


def _name_fields(parsed: names.DumpName) -> Dict[str, Any]:
    fields = {
        "op_type": parsed.op_type,
        "op_name": parsed.op_name,
        "task_id": parsed.task_id,
        "stream_id": parsed.stream_id,
        "timestamp": parsed.timestamp,
    }
    if parsed.is_ffts:
        fields.update(
            task_type=parsed.task_type,
            context_id=parsed.context_id,
            thread_id=parsed.thread_id,
            device_id=parsed.device_id,
        )
    if parsed.slice_index is not None:
        fields["slice_index"] = parsed.slice_index
    if parsed.hashed_name is not None:
        fields["file_name"] = parsed.file_name
    return fields


def _graph_file_fields(graph: names.GraphFileName) -> Dict[str, Any]:
    return {
        "kind": graph.kind,
        "index": graph.index,
        "graph_id": graph.graph_id,
        "stage": graph.stage,
        "used_for_mapping": graph.usable_for_mapping,
    }


def _fill_graphs(entry: Dict[str, Any], path: str, graph: names.GraphFileName) -> None:
    """Graph names and op counts; graphs read before a malformed part stay in ``entry``."""
    entry["graph_file"] = _graph_file_fields(graph)
    entry["graphs"] = graphs = []  # type: List[Dict[str, Any]]
    # a CLI process runs no TensorFlow: a large graph is read on every core (forked workers)
    for found in ge_graph.iter_graph_counts(path, workers=usable_cores()):
        graphs.append({"name": found.name, "op_count": found.op_count})


def _stats_entry(path: str) -> Dict[str, Any]:
    parsed = read_stats_csv(path)
    rows = []
    for row in parsed.rows:
        item = dict(row.__dict__)
        item["shape"] = list(row.shape)
        rows.append(item)
    return {"variant": parsed.variant, "columns": list(parsed.columns), "rows": rows}


# --------------------------------------------------------------------------- dump files


def _header_entry(path: str, report: _Report, npy_dir: Optional[str]) -> Dict[str, Any]:
    with DumpFile.open(path) as dump:
        summary = dump.summary()
        for kind, key in (("input", "inputs"), ("output", "outputs")):
            for info, item in zip(dump.tensors(kind), summary[key]):
                item["stats"] = _tensor_stats(dump, info)
                if npy_dir:
                    _write_npy(dump, info, npy_dir, report)
    return summary


def _storage_as_numbers(dump: Any, info: Any) -> Optional[np.ndarray]:
    """The tensor as a numpy array numbers can be computed on, or None (no numpy type)."""
    if info.dtype is not None:
        return dump.array(info.kind, info.index)
    if info.dtype_name == "DT_BF16":  # exact without ml_dtypes
        return bfloat16_bits_to_float32(dump.array(info.kind, info.index, raw=True))
    return None


_STATS_CHUNK = 1 << 20  # elements per statistics chunk: at most ~13 MB of temporaries


def _tensor_stats(dump: Any, info: Any) -> Optional[Dict[str, Any]]:
    """min/max/mean over finite elements, NaN and ±Inf counts; None when not numeric."""
    array = _storage_as_numbers(dump, info)
    if array is None or array.dtype.kind not in "biuf":
        return None
    flat = array.reshape(-1)
    stats = {"count": int(flat.size), "nan": 0, "inf": 0, "min": None, "max": None, "mean": None}
    low, high, total, finite = np.inf, -np.inf, 0.0, 0
    # In chunks over the memory map: a 1 GiB tensor must not cost gigabytes of temporaries
    # (masks, the finite subset and its float64 copy are per chunk).
    for start in range(0, flat.size, _STATS_CHUNK):
        chunk = flat[start:start + _STATS_CHUNK]
        if chunk.dtype.kind == "f":
            stats["nan"] += int(np.count_nonzero(np.isnan(chunk)))
            stats["inf"] += int(np.count_nonzero(np.isinf(chunk)))
            chunk = chunk[np.isfinite(chunk)]
        if chunk.size:
            values = chunk.astype(np.float64)
            low, high = min(low, float(values.min())), max(high, float(values.max()))
            total += float(values.sum())
            finite += int(values.size)
    if finite:
        stats.update(min=low, max=high, mean=total / finite)
    return stats


def _write_npy(dump: Any, info: Any, npy_dir: str, report: _Report) -> None:
    target = os.path.join(npy_dir, "{}.{}.{}.npy".format(os.path.basename(dump.path), info.kind, info.index))
    if target in report.npy:
        report.error(dump.path, "{} already written from another file with this name".format(target))
        return
    try:
        if info.dtype is None:
            array = _storage_as_numbers(dump, info)
            if array is None:
                report.error(dump.path, "{}[{}] {} has no numpy type; not written".format(
                    info.kind, info.index, info.dtype_name), info.offset)
                return
            array = _to_original(array.reshape(info.shape), info, dump.path)
        else:
            array = dump.array(info.kind, info.index, original_shape=True)
    except FormatError as exc:
        report.error(exc.path, "{}[{}]: {}".format(info.kind, info.index, exc.rule), info.offset)
        return
    np.save(target, np.ascontiguousarray(array), allow_pickle=False)
    report.npy.append(target)


def _to_original(array: np.ndarray, info: Any, path: str) -> np.ndarray:
    return to_original(array, info.format_name, info.original_shape, info.original_format, source=path)


# --------------------------------------------------------------------------- output


def _jsonable(value: Any) -> Any:
    """Plain JSON: non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _print_entry(entry: Dict[str, Any]) -> None:
    say("{}: {}".format(entry["path"], entry["kind"]))
    name = entry.get("name")
    if name:
        say("  name: " + ", ".join("{} {}".format(k, v) for k, v in name.items() if v is not None))
    if "mapping" in entry:
        for hashed, original in sorted(entry["mapping"].items()):
            say("  {} -> {}".format(hashed, original))
    if "graph_file" in entry:
        graph_file = entry["graph_file"]
        say("  graph file: stage {}, index {}, graph id {}{}".format(
            graph_file["stage"], graph_file["index"], graph_file["graph_id"],
            "" if graph_file["used_for_mapping"] else " (not used for mapping; not parsed)"))
    for graph in entry.get("graphs", ()):
        say("  graph {!r}: {} ops".format(graph["name"], graph["op_count"]))
    if "rows" in entry:
        _print_stats(entry)
    if "header" in entry:
        _print_header(entry["header"])
    if "overflow" in entry:
        _print_overflow(entry["overflow"])
    if "error" in entry:
        say("  malformed: {}".format(entry["error"]["rule"]))


def _print_stats(entry: Dict[str, Any]) -> None:
    say("  stats CSV ({} header)".format(entry["variant"]))
    for row in entry["rows"]:
        shape = "x".join(str(d) for d in row["shape"]) or "-"
        cells = ["{} {}".format(k, _fmt(row[k])) for k in (
            "max_value", "min_value", "avg_value", "count", "nan_count", "negative_inf_count",
            "positive_inf_count", "l2norm") if row.get(k) is not None]
        say("  {}[{}] {} {} shape {} size {}  {}".format(
            row["direction"].lower(), row["index"], row["data_type"] or "-", row["format"] or "-", shape,
            row["data_size"], " ".join(cells)))


def _print_header(header: Dict[str, Any]) -> None:
    say("  {} file, version {!r}, op_name {!r}, dump_time {}, header {} bytes, file {} bytes".format(
        header["format"], header["version"], header["op_name"], header["dump_time"],
        header["header_len"], header["file_size"]))
    for name, value in sorted(header.get("attrs", {}).items()):
        say("  attr {}: {}".format(name, value))
    for key in ("inputs", "outputs", "buffers", "workspaces"):
        for item in header.get(key, ()):
            line = "  {}[{}] {} {} shape {} original {} size {}".format(
                key[:-1], item["index"], item["dtype"], item["format"], item["shape"],
                item["original_shape"], item["size"])
            if item.get("original_name"):
                line += " from {!r}".format(item["original_name"])
            stats = item.get("stats")
            if stats:
                line += "  min {} max {} mean {} nan {} inf {}".format(
                    _fmt(stats["min"]), _fmt(stats["max"]), _fmt(stats["mean"]), stats["nan"], stats["inf"])
            say(line)
    for warning in header.get("warnings", ()):
        say("  warning: {}".format(warning))


def _print_overflow(overflow: Dict[str, Any]) -> None:
    head = "  overflow record ({} layout)".format(overflow["layout"])
    if overflow["layout"] == "new":
        head += " version {} valid {} acc_type {}".format(overflow["version"], overflow["valid"], overflow["acc_type"])
    say(head)
    for item in overflow["entries"]:
        values = ", ".join("{} {}".format(k, v) for k, v in item.items() if k != "unit")
        say("    {}: {}".format(item["unit"], values))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "{:.6g}".format(value)
    return str(value)
