"""Statistics compare: a ``dump_data="stats"`` NPU bundle against the golden statistics of its
golden run (docs/compare.md, "Statistics compare").

* **NPU side**: the step folder's stats CSVs (:mod:`npu_dump_hook.formats.stats_csv`), the
  newest per op, matched to graph ops as dump files are; each row (input ``j`` / output ``i`` of
  op X) is matched to its golden TF tensor exactly as a tensor dump's (:mod:`._match`: output
  origin attrs, Cast/TransData walked through, inputs through their producer).
* **Golden side**: ``data/golden/golden_stats.json`` of a golden bundle (or that file, or a folder
  holding it), written by the golden run of a stats bundle
  (:mod:`npu_dump_hook.train.golden_stats`), looked up by msaccucmp's key; a tensor golden (a golden
  bundle or folder of .npy files, an emulated bundle's own ``data/golden``) has its statistics
  computed here the same way.
* **Per statistic** a relative difference: ``|npu - golden| / max(|golden|, rms)`` for Max, Min
  and Avg, where ``rms`` is the golden tensor's root mean square (``l2norm / sqrt(count)``), so a
  statistic near zero (the mean of a pre-activation) is measured against the tensor's scale, not
  against itself; ``|npu - golden| / golden`` for the L2 norm when the CSV has the ``l2norm``
  column. A device format with padding (NC1HWC0, FRACTAL_*) holds more elements than the
  tensor: the padding is zeros, so the golden is compared as padded (max with 0, min with 0,
  avg scaled by the counts; the L2 norm unchanged). NaN/-Inf/+Inf counts are compared as
  differences; more non-finite elements on the NPU than in the golden is an **overflow** row.
* **Thresholds** (:class:`StatsThresholds`): ``value_rel_max`` on Max/Min/Avg, ``norm_rel_max``
  on the L2 norm (documented defaults, measured on the emulator's float16 profile); a row
  breaches when one is crossed or it overflows. Its score, the largest difference / limit
  ratio, is what :func:`._analysis.analyse` sees as its distance, so root causes, propagated
  rows and the first divergence follow the tensor compare's rules exactly.
"""
import contextlib
import gc
import json
import math
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..bundle import BUNDLE_JSON, DATA_DIR, looks_like_tar, open_bundle, open_regular
from ..errors import CompareError, FormatError, OptionError
from ..formats.names import sanitize
from ..formats.stats_csv import tensor_statistics
from ._golden import golden_key, index_npy_dir, load_golden
from ._graph import Graph
from ._match import data_inputs, ground_truth, newest_per_op, origin_of, OpEntry
from ._rows import Row
from ._stats_fast import Cells, read_stats_cells

__all__ = ["StatsThresholds", "DEFAULT_STATS_THRESHOLDS", "STATS_FILE", "GoldenStats", "load_golden_stats",
           "stats_rows", "StatsDetail", "VALUE_STATS"]

STATS_FILE = "golden_stats.json"
_SCHEMA = "npu_dump_hook/golden_stats@1"
_MAX_FILE = 1 << 30  # a golden statistics file is ~300 bytes a tensor
#: (JSON/CSV name, StatsRow field) of the statistics compared as values.
VALUE_STATS = (("max", "max_value"), ("min", "min_value"), ("avg", "avg_value"))


class StatsThresholds(NamedTuple):
    """Limits of the statistics compare; None turns one off. ``check_scalars`` as for tensors."""

    value_rel_max: Optional[float] = 0.03
    norm_rel_max: Optional[float] = 0.03
    check_scalars: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return dict(self._asdict())

    def describe(self) -> str:
        return "max/min/avg rel. diff <= {}, l2norm rel. diff <= {}{}".format(
            self.value_rel_max if self.value_rel_max is not None else "off",
            self.norm_rel_max if self.norm_rel_max is not None else "off",
            ", scalars checked" if self.check_scalars else "")


