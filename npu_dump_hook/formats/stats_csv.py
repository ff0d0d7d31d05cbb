"""Per-op statistics CSV written with ``dump_data=stats`` (reference §3.2).

One file per op execution, named ``{dump file name}.csv``. ASCII text, ``,`` separated, no
quoting, ``\\n`` (or ``\\r\\n``) line ends, one header line then one row per input then per
output. The header is one of:

* AICPU path (and host path with the default items), :data:`STATS_HEADER`::

    Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,Negative Inf Count,Positive Inf Count

* host path with another item set: the six base columns, ``Count``, then the enabled items of
  ``Max Value, Min Value, Avg Value, Nan Count, Negative Inf Count, Positive Inf Count, l2norm``
  in that order.

Cells: ``Input``/``Output``; index and data size are unsigned integers; data type ``DT_*``
(``-``/``UNKNOW`` = unknown -> None); format without the ``FORMAT_`` prefix (``-`` -> None);
shape as dims joined by ``x`` (``-`` = no dims -> ``()``); statistics are C++ ``ostream``
numbers (``%g``, ``nan``, ``inf``) or integers for counts; an empty cell or ``NA`` (stats not
computed) -> None. Malformed input raises :class:`StatsFormatError` with file, line, column and
byte offset of the cell.

Limits (a stats CSV has one short row per input and output of one op): the file is at most
64 MiB, a line at most :data:`MAX_LINE_BYTES` (64 KiB), at most :data:`MAX_ROWS` (65,536)
rows, integers at most 20 digits (uint64), shapes at most 64 dims. Cost: the file is read in
256 KiB chunks, empty lines are skipped in C, every other line is parsed as it comes and
split at most once per header column, so the peak memory of :func:`read_stats_csv` and
:func:`parse_stats_text` (input bytes not counted) is **at most 4 x the input size + 64 MB**
(a row takes about 600 bytes: about 40 MB at the row limit), and their time is linear in the
input size.
"""
import io
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import StatsFormatError
from ._text_lines import nonblank_lines

__all__ = [
    "STATS_HEADER",
    "MAX_LINE_BYTES",
    "MAX_ROWS",
    "BASE_COLUMNS",
    "STAT_ITEMS",
    "VARIANT_DEFAULT",
    "VARIANT_HOST",
    "StatsRow",
    "StatsFile",
    "read_stats_csv",
    "parse_stats_text",
    "write_stats_csv",
    "format_stats_csv",
    "compute_stats",
    "tensor_statistics",
]

BASE_COLUMNS = ("Input/Output", "Index", "Data Size", "Data Type", "Format", "Shape")
#: Optional statistic columns of the host path, in their fixed order (stats mask bits 0..6).
STAT_ITEMS = ("Max Value", "Min Value", "Avg Value", "Nan Count", "Negative Inf Count", "Positive Inf Count", "l2norm")
STATS_HEADER = BASE_COLUMNS + (
    "Max Value",
    "Min Value",
    "Avg Value",
    "Count",
    "Nan Count",
    "Negative Inf Count",
    "Positive Inf Count",
)
VARIANT_DEFAULT = "default"
VARIANT_HOST = "host"

# column -> StatsRow field; parse kind
_COLUMNS = {
    "Input/Output": ("direction", "direction"),
    "Index": ("index", "uint"),
    "Data Size": ("data_size", "uint"),
    "Data Type": ("data_type", "dtype"),
    "Format": ("format", "name"),
    "Shape": ("shape", "shape"),
    "Max Value": ("max_value", "float"),
    "Min Value": ("min_value", "float"),
    "Avg Value": ("avg_value", "float"),
    "Count": ("count", "count"),
    "Nan Count": ("nan_count", "count"),
    "Negative Inf Count": ("negative_inf_count", "count"),
    "Positive Inf Count": ("positive_inf_count", "count"),
    "l2norm": ("l2norm", "float"),
}
_MAX_BYTES = 64 * 1024 * 1024  # a stats CSV has one short row per tensor
#: Longest line (without its line end) a stats CSV may hold.
MAX_LINE_BYTES = 64 * 1024
#: Most data rows a stats CSV may hold.
MAX_ROWS = 65536
_MAX_DIGITS = 20  # uint64
_MAX_DIMS = 64
_MAX_COLUMNS = len(BASE_COLUMNS) + 1 + len(STAT_ITEMS)
_UINT = re.compile(r"[0-9]{1,20}\Z")
_FLOAT = re.compile(r"[+-]?(?:nan|inf|infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)\Z", re.IGNORECASE)
_SHAPE = re.compile(r"[0-9]+(?:x[0-9]+)*\Z")
_NAME = re.compile(r"[A-Za-z0-9_]+\Z")
_UNKNOWN = ("-", "UNKNOW")
_NAMES = {}  # type: Dict[str, str]  # data type and format names, shared by all rows
_MISSING = ("", "NA")

PathName = Union[str, os.PathLike]
Number = Union[int, float]


