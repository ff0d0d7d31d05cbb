"""Op skeletons of the GE graph scanner's fast path (:mod:`._ge_scan_fast`): what the general
path (:mod:`._ge_scan_general`) would extract from every op of one canonical skeleton, worked
out once (:class:`Shape`), and per set of attr keys a builder compiled for it that replays
that on each op's strings and words (:meth:`Shape.variant`).

:meth:`Shape.of` gives None for a skeleton that is not canonical or whose ops the general path
would treat differently from op to op beyond what the builders check; :meth:`Shape.variant`
gives :data:`BAIL` where the fast path must leave the op to the general path. Skeletons have
their digits made 0 (:data:`DIGITS_TO_0`). In a forked worker, :func:`use_plain_tuples` makes
the builders give plain tuples (marshal takes no namedtuple).
"""
import functools
import operator
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import GraphFormatError
from ._ge_scan_general import WORD as _WORD
from ._ge_scan_values import TRUE as _TRUE, bool_value as _bool, int_value as _int
from ._ge_summary import OpSummary, OutputOrigin

__all__ = ["Shape", "BAIL", "DIGITS_TO_0", "use_plain_tuples"]

#: The digits of a skeleton all become 0. Whether a conversion of the general path succeeds
#: does not depend on digit values except for a bool made of digits or an int with the base
#: prefix -0 (see _digit_sensitive): those are converted again for each op.
DIGITS_TO_0 = bytes.maketrans(b"0123456789", b"0000000000")
_SKELETON_DEPTH = 24  # block nesting inside an op the skeleton pattern follows
_MAX_VARIANTS = 256
BAIL = object()  # a skeleton or variant the fast path leaves to the general path


def _skeleton_lines(level: int) -> bytes:
    """Pattern of the lines of a block at nesting ``level`` (2 spaces each) in canonical layout:
    ``name: ""`` (a string), ``name: word``, or ``name {`` + lines one level deeper + ``}``."""
    indent = b" " * (2 * level)
    scalar = rb': (?:""|' + _WORD + rb")\n"
    if level >= _SKELETON_DEPTH:
        return rb"(?:" + indent + rb"[A-Za-z_]\w*" + scalar + rb")*"
    return (rb"(?:" + indent + rb"[A-Za-z_]\w*(?:" + scalar + rb"| \{\n"
            + _skeleton_lines(level + 1) + indent + rb"\}\n))*")


@functools.lru_cache(maxsize=None)
def _skeleton_re() -> Any:
    """The lines of an op block after its ``op {`` line, in canonical layout and strings emptied,
    up to the ``}`` that closes it (see _ge_scan_fast.FastOps). Compiled at the first scan, not at
    import: the pattern nests 24 levels and costs ~0.015 s to compile, and a process that imports
    the readers (``npu-dump-hook run``'s child does) may never scan a GE graph text."""
    return re.compile(_skeleton_lines(2) + rb"  \}")

_Loc = Tuple[int, int, int]  # a word: index in the op's parts of its segment, start, end


def _int_base0(raw: bytes) -> int:
    return _int(raw, "", 0)


def _digit_sensitive(kind: bytes, word: bytes) -> bool:
    """Whether _bool (kind b"b") or _int (b"i") of a skeleton word (digits made 0) may
    succeed for some digits and fail for others. _int of a word that does not look like
    "0x..."/"-0..." here takes base 10 whatever the digits were, which accepts any digits."""
    if kind == b"b":
        return word.translate(None, b"0123456789") != word
    return word[:2].lower() in (b"0x", b"-0") and len(word) > 2


#: Where (inside an op) the general path reads fields or opens blocks it acts on.
_ACTING = frozenset(((), (b"attr",), (b"attr", b"value"), (b"attr", b"value", b"list"),
                     (b"output_desc",), (b"output_desc", b"attr"),
                     (b"output_desc", b"attr", b"value")))


