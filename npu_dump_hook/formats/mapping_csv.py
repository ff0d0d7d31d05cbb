"""``mapping.csv``: real names of dump files whose names were too long (reference §4).

When a dump file name exceeds NAME_MAX, the writer stores the data under the decimal value of
``std::hash<std::string>`` (libstdc++, 64-bit) and appends ``{hash},{original basename}\\n`` to
``mapping.csv`` in the same folder. Format (normative for this package):

* UTF-8 text, one mapping per line, ``\\n`` or ``\\r\\n`` line ends, no header, no quoting;
* a line is ``{digits},{name}``, split at the **first** comma (a name may hold commas);
  blank lines are skipped;
* the same line may repeat (the host writer appends once per received chunk); the same hash
  with two different names is an error;
* ``name`` is a bare file name: empty names, ``/``, ``\\``, NUL or ``..`` are rejected, since
  a reader joins it to the folder path.

Errors are :class:`NameFormatError` with the file, the 1-based line and its byte offset.

Reading (:func:`read_mapping`): the file is opened once, without blocking
(:func:`npu_dump_hook._files.open_regular`; links are followed, as for any path a user names),
and what the descriptor shows is checked: anything but a regular file is a NameFormatError.

Limits and cost: a file over 256 MiB is refused before it is read, and so is a line over
1 MiB (:data:`MAX_LINE_BYTES`; real names are a few hundred bytes). The file is read in
256 KiB chunks, empty lines are skipped in C, a line repeating the previous one is skipped
before it is decoded, every other line is parsed as it comes, and what the result dict and
its strings take is counted (``sys.getsizeof``, exact): a file whose entries would take
more than **3 x its size + 32 MiB** is refused at the line that crosses it. Only files of
very short, all different lines get there (a real line, a 20-digit hash and a 255+ byte
name, takes about 1.6 x its length). So the peak memory of :func:`read_mapping` and
:func:`parse_mapping_text` (input bytes not counted) is **at most 4 x the input size +
64 MB**, and their time is linear in it.
"""
import io
import os
import re
import sys
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from .._files import NotRegularFile, open_regular
from ..errors import NameFormatError
from ._text_lines import nonblank_lines

__all__ = [
    "MAPPING_FILE_NAME",
    "MAX_LINE_BYTES",
    "read_mapping",
    "parse_mapping_text",
    "write_mapping",
    "append_mapping",
    "std_hash_name",
]

MAPPING_FILE_NAME = "mapping.csv"
_HASH = re.compile(r"[0-9]+\Z")
# A mapping.csv is a few lines per long-named file; refuse absurd sizes instead of reading them.
_MAX_BYTES = 256 * 1024 * 1024
#: Longest line (without its line end) a mapping.csv may hold.
MAX_LINE_BYTES = 1024 * 1024
# The result may take this many bytes: _BUDGET_FACTOR x input size + _BUDGET_BASE.
_BUDGET_FACTOR = 3
_BUDGET_BASE = 32 * 1024 * 1024

PathName = Union[str, os.PathLike]
Pairs = Union[Mapping[str, str], Iterable[Tuple[str, str]]]


def read_mapping(path: PathName) -> Dict[str, str]:
    """Hashed name -> original file name, from one ``mapping.csv`` (a regular file: opened without
    blocking, so a FIFO, device or socket there is a NameFormatError naming it, never a hang)."""
    path = os.fspath(path)
    try:
        handle = open_regular(path, follow_links=True)
    except NotRegularFile as exc:
        raise NameFormatError(path, "is {} (mapping.csv must be a regular file; not read)".format(exc.kind))
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > _MAX_BYTES:
            raise NameFormatError(path, "mapping.csv larger than {} bytes".format(_MAX_BYTES), 0)
        return _parse_lines(handle, size, path)


def parse_mapping_text(data: bytes, path: PathName = "<mapping.csv>") -> Dict[str, str]:
    """Parse the bytes of a mapping.csv (see the module rules); ``path`` names it in errors."""
    return _parse_lines(io.BytesIO(data), len(data), path)


