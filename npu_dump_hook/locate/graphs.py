"""Find this run's GE Build graph: where GE writes graph files, and which one is the training graph.

Graph files (:func:`graph_search_dirs`, :func:`find_build_graphs`)
    Searched, in this order (all of them; the order only ranks the listing):
    ``$DUMP_GRAPH_PATH``, ``$NPU_COLLECT_PATH/extra-info/graph``, ``$ASCEND_DUMP_PATH``,
    ``$ASCEND_WORK_PATH``; each root also contributes its per-process subfolders
    ``pid_{pid}_deviceid_{dev}/`` and ``{pid}_{dev}/``. The working directory is searched
    only when none of those folders exists (GE's fallback). Only ``ge_proto_*_Build.txt``
    files (stage exactly ``Build``) modified at or after ``since`` count; times compare at
    whole-second resolution, because file mtimes come from the kernel's coarse clock and
    can trail ``time.time()`` by a few milliseconds. Symlinks are not followed inside a
    searched root (the roots themselves are taken as given): a symlinked per-process
    subfolder or a symlinked ``ge_proto_*_Build.txt`` is skipped with a warning naming it.

Training graph (:func:`select_training_graph`), filters applied in order; a filter that
would leave no candidate is skipped, the keyword filter excepted:
    1. ``graph_keyword``: the keyword is a substring of the file name, the graph name, an
       op name / type or a ``_datadump_original_op_names`` entry (raw or sanitized);
    2. method 1: the graph holds op names of the TF training step (sanitized compare,
       fused ops through ``_datadump_original_op_names``);
    3. training ops: gradient ops (``gradients/`` scope, ``*Grad``, ``*Backprop*``) or
       optimizer updates (``Apply*``, ``ResourceApply*``, ``SparseApply*``): train beats
       eval (both hold an iterator), with or without a TF graph; it goes before the
       iterator rule so a feed_dict training graph still beats an eval graph with one;
    4. method 2: the graph holds an Iterator / IteratorGetNext / GetNext op (decides
       when no graph trains, e.g. inference, or among several training graphs);
    5. most TF op-name matches (method 1 again, as a tie-break).
    One left: chosen. Several with the same graph name: the newest file (same graph
    compiled once per process). Otherwise :class:`AmbiguousGraphError`.
"""
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..constants import ENV_ASCEND_WORK_PATH, ENV_DUMP_GRAPH_PATH, ENV_NPU_COLLECT_PATH
from ..errors import AmbiguousGraphError, GraphFormatError, LocateError
from ..formats import ge_graph
from ..formats.ge_handover import handed_graph
from ..formats.names import parse_graph_file_name, sanitize
from ._walk import LOG, PathLike, link_note, not_older, scandir, subdirs, unique, warn

__all__ = ["ENV_ASCEND_DUMP_PATH", "graph_search_dirs", "expand_graph_dir", "find_build_graphs",
           "select_training_graph"]

ENV_ASCEND_DUMP_PATH = "ASCEND_DUMP_PATH"
_COLLECT_GRAPH_SUBDIR = os.path.join("extra-info", "graph")
_PID_DEV_DIR = re.compile(r"(?:pid_([0-9]+)_deviceid_([0-9]+)|([0-9]+)_([0-9]+))\Z")
_DIGITS = re.compile(r"[0-9]+\Z")
_BUILD_STAGE = "Build"

# Method 2 of the Ascend guide's step "选取计算图文件" (see the package docstring;
# docs/reference/npu-bridge-dump-api.md §5) greps "Iterator"; GetNext covers GetNext / DynamicGetNext.
_ITERATOR = re.compile(r"Iterator|GetNext")
_OPTIMIZER_TYPE = re.compile(r"^(?:Resource)?(?:Sparse)?Apply[A-Z]")
_GRADIENT_TYPE = re.compile(r"(?:Grad(?:V[0-9]+)?(?:D)?$|Backprop)")
_GRADIENT_SCOPE = re.compile(r"(?:^|/)gradients(?:_[0-9]+)?/")
_EXAMPLES = 3