class Shape(object):
    """What the general path would do with every op of one skeleton, as string indices and
    word locations; keys (attr names) are strings, so their effect is resolved per variant."""

    __slots__ = ("name", "type", "inputs", "id", "attrs", "outputs", "checks", "strings",
                 "key_slots", "key_get", "variants", "last_keys", "last_build")

    def __init__(self) -> None:
        self.name = None  # type: Optional[int]
        self.type = None  # type: Optional[int]
        self.inputs = []  # type: List[int]
        self.id = None  # type: Optional[Tuple[int, int, int, Any]]  # word, converter
        # op attr entries: (key, first value field, last b, list s); output_desc attr
        # entries: (key, first value field, last s, last i); key/s as string indices
        self.attrs = []  # type: List[Tuple[Any, ...]]
        self.outputs = []  # type: List[List[Tuple[Any, ...]]]
        self.checks = []  # type: List[Tuple[Any, int, int, int]]  # to redo for each op
        self.strings = 0  # strings in an op of this shape
        self.key_slots = ()  # type: Tuple[int, ...]
        self.key_get = _getter(())  # type: Any
        self.variants = {}  # type: Dict[Tuple[bytes, ...], Any]
        self.last_keys = None  # type: Optional[Tuple[bytes, ...]]  # and its variant:
        self.last_build = None  # type: Any

    @classmethod
    def of(cls, skeleton: bytes) -> Optional["Shape"]:
        """The shape of a canonical op skeleton, or None when the skeleton is not canonical or
        when an op of this skeleton would make the general path convert a string (whose
        content the skeleton does not hold) or fail a conversion that fails for every op of
        the skeleton."""
        if _skeleton_re().fullmatch(skeleton) is None:
            return None
        shape = cls()
        where = ()  # type: Tuple[bytes, ...]  # the open blocks inside the op
        acts = True  # whether the general path acts on fields at ``where``
        entry = []  # type: List[Any]  # the attr entry being read
        strings = 0  # strings before the current line
        segment = 0  # offset in the skeleton of the current segment between strings
        offset = 0
        lines = skeleton[:-3].split(b"\n")[:-1]
        index = 0
        try:
            while index < len(lines):
                line = lines[index]
                index += 1
                end = offset + len(line)
                last = line[-1:]
                if last == b"}":  # (a canonical line ends with "", a word, { or })
                    name = where[-1]
                    where = where[:-1]
                    acts = where in _ACTING
                    if name == b"attr" and where == ():
                        shape.attrs.append((entry[0], entry[1], entry[2], tuple(entry[5])))
                    elif name == b"attr" and where == (b"output_desc",):
                        shape.outputs[-1].append((entry[0], entry[1], entry[3], entry[4]))
                elif last == b"{":
                    indent = len(line) - len(line.lstrip(b" "))
                    name = line[indent:-2]
                    if acts:
                        if name == b"attr" and (where == () or where == (b"output_desc",)):
                            entry = [None, None, None, None, None, []]
                        elif name == b"output_desc" and where == ():
                            shape.outputs.append([])
                        elif where == (b"attr", b"value") or where == (
                                b"output_desc", b"attr", b"value"):
                            entry[1] = name if entry[1] is None else entry[1]
                    if where + (name,) not in _ACTING:
                        # Nothing inside is acted on (every prefix of an acting path acts):
                        # count its strings and go on after its closing line, which in
                        # canonical layout is the first line after it that has its indent.
                        close = skeleton.find(b"\n" + line[:indent] + b"}\n", end)
                        found = skeleton.count(b'""', end, close)
                        if found:
                            strings += found
                            segment = skeleton.find(b"\n", skeleton.rfind(b'""', end, close))
                        index += skeleton.count(b"\n", end + 1, close + 1) + 1
                        offset = close + indent + 3
                        continue
                    where += (name,)
                    acts = True
                elif acts:
                    name, value = line.lstrip(b" ").split(b": ", 1)
                    string = strings if value == b'""' else None
                    word = (2 * strings, end - len(value) - segment, end - segment)
                    shape._field(where, name, string, word, value, entry)
                    if string is not None:
                        strings += 1
                        segment = end
                elif last == b'"':
                    strings += 1
                    segment = end
                offset = end + 1
        except (GraphFormatError, ValueError):
            return None
        shape.strings = strings
        slots = [entry[0] for entry in shape.attrs]
        slots += [entry[0] for entries in shape.outputs for entry in entries]
        shape.key_slots = tuple(slot for slot in slots if slot is not None)
        shape.key_get = _getter(shape.key_slots)
        return shape

    def _convert(self, kind: bytes, value: bytes, string: Optional[int], word: _Loc) -> Any:
        """A conversion the general path makes: checked now, or for each op if its outcome
        depends on digits; ValueError if it would convert a string. For an int, the
        location with what converts the word as _int does (int() where _int takes base 10)."""
        if string is not None:
            raise ValueError("a string the general path converts")
        convert = _bool if kind == b"b" else _int
        sensitive = _digit_sensitive(kind, value)
        if sensitive:
            self.checks.append((convert,) + word)
        else:
            convert(value, "", 0)
        return word + (_int_base0 if sensitive else int,)

    def _field(self, where: Tuple[bytes, ...], name: bytes, string: Optional[int],
               word: _Loc, value: bytes, entry: List[Any]) -> None:
        """One scalar field, as GeneralScan.on_scalar (_ge_scan_general) takes it (raises ValueError or
        GraphFormatError where the fast path must leave the op to the general path)."""
        if where == ():
            if name == b"id":
                self.id = self._convert(b"i", value, string, word)
            elif string is not None and name == b"name":
                self.name = string
            elif string is not None and name == b"type":
                self.type = string
            elif string is not None and name == b"input":
                self.inputs.append(string)
        elif where == (b"attr",) or where == (b"output_desc", b"attr"):
            if name == b"key" and string is not None:
                entry[0] = string
        elif where == (b"attr", b"value") or where == (b"output_desc", b"attr", b"value"):
            entry[1] = name if entry[1] is None else entry[1]
            if name == b"b" and where == (b"attr", b"value"):
                self._convert(b"b", value, string, word)
                entry[2] = word
            elif name == b"s" and string is not None:
                entry[3] = string
            elif name == b"i":
                entry[4] = self._convert(b"i", value, string, word)
        elif where == (b"attr", b"value", b"list"):
            if name == b"s" and string is not None:
                entry[5].append(string)

    def variant(self, keys: Tuple[bytes, ...]) -> Any:
        """The builder (see _compile_builder) of the summary of an op of this shape whose
        attr keys are ``keys``, as close_op_attr and close_output_attr would decide; or
        BAIL."""
        found = self.variants.get(keys)
        if found is not None:
            return found
        if any(key.find(b"\\") >= 0 or key.find(b"\x00") >= 0 for key in keys):
            found = BAIL  # an escaped key may spell one we look for
        else:
            found = self._resolve(dict(zip(self.key_slots, keys)))
        if len(self.variants) < _MAX_VARIANTS:
            self.variants[keys] = found
        return found

    def _resolve(self, key_of: Dict[int, bytes]) -> Any:
        no_task = names = None
        for key, first, b_word, list_s in self.attrs:
            key = key_of.get(key)
            if key == b"_no_task":
                if first != b"b" or b_word is None:
                    return BAIL  # entry_value raises
                no_task = b_word
            elif key == b"_datadump_original_op_names":
                names = list_s
        outputs = []
        for entries in self.outputs:
            origin = index = None
            for key, first, s_string, i_word in entries:
                key = key_of.get(key)
                if key == b"_datadump_origin_name":
                    if first != b"s" or s_string is None:
                        return BAIL
                    origin = s_string
                elif key == b"_datadump_origin_output_index":
                    if first != b"i" or i_word is None:
                        return BAIL
                    index = i_word
            outputs.append((origin, index))
        return _compile_builder(self, no_task, names, outputs)