@dataclass(frozen=True)
class StatsRow:
    """One tensor's row. Statistic fields are None when the column is absent or not computed."""

    direction: str
    index: int
    data_size: int
    data_type: Optional[str]
    format: Optional[str]
    shape: Tuple[int, ...]
    max_value: Optional[Number] = None
    min_value: Optional[Number] = None
    avg_value: Optional[Number] = None
    count: Optional[int] = None
    nan_count: Optional[int] = None
    negative_inf_count: Optional[int] = None
    positive_inf_count: Optional[int] = None
    l2norm: Optional[Number] = None


@dataclass(frozen=True)
class StatsFile:
    """A parsed stats CSV: its columns, which header variant, and the rows in file order."""

    path: str
    columns: Tuple[str, ...]
    variant: str
    rows: Tuple[StatsRow, ...]


def read_stats_csv(path: PathName) -> StatsFile:
    """Read and validate one stats CSV."""
    path = os.fspath(path)
    if os.path.getsize(path) > _MAX_BYTES:
        raise StatsFormatError(path, "stats CSV larger than {} bytes".format(_MAX_BYTES), 0)
    with open(path, "rb") as handle:
        return _parse(handle, path)


def parse_stats_text(data: bytes, path: PathName = "<stats.csv>") -> StatsFile:
    """Parse the bytes of a stats CSV; ``path`` names it in errors."""
    return _parse(io.BytesIO(data), path)


def _parse(handle: Any, path: PathName) -> StatsFile:
    columns = None  # type: Optional[Tuple[str, ...]]
    variant = ""
    rows = []  # type: List[StatsRow]
    for number, offset, raw in nonblank_lines(handle, path, MAX_LINE_BYTES, StatsFormatError):
        line = _text(raw, path, number, offset)
        if columns is None:
            if number != 1:  # the first line is empty: no header
                _header_variant(("",), path, 0)
            columns = tuple(line.split(",", _MAX_COLUMNS))
            variant = _header_variant(columns, path, offset)
        elif line:
            if len(rows) >= MAX_ROWS:
                raise StatsFormatError(path, "line {}: more than {} rows".format(number, MAX_ROWS), offset)
            rows.append(_parse_row(columns, line, path, number, offset))
    if columns is None:
        if handle.tell():  # only empty lines: the header line is empty
            _header_variant(("",), path, 0)
        raise StatsFormatError(path, "empty file: expected the header line", 0)
    return StatsFile(str(path), columns, variant, tuple(rows))


def _text(raw: bytes, path: PathName, number: int, offset: int) -> str:
    if raw.endswith(b"\r"):
        raw = raw.rstrip(b"\r")
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise StatsFormatError(path, "line {}: not ASCII".format(number), offset + exc.start)


def _header_variant(columns: Tuple[str, ...], path: PathName, offset: int) -> str:
    if columns == STATS_HEADER:
        return VARIANT_DEFAULT
    base = len(BASE_COLUMNS)
    items = columns[base + 1 :]
    if columns[:base] == BASE_COLUMNS and columns[base : base + 1] == ("Count",) and _ordered_subset(items):
        return VARIANT_HOST
    raise StatsFormatError(
        path,
        "line 1: header is neither {!r} nor the base columns + Count + items of {}".format(
            ",".join(STATS_HEADER), ",".join(STAT_ITEMS)
        ),
        offset,
    )


def _ordered_subset(items: Sequence[str]) -> bool:
    positions = [STAT_ITEMS.index(item) if item in STAT_ITEMS else -1 for item in items]
    return all(p >= 0 for p in positions) and positions == sorted(set(positions))


def _parse_row(columns: Tuple[str, ...], line: str, path: PathName, number: int, offset: int) -> StatsRow:
    cells = line.split(",", len(columns))  # one piece more than the header has cells: too many
    if len(cells) != len(columns):
        raise StatsFormatError(
            path, "line {}: {} cells, the header has {}".format(number, line.count(",") + 1, len(columns)), offset
        )
    values = {}  # type: Dict[str, Any]
    cell_offset = offset
    for column, cell in zip(columns, cells):
        field, kind = _COLUMNS[column]
        try:
            values[field] = _parse_cell(kind, cell)
        except ValueError as exc:
            raise StatsFormatError(
                path, "line {} column {!r}: {} (cell {!r})".format(number, column, exc, cell), cell_offset
            )
        cell_offset += len(cell) + 1
    return StatsRow(**values)


