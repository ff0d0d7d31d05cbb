"""Every rank at once: ``compare`` over a rank index, and the merge of per-node results (docs/compare.md,
"Every rank").

A rank index is a bundle root as multi-rank runs write it: ``{root}/index.json`` (schema
``npu_dump_hook/bundle-index@1``) naming each rank's bundle ``rank_{N}/...``. For an NPU root and its
golden root (the golden runs of the same ranks), :func:`compare_ranks`:

* compares every rank with its golden, ranks in parallel within the core budget (``workers``, default
  every core, as :func:`.compare`): ``P = min(ranks, budget)`` ranks at a time, each in a forked process
  running :func:`.compare` with ``budget // P`` workers, so the job never runs more than ``budget``
  comparing processes (not ranks x cores); each rank is compared once: an error its compare raises in
  the forked process is raised here as is (the lowest such rank's), and only a rank whose process died
  (a kill) or could not be started is compared again in this process. Where forking is not safe (other
  threads, TensorFlow loaded: :func:`npu_dump_hook._forked.fork_is_safe`) or the budget is one core,
  the ranks are compared one after another in this process. ``progress`` is not called from the
  forked ranks;
* takes each rank's verdict and first divergence, with the dump timestamp of that row;
* names the **earliest divergence across ranks**, by dump timestamp (the devices of one node share a
  clock; the emulator puts its ranks on one clock, :mod:`npu_dump_hook.emulator.hccl`): a fault on
  one rank reaches the others through the gradients' AllReduce, so every rank fails, and the
  earliest first divergence is where it started;
* checks that every **collective output** (``HcomAllReduce``, ``HcomAllGather``, ``HcomBroadcast``)
  is identical on every rank: the sha256 of each output of each such dump file (dtype, shape and
  bytes as dumped), per op; a rank whose digest differs from the one most ranks have (ties: the
  lowest rank's) is named. A collective that differs across ranks fails the comparison even when
  every rank passes its own.

The document (schema ``npu_dump_hook/compare-ranks@1``) keeps, per rank, what the merge needs
(verdict, first divergence, timestamps, the collective digests), so :func:`merge_rank_docs` joins the
documents of several nodes (each compared its own ranks) without any data: ``compare --merge
node0.json node1.json``.
"""
import hashlib
import html
import json
import logging
import os
import pickle
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._inert import printable
from ..constants import HCCL_COLLECTIVE_TYPES
from ..errors import CompareError, NpuDumpError

__all__ = ["SCHEMA", "is_rank_index", "compare_ranks", "merge_rank_docs", "load_rank_doc", "RanksResult",
           "collective_digests"]

SCHEMA = "npu_dump_hook/compare-ranks@1"
logger = logging.getLogger(__name__)
_MAX_DOC_BYTES = 256 << 20


def is_rank_index(path: Optional[str]) -> bool:
    """Whether ``path`` is a folder holding a multi-rank ``index.json``."""
    from ..bundle import INDEX_JSON

    return path is not None and os.path.isdir(path) and os.path.isfile(os.path.join(path, INDEX_JSON))


class RanksResult(object):
    """``doc`` (compare-ranks@1), ``exit_code`` (0 pass, 1 fail), ``summary_text()``, ``csv()``, ``html()``."""

    def __init__(self, doc: Dict[str, Any]) -> None:
        self.doc = doc

    @property
    def exit_code(self) -> int:
        return 0 if self.doc["summary"]["verdict"] == "pass" else 1

    @property
    def first_divergence(self) -> Optional[Dict[str, Any]]:
        return self.doc["earliest"]

    def summary_text(self, top: int = 5) -> str:
        return summary_text(self.doc)

    def csv(self) -> str:
        from .._inert import csv_cell

        lines = ["Rank,Verdict,FirstDivergenceOp,OpType,Tensor,Timestamp,RootCauses"]
        for key in sorted(self.doc["ranks"], key=int):
            entry = self.doc["ranks"][key]
            first = entry.get("first_divergence") or {}
            lines.append(",".join(csv_cell(str(v if v is not None else "")) for v in (
                key, entry.get("verdict"), first.get("npu_op"), first.get("op_type"), first.get("tensor"),
                first.get("timestamp"), entry.get("root_causes"))))
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        return render_ranks_html(self.doc)


