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
"""
import re
from typing import Any, Callable, Iterator, Tuple

__all__ = ["nonblank_lines", "CHUNK_BYTES"]

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
