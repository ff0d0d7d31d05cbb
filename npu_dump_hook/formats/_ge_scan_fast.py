"""The fast path of the GE graph scanner: op blocks in canonical layout read without tokenizing
them (:class:`FastOps`; see its docstring for the rules), the rest declined to the general path
(:mod:`._ge_scan_general`), which offers it each op of a graph (:meth:`FastOps.ops_at`).

What it gives is what the general path would give for those ops. Ops whose share of the file a
forked worker reads (ge_graph hands them off: :meth:`FastOps.expect_handoff`) are taken from
that worker's result where the scan reaches them.
"""
import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import GraphFormatError
from ._ge_scan_shape import BAIL as _BAIL, DIGITS_TO_0 as _DIGITS_TO_0, Shape as _Shape
from ._ge_scan_values import unescape as _unescape
from ._ge_summary import OpSummary, OutputOrigin

__all__ = ["OP_LINE", "WINDOW", "FastOps"]

OP_LINE = b"\n  op {\n"
_OP_LINE_RE = re.compile(rb"\n  op \{[ \t\r]*\n")  # an op line; OP_LINE as GE writes it
_OP_CLOSE_RE = re.compile(rb"\n  \}[ \t\r]*\n")
_LINE_END_BLANKS_RE = re.compile(rb"[ \t\r]+(?=\n)")
WINDOW = 1 << 20  # bytes of data split at a time (by default)
_MAX_SHAPES = 4096
_MAX_SHAPE_BYTES = 32 << 20


def _without_line_end_blanks(text: bytes) -> bytes:
    """``text`` without the spaces, tabs and CRs that end its lines (and itself). In valid
    text these are never inside a string, which cannot span a newline; in text with a
    string left open the string keeps its newline, and the fast path declines it."""
    if text.find(b"\r\n") >= 0:
        text = text.replace(b"\r\n", b"\n")
    for _ in range(3):  # each round drops one blank per line end: a few are the norm
        if text.find(b" \n") < 0 and text.find(b"\t\n") < 0 and text.find(b"\r\n") < 0:
            break
        text = text.replace(b" \n", b"\n").replace(b"\t\n", b"\n").replace(b"\r\n", b"\n")
    else:
        text = _LINE_END_BLANKS_RE.sub(b"", text)
    return text.rstrip(b" \t\r")


def _escaped(raw: bytes) -> str:
    """A string neutralised by FastOps (see there) as text: escapes restored, resolved."""
    if raw.find(b"\\") >= 0 or raw.find(b"\x00") >= 0:
        raw = raw.replace(b"\x00\x01", b"\\\\").replace(b"\x00\x02", b'\\"')
        raw = _unescape(raw, "", 0)
    return raw.decode("utf-8", "replace")


