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
"""
import io
import os
import re
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from ..errors import NameFormatError

__all__ = [
    "MAPPING_FILE_NAME",
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

PathName = Union[str, os.PathLike]
Pairs = Union[Mapping[str, str], Iterable[Tuple[str, str]]]


def read_mapping(path: PathName) -> Dict[str, str]:
    """Hashed name -> original file name, from one ``mapping.csv``."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size > _MAX_BYTES:
        raise NameFormatError(path, "mapping.csv larger than {} bytes".format(_MAX_BYTES), 0)
    with open(path, "rb") as handle:
        return parse_mapping_text(handle.read(), path)


def parse_mapping_text(data: bytes, path: PathName = "<mapping.csv>") -> Dict[str, str]:
    """Parse the bytes of a mapping.csv (see the module rules); ``path`` names it in errors."""
    result = {}  # type: Dict[str, str]
    offset = 0
    for number, raw in enumerate(io.BytesIO(data), 1):
        line_offset, offset = offset, offset + len(raw)
        where = "line {}: ".format(number)
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raise NameFormatError(path, where + "not UTF-8 ({})".format(exc.reason), line_offset + exc.start)
        if not line.strip():
            continue
        hashed, comma, name = line.partition(",")
        if not comma:
            raise NameFormatError(path, where + "expected '{hash},{name}', found no comma", line_offset)
        if not _HASH.match(hashed):
            raise NameFormatError(path, where + "hash {!r} is not all digits".format(hashed), line_offset)
        _check_name(name, path, where, line_offset + len(hashed) + 1)
        previous = result.setdefault(hashed, name)
        if previous != name:
            raise NameFormatError(
                path, where + "hash {} maps to {!r} and {!r}".format(hashed, previous, name), line_offset
            )
    return result


def _check_name(name: str, path: PathName, where: str, offset: Optional[int]) -> None:
    if not name:
        raise NameFormatError(path, where + "empty file name", offset)
    for bad, label in (("/", "a path separator '/'"), ("\\", "a path separator '\\'"), ("\x00", "NUL")):
        if bad in name:
            raise NameFormatError(path, where + "file name {!r} contains {}".format(name, label), offset)
    if ".." in name:
        raise NameFormatError(path, where + "file name {!r} contains '..'".format(name), offset)


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
