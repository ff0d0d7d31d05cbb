"""The comparison itself: :func:`compare` and :class:`CompareResult`, and every name of the package
beyond :func:`~npu_dump_hook.compare.golden_free_checks` (docs/compare.md).

A module of its own so that the hook's end, which runs only the golden-free checks, does not import
it: its modules (metrics, the worker pool, HTML, replay, ranks, statistics) cost ~0.035 s CPU to
import on Python 3.7. The package (``npu_dump_hook.compare``) hands out the names of ``__all__``
below from here, importing this module on the first use of one of them (its ``__getattr__``).
"""
import logging
import re
import time
from typing import Any, Callable, Dict, List, Optional

from ..environment import differences as environment_differences
from ..errors import OptionError
from .._inert import printable
from ._analysis import analyse
from ._golden import load_golden_side
from ._graph import Graph, load_graph
from ._html import render_html
from ._loops import nested_loops
from ._match import build_plan
from ._npu import NpuSide, load_npu
from ._npu_pair import DETERMINISM_THRESHOLDS, determinism_doc, is_npu_bundle, npu_golden_side, pair_incomplete
from ._pool import run_jobs, worker_count
from ._report import SCHEMA, csv_text, first_divergence_doc, row_doc, summary_doc, terminal_summary
from ._rows import Row, build_rows
from ._selection import coverage_line, dump_layer_of_bundle, mark_not_selected
from ._stats_report import run_stats_compare, stats_csv_text, stats_summary_text
from ._thresholds import DEFAULT_THRESHOLDS, PRECISION_CLASSES, Thresholds, make_thresholds, op_precision
from ._worker import FileResult
from .checks import checks_lines, checks_only_summary, checks_only_text, run_checks
from .ranks import RanksResult, compare_ranks, is_rank_index, load_rank_doc, merge_rank_docs
from .replay import ReplayProcess, make_replay_spec, replay_lines, replay_rows
from .stats import DEFAULT_STATS_THRESHOLDS, StatsThresholds, load_golden_stats, make_stats_thresholds
from .suspects import build_suspects

#: What the package hands out from here (its ``__all__`` but ``golden_free_checks``).
__all__ = ["compare", "compare_ranks", "merge_rank_docs", "load_rank_doc", "is_rank_index", "RanksResult",
           "CompareResult", "Thresholds", "DEFAULT_THRESHOLDS", "SCHEMA", "ProgressFn", "render_html",
           "StatsThresholds", "DEFAULT_STATS_THRESHOLDS", "PRECISION_CLASSES", "op_precision"]

logger = logging.getLogger(__package__)  # the package's logger, as when compare() lived in __init__

#: ``progress(done_files, total_files)``, called after every dump file.
ProgressFn = Callable[[int, int], None]


class CompareResult(object):
    """``doc``: the JSON document; ``exit_code``: 0 pass, 1 fail or incomplete; ``rows``: the rows (objects);
    ``root_causes``: root-cause rows, first divergence first."""

    def __init__(self, doc: Dict[str, Any], rows: List[Row], root_causes: List[Row], thresholds: Thresholds,
                 stats_limits: Optional[StatsThresholds] = None) -> None:
        self.doc = doc
        self.rows = rows
        self.root_causes = root_causes
        self.thresholds = thresholds
        #: The statistics compare's limits (a ``"mode": "stats"`` document), else None.
        self.stats_limits = stats_limits

    @property
    def exit_code(self) -> int:
        return 0 if self.doc["summary"]["verdict"] == "pass" else 1

    @property
    def first_divergence(self) -> Optional[Dict[str, Any]]:
        return self.doc["first_divergence"]

    def csv(self) -> str:
        """msaccucmp's CSV of the rows (its header and row order); the statistics CSV of a stats compare."""
        if self.stats_limits is not None:
            return stats_csv_text(self.doc)
        return csv_text(self.rows)

    def summary_text(self, top: int = 5) -> str:
        """The one-screen terminal summary."""
        if self.doc["golden"] is None:
            return checks_only_text(self.doc, top)
        if self.stats_limits is not None:
            text = stats_summary_text(self.doc, self.stats_limits, top)
            return "\n".join([text] + checks_lines(self.doc.get("checks") or {}, top))
        text = terminal_summary(self.doc, self.rows, self.root_causes, self.thresholds, top)
        return "\n".join([text] + coverage_line(self.doc.get("coverage")) + replay_lines(self.doc.get("replay"))
                         + checks_lines(self.doc.get("checks") or {}, top))


