"""The fallback full parse of GE graph text: ``google.protobuf.text_format`` fed line by line,
with its costs guarded (the job of :func:`.ge_text.parse_model_text` for any text the fast parse
of :mod:`._ge_text_wire` declines).

:func:`parse_lines` parses ``text`` into ``model`` (unknown fields and extensions skipped with
``allow_unknown``) or raises GraphFormatError naming the file, line, column and byte offset.
Blocks nested deeper than :data:`MAX_NESTING` are refused at the line that opens one; lines
longer than :data:`LONG_LINE` characters are laid out again (see the comment below); the text
is cut into lines :data:`CHUNK_CHARS` characters at a time, never split whole.
"""
import bisect
import logging
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

from google.protobuf import text_format

from ..errors import GraphFormatError

__all__ = ["MAX_NESTING", "LONG_LINE", "CHUNK_CHARS", "parse_lines"]

_LOG = logging.getLogger(__package__ + ".ge_text")  # logged as the public module


# --------------------------------------------------------------------------- full parse
#
# text_format is given the text line by line through :class:`_LineGuard`, which costs one
# regex search per line (more only on lines with block delimiters) and guards text_format's
# own costs: its tokenizer recurses about twice per nesting level (RecursionError past ~500
# levels) and matches blanks and escapes with regexes whose repeated groups keep ~150 bytes
# per character of a run (10 MB of spaces took 1.6 GB), and it splits the text into a list of
# all lines. So blocks nested deeper than MAX_NESTING are a GraphFormatError at the line that
# opens one; a line longer than LONG_LINE characters is laid out again on the same line (runs
# of over _BLANK_RUN blanks become one space, strings longer than _STRING_PIECE characters
# become adjacent string pieces, which text format concatenates; a name or number longer than
# _MAX_WORD characters is refused), and the lines are cut from the text one chunk at a time.
# Columns that text_format reports on a laid-out line are mapped back to the original ones.

#: Deepest block nesting :func:`parse_model` reads (the scanner's limit, and protobuf C++'s default).
MAX_NESTING = 100
LONG_LINE = 4096
_BLANK_RUN = 64
_STRING_PIECE = 1024
_MAX_WORD = 4096
CHUNK_CHARS = 256 * 1024
_ESCAPE_CHARS = 10  # the longest C escape, \\U0010FFFF
_DELIMITERS = re.compile(r"[\"'#{}<>]")
_WORD_CHARS = r"[^\s\"'#{}<>:\[\],;/]"
_LONG_LINE_ITEM = re.compile(r"[\"'#{}<>]|\s{" + str(_BLANK_RUN + 1) + r",}|(?<!" + _WORD_CHARS + r")"
                             + _WORD_CHARS + "{" + str(_MAX_WORD + 1) + "}")
_MESSAGE_HEAD = re.compile(r"\d+(?::\d+)? : ")
_MAX_RULE = 300


class _LineGuard(object):
    """The lines of ``text`` for text_format, checked and laid out (see the section comment)."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.depth = 0
        self.number = 0  # 1-based number of the line last yielded
        # laid-out line number -> [(column in it, column in the input)], 0-based, ascending
        self.columns: Dict[int, List[Tuple[int, int]]] = {}
        self.refused: Optional[GraphFormatError] = None

    def lines(self) -> Iterator[str]:
        """The lines, cut from the text one chunk at a time; ends early when one is refused
        (:attr:`refused` then holds the error)."""
        text, size, start = self.text, len(self.text), 0
        try:
            while start < size:
                end = text.find("\n", start + CHUNK_CHARS)
                end = size if end < 0 else end + 1
                lines = text[start:end].split("\n")
                if text[end - 1] == "\n":
                    lines.pop()  # the empty piece after the chunk's last newline
                start = end
                for line in lines:
                    self.number += 1
                    yield self.check(line)
        except GraphFormatError as exc:
            self.refused = exc  # not raised through text_format, which may catch ValueError

    def check(self, line: str) -> str:
        if len(line) > LONG_LINE:
            return self.relayout(line)
        if "{" in line or "<" in line or "}" in line or ">" in line:
            if "\"" in line or "'" in line or "#" in line:
                self.track(line, 0, len(line))
            else:
                opened = line.count("{") + line.count("<")
                closed = line.count("}") + line.count(">")
                if (closed and opened) or self.depth + opened > MAX_NESTING:
                    self.track(line, 0, len(line))  # in order; finds the brace past the limit
                elif opened:
                    self.depth += opened
                else:
                    self.depth = max(0, self.depth - closed)
        return line

    def open_block(self, column: int) -> None:
        """Count a block opened at ``column`` (0-based) of the current line."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise GraphFormatError(self.path, "line {} column {}: blocks nested deeper than {} (the nesting "
                                   "limit)".format(self.number, column + 1, MAX_NESTING),
                                   _line_col_to_offset(self.text, self.number, column + 1))

    def track(self, line: str, pos: int, stop: int) -> None:
        """Follow the block delimiters of ``line[pos:stop]`` outside strings and comments."""
        search = _DELIMITERS.search
        while True:
            found = search(line, pos, stop)
            if found is None:
                return
            char, pos = found.group(), found.end()
            if char == "{" or char == "<":
                self.open_block(found.start())
            elif char == "}" or char == ">":
                self.depth = max(0, self.depth - 1)
            elif char == "#":
                return
            else:
                pos = _string_end(line, found.start(), char)
                if pos < 0:
                    return

    def relayout(self, line: str) -> str:
        out = []  # type: List[str]
        marks = []  # type: List[Tuple[int, int]]
        copied = written = pos = 0
        search = _LONG_LINE_ITEM.search
        while True:
            found = search(line, pos)
            if found is None:
                break
            start, char = found.start(), line[found.start()]
            pos = found.end()
            if char == "{" or char == "<":
                self.open_block(start)
            elif char == "}" or char == ">":
                self.depth = max(0, self.depth - 1)
            elif char == "#":
                break
            elif char == "\"" or char == "'":
                end = _string_end(line, start, char)
                if end < 0:
                    break
                pos = end
                if end - start - 2 > _STRING_PIECE:
                    out.append(line[copied:start])
                    written += start - copied
                    written = _split_string(line, start, end, out, marks, written)
                    copied = end
            elif char.isspace():
                out.append(line[copied:start] + " ")
                written += start - copied + 1
                marks.append((written, pos))
                copied = pos
            else:
                raise GraphFormatError(self.path, "line {} column {}: a name or number longer than {} "
                                       "characters".format(self.number, start + 1, _MAX_WORD),
                                       _line_col_to_offset(self.text, self.number, start + 1))
        if not marks:
            return line
        out.append(line[copied:])
        self.columns[self.number] = marks
        return "".join(out)

    def original_column(self, line: int, column: int) -> int:
        """The 1-based column in the input of ``column`` (1-based) of laid-out ``line``."""
        marks = self.columns.get(line)
        if not marks:
            return column
        index = bisect.bisect_right(marks, (column - 1, float("inf"))) - 1
        if index < 0:
            return column
        new, old = marks[index]
        return old + (column - 1 - new) + 1


