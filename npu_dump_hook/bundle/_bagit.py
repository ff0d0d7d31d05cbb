"""The BagIt (RFC 8493) tag files of a bundle: writing them and checking a bag against them.

What this module writes (normative for bundles):

* ``bagit.txt``: ``BagIt-Version: 1.0`` and ``Tag-File-Character-Encoding: UTF-8``;
* ``manifest-sha256.txt``: one ``{sha256 hex}  data/{path}`` line per payload file, sorted
  by path; CR, LF and ``%`` in paths percent-encoded (RFC 8493 §2.1.3);
* ``bag-info.txt``: ``Bag-Software-Agent``, ``Bagging-Date``, ``Payload-Oxum``
  (``{octets}.{file count}``) and ``External-Description``;
* ``tagmanifest-sha256.txt``: sha256 of the three files above.

:func:`check_bag` reports, as :class:`Problem` records, every payload file that is missing,
extra (present but not in the manifest) or changed (size or sha256), malformed tag files,
a wrong Payload-Oxum and tag files whose tag-manifest digest differs. It never raises for
a bad bag; it raises only when the folder itself cannot be read.

Nothing outside the bag is read: every symlink inside the bag (a tag file, ``data/`` itself,
anything below it, even one pointing at a byte-identical payload file) is an ``unsafe``
problem and is not followed.
"""
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from typing import IO, Dict, Iterable, List, Optional, Set, Tuple

from . import _fs
from ..errors import UnsafePathError

__all__ = [
    "Problem",
    "PROBLEM_KINDS",
    "BAGIT_TXT",
    "MANIFEST",
    "TAGMANIFEST",
    "BAG_INFO",
    "encode_path",
    "decode_path",
    "write_tag_files",
    "read_manifest",
    "manifest_digest",
    "MAX_ROW_BYTES",
    "read_bag_info",
    "check_bag",
    "linked_component",
    "reported_unsafe",
]

