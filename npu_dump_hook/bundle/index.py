"""Multi-rank roots: ``{root}/rank_{N}[/{run}]/`` bundles listed in ``{root}/index.json`` under a lock.

The lock is an advisory ``flock`` on the root folder itself where the platform has one, so no
lock file is left behind; elsewhere a ``{root}/index.json.lock`` file lock.
"""
import contextlib
import datetime
import json
import os
import time
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple


try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from .._atomic import atomic_write_bytes
from .._files import open_regular
from ..constants import ENV_DEVICE_ID, ENV_RANK_ID
from ..errors import BundleError
from ._spec import INDEX_JSON, INDEX_SCHEMA, load_bundle_json
from .write import BundleResult, write_bundle

__all__ = ["rank_from_env", "write_rank_bundle", "update_index", "read_index"]


def rank_from_env(environ: Optional[Mapping[str, str]] = None) -> Tuple[int, Optional[str]]:
    """(rank, device id) from RANK_ID / DEVICE_ID as HCCL jobs set them (rank 0 by default)."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_RANK_ID, "0").strip() or "0"
    if not text.isdigit():
        raise BundleError("{}={!r} is not a non-negative integer".format(ENV_RANK_ID, text))
    return int(text), env.get(ENV_DEVICE_ID)


def write_rank_bundle(root: str, rank: Optional[int], located: Any, device_id: Any = None,
                      run_name: Optional[str] = None, **kwargs: Any) -> BundleResult:
    """Write ``{root}/rank_{rank}/`` (rank from RANK_ID when None) and record it in the index.

    With ``run_name`` the bundle is ``{root}/rank_{rank}/{run_name}/``, so runs of a script
    repeated on one root never collide (the hook passes its run folder's name); the index
    points at the latest one.

    The index's ``device_id`` (a string) is ``device_id`` when given (the hook passes its
    record's), else DEVICE_ID when the rank comes from the environment, else the device of
    the located dump chain when all its step folders agree, else null.
    """
    if rank is None:
        rank, env_device = rank_from_env()
        if device_id is None:
            device_id = env_device
    if device_id is None:
        devices = {getattr(s, "device_id", None) for s in getattr(located, "steps", None) or []}
        device_id = devices.pop() if len(devices) == 1 else None
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:
        raise BundleError("cannot create the multi-rank bundle root {}: {}".format(root, exc.strerror or exc),
                          root) from exc
    dest = os.path.join(root, "rank_{}".format(int(rank)))
    result = write_bundle(os.path.join(dest, run_name) if run_name else dest, located, **kwargs)
    update_index(root, int(rank), result, device_id=None if device_id is None else str(device_id))
    return result


def update_index(root: str, rank: int, result: BundleResult, device_id: Optional[str] = None,
                 timeout: float = 60.0) -> Dict[str, Any]:
    """Add or replace ``rank`` in ``{root}/index.json``, under the root's lock."""
    index_path = os.path.join(root, INDEX_JSON)
    entry = {
        "path": os.path.relpath(result.location, root).replace(os.sep, "/"),
        "archive": os.path.relpath(result.archive, root).replace(os.sep, "/") if result.archive else None,
        "device_id": device_id,
        "backend": result.backend,
        "files": result.files,
        "bytes": result.bytes,
        "steps": result.steps,
        "updated": datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds"),
    }
    try:
        with _root_lock(root, timeout):
            index = read_index(root) if os.path.isfile(index_path) else {"schema": INDEX_SCHEMA, "ranks": {}}
            index["ranks"][str(rank)] = entry
            index["ranks"] = {k: index["ranks"][k] for k in sorted(index["ranks"], key=int)}
            atomic_write_bytes(index_path, json.dumps(index, indent=1).encode("utf-8") + b"\n")
    except OSError as exc:  # the lock file or the index could not be written: the old index stays
        raise BundleError("cannot update the multi-rank index {}: {}".format(
            index_path, exc.strerror or exc), index_path) from exc
    return index


def read_index(root: str) -> Dict[str, Any]:
    """The parsed ``{root}/index.json``."""
    path = os.path.join(root, INDEX_JSON)
    with open_regular(path, follow_links=True) as fh:  # a FIFO named index.json never blocks
        index = load_bundle_json(fh.read(), path)
    if index.get("schema") != INDEX_SCHEMA or not isinstance(index.get("ranks"), dict):
        raise BundleError("{} is not a {} document".format(path, INDEX_SCHEMA), path)
    return index


@contextlib.contextmanager
def _root_lock(root: str, timeout: float) -> Iterator[None]:
    """Exclusive lock of ``root`` between processes: ``flock`` on the folder (nothing is left
    behind), or a ``index.json.lock`` file lock where flock does not exist."""
    if fcntl is None:  # pragma: no cover - not POSIX
        # imported here: POSIX never needs it, and a dumped step's bundle would pay its import
        from filelock import FileLock

        with FileLock(os.path.join(root, INDEX_JSON + ".lock"), timeout=timeout):
            yield
        return
    fd = os.open(root, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BundleError("timed out after {:.0f} s waiting for the lock of {}".format(timeout, root), root)
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
