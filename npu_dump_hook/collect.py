"""Collection: from a finished run to a verified bundle.

Two entry points, one pipeline (settle -> locate -> bundle)::

    collect_run(record, bundle_dir, link=..., checksum=..., archive=...)   # the hook's end()
    collect_post_hoc(dump_path, graph_dir, out, since=..., ...)            # `npu-dump-hook collect`

``collect_run`` takes the :class:`~npu_dump_hook.run_record.RunRecord` the hook froze at
``end()``, never the hook. With ``RANK_ID`` set a run lands in ``{bundle_dir}/rank_{N}`` of a
shared, locked ``index.json``; otherwise in ``{bundle_dir}/{run folder name}``.
:func:`wait_for_settle` waits until GE stops writing (real NPU only). What this module logs
names paths and steps as printable text (:func:`npu_dump_hook._inert.printable`): they come from
dump trees, and the log may be a terminal.
"""
import logging
import os
import time
from typing import Any, Iterable, List, Optional, Tuple, Union

from . import environment
from ._inert import printable
from .backends import npu_output_missing
from .bundle import BundleResult, write_bundle, write_rank_bundle
from .emulator.ge_model import is_emulated_graph
from ._golden_marker import golden_incomplete
from .errors import BundleError, LocateError, NpuDumpError
from .locate import LocatedRun, locate_run
from .run_record import RunRecord, run_section

__all__ = ["collect_run", "collect_post_hoc", "post_hoc_run_section", "wait_for_settle",
           "SETTLE_QUIET_SECONDS", "SETTLE_TIMEOUT_SECONDS"]

logger = logging.getLogger(__name__)

SETTLE_QUIET_SECONDS = 2.0   # GE writes asynchronously: no file may grow for this long
SETTLE_TIMEOUT_SECONDS = 300.0
PathLike = Union[str, "os.PathLike[str]"]


def collect_run(record: RunRecord, bundle_dir: str, *, link: str = "auto", checksum: str = "sha256",
                archive: Optional[str] = None, force: bool = False) -> Optional[BundleResult]:
    """Locate the record's Build graph and dump folder and write its bundle.

    None when there is nothing to collect: dumping was off, or an overflow check found no
    overflowing op (GE then creates no dump folder: a clean result, not a failure). A golden
    run (``record.golden_only``) has no graph or dump to locate: its bundle holds the golden
    tensors, the TF graph, the fingerprints and ``golden_for``.
    """
    if record.golden_only:
        return _collect_golden(record, bundle_dir, link=link, checksum=checksum, archive=archive, force=force)
    options = record.options
    if not options.enabled:
        logger.info("NpuDumpHook: dump disabled (enable_dump and enable_dump_debug off): nothing to collect")
        return None
    if record.settle:
        wait_for_settle([options.dump_path], quiet_seconds=SETTLE_QUIET_SECONDS, timeout=SETTLE_TIMEOUT_SECONDS)
    try:
        located = locate_run(options.dump_path, graph_dirs=list(record.graph_dirs) if record.graph_dirs else None,
                             since=record.started, device_id=str(record.device_id),
                             graph_keyword=record.graph_keyword, tf_op_names=list(record.tf_op_names))
    except LocateError as exc:
        if options.enable_dump_debug:
            logger.info("NpuDumpHook: overflow check found no overflowing op (no dump folder): no bundle")
            return None
        if record.backend == "npu" and exc.what == "graph" and type(exc) is LocateError:
            raise npu_output_missing(exc, options.dump_path) from exc
        raise
    for source in (record.randomness or {}).get("not_handled", []):
        located.warnings.append("randomness not removed: {} ({}): {}; fix it in the script (set its seed, or "
                                "build it outside a graph function) or expect runs to differ".format(
                                    source["op"], source["type"], source["action"]))
    return _write(record, bundle_dir, located, init_dir=record.init_dir, link=link, checksum=checksum,
                  archive=archive, force=force, control_flow=getattr(record, "control_flow", None))


def _collect_golden(record: RunRecord, bundle_dir: str, **kwargs: Any) -> BundleResult:
    if record.golden_dir is None:
        raise NpuDumpError("golden run {}: no golden tensors were captured (see run.json failures), so there is "
                           "no golden bundle to write".format(record.layout.root))
    return _write(record, bundle_dir, None, init_dir=None, **kwargs)


