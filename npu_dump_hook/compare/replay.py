"""Replay: is a breaching row its op's own error, inherited, or float16 precision? (docs/compare.md, "Replay")

For each replayed row (an output row: the first ``count`` root causes, or every output row of
one op by name) the NPU's dumped inputs of that op are read (device formats converted as the
compare does, float16 widened), its original TF op(s) are rebuilt from the bundle's TF graph
(``data/tf/graph.pbtxt``; a fused node's ``_datadump_original_op_names`` in order) and run on
CPU in float32, float64 and float32 with float16 rounding after each op
(:mod:`npu_dump_hook.op_replay`). Reported beside the network error (the row's error against
the golden run):

* ``local``: the NPU output against CPU float32 and float64 on the *same* inputs;
* ``cpu_f32_vs_f64``: CPU float32's own error;
* ``expected``: what the op's precision explains, float16 rounding's error (the float16
  variant against float64) when the NPU op read or wrote float16, else CPU float32's own.

Verdict (relative Euclidean distances ``||a - b|| / ||b||``)::

    kernel     local (vs float64) > max(REPLAY_FACTOR * expected, REPLAY_FLOOR): the op itself is wrong
    inherited  local within that, and an input row of the op breaches: the input carried the error
    precision  local within that, no input breaches: float16 (or float32) rounding accounts for it

REPLAY_FACTOR and REPLAY_FLOOR are calibrated on the emulator's ascend profile
(benchmarks/replay_calibration.py: every replayable output row of healthy runs). Needs
inputs in the dump (``dump_mode`` ``all`` or ``input``) and the bundle's TF graph; a row that
cannot be replayed gets ``verdict`` None and a ``reason``.

TensorFlow: this module imports none. The replay runs in-process (:mod:`npu_dump_hook.op_replay`)
when TensorFlow is already loaded (a training script, a test), else in a subprocess
``python -m npu_dump_hook.op_replay --serve`` (``sys.executable``; :class:`ReplayProcess`) that
compare starts before comparing, so its import of TensorFlow overlaps the comparison, and a
compare CLI stays TF-free.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .._inert import printable
from ..errors import BundleError, CompareError, NpuDumpError, OptionError
from ._graph import Graph
from ._match import build_plan
from ._npu import NpuSide
from ._rows import Row
from ._worker import _HeldDumpFile, _npu_array

__all__ = ["ReplaySpec", "ReplayProcess", "make_replay_spec", "replay_rows", "replay_lines", "REPLAY_FACTOR", "REPLAY_FLOOR",
           "VERDICTS", "NEEDS_INPUTS"]

#: local error may be this many times what the op's precision explains (calibrated, see the module doc)
REPLAY_FACTOR = 4.0
#: ... and at least this (relative Euclidean distance): below it, no kernel is called wrong
REPLAY_FLOOR = 1e-5
VERDICTS = ("kernel", "inherited", "precision")
NEEDS_INPUTS = "the NPU dump holds no inputs of {} (dump_mode {}): replay needs dump_mode all or input"
_TIMEOUT_S = 600
_SUBPROCESS_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


class ReplaySpec(NamedTuple):
    """``count``: the first N root causes (None: all); ``op``: every output row of this NPU op or
    original TF op instead."""

    count: Optional[int] = 1
    op: Optional[Tuple[str, ...]] = None

    def describe(self) -> str:
        if self.op is not None:
            return "op " + ", ".join(self.op) if len(self.op) <= 3 else "{} ops".format(len(self.op))
        return "all root causes" if self.count is None else "first {} root cause(s)".format(self.count)


def make_replay_spec(replay: Any = None, replay_op: Optional[str] = None) -> Optional[ReplaySpec]:
    """``replay``: None (off), True (the first divergence), a positive int N or ``"all"``;
    ``replay_op``: an op name (API: or a list of names). OptionError naming the option otherwise."""
    if replay_op is not None:
        names = (replay_op,) if isinstance(replay_op, str) else tuple(replay_op) \
            if isinstance(replay_op, (list, tuple)) else ()
        if not names or not all(isinstance(n, str) and n for n in names):
            raise OptionError("replay-op", replay_op, "must be an NPU op or original TF op name (API: or a list)")
        return ReplaySpec(None, names)
    if replay is None or replay is False:
        return None
    if replay is True:
        return ReplaySpec(1)
    if isinstance(replay, str):
        if replay == "all":
            return ReplaySpec(None)
        if replay.isdigit():
            replay = int(replay)
    if isinstance(replay, bool) or not isinstance(replay, int) or replay < 1:
        raise OptionError("replay", replay, "must be a positive number of root causes or 'all'")
    return ReplaySpec(replay)


def _targets(rows: Sequence[Row], root_causes: Sequence[Row], spec: ReplaySpec) -> List[Row]:
    if spec.op is None:
        chosen = list(root_causes) if spec.count is None else list(root_causes[:spec.count])
        return chosen
    chosen = []  # type: List[Row]
    for name in spec.op:  # each name: every output row of the first NPU op it names
        named = [r for r in rows if r.direction == "output" and r.compared and
                 (r.npu_op == name or name in r.ground_truth)]
        if not named:
            raise OptionError("replay-op", name, "no compared output row of an NPU op or original TF op of that name")
        chosen.extend(r for r in named if r.npu_op == named[0].npu_op and r not in chosen)
    return chosen


def _tf_graph(npu: NpuSide) -> Tuple[Optional[str], str]:
    view = npu.view
    if view is None:
        return None, "the NPU side is a dump folder, not a bundle: replay needs the bundle's TF graph"
    entries = view.files("tf_graph")
    if not entries:
        return None, "the NPU bundle has no TF graph (data/tf/graph.pbtxt; kept unless the hook was told not to)"
    path = view.checked(entries[0]["path"], entries[0])
    if not os.path.isfile(path):
        return None, "the NPU bundle lists data/{} but has no such file".format(entries[0]["path"])
    return path, ""


def _widened(array: np.ndarray) -> np.ndarray:
    """A copy (the reader's scratch buffer is reused by its next read), float16 as float32."""
    return array.astype(np.float32) if array.dtype == np.float16 else np.array(array, copy=True)


def _job_for(row: Row, job: Any, folder: str, number: int, dump_mode: str) -> Tuple[Dict[str, Any], Any]:
    """The request job of ``row`` (its op's dumped inputs saved in ``folder``) and its NPU output;
    CompareError with the reason when the dump cannot give them."""
    if job is None:
        raise CompareError("{} has no dump file".format(row.npu_op))
    with _HeldDumpFile.open_held(job.path) as dump:  # one regular-file open, as the compare's own reads
        inputs = dump.tensors("input")
        if not inputs:
            raise CompareError(NEEDS_INPUTS.format(row.npu_op, dump_mode))
        entries, float16 = [], False
        for slot, info in enumerate(inputs):
            float16 = float16 or info.dtype_name == "DT_FLOAT16"
            value = _widened(_npu_array(job, dump, info, "input", slot))
            if value.dtype.kind not in "fiub":
                raise CompareError("input {} of {} holds {} (no values to feed)".format(slot, row.npu_op,
                                                                                        info.dtype_name))
            name = "j{}_in{}.npy".format(number, slot)
            np.save(os.path.join(folder, name), value, allow_pickle=False)
            plan = job.inputs[slot] if slot < len(job.inputs) else None
            entries.append({"tensor": "{}:{}".format(plan.name, plan.index) if plan else None, "file": name})
        info = dump.tensor("output", row.slot)
        float16 = float16 or info.dtype_name == "DT_FLOAT16"
        output = _widened(_npu_array(job, dump, info, "output", row.slot)).astype(np.float64)
    plan = job.outputs[row.slot] if row.slot < len(job.outputs) else None
    return ({"id": number, "chain": list(row.ground_truth) or [row.npu_op], "slot": row.slot,
             "fetch": "{}:{}".format(plan.name, plan.index) if plan else None, "inputs": entries,
             "round16": float16}, output)


class ReplayProcess(object):
    """Where the replay runs: this process when TensorFlow is loaded here, else a subprocess
    ``python -m npu_dump_hook.op_replay --serve`` started when compare starts, so that its import of
    TensorFlow overlaps the comparison; :meth:`run` hands it the request folder, :meth:`close`
    ends it when it was never used (or on any error)."""

    def __init__(self) -> None:
        self.process = None  # type: Optional[subprocess.Popen]
        if "tensorflow" in sys.modules:
            return
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, **_SUBPROCESS_ENV)
        env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
        self.process = subprocess.Popen([sys.executable, "-m", "npu_dump_hook.op_replay", "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env=env)

    def run(self, folder: str) -> Dict[str, Any]:
        """Replay the request in ``folder``; CompareError when it could not."""
        if self.process is None:
            from ..op_replay.run import run_request  # TensorFlow is there already: no second process

            try:
                return run_request(folder)
            except Exception as exc:  # the replay informs; it never takes the comparison down with it
                raise CompareError("replay failed: {}: {}".format(type(exc).__name__, str(exc)[:300]))
        process, self.process = self.process, None
        try:
            _out, err = process.communicate((folder + "\n").encode("utf-8"), timeout=_TIMEOUT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        result = os.path.join(folder, "result.json")
        if process.returncode != 0 or not os.path.isfile(result):
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            raise CompareError("replay needs TensorFlow on CPU; {} -m npu_dump_hook.op_replay exited {}: {}".format(
                sys.executable, process.returncode, tail[0][:300]))
        with open(result, encoding="utf-8") as handle:
            return json.load(handle)

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.communicate()


def _errors(x: np.ndarray, ref: np.ndarray) -> Dict[str, Optional[float]]:
    """Relative Euclidean distance, cosine similarity, max absolute error of ``x`` against ``ref``."""
    x, ref = x.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    if x.size != ref.size:
        return {"rel_euclid": None, "cosine": None, "max_abs": None}
    diff, norm_x, norm_ref = float(np.linalg.norm(x - ref)), float(np.linalg.norm(x)), float(np.linalg.norm(ref))
    rel = diff / norm_ref if norm_ref else (0.0 if diff == 0 else None)  # None: the reference is all zeros
    cosine = float(np.dot(x, ref) / (norm_x * norm_ref)) if norm_x and norm_ref else None
    values = {"rel_euclid": rel, "cosine": cosine, "max_abs": float(np.max(np.abs(x - ref))) if x.size else 0.0}
    return {k: v if v is not None and math.isfinite(v) else None for k, v in values.items()}  # JSON: no NaN/Inf


def _verdict(entry: Dict[str, Any], row: Row, rows: Sequence[Row]) -> None:
    local = entry["local_f64"] or entry["local_f32"]
    expected = entry["expected"]
    if local is not None and local["rel_euclid"] is None and local["max_abs"] is not None:
        local = dict(local, rel_euclid=float("inf") if local["max_abs"] > 0 else 0.0)  # CPU: all zeros
    if local is None or local["rel_euclid"] is None or expected is None:
        entry["reason"] = entry["reason"] or "no local error: NPU {} vs CPU {}".format(
            entry["local_f64"] or entry["local_f32"], expected)
        return
    tolerance = max(REPLAY_FACTOR * expected, REPLAY_FLOOR)
    entry["tolerance"] = tolerance
    breached_inputs = [r.number for r in rows if r.npu_op == row.npu_op and r.direction == "input" and r.breached]
    entry["breached_inputs"] = breached_inputs
    if not local["rel_euclid"] <= tolerance:
        entry["verdict"] = "kernel"
    elif breached_inputs:
        entry["verdict"] = "inherited"
    else:
        entry["verdict"] = "precision"


def _judge(entry: Dict[str, Any], row: Row, rows: Sequence[Row], npu: np.ndarray, outcome: Dict[str, Any],
           folder: str) -> None:
    if outcome.get("refused"):
        entry["reason"] = "refused: " + outcome["refused"]
        return
    cpu = {k: np.load(os.path.join(folder, v), allow_pickle=False) for k, v in outcome["outputs"].items()}
    entry["cpu_errors"] = outcome.get("errors") or {}
    if "f32" not in cpu and "f64" not in cpu:
        entry["reason"] = "the CPU run failed: " + "; ".join(
            "{}: {}".format(k, v) for k, v in sorted(entry["cpu_errors"].items()))
        return
    if "f32" in cpu and cpu["f32"].size != npu.size:
        entry["reason"] = "CPU output has {} elements, the NPU's {}".format(cpu["f32"].size, npu.size)
        return
    entry["local_f32"] = _errors(npu, cpu["f32"]) if "f32" in cpu else None
    entry["local_f64"] = _errors(npu, cpu["f64"]) if "f64" in cpu else None
    reference = cpu.get("f64", cpu.get("f32"))
    entry["cpu_f32_vs_f64"] = _errors(cpu["f32"], cpu["f64"]) if "f32" in cpu and "f64" in cpu else None
    own = entry["cpu_f32_vs_f64"]["rel_euclid"] if entry["cpu_f32_vs_f64"] else 0.0
    if "f16" in cpu and reference is not None:
        entry["float16_vs_f64"] = _errors(cpu["f16"], reference)
        entry["expected"] = entry["float16_vs_f64"]["rel_euclid"]
    else:
        entry["expected"] = own
    _verdict(entry, row, rows)


def _entry(row: Row) -> Dict[str, Any]:
    metrics = row.metrics or {}
    return {"row": row.number, "tensor": row.tensor, "npu_op": row.npu_op, "op_type": row.op_type,
            "original_ops": list(row.ground_truth), "status": row.status,
            "network": {"rel_euclid": metrics.get("RelativeEuclideanDistance"),
                        "cosine": metrics.get("CosineSimilarity")},
            "local_f32": None, "local_f64": None, "cpu_f32_vs_f64": None, "float16_vs_f64": None,
            "expected": None, "tolerance": None, "verdict": None, "reason": "", "breached_inputs": []}


def replay_rows(npu: NpuSide, graph: Graph, rows: Sequence[Row], root_causes: Sequence[Row],
                spec: ReplaySpec, runner: Optional[ReplayProcess] = None) -> Dict[str, Any]:
    """The ``replay`` section of the compare document (see the module doc); ``runner``: where to run
    it (default: a new :class:`ReplayProcess`, closed here)."""
    own = runner is None
    runner = ReplayProcess() if runner is None else runner
    try:
        return _replay_section(npu, graph, rows, root_causes, spec, runner)
    finally:
        if own:
            runner.close()


def _replay_section(npu: NpuSide, graph: Graph, rows: Sequence[Row], root_causes: Sequence[Row],
                    spec: ReplaySpec, runner: ReplayProcess) -> Dict[str, Any]:
    targets = _targets(rows, root_causes, spec)
    doc = {"requested": spec.describe(), "factor": REPLAY_FACTOR, "floor": REPLAY_FLOOR,
           "rows": [_entry(r) for r in targets], "note": ""}  # type: Dict[str, Any]
    if not targets:
        doc["note"] = "no root cause to replay"
        return doc
    try:
        graph_path, why = _tf_graph(npu)
    except BundleError as exc:  # a listed TF graph that is a link, a FIFO, of another size: not read
        graph_path, why = None, str(exc)
    if graph_path is None:
        doc["note"] = why
        for entry in doc["rows"]:
            entry["reason"] = why
        return doc
    folder = tempfile.mkdtemp(prefix="npu_dump_hook_replay_")
    try:
        _replay_in(folder, graph_path, npu, graph, rows, targets, doc, runner)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return doc


def _replay_in(folder: str, graph_path: str, npu: NpuSide, graph: Graph, rows: Sequence[Row],
               targets: Sequence[Row], doc: Dict[str, Any], runner: ReplayProcess) -> None:
    names = sorted(set(r.npu_op for r in targets))
    plan = build_plan(graph, npu.dumps, re.compile("^(?:{})$".format("|".join(re.escape(n) for n in names))))
    jobs = {e.name: e.job for e in plan.entries}
    dump_mode = str(((npu.bundle_json or {}).get("options") or {}).get("dump_mode", "unknown"))
    request, outputs = [], {}  # type: List[Dict[str, Any]], Dict[int, np.ndarray]
    for number, (row, entry) in enumerate(zip(targets, doc["rows"])):
        try:
            job, outputs[number] = _job_for(row, jobs.get(row.npu_op), folder, number, dump_mode)
        except (NpuDumpError, OSError, ValueError) as exc:
            entry["reason"] = str(exc)
            continue
        request.append(job)
    if not request:
        return
    with open(os.path.join(folder, "request.json"), "w", encoding="utf-8") as handle:
        json.dump({"graph": graph_path, "jobs": request}, handle)
    try:
        result = runner.run(folder)
    except (CompareError, OSError, subprocess.TimeoutExpired) as exc:
        for job in request:
            doc["rows"][job["id"]]["reason"] = str(exc)
        return
    for outcome in result.get("jobs", []):
        number = outcome["id"]
        _judge(doc["rows"][number], targets[number], rows, outputs[number], outcome, folder)


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else "{:.4g}".format(value)


def _rel(errors: Optional[Dict[str, Any]]) -> str:
    return _fmt(errors.get("rel_euclid")) if errors else "-"


def replay_lines(section: Optional[Dict[str, Any]], width: int = 100) -> List[str]:
    """The terminal summary's replay lines (none when no replay was asked for)."""
    if not section:
        return []
    lines = ["replay ({}; NPU inputs on CPU; rel. Euclidean distances):".format(section["requested"])]
    if section.get("note"):
        lines.append("  " + section["note"])
    for entry in section["rows"]:
        head = "  row {} {} [{}]: {}".format(entry["row"], entry["tensor"], " > ".join(entry["original_ops"]) or "*",
                                             (entry["verdict"] or "not replayed").upper())
        lines.append(head if len(head) <= width else head[:width - 3] + "...")
        if entry["verdict"] is None:
            lines.extend(textwrap.wrap(entry["reason"], width, initial_indent="    ", subsequent_indent="    "))
            continue
        lines.append("    network {} | local vs CPU f32 {}, vs f64 {} | CPU f32 vs f64 {} | precision explains "
                     "<= {} (x{:g} of {})".format(_fmt(entry["network"]["rel_euclid"]), _rel(entry["local_f32"]),
                                                  _rel(entry["local_f64"]), _rel(entry["cpu_f32_vs_f64"]),
                                                  _fmt(entry["tolerance"]), section["factor"],
                                                  _fmt(entry["expected"])))
    return [printable(line) for line in lines]