DEFAULT_STATS_THRESHOLDS = StatsThresholds()


def make_stats_thresholds(value: Any) -> StatsThresholds:
    """From None (defaults), a StatsThresholds or a dict of its fields; OptionError otherwise."""
    if value is None:
        return DEFAULT_STATS_THRESHOLDS
    if isinstance(value, StatsThresholds):
        return value
    if not isinstance(value, dict):
        raise OptionError("stats_thresholds", value, "must be None, a StatsThresholds or a dict of its fields")
    unknown = sorted(set(value) - set(StatsThresholds._fields))
    if unknown:
        raise OptionError("stats_thresholds", unknown, "unknown key(s); known: " + ", ".join(StatsThresholds._fields))
    fields = DEFAULT_STATS_THRESHOLDS.as_dict()
    fields.update(value)
    for key in ("value_rel_max", "norm_rel_max"):
        limit = fields[key]
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))
                                  or not math.isfinite(limit) or limit < 0):
            raise OptionError("stats_thresholds." + key, limit, "must be a finite number >= 0 or None (off)")
    return StatsThresholds(**fields)


@contextlib.contextmanager
def paused_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused: building many objects that are all kept (the rows,
    their details, the document; a dict a golden tensor) makes it run every 700 allocations and
    walk every object kept so far each time it reaches the oldest generation (a quarter of the
    statistics compare's CPU at 10,000 rows), to free nothing. Reference counting still frees
    what is dropped; any cycle is collected once it runs again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# -- the golden side -------------------------------------------------------------------------

class GoldenStats(object):
    """``tensors``: key -> statistics entry; ``path``/``kind`` as the document shows them;
    ``bundle_json`` of a golden bundle (input consistency), ``owner`` the opened bundle."""

    def __init__(self, path: str, kind: str, tensors: Dict[str, Dict[str, Any]], file: str,
                 bundle_json: Optional[Dict[str, Any]] = None, owner: Any = None) -> None:
        self.path, self.kind, self.tensors, self.file = path, kind, tensors, file
        self.bundle_json, self.owner = bundle_json, owner

    def describe(self) -> Dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "statistics": self.file}

    def close(self) -> None:
        owner, self.owner = self.owner, None
        if owner is not None:
            owner.close()


