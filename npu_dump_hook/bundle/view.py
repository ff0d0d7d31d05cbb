"""Opening a bundle to read it: :func:`open_bundle`, the one way in (docs/bundle-format.md
"Reading a bundle").

``path`` is a bundle folder or a ``.tar``/``.tar.gz`` archive of one::

    <path>/  (an archive: its one top folder, or its top)
        bagit.txt  bag-info.txt  manifest-sha256.txt  tagmanifest-sha256.txt
        data/bundle.json                      view.doc, view.bundle_json_sha256, view.identity()
        data/graph/ge_proto_*_Build.txt[.gz]  view.graph_file()        (bundle.json graph.file; .gz expanded)
        data/tf/graph.pbtxt
        data/dump/{time}/{device}/{model}/{id}/{step}/...   view.dump_dir()
        data/golden/*.npy, golden_manifest.json             view.golden_dir(), view.golden_manifest()
        data/init/model.ckpt.index, .data-*                  view.init_files()
        data/inputs/*.npy   (manifest: bundle.json inputs)   view.input_files()
        (every listed file)                   view.files(kind), view.path(entry["path"])

    with open_bundle(path) as view:
        view.doc["backend"], view.files("dump"), view.path("graph/x.txt")

Rules (docs/bundle-format.md section 4, "the reading rules"; what the view guarantees):

* **Nothing is written in a folder.** A folder is read in place; the one thing written is the
  text of a compressed graph (statistics bundles, rule 9), expanded under its bounds
  (:mod:`._graph_text`) into the view's own temporary folder, removed by :meth:`BundleView.close`.
* **An archive is checked before anything is written.** It is extracted with the code
  ``verify`` uses (:func:`~npu_dump_hook.bundle._archive.extract_bag`: every member's name,
  type, the member count and the total size checked first) into a temporary folder (under
  ``workdir`` when given) that :meth:`BundleView.close` removes; ``parts`` limits which
  payload folders are written (``data/bundle.json`` always is).
* **At open** (:func:`_view` then :meth:`BundleView._check`, in this order; cheap: nothing but
  bundle.json and the manifest up to its row read): bundle.json is a
  regular file reached through no symlink, at most ``MAX_BUNDLE_JSON_BYTES``, whose sha256 is
  the one its row in ``manifest-sha256.txt`` lists (:func:`._rules.manifest_rule`: the manifest
  a regular file, streamed up to that row; no manifest or no row is refused too; an archive's
  manifest is extracted with bundle.json and checked the same way; the tag manifest is
  ``verify``'s), a JSON object
  nested at most ``MAX_JSON_DEPTH`` deep without lone surrogates, every known key it has
  is of the type section 2 gives (:func:`._document.type_problems`, what ``verify`` reports
  as ``schema`` problems), and every path it names for reading (files[], graph.file,
  graph.json) is relative, without ``..``/NUL (:func:`._fs.safe_relpath`, verify's rule; the
  strings only). BundleError (UnsafePathError for a path) naming it otherwise.
* **Before a path is handed out** (:meth:`path` and the accessors built on it, per part):
  the path is relative, without ``..``/NUL, and goes through no symlink (``data/`` included);
  a file that exists is a regular file (no FIFO, device, socket) of the size ``files[]``
  lists. ``dump_dir()``/``golden_dir()`` check every file ``files[]`` lists in their folder,
  ``graph_file()``/``golden_manifest()`` theirs, ``init_files()``/``input_files()`` every
  init/inputs entry, each of which must list a sha256 (a null one is "not verifiable");
  with ``verify=True`` they also hash each file (the files are present) before anything is
  restored or fed.
  UnsafePathError (a BundleError) naming the bundle, the path and the rule otherwise.
* What the view does not do: hash dump or golden files (compare reads them; ``verify``
  hashes everything), or look at files ``files[]`` does not list (readers walking a folder
  skip symlinks and special files themselves).
"""
import hashlib
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from .._files import open_regular
from ..errors import BundleError, UnsafePathError
from ._archive import extract_bag, terminating_cleanly
from ._graph_text import expand_graph, is_compressed, text_name
from ._document import MAX_BUNDLE_JSON_BYTES, load_bundle_json, too_large, type_problems
from ._fs import CHUNK_SIZE, safe_relpath
from ._bagit import MANIFEST
from ._rules import file_rule, manifest_rule, sha256_rule, symlink_on, unsafe_read_paths
from ._spec import (BUNDLE_JSON, BUNDLE_JSON_PATH, DATA_DIR, DUMP_DIR, FILE_KINDS, GOLDEN_DIR, GOLDEN_MANIFEST,
                    INIT_DIR, INPUTS_DIR)

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
        self._workdir = None  # type: Optional[str]
        self._graph_text = None  # type: Optional[str]
        self._by_path = None  # type: Optional[Dict[str, Mapping[str, Any]]]

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Remove the archive's extraction and any expanded graph text; the view's paths are gone after."""
        temp, self._temp, self._graph_text = self._temp, None, None
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)

    def __enter__(self) -> "BundleView":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _check(self) -> None:
        """Checks made once, when the bundle is opened (bundle.json's own bounds are checked as it
        is parsed): every known key has its documented type, so no consumer meets a list where
        it reads an object. BundleError naming bundle.json and the first problems otherwise."""
        problems = type_problems(self.doc)
        if problems:
            raise BundleError("{}: {} has {} key(s) of the wrong type: {}{} (npu-dump-hook verify lists them "
                              "all)".format(self.location, BUNDLE_JSON_PATH, len(problems), "; ".join(problems[:5]),
                                            " ..." if len(problems) > 5 else ""), self.location)
        self._check_read_paths()

    def _check_read_paths(self) -> None:
        """Every path bundle.json names for reading (:func:`._rules.read_paths`: files[], graph.file,
        graph.json) is a relative path inside the bag, by the rule ``verify`` applies to them
        (:func:`._rules.unsafe_read_paths`): a document naming ``../../etc/passwd`` lies about its
        bundle, even where a reader would never follow it (compare scans its dump folder). Strings
        only: no file is looked at. UnsafePathError naming bundle.json, the entry and the rule."""
        for where, rel, rule in unsafe_read_paths(self.doc)[:1]:
            raise self._unsafe(rel, "{} (named by {} {}; a bundle.json naming a path outside its bundle is "
                                    "refused, nothing is read; npu-dump-hook verify lists every problem)".format(
                                        rule, BUNDLE_JSON_PATH, where))

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
    def path(self, rel: str, clean: Optional[Set[Tuple[str, ...]]] = None) -> str:
        """The local path of payload path ``rel`` (relative to ``data/``, as bundle.json records
        paths); UnsafePathError when it would leave the bag or go through a symlink. The file
        need not exist. ``clean``: folders already found no symlink (see :func:`._rules.symlink_on`)."""
        try:
            parts = safe_relpath(rel).split("/")
        except UnsafePathError as exc:
            raise self._unsafe(rel, str(exc))
        link = symlink_on(self.data_dir, parts, clean)
        if link is not None:
            raise self._unsafe(rel, "{} is a symlink (no path of a bundle may go through one)".format(link))
        return os.path.join(self.data_dir, *parts)

    def checked(self, rel: str, entry: Optional[Mapping[str, Any]] = None,
                clean: Optional[Set[Tuple[str, ...]]] = None) -> str:
        """:meth:`path` of ``rel``, and when the file exists: a regular file (not a FIFO, device,
        socket or folder) of the size ``entry`` (its files[] entry) lists."""
        local = self.path(rel, clean)
        rule = file_rule(local, entry if entry is not None else self._listed().get(rel))
        if rule is not None:
            raise self._unsafe(rel, rule)
        return local

    def _listed(self) -> Dict[str, Mapping[str, Any]]:
        """files[] entries by their path as recorded."""
        if self._by_path is None:
            self._by_path = {entry["path"]: entry for entry in self.files()}
        return self._by_path

    def _unsafe(self, rel: Any, rule: str) -> UnsafePathError:
        return UnsafePathError("bundle {}: data/{}: {}".format(self.location, rel, rule), self.location)

    def graph_file(self) -> Optional[str]:
        """The Build graph bundle.json's ``graph.file`` names (:meth:`checked`), or None when it
        names none."""
        graph = self.doc.get("graph")
        recorded = graph.get("file") if isinstance(graph, dict) else None
        if not isinstance(recorded, str) or not recorded:
            return None
        local = self.checked(recorded)
        if not is_compressed(recorded) or not os.path.isfile(local):
            return local
        if self._graph_text is None:  # expanded once, into the view's own scratch folder
            target = os.path.join(self._scratch_dir(), text_name(recorded))
            self._graph_text = expand_graph(local, target, graph.get("text"),
                                            "{}: data/{}".format(self.location, recorded))
        return self._graph_text

    def _scratch_dir(self) -> str:
        """The view's temporary folder (an archive's extraction, else one made now), removed at close."""
        if self._temp is None:
            self._temp = tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=self._workdir)
        return self._temp

    def dump_dir(self) -> Optional[str]:
        """``data/dump`` when the bundle has that folder, every file files[] lists there checked."""
        return self._folder(DUMP_DIR)

    def golden_dir(self) -> Optional[str]:
        """``data/golden`` when the bundle has that folder (the golden tensors), every file files[]
        lists there checked."""
        return self._folder(GOLDEN_DIR)

    def golden_manifest(self) -> Optional[str]:
        """``data/golden/golden_manifest.json`` when the bundle has it (checked)."""
        found = self.checked(GOLDEN_DIR + "/" + GOLDEN_MANIFEST)
        return found if os.path.isfile(found) else None

    def init_files(self, verify: bool = False) -> List[Dict[str, Any]]:
        """``files[]`` entries of the initial-state checkpoint (kind ``init`` under ``init/``), each
        checked with :meth:`checked` and required to list a sha256; with ``verify``, each file must
        be present and is hashed against it (the check before a restore)."""
        return self._verified_part("init", INIT_DIR, verify)

    def input_files(self, verify: bool = False) -> List[Dict[str, Any]]:
        """``files[]`` entries of the captured step's input values (kind ``inputs`` under
        ``inputs/``), under the rules of :meth:`init_files` (the check before a golden run feeds them)."""
        return self._verified_part("inputs", INPUTS_DIR, verify)

    def _verified_part(self, kind: str, folder: str, verify: bool) -> List[Dict[str, Any]]:
        found = [entry for entry in self.files(kind) if entry["path"].startswith(folder + "/")]
        for entry in found:
            local = self.checked(entry["path"], entry)
            rule = sha256_rule(entry, _sha256_regular(local) if verify and os.path.lexists(local) else None)
            if rule is None and verify and not os.path.lexists(local):
                rule = "listed in bundle.json but absent"
            if rule is not None:
                raise self._unsafe(entry["path"], rule)
        return found

    def _folder(self, rel: str) -> Optional[str]:
        found = self.path(rel)
        if not os.path.isdir(found):
            return None
        clean = set()  # type: Set[Tuple[str, ...]]  # its folders, each looked at once
        for entry in self.files():
            if entry["path"].startswith(rel + "/"):
                self.checked(entry["path"], entry, clean)
        return found


def _sha256_regular(local: str) -> str:
    """The sha256 of the regular file at ``local`` (opened without following a link or blocking)."""
    digest = hashlib.sha256()
    with open_regular(local) as handle:
        for chunk in iter(lambda: handle.read(CHUNK_SIZE), b""):
            digest.update(chunk)
    return digest.hexdigest()


def open_bundle(path: str, parts: Optional[Iterable[str]] = None, workdir: Optional[str] = None) -> BundleView:
    """Open the bundle folder or ``.tar``/``.tar.gz`` archive at ``path`` (rules: module doc).

    ``parts``: for an archive, the payload folders to extract (e.g. ``("init",)``; None: all;
    ``()``: bundle.json only); ``workdir``: where the archive's temporary folder is made
    (default: the system's). BundleError naming ``path`` when it is not a readable bundle;
    UnsafePathError for a hostile archive member or bundle.json path."""
    if os.path.isdir(path):
        view = _view(path, path, None)
        view._workdir = workdir
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
    with terminating_cleanly():  # SIGTERM during the extraction: the except below still runs
        temp = tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=workdir)
        try:
            root = extract_bag(path, temp, _keep(parts))
            return _view(path, root, temp)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise


def _keep(parts: Optional[Iterable[str]]) -> Optional[Callable[[str], bool]]:
    """Which bag-relative member names to extract: bundle.json, the manifest that vouches for it
    (:func:`_check_manifest_row`) and the ``parts`` folders."""
    if parts is None:
        return None
    prefixes = tuple("{}/{}/".format(DATA_DIR, part.strip("/")) for part in parts)
    return lambda name: name in (BUNDLE_JSON_PATH, MANIFEST) or name.startswith(prefixes)


def _view(location: str, root: str, temp: Optional[str]) -> BundleView:
    """The view of the bag at ``root``, once its bundle.json is read."""
    view = BundleView(location, root, {}, "", temp)
    target = view.path(BUNDLE_JSON)
    where = target if temp is None else "{}:{}".format(location, BUNDLE_JSON_PATH)
    if not os.path.lexists(target):
        raise BundleError("{} {} no {}".format(location, "holds" if temp else "has", BUNDLE_JSON_PATH), location)
    rule = file_rule(target, None)
    if rule is not None:
        raise BundleError("{} {}".format(where, rule), location)
    try:
        with open_regular(target) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_BUNDLE_JSON_BYTES:
                raise too_large(size, where)
            raw = handle.read(MAX_BUNDLE_JSON_BYTES + 1)
    except OSError as exc:
        raise BundleError("{} cannot be read: {}".format(where, exc.strerror or exc), location)
    view.bundle_json_sha256 = hashlib.sha256(raw).hexdigest()
    _check_manifest_row(view)
    view.doc = load_bundle_json(raw, where)
    return view


def _check_manifest_row(view: BundleView) -> None:
    """bundle.json's bytes are the ones the bag's manifest lists (:func:`._rules.manifest_rule`):
    every reader trusts what it says (dtypes, paths, backend), so one edited after the bundle was
    written is refused here, as ``verify`` would report it, not read. BundleError naming the
    bundle, the file and the rule otherwise."""
    rule = manifest_rule(view.root, BUNDLE_JSON_PATH, view.bundle_json_sha256)
    if rule is not None:
        raise BundleError("bundle {}: {}: {} (docs/bundle-format.md section 4 rule 3; "
                          "npu-dump-hook verify {} tells the rest)".format(
                              view.location, BUNDLE_JSON_PATH, rule, view.location), view.location)
