"""Collection at the end of a hooked run: settle, locate, bundle, log one paragraph.

Kept out of hook.py so the hook only decides *when*; this module knows *how*.
"""
import logging
import os
from typing import Any, Dict, List, Optional

from .errors import LocateError

__all__ = ["collect_hook_run", "SETTLE_QUIET_SECONDS", "SETTLE_TIMEOUT_SECONDS"]

logger = logging.getLogger(__name__)

SETTLE_QUIET_SECONDS = 2.0   # GE writes asynchronously: no file may grow for this long
SETTLE_TIMEOUT_SECONDS = 300.0


def _graph_dirs(hook: Any) -> Optional[List[str]]:
    emulator = hook.backend
    if emulator is not None and emulator.graph_file:
        return [os.path.dirname(emulator.graph_file)]
    from .locate import graph_search_dirs

    return graph_search_dirs(pid=os.getpid(), device_id=str(hook.summary["device_id"]))


def _run_section(summary: Dict[str, Any]) -> Dict[str, Any]:
    keys = ("steps", "global_step", "started", "ended", "rank", "device_id", "max_steps", "captured_step",
            "graph_dump_env", "tf_version", "emulator", "reference")
    return {key: summary.get(key) for key in keys}


def collect_hook_run(hook: Any) -> Any:
    """Locate this run's Build graph and dump folder and write its bundle; returns a BundleResult."""
    from .bundle import write_bundle, write_rank_bundle
    from .locate import locate_run, wait_for_settle

    options = hook.options
    if not options.enabled:
        logger.info("NpuDumpHook: dump disabled (enable_dump and enable_dump_debug off): nothing to collect")
        return None
    if hook.backend is None:  # real GE: the dump may still be landing
        wait_for_settle([options.dump_path], quiet_seconds=SETTLE_QUIET_SECONDS, timeout=SETTLE_TIMEOUT_SECONDS)
    device_id = str(hook.summary["device_id"])
    try:
        located = locate_run(options.dump_path, graph_dirs=_graph_dirs(hook), since=hook.started,
                             device_id=device_id, graph_keyword=hook.graph_keyword, tf_op_names=hook._tf_op_names)
    except LocateError:
        if options.enable_dump_debug:
            # GE creates no dump folder when nothing overflowed: a clean result, not a failure.
            logger.info("NpuDumpHook: overflow check found no overflowing op (no dump folder): no bundle")
            return None
        raise
    summary = hook.summary
    init_dir = os.path.dirname(summary["initial_state"]) if summary.get("initial_state") else None
    kwargs = dict(
        backend=hook.backend_name, options=options.as_dict(), run=_run_section(summary),
        randomness=summary["randomness"], tf_graph=os.path.join(hook.run_dir, "tf", "graph.pbtxt"),
        golden_dir=hook.golden_dir if hook.golden_dir and os.path.isdir(hook.golden_dir) else None,
        init_dir=init_dir, **hook._bundle_args
    )
    rank = summary.get("rank")
    if rank is not None:
        result = write_rank_bundle(hook.bundle_dir, rank, located, **kwargs)
    else:
        result = write_bundle(os.path.join(hook.bundle_dir, os.path.basename(hook.run_dir)), located, **kwargs)
    coverage = result.coverage or {}
    logger.info(
        "NpuDumpHook: bundle %s: %d file(s), %d bytes, dump step(s) %s, coverage %s/%s op(s), backend %s%s",
        result.location, result.files, result.bytes, ", ".join(result.steps) or "none",
        coverage.get("dumped", "?"), coverage.get("expected", "?"), result.backend,
        "; {} warning(s)".format(len(result.warnings)) if result.warnings else "",
    )
    return result