def expand_graph_dir(root: PathLike, pid: Optional[int] = None, device_id: Optional[str] = None,
                     warnings: Optional[List[str]] = None) -> List[str]:
    """``root`` plus its ``pid_{pid}_deviceid_{dev}/`` and ``{pid}_{dev}/`` subfolders.

    ``pid`` / ``device_id`` keep only the subfolders of that process / device.
    A missing root gives ``[]``. Symlinked subfolders are not followed; each one that
    would have been taken is reported in ``warnings`` (when given) and logged.
    """
    root = os.path.abspath(os.fspath(root))
    if not os.path.isdir(root):
        return []
    found = [root]
    links = []  # type: List[str]
    entries = [(e.name, e.path, False) for e in subdirs(root, links)]
    entries.extend((os.path.basename(p), p, True) for p in links)
    for name, path, is_link in sorted(entries):
        match = _PID_DEV_DIR.match(name)
        if not match:
            continue
        sub_pid = match.group(1) or match.group(3)
        sub_dev = match.group(2) or match.group(4)
        if pid is not None and int(sub_pid) != int(pid):
            continue
        if device_id is not None and int(sub_dev) != int(device_id):
            continue
        if is_link:
            warn([] if warnings is None else warnings, link_note(path, "graph folder search"))
            continue
        found.append(path)
    return found


def graph_search_dirs(
    environ: Optional[Mapping[str, str]] = None,
    cwd: Optional[PathLike] = None,
    pid: Optional[int] = None,
    device_id: Optional[str] = None,
    warnings: Optional[List[str]] = None,
) -> List[str]:
    """Folders GE may have written graph files to, in the order of the module docstring.

    ``environ`` defaults to ``os.environ``, ``cwd`` to the working directory; only
    existing folders are returned, without duplicates. Skipped symlinked subfolders are
    reported in ``warnings`` (see :func:`expand_graph_dir`).
    """
    env = os.environ if environ is None else environ
    roots = []  # type: List[str]
    if env.get(ENV_DUMP_GRAPH_PATH):
        roots.append(env[ENV_DUMP_GRAPH_PATH])
    if env.get(ENV_NPU_COLLECT_PATH):
        roots.append(os.path.join(env[ENV_NPU_COLLECT_PATH], _COLLECT_GRAPH_SUBDIR))
    for name in (ENV_ASCEND_DUMP_PATH, ENV_ASCEND_WORK_PATH):
        if env.get(name):
            roots.append(env[name])
    dirs = unique(d for root in roots for d in expand_graph_dir(root, pid, device_id, warnings))
    if not dirs:
        dirs = expand_graph_dir(os.getcwd() if cwd is None else cwd, pid, device_id, warnings)
    return dirs


def find_build_graphs(dirs: Iterable[PathLike], since: Optional[float] = None,
                      warnings: Optional[List[str]] = None) -> List[str]:
    """``ge_proto_*_Build.txt`` files directly in ``dirs`` modified at or after ``since``.

    Sorted by folder order, then index; real paths deduplicated. A symlinked graph file
    is not followed: it is skipped and reported in ``warnings`` (when given) and logged.
    """
    found = []  # type: List[Tuple[int, int, str]]
    for rank, folder in enumerate(dirs):
        for entry in scandir(os.fspath(folder)):
            parsed = parse_graph_file_name(entry.name)
            if parsed is None or not parsed.is_build or parsed.stage != _BUILD_STAGE:
                continue
            try:
                if entry.is_symlink():
                    warn([] if warnings is None else warnings, "skipped symlinked graph file {} -> {} "
                         "(graph folder search: symlinks are never followed)".format(
                             entry.path, os.readlink(entry.path)))
                    continue
                if not entry.is_file(follow_symlinks=False) or not not_older(entry.stat().st_mtime, since):
                    continue
            except OSError:  # vanished meanwhile
                continue
            found.append((rank, parsed.index, os.path.abspath(entry.path)))
    return unique(path for _, _, path in sorted(found))


@dataclass
class _GraphFacts:
    """What the selection rules need from one Build graph file."""

    path: str
    graph_name: str
    op_count: int
    mtime: float
    names: List[str]  # op names, types and original names, for the keyword
    sanitized: set
    iterator_ops: List[str]
    training_ops: List[str]
    training_count: int


def _scan_graph(path: str) -> _GraphFacts:
    """Read one Build graph with the streaming scanner (raises GraphFormatError); the emulator's
    graph, still the very file it wrote, from what it handed over (formats.ge_handover), unread."""
    handed = handed_graph(path)
    if handed is not None:
        graph_name, ops = handed
        return _graph_facts(path, [graph_name], ((op.name, op.type, op.original_op_names) for op in ops))
    graph_names = []  # type: List[str]

    def scanned() -> Iterable[Tuple[str, str, Optional[Sequence[str]]]]:
        # one graph's ops held at a time, as the scanner yields them; the first graph names the file
        for graph in ge_graph.iter_graphs(path):
            graph_names.append(graph.name)
            for op in graph.ops:
                yield op.name, op.type, op.original_op_names

    return _graph_facts(path, graph_names, scanned())