class FastOps(object):
    """Reads op blocks in canonical layout without tokenizing them, and declines the rest.

    The general path offers the fast path the op blocks of a graph (:meth:`ops_at`). The
    data is split, a window at a time, at the lines ``  op {``; each piece is one op block
    from its second line to its closing ``  }`` if the op is canonical (otherwise it may
    hold a different op structure, or text after the op). The piece is split at its double
    quotes into strings and the text between them; that text, with every string emptied and
    every digit made 0, is the op's *skeleton*. The skeleton must match the canonical layout
    exactly (one field or delimiter per line, ``name: value``/``name {``/``}``, indentation
    2 x nesting, and nothing else: no comments, tabs, blank lines or one-line blocks), and
    no string may hold a raw newline or a bad escape. The text between the strings is then
    the op's whole token structure, the same (up to digits) for every op of the skeleton,
    so what the general path would do with such an op is worked out once per skeleton
    (:class:`._ge_scan_shape.Shape`) and per set of attr keys, and replayed on each op's strings and words
    by a builder written for it (:mod:`._ge_scan_shape`). An op whose only deviation is
    blanks or CR at line ends (trailing whitespace, CRLF) is read once they are dropped.
    For anything else (an op that ends elsewhere, a line that is not canonical, a string
    the general path would convert) the fast path declines: the general path reads that
    op, so the result is always the general path's.

    Escaped backslashes and quotes are first replaced by two bytes each (``\\x00\\x01``,
    ``\\x00\\x02``) so that every remaining double quote delimits a string; such a text
    must not hold NUL itself. Each byte is split once (plus one op per window), so declined
    ops cost linear time too.
    """

    def __init__(self, data: Any, path: str, count_only: bool = False, window: int = WINDOW) -> None:
        self.data = data
        self.window = window  # bytes of data split at a time
        self.size = len(data)
        self.path = path
        self.count_only = count_only  # True stands for each op's summary (see _summary)
        # op word offset -> the ForkedCall reading the canonical ops from there (hand_off)
        self.handoffs = {}  # type: Dict[int, Any]
        self._breaks = set()  # type: set  # piece starts where ops_at stops: a handoff follows
        # skeleton length -> [(skeleton, _Shape or _BAIL)]
        self.shapes = {}  # type: Dict[int, List[Tuple[bytes, Any]]]
        self._shapes_of_length = self.shapes.get
        self.shape_count = self.shape_bytes = 0
        self._pieces = [b""]  # type: List[bytes]  # a window of data split at _line
        self._line = OP_LINE  # the op line the window is split at (with its blanks or CR)
        self._next = 1  # index in _pieces of the next piece to read
        self._at = -1  # offset in data of _pieces[_next]
        self._declined = -1  # offset of the op word of the op last declined

    def _load(self, start: int, line: bytes) -> None:
        """Split at ``line`` the window of data that begins with the ``line`` at ``start``,
        up to the last one within self.window bytes (or the next one, or the end)."""
        pieces = self.data[start:start + self.window].split(line)
        if start + self.window < self.size:  # the last piece is cut: the next window has it
            if len(pieces) > 2:
                pieces.pop()
            else:  # an op longer than a window
                cut = self.data.find(line, start + 1)
                pieces = (self.data[start:cut] if cut >= 0 else self.data[start:]).split(line)
        self._pieces = pieces
        self._line = line
        self._next = 1
        self._at = start + len(line)

    def _seek(self, at: int, line: bytes) -> bool:
        """Move to the piece that starts at ``at`` in data, if the window holds it."""
        if line != self._line:
            return False
        while self._at < at and self._next < len(self._pieces):
            self._at += len(self._pieces[self._next]) + len(line)
            self._next += 1
        return self._at == at and self._next < len(self._pieces)

    def ops_at(self, pos: int) -> Optional[Tuple[List[OpSummary], int]]:
        """(summaries, offset after the last) of the canonical op blocks following one
        another from the op whose ``op`` word is at ``pos``; None if that op is not
        canonical (or if no op starts there)."""
        if pos == self._declined or pos < 3:
            return None
        if self.handoffs:
            found = self._handed_back(pos)
            if found is not None:
                return found
        line = self.data[pos - 3:pos + 5]
        if line != OP_LINE:  # blanks or CR at the end of the op line?
            newline = self.data.find(b"\n", pos, pos + 64)
            line = self.data[pos - 3:newline + 1]
            if newline < 0 or _OP_LINE_RE.fullmatch(line) is None:
                return None
        at = pos - 3 + len(line)  # where the op's second line starts
        if not self._seek(at, line):
            self._load(pos - 3, line)
        pieces, index, summary_of, breaks = self._pieces, self._next, self._summary, self._breaks
        strip = line != OP_LINE  # then other lines likely end with blanks or CR too
        ops = []  # type: List[OpSummary]
        append = ops.append
        stop = -1  # where an op that ends inside its piece ends
        try:
            for index in range(index, len(pieces)):
                piece = pieces[index]
                summary = summary_of(_without_line_end_blanks(piece) if strip else piece)
                if summary is None:
                    summary, length = self._reread(piece)
                    if summary is None:
                        self._declined = at + 3 - len(line)
                        break
                    strip = True  # the next ops likely have blanks at line ends too
                    if length != len(piece) + 1:  # the general path reads the rest
                        append(summary)
                        stop = at + length
                        break
                append(summary)
                at += len(piece) + len(line)  # where the next piece starts
                if breaks and at in breaks:  # a worker has read on from the next op
                    index += 1
                    break
            else:
                index = len(pieces)
        finally:
            self._next, self._at = index, at
        if not ops:
            return None
        return ops, stop if stop >= 0 else at - len(line) + 1

    def _reread(self, piece: bytes) -> Tuple[Optional[OpSummary], int]:
        """For a piece that is not one canonical op: the summary of the op it starts with,
        if that op is canonical once blanks and CRs at line ends are dropped, and how much
        of the piece it takes (len + 1 for all of it)."""
        stripped = _without_line_end_blanks(piece)
        if len(stripped) != len(piece):
            summary = self._summary(stripped)
            if summary is not None:
                return summary, len(piece) + 1
        # the op may close before the next op line, with graph fields after it
        close = _OP_CLOSE_RE.search(piece)
        if close is not None and close.end() < len(piece):
            summary = self._summary(_without_line_end_blanks(piece[:close.start() + 4]))
            if summary is not None:
                return summary, close.end()
        return None, 0

    def _summary(self, text: bytes, join_skeleton: Any = b'""'.join, join: Any = b"".join,
                 digits_to_0: bytes = _DIGITS_TO_0, bail: Any = _BAIL) -> Optional[OpSummary]:
        """The summary of one op from the text after its op line to its closing ``}``, or
        None if the op is not canonical. (Run once per op: the keyword arguments make
        constants local; bytes.find, not "in": on Python 3.7 "in" first raises and clears
        a TypeError.)"""
        escaped = text.find(b"\\") >= 0
        if escaped:
            if text.find(b"\x00") >= 0:
                return None
            if text.find(b"\\\\") >= 0:
                text = text.replace(b"\\\\", b"\x00\x01")
            text = text.replace(b'\\"', b"\x00\x02")
        parts = text.split(b'"')
        if not len(parts) & 1:
            return None  # an odd number of quotes
        skeleton = join_skeleton(parts[0::2]).translate(digits_to_0)
        # looked up by length, then compared: hashing the skeleton would read it once more
        for known, shape in self._shapes_of_length(len(skeleton), ()):
            if known == skeleton:
                break
        else:
            shape = self._new_shape(skeleton)
        if shape is bail:
            return None
        strings = parts[1::2]
        joined = join(strings)
        if joined.find(b"\n") >= 0:
            return None  # a string left open at the end of its line
        keys = shape.key_get(strings)
        if keys == shape.last_keys:  # compares bytes; a dict look-up also hashes them
            build = shape.last_build
        else:
            build = shape.last_build = shape.variant(keys)
            shape.last_keys = keys
        if build is bail:
            return None
        try:
            decode = None
            if escaped:
                _unescape(joined, self.path, 0)
                decode = _escaped
            if self.count_only:  # the builder runs only for the checks it makes
                return not shape.checks or build(parts, strings, decode) is not None
            return build(parts, strings, decode)
        except GraphFormatError:
            return None  # the general path reports it, at its offset

    # ---- sharing the scan with forked workers
    def expect_handoff(self, op_line: int, call: Any) -> None:
        """Stop before the op line whose "\\n" is at ``op_line`` and take the result of ``call``
        there instead (a ForkedCall reading the canonical ops from that op on: _handed_back)."""
        self.handoffs[op_line + 3] = call
        self._breaks.add(op_line + len(OP_LINE))

    def stop_before(self, op_line: int) -> None:
        """Stop before the op line whose "\\n" is at ``op_line`` (the start of the next share)."""
        self._breaks.add(op_line + len(OP_LINE))

    def abandon_handoffs(self) -> None:
        """Stop and reap the children whose share was not taken."""
        calls, self.handoffs = list(self.handoffs.values()), {}
        self._breaks = set()
        for call in calls:
            call.abandon()

    def _handed_back(self, pos: int) -> Optional[Tuple[List[Any], int]]:
        """A child's (summaries, offset after the last) for the op at ``pos``, or None (no
        child started there, or it failed or found no canonical op: this scan reads on)."""
        call = self.handoffs.pop(pos, None)
        if call is None:
            return None
        self._breaks.discard(pos - 3 + len(OP_LINE))
        ok, found = call.result()
        if not ok or found is None:
            return None
        ops, stop = found
        if self.count_only:
            return [True] * ops, stop
        new = tuple.__new__
        return [new(OpSummary, (name, op_type, op_id, inputs, no_task, names,
                                tuple([new(OutputOrigin, output) for output in outputs])))
                for name, op_type, op_id, inputs, no_task, names, outputs in ops], stop

    def _new_shape(self, skeleton: bytes) -> Any:
        shape = _Shape.of(skeleton) or _BAIL
        if self.shape_count < _MAX_SHAPES and self.shape_bytes < _MAX_SHAPE_BYTES:
            self.shapes.setdefault(len(skeleton), []).append((skeleton, shape))
            self.shape_count += 1
            self.shape_bytes += len(skeleton)
        return shape
