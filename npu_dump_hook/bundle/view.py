"""Opening a bundle to read it: :func:`open_bundle`, the one way in (docs/bundle-format.md
"Reading a bundle").

``path`` is a bundle folder or a ``.tar``/``.tar.gz`` archive of one::

    <path>/  (an archive: its one top folder, or its top)
        bagit.txt  bag-info.txt  manifest-sha256.txt  tagmanifest-sha256.txt
        data/bundle.json                      view.doc, view.bundle_json_sha256, view.identity()
        data/graph/ge_proto_*_Build.txt       view.graph_file()        (bundle.json graph.file)
        data/tf/graph.pbtxt
        data/dump/{time}/{device}/{model}/{id}/{step}/...   view.dump_dir()
        data/golden/*.npy, golden_manifest.json             view.golden_dir(), view.golden_manifest()
        data/init/model.ckpt.index, .data-*                  view.init_files()
        (every listed file)                   view.files(kind), view.path(entry["path"])

    with open_bundle(path) as view:
        view.doc["backend"], view.files("dump"), view.path("graph/x.txt")

Rules (what the view guarantees, in this order):

* **Nothing is written for a folder.** A folder is read in place.
* **An archive is checked before anything is written.** It is extracted with the code
  ``verify`` uses (:func:`~npu_dump_hook.bundle._archive.extract_bag`: every member's name,
  type and the total size checked first) into a temporary folder (under ``workdir`` when
  given) that :meth:`BundleView.close` removes; ``parts`` limits which payload folders are
  written (``data/bundle.json`` always is).
* **bundle.json** is a regular file reached through no symlink, and a JSON object
  (:class:`~npu_dump_hook.errors.BundleError` naming it otherwise).
* **Every path the view hands out is inside the bag**: :meth:`BundleView.path` refuses a
  path that is absolute, holds ``..``, NUL or nothing, or goes through a symlink (``data/``
  itself included) with :class:`~npu_dump_hook.errors.UnsafePathError` (a BundleError)
  naming the bundle, the path and the rule. The graph file, dump, golden and init paths
  are built with it.

Checks that read more than names (sizes, sha256 of what is restored, special files) belong in
:meth:`BundleView._check` (run once when the bundle is opened) and :meth:`BundleView.path`,
so that every consumer gets them at once.
"""
import hashlib
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional

from ..errors import BundleError, UnsafePathError
from ._archive import extract_bag
from ._fs import safe_relpath
from ._spec import (BUNDLE_JSON, BUNDLE_JSON_PATH, DATA_DIR, DUMP_DIR, FILE_KINDS, GOLDEN_DIR, GOLDEN_MANIFEST,
                    INIT_DIR, load_bundle_json)

__all__ = ["BundleView", "open_bundle"]

_TEMP_PREFIX = "npu_dump_hook-open-"


