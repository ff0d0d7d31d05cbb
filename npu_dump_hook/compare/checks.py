"""Checks that need no golden, on any NPU side (tensor dumps or stats CSVs): the NaN/Inf origin
(:mod:`.nan_origin`) and the overflow report of an ``enable_dump_debug`` run (:mod:`.overflow`).

:func:`run_checks` gives the document part ``checks``; :func:`checks_verdict` what they mean for
a run without a golden (``fail`` when NaN/Inf start somewhere or an op overflowed);
:func:`checks_lines` the terminal lines (the headline first, then the top ``top`` entries).
"""
from typing import Any, Callable, Dict, List

from .._inert import printable
from ._graph import Graph
from .nan_origin import collect_health, nan_inf_origins, place_health, read_health
from .overflow import overflow_report

__all__ = ["run_checks", "run_checks_loading_graph", "checks_verdict", "checks_lines", "checks_headline", "checks_only_summary", "checks_only_text"]


def run_checks(graph: Graph, npu: Any, nan_inf: bool = True) -> Dict[str, Any]:
    """``{"nan_inf": ... | None, "overflow": ... | None}`` for the NPU side ``npu`` (an NpuSide):
    NaN/Inf over its tensor dumps, else over its stats CSVs (``nan_inf=False``: not run); the
    overflow report when its step folder holds Opdebug files."""
    found = {"nan_inf": None, "overflow": None}  # type: Dict[str, Any]
    if nan_inf and (npu.dumps or npu.stats):
        source = "tensors" if npu.dumps else "stats"
        found["nan_inf"] = nan_inf_origins(graph, collect_health(graph, npu.dumps or npu.stats), source)
    if npu.opdebug:
        found["overflow"] = overflow_report(graph, npu.opdebug, list(npu.dumps) + list(npu.stats))
    return found


def run_checks_loading_graph(load: Callable[[], Graph], npu: Any) -> Dict[str, Any]:
    """:func:`run_checks`, with the graph loaded by ``load`` only when a finding needs it: a step
    of tensor dumps or stats CSVs that are all finite and readable, without Opdebug files, gives
    the same document from the files alone (its ops are counted, none is named or ordered), so
    the end-of-run headline of a clean step does not parse the Build graph a second time."""
    refs = npu.dumps or npu.stats
    if npu.opdebug or not refs:
        return run_checks(load(), npu)
    read = read_health(refs)
    clean = all(h.error is None and not h.bad for _, h in read)
    graph = None if clean else load()
    source = "tensors" if npu.dumps else "stats"
    return {"nan_inf": nan_inf_origins(graph, place_health(graph, read), source), "overflow": None}


def checks_verdict(checks: Dict[str, Any]) -> str:
    """``fail`` when NaN/Inf start at some op or an op overflowed, else ``pass``."""
    nan_inf, overflow = checks.get("nan_inf"), checks.get("overflow")
    if (nan_inf and (nan_inf["origins"] or nan_inf["ops_nonfinite"])) or (overflow and overflow["entries"]):
        return "fail"
    return "pass"


def _ops(names: List[str]) -> str:
    return ", ".join(names) if names else "*"


def checks_headline(checks: Dict[str, Any]) -> List[str]:
    """One line per check that ran: what it found, the first origin / overflow named."""
    lines = []
    nan_inf, overflow = checks.get("nan_inf"), checks.get("overflow")
    if nan_inf is not None:
        origins = nan_inf["origins"]
        if origins:
            first = origins[0]
            lines.append("NaN/Inf origin: {} ({}), original ops: {}; propagates to {} op(s) ({} origin(s), {} of {} "
                         "ops non-finite)".format(first["npu_op"], first["op_type"], _ops(first["original_ops"]),
                                                   first["propagated"], len(origins), nan_inf["ops_nonfinite"],
                                                   nan_inf["ops_checked"]))
        else:
            lines.append("NaN/Inf: {} of {} dumped ops non-finite ({})".format(
                nan_inf["ops_nonfinite"], nan_inf["ops_checked"], nan_inf["source"]))
    if overflow is not None:
        entries = overflow["entries"]
        if entries:
            first = entries[0]
            lines.append("overflow: {} entr(ies) in {} Opdebug file(s); first: {} ({}), original ops: {}".format(
                len(entries), overflow["opdebug_files"], first["npu_op"] or "task {} (no dump file)".format(
                    first["task_id"]), first["op_type"] or "?", _ops(first["original_ops"])))
        else:
            lines.append("overflow: none in {} Opdebug file(s)".format(overflow["opdebug_files"]))
    return lines