def _read_stats_file(path: str) -> Dict[str, Dict[str, Any]]:
    try:
        with open_regular(path, buffering=0) as handle:
            if os.fstat(handle.fileno()).st_size > _MAX_FILE:
                raise CompareError("golden statistics {}: larger than {} bytes".format(path, _MAX_FILE), path)
            with paused_cycle_collection():  # a dict a tensor, all kept
                doc = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError("golden statistics {}: not readable as JSON ({})".format(path, exc), path)
    if not isinstance(doc, dict) or doc.get("schema") != _SCHEMA or not isinstance(doc.get("tensors"), list):
        raise CompareError("golden statistics {}: not a {} document (schema, tensors list)".format(path, _SCHEMA), path)
    found = {}  # type: Dict[str, Dict[str, Any]]
    for number, entry in enumerate(doc["tensors"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not _all_stats(entry):
            raise CompareError("golden statistics {}: tensors[{}] needs a string key and numbers (or null) for "
                               "count, max, min, avg, nan, neg_inf, pos_inf, l2norm".format(path, number), path)
        found[entry["key"]] = entry  # a later tensor of the same key wins, as for .npy files
    return found


_STAT_NAMES = ("count", "max", "min", "avg", "nan", "neg_inf", "pos_inf", "l2norm")
_PLAIN = (int, float, type(None))  # what JSON gives a number or null; anything else: _is_stat decides


def _all_stats(entry: Dict[str, Any]) -> bool:
    for name in _STAT_NAMES:
        value = entry.get(name)
        if type(value) not in _PLAIN and not _is_stat(value):
            return False
    return True


def _is_stat(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _stats_from_npy(path: str, folder: str, in_tree_links: bool) -> Dict[str, Dict[str, Any]]:
    """Statistics of a tensor golden (msaccucmp-named .npy files): the same numbers a golden run
    of the stats bundle writes, computed here (one tensor in memory at a time)."""
    files, _ = index_npy_dir(folder, in_tree_links)
    if not files:
        raise CompareError("golden {}: {} holds neither {} nor msaccucmp-named .npy files".format(
            path, folder, STATS_FILE), path)
    found = {}  # type: Dict[str, Dict[str, Any]]
    for key, npy in files.items():
        try:
            array = load_golden(npy)
        except (OSError, ValueError):
            continue  # its rows are "no golden file"
        entry = {"key": key, "dtype": str(array.dtype), "shape": list(array.shape)}
        entry.update(tensor_statistics(array))
        found[key] = entry
    return found


def _from_folder(path: str, kind: str, folder: str, in_tree_links: bool, bundle_json: Any = None,
                 owner: Any = None) -> GoldenStats:
    stats = os.path.join(folder, STATS_FILE)
    if os.path.isfile(stats):
        return GoldenStats(path, kind, _read_stats_file(stats), stats, bundle_json, owner)
    return GoldenStats(path, kind, _stats_from_npy(path, folder, in_tree_links), folder + " (.npy)",
                       bundle_json, owner)


def load_golden_stats(golden: Optional[str], npu_golden_dir: Optional[str]) -> GoldenStats:
    """The golden statistics of ``golden``: a golden bundle (folder or archive), a folder holding
    ``golden_stats.json``, that file, or a tensor golden (bundle or folder of .npy files: their
    statistics are computed); None: the NPU bundle's own ``data/golden``."""
    if golden is None:
        if npu_golden_dir is None:
            raise CompareError("stats bundle without golden statistics: give GOLDEN, the golden bundle of a golden "
                               "run of this stats bundle (npu-dump-hook run --golden-for STATS_BUNDLE)", "GOLDEN")
        return _from_folder(npu_golden_dir, "embedded", npu_golden_dir, False)
    if not os.path.exists(golden):
        raise CompareError("golden {}: no such file or folder".format(golden), golden)
    if os.path.isfile(golden) and not looks_like_tar(golden):
        return GoldenStats(golden, "file", _read_stats_file(golden), golden)
    if os.path.isdir(golden) and not os.path.isfile(os.path.join(golden, DATA_DIR, BUNDLE_JSON)):
        return _from_folder(golden, "folder", golden, True)
    view = open_bundle(golden, parts=("golden",))
    try:
        folder = view.golden_dir()
        if folder is None:
            raise CompareError("golden {}: the bundle has no data/golden folder".format(golden), golden)
        return _from_folder(golden, "bundle", folder, False, view.doc, view)
    except BaseException:
        view.close()
        raise


# -- rows -------------------------------------------------------------------------------------

class StatsDetail(NamedTuple):
    """What a stats row carries besides the analysis fields: both sides' statistics, the
    differences, the golden tensor and a note (padding, missing statistics)."""

    npu: Dict[str, Any]
    golden: Optional[Dict[str, Any]]
    rel_diff: Dict[str, Optional[float]]
    count_diff: Dict[str, Optional[int]]
    golden_tensor: Optional[str]
    npu_format: str
    note: str


def _npu_stats(cells: Cells) -> Dict[str, Any]:
    """The NPU side's statistics of one row (cells in StatsRow's field order, _stats_fast)."""
    return {"max": cells[6], "min": cells[7], "avg": cells[8], "nan": cells[10], "neg_inf": cells[11],
            "pos_inf": cells[12], "count": cells[9], "l2norm": cells[13]}


def _padded_golden(golden: Dict[str, Any], npu_count: Optional[int]) -> Tuple[Dict[str, Any], str]:
    """The golden statistics as a zero-padded device payload of ``npu_count`` elements holds them."""
    count = golden.get("count")
    if not npu_count or not count or npu_count <= count:
        return golden, ""
    padded = dict(golden)
    if golden.get("max") is not None:
        padded["max"] = max(golden["max"], 0.0)
    if golden.get("min") is not None:
        padded["min"] = min(golden["min"], 0.0)
    if golden.get("avg") is not None:
        padded["avg"] = golden["avg"] * count / float(npu_count)
    return padded, "device payload of {} elements for {}: golden compared as zero-padded".format(npu_count, count)


def _rel(npu: Any, golden: Any, scale: float) -> Optional[float]:
    if npu is None or golden is None:
        return None
    if npu != npu:  # NaN: the NPU tensor has no finite element where the golden has
        return math.nan
    denom = abs(golden)
    if denom < scale:
        denom = scale
    if denom == 0:
        return 0.0 if npu == golden else math.inf
    return abs(npu - golden) / denom


def compare_stats(npu: Dict[str, Any], golden: Dict[str, Any]) -> Tuple[Dict[str, Optional[float]],
                                                                       Dict[str, Optional[int]], str]:
    """(relative differences by statistic, NaN/Inf count differences, note) of one tensor."""
    count, norm, npu_count = golden.get("count"), golden.get("l2norm"), npu.get("count")
    padded, note = _padded_golden(golden, npu_count) if npu_count and count and npu_count > count else (golden, "")
    rms = norm / math.sqrt(count) if norm is not None and count else 0.0
    rel = {"max": _rel(npu["max"], padded.get("max"), rms), "min": _rel(npu["min"], padded.get("min"), rms),
           "avg": _rel(npu["avg"], padded.get("avg"), rms), "l2norm": _rel(npu["l2norm"], norm, 0.0)}
    diffs = {"nan": _difference(npu["nan"], golden.get("nan")),
             "neg_inf": _difference(npu["neg_inf"], golden.get("neg_inf")),
             "pos_inf": _difference(npu["pos_inf"], golden.get("pos_inf"))}  # type: Dict[str, Optional[int]]
    return rel, diffs, note


def _difference(mine: Optional[int], theirs: Optional[int]) -> Optional[int]:
    return mine - theirs if mine is not None and theirs is not None else None


def score_of(rel: Dict[str, Optional[float]], limits: StatsThresholds) -> Tuple[float, List[str]]:
    """(largest difference / limit ratio, names of the statistics past their limit)."""
    worst, crossed = 0.0, []
    value_limit, norm_limit = limits.value_rel_max, limits.norm_rel_max
    for name, value in rel.items():
        limit = norm_limit if name == "l2norm" else value_limit
        if value is None or limit is None:
            continue
        if value != value:  # NaN
            ratio = math.inf
            crossed.append(name)
        else:
            ratio = value / limit if limit > 0 else (math.inf if value else 0.0)
            if value > limit:
                crossed.append(name)
        if ratio > worst:
            worst = ratio
    return worst, crossed


class _Targets(object):
    """The golden tensor of an NPU tensor, (name, index), its look-up key and ``name:index``,
    memoised per (op, slot): an op's output is its consumers' input too."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.memo = {}  # type: Dict[Tuple[str, int], Tuple[Tuple[str, int], str, str]]

    def of(self, name: str, slot: int) -> Tuple[Tuple[str, int], str, str]:
        found = self.memo.get((name, slot))
        if found is None:
            plan = origin_of(self.graph, name, slot)
            target = (plan.name, plan.index)
            found = self.memo[(name, slot)] = (target, golden_key(*target), "{}:{}".format(*target))
        return found


def _row(entry: OpEntry, cells: Cells, golden_name: Optional[Tuple[str, int]], golden: Optional[Dict[str, Any]],
         score: Optional[float], reason: str, overflow: bool) -> Row:
    shape = cells[5]
    return Row.of_values(entry, entry.dump.name.timestamp, cells[0].lower(), cells[1], cells[3] or "NaN", shape,
                         cells[4] or "", tuple(golden["shape"]) if golden and golden.get("shape") else shape,
                         golden_name, str(golden.get("dtype")) if golden else "NaN",
                         None if reason else {"RelativeEuclideanDistance": score}, reason, overflow)


def _input_last(cells: Cells) -> Tuple[bool, int]:
    return cells[0] != "Input", cells[1]


def stats_rows(graph: Graph, refs: List[Any], golden: GoldenStats, limits: StatsThresholds,
               ops: Any = None) -> Tuple[List[Row], Dict[int, StatsDetail], List[str]]:
    """Rows (analysis objects, msaccucmp's row order, ``order`` set), their details by
    ``id(row)``, and the stats CSVs that did not read (``"file: reason"``); ``ops``: a compiled
    pattern, only ops whose name or an original name matches (``re.search``)."""
    newest = newest_per_op(refs)
    rows, details, unreadable = [], {}, []  # type: List[Row], Dict[int, StatsDetail], List[str]
    group = {}  # type: Dict[object, int]
    targets = _Targets(graph)
    for position, op in enumerate(graph.ops):
        ref = newest.pop(sanitize(op.name), None)
        truth = ground_truth(op)
        index = group.setdefault(tuple(truth) if len(truth) != 1 else truth[0], len(group))
        if ref is None or (ops is not None and not ops.search(op.name) and not any(ops.search(t) for t in truth)):
            continue
        entry = OpEntry(position, index, op.name, op.type, truth, ref, None)
        try:
            parsed = read_stats_cells(ref.path)
        except (OSError, FormatError) as exc:
            unreadable.append("{}: {}".format(ref.path, exc))
            continue
        edges = None  # type: Optional[List[Tuple[str, int]]]
        for cells in sorted(parsed, key=_input_last) if len(parsed) > 1 else parsed:
            if cells[0] == "Output":  # both readers give "Input" or "Output", nothing else
                target = targets.of(op.name, cells[1])  # type: Optional[Tuple[Tuple[str, int], str, str]]
            else:
                edges = data_inputs(op) if edges is None else edges
                target = targets.of(*edges[cells[1]]) if cells[1] < len(edges) else None
            row, detail = _one_row(op, entry, cells, target, golden, limits)
            rows.append(row)
            details[id(row)] = detail
    unclaimed = len(newest)
    if unclaimed:
        unreadable.append("{} stats CSV(s) match no op of the graph, e.g. {}".format(
            unclaimed, sorted(r.path for r in newest.values())[0]))
    for number, row in enumerate(rows):
        row.number = number
    for order, row in enumerate(sorted(rows, key=Row.order_key)):
        row.order = order
    return rows, details, unreadable


def _one_row(op: Any, entry: OpEntry, cells: Cells, target: Optional[Tuple[Tuple[str, int], str, str]],
             golden: GoldenStats, limits: StatsThresholds) -> Tuple[Row, StatsDetail]:
    """One stats row against the golden statistics of ``target`` (golden tensor, key, name)."""
    found = golden.tensors.get(target[1]) if target is not None else None
    npu = _npu_stats(cells)
    if found is None:
        reason = "no golden file: no golden statistics for {}".format(target[1]) if target is not None else \
            "no producer in the graph: input {} of {}".format(cells[1], op.name)
        row = _row(entry, cells, target[0] if target is not None else None, None, None, reason, False)
        return row, StatsDetail(
            npu, None, {}, {}, target[2] if target is not None else None, cells[4] or "", "")
    rel, diffs, note = compare_stats(npu, found)
    score, crossed = score_of(rel, limits)
    overflow = sum(d for d in diffs.values() if d is not None) > 0
    row = _row(entry, cells, target[0], found, score, "", overflow)
    return row, StatsDetail(npu, found, rel, diffs, target[2], cells[4] or "", note)