class BundleView(object):
    """A read-only view of an opened bundle (see the module doc); made by :func:`open_bundle`.

    ``location``: the path as given; ``root``: the bag's folder (the extraction for an
    archive); ``archive``: True for an archive; ``doc``: the parsed bundle.json;
    ``bundle_json_sha256``: the sha256 of its bytes (what identifies the bundle)."""

    def __init__(self, location: str, root: str, doc: Dict[str, Any], bundle_json_sha256: str,
                 temp: Optional[str] = None) -> None:
        self.location = location
        self.root = root
        self.doc = doc
        self.bundle_json_sha256 = bundle_json_sha256
        self.archive = temp is not None
        self._temp = temp

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Remove the archive's extraction (nothing for a folder); the view's paths are gone after."""
        temp, self._temp = self._temp, None
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)

    def __enter__(self) -> "BundleView":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _check(self) -> None:
        """Checks of the whole bundle made once, when it is opened (today: none beyond
        bundle.json's own; the reading rules of docs/bundle-format.md grow here)."""

    # -- what bundle.json says ----------------------------------------------------------------
    @property
    def data_dir(self) -> str:
        return os.path.join(self.root, DATA_DIR)

    def identity(self) -> Dict[str, Any]:
        """What names this bundle elsewhere (a golden bundle's ``golden_for``): the sha256 of
        its bundle.json, its path as given, ``created`` and ``backend``."""
        return {"bundle_json_sha256": self.bundle_json_sha256, "path": self.location,
                "created": self.doc.get("created"), "backend": self.doc.get("backend")}

    def files(self, kind: Optional[str] = None) -> List[Dict[str, Any]]:
        """bundle.json's ``files[]`` entries (objects with a string ``path``), of ``kind`` when given
        (one of :data:`~npu_dump_hook.bundle.FILE_KINDS`)."""
        if kind is not None and kind not in FILE_KINDS:
            raise ValueError("file kind {!r} is not one of {}".format(kind, ", ".join(FILE_KINDS)))
        listed = self.doc.get("files")
        return [entry for entry in listed if isinstance(entry, dict) and isinstance(entry.get("path"), str)
                and (kind is None or entry.get("kind") == kind)] if isinstance(listed, list) else []

    # -- paths inside the bag -----------------------------------------------------------------
    def path(self, rel: str) -> str:
        """The local path of payload path ``rel`` (relative to ``data/``, as bundle.json records
        paths); UnsafePathError when it would leave the bag or go through a symlink. The file
        need not exist."""
        try:
            parts = safe_relpath(rel).split("/")
        except UnsafePathError as exc:
            raise self._unsafe(rel, str(exc))
        current = self.data_dir
        for depth, part in enumerate([None] + parts):
            current = current if part is None else os.path.join(current, part)
            if os.path.islink(current):
                raise self._unsafe(rel, "{} is a symlink (no path of a bundle may go through one)".format(
                    "/".join([DATA_DIR] + parts[:depth])))
            if not os.path.lexists(current):
                break
        return os.path.join(self.data_dir, *parts)

    def _unsafe(self, rel: Any, rule: str) -> UnsafePathError:
        return UnsafePathError("bundle {}: data/{}: {}".format(self.location, rel, rule), self.location)

    def graph_file(self) -> Optional[str]:
        """The Build graph bundle.json's ``graph.file`` names, or None when it names none."""
        graph = self.doc.get("graph")
        recorded = graph.get("file") if isinstance(graph, dict) else None
        return self.path(str(recorded)) if recorded else None

    def dump_dir(self) -> Optional[str]:
        """``data/dump`` when the bundle has that folder."""
        return self._folder(DUMP_DIR)

    def golden_dir(self) -> Optional[str]:
        """``data/golden`` when the bundle has that folder (the golden tensors)."""
        return self._folder(GOLDEN_DIR)

    def golden_manifest(self) -> Optional[str]:
        """``data/golden/golden_manifest.json`` when the bundle has it."""
        found = self.path(GOLDEN_DIR + "/" + GOLDEN_MANIFEST)
        return found if os.path.isfile(found) else None

    def init_files(self) -> List[Dict[str, Any]]:
        """``files[]`` entries of the initial-state checkpoint (kind ``init`` under ``init/``), each
        path checked with :meth:`path`."""
        found = [entry for entry in self.files("init") if entry["path"].startswith(INIT_DIR + "/")]
        for entry in found:
            self.path(entry["path"])
        return found

    def _folder(self, rel: str) -> Optional[str]:
        found = self.path(rel)
        return found if os.path.isdir(found) else None


def open_bundle(path: str, parts: Optional[Iterable[str]] = None, workdir: Optional[str] = None) -> BundleView:
    """Open the bundle folder or ``.tar``/``.tar.gz`` archive at ``path`` (rules: module doc).

    ``parts``: for an archive, the payload folders to extract (e.g. ``("init",)``; None: all;
    ``()``: bundle.json only); ``workdir``: where the archive's temporary folder is made
    (default: the system's). BundleError naming ``path`` when it is not a readable bundle;
    UnsafePathError for a hostile archive member or bundle.json path."""
    if os.path.isdir(path):
        view = _view(path, path, None)
    elif os.path.isfile(path):
        view = _open_archive(path, parts, workdir)
    else:
        raise BundleError("{} does not exist".format(path), path)
    try:
        view._check()
    except BaseException:
        view.close()
        raise
    return view


def _open_archive(path: str, parts: Optional[Iterable[str]], workdir: Optional[str]) -> BundleView:
    temp = tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=workdir)
    try:
        root = extract_bag(path, temp, _keep(parts))
        return _view(path, root, temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _keep(parts: Optional[Iterable[str]]) -> Optional[Callable[[str], bool]]:
    """Which bag-relative member names to extract: bundle.json and the ``parts`` folders."""
    if parts is None:
        return None
    prefixes = tuple("{}/{}/".format(DATA_DIR, part.strip("/")) for part in parts)
    return lambda name: name == BUNDLE_JSON_PATH or name.startswith(prefixes)


def _view(location: str, root: str, temp: Optional[str]) -> BundleView:
    """The view of the bag at ``root``, once its bundle.json is read."""
    view = BundleView(location, root, {}, "", temp)
    target = view.path(BUNDLE_JSON)
    if not os.path.isfile(target):
        raise BundleError("{} {} no {}".format(location, "holds" if temp else "has", BUNDLE_JSON_PATH), location)
    with open(target, "rb") as handle:
        raw = handle.read()
    view.doc = load_bundle_json(raw, target if temp is None else "{}:{}".format(location, BUNDLE_JSON_PATH))
    view.bundle_json_sha256 = hashlib.sha256(raw).hexdigest()
    return view
