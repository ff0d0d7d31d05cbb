"""``npu-dump-hook run --two-phase``: the guide's large-model path on one machine, automated.

A full tensor dump of a large model is too big and too slow; the guide says: dump operator
statistics first, find the ops that look wrong, then dump only those. The passes, each the
public command a two-machine user types (README, "Large models"), each training script run in
a process of its own::

    0. --overflow-first only:  run --dump-debug -- SCRIPT        overflow check (Opdebug files)
                               compare OVERFLOW_BUNDLE            its report (no golden needed)
    1. run --dump-data stats -- SCRIPT                            statistics of every op
    2. run --golden-for STATS_BUNDLE -- SCRIPT                    golden statistics (CPU/GPU)
    3. compare STATS GOLDEN --suspects-out suspects.json          the suspects (with the overflow ops)
    4. run --dump-layer-from suspects.json -- SCRIPT              tensors of the suspects only
    5. run --golden-for TARGETED_BUNDLE -- SCRIPT                 their golden tensors
    6. compare TARGETED GOLDEN                                    the verdict

The runs take every other option of the ``run`` command line (backend, profile, faults,
output folder, ...) from the environment they are started with, and the two-phase command's
``-q``/``-v``/``--debug`` as flags (the comparisons run in this process, at its log level); a
golden run drops the ones that shape the NPU run. Everything lands in ``out``: ``suspects.json``, each comparison's JSON
and HTML, and ``two_phase.json`` linking every bundle, the byte counts, the times and the
verdict. The exit status is the last comparison's (0 pass, 1 a root cause); when the statistics
find nothing suspect there is no second run and the status is the statistics compare's.
"""
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._atomic import atomic_write_bytes
from .constants import ENV_OPTIONS
from .errors import TwoPhaseError
from .suspects import SUSPECTS_SCHEMA, write_suspects

__all__ = ["run_two_phase", "TWO_PHASE_SCHEMA", "GOLDEN_DROPS", "tree_bytes", "merge_suspects"]

TWO_PHASE_SCHEMA = "npu_dump_hook/two_phase@1"
#: Variables a golden run does not inherit: they shape the NPU run (dump, emulated numerics).
GOLDEN_DROPS = tuple(ENV_OPTIONS.values()) + (
    "NPU_DUMP_HOOK_BACKEND", "NPU_DUMP_HOOK_EMULATE_PROFILE", "NPU_DUMP_HOOK_EMULATE_PRECISION",
    "NPU_DUMP_HOOK_FAULTS", "NPU_DUMP_HOOK_DUMP_LAYER_FROM", "NPU_DUMP_HOOK_INITIAL_STATE")
#: Variables an NPU pass sets itself (its flags): inherited values would contradict them.
_NPU_DROPS = ("NPU_DUMP_ENABLE", "NPU_DUMP_DATA", "NPU_DUMP_LAYER", "NPU_DUMP_DEBUG_ENABLE",
              "NPU_DUMP_DEBUG_MODE", "NPU_DUMP_HOOK_DUMP_LAYER_FROM", "NPU_DUMP_HOOK_INITIAL_STATE")

Say = Callable[[str], None]


def tree_bytes(path: Optional[str]) -> int:
    """Bytes of the regular files under ``path`` (0 for None or a missing path)."""
    total = 0
    for folder, _dirs, files in os.walk(path or ""):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def _dump_bytes(bundle: str) -> int:
    return tree_bytes(os.path.join(bundle, "data", "dump"))


def _golden_bytes(bundle: str) -> int:
    return tree_bytes(os.path.join(bundle, "data", "golden"))


