"""bundle.json as a document: its bounded parse and the types of its known keys
(docs/bundle-format.md section 2 and section 4, rule 3).

:func:`~npu_dump_hook.bundle.open_bundle` and ``verify`` use these same functions::

    load_bundle_json(raw, where)   bytes -> dict; BundleError naming ``where`` for anything
                                   above MAX_BUNDLE_JSON_BYTES, not UTF-8 JSON, not an object,
                                   nested deeper than MAX_JSON_DEPTH, or holding a lone surrogate
    type_problems(doc)             every known key (top level, sections, files[] entries,
                                   golden_for) present with a type section 2 does not allow
                                   (one message each; missing keys are not type problems)

Bounds: a bundle.json is at most ``MAX_BUNDLE_JSON_BYTES`` (64 MiB, about 100,000 described
dump files: a files entry takes 200-1,100 bytes) because parsing costs about 20 bytes of memory
per byte of JSON; its nesting is at most ``MAX_JSON_DEPTH`` (what the writer writes is 6
deep), so nothing that walks the document recursively can exhaust the stack. Strings must be
encodable as UTF-8 (a ``\\ud800`` escape alone is not): every consumer can then print, write
and use them as paths. Nothing here reads a file.
"""
import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import BundleError

__all__ = ["MAX_BUNDLE_JSON_BYTES", "MAX_JSON_DEPTH", "TOP_TYPES", "GOLDEN_FOR_TYPES", "load_bundle_json",
           "type_problems", "golden_for_type_problems", "too_large"]

#: Largest bundle.json (bytes) a reader parses.
MAX_BUNDLE_JSON_BYTES = 64 << 20
#: Deepest nesting of objects and arrays a reader accepts.
MAX_JSON_DEPTH = 64

_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_NULL = type(None)
_STR = (str, _NULL)
_INT = (int, _NULL)
_NUMBER_OR_TEXT = (int, str, _NULL)
_LIST = (list, _NULL)
_DICT = (dict, _NULL)

#: Top-level keys and their types (section 2).
TOP_TYPES = (("schema", str), ("backend", str), ("created", str), ("versions", dict), ("options", dict),
             ("run", dict), ("randomness", _DICT), ("graph", dict), ("dump", dict), ("files", list),
             ("coverage", dict), ("warnings", list), ("fingerprints", _DICT), ("golden_for", _DICT),
             ("inputs", _DICT))
#: ``golden_for`` keys and their types (section 2.3).
GOLDEN_FOR_TYPES = (("bundle_json_sha256", str), ("path", str), ("created", _STR), ("backend", str),
                    ("captured_step", int), ("match", bool), ("replayed", _DICT))
#: ``files[]`` entry keys and their types (section 2); which are required is verify's check.
_ENTRY_TYPES = (("path", str), ("size", int), ("sha256", _STR), ("kind", str), ("op_type", _STR),
                ("op_name", _STR), ("task_id", _INT), ("stream_id", _INT), ("timestamp", _INT),
                ("original_name", _STR), ("header", _DICT), ("parse_error", _STR))
#: Known keys of each section and the types section 2 allows for them (null: unknown).
_SECTION_TYPES = {
    "run": (("mode", _STR), ("steps", _INT), ("max_steps", _INT), ("captured_step", _INT),
            ("global_step", (int, dict, _NULL)),
            ("started", _STR), ("ended", _STR), ("rank", _NUMBER_OR_TEXT),
            ("device_id", (int, str, list, _NULL)), ("reference", _DICT)),
    "graph": (("file", _STR), ("name", _STR), ("stage", _STR), ("op_count", _INT), ("json", _STR),
              ("choice", _DICT), ("text", _DICT)),
    "dump": (("time_dir", _STR), ("device_id", _STR), ("model_name", _STR), ("model_id", _STR),
             ("steps", list), ("chains", list), ("source", _STR)),
    "coverage": (("expected", _INT), ("dumped", _INT), ("missing", list), ("not_in_graph", list),
                 ("not_applicable", _STR), ("not_executed", list), ("control_flow", _DICT),
                 ("selected", _INT), ("not_selected", _INT)),
    "randomness": (("policy", _STR), ("sources", _LIST), ("not_handled", _LIST), ("not_reproducible", _LIST),
                   ("host_generators", _DICT)),
}
#: Sections whose values are lists of strings.
_STRING_LISTS = (("dump", "steps"), ("coverage", "missing"), ("coverage", "not_in_graph"), ("coverage", "not_executed"))
#: Sections whose values are lists of objects.
_OBJECT_LISTS = (("dump", "chains"), ("randomness", "sources"), ("randomness", "not_handled"),
                 ("randomness", "not_reproducible"))