def _ops_pattern(ops: Optional[str]) -> Optional["re.Pattern[str]"]:
    if ops is None:
        return None
    try:
        return re.compile(ops)
    except re.error as exc:
        raise OptionError("ops", ops, "not a regular expression: {}".format(exc))


def _golden_for_warning(npu: NpuSide, golden: Any) -> List[str]:
    made_for = ((golden.bundle_json or {}).get("golden_for") or {}) if golden.kind == "bundle" else {}
    recorded = made_for.get("bundle_json_sha256") if isinstance(made_for, dict) else None
    if recorded and npu.bundle_id and recorded != npu.bundle_id:
        return ["golden {} was made for another NPU bundle (golden_for.bundle_json_sha256 {}, NPU bundle {})".format(
            golden.path, recorded[:12], npu.bundle_id[:12])]
    return []


def _with_suspects(result: CompareResult, graph: Any, suspects: Optional[int]) -> CompareResult:
    """``doc["suspects"]``: the suspects document (None: no suspect) when ``suspects`` (a count) is given."""
    if suspects is not None:
        result.doc["suspects"] = build_suspects(result.doc, graph, suspects)
    return result


def _check_suspects(suspects: Any) -> None:
    if suspects is not None and (isinstance(suspects, bool) or not isinstance(suspects, int) or suspects < 1):
        raise OptionError("suspects", suspects, "must be None or an int >= 1 (how many primary suspects)")


def _control_flow_warning(npu: NpuSide) -> List[str]:
    """The NPU bundle's ops in control flow without a dump file (``coverage.control_flow``): the
    comparison cannot see them, whatever its verdict."""
    coverage = (npu.bundle_json or {}).get("coverage") if isinstance(npu.bundle_json, dict) else None
    flow = coverage.get("control_flow") if isinstance(coverage, dict) else None
    if not isinstance(flow, dict) or not flow.get("not_dumped"):
        return []
    missing = [str(name) for name in flow["not_dumped"] if isinstance(name, str)]
    return ["NPU bundle: {} of {} executed op(s) inside control flow (loop bodies, cond branches, If/While "
            "function bodies) have no dump file, so this comparison cannot see them: {}{}".format(
                len(flow["not_dumped"]), flow.get("executed"), ", ".join(missing[:3]),
                " ..." if len(missing) > 3 else "")]


def _nested_loop_warning(graph: Graph, rows: List[Row]) -> List[str]:
    """Loops inside loop bodies, when rows are compared iteration by iteration: what the
    iteration numbers and the upstream links there do not say (docs/compare.md)."""
    if not any(row.iteration is not None for row in rows):
        return []
    nested = nested_loops(graph)
    if not nested:
        return []
    return ["nested while loops ({} Enter op(s) inside another loop's body, e.g. {}): an inner-loop op's "
            "iteration k is its k-th run in the step (outer and inner iterations counted together), and "
            "upstream links pair iteration k with iteration k across the loop levels, so a root cause "
            "there may be named at the wrong op or iteration".format(len(nested), nested[0])]


def _golden_free(npu_side: NpuSide, limits: Thresholds, started: float, allow_uncompared: bool,
                 suspects: Optional[int] = None) -> CompareResult:
    """No golden anywhere: the checks that need none (docs/compare.md), verdict from them."""
    the_graph = load_graph(npu_side.graph_path or "")
    checks = run_checks(the_graph, npu_side)
    for warning in npu_side.warnings:
        logger.warning("%s", printable(warning))
    doc = {"schema": SCHEMA, "npu": npu_side.describe(), "golden": None, "thresholds": limits.as_dict(),
           "summary": checks_only_summary(checks, time.monotonic() - started, allow_uncompared),
           "first_divergence": None, "root_causes": [], "rows": [], "warnings": list(npu_side.warnings),
           "checks": checks}
    return _with_suspects(CompareResult(doc, [], [], limits), the_graph, suspects)