def merge_suspects(first: Optional[Dict[str, Any]], second: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """One suspects document of two (``first``'s ops rank first, an op named twice keeps both reasons)."""
    if first is None or second is None:
        return first if second is None else second
    ops = {}  # type: Dict[str, Dict[str, Any]]
    for op in list(first["ops"]) + list(second["ops"]):
        if op["name"] in ops:
            ops[op["name"]]["reasons"].extend(r for r in op["reasons"] if r not in ops[op["name"]]["reasons"])
        else:
            ops[op["name"]] = dict(op, reasons=list(op["reasons"]), rank=len(ops) + 1)
    merged = dict(second)
    merged.update(schema=SUSPECTS_SCHEMA, ops=list(ops.values()), dump_layer=" ".join(ops),
                  sources=[first.get("source"), second.get("source")])
    return merged


class _Passes(object):
    """The runs of one two-phase flow: each ``npu-dump-hook run`` in a child process."""

    def __init__(self, target: Sequence[str], env: Dict[str, str], say: Say, verbosity: Sequence[str] = ()) -> None:
        self.target = list(target)
        self.verbosity = list(verbosity)  # -q/-v/--debug of the two-phase command, for every pass
        self.env = env
        self.say = say
        self.phases = []  # type: List[Dict[str, Any]]

    def _child_env(self, drops: Sequence[str]) -> Dict[str, str]:
        env = {k: v for k, v in self.env.items() if k not in drops}
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
        return env

    def run(self, phase: str, flags: Sequence[str], golden: bool = False, may_be_empty: bool = False) -> Optional[str]:
        """Run one pass; its bundle path (None: none written, allowed with ``may_be_empty``)."""
        words = ["run"] + self.verbosity + list(flags) + ["--"] + self.target
        command = [sys.executable, "-m", "npu_dump_hook"] + words
        self.say("[{}] $ {}".format(phase, " ".join(_quoted(w) for w in ["npu-dump-hook"] + words)))
        started = time.monotonic()
        child = subprocess.Popen(command, env=self._child_env(GOLDEN_DROPS if golden else _NPU_DROPS),
                                 stdout=subprocess.PIPE, universal_newlines=True)
        last = None  # type: Optional[str]
        assert child.stdout is not None
        for line in child.stdout:
            text = line.rstrip("\n")
            self.say("  | " + text)
            last = text if text.strip() else last
        code = child.wait()
        seconds = time.monotonic() - started
        bundle = last if last is not None and os.path.isabs(last) and os.path.exists(last) else None  # dir or archive
        if code != 0 or bundle is None:
            if may_be_empty and bundle is None and code in (0, 4):
                self.phases.append({"phase": phase, "bundle": None, "exit": code, "seconds": round(seconds, 3)})
                return None
            raise TwoPhaseError("two-phase: the {} run exited with status {}{} (command: {})".format(
                phase, code, "" if bundle else " and wrote no bundle", " ".join(command[3:])), phase)
        entry = {"phase": phase, "bundle": bundle, "exit": code, "seconds": round(seconds, 3),
                 "dump_bytes": _dump_bytes(bundle), "golden_bytes": _golden_bytes(bundle)}
        self.phases.append(entry)
        return bundle


def _compare(name: str, npu: str, golden: Optional[str], out: str, suspects: Optional[int], say: Say,
             verbosity: Sequence[str] = ()) -> Any:
    """One comparison, in this process: its logs follow this process's level, which the two-phase
    command's -q/-v/--debug set (shown on its command line as the two-machine user types it)."""
    from .compare import compare, render_html

    say("[{}] $ npu-dump-hook compare {}{}{}".format(name, "".join(w + " " for w in verbosity), _quoted(npu),
                                                   " " + _quoted(golden) if golden else ""))
    result = compare(npu, golden, suspects=suspects)
    base = os.path.join(out, name)
    atomic_write_bytes(base + ".json", (json.dumps(result.doc, indent=1, allow_nan=False) + "\n").encode("utf-8"))
    atomic_write_bytes(base + ".html", render_html(result.doc).encode("utf-8"))
    for line in result.summary_text(3).splitlines():
        say("  " + line)
    return result


def _quoted(word: str) -> str:
    import shlex

    return shlex.quote(word)


def run_two_phase(target: Sequence[str], env: Dict[str, str], out: str, suspects: Optional[int] = None,
                  overflow_first: bool = False, say: Say = print, verbosity: Sequence[str] = ()) -> int:
    """Run the passes (module doc) of the training command ``target`` (what follows ``run --``)
    with environment ``env``; write into the new folder ``out``; return the exit status.
    ``suspects``: at most that many primary suspects (None: the compare default); ``verbosity``:
    the -q/-v/--debug flags every pass's ``run`` gets. Raises TwoPhaseError when a run fails."""
    from .compare.suspects import DEFAULT_SUSPECTS

    suspects = DEFAULT_SUSPECTS if suspects is None else suspects
    os.makedirs(out)
    passes = _Passes(target, env, say, verbosity)
    record = {"schema": TWO_PHASE_SCHEMA, "target": list(target), "out": out, "suspects_limit": suspects,
              "overflow_first": overflow_first}  # type: Dict[str, Any]
    found = None  # type: Optional[Dict[str, Any]]
    if overflow_first:
        bundle = passes.run("overflow", ["--dump-debug", "--allow-no-bundle"], may_be_empty=True)
        if bundle is not None:
            found = _compare("overflow_report", bundle, None, out, suspects, say, verbosity).doc.get("suspects")
    stats = passes.run("stats", ["--dump-data", "stats"])
    stats_golden = passes.run("stats_golden", ["--golden-for", stats], golden=True)
    stats_result = _compare("stats_compare", stats, stats_golden, out, suspects, say, verbosity)
    found = merge_suspects(found, stats_result.doc.get("suspects"))
    record.update(phases=passes.phases, stats_verdict=stats_result.doc["summary"]["verdict"],
                  stats_first_divergence=stats_result.first_divergence)
    if found is None:
        say("two-phase: the statistics find nothing suspect (no breach, NaN/Inf or overflow): no second run")
        return _finish(record, out, stats_result.exit_code, None, say)
    suspects_path = os.path.join(out, "suspects.json")
    write_suspects(suspects_path, found)
    record["suspects"] = {"file": suspects_path, "dump_layer": found["dump_layer"]}
    say("two-phase: {} suspect op(s): {}".format(len(found["ops"]), found["dump_layer"]))
    targeted = passes.run("targeted", ["--dump-layer-from", suspects_path])
    targeted_golden = passes.run("targeted_golden", ["--golden-for", targeted], golden=True)
    result = _compare("compare", targeted, targeted_golden, out, None, say, verbosity)
    return _finish(record, out, result.exit_code, result, say)


def _finish(record: Dict[str, Any], out: str, code: int, result: Any, say: Say) -> int:
    if result is not None:
        record.update(verdict=result.doc["summary"]["verdict"], first_divergence=result.first_divergence,
                      coverage=result.doc.get("coverage"))
    else:
        record.update(verdict=record["stats_verdict"], first_divergence=record["stats_first_divergence"])
    record["exit_code"] = code
    atomic_write_bytes(os.path.join(out, "two_phase.json"),
                       (json.dumps(record, indent=1, allow_nan=False) + "\n").encode("utf-8"))
    for line in summary_lines(record):
        say(line)
    return code


def summary_lines(record: Dict[str, Any]) -> List[str]:
    """The closing summary: every bundle, the bytes each dumped, the verdict."""
    lines = ["", "two-phase summary ({}):".format(os.path.join(record["out"], "two_phase.json"))]
    for phase in record["phases"]:
        size = "" if phase.get("bundle") is None else ", dump {} B, golden {} B".format(
            phase["dump_bytes"], phase["golden_bytes"])
        lines.append("  {:<16} {} ({:.1f} s{})".format(phase["phase"], phase.get("bundle") or "no bundle",
                                                       phase["seconds"], size))
    if record.get("suspects"):
        lines.append("  suspects         {} ({})".format(record["suspects"]["file"], record["suspects"]["dump_layer"]))
    first = record.get("first_divergence")
    lines.append("verdict: {}; first divergence: {}".format(
        str(record["verdict"]).upper(), "none" if not first else "{} ({}), original op(s) {}".format(
            first["npu_op"], first.get("op_type"), ", ".join(first.get("original_ops") or []) or "*")))
    return lines
