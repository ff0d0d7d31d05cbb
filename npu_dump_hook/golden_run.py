"""The golden run's view of the NPU bundle it is made for (``NpuDumpHook(initial_state=...)``).

::

    target = NpuBundleTarget.open(path, need_checkpoint=True)   # hook __init__: fails before training
    target.captured_step, target.fingerprints, target.identity()  # what to capture, compare, name
    target.checkpoint_prefix(scratch)                              # data/init/ checkpoint to restore
    check_variables(target.checkpoint_variables(...), graph_variables)  # names and shapes must agree

``path`` is a bundle folder or a ``.tar``/``.tar.gz`` archive of one (only ``data/bundle.json``
and ``data/init/`` are extracted, into the golden run's folder, member checks as for every
archive the package reads). The bundle must be an NPU or emulated NPU bundle (``backend``
``"npu"`` or ``"emulated"``); its ``data/init/`` files are checked against the sha256 in its
bundle.json before they are restored.

``identity()`` is what a golden bundle's ``golden_for`` records: the sha256 of the NPU bundle's
``data/bundle.json`` bytes (its own description, which holds every payload digest), its path,
``created`` and ``backend``.
"""
import hashlib
import logging
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _tf
from .bundle._archive import archive_format, iter_members, looks_like_tar
from .bundle._fs import sha256_file
from .bundle._spec import BUNDLE_JSON, BUNDLE_JSON_PATH, DATA_DIR, load_bundle_json
from .errors import BundleError, OptionError

__all__ = ["NpuBundleTarget", "check_variables", "TARGET_BACKENDS"]

logger = logging.getLogger(__name__)

#: Bundles a golden run can be made for: who wrote an NPU dump.
TARGET_BACKENDS = ("npu", "emulated")
_INIT = "init/"
_OPTION = "initial_state"


class NpuBundleTarget(object):
    """The NPU bundle a golden run reproduces: its description, step and checkpoint."""

    def __init__(self, path: str, doc: Dict[str, Any], digest: str, archive: bool) -> None:
        self.path = path
        self.doc = doc
        self.bundle_json_sha256 = digest
        self.archive = archive

    @classmethod
    def open(cls, path: Any, need_checkpoint: bool = True) -> "NpuBundleTarget":
        """Read the bundle at ``path``; OptionError(``initial_state``) when it cannot serve."""
        if not isinstance(path, (str, os.PathLike)):
            raise OptionError(_OPTION, path, "must be the path of an NPU bundle (folder or .tar/.tar.gz archive)")
        path = os.path.abspath(os.fspath(path))
        if os.path.isdir(path):
            raw = _read_file(os.path.join(path, DATA_DIR, BUNDLE_JSON), path)
            archive = False
        elif os.path.isfile(path) and (archive_format(path) or looks_like_tar(path)):
            raw = _archive_bundle_json(path)
            archive = True
        else:
            raise OptionError(_OPTION, path, "is neither a bundle folder nor a bundle archive")
        try:
            doc = load_bundle_json(raw, path)
        except BundleError as exc:
            raise OptionError(_OPTION, path, str(exc))
        target = cls(path, doc, hashlib.sha256(raw).hexdigest(), archive)
        target._check(need_checkpoint)
        return target

    def _check(self, need_checkpoint: bool) -> None:
        backend = self.doc.get("backend")
        if backend not in TARGET_BACKENDS:
            raise OptionError(_OPTION, self.path, "is a {!r} bundle: a golden run is made for an NPU bundle "
                                                  "(backend {})".format(backend, " or ".join(TARGET_BACKENDS)))
        if self.captured_step is None:
            raise OptionError(_OPTION, self.path, "records no captured step (run.captured_step): not a bundle the "
                                                  "hook wrote")
        if need_checkpoint and not self.init_files():
            raise OptionError(_OPTION, self.path, "has no data/init/ checkpoint (the NPU run was made with "
                                                  "save_initial_state=False, or its save failed); pass "
                                                  "restore_initial_state=False to only compare fingerprints")

    # -- what the NPU run recorded ---------------------------------------------------------
    @property
    def captured_step(self) -> Optional[int]:
        step = (self.doc.get("run") or {}).get("captured_step")
        return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None

    @property
    def fingerprints(self) -> Optional[Mapping[str, Any]]:
        value = self.doc.get("fingerprints")
        return value if isinstance(value, dict) else None

    @property
    def randomness(self) -> Mapping[str, Any]:
        value = self.doc.get("randomness")
        return value if isinstance(value, dict) else {}

    def init_files(self) -> List[Dict[str, Any]]:
        return [f for f in self.doc.get("files") or [] if isinstance(f, dict) and f.get("kind") == "init"
                and isinstance(f.get("path"), str) and f["path"].startswith(_INIT)]

    def identity(self) -> Dict[str, Any]:
        """``golden_for`` of the golden bundle (before the comparison result is added)."""
        return {"bundle_json_sha256": self.bundle_json_sha256, "path": self.path,
                "created": self.doc.get("created"), "backend": self.doc.get("backend"),
                "captured_step": self.captured_step}

    # -- the checkpoint -------------------------------------------------------------------
    def checkpoint_prefix(self, scratch_dir: str) -> str:
        """The restore prefix of the bundle's ``data/init/`` checkpoint, its files checked against
        bundle.json; archives are extracted (``data/init/`` only) into ``scratch_dir``."""
        files = self.init_files()
        root = self.path
        if self.archive:
            root = scratch_dir
            _extract_init(self.path, scratch_dir)
        for entry in files:
            local = os.path.join(root, DATA_DIR, *entry["path"].split("/"))
            if not os.path.isfile(local):
                raise OptionError(_OPTION, self.path, "lacks {}/{} that its bundle.json lists".format(
                    DATA_DIR, entry["path"]))
            if isinstance(entry.get("sha256"), str) and sha256_file(local)[1] != entry["sha256"]:
                raise OptionError(_OPTION, self.path, "{}/{} differs from the sha256 in its bundle.json "
                                                      "(a damaged bundle)".format(DATA_DIR, entry["path"]))
        indexes = sorted(e["path"] for e in files if e["path"].endswith(".index"))
        if len(indexes) != 1:
            raise OptionError(_OPTION, self.path, "data/init/ holds {} checkpoint(s) (.index files), not one".format(
                len(indexes)))
        return os.path.join(root, DATA_DIR, *indexes[0][: -len(".index")].split("/"))

    @staticmethod
    def checkpoint_variables(prefix: str) -> Dict[str, List[int]]:
        """``{variable name: shape}`` stored in the checkpoint at ``prefix``."""
        return {name: list(shape) for name, shape in _tf.tf_v1().train.list_variables(prefix)}