def _write(record: RunRecord, bundle_dir: str, located: Optional[LocatedRun], **kwargs: Any) -> BundleResult:
    """Write the record's bundle (``{bundle_dir}/{run}``, or under ``rank_{N}`` with an index)."""
    why = golden_incomplete(record.golden_dir) if record.golden_dir else None
    if why is not None:
        raise BundleError("run {}: {}; no bundle written".format(record.layout.root, why), record.golden_dir)
    kwargs.update(backend=record.backend, options=record.options.as_dict(), run=record.run_section(),
                  randomness=record.randomness, tf_graph=record.layout.tf_graph, golden_dir=record.golden_dir,
                  fingerprints=record.fingerprints, golden_for=record.golden_for, warnings=list(record.warnings),
                  inputs_dir=record.inputs_dir, inputs=record.inputs)
    if record.rank is not None:
        result = write_rank_bundle(bundle_dir, record.rank, located, device_id=record.device_id,
                                   run_name=record.layout.name, **kwargs)
    else:
        result = write_bundle(os.path.join(bundle_dir, record.layout.name), located, **kwargs)
    _log_result(result)
    return result


def collect_post_hoc(dump_path: PathLike, graph_dir: PathLike, out: str, *, since: Optional[float] = None,
                     device_id: Optional[str] = None, graph_keyword: Optional[str] = None, link: str = "auto",
                     checksum: str = "sha256", archive: Optional[str] = None, force: bool = False) -> BundleResult:
    """Bundle a run made without the hook: its graph under ``graph_dir``, its dump under ``dump_path``."""
    located = locate_run(dump_path, graph_dirs=[graph_dir], since=since, device_id=device_id,
                         graph_keyword=graph_keyword)
    backend = "emulated" if is_emulated_graph(located.graph_file) else "npu"
    run = post_hoc_run_section(located)
    run["environment"] = _post_hoc_environment()
    return write_bundle(out, located, backend=backend, options={}, run=run,
                        randomness=None, link=link, checksum=checksum, archive=archive, force=force)


def post_hoc_run_section(located: LocatedRun) -> dict:
    """What a post-hoc collection knows about the run: the dumped steps and devices."""
    steps = sorted({s.step for s in located.steps}, key=lambda s: (len(s), s))
    devices = sorted({s.device_id for s in located.steps})
    return run_section(steps=len(steps), global_step=int(steps[-1]) if steps else None,
                       device_id=devices[0] if len(devices) == 1 else devices)


def _post_hoc_environment() -> Optional[dict]:
    """``run.environment`` of a post-hoc bundle (:func:`environment.capture_post_hoc`); None, with
    a warning, when it cannot be read: the bundle is still written."""
    try:
        return environment.capture_post_hoc()
    except Exception as exc:  # an odd installation must not cost the user the bundle
        logger.warning("npu-dump-hook collect: the environment was not recorded: %s", printable(exc))
        return None


def _log_result(result: BundleResult) -> None:
    coverage = result.coverage or {}
    logger.info(  # names from the dump tree, escaped: this line reaches the training script's terminal
        "NpuDumpHook: bundle %s: %d file(s), %d bytes, dump step(s) %s, coverage %s/%s op(s), backend %s%s",
        printable(result.location), result.files, result.bytes, printable(", ".join(result.steps)) or "none",
        coverage.get("dumped", "?"), coverage.get("expected", "?"), result.backend,
        "; {} warning(s)".format(len(result.warnings)) if result.warnings else "",
    )


# --------------------------------------------------------------------------- settling


def wait_for_settle(paths: Union[PathLike, Iterable[PathLike]], quiet_seconds: float = 1.0,
                    timeout: float = 60.0, poll: float = 0.2) -> bool:
    """Wait until no file under ``paths`` appears, grows or changes for ``quiet_seconds``.

    GE writes dump files asynchronously after the step returns. Each poll walks the trees
    (no symlinks followed) and folds (path, size, mtime) of every file into a constant-size
    signature, so memory does not grow with the tree. Returns False, with a warning, when
    ``timeout`` passes first.
    """
    roots = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
    start = time.monotonic()
    last = _signature(roots)
    quiet_since = time.monotonic()
    while True:
        now = time.monotonic()
        if now - quiet_since >= quiet_seconds:
            return True
        if now - start >= timeout:
            logger.warning("dump still changing after %.1f s under %s; collecting anyway", timeout,
                           printable(", ".join(roots)))
            return False
        time.sleep(max(0.0, min(poll, timeout - (now - start))))
        current = _signature(roots)
        if current != last:
            last, quiet_since = current, time.monotonic()


def _signature(roots: List[str]) -> Tuple[int, int, int, int]:
    """(file count, total size, newest mtime_ns, order-free hash of (path, size, mtime_ns))."""
    count = total = newest = mix = 0
    stack = list(roots)
    while stack:
        for entry in _scandir(stack.pop()):
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:  # vanished meanwhile
                continue
            count += 1
            total += st.st_size
            newest = max(newest, st.st_mtime_ns)
            mix = (mix + hash((entry.path, st.st_size, st.st_mtime_ns))) & 0xFFFFFFFFFFFFFFFF
    return count, total, newest, mix


def _scandir(folder: str) -> List["os.DirEntry[str]"]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []
