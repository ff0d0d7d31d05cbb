"""A fast reader for the common stats CSV (GE's default header, every cell plain), for the
statistics compare of many ops: one regular expression per line checks exactly what
:func:`npu_dump_hook.formats.stats_csv.read_stats_csv` checks cell by cell (the same grammar), then
the cells are converted. Anything else -- another header variant, ``NA`` or empty cells, a line
the expression does not match, a file over 1 MiB -- is read by ``read_stats_csv`` itself, which
also gives the error message for a malformed file. Same result either way."""
import os
import re
from typing import Any, List, Optional

from ..bundle import open_regular
from ..formats.stats_csv import STATS_HEADER, StatsRow, read_stats_csv

__all__ = ["read_stats_rows"]

_HEADER = ",".join(STATS_HEADER)
_F = r"((?i:[+-]?(?:nan|inf|infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)))"
_U = r"([0-9]{1,20})"
_ROW = re.compile(r"(Input|Output),{u},{u},([A-Za-z0-9_]+|-),([A-Za-z0-9_]+|-),(-|[0-9]{{1,20}}(?:x[0-9]{{1,20}}){{0,63}}),"
                  r"{f},{f},{f},{u},{u},{u},{u}\Z".format(u=_U, f=_F))
_UNKNOWN = ("-", "UNKNOW")
_MAX_FAST = 1 << 20


def _name(cell: str) -> Optional[str]:
    return None if cell in _UNKNOWN else cell


def _fast(text: str) -> Optional[List[StatsRow]]:
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0] != _HEADER:
        return None
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        match = _ROW.match(line)
        if match is None:
            return None
        c = match.groups()
        shape = () if c[5] == "-" else tuple(int(d) for d in c[5].split("x"))
        rows.append(StatsRow(c[0], int(c[1]), int(c[2]), _name(c[3]), _name(c[4]), shape, float(c[6]),
                             float(c[7]), float(c[8]), int(c[9]), int(c[10]), int(c[11]), int(c[12])))
    return rows


def read_stats_rows(path: str) -> List[Any]:
    """The rows of the stats CSV at ``path`` (StatsRow, file order); errors as read_stats_csv's."""
    try:
        with open_regular(path, buffering=0) as handle:
            if os.fstat(handle.fileno()).st_size <= _MAX_FAST:
                found = _fast(handle.read().decode("ascii"))
                if found is not None:
                    return found
    except (OSError, UnicodeDecodeError):
        pass  # read_stats_csv says what is wrong
    return list(read_stats_csv(path).rows)
