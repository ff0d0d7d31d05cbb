"""Phase timer for ``bench_rnn_cost.py --phases``: wall and CPU seconds of named package functions
in the dumped child, without a profiler (cProfile inflates per-call costs several-fold).

Active only when ``NPU_BENCH_PHASE_OUT`` names a file and this process is ``npu-dump-hook run``'s
child (its ``argv[0]`` is ``-c``). Each function of :data:`STEPS` is wrapped right after its module
is first executed (a ``sys.meta_path`` finder), so callers that imported it by name see the wrapper
too. A name that a checkout does not have (an older ``--before``) is skipped. At exit one line per
phase is written, in :data:`STEPS` order: ``name<TAB>calls<TAB>wall<TAB>cpu``, CPU being this
process's (all its threads); the first line, ``child``, is the whole process so far.

The rows of :data:`OUTSIDE` are the runner's work outside the hook's four phases: the CPU the child
had used when the script started (``runner:before the script``: interpreter, bootstrap, the
package's imports, the injection's installation), the hook's making at the session's creation
and its wrapping at the first training run (which holds ``begin``), the heap's freeze, the
pending collection after the script (``Injection.finish``) and the release after the bundle.
The child's finalization after the last ``atexit`` callback is not seen here (this writer is one).
"""
import atexit
import functools
import os
import runpy
import sys
import time

#: (module, "Class.method" or "function", depth): the timed functions in the order of a dumped step,
#: depth 1 inside the hook phase above it.
STEPS = (
    ("npu_dump_hook.hook", "NpuDumpHook.begin", 0),
    ("npu_dump_hook.train.capture", "TensorCapture.__init__", 1),
    ("npu_dump_hook.train.dump_run", "DumpRun.begin_backend", 1),
    ("npu_dump_hook.train.dump_run", "DumpRun.write_model_graph", 1),
    ("npu_dump_hook.hook", "NpuDumpHook.before_run", 0),
    ("npu_dump_hook.train.sizing", "SizeCheck.before_step", 1),
    ("npu_dump_hook.hook", "NpuDumpHook.after_run", 0),
    ("npu_dump_hook.train.capture", "TensorCapture.finish", 1),
    ("npu_dump_hook.emulator.backend", "EmulatedNpu.write_step", 1),
    ("npu_dump_hook.emulator.npu_graph", "SharedBuild.nodes", 2),
    ("npu_dump_hook.emulator.backend", "EmulatedNpu._write_graph", 2),
    ("npu_dump_hook.emulator.backend", "EmulatedNpu._write_ops", 2),
    ("npu_dump_hook.hook", "NpuDumpHook.end", 0),
    ("npu_dump_hook.collect", "collect_run", 1),
    ("npu_dump_hook.bundle.write", "_read_graph", 1),
    ("npu_dump_hook.bundle._placing", "write_payload_and_json", 1),
    ("npu_dump_hook.compare", "golden_free_checks", 1),
)
#: The runner outside the hook's phases (module doc); a ``None`` depth: the CPU at the first call, not a time.
OUTSIDE = (
    ("npu_dump_hook.runner._child", "_run_script", None),
    ("npu_dump_hook.runner._inject", "Injection._reserve", 0),
    ("npu_dump_hook.runner._sessions", "SessionPatches._wrap_at_training_run", 0),
    ("npu_dump_hook.runner._heap", "HeapFreeze.freeze", 0),
    ("npu_dump_hook.runner._inject", "Injection.finish", 0),
    ("npu_dump_hook.runner._heap", "release_after_bundle", 0),
)
PHASES = {}
for _module, _dotted, _depth in STEPS + OUTSIDE:
    PHASES.setdefault(_module, []).append(_dotted)
_OUT = os.environ.get("NPU_BENCH_PHASE_OUT")
_totals = {}


def _timed(label, function):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            entry = _totals.setdefault(label, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - wall
            entry[2] += time.process_time() - cpu
    return timed


def _marked(label, function):
    """``function``, noting this process's CPU seconds at its first call (as ``calls 1, wall 0``)."""
    @functools.wraps(function)
    def marked(*args, **kwargs):
        _totals.setdefault(label, [1, 0.0, time.process_time()])
        return function(*args, **kwargs)
    return marked


_MARKS = {(module, dotted) for module, dotted, depth in OUTSIDE if depth is None}


def _wrap(module):
    for dotted in PHASES.get(module.__name__, ()):
        owner, parts = module, dotted.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part, None)
        function = getattr(owner, parts[-1], None)
        if callable(function):
            wrap = _marked if (module.__name__, dotted) in _MARKS else _timed
            setattr(owner, parts[-1], wrap(_label(module.__name__, dotted), function))


def _label(module, dotted):
    mark = " (CPU at 1st call)" if (module, dotted) in _MARKS else ""
    return module.rsplit(".", 1)[-1] + ":" + dotted + mark

def _after_import():
    """The globals of benchmarks/_after_import.py, run from its path (the child's sys.path gains nothing)."""
    return runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_after_import.py"))


def _write():
    times = os.times()
    with open(_OUT, "w") as handle:
        handle.write("child\t1\t{:.3f}\t{:.3f}\n".format(time.perf_counter() - _START, times.user + times.system))
        for module, dotted, depth in STEPS + OUTSIDE:
            label = _label(module, dotted)
            if label in _totals:
                calls, wall, cpu = _totals[label]
                handle.write("{}{}\t{}\t{:.3f}\t{:.3f}\n".format("  " * (depth or 0), label, calls, wall, cpu))


if _OUT and sys.argv and sys.argv[0] == "-c":
    _START = time.perf_counter()
    _after_import()["install"](PHASES, _wrap)
    atexit.register(_write)