BAGIT_TXT = "bagit.txt"
MANIFEST = "manifest-sha256.txt"
TAGMANIFEST = "tagmanifest-sha256.txt"
BAG_INFO = "bag-info.txt"
_BAGIT_BODY = "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
_LINE = re.compile(r"([0-9a-fA-F]{64})[ \t]+(\S.*)\Z")
PROBLEM_KINDS = ("missing", "extra", "changed", "unparsable", "schema", "unsafe")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a bundle: ``kind`` (one of PROBLEM_KINDS), ``path`` relative
    to the bag root (or ``""`` for the bag as a whole) and a human ``detail``."""

    kind: str
    path: str
    detail: str

    def __str__(self) -> str:
        return "{}: {}: {}".format(self.kind, self.path or "<bundle>", self.detail)


def encode_path(path: str) -> str:
    """Percent-encode ``%``, CR and LF as RFC 8493 requires in manifest lines."""
    return path.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def decode_path(text: str) -> str:
    """Inverse of :func:`encode_path` (case-insensitive hex, as validators accept)."""
    return re.sub(r"%0[dD]", "\r", re.sub(r"%0[aA]", "\n", text)).replace("%25", "%")


def write_tag_files(bag_dir: str, payload: Iterable[Tuple[str, int, str]], agent: str,
                    bagging_date: str, description: str) -> None:
    """Write manifest, bag-info, bagit.txt and tag manifest for ``payload`` rows
    ``(path relative to data/, size, sha256 hex)``. The manifest is written and hashed line
    by line (100,000 rows would otherwise be ~35 MB of text held at once)."""
    digests = {}  # type: Dict[str, str]
    octets = count = 0
    with _HashingFile(os.path.join(bag_dir, MANIFEST)) as out:
        for rel, size, digest in sorted(payload):
            out.write("{}  data/{}\n".format(digest, encode_path(rel)))
            octets += size
            count += 1
    digests[MANIFEST] = out.hexdigest
    bodies = [
        (BAG_INFO, "Bag-Software-Agent: {}\nBagging-Date: {}\nPayload-Oxum: {}.{}\nExternal-Description: {}\n".format(
            agent, bagging_date, octets, count, description)),
        (BAGIT_TXT, _BAGIT_BODY),
    ]
    for name, body in bodies:
        with _HashingFile(os.path.join(bag_dir, name)) as out:
            out.write(body)
        digests[name] = out.hexdigest
    tag_lines = "".join("{}  {}\n".format(digests[name], name) for name in sorted(digests))
    with open(os.path.join(bag_dir, TAGMANIFEST), "wb") as out:
        out.write(tag_lines.encode("utf-8"))


class _HashingFile(object):
    """A new file that UTF-8 text is written to through a buffer, hashed as it is written;
    ``hexdigest`` is set when the ``with`` block ends."""

    _FLUSH = 1 << 16

    def __init__(self, path: str) -> None:
        self._out = open(path, "wb")
        self._digest = hashlib.sha256()
        self._pending = []  # type: List[str]
        self._size = 0
        self.hexdigest = ""

    def write(self, text: str) -> None:
        self._pending.append(text)
        self._size += len(text)
        if self._size >= self._FLUSH:
            self._flush()

    def _flush(self) -> None:
        data = "".join(self._pending).encode("utf-8")
        self._pending, self._size = [], 0
        self._out.write(data)
        self._digest.update(data)

    def __enter__(self) -> "_HashingFile":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self._flush()
                self.hexdigest = self._digest.hexdigest()
        finally:
            self._out.close()


def read_manifest(path: str, problems: List[Problem], label: str) -> Dict[str, str]:
    """{relative path: sha256 hex} from a manifest file; malformed lines become problems."""
    entries = {}  # type: Dict[str, str]
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem("unparsable", label, "not UTF-8 at byte {}".format(exc.start)))
        return entries
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            problems.append(Problem("unparsable", label, "line {}: not '<sha256>  <path>'".format(number)))
            continue
        try:
            digest, rel = _row(match)
        except UnsafePathError as exc:
            problems.append(Problem("unsafe", label, "line {}: {}".format(number, exc)))
            continue
        if rel in entries and entries[rel] != digest:
            problems.append(Problem("unparsable", label, "line {}: {} listed twice with different digests".format(
                number, rel)))
        entries[rel] = digest
    return entries


def _row(match: "re.Match[str]") -> Tuple[str, str]:
    """(sha256 in lower case, the bag-relative path) of a manifest line :data:`_LINE` matched;
    UnsafePathError for a path that escapes the bag."""
    return match.group(1).lower(), _fs.safe_relpath(decode_path(match.group(2)))


#: Longest manifest line :func:`manifest_digest` parses (a longer one is skipped unparsed: the row
#: it looks for is a digest and a short path).
MAX_ROW_BYTES = 1 << 16


def manifest_digest(handle: IO[bytes], rel: str) -> Optional[str]:
    """The sha256 the manifest open as ``handle`` lists for the bag-relative path ``rel`` (its first
    row for it, parsed as :func:`read_manifest` parses), or None when no row names it. Streamed: it
    stops at that row (a written manifest is sorted, so ``data/bundle.json`` is about its first
    line) and holds one line of at most :data:`MAX_ROW_BYTES` at a time, so a manifest of millions
    of rows costs bounded memory. Malformed lines are skipped: ``verify`` reports them. Only a
    line holding ``rel``'s last name as written in a manifest is parsed (a row naming ``rel``
    holds it, however its path is spelled), so an unsorted manifest is scanned at C speed."""
    name = encode_path(rel.rsplit("/", 1)[-1]).encode("utf-8")
    skipping = False  # inside a line longer than MAX_ROW_BYTES
    while True:
        line = handle.readline(MAX_ROW_BYTES)
        if not line:
            return None
        whole = line.endswith(b"\n")
        if not skipping and name in line and (whole or len(line) < MAX_ROW_BYTES):
            match = _LINE.match(line.rstrip(b"\r\n").decode("utf-8", "replace"))
            try:
                found = _row(match) if match is not None else None
            except UnsafePathError:
                found = None
            if found is not None and found[1] == rel:
                return found[0]
        skipping = not whole


def read_bag_info(path: str) -> Dict[str, str]:
    """Labels of bag-info.txt (last value wins; continuation lines joined)."""
    info = {}  # type: Dict[str, str]
    last = None  # type: Optional[str]
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\r\n")
            if line[:1] in (" ", "\t") and last is not None:
                info[last] += " " + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                last = key.strip()
                info[last] = value.strip()
    return info


def check_bag(bag_dir: str, digests_out: Optional[Dict[str, str]] = None,
              workers: Optional[int] = None,
              present_out: Optional[Dict[str, "_fs.SourceFile"]] = None) -> List[Problem]:
    """Every BagIt-level problem of the bag at ``bag_dir``. Actual payload digests are
    stored into ``digests_out`` (``data/...`` path -> sha256) and the regular payload files
    found (never through a symlink) into ``present_out``, for further checks."""
    problems = []  # type: List[Problem]
    links = _top_level_links(bag_dir, problems)
    _check_bagit_txt(bag_dir, problems, links)
    manifest_path = os.path.join(bag_dir, MANIFEST)
    if MANIFEST in links:
        listed = {}  # type: Dict[str, str]
    elif not os.path.isfile(manifest_path):
        problems.append(Problem("missing", MANIFEST, "payload manifest not found"))
        listed = {}
    else:
        listed = read_manifest(manifest_path, problems, MANIFEST)
    if "data" in links:  # the payload cannot be checked without following the link
        if digests_out is not None:
            digests_out.clear()
        _check_tagmanifest(bag_dir, problems, links)
        return problems
    present = _payload_files(bag_dir, problems)
    if present_out is not None:
        present_out.update(present)
    for rel in sorted(set(listed) - set(present)):
        if not reported_unsafe(bag_dir, rel):
            problems.append(Problem("missing", rel, "listed in {} but absent".format(MANIFEST)))
    for rel in sorted(set(present) - set(listed)):
        problems.append(Problem("extra", rel, "present but not listed in {}".format(MANIFEST)))
    both = sorted(set(listed) & set(present))
    hashed = _fs.parallel_map(lambda r: _fs.sha256_file(present[r].path)[1], both, workers,
                              inline=lambda r: present[r].size < _fs.INLINE_BYTES)
    actual = dict(zip(both, hashed))
    for rel in both:
        if actual[rel] != listed[rel]:
            problems.append(Problem("changed", rel, "sha256 {} != manifest {}".format(actual[rel], listed[rel])))
    if digests_out is not None:
        digests_out.update(actual)
    if BAG_INFO not in links:
        _check_oxum(bag_dir, present, problems)
    _check_tagmanifest(bag_dir, problems, links)
    return problems


def _top_level_links(bag_dir: str, problems: List[Problem]) -> Set[str]:
    """Names of the symlinks directly in the bag (each an ``unsafe`` problem, never followed)."""
    links = set()  # type: Set[str]
    with os.scandir(bag_dir) as it:
        for entry in sorted(it, key=lambda e: e.name):
            if entry.is_symlink():
                links.add(entry.name)
                problems.append(Problem("unsafe", entry.name, "a symlink (to {}) inside the bag; not followed".format(
                    _readlink(entry.path))))
    return links


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def linked_component(root: str, rel: str) -> Optional[str]:
    """The first component of the safe relative path ``rel`` under ``root`` that is a symlink
    (relative to ``root``), or None; nothing is followed to find out."""
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        if os.path.islink(os.path.join(root, *parts[:depth])):
            return "/".join(parts[:depth])
    return None


def reported_unsafe(root: str, rel: str) -> bool:
    """True when ``rel`` is a symlink, lies below one, or is a special file (:func:`check_bag`
    reports those as ``unsafe``, so they are not also ``missing``); nothing is followed."""
    if linked_component(root, rel) is not None:
        return True
    try:
        mode = os.lstat(os.path.join(root, *rel.split("/"))).st_mode
    except OSError:
        return False
    return not stat.S_ISDIR(mode) and not stat.S_ISREG(mode)


def _check_bagit_txt(bag_dir: str, problems: List[Problem], links: Set[str]) -> None:
    path = os.path.join(bag_dir, BAGIT_TXT)
    if BAGIT_TXT in links:
        return
    if not os.path.isfile(path):
        problems.append(Problem("missing", BAGIT_TXT, "bag declaration not found (not a BagIt bag)"))
        return
    info = read_bag_info(path)
    if not info.get("BagIt-Version") or info.get("Tag-File-Character-Encoding", "").upper() != "UTF-8":
        problems.append(Problem("unparsable", BAGIT_TXT, "needs BagIt-Version and Tag-File-Character-Encoding: UTF-8"))


def _payload_files(bag_dir: str, problems: List[Problem]) -> Dict[str, _fs.SourceFile]:
    data = os.path.join(bag_dir, "data")
    if not os.path.isdir(data):
        problems.append(Problem("missing", "data", "payload folder not found"))
        return {}
    warnings = []  # type: List[str]
    found = {"data/" + f.rel: f for f in _fs.walk_files(data, warnings, in_tree_links=False)}
    for message in warnings:
        problems.append(Problem("unsafe", "data", message))
    return found


def _check_oxum(bag_dir: str, present: Dict[str, _fs.SourceFile], problems: List[Problem]) -> None:
    path = os.path.join(bag_dir, BAG_INFO)
    if not os.path.isfile(path):
        return  # bag-info.txt is optional in BagIt
    oxum = read_bag_info(path).get("Payload-Oxum")
    if oxum is None:
        return
    actual = "{}.{}".format(sum(f.size for f in present.values()), len(present))  # sizes from the walk
    if oxum != actual:
        problems.append(Problem("changed", BAG_INFO, "Payload-Oxum {} but payload is {} (octets.files)".format(
            oxum, actual)))


def _check_tagmanifest(bag_dir: str, problems: List[Problem], links: Set[str]) -> None:
    path = os.path.join(bag_dir, TAGMANIFEST)
    if TAGMANIFEST in links or not os.path.isfile(path):
        return  # optional
    for rel, digest in sorted(read_manifest(path, problems, TAGMANIFEST).items()):
        full = _fs.safe_join(bag_dir, rel)
        link = linked_component(bag_dir, rel)
        if link is not None:
            if rel.split("/", 1)[0] not in links:  # top-level links are reported already
                problems.append(Problem("unsafe", rel, "listed in {} but reached through the symlink {}; "
                                                       "not followed".format(TAGMANIFEST, link)))
            continue
        if not os.path.isfile(full):
            problems.append(Problem("missing", rel, "listed in {} but absent".format(TAGMANIFEST)))
        elif _fs.sha256_file(full)[1] != digest:
            problems.append(Problem("changed", rel, "sha256 differs from {}".format(TAGMANIFEST)))