def _string_end(line: str, start: int, quote: str) -> int:
    """Index after the closing ``quote`` of the string opened at ``line[start]``; -1 if none."""
    pos = start + 1
    while True:
        close = line.find(quote, pos)
        if close < 0:
            return -1
        piece = line[pos:close]
        if (len(piece) - len(piece.rstrip("\\"))) % 2 == 0:  # the quote is not escaped
            return close + 1
        pos = close + 1


def _split_string(line: str, start: int, end: int, out: List[str], marks: List[Tuple[int, int]],
                  written: int) -> int:
    """Append ``line[start:end]`` (a quoted string) as adjacent pieces of at most
    _STRING_PIECE characters, cut between escapes; the new written length."""
    quote = line[start]
    body_start, body_end = start + 1, end - 1
    piece = body_start
    out.append(quote)
    written += 1
    while body_end - piece > _STRING_PIECE:
        cut = piece + _STRING_PIECE
        last = line.rfind("\\", cut - _ESCAPE_CHARS, cut)
        if last >= 0:
            run = last + 1 - piece - len(line[piece:last + 1].rstrip("\\"))
            cut = last if run % 2 else last + 1  # before an escape / after an escaped backslash
        out.append(line[piece:cut])
        out.append(quote + " " + quote)
        written += cut - piece + 3
        marks.append((written, cut))
        piece = cut
    out.append(line[piece:end])
    written += end - piece
    marks.append((written, end))
    return written


def _line_col_to_offset(text: str, line: int, column: int) -> int:
    """Byte offset (UTF-8) of a 1-based (line, column) position in ``text``; counted a chunk at
    a time, so an error late in a large text costs no list of its lines."""
    start, remaining, size = 0, line - 1, len(text)
    while remaining > 0 and start < size:
        stop = min(start + CHUNK_CHARS, size)
        count = text.count("\n", start, stop)
        if count < remaining:
            remaining -= count
            start = stop
            continue
        for _ in range(remaining):
            start = text.index("\n", start) + 1
        remaining = 0
    line_end = text.find("\n", start)
    position = min(start + max(column - 1, 0), size if line_end < 0 else line_end)
    return sum(len(text[at:min(at + CHUNK_CHARS, position)].encode("utf-8", "surrogatepass"))
               for at in range(0, position, CHUNK_CHARS))


def parse_lines(text: str, model: Any, allow_unknown: bool, path: str) -> None:
    guard = _LineGuard(text, path)
    try:
        try:
            _parse_into(guard, model, allow_unknown)
        except TypeError:  # protobuf older than 3.8 (below our 3.20.3 floor): strict parse
            if not allow_unknown:
                raise
            _LOG.warning("this protobuf cannot skip unknown fields; parsing strictly")
            model.Clear()
            guard = _LineGuard(text, path)
            text_format.ParseLines(guard.lines(), model, allow_unknown_extension=True)
    except text_format.ParseError as exc:
        if guard.refused is not None:
            raise guard.refused from None
        raise _parse_error(exc, guard, text, path) from None
    except RecursionError:
        raise GraphFormatError(path, "blocks nested too deeply for protobuf's text parser (limit {})".format(
            MAX_NESTING), None) from None
    if guard.refused is not None:
        raise guard.refused


def _parse_into(guard: _LineGuard, model: Any, allow_unknown: bool) -> None:
    if allow_unknown:
        text_format.ParseLines(guard.lines(), model, allow_unknown_extension=True, allow_unknown_field=True)
    else:
        text_format.ParseLines(guard.lines(), model)


def _parse_error(exc: Any, guard: _LineGuard, text: str, path: str) -> GraphFormatError:
    """GraphFormatError for text_format's ParseError: the input's line, column and byte offset,
    the message clipped (text_format quotes the whole current line)."""
    line, column = exc.GetLine(), exc.GetColumn()
    message = str(exc)
    head = _MESSAGE_HEAD.match(message)
    message = message[head.end():] if head else message
    if len(message) > _MAX_RULE:
        message = message[:100] + " ... " + message[-(_MAX_RULE - 100):]
    if line is None:
        return GraphFormatError(path, "text format: {}".format(message), None)
    column = guard.original_column(line, column or 1)
    return GraphFormatError(path, "text format: {}:{} : {}".format(line, column, message),
                            _line_col_to_offset(text, line, column))
