"""Lines of a text file read in fixed chunks, for the line-based readers (mapping.csv, stats CSV).

:func:`nonblank_lines` reads 256 KiB at a time and yields ``(number, offset, line)`` for each
line that is not empty: ``number`` is 1-based, ``offset`` the byte offset of the line in the
input, ``line`` its bytes without the ``\\n`` (a ``\\r`` before it is kept). A chunk is split
with ``bytes.split``, or, when almost all its lines are empty, walked with ``re.finditer``,
which skips them in C (counted with ``bytes.count``): a file of millions of newlines costs a
few C loops per chunk, not a Python iteration per line. A line longer than ``max_line`` bytes
(final ``\\r`` not counted) raises ``error(path, rule, offset)`` as soon as it is seen.
Memory: one chunk, the line in progress (at most ``max_line`` + 1 bytes) and the chunk's
lines while they are yielded (under 40 bytes per line of the chunk).

For protobuf text format (the GE graph readers): :func:`string_end` finds the end of a quoted
string token without a regex whose repeated group would cost memory per escape, and
:data:`NOT_PLAIN_ESCAPE` finds the escapes ``codecs.escape_decode`` does not resolve as text
format does.
"""
import re
from typing import Any, Callable, Iterator, Tuple

__all__ = ["nonblank_lines", "CHUNK_BYTES", "string_end", "NOT_PLAIN_ESCAPE"]

CHUNK_BYTES = 256 * 1024
_NONEMPTY = re.compile(rb"[^\n]+")


def nonblank_lines(
    handle: Any, path: Any, max_line: int, error: Callable[..., Exception], chunk_bytes: int = CHUNK_BYTES
) -> Iterator[Tuple[int, int, bytes]]:
    """``(number, offset, line)`` of the non-empty lines of binary ``handle`` (see the module doc)."""
    pending = b""
    before = 0  # newlines before the current body
    base = 0  # byte offset of the current body
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        data = pending + chunk if pending else chunk
        end = data.rfind(b"\n") + 1
        if end == 0:
            pending = data
        else:
            body, pending = (data, b"") if end == len(data) else (data[:end], data[end:])
            del data
            newlines = body.count(b"\n")
            # A run of empty lines holds about twice as many newlines as non-overlapping "\n\n".
            if body.count(b"\n\n") * 20 < newlines * 9:  # under ~90% empty: split is the fastest walk
                number, offset = before, base
                for line in body.split(b"\n"):  # the last piece, after the final newline, is empty
                    number += 1
                    if line:
                        if len(line) > max_line and len(line.rstrip(b"\r")) > max_line:
                            raise _too_long(error, path, number, max_line, offset)
                        yield number, offset, line
                    offset += len(line) + 1
            else:  # mostly empty lines: let the regex skip them
                seen = pos = 0  # newlines of body[:pos]
                count = body.count
                for match in _NONEMPTY.finditer(body):
                    start, stop = match.span()
                    seen += count(b"\n", pos, start)
                    if stop - start > max_line and len(body[start:stop].rstrip(b"\r")) > max_line:
                        raise _too_long(error, path, before + seen + 1, max_line, base + start)
                    yield before + seen + 1, base + start, match.group()
                    pos = stop
            before += newlines
            base += end
        if len(pending) > max_line + 1 and len(pending.rstrip(b"\r")) > max_line:
            raise _too_long(error, path, before + 1, max_line, base)
    if pending:
        if len(pending.rstrip(b"\r")) > max_line:
            raise _too_long(error, path, before + 1, max_line, base)
        yield before + 1, base, pending


def _too_long(error: Callable[..., Exception], path: Any, number: int, max_line: int, offset: int) -> Exception:
    return error(path, "line {}: longer than {} bytes".format(number, max_line), offset)


#: Escapes ``codecs.escape_decode`` resolves as text format does are all but these: \? \u \U,
#: an unknown letter, \x without two hex digits, octal above \377 (the search may also hit
#: the second backslash of \\; that only costs the slower path).
NOT_PLAIN_ESCAPE = re.compile(rb'\\(?:[^ntrabfv\\\'"0-7x]|x(?![0-9A-Fa-f]{2})|[4-7][0-7]{2})', re.S)


#: What may end a string opened by the key: the same quote after anything but a backslash, the
#: same quote after two backslashes (closing when the run of them is even), or a newline.
STRING_STOP = {b'"': re.compile(rb'(?<!\\)"|(?<=\\\\)"|\n'),
               b"'": re.compile(rb"(?<!\\)'|(?<=\\\\)'|\n")}


def string_end(data: Any, start: int) -> int:
    """Offset after the closing quote of the string token opened at ``data[start]`` (the same
    quote, not escaped, with no newline before it), or -1 when it has none. Quotes after a
    single backslash are passed over by the regex, the rest are checked here."""
    search = STRING_STOP[data[start:start + 1]].search
    pos = start + 1
    while True:
        found = search(data, pos)
        if found is None or found.group() == b"\n":
            return -1
        close = found.start()
        if data[close - 1:close] != b"\\":
            return close + 1
        piece = data[pos:close]  # the run of backslashes before the quote starts after pos
        if (len(piece) - len(piece.rstrip(b"\\"))) % 2 == 0:
            return close + 1
        pos = close + 1
