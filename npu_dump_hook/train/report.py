"""The hook's two messages at ``end()``: the run summary (INFO) and the one line a user must see.

``log_summary(hook)`` and ``announce(hook)`` read the hook's public attributes and its
collaborators (``steps``, ``dump``, ``golden``, ``facts``); they log on the ``npu_dump_hook.hook``
logger. ``watch_never_began(hook)`` warns at interpreter exit about a hook that never began.

The line a user must see (where the bundle went; with NPU numerics, how to make the golden run)
is a notice, not a warning: an INFO record marked :data:`~npu_dump_hook._cli_conventions.NOTICE`.
With ``hook.verbose`` (the default) it is also written to stderr, once, when logging would not
show it -- no handler on the way from ``npu_dump_hook.hook`` to the root takes INFO records, as
in a plain script -- unless the logger is set quieter than WARNING (``-q``). It goes through the
package's own stderr handler when there is one (under ``npu-dump-hook run``: ``npu-dump-hook:
bundle ...``), else as the message itself (``npu_dump_hook: bundle ...``). A missing bundle that
was asked for stays a WARNING (INFO without ``verbose``).

After the bundle line, the headline of the checks that need no golden (the NaN/Inf origin: the
first op whose output holds NaN/Inf while its inputs are finite; the overflow report's first
entry), as ``npu-dump-hook compare BUNDLE`` prints it: a notice when NaN/Inf or an overflow was
found, an INFO line otherwise.

The golden-run hint names the ``npu-dump-hook run --golden-for BUNDLE -- python ...`` command
when the runner made the hook (it sets :data:`RERUN_COMMAND` on it: the script's own words),
else the Python API ``NpuDumpHook(backend='reference', initial_state=...)``.
"""
import atexit
import logging
import shlex
import sys
import weakref
from typing import Any, Dict, List, Optional

from .._cli_conventions import NOTICE, LogFormatter
from .._inert import printable
from ..bundle.selection import chosen_counts
from .dump_run import numerics_text
from .guard import HOOK_LOGGER

__all__ = ["log_summary", "announce", "golden_run_hint", "watch_never_began", "RERUN_COMMAND", "HEADLINE_MAX_BYTES"]

logger = logging.getLogger(HOOK_LOGGER)

#: The hook attribute the runner sets: the script's words after ``python`` (``["train.py",
#: ARGS...]`` or ``["-m", MODULE, ARGS...]``), for the golden-run hint.
RERUN_COMMAND = "_npu_dump_hook_rerun_command"
#: The largest tensor bundle (bytes) whose dump the run summary reads for its NaN/Inf headline
#: (statistics and overflow bundles are always read: they are small).
HEADLINE_MAX_BYTES = 512 << 20


def log_summary(hook: Any) -> None:
    """One INFO line: steps, global step, time, backend, rank, randomness, initial state, run.json."""
    ended, started, report = hook.record.ended, hook.started, hook.facts.randomness
    logger.info(
        "NpuDumpHook: ran %d step(s) (global step %s -> %s) in %.1f s; backend %s; rank %s, device %s; "
        "randomness %s: %d source(s), %d not handled; initial state %s; summary %s",
        hook.steps.steps_run, hook.summary["global_step"]["before"], hook.summary["global_step"]["after"],
        ended - (started or ended), hook.backend_name, hook.record.rank, hook.record.device_id, hook.randomness,
        len(report.get("sources", ())), len(report.get("not_handled", ())),
        hook.dump.initial_state_path or "not saved", hook.layout.run_json,
    )


def announce(hook: Any) -> None:
    """The one line a user must see: where the bundle went (a notice, see the module doc)."""
    bundle = hook.bundle
    if bundle is None:
        if hook.collect:  # a real warning: a bundle was asked for
            reason = hook.failures[-1]["error"] if hook.failures else "nothing to collect (see the log)"
            logger.log(logging.WARNING if hook.verbose else logging.INFO, "npu_dump_hook: no bundle for run %s: %s",
                       printable(hook.run_dir), printable(reason))
        return
    warnings = "".join("\n  warning: " + printable(w) for w in bundle.warnings[:5])
    what = "inference iteration(s)" if hook.steps.mode.chosen == "infer" else "training step(s)"
    if hook.golden_only:
        _notice(hook, "npu_dump_hook: golden bundle %s: %d %s, golden step %d, %s, %d warning(s)%s",
                printable(bundle.location), hook.steps.steps_run, what, hook.captured_step,
                printable(hook.golden.describe()), len(bundle.warnings), warnings)
        return
    coverage = bundle.coverage or {}
    _notice(hook, "npu_dump_hook: bundle %s: %d %s, dump step(s) %s, coverage %s, "
            "%d warning(s)%s", printable(bundle.location), hook.steps.steps_run, what,
            ", ".join(bundle.steps) or "none", _coverage_text(coverage), len(bundle.warnings), warnings)
    _checks_headline(hook, bundle)
    if hook.dump.computes_npu_numerics():
        _notice(hook, "npu_dump_hook: the emulated run computed with NPU numerics (%s): its results "
                "differ from a fp32 run and it has no golden tensors; make them in a second run: %s",
                numerics_text(hook.backend), printable(golden_run_hint(hook, bundle.location)))