def _rank_paths(root: str) -> Dict[str, str]:
    from ..bundle import read_index

    try:
        index = read_index(root)
    except (OSError, ValueError) as exc:
        raise CompareError("rank index {}: {}".format(root, exc), root) from exc
    from ..bundle import safe_join

    found = {}
    for rank, entry in index["ranks"].items():
        rels = [entry.get(k) for k in ("path", "archive")] if isinstance(entry, dict) else []
        paths = [safe_join(root, rel) for rel in rels if isinstance(rel, str)]  # UnsafePathError for ../ or /x
        existing = [p for p in paths if os.path.exists(p)]  # the folder, else the archive
        if not paths or not str(rank).isdigit():
            raise CompareError("rank index {}: rank {!r} has no bundle path".format(root, rank), root)
        found[str(int(rank))] = (existing or paths)[0]
    return found


def compare_ranks(npu_root: str, golden_root: Optional[str] = None, **kwargs: Any) -> RanksResult:
    """Compare every rank of the rank index ``npu_root`` with the same rank of ``golden_root`` (None:
    each rank's own golden, as :func:`.compare`), then merge (module doc). ``kwargs`` go to
    :func:`.compare` for every rank (thresholds, workers, ops, step, allow_uncompared, ...); ``workers``
    is the core budget of all ranks together."""
    npu = _rank_paths(npu_root)
    golden = _rank_paths(golden_root) if golden_root is not None else None
    if golden is not None and set(golden) != set(npu):
        raise CompareError("rank index {} has rank(s) {}, golden {} has {}: every NPU rank needs its golden rank"
                           .format(npu_root, sorted(npu, key=int), golden_root, sorted(golden, key=int)), golden_root)
    order = sorted(npu, key=int)
    sides = dict((rank, (npu[rank], golden[rank] if golden else None)) for rank in order)
    ranks = _compare_every_rank(sides, order, kwargs)
    part = {"schema": SCHEMA, "npu": os.path.abspath(npu_root),
            "golden": os.path.abspath(golden_root) if golden_root else None, "ranks": ranks}
    return merge_rank_docs([part])