def checks_lines(checks: Dict[str, Any], top: int = 5) -> List[str]:
    """The headline, then up to ``top`` NaN/Inf origins and overflow entries (names escaped)."""
    lines = checks_headline(checks)
    nan_inf, overflow = checks.get("nan_inf"), checks.get("overflow")
    if nan_inf is not None and len(nan_inf["origins"]) > 1 and top > 0:
        lines.append("NaN/Inf origins in execution order:")
        for origin in nan_inf["origins"][:top]:
            lines.append("  {:>5} {} ({}) {}: propagates to {}".format(
                origin["order"], origin["npu_op"], origin["op_type"], _ops(origin["original_ops"]),
                origin["propagated"]))
    if nan_inf is not None and nan_inf["unreadable"]:
        lines.append("NaN/Inf: {} dump file(s) unreadable, first {}".format(
            len(nan_inf["unreadable"]), nan_inf["unreadable"][0]["reason"]))
    if overflow is not None and overflow["entries"] and top > 0:
        lines.append("overflow, in time order (top {}):".format(top))
        for entry in overflow["entries"][:top]:
            lines.append("  {:>5} task {} stream {} {} {} ({}): {}".format(
                entry["order"], entry["task_id"], entry["stream_id"], entry["unit"], entry["npu_op"] or "-",
                entry["op_type"] or "?", _ops(entry["original_ops"])))
    if overflow is not None and overflow["unreadable"]:
        lines.append("overflow: {} Opdebug file(s) unreadable, first {}".format(
            len(overflow["unreadable"]), overflow["unreadable"][0]["reason"]))
    return [printable(line) for line in lines]


def checks_only_summary(checks: Dict[str, Any], elapsed: float, allow_uncompared: bool) -> Dict[str, Any]:
    """The ``summary`` of a document without a golden: no rows, the verdict of the checks."""
    return {"rows": 0, "compared": 0, "not_compared": 0, "not_compared_reasons": {}, "compared_flattened": 0,
            "breached": 0, "root_causes": 0, "propagated": 0, "overflow": 0, "input_inconsistent": False,
            "input_inconsistent_detail": [], "incomplete": False, "incomplete_detail": [],
            "allow_uncompared": allow_uncompared, "verdict": checks_verdict(checks), "elapsed_s": elapsed,
            "golden_free": True}


def checks_only_text(doc: Dict[str, Any], top: int = 5) -> str:
    """The terminal summary of a document without a golden."""
    checks = doc.get("checks") or {}
    nan_inf, overflow = checks.get("nan_inf"), checks.get("overflow")
    lines = ["compare: NPU {} ({}), no golden: the checks that need none (NaN/Inf origin{})".format(
                 doc["npu"]["path"], doc["npu"]["kind"], ", overflow report" if overflow is not None else ""),
             "  (give GOLDEN, a golden bundle or .npy folder, to compare the tensors themselves)",
             "verdict: {}: {} NaN/Inf origin(s), {} overflow entr(ies) ({:.2f} s)".format(
                 doc["summary"]["verdict"].upper(), len(nan_inf["origins"]) if nan_inf else 0,
                 len(overflow["entries"]) if overflow else 0, doc["summary"]["elapsed_s"])]
    return "\n".join([printable(line) for line in lines] + checks_lines(checks, top))
