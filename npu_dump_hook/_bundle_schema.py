"""The ``bundle.json`` schema (``npu_dump_hook/bundle@1``) and the checks of a bundle's
payload against it (normative text: docs/bundle-format.md).

:func:`check_bundle_json` lists schema problems of a parsed document.
:func:`check_payload` adds what only the files can tell: bundle.json missing or not JSON,
``files`` entries without a payload file or with another size / sha256, payload files that
``files`` does not describe, and dump, Opdebug, mapping.csv and graph files that do not parse.
"""
import json
import os
import re
from typing import Any, Dict, List, Mapping

from ._bagit import Problem
from .constants import BUNDLE_SCHEMA
from .errors import FormatError

__all__ = ["BACKENDS", "FILE_KINDS", "DUMP_NAME_FIELDS", "check_bundle_json", "check_payload"]

BACKENDS = ("npu", "emulated", "reference")
FILE_KINDS = ("dump", "stats", "opdebug", "mapping", "graph", "tf_graph", "golden", "init", "other")
DUMP_NAME_FIELDS = ("op_type", "op_name", "task_id", "stream_id", "timestamp")
_TOP = (("schema", str), ("backend", str), ("created", str), ("versions", dict), ("options", dict),
        ("run", dict), ("randomness", (dict, type(None))), ("graph", dict), ("dump", dict), ("files", list),
        ("coverage", dict), ("warnings", list))
_SECTIONS = {
    "run": ("steps", "global_step", "started", "ended", "rank", "device_id"),
    "graph": ("file", "name", "stage", "op_count"),
    "dump": ("time_dir", "device_id", "model_name", "model_id", "steps"),
}
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_BUNDLE_JSON = "data/bundle.json"


def check_bundle_json(doc: Mapping[str, Any]) -> List[str]:
    """Schema problems of a bundle.json document, one message each (empty when valid)."""
    problems = []  # type: List[str]
    for key, types in _TOP:
        if key not in doc:
            problems.append("missing key {!r}".format(key))
        elif not isinstance(doc[key], types):
            problems.append("{!r} has type {}".format(key, type(doc[key]).__name__))
    if doc.get("schema") not in (None, BUNDLE_SCHEMA) and isinstance(doc.get("schema"), str):
        problems.append("schema {!r} is not {!r}".format(doc["schema"], BUNDLE_SCHEMA))
    if isinstance(doc.get("backend"), str) and doc["backend"] not in BACKENDS:
        problems.append("backend {!r} is not one of {}".format(doc["backend"], ", ".join(BACKENDS)))
    for section, keys in _SECTIONS.items():
        if isinstance(doc.get(section), dict):
            problems.extend("{}: missing key {!r}".format(section, k) for k in keys if k not in doc[section])
    if isinstance(doc.get("dump"), dict) and not isinstance(doc["dump"].get("steps", []), list):
        problems.append("dump.steps is not a list")
    if isinstance(doc.get("files"), list):
        for number, entry in enumerate(doc["files"]):
            problems.extend("files[{}]: {}".format(number, p) for p in _check_file_entry(entry))
    if isinstance(doc.get("warnings"), list) and not all(isinstance(w, str) for w in doc["warnings"]):
        problems.append("warnings holds a non-string")
    return problems


def _check_file_entry(entry: Any) -> List[str]:
    if not isinstance(entry, dict):
        return ["not an object"]
    problems = []
    if not isinstance(entry.get("path"), str) or not entry.get("path"):
        problems.append("path missing or not a string")
    if not isinstance(entry.get("size"), int) or isinstance(entry.get("size"), bool) or entry.get("size", -1) < 0:
        problems.append("size missing or not a non-negative integer")
    digest = entry.get("sha256", "absent")
    if digest is not None and not (isinstance(digest, str) and _SHA256.match(digest)):
        problems.append("sha256 is neither null nor 64 lowercase hex digits")
    if entry.get("kind") not in FILE_KINDS:
        problems.append("kind {!r} is not one of {}".format(entry.get("kind"), "|".join(FILE_KINDS)))
    if entry.get("kind") in ("dump", "stats", "opdebug"):
        problems.extend("{} missing".format(k) for k in DUMP_NAME_FIELDS if k not in entry)
    return problems


def check_payload(root: str, digests: Mapping[str, str]) -> List[Problem]:
    """Problems between bundle.json and the payload of the bag at ``root``.

    ``digests`` maps ``data/...`` paths of the payload to their actual sha256 (from the
    BagIt check), so no file is hashed twice.
    """
    path = os.path.join(root, "data", "bundle.json")
    if not os.path.isfile(path):
        return [Problem("missing", _BUNDLE_JSON, "bundle description not found")]
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return [Problem("unparsable", _BUNDLE_JSON, "not JSON: {}".format(exc))]
    if not isinstance(doc, dict):
        return [Problem("unparsable", _BUNDLE_JSON, "not a JSON object")]
    problems = [Problem("schema", _BUNDLE_JSON, message) for message in check_bundle_json(doc)]
    files = [e for e in doc.get("files", []) if isinstance(e, dict) and isinstance(e.get("path"), str)]
    problems.extend(_files_vs_payload(root, files, digests))
    problems.extend(_parse_checks(root, files, digests))
    return problems


def _files_vs_payload(root: str, files: List[Dict[str, Any]], digests: Mapping[str, str]) -> List[Problem]:
    problems = []
    described = set()
    for entry in files:
        rel = "data/" + entry["path"]
        described.add(rel)
        full = os.path.join(root, *rel.split("/"))
        if not os.path.isfile(full):
            problems.append(Problem("missing", rel, "described in bundle.json but absent"))
            continue
        size = os.path.getsize(full)
        if isinstance(entry.get("size"), int) and entry["size"] != size:
            problems.append(Problem("changed", rel, "size {} but bundle.json says {}".format(size, entry["size"])))
        actual = digests.get(rel)
        if isinstance(entry.get("sha256"), str) and actual is not None and actual != entry["sha256"]:
            problems.append(Problem("changed", rel, "sha256 differs from bundle.json"))
    for rel in sorted(set(digests) - described - {_BUNDLE_JSON}):
        problems.append(Problem("extra", rel, "present but not described in bundle.json"))
    return problems


def _parse_checks(root: str, files: List[Dict[str, Any]], digests: Mapping[str, str]) -> List[Problem]:
    problems = []
    for entry in files:
        rel = "data/" + entry["path"]
        full = os.path.join(root, *rel.split("/"))
        if rel not in digests or not os.path.isfile(full):
            continue  # already reported as missing
        try:
            _parse_one(entry.get("kind"), full)
        except FormatError as exc:
            problems.append(Problem("unparsable", rel, exc.rule))
    return problems


def _parse_one(kind: Any, path: str) -> None:
    if kind in ("dump", "opdebug"):
        from .bundle import header_summary

        header_summary(path)
    elif kind == "mapping":
        from .formats.mapping_csv import read_mapping

        read_mapping(path)
    elif kind == "graph" and path.endswith(".txt"):
        from .bundle import _graph_ops

        _graph_ops(path)