def _one_rank(npu: str, golden: Optional[str], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """Compare one rank: its entry of the document, collective digests included."""
    from . import compare

    entry = _rank_entry(compare(npu, golden, **kwargs).doc, npu, golden)
    entry["collectives"] = collective_digests(npu)
    return entry


def _compare_every_rank(sides: Dict[str, Tuple[str, Optional[str]]], order: List[str],
                        kwargs: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Every rank's entry, in ``order``; ranks in parallel within the core budget (module doc)."""
    from .._forked import fork_is_safe
    from ._pool import worker_count

    budget = worker_count(kwargs.get("workers"))
    parallel = min(len(order), budget)
    if parallel <= 1 or not fork_is_safe():
        return dict((rank, _one_rank(sides[rank][0], sides[rank][1], kwargs)) for rank in order)
    forked = dict(kwargs, workers=max(1, budget // parallel), progress=None)
    entries, errors = _forked_ranks(sides, order, forked, parallel)
    for rank in order:
        if rank in errors:  # its compare raised: the same error, not a second compare of that rank
            raise errors[rank]
        if rank not in entries:  # its process died or never started: compared here, raising what it raises
            entries[rank] = _one_rank(sides[rank][0], sides[rank][1], kwargs)
    return dict((rank, entries[rank]) for rank in order)


def _one_rank_forked(npu: str, golden: Optional[str], kwargs: Dict[str, Any]) -> Tuple[str, Any]:
    """:func:`_one_rank` in a forked rank process: ``("entry", entry)``, or ``("error", pickled exception)``
    when its compare raised one (marshal cannot carry an exception; pickle keeps our errors' type and
    fields, errors.py). An exception pickle cannot carry fails the child: the rank is compared again here."""
    try:
        return "entry", _one_rank(npu, golden, kwargs)
    except Exception as exc:  # noqa: BLE001 - any error: raised by the parent, which never compares this rank again
        return "error", pickle.dumps(exc, protocol=2)


def _forked_ranks(sides: Dict[str, Tuple[str, Optional[str]]], order: List[str], kwargs: Dict[str, Any],
                  parallel: int) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, BaseException]]:
    """(entries of the ranks whose forked compare returned, errors of those whose compare raised), ``parallel``
    processes at a time, the next rank started as soon as any finishes; a rank in neither has to be compared
    again (its process died or could not be started)."""
    import select

    from .._forked import ForkedCall

    waiting = list(order)
    running = {}  # type: Dict[str, ForkedCall]
    entries = {}  # type: Dict[str, Dict[str, Any]]
    errors = {}  # type: Dict[str, BaseException]
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                rank = waiting.pop(0)
                try:
                    running[rank] = ForkedCall(_one_rank_forked, sides[rank][0], sides[rank][1], kwargs)
                except OSError:  # no process left: this rank is compared in this process afterwards
                    continue
            if not running:
                break
            ready = select.select([call.fileno() for call in running.values()], [], [])[0]
            for rank in [r for r, call in running.items() if call.fileno() in ready]:
                ok, outcome = running.pop(rank).result()
                if ok:
                    _keep_outcome(rank, outcome, entries, errors)
    finally:
        for call in running.values():  # interrupted (Ctrl-C, SIGTERM): stop the other ranks
            call.abandon()
    return entries, errors


def _keep_outcome(rank: str, outcome: Any, entries: Dict[str, Dict[str, Any]],
                  errors: Dict[str, BaseException]) -> None:
    """File a forked rank's ``(kind, value)`` under entries or errors; one that does not unpickle stays in
    neither (compared again). The pickle comes from our own forked child through its pipe, never from a file."""
    kind, value = outcome
    if kind == "entry":
        entries[rank] = value
        return
    try:
        errors[rank] = pickle.loads(value)
    except Exception:  # noqa: BLE001 - an exception class that does not rebuild: the rank is compared again
        logger.debug("rank %s: its forked error did not unpickle; comparing it again here", rank)


def _rank_entry(doc: Dict[str, Any], npu: str, golden: Optional[str]) -> Dict[str, Any]:
    first = doc.get("first_divergence")
    if first is not None:
        row = doc["rows"][first["row"]] if 0 <= first["row"] < len(doc.get("rows") or []) else {}
        first = {key: first.get(key) for key in ("row", "npu_op", "op_type", "original_ops", "tensor", "breached")}
        first["timestamp"] = row.get("timestamp")
    summary = doc.get("summary") or {}
    return {"npu": npu, "golden": golden, "verdict": summary.get("verdict"), "first_divergence": first,
            "root_causes": len(doc.get("root_causes") or []),
            "summary": {k: summary.get(k) for k in ("compared", "breached", "input_inconsistent", "incomplete")},
            "warnings": list(doc.get("warnings") or [])}


def collective_digests(bundle: str) -> Dict[str, Dict[str, Any]]:
    """``{op name: {"type", "outputs": [sha256 of dtype, shape and bytes per output]}}`` of the
    collective dump files of one NPU bundle (folder or archive)."""
    from ..bundle import open_bundle
    from ..formats.dump_file import DumpFile

    found = {}  # type: Dict[str, Dict[str, Any]]
    with open_bundle(bundle, parts=("dump",)) as view:
        for entry in view.doc.get("files") or []:
            if entry.get("kind") != "dump" or entry.get("op_type") not in HCCL_COLLECTIVE_TYPES:
                continue
            path = os.path.join(view.root, "data", *entry["path"].split("/"))
            try:
                with DumpFile.open(path) as dump:
                    outputs = [_digest(dump.array("output", i)) for i in range(len(dump.tensors("output")))]
            except (NpuDumpError, OSError) as exc:
                outputs = ["unreadable: {}".format(exc)]
            name = entry.get("op_name") or entry["path"]
            if name not in found or (entry.get("timestamp") or 0) > found[name]["timestamp"]:
                found[name] = {"type": entry["op_type"], "outputs": outputs, "timestamp": entry.get("timestamp") or 0}
    return found


def _digest(array: Any) -> str:
    digest = hashlib.sha256("{}|{}|".format(array.dtype.str, list(array.shape)).encode("ascii"))
    digest.update(memoryview(array.tobytes()))
    return digest.hexdigest()


def load_rank_doc(path: str) -> Dict[str, Any]:
    """A compare-ranks@1 JSON file written by ``compare --json`` on a rank index (CompareError otherwise)."""
    try:
        if os.path.getsize(path) > _MAX_DOC_BYTES:
            raise CompareError("{}: larger than {} bytes, not a compare-ranks document".format(path, _MAX_DOC_BYTES),
                               path)
        with open(path, "rb") as handle:
            doc = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError("{}: not a readable JSON document: {}".format(path, exc), path) from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("ranks"), dict):
        raise CompareError("{}: not a {} document (compare --json over a rank index writes one)".format(path, SCHEMA),
                           path)
    return doc


def merge_rank_docs(docs: Sequence[Dict[str, Any]], sources: Optional[Sequence[str]] = None) -> RanksResult:
    """One compare-ranks@1 document from several (each a node's own ranks); a rank in two is an error."""
    ranks = {}  # type: Dict[str, Dict[str, Any]]
    for position, doc in enumerate(docs):
        where = sources[position] if sources else "document {}".format(position)
        for rank, entry in doc["ranks"].items():
            if not str(rank).isdigit() or not isinstance(entry, dict):
                raise CompareError("{}: rank {!r} is not a rank entry".format(where, rank), where)
            problem = _entry_problem(entry)
            if problem:
                raise CompareError("{}: rank {}: {}".format(where, rank, problem), where)
            if str(int(rank)) in ranks:
                raise CompareError("{}: rank {} is also in an earlier document".format(where, rank), where)
            ranks[str(int(rank))] = entry
    ranks = {key: ranks[key] for key in sorted(ranks, key=int)}
    earliest = _earliest(ranks)
    collectives = _collective_check(ranks)
    failing = [key for key, entry in ranks.items() if entry.get("verdict") != "pass"]
    verdict = "pass" if not failing and collectives["verdict"] != "fail" else "fail"
    return RanksResult({
        "schema": SCHEMA, "npu": _paths(docs, "npu"), "golden": _paths(docs, "golden"),
        "ranks": ranks, "earliest": earliest, "collectives": collectives,
        "summary": {"verdict": verdict, "ranks": len(ranks), "failing_ranks": [int(k) for k in failing]},
    })


def _entry_problem(entry: Dict[str, Any]) -> Optional[str]:
    """What is wrong with a rank entry read from a document (another node's: data, never trusted)."""
    first = entry.get("first_divergence")
    if first is not None and not (isinstance(first, dict) and (first.get("timestamp") is None or
                                                               isinstance(first.get("timestamp"), int))):
        return "first_divergence is neither null nor an object with an integer timestamp"
    if not isinstance(entry.get("verdict"), str):
        return "verdict is not a string"
    collectives = entry.get("collectives") or {}
    if not isinstance(collectives, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("outputs"), list) and all(isinstance(d, str) for d in v["outputs"])
            for v in collectives.values()):
        return "collectives is not an object of {type, outputs: [digest]}"
    return None


