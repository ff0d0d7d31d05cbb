"""Where ``npu-dump-hook compare``'s time goes, for ``bench_compare.py --profile``.

* the imports: CPU of a fresh interpreter that imports what the command imports, beside a bare one;
* the pool: starting and stopping two forked workers with nothing to do;
* ``compare()`` on one core (``workers=1``) plus the CSV, first without a profiler (its CPU
  seconds), then under cProfile; each function's own time is put in one category by its
  module, and the time of a C function (numpy's reductions, ``readinto``, ``open``) in the
  category of the function that called it (cProfile keeps the time per caller); CPU seconds
  (``time.process_time``), not wall, as the machine may be shared. cProfile adds
  a cost per Python call, so the Python-heavy categories read high; the unprofiled CPU is the
  total to trust.
"""
import cProfile
import os
import pstats
import subprocess
import sys
import time

from npu_dump_hook.compare import compare
from npu_dump_hook.compare._blas import single_blas_thread

#: (category, path fragments of the modules in it), first match wins.
CATEGORIES = (
    ("metrics (compute_metrics)", ("compare/metrics.py",)),
    ("device format conversion", ("formats/device_format.py",)),
    ("reading dump files and golden .npy", ("formats/dump_file.py", "formats/_dump_", "_files.py", "compare/_golden.py",
                                           "formats/dump_schema.py", "formats/data_types.py", "compare/_worker.py")),
    ("dump folder, graph, matching", ("compare/_npu.py", "compare/_graph.py", "compare/_match.py", "formats/ge_",
                                      "formats/_ge_", "locate/", "formats/names.py")),
    ("rows and analysis", ("compare/_rows.py", "compare/_analysis.py", "compare/_thresholds.py", "compare/checks.py",
                           "compare/nan_origin.py", "compare/overflow.py")),
    ("reports (CSV, JSON rows, summary)", ("compare/_report.py", "_inert.py", "csv.py")),
    ("pool", ("compare/_pool.py", "multiprocessing/")),
)


def _category(filename: str) -> str:
    for name, parts in CATEGORIES:
        if any(part in filename for part in parts):
            return name
    return "other"


def _by_category(stats: pstats.Stats) -> dict:
    totals = {}
    for (filename, _line, _name), (_cc, _nc, own, _ct, callers) in stats.stats.items():
        if filename != "~":
            key = _category(filename)
            totals[key] = totals.get(key, 0.0) + own
            continue
        for (caller_file, _cl, _cn), numbers in callers.items():  # a C function: its callers' categories
            key = _category(caller_file)
            totals[key] = totals.get(key, 0.0) + numbers[2]
    return totals


def _child_cpu(argv) -> float:
    proc = subprocess.Popen(argv)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def _imports() -> None:
    bare = min(_child_cpu([sys.executable, "-c", "import numpy"]) for _ in range(3))
    full = min(_child_cpu([sys.executable, "-c", "import numpy, npu_dump_hook.cli._compare, npu_dump_hook.compare"])
               for _ in range(3))
    print("interpreter + numpy: {:.2f} s cpu; + npu_dump_hook's compare and CLI imports: {:.2f} s cpu".format(
        bare, full))


def _pool_start() -> None:
    from npu_dump_hook.compare import _pool

    started, cpu = time.perf_counter(), time.process_time()
    workers = [_pool._Worker(_pool._context(), {}) for _ in range(2)]
    for worker in workers:
        worker.stop(5.0)
    print("pool: two workers started and stopped in {:.3f} s wall, {:.3f} s cpu in this process".format(
        time.perf_counter() - started, time.process_time() - cpu))


def profile_compare(info: dict, command: str) -> None:
    """Print the breakdown (module doc) for the bundle ``info`` of bench_compare."""
    print("\n== where our time goes ({} ops, one core)".format(info["ops"]))
    _imports()
    _pool_start()
    args = (info["step"], info["golden"])
    started, cpu = time.perf_counter(), time.process_time()
    compare(*args, graph=info["graph"], workers=1).csv()
    print("compare(workers=1) + csv, no profiler: {:.2f} s wall, {:.2f} s cpu".format(
        time.perf_counter() - started, time.process_time() - cpu))
    profiler = cProfile.Profile(time.process_time)  # CPU seconds: the machine may be shared
    with single_blas_thread():
        profiler.enable()
        compare(*args, graph=info["graph"], workers=1).csv()
        profiler.disable()
    totals = _by_category(pstats.Stats(profiler))
    whole = sum(totals.values()) or 1.0
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print("  {:<38} {:>7.2f} s {:>5.1f}%".format(name, seconds, 100.0 * seconds / whole))
    print("  (under cProfile: {:.2f} s in all)".format(whole))