_BUILD_GLOBALS = {"new_": tuple.__new__, "OpSummary_": OpSummary, "OutputOrigin_": OutputOrigin,
                  "TRUE_": _TRUE, "int_": int, "base0": _int_base0, "check_bool": _bool,
                  "check_int": _int}  # the first five are bound as closure cells
_FACTORIES = {}  # type: Dict[str, Any]  # source of a builder factory -> the factory
_MAX_FACTORIES = 2048


def _compile_builder(shape: Shape, no_task: Optional[_Loc], names: Optional[Tuple[int, ...]],
                     outputs: List[Tuple[Optional[int], Any]]) -> Any:
    """A function ``build(parts, strings, decode)`` giving the OpSummary of an op: ``parts``
    are the op's segments between double quotes, ``strings`` the odd ones, ``decode`` None
    (decode the strings it needs in one go, joined by newlines, which no string holds) or
    what decodes one. It is straight-line code
    without loops or look-ups (the generic version took a quarter of the scan time),
    written once per structure (numbers of inputs, names and outputs, which values are
    present) and bound to this shape's string indices and word offsets, which are its
    only data: compiling costs more than one variant's ops save."""
    numbers = []  # type: List[int]  # the factory's arguments a0, a1, ...
    wanted = []  # type: List[int]  # the strings to decode, by index

    def text(index: Optional[int]) -> str:
        if index is None:
            return "None"
        wanted.append(index)
        return "t[%d]" % (len(wanted) - 1)

    def word(loc: Sequence[Any]) -> str:
        numbers.extend(loc[:3])
        return "parts[a%d][a%d:a%d]" % (len(numbers) - 3, len(numbers) - 2, len(numbers) - 1)

    def number(loc: Any) -> str:
        if loc is None:
            return "None"
        return "%s(%s)" % ("base0" if loc[3] is _int_base0 else "int", word(loc))

    body = []
    for check in shape.checks:  # conversions whose outcome varies with the digits
        body.append("        %s(%s, '', 0)" % ("check_bool" if check[0] is _bool else "check_int",
                                              word(check[1:])))
    name = text(shape.name) if shape.name is not None else '""'
    op_type = text(shape.type) if shape.type is not None else '""'
    inputs = "".join(text(index) + ", " for index in shape.inputs)
    names_text = ("None" if names is None
                  else "(" + "".join(text(index) + ", " for index in names) + ")")
    origins = "".join("new(OutputOrigin, (%s, %s)), " % (text(origin), number(index))
                      for origin, index in outputs)
    op_id = "0" if shape.id is None else number(shape.id)
    no_task_text = "False" if no_task is None else word(no_task) + " in TRUE"
    if wanted:
        body.append('        raw = get(strings)')
        body.append('        t = (b"\\n".join(raw).decode("utf-8", "replace").split("\\n")'
                    " if decode is None else list(map(decode, raw)))")
    body.append("        return new(OpSummary, (%s, %s, %s, (%s), %s, %s, (%s)))" % (
        name, op_type, op_id, inputs, no_task_text, names_text, origins))
    source = "\n".join(
        ["def make(get%s):" % "".join(", a%d" % i for i in range(len(numbers))),
         "    new, OpSummary, OutputOrigin = new_, OpSummary_, OutputOrigin_",
         "    TRUE, int = TRUE_, int_",
         "    def build(parts, strings, decode):"] + body + ["    return build"])
    factory = _FACTORIES.get(source)
    if factory is None:
        namespace = dict(_BUILD_GLOBALS)
        exec(compile(source, "<ge_graph op builder>", "exec"), namespace)
        factory = namespace["make"]
        if len(_FACTORIES) < _MAX_FACTORIES:
            _FACTORIES[source] = factory
    return factory(_getter(wanted), *numbers)


def _getter(indices: Sequence[int]) -> Any:
    """A callable giving the items at ``indices`` of a list, as a tuple."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    if indices:
        index = indices[0]
        return lambda items: (items[index],)
    return lambda items: ()


def use_plain_tuples() -> None:
    """Make the builders compiled from now on give plain tuples instead of OpSummary and
    OutputOrigin (in a forked worker, whose results marshal takes; see ge_graph._read_share)."""
    _FACTORIES.clear()
    _BUILD_GLOBALS["new_"] = _plain_tuple


def _plain_tuple(cls: Any, fields: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The builders' ``tuple.__new__(cls, fields)`` in a forked worker: ``fields`` itself."""
    return fields