def _decode(raw: bytes, path: PathName, number: int, offset: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NameFormatError(path, "line {}: not UTF-8 ({})".format(number, exc.reason), offset + exc.start)


def _parse_lines(handle: io.BufferedIOBase, size: int, path: PathName) -> Dict[str, str]:
    """Read ``handle`` in chunks, split them into lines, keep one entry per new line."""
    result = {}  # type: Dict[str, str]
    parse = _LineParser(result, _BUDGET_FACTOR * size + _BUDGET_BASE, path)
    for number, offset, line in nonblank_lines(handle, path, MAX_LINE_BYTES, NameFormatError):
        parse.line(line, number, offset)
    return result


class _LineParser(object):
    """Checks one line at a time and adds it to ``result`` (see the module rules)."""

    def __init__(self, result: Dict[str, str], budget: int, path: PathName) -> None:
        self.result = result
        self.budget = budget
        self.path = path
        self.strings = 0  # bytes the keys and names of result take
        self.previous = None  # type: Optional[bytes]  # the last line added: repeats are common

    def line(self, raw: bytes, number: int, offset: int) -> None:
        if raw == self.previous:
            return
        path = self.path
        if raw.endswith(b"\r"):
            raw = raw.rstrip(b"\r")
        hashed_bytes, comma, name_bytes = raw.partition(b",")
        if not comma:
            if not _decode(raw, path, number, offset).strip():
                return  # blank line
            raise NameFormatError(path, "line {}: expected '{{hash}},{{name}}', found no comma".format(number), offset)
        hashed = _decode(hashed_bytes, path, number, offset)
        name_offset = offset + len(hashed_bytes) + 1
        name = _decode(name_bytes, path, number, name_offset)
        where = "line {}: ".format(number)
        if not _HASH.match(hashed):
            raise NameFormatError(path, where + "hash {!r} is not all digits".format(_clip(hashed)), offset)
        _check_name(name, path, where, name_offset)
        result = self.result
        previous = result.setdefault(hashed, name)
        if previous is name:  # a new entry
            self.strings += sys.getsizeof(hashed) + sys.getsizeof(name)
            if self.strings + sys.getsizeof(result) > self.budget:
                raise NameFormatError(
                    path, where + "its {} different entries would take more than {} bytes of memory "
                    "({} x the input size + {} MiB): not a mapping.csv of real dump names".format(
                        len(result), self.budget, _BUDGET_FACTOR, _BUDGET_BASE >> 20), offset)
        elif previous != name:
            raise NameFormatError(
                path, where + "hash {} maps to {!r} and {!r}".format(hashed, _clip(previous), _clip(name)), offset
            )
        self.previous = raw


def _clip(text: str, limit: int = 200) -> str:
    """``text`` for an error message: a long name is cut (the offset says where it is)."""
    return text if len(text) <= limit else text[:limit] + "...({} characters)".format(len(text))


def _check_name(name: str, path: PathName, where: str, offset: Optional[int]) -> None:
    if not name:
        raise NameFormatError(path, where + "empty file name", offset)
    for bad, label in (("/", "a path separator '/'"), ("\\", "a path separator '\\'"), ("\x00", "NUL")):
        if bad in name:
            raise NameFormatError(path, where + "file name {!r} contains {}".format(_clip(name), label), offset)
    if ".." in name:
        raise NameFormatError(path, where + "file name {!r} contains '..'".format(_clip(name)), offset)


def _lines(pairs: Pairs, path: PathName) -> str:
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    out = []
    for hashed, name in items:
        if not _HASH.match(hashed):
            raise NameFormatError(path, "hash {!r} is not all digits".format(hashed))
        _check_name(name, path, "", None)
        if "\n" in name or "\r" in name:
            raise NameFormatError(path, "file name {!r} contains a line break".format(name))
        out.append("{},{}\n".format(hashed, name))
    return "".join(out)


def write_mapping(path: PathName, pairs: Pairs) -> None:
    """Write (replace) a mapping.csv with one line per (hash, name) pair, in the given order."""
    text = _lines(pairs, path)
    with open(os.fspath(path), "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def append_mapping(path: PathName, hashed: str, name: str) -> None:
    """Append one ``{hash},{name}`` line, as the writer does for each long-named file."""
    text = _lines([(hashed, name)], path)
    with open(os.fspath(path), "a", encoding="utf-8", newline="") as handle:
        handle.write(text)


_MASK64 = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_SEED = 0xC70F6907


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def std_hash_name(text: str) -> str:
    """Decimal ``std::hash<std::string>`` of UTF-8 ``text`` as libstdc++ (64-bit) computes it.

    The writer hashes the full path on the training host path and the basename elsewhere (§4);
    pass whichever applies. Readers never need this: they use mapping.csv.
    """
    data = text.encode("utf-8")
    length = len(data)
    aligned = length & ~7
    value = (_SEED ^ (length * _MUL)) & _MASK64
    for start in range(0, aligned, 8):
        word = int.from_bytes(data[start : start + 8], "little")
        mixed = (_shift_mix((word * _MUL) & _MASK64) * _MUL) & _MASK64
        value = ((value ^ mixed) * _MUL) & _MASK64
    if length & 7:
        value = ((value ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _MASK64
    value = (_shift_mix(value) * _MUL) & _MASK64
    return str(_shift_mix(value))
