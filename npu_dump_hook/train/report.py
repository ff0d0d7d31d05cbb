"""The hook's two messages at ``end()``: the run summary (INFO) and the one line a user must see.

``log_summary(hook)`` and ``announce(hook)`` read the hook's public attributes and its
collaborators (``steps``, ``dump``, ``golden``); they log on the ``npu_dump_hook.hook`` logger.
"""
import logging
from typing import Any

from .._inert import printable
from .dump_run import numerics_text
from .guard import HOOK_LOGGER

__all__ = ["log_summary", "announce"]

logger = logging.getLogger(HOOK_LOGGER)


def log_summary(hook: Any) -> None:
    """One INFO line: steps, global step, time, backend, rank, randomness, initial state, run.json."""
    ended, started, report = hook.record.ended, hook.started, hook._randomness_report  # noqa: SLF001
    logger.info(
        "NpuDumpHook: ran %d step(s) (global step %s -> %s) in %.1f s; backend %s; rank %s, device %s; "
        "randomness %s: %d source(s), %d not handled; initial state %s; summary %s",
        hook.steps.steps_run, hook.summary["global_step"]["before"], hook.summary["global_step"]["after"],
        ended - (started or ended), hook.backend_name, hook.record.rank, hook.record.device_id, hook.randomness,
        len(report.get("sources", ())), len(report.get("not_handled", ())),
        hook.dump.initial_state_path or "not saved", hook.layout.run_json,
    )


def announce(hook: Any) -> None:
    """The one line a user must see: where the bundle went (WARNING, so a plain script shows it)."""
    level = logging.WARNING if hook.verbose else logging.INFO
    bundle = hook.bundle
    if bundle is None:
        if hook.collect:
            reason = hook.failures[-1]["error"] if hook.failures else "nothing to collect (see the log)"
            logger.log(level, "npu_dump_hook: no bundle for run %s: %s", printable(hook.run_dir), printable(reason))
        return
    warnings = "".join("\n  warning: " + printable(w) for w in bundle.warnings[:5])
    if hook.golden_only:
        logger.log(level, "npu_dump_hook: golden bundle %s: %d training step(s), golden step %d, %s, "
                   "%d warning(s)%s", printable(bundle.location), hook.steps.steps_run, hook.captured_step,
                   printable(hook.golden.describe()), len(bundle.warnings), warnings)
        return
    coverage = bundle.coverage or {}
    logger.log(level, "npu_dump_hook: bundle %s: %d training step(s), dump step(s) %s, coverage %s/%s ops, "
               "%d warning(s)%s", printable(bundle.location), hook.steps.steps_run, ", ".join(bundle.steps) or "none",
               coverage.get("dumped", "?"), coverage.get("expected", "?"), len(bundle.warnings), warnings)
    if hook.dump.computes_npu_numerics():
        logger.log(level, "npu_dump_hook: the emulated run computed with NPU numerics (%s): its training "
                   "results differ from a fp32 run and it has no golden tensors; make them in a second "
                   "run: NpuDumpHook(backend='reference', initial_state=%r)", numerics_text(hook.backend),
                   bundle.location)