def too_large(size: int, where: str) -> BundleError:
    """The error for a bundle.json of ``size`` bytes above MAX_BUNDLE_JSON_BYTES."""
    return BundleError("{} is {} bytes, above the {} MiB a reader parses (docs/bundle-format.md section 4)".format(
        where, size, MAX_BUNDLE_JSON_BYTES >> 20), where)


def load_bundle_json(raw: bytes, where: str) -> Dict[str, Any]:
    """A bundle.json (or index.json) document from its bytes; BundleError naming ``where`` otherwise
    (see the module doc for the bounds)."""
    if len(raw) > MAX_BUNDLE_JSON_BYTES:
        raise too_large(len(raw), where)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError("{} is not valid JSON: {}".format(where, exc), where)
    except RecursionError:
        raise _too_deep(where)
    if not isinstance(doc, dict):
        raise BundleError("{} is not a JSON object".format(where), where)
    found = _deepest_or_bad_string(doc, _MAYBE_SURROGATE.search(raw) is not None)
    if found is not None:
        raise _too_deep(where) if found == "depth" else BundleError(
            "{} holds a string with a lone surrogate ({}; not UTF-8 text)".format(where, found), where)
    return doc


def _too_deep(where: str) -> BundleError:
    return BundleError("{} nests objects and arrays deeper than {} levels (a reader's bound)".format(
        where, MAX_JSON_DEPTH), where)


def _deepest_or_bad_string(doc: Any, strings: bool) -> Optional[str]:
    """``"depth"`` when ``doc`` nests deeper than MAX_JSON_DEPTH, the JSON path of a string that is
    not UTF-8 encodable (looked for only when ``strings``), else None. Iterative: no recursion."""
    stack = [(doc, 1, "")]  # type: List[Tuple[Any, int, str]]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return "depth"
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in pairs:
            if strings and (_bad_text(key) or _bad_text(item)):
                return "at {}/{}".format(where, "?" if _bad_text(key) else key)
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, "{}/{}".format(where, key) if strings else where))
    return None


def _bad_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def type_problems(doc: Mapping[str, Any]) -> List[str]:
    """Known keys of ``doc`` (top level, sections, ``files[]`` entries, ``golden_for``) present with
    a type section 2 does not allow, one message each."""
    problems = ["{!r} has type {}".format(key, _kind(doc[key])) for key, types in TOP_TYPES
                if key in doc and _wrong(doc[key], types)]
    for section, keys in _SECTION_TYPES.items():
        values = doc.get(section)
        if not isinstance(values, dict):
            continue  # the top level's types are checked with the top-level keys
        problems.extend(_typed(section, values, keys))
    problems.extend(_list_problems(doc, _STRING_LISTS, str, "a string"))
    problems.extend(_list_problems(doc, _OBJECT_LISTS, dict, "an object"))
    files = doc.get("files")
    for number, entry in enumerate(files if isinstance(files, list) else []):
        if not isinstance(entry, dict):
            problems.append("files[{}]: not an object".format(number))
            continue
        problems.extend("files[{}]: {}".format(number, p) for p in _typed("", entry, _ENTRY_TYPES))
    problems.extend(golden_for_type_problems(doc.get("golden_for")))
    versions = doc.get("versions")
    if isinstance(versions, dict):
        problems.extend("versions.{} has type {}".format(k, _kind(v)) for k, v in versions.items()
                        if not isinstance(v, _STR))
    return problems


def golden_for_type_problems(target: Any) -> List[str]:
    """``golden_for`` keys present with another type than section 2.3's (nothing for a non-object)."""
    return _typed("golden_for", target, GOLDEN_FOR_TYPES) if isinstance(target, dict) else []


def _typed(section: str, values: Mapping[str, Any], keys: Sequence[Tuple[str, Any]]) -> List[str]:
    return ["{}{} has type {}".format(section + "." if section else "", key, _kind(values[key]))
            for key, types in keys if key in values and _wrong(values[key], types)]


def _wrong(value: Any, types: Any) -> bool:
    """True unless ``value`` is of ``types`` (a bool is an int only where bool is named)."""
    allowed = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool not in allowed
    return not isinstance(value, allowed)


def _list_problems(doc: Mapping[str, Any], where: Sequence[Tuple[str, str]], item_type: type,
                   wanted: str) -> List[str]:
    problems = []
    for section, key in where:
        values = doc.get(section)
        items = values.get(key) if isinstance(values, dict) else None
        if isinstance(items, list) and not all(isinstance(item, item_type) for item in items):
            problems.append("{}.{} holds an item that is not {}".format(section, key, wanted))
    return problems


def _kind(value: Any) -> str:
    return type(value).__name__
