"""Verification of a bundle folder or archive: BagIt integrity, the bundle.json schema, payload
agreement and that dump, mapping and graph files parse, and that ``data/inputs/*.npy`` hold the
dtype, shape and values bundle.json's ``inputs`` manifest says (:mod:`._input_files`); every
problem listed, in a fixed order.

Archives are extracted to a temporary folder first, by the code
:func:`~npu_dump_hook.bundle.open_bundle` uses too (:func:`~npu_dump_hook.bundle._archive.extract_bag`):
every member is checked before anything is written
(:func:`~npu_dump_hook.bundle._archive.checked_member`), and an archive whose uncompressed
stream passes :func:`~npu_dump_hook.bundle._archive.expansion_limit` is refused before it is
decompressed further (docs/bundle-format.md rule 7).
"""
import os
import re
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..constants import BUNDLE_SCHEMA
from ..errors import BundleError, FormatError, UnsafePathError
from ..formats.mapping_csv import read_mapping
from .selection import layer_names
from . import _bagit, _fs, _rules
from ._archive import archive_format, extract_bag, looks_like_tar, terminating_cleanly
from ._graph_text import graph_text_problems
from ._bagit import Problem
from ._input_files import input_file_problems
from ._spec import BACKENDS, BUNDLE_JSON_PATH, DATA_DIR, DUMP_NAME_FIELDS, FILE_KINDS, GOLDEN_BACKEND, read_backend
from .describe import graph_ops, header_summary
from ._document import (GOLDEN_FOR_TYPES, MAX_BUNDLE_JSON_BYTES, TOP_TYPES, load_bundle_json, too_large,
                        type_problems)
from .schema import RUN_SECTION_KEYS, environment_problems, fingerprint_problems, input_problems, run_mode_problems

__all__ = ["verify_bundle", "check_bundle_json", "check_payload"]

_SECTIONS = {
    "run": RUN_SECTION_KEYS,
    "graph": ("file", "name", "stage", "op_count"),
    "dump": ("time_dir", "device_id", "model_name", "model_id", "steps"),
}
#: Top-level keys a bundle MAY lack (section 2: fingerprints since bundle@1's addition, golden_for
#: in golden bundles only).
_OPTIONAL_KEYS = ("fingerprints", "golden_for", "inputs")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def verify_bundle(path: str, workers: Optional[int] = None) -> List[Problem]:
    """Every problem of the bundle folder or ``.tar``/``.tar.gz`` archive at ``path``.

    An empty list means: a valid BagIt bag whose bundle.json follows the schema, describes
    exactly the payload, and whose dump, mapping and graph files parse. Archives are
    extracted to a temporary folder first, each member checked before it is written: a
    hostile member is an ``unsafe`` problem, a damaged archive an ``unparsable`` one.
    """
    if os.path.isfile(path):
        if archive_format(path) is None and not looks_like_tar(path):
            return [Problem("unparsable", "", "{} is neither a bundle folder nor a tar archive".format(path))]
        with terminating_cleanly(), tempfile.TemporaryDirectory(prefix="npu_dump_hook-verify-") as tmp:
            try:
                root = extract_bag(path, tmp)
            except UnsafePathError as exc:
                return [Problem("unsafe", "", str(exc))]
            except BundleError as exc:
                return [Problem("unparsable", "", str(exc))]
            return _verify_dir(root, workers)
    if not os.path.isdir(path):
        return [Problem("missing", "", "{} does not exist".format(path))]
    return _verify_dir(path, workers)


def _verify_dir(root: str, workers: Optional[int]) -> List[Problem]:
    digests = {}  # type: Dict[str, str]
    present = {}  # type: Dict[str, _fs.SourceFile]
    problems = _bagit.check_bag(root, digests, workers, present)
    if os.path.islink(os.path.join(root, DATA_DIR)):
        return problems  # reported as unsafe; nothing behind the link is read
    problems.extend(check_payload(root, digests, present))
    return problems