def _graph_facts(path: str, graph_names: List[str], ops: Iterable[Tuple[str, str, Optional[Sequence[str]]]]
                 ) -> _GraphFacts:
    """The facts of graph file ``path`` from its ops' (name, type, original op names or None), read
    once; ``graph_names``: its graphs' names, filled by the time ``ops`` are read (the first names
    the file; none: no graph block, a GraphFormatError)."""
    op_count = 0
    names = []  # type: List[str]
    sanitized = set()
    iterator_ops = []  # type: List[str]
    training_ops = []  # type: List[str]
    training_count = 0
    by_type = {}  # type: Dict[str, Tuple[bool, bool]]  # op type -> (iterator type, training type): few types
    for name, op_type, original_names in ops:
        op_count += 1
        originals = [o for o in original_names or () if o]
        names.append(name)
        names.append(op_type)
        names.extend(originals)
        sanitized.add(sanitize(name))
        sanitized.update(sanitize(o) for o in originals)
        known = by_type.get(op_type)
        if known is None:
            known = by_type[op_type] = (bool(_ITERATOR.search(op_type)), _is_training_type(op_type))
        if known[0] or _ITERATOR.search(name):
            iterator_ops.append("{} ({})".format(name, op_type))
        if known[1] or _in_gradient_scope(name, originals):
            training_count += 1
            if len(training_ops) < _EXAMPLES:
                training_ops.append("{} ({})".format(name, op_type))
    if not graph_names:
        raise GraphFormatError(path, "no graph { name: ... } block")
    return _GraphFacts(
        path, graph_names[0], op_count, os.stat(path).st_mtime, names, sanitized,
        iterator_ops, training_ops, training_count,
    )


def _is_training_type(op_type: str) -> bool:
    return bool(_OPTIMIZER_TYPE.search(op_type) or _GRADIENT_TYPE.search(op_type))


def _in_gradient_scope(name: str, originals: Sequence[str]) -> bool:
    return bool(_GRADIENT_SCOPE.search(name)) or any(_GRADIENT_SCOPE.search(n) for n in originals)


def _keyword_hit(facts: _GraphFacts, keyword: str) -> bool:
    wanted = (keyword, sanitize(keyword))
    texts = [os.path.basename(facts.path), facts.graph_name] + facts.names
    return any(w in t or w in sanitize(t) for t in texts for w in wanted)


