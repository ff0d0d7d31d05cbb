"""Scalar values of protobuf text format as the GE graph scanner reads them: string bodies with
their C escapes resolved (:func:`unescape`, in 64 KiB pieces so memory stays the result and one
piece), integers (:func:`int_value`: decimal, or base-prefixed ``0x``/``-0``) and bools
(:func:`bool_value`). Each raises GraphFormatError(path, rule, offset) on a bad value.
"""
import codecs
import re

from ..errors import GraphFormatError
from ._text_lines import NOT_PLAIN_ESCAPE as _NOT_PLAIN_ESCAPE

__all__ = ["unescape", "int_value", "bool_value", "TRUE"]


_ESCAPE = re.compile(
    rb'\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))', re.S)
_SIMPLE_ESCAPES = {
    b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f",
    b"v": b"\v", b"\\": b"\\", b"'": b"'", b'"': b'"', b"?": b"?",
}


_UNESCAPE_PIECE = 1 << 16  # a long string is resolved in pieces of this many bytes
_LONGEST_ESCAPE = 10  # \U0010FFFF


def unescape(raw: bytes, path: str, offset: int) -> bytes:
    """Bytes of a text-format string body (without quotes); C escapes resolved, in pieces of
    at most _UNESCAPE_PIECE bytes cut between escapes (memory: the result and one piece)."""
    if b"\\" not in raw:
        return raw
    if len(raw) <= _UNESCAPE_PIECE:
        return _unescape_piece(raw, path, offset)
    pieces = []
    start, size = 0, len(raw)
    while start < size:
        cut = min(start + _UNESCAPE_PIECE, size)
        if cut < size:
            last = raw.rfind(b"\\", cut - _LONGEST_ESCAPE, cut)
            if last >= 0:  # parity of the run of backslashes ending there, from an escape boundary
                run = last + 1 - start - len(raw[start:last + 1].rstrip(b"\\"))
                cut = last if run % 2 else last + 1
        pieces.append(_unescape_piece(raw[start:cut], path, offset + start))
        start = cut
    return b"".join(pieces)


def _unescape_piece(raw: bytes, path: str, offset: int) -> bytes:
    if _NOT_PLAIN_ESCAPE.search(raw) is None:
        return codecs.escape_decode(raw)[0]

    def replace(match: "re.Match[bytes]") -> bytes:
        octal, hex2, u4, u8, simple = match.groups()
        if octal is not None:
            value = int(octal, 8)
            if value > 0xFF:
                raise GraphFormatError(path, "octal escape above \\377", offset + match.start())
            return bytes((value,))
        if hex2 is not None:
            return bytes((int(hex2, 16),))
        if u4 is not None or u8 is not None:
            code = int(u4 or u8, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise GraphFormatError(path, "invalid unicode escape", offset + match.start())
            return chr(code).encode("utf-8")
        if simple in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[simple]
        raise GraphFormatError(path, "invalid escape \\{}".format(
            simple.decode("latin-1")), offset + match.start())

    return _ESCAPE.sub(replace, raw)


def _text(raw: bytes, path: str, offset: int) -> str:
    """A string value as str: escapes resolved, UTF-8 decoded (bad bytes become U+FFFD)."""
    return unescape(raw, path, offset).decode("utf-8", "replace")


def int_value(raw: bytes, path: str, offset: int) -> int:
    try:
        return int(raw, 0) if raw[:2].lower() in (b"0x", b"-0") and len(raw) > 2 else int(raw)
    except ValueError:
        raise GraphFormatError(path, "expected an integer, got {!r}".format(
            raw[:40].decode("latin-1")), offset) from None


TRUE = frozenset((b"true", b"True", b"t", b"1"))
_FALSE = frozenset((b"false", b"False", b"f", b"0"))


def bool_value(raw: bytes, path: str, offset: int) -> bool:
    if raw in TRUE:
        return True
    if raw in _FALSE:
        return False
    raise GraphFormatError(path, "expected a bool, got {!r}".format(
        raw[:40].decode("latin-1")), offset)