def check_bundle_json(doc: Mapping[str, Any]) -> List[str]:
    """Schema problems of a bundle.json document, one message each (empty when valid)."""
    problems = ["missing key {!r}".format(key) for key, _types in TOP_TYPES
                if key not in doc and key not in _OPTIONAL_KEYS]
    problems.extend(type_problems(doc))
    if doc.get("schema") not in (None, BUNDLE_SCHEMA) and isinstance(doc.get("schema"), str):
        problems.append("schema {!r} is not {!r}".format(doc["schema"], BUNDLE_SCHEMA))
    if isinstance(doc.get("backend"), str) and read_backend(doc["backend"]) not in BACKENDS:
        problems.append("backend {!r} is not one of {}".format(doc["backend"], ", ".join(BACKENDS)))
    for section, keys in _SECTIONS.items():
        if isinstance(doc.get(section), dict):
            problems.extend("{}: missing key {!r}".format(section, k) for k in keys if k not in doc[section])
    if isinstance(doc.get("files"), list):
        for number, entry in enumerate(doc["files"]):
            problems.extend("files[{}]: {}".format(number, p) for p in _check_file_entry(entry))
    problems.extend("{} {}: {}".format(where, path, rule) for where, path, rule in _read_path_problems(doc))
    if isinstance(doc.get("warnings"), list) and not all(isinstance(w, str) for w in doc["warnings"]):
        problems.append("warnings holds a non-string")
    if isinstance(doc.get("fingerprints"), dict):  # any other non-null value is a type problem
        problems.extend(fingerprint_problems(doc["fingerprints"]))
    if isinstance(doc.get("inputs"), dict):
        problems.extend(input_problems(doc["inputs"]))
        problems.extend(_unlisted_inputs(doc))
    if isinstance(doc.get("run"), dict):
        problems.extend(environment_problems(doc["run"].get("environment")))
    problems.extend(run_mode_problems(doc.get("run")))
    problems.extend(_golden_problems(doc))
    problems.extend(_selection_problems(doc))
    return problems


def _selection_problems(doc: Mapping[str, Any]) -> List[str]:
    """A ``dump_layer`` coverage (``selected``/``not_selected``) needs ``options.dump_layer``, and its
    counts add up: every expected op is dumped, missing (chosen, no file) or not selected."""
    cov = doc.get("coverage")
    if not isinstance(cov, dict) or not any(k in cov for k in ("selected", "not_selected")):
        return []
    problems = []
    if not layer_names(doc):
        problems.append("coverage: selected/not_selected without options.dump_layer (nothing was chosen)")
    counts = [cov.get(k) for k in ("expected", "dumped", "selected", "not_selected")]
    if all(isinstance(c, int) for c in counts) and isinstance(cov.get("missing"), list) and \
            counts[0] != counts[1] + len(cov["missing"]) + counts[3]:
        problems.append("coverage: expected {} is not dumped {} + missing {} + not_selected {}".format(
            counts[0], counts[1], len(cov["missing"]), counts[3]))
    return problems


def _read_path_problems(doc: Mapping[str, Any]) -> List[Tuple[str, str, str]]:
    """(where, path, rule) of the read paths (:func:`._rules.read_paths`) that are not a safe
    relative path, that graph names but files[] does not describe, or that must be verifiable
    and are not (a null sha256 under init/ or inputs/)."""
    found = []
    read = _rules.read_paths(doc)
    listed = {path for _where, path, entry in read if entry is not None}
    for where, path, entry in read:
        try:
            safe = _fs.safe_relpath(path)
        except UnsafePathError as exc:
            if entry is None:  # files[] paths are reported as unsafe problems by check_payload
                found.append((where, repr(path), "{} (not followed)".format(exc)))
            continue
        if entry is None and path not in listed:
            found.append((where, safe, "not a file that files[] describes"))
        rule = _rules.sha256_rule(dict(entry, path=safe), None) if entry is not None else None
        if rule is not None:
            found.append((where, safe, rule))
    return found