def select_training_graph(
    candidates: Sequence[PathLike],
    tf_op_names: Optional[Iterable[str]] = None,
    graph_keyword: Optional[str] = None,
) -> Tuple[str, Dict[str, Any]]:
    """Pick the training compute graph among Build graph files (rules: module docstring).

    Returns ``(path, choice)``; ``choice`` is JSON-ready for bundle.json: ``method`` (the
    rule that decided), ``rules`` (each applied rule and how many candidates it kept),
    ``candidates`` (file, graph name, op count, scores, reason) and ``warnings``.
    Raises :class:`LocateError` (no readable candidate, keyword matches none) or
    :class:`AmbiguousGraphError`.
    """
    paths = [os.path.abspath(os.fspath(p)) for p in candidates]
    if not paths:
        raise LocateError("no Build graph file (ge_proto_*_Build.txt) to choose from")
    facts, rows = [], {}  # type: List[_GraphFacts], Dict[str, Dict[str, Any]]
    for path in paths:
        try:
            one = _scan_graph(path)
        except (GraphFormatError, OSError) as err:
            rows[path] = {"file": path, "readable": False, "reason": "unreadable: {}".format(err)}
            continue
        facts.append(one)
        rows[path] = _candidate_row(one)
    if not facts:
        raise LocateError("no readable Build graph among: {}".format(", ".join(paths)), paths)
    tf_names = {sanitize(n) for n in tf_op_names or () if n}
    tf_hits = {f.path: len(tf_names & f.sanitized) for f in facts}
    for f in facts:
        if tf_names:
            rows[f.path]["tf_op_matches"] = tf_hits[f.path]
        if graph_keyword:
            rows[f.path]["keyword_match"] = _keyword_hit(f, graph_keyword)

    pool, rules = list(facts), []  # type: List[_GraphFacts], List[Dict[str, Any]]
    if graph_keyword:
        pool = [f for f in pool if rows[f.path]["keyword_match"]]
        rules.append({"rule": "graph_keyword", "kept": len(pool)})
        if not pool:
            raise LocateError(
                "graph keyword {!r} is in none of the Build graphs: {}".format(
                    graph_keyword, _describe(facts)),
                paths, what="graph_keyword",
            )
    filters = [
        ("tf_op_names", lambda f: tf_hits[f.path] > 0, bool(tf_names)),
        ("training_ops", lambda f: f.training_count > 0, True),
        ("iterator", lambda f: bool(f.iterator_ops), True),
        ("most_tf_op_names", None, bool(tf_names)),
    ]
    for rule, keep, enabled in filters:
        if len(pool) <= 1 or not enabled:
            continue
        if keep is None:
            best = max(tf_hits[f.path] for f in pool)
            kept = [f for f in pool if tf_hits[f.path] == best]
        else:
            kept = [f for f in pool if keep(f)]
        if kept and len(kept) < len(pool):
            pool = kept
            rules.append({"rule": rule, "kept": len(pool)})
    warnings = []  # type: List[str]
    chosen = _break_tie(pool, warnings, facts, graph_keyword)
    if len(pool) == 1 and not rules:
        method = "only_candidate"
    elif rules:
        method = rules[-1]["rule"]
    else:
        method = "same_graph_newest"
    for f in facts:
        rows[f.path]["chosen"] = f is chosen
        rows[f.path]["reason"] = _reason(f, chosen, pool)
    choice = {
        "method": method,
        "rules": rules,
        "graph_keyword": graph_keyword,
        "tf_op_names": len(tf_names),
        "candidates": [rows[p] for p in paths],
        "warnings": warnings,
    }
    LOG.info("training graph %s (%s) chosen by %s among %d candidate(s)",
             chosen.path, chosen.graph_name, method, len(paths))
    return chosen.path, choice


def _break_tie(pool: List[_GraphFacts], warnings: List[str], facts: List[_GraphFacts],
               keyword: Optional[str]) -> _GraphFacts:
    if len(pool) == 1:
        return pool[0]
    if len({f.graph_name for f in pool}) == 1:
        newest = max(pool, key=lambda f: (f.mtime, f.path))
        warnings.append("{} files hold graph {!r}; took the newest, {}".format(
            len(pool), newest.graph_name, newest.path))
        return newest
    hint = ("pass a graph keyword (graph_keyword=) naming an op or the graph, "
            "e.g. one of {}".format(", ".join(repr(f.graph_name) for f in pool)))
    if keyword:
        hint = "graph keyword {!r} matches several; pass a more specific one".format(keyword)
    per_process = {os.path.basename(os.path.dirname(f.path)) for f in pool}
    if len(per_process) > 1 and all(_PID_DEV_DIR.match(d) for d in per_process):
        hint += "; they come from several processes/devices: pass device_id="
    raise AmbiguousGraphError(
        "cannot tell which Build graph is the training graph: {} of {} candidates qualify "
        "equally: {}; {}".format(len(pool), len(facts), _describe(pool), hint),
        [f.path for f in pool],
    )


def _candidate_row(f: _GraphFacts) -> Dict[str, Any]:
    return {
        "file": f.path,
        "readable": True,
        "graph_name": f.graph_name,
        "op_count": f.op_count,
        "iterator_ops": f.iterator_ops[:_EXAMPLES],
        "training_ops": f.training_count,
        "training_op_examples": f.training_ops,
    }


def _reason(f: _GraphFacts, chosen: _GraphFacts, pool: List[_GraphFacts]) -> str:
    traits = "{} op(s), {} iterator op(s), {} training op(s)".format(
        f.op_count, len(f.iterator_ops), f.training_count)
    if f is chosen:
        return "chosen: " + traits
    if f in pool:
        return "same graph as the chosen file, older: " + traits
    return "ruled out: " + traits


def _describe(facts: Iterable[_GraphFacts]) -> str:
    return "; ".join(
        "{} (graph {!r}, {} iterator op(s), {} training op(s))".format(
            f.path, f.graph_name, len(f.iterator_ops), f.training_count)
        for f in facts
    )