def _paths(docs: Sequence[Dict[str, Any]], key: str) -> List[Any]:
    found = []  # type: List[Any]
    for doc in docs:
        value = doc.get(key)
        found.extend(value if isinstance(value, list) else [value])
    return found


def _earliest(ranks: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    found = None  # type: Optional[Tuple[int, int, Dict[str, Any]]]
    for key, entry in ranks.items():
        first = entry.get("first_divergence")
        stamp = first.get("timestamp") if isinstance(first, dict) else None
        if not isinstance(stamp, int):
            continue
        if found is None or (stamp, int(key)) < found[:2]:
            found = (stamp, int(key), first)
    if found is None:
        return None
    result = dict(found[2])
    result["rank"] = found[1]
    return result


def _collective_check(ranks: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Each collective op's outputs on every rank against the digest most ranks have."""
    by_op = {}  # type: Dict[str, Dict[int, Tuple[str, ...]]]
    types = {}  # type: Dict[str, str]
    for key, entry in ranks.items():
        for op, seen in (entry.get("collectives") or {}).items():
            by_op.setdefault(op, {})[int(key)] = tuple(seen.get("outputs") or ())
            types[op] = seen.get("type")
    ops, differing = [], []
    for op in sorted(by_op):
        digests = by_op[op]
        counts = {}  # type: Dict[Tuple[str, ...], int]
        for rank in sorted(digests):
            counts[digests[rank]] = counts.get(digests[rank], 0) + 1
        reference = max(counts, key=lambda d: (counts[d], -min(r for r in digests if digests[r] == d)))
        wrong = [r for r in sorted(digests) if digests[r] != reference]
        missing = [int(k) for k in ranks if int(k) not in digests]
        ops.append({"op": op, "type": types[op], "ranks": sorted(digests), "differing_ranks": wrong,
                    "missing_ranks": missing})
        if wrong:
            differing.append(op)
    verdict = "none" if not ops else ("fail" if differing else "pass")
    return {"verdict": verdict, "ops": ops, "differing_ops": differing,
            "differing_ranks": sorted({r for o in ops for r in o["differing_ranks"]})}


def summary_text(doc: Dict[str, Any]) -> str:
    """The terminal summary of a compare-ranks@1 document."""
    ranks = doc["ranks"]
    lines = ["compare: {} rank(s): NPU {} vs golden {}".format(len(ranks), printable(", ".join(
        str(p) for p in doc.get("npu") or [])), printable(", ".join(str(p) for p in doc.get("golden") or [] if p))
        or "(each rank's own)")]
    for key, entry in ranks.items():
        first = entry.get("first_divergence")
        where = "first divergence {} ({}) {} at {}".format(
            printable(first.get("npu_op")), printable(first.get("op_type")), printable(first.get("tensor")),
            first.get("timestamp")) if first else "no divergence"
        lines.append("rank {}: {}  {}".format(key, str(entry.get("verdict")).upper(), where))
    earliest = doc.get("earliest")
    if earliest:
        lines.append("earliest divergence across ranks: rank {} {} ({}) {} at {}".format(
            earliest["rank"], printable(earliest.get("npu_op")), printable(earliest.get("op_type")),
            printable(earliest.get("tensor")), earliest.get("timestamp")))
    check = doc["collectives"]
    if check["verdict"] == "none":
        lines.append("collectives: none dumped (no cross-rank check)")
    elif check["verdict"] == "pass":
        lines.append("collectives: PASS, {} op(s) identical on every rank".format(len(check["ops"])))
    else:
        for op in check["ops"]:
            if op["differing_ranks"]:
                lines.append("collectives: FAIL {} ({}) differs on rank(s) {} from the other ranks".format(
                    printable(op["op"]), printable(op["type"]), ", ".join(str(r) for r in op["differing_ranks"])))
    lines.append("verdict: {} ({} of {} rank(s) failing{})".format(
        doc["summary"]["verdict"].upper(), len(doc["summary"]["failing_ranks"]), len(ranks),
        "; collective outputs differ" if check["verdict"] == "fail" else ""))
    return "\n".join(lines)


def render_ranks_html(doc: Dict[str, Any]) -> str:
    """One self-contained HTML page (no script, nothing fetched) of a compare-ranks@1 document."""
    esc = lambda value: html.escape(printable("" if value is None else value))  # noqa: E731
    rows = []
    for key, entry in doc["ranks"].items():
        first = entry.get("first_divergence") or {}
        rows.append("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>".format(
            esc(key), esc(entry.get("verdict")), esc(first.get("npu_op")), esc(first.get("op_type")),
            esc(first.get("tensor")), esc(first.get("timestamp"))))
    checks = "".join("<tr><td>{}</td><td>{}</td><td>{}</td></tr>".format(
        esc(o["op"]), esc(o["type"]), esc(", ".join(str(r) for r in o["differing_ranks"]) or "identical"))
        for o in doc["collectives"]["ops"])
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>compare: every rank</title></head><body>"
            "<h1>verdict: {}</h1><pre>{}</pre><h2>ranks</h2><table border=\"1\"><tr><th>rank</th><th>verdict</th>"
            "<th>first divergence</th><th>type</th><th>tensor</th><th>timestamp</th></tr>{}</table>"
            "<h2>collectives: {}</h2><table border=\"1\"><tr><th>op</th><th>type</th><th>differing ranks</th></tr>{}"
            "</table></body></html>\n").format(esc(doc["summary"]["verdict"].upper()), esc(summary_text(doc)),
                                               "".join(rows), esc(doc["collectives"]["verdict"]), checks)