def _unlisted_inputs(doc: Mapping[str, Any]) -> List[str]:
    """``inputs.tensors[].file`` paths that files[] does not list as kind ``inputs``."""
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    listed = {e.get("path") for e in files if isinstance(e, dict) and e.get("kind") == "inputs"}
    tensors = doc["inputs"].get("tensors")
    return ["inputs.tensors[{}]: file {} is not a files[] entry of kind inputs".format(number, entry["file"])
            for number, entry in enumerate(tensors if isinstance(tensors, list) else [])
            if isinstance(entry, dict) and isinstance(entry.get("file"), str) and entry["file"] not in listed]


def _golden_problems(doc: Mapping[str, Any]) -> List[str]:
    """A golden bundle (``backend`` ``"reference"``, or its alias ``"golden"``) holds no NPU dump;
    ``golden_for`` appears only there, with its keys. (The problems' wording names the recorded value.)"""
    problems = []  # type: List[str]
    golden = read_backend(doc.get("backend")) == GOLDEN_BACKEND
    if golden and isinstance(doc.get("files"), list):
        dumped = [e.get("path") for e in doc["files"] if isinstance(e, dict) and e.get("kind") in ("dump", "stats",
                                                                                                   "opdebug")]
        if dumped:
            problems.append("a reference bundle holds no NPU dump, but files lists {} dump file(s), e.g. {}".format(
                len(dumped), dumped[0]))
    if "golden_for" not in doc or doc["golden_for"] is None:
        return problems
    target = doc["golden_for"]
    if not golden:
        problems.append("golden_for in a {!r} bundle (only reference bundles are made for another)".format(
            doc.get("backend")))
    if not isinstance(target, dict):
        return problems  # a type problem
    problems.extend("golden_for: missing key {!r}".format(key) for key, _types in GOLDEN_FOR_TYPES
                    if key not in target and key != "replayed")  # their types: type_problems
    digest = target.get("bundle_json_sha256")
    if isinstance(digest, str) and not _SHA256.match(digest):
        problems.append("golden_for.bundle_json_sha256 is not 64 lowercase hex digits")
    return problems


def _check_file_entry(entry: Any) -> List[str]:
    """A files[] entry's missing fields and wrong values (its types: :func:`._document.type_problems`)."""
    if not isinstance(entry, dict):
        return []  # a type problem
    problems = ["{} missing".format(key) for key in ("path", "size") if key not in entry]
    if entry.get("path") == "":
        problems.append("path is empty")
    size = entry.get("size")
    if isinstance(size, int) and not isinstance(size, bool) and size < 0:
        problems.append("size is negative")
    digest = entry.get("sha256", "absent")
    if isinstance(digest, str) and not _SHA256.match(digest):
        problems.append("sha256 is neither null nor 64 lowercase hex digits")
    kind = entry.get("kind")
    if "kind" not in entry or (isinstance(kind, str) and kind not in FILE_KINDS):
        problems.append("kind {!r} is not one of {}".format(entry.get("kind"), "|".join(FILE_KINDS)))
    if entry.get("kind") in ("dump", "stats", "opdebug"):
        problems.extend("{} missing".format(k) for k in DUMP_NAME_FIELDS if k not in entry)
    return problems


