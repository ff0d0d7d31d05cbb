"""Making untrusted text inert where it is shown: op names, file names, warnings and reasons
come from bundles made by someone else.

* :func:`printable`: for a terminal. C0 controls (including newline and tab), DEL, C1
  controls and lone surrogates (undecodable file name bytes) become visible escapes
  (``\\x1b``, ``\\x7f``, ``\\x9b``, ``\\udcff``), so no escape sequence reaches the terminal
  and printing never raises UnicodeEncodeError.
* :func:`csv_cell`: for a spreadsheet (OWASP, "CSV Injection"): a cell that starts with
  ``=``, ``+``, ``-``, ``@``, tab or carriage return is prefixed with ``'`` so it is read as
  text, not as a formula; a cell that is a plain decimal number (``-0.5``, ``-1e-05``) stays
  a number.
* :func:`utf8`: text encoded as UTF-8 with lone surrogates as visible ``\\udcff`` escapes
  (report files are valid UTF-8 whatever names they carry).
"""
import re
from typing import Any

__all__ = ["printable", "csv_cell", "utf8", "FORMULA_STARTS"]

#: First characters a spreadsheet may take for a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group(0))
    return "\\x{:02x}".format(code) if code < 0x100 else "\\u{:04x}".format(code)


def printable(text: Any) -> str:
    """``text`` (or ``str()`` of any other object: a path, an exception) with control characters and
    lone surrogates as visible escapes (see the module doc)."""
    return _UNPRINTABLE.sub(_escape, text if isinstance(text, str) else str(text))


def csv_cell(text: str) -> str:
    """``text`` safe for a spreadsheet cell: ``'`` before a formula start, numbers unchanged."""
    if text.startswith(FORMULA_STARTS) and not _NUMBER.match(text):
        return "'" + text
    return text


def utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates become ``\\udcff`` escapes instead of an error."""
    return text.encode("utf-8", "backslashreplace")
