"""``--since`` of ``npu-dump-hook collect``: when the run to collect began."""
import datetime
import re
from typing import Optional

from ..errors import OptionError
from ..formats.names import parse_time_dir

__all__ = ["parse_since"]

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?"
    r"(Z|[+-]\d{2}:?\d{2})?\Z"
)
_EPOCH = re.compile(r"\d+(?:\.\d*)?\Z")
_TIME_FOLDER = re.compile(r"\d{14}\Z")
_MIN_EPOCH = 946684800  # 2000-01-01: smaller numbers are typos (a date without separators)
_MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z: the last second datetime can hold


def parse_since(text: str) -> float:
    """Epoch seconds from ``--since``: ISO 8601 (local unless it has an offset or ``Z``),
    epoch seconds (int or float, at least 946684800 = 2000-01-01), or a GE time folder
    name ``YYYYMMDDhhmmss`` (local). Bad text raises :class:`OptionError`.
    """
    raw = text
    text = str(text).strip()
    if _TIME_FOLDER.match(text):
        named = parse_time_dir(text)
        if named is None:
            raise OptionError("--since", raw, "YYYYMMDDhhmmss is not a calendar time")
        return named.timestamp()
    if _EPOCH.match(text):
        value = float(text)
        if not _MIN_EPOCH <= value <= _MAX_EPOCH:
            raise OptionError("--since", raw, "epoch seconds must be between {} (2000-01-01) and {} (9999-12-31)"
                              .format(_MIN_EPOCH, _MAX_EPOCH))
        return value
    match = _ISO.match(text)
    if not match:
        raise OptionError("--since", raw, "expected ISO 8601 (2026-11-29T07:30:00[+08:00]), "
                                          "epoch seconds, or YYYYMMDDhhmmss")
    year, month, day, hour, minute, second, frac, zone = match.groups()
    try:
        when = datetime.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                                 int(second or 0), int((frac or "0").ljust(6, "0")), _tzinfo(zone))
    except ValueError as err:
        raise OptionError("--since", raw, "not a valid date/time: {}".format(err))
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError) as err:  # outside what this platform's clock holds
        raise OptionError("--since", raw, "not a representable time: {}".format(err))


def _tzinfo(zone: Optional[str]) -> Optional[datetime.tzinfo]:
    if not zone:
        return None  # naive: local time
    if zone == "Z":
        return datetime.timezone.utc
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        raise ValueError("UTC offset {} out of range".format(zone))
    return datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