def check_payload(root: str, digests: Mapping[str, str],
                  present: Optional[Mapping[str, _fs.SourceFile]] = None) -> List[Problem]:
    """Problems between bundle.json and the payload of the bag at ``root``.

    ``digests`` maps ``data/...`` paths of the payload to their actual sha256 (from the
    BagIt check), so no file is hashed twice; ``present`` maps them to the regular files
    found without following any symlink (walked here when not given). Only those files are
    read: a ``files[].path`` that escapes the bag (``..``, absolute) is an ``unsafe``
    problem and nothing outside the bag is touched.
    """
    if present is None:
        present = {"data/" + f.rel: f
                   for f in _fs.walk_files(os.path.join(root, DATA_DIR), [], in_tree_links=False)}
    if BUNDLE_JSON_PATH not in present:
        if os.path.lexists(os.path.join(root, *BUNDLE_JSON_PATH.split("/"))):
            return []  # a symlink or special file: reported as unsafe by the BagIt check
        return [Problem("missing", BUNDLE_JSON_PATH, "bundle description not found")]
    try:
        doc = _read_bundle_json(present[BUNDLE_JSON_PATH])
    except BundleError as exc:
        return [Problem("unparsable", BUNDLE_JSON_PATH, exc.args[0] if exc.args else str(exc))]
    problems = [Problem("schema", BUNDLE_JSON_PATH, message) for message in check_bundle_json(doc)]
    files = []  # type: List[Dict[str, Any]]
    for number, entry in enumerate(doc.get("files") if isinstance(doc.get("files"), list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not entry["path"]:
            continue  # reported by the schema check
        try:
            safe = _fs.safe_relpath(entry["path"])
        except UnsafePathError as exc:
            problems.append(Problem("unsafe", BUNDLE_JSON_PATH, "files[{}]: {} (not followed)".format(number, exc)))
            continue
        files.append(dict(entry, path=safe))
    problems.extend(_files_vs_payload(root, files, digests, present))
    problems.extend(_parse_checks(files, digests, present))
    # a compressed graph (statistics bundles, rule 9): bounded expansion, listed size/sha256, parse
    problems.extend(Problem(*found) for found in graph_text_problems(doc, present))
    problems.extend(input_file_problems(doc, present))  # the .npy headers and values against inputs
    return problems


def _read_bundle_json(found: _fs.SourceFile) -> Dict[str, Any]:
    """bundle.json parsed as open_bundle parses it (:func:`._document.load_bundle_json`: the same
    bounds), read only when its size is within them; BundleError otherwise."""
    if found.size > MAX_BUNDLE_JSON_BYTES:
        raise too_large(found.size, BUNDLE_JSON_PATH)
    try:
        with _rules.open_regular(found.path) as fh:
            raw = fh.read(MAX_BUNDLE_JSON_BYTES + 1)
    except OSError as exc:
        raise BundleError("{}: cannot be read: {}".format(BUNDLE_JSON_PATH, exc.strerror or exc), found.path)
    return load_bundle_json(raw, BUNDLE_JSON_PATH)


def _files_vs_payload(root: str, files: List[Dict[str, Any]], digests: Mapping[str, str],
                      present: Mapping[str, _fs.SourceFile]) -> List[Problem]:
    problems = []
    described = set()
    for entry in files:
        rel = "data/" + entry["path"]
        described.add(rel)
        if rel not in present:
            if not _bagit.reported_unsafe(root, rel):
                problems.append(Problem("missing", rel, "described in bundle.json but absent"))
            continue
        rules = (_rules.size_rule(entry, present[rel].size),  # the rules open_bundle applies
                 _rules.sha256_rule(entry, digests.get(rel)) if isinstance(entry.get("sha256"), str) else None)
        problems.extend(Problem("changed", rel, rule) for rule in rules if rule is not None)
    for rel in sorted(set(digests) - described - {BUNDLE_JSON_PATH}):
        problems.append(Problem("extra", rel, "present but not described in bundle.json"))
    return problems


def _parse_checks(files: List[Dict[str, Any]], digests: Mapping[str, str],
                  present: Mapping[str, _fs.SourceFile]) -> List[Problem]:
    problems = []
    for entry in files:
        rel = "data/" + entry["path"]
        if rel not in digests or rel not in present:
            continue  # already reported as missing, extra or unsafe
        if _described_unreadable(entry):
            continue  # the writer recorded that it does not parse (and warned): verify agrees
        try:
            _parse_one(entry.get("kind"), present[rel].path)
        except FormatError as exc:
            problems.append(Problem("unparsable", rel, exc.rule))
    return problems


def _described_unreadable(entry: Mapping[str, Any]) -> bool:
    """True when bundle.json records the file as not parsing: a ``parse_error`` string, or a
    ``dump``/``opdebug`` entry whose ``header`` is null."""
    if isinstance(entry.get("parse_error"), str):
        return True
    return entry.get("kind") in ("dump", "opdebug") and "header" in entry and entry["header"] is None


def _parse_one(kind: Any, path: str) -> None:
    if kind in ("dump", "opdebug"):
        header_summary(path)
    elif kind == "mapping":
        read_mapping(path)
    elif kind == "graph" and path.endswith(".txt"):
        graph_ops(path)
