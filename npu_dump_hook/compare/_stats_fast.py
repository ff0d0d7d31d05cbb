"""A fast reader for the common stats CSV (GE's default header, every cell plain), for the
statistics compare of many ops: one regular expression per line checks exactly what
:func:`npu_dump_hook.formats.stats_csv.read_stats_csv` checks cell by cell (the same grammar), then
the cells are converted. Anything else -- another header variant, ``NA`` or empty cells, a line
the expression does not match, a file over 1 MiB, not a regular file -- is read by
``read_stats_csv`` itself, which also gives the error message for a malformed file. Same result
either way.

The compare reads thousands of files of one or two short lines each, so the per-file cost is
what counts: the file is opened, checked and read with three system calls on its descriptor
(:func:`npu_dump_hook._files.read_small_regular`: no file object, the checks of ``open_regular``,
a FIFO never blocks, a final symlink is refused), and :func:`read_stats_cells` gives each row as a plain tuple in
:class:`StatsRow`'s field order (a frozen dataclass costs more to build than the rest of the
row's parsing).
"""
import re
from dataclasses import astuple
from typing import Any, List, Optional, Tuple

from .._files import read_small_regular
from ..formats.stats_csv import STATS_HEADER, StatsRow, read_stats_csv

__all__ = ["read_stats_rows", "read_stats_cells"]

_HEADER = ",".join(STATS_HEADER)
_F = r"((?i:[+-]?(?:nan|inf|infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)))"
_U = r"([0-9]{1,20})"
_ROW = re.compile(r"(Input|Output),{u},{u},([A-Za-z0-9_]+|-),([A-Za-z0-9_]+|-),(-|[0-9]{{1,20}}(?:x[0-9]{{1,20}}){{0,63}}),"
                  r"{f},{f},{f},{u},{u},{u},{u}\Z".format(u=_U, f=_F))
_UNKNOWN = ("-", "UNKNOW")
_MAX_FAST = 1 << 20

#: A row as a tuple in StatsRow's field order (direction, index, data_size, data_type, format,
#: shape, max_value, min_value, avg_value, count, nan_count, negative_inf_count,
#: positive_inf_count, l2norm).
Cells = Tuple[Any, ...]


def _fast(text: str) -> Optional[List[Cells]]:
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines[0] != _HEADER:
        return None
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        match = _ROW.match(line)
        if match is None:
            return None
        c = match.groups()
        dims = c[5]
        shape = () if dims == "-" else ((int(dims),) if "x" not in dims else tuple(map(int, dims.split("x"))))
        dtype, layout = c[3], c[4]
        rows.append((c[0], int(c[1]), int(c[2]), None if dtype in _UNKNOWN else dtype,
                     None if layout in _UNKNOWN else layout, shape, float(c[6]), float(c[7]), float(c[8]),
                     int(c[9]), int(c[10]), int(c[11]), int(c[12]), None))
    return rows


def read_stats_cells(path: str) -> List[Cells]:
    """The rows of the stats CSV at ``path`` as tuples in StatsRow's field order (file order);
    errors as read_stats_csv's."""
    data = read_small_regular(path, _MAX_FAST)
    if data is not None:
        try:
            found = _fast(data.decode("ascii"))
        except UnicodeDecodeError:
            found = None
        if found is not None:
            return found
    return [astuple(row) for row in read_stats_csv(path).rows]


def read_stats_rows(path: str) -> List[Any]:
    """The rows of the stats CSV at ``path`` (StatsRow, file order); errors as read_stats_csv's."""
    return [StatsRow(*cells) for cells in read_stats_cells(path)]