def _stats_compare(npu_side: NpuSide, golden: Optional[str], limits: Thresholds, stats_limits: StatsThresholds,
                   started: float, allow_uncompared: bool, pattern: Optional["re.Pattern[str]"],
                   suspects: Optional[int] = None) -> CompareResult:
    """A stats bundle (stats CSVs, no tensor dump) against golden statistics (docs/compare.md)."""
    the_graph = load_graph(npu_side.graph_path or "", formats=False)  # no device payload is converted
    golden_stats = load_golden_stats(golden, npu_side.golden_dir)
    try:
        doc = run_stats_compare(the_graph, npu_side, golden_stats, stats_limits, started, allow_uncompared, pattern)
        doc["warnings"].extend(_golden_for_warning(npu_side, golden_stats))  # type: ignore[arg-type]
    finally:
        golden_stats.close()
    doc["checks"] = run_checks(the_graph, npu_side, nan_inf=False)
    for warning in doc["warnings"]:
        logger.warning("%s", printable(warning))
    return _with_suspects(CompareResult(doc, [], [], limits, stats_limits), the_graph, suspects)


def compare(npu: str, golden: Optional[str] = None, *, graph: Optional[str] = None, thresholds: Any = None,
            ops: Optional[str] = None, step: Optional[int] = None, workers: Optional[int] = None,
            progress: Optional[ProgressFn] = None, allow_uncompared: bool = False,
            stats_thresholds: Any = None, determinism: bool = False, replay: Any = None,
            replay_op: Optional[str] = None, suspects: Optional[int] = None) -> CompareResult:
    """Compare the NPU side ``npu`` with ``golden`` (see the module doc and docs/compare.md).

    ``npu``: bundle folder or archive, or a dump step folder (then ``graph`` is required);
    ``golden``: golden bundle, folder of msaccucmp-named .npy files, or None for the NPU
    bundle's own ``data/golden``; ``graph``: Build graph (.txt or msaccucmp .json) overriding
    the bundle's; ``thresholds``: None, a :class:`Thresholds` or a dict of its fields;
    ``ops``: regular expression, only ops whose NPU name or an original op name matches;
    ``step``: the dump step folder to compare (default: the lowest); ``workers``: processes
    (default: every core); ``progress(done, total)`` after every dump file;
    ``allow_uncompared``: pass on the compared rows even when the comparison is incomplete
    (broken data, ops with a dump file but no compared row; docs/compare.md);
    ``stats_thresholds``: None, a :class:`StatsThresholds` or a dict of its fields, the limits of
    the statistics compare (an NPU side with stats CSVs and no tensor dump).
    ``golden`` may be a second NPU bundle (NPU vs NPU, :mod:`._npu_pair`); ``determinism``: two
    runs of one configuration, every op whose outputs differ at all is listed (``doc["determinism"]``).
    ``replay``: True (the first divergence), N or "all" root causes; ``replay_op``: every output row of
    that op instead: rebuilt from the bundle's TF graph and run on CPU with the NPU's inputs
    (``doc["replay"]``, :mod:`.replay`; imports TensorFlow in a subprocess unless it is loaded).
    ``suspects``: N adds ``doc["suspects"]``, the suspects document of :mod:`.suspects` (at most N
    primary suspects and their producers; None when nothing is suspect), for ``--suspects-out``.

    Without any golden (``golden`` None and no ``data/golden`` in the NPU bundle) only the checks
    that need no golden run (NaN/Inf origin, overflow report): ``doc["golden"]`` is None.

    Raises CompareError / OptionError / BundleError / FormatError for inputs it cannot use;
    tensors it cannot compare are rows with a reason, never errors.
    """
    started = time.monotonic()
    if is_rank_index(npu):
        raise OptionError("npu", npu, "is a rank index (index.json of rank_N bundles): compare it with compare_ranks()")
    pair = is_npu_bundle(golden)
    if determinism and not pair:
        raise OptionError("determinism", golden, "needs two NPU bundles (NPU and GOLDEN both NPU runs)")
    limits = make_thresholds(DETERMINISM_THRESHOLDS if determinism else thresholds)
    stats_limits = make_stats_thresholds(stats_thresholds)
    count = worker_count(workers)
    pattern = _ops_pattern(ops)
    replay_spec = make_replay_spec(replay, replay_op)
    _check_suspects(suspects)
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise OptionError("step", step, "must be a non-negative int")
    # started before anything is read: its import of TensorFlow (seconds) overlaps all of the comparison
    runner = ReplayProcess() if replay_spec is not None else None  # type: Optional[ReplayProcess]
    try:
        npu_side = load_npu(npu, graph, step)
    except BaseException:
        if runner is not None:
            runner.close()
        raise
    golden_side = None
    try:
        golden_free = golden is None and npu_side.golden_dir is None
        if replay_spec is not None and (golden_free or (npu_side.stats and not npu_side.dumps)):
            raise OptionError("replay", replay_spec.describe(), "needs a tensor dump compared with a golden; {} "
                              "has {}".format(npu, "no golden" if golden_free else "statistics only"))
        if golden_free:
            return _golden_free(npu_side, limits, started, bool(allow_uncompared), suspects)
        if npu_side.stats and not npu_side.dumps:
            return _stats_compare(npu_side, golden, limits, stats_limits, started, bool(allow_uncompared), pattern,
                                  suspects)
        golden_side = npu_golden_side(golden, step) if pair else load_golden_side(golden, npu_side)
        the_graph = load_graph(npu_side.graph_path or "")
        plan = build_plan(the_graph, npu_side.dumps, pattern, walk=not pair,
                          iterations=not pair and any("#" in key for key in golden_side.files))
        results = {}  # type: Dict[int, FileResult]
        total = len(plan.jobs)

        def done(result: FileResult) -> None:
            if progress is not None:
                progress(len(results) + 1, total)

        for result in run_jobs(plan.jobs, golden_side.files, count, done):
            results[result.job] = result
        rows = build_rows(plan.entries, results)
        coverage = mark_not_selected(rows, dump_layer_of_bundle(npu_side.bundle_json))
        analysis = analyse(rows, the_graph, limits, npu_side.bundle_json,
                           golden_side.bundle_json if golden_side.kind in ("bundle", "npu") else None)
        if pair:  # an op fused away on the other side has no counterpart there
            analysis.incomplete = pair_incomplete(rows)
        warnings = (list(npu_side.warnings) + _golden_for_warning(npu_side, golden_side)
                    + _control_flow_warning(npu_side) + _nested_loop_warning(the_graph, rows))
        # entries the NPU scan skipped unopened: something was dumped there that nothing compared
        analysis.incomplete.extend(npu_side.skipped)
        unclaimed = [e.name for e in plan.entries if e.position is None]
        if unclaimed:
            warnings.append("{} of {} dump file(s) match no op of the graph {} (compared by their own names; is "
                            "it this dump's Build graph?): {}".format(
                                len(unclaimed), len(plan.jobs), npu_side.graph_path, ", ".join(unclaimed[:3])
                                + (" ..." if len(unclaimed) > 3 else "")))
        if golden_side.skipped:
            warnings.append("golden {}: {} file(s) skipped (not {{op}}.{{index}}.{{timestamp}}.npy): {}".format(
                golden_side.path, len(golden_side.skipped), ", ".join(golden_side.skipped[:3])))
        for warning in warnings:
            logger.warning("%s", printable(warning))
        environment = environment_differences(npu_side.bundle_json, golden_side.bundle_json
                                              if golden_side.kind in ("bundle", "npu") else None,
                                              ("NPU", "NPU B" if pair else "golden"))
        if analysis.input_inconsistent:  # what else differed between the runs: the likely cause
            analysis.input_detail.extend("environment: " + line for line in environment)
        first = analysis.root_causes[0] if analysis.root_causes else None
        doc = {
            "schema": SCHEMA,
            "npu": npu_side.describe(),
            "golden": golden_side.describe(),
            "thresholds": limits.as_dict(),
            "summary": summary_doc(rows, analysis.root_causes, analysis.input_inconsistent, analysis.input_detail,
                                   time.monotonic() - started, analysis.incomplete, bool(allow_uncompared)),
            "first_divergence": first_divergence_doc(first),
            "root_causes": [r.number for r in analysis.root_causes],
            "environment_differences": environment,
            "rows": [row_doc(r) for r in rows],
            "warnings": warnings,
            "checks": run_checks(the_graph, npu_side, nan_inf=False),
        }
        if coverage is not None:
            doc["coverage"] = coverage
        if determinism:
            doc["determinism"] = determinism_doc(rows)[0]
        if replay_spec is not None:
            doc["replay"] = replay_rows(npu_side, the_graph, rows, analysis.root_causes, replay_spec, runner)
        return _with_suspects(CompareResult(doc, rows, analysis.root_causes, limits), the_graph, suspects)
    finally:
        if runner is not None:
            runner.close()
        npu_side.close()
        if golden_side is not None:
            golden_side.close()