def _parse_cell(kind: str, cell: str) -> Any:
    if kind == "direction":
        if cell == "Input":
            return "Input"  # the constant: rows share one string
        if cell == "Output":
            return "Output"
        raise ValueError("expected Input or Output")
    if kind == "uint":
        if not _UINT.match(cell):
            raise ValueError("expected an unsigned integer of at most {} digits".format(_MAX_DIGITS))
        return int(cell)
    if kind in ("dtype", "name"):
        if cell in _UNKNOWN:
            return None
        if not _NAME.match(cell):
            raise ValueError("expected a type or format name")
        return _NAMES.setdefault(cell, cell) if len(_NAMES) < 4096 or cell in _NAMES else cell
    if kind == "shape":
        if cell == "-":
            return ()
        if not _SHAPE.match(cell):
            raise ValueError("expected dims joined by 'x' or '-'")
        dims = cell.split("x", _MAX_DIMS)
        if len(dims) > _MAX_DIMS:
            raise ValueError("more than {} dims".format(_MAX_DIMS))
        if any(len(dim) > _MAX_DIGITS for dim in dims):
            raise ValueError("a dim of more than {} digits".format(_MAX_DIGITS))
        return tuple(int(dim) for dim in dims)
    if cell in _MISSING:
        return None
    if kind == "count":
        if not _UINT.match(cell):
            raise ValueError("expected an unsigned integer count of at most {} digits".format(_MAX_DIGITS))
        return int(cell)
    if not _FLOAT.match(cell):
        raise ValueError("expected a number, nan or inf")
    return float(cell)


# --------------------------------------------------------------------------- writing


def format_stats_csv(rows: Iterable[StatsRow]) -> str:
    """The text of a stats CSV with :data:`STATS_HEADER`, as the AICPU writer prints it."""
    attrs = [_COLUMNS[column][0] for column in STATS_HEADER]
    lines = [",".join(STATS_HEADER)]
    for row in rows:
        lines.append(",".join(_format_cell(attr, getattr(row, attr)) for attr in attrs))
    return "\n".join(lines) + "\n"


def write_stats_csv(path: PathName, rows: Iterable[StatsRow]) -> None:
    """Write a stats CSV (:data:`STATS_HEADER`, one line per row)."""
    text = format_stats_csv(rows)
    with open(os.fspath(path), "w", encoding="ascii", newline="") as handle:
        handle.write(text)


def _format_cell(attr: str, value: Any) -> str:
    if value is None:
        return "-" if attr in ("data_type", "format") else ""
    if isinstance(value, tuple):
        return "x".join(str(dim) for dim in value) if value else "-"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "%g" % value  # C++ ostream default: 6 significant digits, nan, inf
    return str(value)


# Stats are computed for these numpy kinds only (§3.2); others leave the seven cells empty.
_STATS_DTYPES = frozenset(
    np.dtype(name)
    for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64")
    + ("uint8", "uint16", "uint32", "uint64", "bool")
)


def compute_stats(array: np.ndarray) -> Dict[str, Optional[Number]]:
    """The seven statistics of :data:`STATS_HEADER` for one tensor, keyed by StatsRow field.

    Our convention (CANN's treatment of non-finite values in max/min/avg is not documented):
    max, min and avg over the finite elements (nan when there is none); int8/uint8/bool
    max and min as integers. Unsupported dtypes give all-None.
    """
    names = ("max_value", "min_value", "avg_value", "count", "nan_count", "negative_inf_count", "positive_inf_count")
    if array.dtype not in _STATS_DTYPES:
        return dict.fromkeys(names)
    flat = array.reshape(-1)
    if flat.dtype.kind == "f":
        nan = int(np.count_nonzero(np.isnan(flat)))
        neg = int(np.count_nonzero(np.isneginf(flat)))
        pos = int(np.count_nonzero(np.isposinf(flat)))
        finite = flat[np.isfinite(flat)].astype(np.float64)
    else:
        nan = neg = pos = 0
        finite = flat
    if finite.size == 0:
        high = low = avg = float("nan")  # type: Number
    elif flat.dtype.kind == "b" or (flat.dtype.itemsize == 1 and flat.dtype.kind in "iu"):
        high, low = int(finite.max()), int(finite.min())
        avg = float(finite.astype(np.float64).mean())
    else:
        high, low = float(finite.max()), float(finite.min())
        avg = float(finite.astype(np.float64).mean())
    return dict(zip(names, (high, low, avg, int(flat.size), nan, neg, pos)))


_SHORT_NAMES = (("max_value", "max"), ("min_value", "min"), ("avg_value", "avg"), ("count", "count"),
                ("nan_count", "nan"), ("negative_inf_count", "neg_inf"), ("positive_inf_count", "pos_inf"))
_NORM_CHUNK = 1 << 20


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


def _l2norm(flat: np.ndarray) -> Optional[float]:
    total = 0.0
    for start in range(0, flat.size, _NORM_CHUNK):
        chunk = np.asarray(flat[start:start + _NORM_CHUNK], dtype=np.float64)
        if flat.dtype.kind == "f":
            chunk = chunk[np.isfinite(chunk)]
        total += float(np.dot(chunk, chunk))
    return float(np.sqrt(total))


def tensor_statistics(array: np.ndarray) -> Dict[str, Optional[Number]]:
    """:func:`compute_stats` under short JSON names (``max``, ``min``, ``avg``, ``count``, ``nan``,
    ``neg_inf``, ``pos_inf``; None for a value that is not a finite number) plus ``l2norm``, the
    Euclidean norm of the finite elements (None for dtypes compute_stats does not cover)."""
    found = compute_stats(array)
    stats = {short: _finite_or_none(found.get(name)) for name, short in _SHORT_NAMES}
    stats["l2norm"] = _l2norm(array.reshape(-1)) if stats["count"] is not None else None
    return stats