def _coverage_text(coverage: Dict[str, Any]) -> str:
    """``2/120 ops``, or a dump_layer dump's ``2/2 chosen op(s) (dump_layer), 118 not selected``."""
    counts = chosen_counts(coverage)
    if counts is None:
        return "{}/{} ops".format(coverage.get("dumped", "?"), coverage.get("expected", "?"))
    return "{}/{} chosen op(s) (dump_layer), {} not selected".format(*counts)


def _checks_headline(hook: Any, bundle: Any) -> None:
    """The checks that need no golden on the bundle just written (NaN/Inf origin, overflow report;
    :func:`npu_dump_hook.compare.golden_free_checks`): a notice when they found something, else an
    INFO line. A tensor dump above :data:`HEADLINE_MAX_BYTES` is not read (the run summary names the
    command instead); a failing check never fails the run."""
    options = hook.options
    listing, bundle.listing = bundle.listing, None  # for this reader only: the hook keeps its result, not it
    if not options.enable_dump_debug and options.dump_data != "stats" and bundle.bytes > HEADLINE_MAX_BYTES:
        logger.info("npu_dump_hook: NaN/Inf origin not checked (the dump is above %d MiB): npu-dump-hook compare %s",
                    HEADLINE_MAX_BYTES >> 20, printable(bundle.location))
        return
    # Imported here: the compare package (its metrics, HTML, replay, statistics...) loads only in a
    # process whose bundle gets these checks, never in a golden run's (issue 21 point 5: its cost).
    from ..compare import golden_free_checks

    try:
        found = golden_free_checks(bundle.location, listing if bundle.path else None)  # just written here
    except Exception as exc:  # noqa: BLE001 - the headline never fails the training script
        logger.info("npu_dump_hook: the NaN/Inf and overflow checks could not run: %s", printable(exc))
        return
    checks = found["checks"]
    nan_inf, overflow = checks.get("nan_inf") or {}, checks.get("overflow") or {}
    alarming = nan_inf.get("ops_nonfinite") or overflow.get("entries")
    for line in found["headline"]:
        if alarming:
            _notice(hook, "npu_dump_hook: %s (npu-dump-hook compare %s)", line, printable(bundle.location))
        else:
            logger.info("npu_dump_hook: %s", line)


def golden_run_hint(hook: Any, location: str) -> str:
    """How to make the golden run of the bundle at ``location``: the ``npu-dump-hook run
    --golden-for`` command of the script when the runner made ``hook`` (:data:`RERUN_COMMAND`),
    else the Python API."""
    command = getattr(hook, RERUN_COMMAND, None)
    if command is None:
        return "NpuDumpHook(backend='reference', initial_state={!r})".format(location)
    words = ["npu-dump-hook", "run", "--golden-for", location, "--", "python"] + list(command)
    return " ".join(shlex.quote(word) for word in words)


def _notice(hook: Any, message: str, *args: Any) -> None:
    """Log ``message`` at INFO as a :data:`NOTICE`; with ``hook.verbose`` also write it to stderr
    once when logging would not show it, unless the logger is set quieter than WARNING."""
    logger.info(message, *args, extra={NOTICE: True})
    if not hook.verbose or _logging_shows(logging.INFO) or logger.getEffectiveLevel() > logging.WARNING:
        return
    record = logging.makeLogRecord({"name": logger.name, "levelno": logging.INFO, "levelname": "INFO",
                                    "msg": message, "args": args, NOTICE: True})
    ours = [h for h in _handlers() if isinstance(h.formatter, LogFormatter)]
    if ours:  # the runner's (or the command line's) stderr handler: npu-dump-hook: bundle ...
        ours[0].handle(record)
    else:
        print(record.getMessage(), file=sys.stderr)


def _logging_shows(level: int) -> bool:
    """Whether a record of ``level`` on :data:`logger` reaches a handler that emits it
    (Python's last-resort handler, which takes WARNING and above, does not count)."""
    return logger.isEnabledFor(level) and any(level >= handler.level for handler in _handlers())


def _handlers() -> List[logging.Handler]:
    """The handlers a record of :data:`logger` passes, in order (its own, then its parents' while it propagates)."""
    found = []  # type: List[logging.Handler]
    current = logger  # type: Optional[logging.Logger]
    while current is not None:
        found.extend(current.handlers)
        current = current.parent if current.propagate else None
    return found


def watch_never_began(hook: Any) -> None:
    """At interpreter exit, warn when ``hook`` was created but never handed to a session (it did
    nothing), unless ``hook.warn_if_never_began`` is False (the runner says it itself)."""
    atexit.register(_warn_if_never_began, weakref.ref(hook))


def _warn_if_never_began(ref: "weakref.ref") -> None:
    hook = ref()
    if hook is not None and hook.started is None and hook.warn_if_never_began:
        logger.warning("npu_dump_hook: an NpuDumpHook was created but never began (was it passed to "
                       "estimator.train(hooks=...) or MonitoredSession(hooks=...)?): nothing was dumped "
                       "(run folder %s)", hook.run_dir)
