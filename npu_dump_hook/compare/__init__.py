"""Compare an NPU dump with its golden (CPU/GPU) tensors: msaccucmp's metrics per tensor, and
the first diverging original TF op (docs/compare.md). TensorFlow-free.

::

    from npu_dump_hook.compare import compare
    result = compare("bundle")                      # golden: the bundle's own data/golden
    result = compare("bundle.tar.gz", "golden_bundle", thresholds={"cosine_min": 0.999})
    result = compare("dump/.../0", "npy_dir", graph="ge_proto_00000001_Build.txt")
    result = compare("stats_bundle", "its_golden_bundle")   # dump_data="stats": compared by statistics
    result = compare("overflow_bundle")             # no golden anywhere: NaN/Inf origin, overflow report
    result.doc           # the JSON document (schema npu_dump_hook/compare@1)
    result.exit_code     # 0 pass; 1 a root cause (breach or overflow), input inconsistent, or incomplete
    result.csv()         # msaccucmp's CSV; result.summary_text() the terminal summary

Modules, one job each::

    _npu.py         the NPU side: bundle folder / archive / dump step folder, its step and graph
    _graph.py       the Build graph (GE text or msaccucmp JSON) as ops in graph order, origin formats
    _golden.py      the golden side: .npy files by msaccucmp key (latest timestamp wins)
    _match.py       dump file -> graph op, NPU tensor -> golden TF tensor, ground truth, Index
    _worker.py      one dump file's tensors against their golden files
    _pool.py        the worker processes (a dead worker's job redone once, then a row with a reason)
    _blas.py        one OpenBLAS thread while comparing
    _rows.py        rows in msaccucmp's order, execution order
    _analysis.py    breaches, root causes vs propagated, first divergence, input consistency
    _thresholds.py  the limits and how a row is checked against them
    _report.py      CSV, JSON document, terminal summary(escapes for terminal and CSV: npu_dump_hook/_inert.py)
    checks.py       checks that need no golden: nan_origin.py (where NaN/Inf start), overflow.py (Opdebug report)
    stats.py        the statistics compare (stats CSVs vs golden statistics); _stats_fast.py its CSV fast path,
                    _stats_report.py its run and reports
    _selection.py   a partial dump (dump_layer): "not selected" rows, the coverage of the choice
    suspects.py     the suspects a targeted second dump (dump_layer) should hold (--suspects-out)
    _compare.py     compare(), CompareResult and every other public name but golden_free_checks, imported
                    on the first use of one (the hook's end runs only the golden-free checks: _npu, _graph,
                    checks; this module holds those alone)
    metrics.py      the ten msaccucmp metrics;  _html.py  the HTML report
    ranks.py        every rank of a rank index: per-rank compare, earliest divergence, collective check, merge
    replay.py       replay: a row's original TF op(s) on CPU from the NPU's inputs (kernel / inherited /
                    precision), through npu_dump_hook.op_replay (TensorFlow, in a subprocess unless loaded)
"""
import importlib
from typing import Any, Dict

from ._graph import load_graph
from .._inert import printable
from ._npu import load_npu, load_written
from .checks import checks_headline, run_checks_loading_graph

__all__ = ["compare", "compare_ranks", "merge_rank_docs", "load_rank_doc", "is_rank_index", "RanksResult",
           "golden_free_checks", "CompareResult", "Thresholds", "DEFAULT_THRESHOLDS", "SCHEMA", "ProgressFn",
           "render_html",
           "StatsThresholds", "DEFAULT_STATS_THRESHOLDS", "PRECISION_CLASSES", "op_precision"]


def __getattr__(name: str) -> Any:
    """Every name of ``__all__`` but :func:`golden_free_checks` is :mod:`._compare`'s, imported on its
    first use (PEP 562: asked only for a name this module does not define): the hook's end runs only
    the golden-free checks, and importing the comparison costs ~0.035 s CPU on Python 3.7. A test
    patches a name where it is used (``_compare.load_npu``), as anywhere else."""
    if name in __all__:
        return getattr(importlib.import_module(__name__ + "._compare"), name)
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))


def golden_free_checks(npu: str, listing: Any = None) -> Dict[str, Any]:
    """Only the checks that need no golden (NaN/Inf origin, overflow report) on the NPU bundle or
    archive ``npu``, whatever golden it holds: ``{"checks": ..., "headline": [lines]}`` (the run
    summary's headline, :func:`.checks.checks_headline`). Errors as :func:`compare`'s; the graph is
    parsed only when a finding needs it (:func:`.checks.run_checks_loading_graph`). ``listing``:
    the :class:`~npu_dump_hook.bundle.DumpListing` of the bundle folder ``npu`` when this process
    has just written it (``BundleResult.listing``): used when the folders on disk agree with it
    (:func:`._npu.load_written`), so the bundle is not re-opened and re-walked; the same result."""
    npu_side = load_written(npu, listing) if listing is not None else None
    if npu_side is None:
        npu_side = load_npu(npu, golden=False)  # no golden tensor is read here
    try:
        checks = run_checks_loading_graph(lambda: load_graph(npu_side.graph_path or ""), npu_side)
    finally:
        npu_side.close()
    return {"checks": checks, "headline": [printable(line) for line in checks_headline(checks)]}
