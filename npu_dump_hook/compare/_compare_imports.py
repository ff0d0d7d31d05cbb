"""What :func:`npu_dump_hook.compare.compare` and :class:`~npu_dump_hook.compare.CompareResult` need beyond
:func:`~npu_dump_hook.compare.golden_free_checks`: imported by the package on first use of one of
these names (``compare._load_rest``), so the hook's end, which runs only the golden-free checks, does
not pay for the comparison's modules."""
from ._analysis import analyse
from ._golden import GoldenSide, load_golden_side
from ._loops import nested_loops
from ._html import render_html
from ._match import build_plan
from ._report import SCHEMA, csv_text, first_divergence_doc, row_doc, summary_doc, terminal_summary
from ._rows import Row, build_rows
from ._thresholds import DEFAULT_THRESHOLDS, PRECISION_CLASSES, Thresholds, make_thresholds, op_precision
from ._npu_pair import DETERMINISM_THRESHOLDS, determinism_doc, is_npu_bundle, npu_golden_side, pair_incomplete
from ._pool import run_jobs
from ._worker import FileResult
from .replay import ReplayProcess, make_replay_spec, replay_lines, replay_rows
from ._stats_report import run_stats_compare, stats_csv_text, stats_summary_text
from .ranks import RanksResult, compare_ranks, is_rank_index, load_rank_doc, merge_rank_docs
from .stats import DEFAULT_STATS_THRESHOLDS, StatsThresholds, load_golden_stats, make_stats_thresholds
from .suspects import build_suspects
from ._selection import coverage_line, dump_layer_of_bundle, mark_not_selected

__all__ = ["analyse", "GoldenSide", "load_golden_side", "nested_loops", "render_html", "build_plan", "SCHEMA",
           "csv_text", "first_divergence_doc", "row_doc", "summary_doc", "terminal_summary", "Row", "build_rows",
           "DEFAULT_THRESHOLDS", "PRECISION_CLASSES", "Thresholds", "make_thresholds", "op_precision",
           "DETERMINISM_THRESHOLDS", "determinism_doc", "is_npu_bundle", "npu_golden_side", "pair_incomplete",
           "run_jobs", "FileResult", "ReplayProcess", "make_replay_spec", "replay_lines", "replay_rows",
           "run_stats_compare", "stats_csv_text", "stats_summary_text", "RanksResult", "compare_ranks",
           "is_rank_index", "load_rank_doc", "merge_rank_docs", "DEFAULT_STATS_THRESHOLDS", "StatsThresholds",
           "load_golden_stats", "make_stats_thresholds", "build_suspects", "coverage_line", "dump_layer_of_bundle",
           "mark_not_selected"]