def check_variables(stored: Mapping[str, Sequence[int]], graph_variables: Sequence[Any]) -> Dict[str, List[str]]:
    """How the checkpoint's variables and the graph's global variables disagree:
    ``{"missing": in the graph, not the checkpoint, "extra": in the checkpoint only,
    "mismatched": shapes differ}`` (names sorted; all empty when they agree)."""
    graph = {v.op.name: v for v in graph_variables}
    mismatched = []
    for name in sorted(set(graph) & set(stored)):
        shape = graph[name].get_shape()
        if shape.is_fully_defined() and [int(d) for d in shape.as_list()] != list(stored[name]):
            mismatched.append(name)
    return {"missing": sorted(set(graph) - set(stored)), "extra": sorted(set(stored) - set(graph)),
            "mismatched": mismatched}


def _read_file(path: str, bundle: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise OptionError(_OPTION, bundle, "has no readable {}: {}".format(BUNDLE_JSON_PATH, exc.strerror or exc))


def _bag_rel(rel: str) -> Optional[str]:
    """``data/...`` for a member of the bag (top folder or not), else None."""
    parts = rel.split("/")
    for start in (0, 1):
        if parts[start:start + 1] == [DATA_DIR] and len(parts) > start + 1:
            return "/".join(parts[start:])
    return None


def _archive_bundle_json(path: str) -> bytes:
    try:
        for rel, member, tar in iter_members(path):
            if member.isfile() and _bag_rel(rel) == BUNDLE_JSON_PATH:
                handle = tar.extractfile(member)
                if handle is not None:
                    with handle:
                        return handle.read()
    except BundleError as exc:
        raise OptionError(_OPTION, path, str(exc))
    raise OptionError(_OPTION, path, "holds no {}".format(BUNDLE_JSON_PATH))


def _extract_init(path: str, scratch_dir: str) -> None:
    """Copy the archive's ``data/init/`` members into ``scratch_dir/data/init/``."""
    try:
        for rel, member, tar in iter_members(path):
            bag_rel = _bag_rel(rel)
            if not member.isfile() or bag_rel is None or not bag_rel.startswith(DATA_DIR + "/" + _INIT):
                continue
            target = os.path.join(scratch_dir, *bag_rel.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            if source is None:  # pragma: no cover - isfile() members always have a stream
                continue
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    except BundleError as exc:
        raise OptionError(_OPTION, path, str(exc))

