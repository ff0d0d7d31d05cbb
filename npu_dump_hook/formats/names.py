"""File-name grammar of Ascend dump artefacts (docs/reference/ascend-dump-formats.md §1.1, §2.1, §5, §6).

Dump files (§5.1), fields separated by ``.``; op_type and op_name are sanitized (§5.2), so
they never contain ``.``, ``/``, ``\\`` or a space and splitting on ``.`` is exact::

    {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}                      normal (5 fields)
    {op_type}.{op_name}.{task_id}.{timestamp}                                  old CANN, no stream id (4)
    {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.{task_type}.{context_id}.{thread_id}.{device_id}
                                                                               FFTS+ (9; task_type is 4 in
                                                                               practice, msaccucmp accepts 0-4)
    {op_type}.{op_name}.{task_id}.{timestamp}.{task_type}.{context_id}.{thread_id}.{device_id}
                                                                               FFTS+ without stream id (8)
    {any of the above}.csv                                                     dump_data=stats (§3.2)
    Opdebug.Node_OpDebug.{...}                                                 overflow file (§3.1)
    {digits}                                                                   name too long: hashed, the
                                                                               real name is in mapping.csv (§4)

task_id, stream_id, context_id, thread_id, device_id and timestamp are unsigned decimal
integers of 1-255 digits; timestamp is microseconds since the epoch (16 digits today; msaccucmp
accepts 1-255 digits and sorts only 16-digit ones). The 255-digit cap holds for every number
field, and for the numbers of graph and ``.npy`` names: no real name comes close, and it keeps
``int()`` far below Python's 4,300-digit conversion limit (3.11+) and its quadratic cost. An op name may end in ``_lxslice{N}`` (FFTS manual
slicing) and start with ``..._sgt_graph_{N}_``; :func:`base_op_name` strips both like msaccucmp.

Graph dumps (§2.1): ``ge_proto_{index}_[graph_{id}_|aclop_graph_{id}_]{stage}.txt`` with a 5- or
8-digit index (any digit count is accepted); ``ge_onnx_*.pbtxt`` and ``ge_readable_*.txt`` are
recognised but never used for mapping. GE time folders (§1.1) are ``YYYYMMDDhhmmss``.

Reference capture (§6): ``{op_name with / and . -> _}.{output_index}.{16-digit µs}.npy``.

Cost: every parser here takes time and memory linear in the length of the name (a name from
mapping.csv can be long): fields are split at most 10 times, the patterns cannot backtrack
more than linearly, and the numbers are capped at 255 digits.
"""
import dataclasses
import datetime
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .._bounded import BoundedStore
from ..errors import NameFormatError

__all__ = [
    "KIND_DUMP",
    "KIND_STATS",
    "KIND_OPDEBUG",
    "OPDEBUG_OP_TYPE",
    "OPDEBUG_OP_NAME",
    "FFTS_PLUS_TASK_TYPE",
    "NPU_DUMP_PATTERN",
    "NUMPY_DUMP_PATTERN",
    "DumpName",
    "parse_dump_name",
    "format_dump_name",
    "is_hashed_name",
    "sanitize",
    "base_op_name",
    "NameMatch",
    "SanitizedIndex",
    "match_tf_names",
    "GraphFileName",
    "parse_graph_file_name",
    "is_build_graph_file",
    "GRAPH_KIND_PROTO",
    "GRAPH_KIND_ONNX",
    "GRAPH_KIND_READABLE",
    "NpyName",
    "format_npy_name",
    "golden_npy_name",
    "parse_npy_name",
    "parse_time_dir",
    "format_time_dir",
]

KIND_DUMP = "dump"
KIND_STATS = "stats"
KIND_OPDEBUG = "opdebug"

OPDEBUG_OP_TYPE = "Opdebug"
OPDEBUG_OP_NAME = "Node_OpDebug"
#: Task.TaskType FFTSPLUS, printed as the 6th field of FFTS+ dump names.
FFTS_PLUS_TASK_TYPE = 4
_MAX_TASK_TYPE = 4

#: msaccucmp's offline (NPU) dump-name pattern; group 1 is the sanitized op name (§5.3).
NPU_DUMP_PATTERN = re.compile(
    r"^[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[0-9]+(\.[0-9]+)?\.[0-9]{1,255}"
    r"(\.[0-9]+\.[0-9]+\.[0-9]+)?(\.[0-9]+)?"
)
#: msaccucmp's ground-truth .npy pattern; group 1 ``{op_name}.{output_index}`` is the key (§6.2).
NUMPY_DUMP_PATTERN = re.compile(r"^([\.A-Za-z0-9_-]+\.[0-9]+)\.[0-9]{1,255}\.npy$")

_STATS_SUFFIX = ".csv"
#: The characters the dump writer turns into ``_`` in a name (§5.2); :func:`sanitize` is their one use.
_SANITIZED = " ./\\"
_SANITIZE = re.compile("[" + re.escape(_SANITIZED) + "]")
# Characters a sanitized name field may not hold: separators, path parts, controls.
_BAD_FIELD_CHAR = re.compile(r"[ ./\\\x00-\x1f\x7f]")
_UINT = re.compile(r"[0-9]+\Z")
_LXSLICE = re.compile(r"_lxslice([0-9]+)\Z")
_SGT_PREFIX = re.compile(r"^.*?sgt_graph_[0-9]+_")
_TIMESTAMP_MAX_DIGITS = 255
# Every number field of a name: the timestamp's cap (far below int()'s 4,300-digit limit).
_MAX_DIGITS = _TIMESTAMP_MAX_DIGITS
_SORTABLE_TIMESTAMP_DIGITS = 16


PathName = Union[str, os.PathLike]


def _basename(name: PathName) -> str:
    return os.path.basename(os.fspath(name))


def sanitize(name: str) -> str:
    """Replace every space, ``.``, ``/`` and ``\\`` with ``_``, as the dump writer does (§5.2).
    A str by C replaces (a third of the regex substitution's cost: an emulated step names 1,000s of
    files); any other type goes through the regex, which refuses it."""
    if type(name) is not str:  # noqa: E721 - a str subclass takes the regex too
        return _SANITIZE.sub("_", name)
    # _SANITIZED's four characters, chained (a loop over them costs Python 3.7 ~1 us more a name)
    return name.replace(" ", "_").replace(".", "_").replace("/", "_").replace("\\", "_")


def base_op_name(op_name: str) -> str:
    """Strip a trailing ``_lxslice{N}`` and a leading ``..._sgt_graph_{N}_`` (msaccucmp, §5.3)."""
    return _SGT_PREFIX.sub("", _LXSLICE.sub("", op_name), count=1)


@dataclass(frozen=True)
class DumpName:
    """The fields of one dump, stats or Opdebug file name.

    ``hashed_name`` is the all-digit name on disk when the name was resolved through
    mapping.csv (§4), else None. ``task_type``, ``context_id``, ``thread_id`` and
    ``device_id`` are all set (FFTS+ names) or all None.
    """

    op_type: str
    op_name: str
    task_id: int
    stream_id: Optional[int]
    timestamp: int
    kind: str = KIND_DUMP
    task_type: Optional[int] = None
    context_id: Optional[int] = None
    thread_id: Optional[int] = None
    device_id: Optional[int] = None
    hashed_name: Optional[str] = None

    @property
    def is_ffts(self) -> bool:
        """True for FFTS+ names (task type, context, thread and device fields present)."""
        return self.context_id is not None

    @property
    def slice_index(self) -> Optional[int]:
        """N of a trailing ``_lxslice{N}`` in the op name (FFTS manual slicing), else None."""
        match = _LXSLICE.search(self.op_name)
        return int(match.group(1)) if match else None

    @property
    def base_op_name(self) -> str:
        """The op name without ``_lxslice{N}`` / ``..._sgt_graph_{N}_`` (see :func:`base_op_name`)."""
        return base_op_name(self.op_name)

    @property
    def sortable_timestamp(self) -> bool:
        """True when the timestamp has the 16 digits msaccucmp requires for ordering (§5.3)."""
        return len(str(self.timestamp)) == _SORTABLE_TIMESTAMP_DIGITS

    @property
    def file_name(self) -> str:
        """The name as written by GE (the real name, not the hashed one)."""
        return format_dump_name(
            self.op_type,
            self.op_name,
            self.task_id,
            self.stream_id,
            self.timestamp,
            task_type=self.task_type,
            context_id=self.context_id,
            thread_id=self.thread_id,
            device_id=self.device_id,
            stats=self.kind == KIND_STATS,
        )


def is_hashed_name(name: PathName) -> bool:
    """True for an all-digit file name: a long name replaced by its hash (§4)."""
    return bool(_UINT.match(_basename(name)))


def parse_dump_name(
    name: PathName, mapping: Optional[Mapping[str, str]] = None
) -> DumpName:
    """Parse a dump / stats / Opdebug file name (only the last path component is read).

    An all-digit (hashed) name is looked up in ``mapping`` (hash -> real name, see
    :func:`npu_dump_hook.formats.mapping_csv.read_mapping`) and the real name is parsed.
    Raises :class:`NameFormatError` naming the file and the rule broken.
    """
    base = _basename(name)
    if is_hashed_name(base):
        if mapping is None or base not in mapping:
            raise NameFormatError(base, "all-digit (hashed) name not found in mapping.csv")
        real = mapping[base]
        if _UINT.match(real) or os.path.basename(real) != real:
            raise NameFormatError(base, "mapping.csv maps it to {!r}, not a dump file name".format(real))
        parsed = _parse_plain(real)
        return _replace_hashed(parsed, base)
    return _parse_plain(base)


def _replace_hashed(parsed: DumpName, hashed: str) -> DumpName:
    return dataclasses.replace(parsed, hashed_name=hashed)


def _parse_plain(base: str) -> DumpName:
    kind = KIND_DUMP
    stem = base
    if stem.endswith(_STATS_SUFFIX):
        kind = KIND_STATS
        stem = stem[: -len(_STATS_SUFFIX)]
    fields = stem.split(".", 9)  # at most 10 pieces: a name of a million dots costs no more
    if len(fields) == 5:
        quick = _parse_plain_five(fields, kind)
        if quick is not None:
            return quick
    if len(fields) not in (4, 5, 8, 9):
        raise NameFormatError(
            base, "expected 4, 5, 8 or 9 dot-separated fields (optionally + .csv), found {}".format(
                stem.count(".") + 1)
        )
    op_type, op_name = fields[0], fields[1]
    _check_name_field(base, "op_type", op_type)
    _check_name_field(base, "op_name", op_name)
    # Fields after op_name: task_id [stream_id] timestamp [task_type context thread device]
    numbers = fields[2:]
    labels = _number_labels(len(fields))
    values = {label: _uint(base, label, text) for label, text in zip(labels, numbers)}
    task_type = values.get("task_type")
    if task_type is not None and task_type > _MAX_TASK_TYPE:
        raise NameFormatError(base, "task_type field must be a digit 0-4, found {}".format(task_type))
    if kind == KIND_DUMP and op_type == OPDEBUG_OP_TYPE and op_name == OPDEBUG_OP_NAME:
        kind = KIND_OPDEBUG
    return DumpName(
        op_type,
        op_name,
        values["task_id"],
        values.get("stream_id"),
        values["timestamp"],
        kind=kind,
        task_type=task_type,
        context_id=values.get("context_id"),
        thread_id=values.get("thread_id"),
        device_id=values.get("device_id"),
    )


def _parse_plain_five(fields: List[str], kind: str) -> Optional[DumpName]:
    """The common ``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`` name when every field is
    plainly valid (ASCII digits within the cap, clean non-empty op fields), else None: the general
    parser then finds the rule broken."""
    op_type, op_name, task_id, stream_id, timestamp = fields
    for text in (task_id, stream_id, timestamp):
        if not (text.isdecimal() and text.isascii() and len(text) <= _MAX_DIGITS):
            return None
    if not op_type or not op_name or _BAD_FIELD_CHAR.search(op_type) or _BAD_FIELD_CHAR.search(op_name):
        return None
    if kind == KIND_DUMP and op_type == OPDEBUG_OP_TYPE and op_name == OPDEBUG_OP_NAME:
        kind = KIND_OPDEBUG
    return DumpName(op_type, op_name, int(task_id), int(stream_id), int(timestamp), kind)


def _number_labels(field_count: int) -> List[str]:
    ffts = ["task_type", "context_id", "thread_id", "device_id"]
    with_stream = field_count in (5, 9)
    labels = ["task_id"] + (["stream_id"] if with_stream else []) + ["timestamp"]
    return labels + ffts if field_count >= 8 else labels


def _check_name_field(base: str, label: str, text: str) -> None:
    if not text:
        raise NameFormatError(base, "{} is empty".format(label))
    bad = _BAD_FIELD_CHAR.search(text)
    if bad:
        raise NameFormatError(
            base, "{} contains {!r} (sanitized names hold no space, '.', '/', '\\' or control character)".format(
                label, bad.group(0)
            )
        )


def _uint(base: str, label: str, text: str) -> int:
    if len(text) > _MAX_DIGITS:
        raise NameFormatError(base, "{} longer than {} digits".format(label, _MAX_DIGITS))
    if not _UINT.match(text):
        raise NameFormatError(base, "{} must be an unsigned decimal integer, found {!r}".format(label, text))
    return int(text)


def format_dump_name(
    op_type: str,
    op_name: str,
    task_id: int,
    stream_id: Optional[int],
    timestamp: int,
    task_type: Optional[int] = None,
    context_id: Optional[int] = None,
    thread_id: Optional[int] = None,
    device_id: Optional[int] = None,
    stats: bool = False,
) -> str:
    """Build a dump file name as the writer does: op_type and op_name are sanitized first.

    Pass context_id, thread_id and device_id together for an FFTS+ name (task_type then
    defaults to 4); ``stats=True`` appends ``.csv``. ``stream_id=None`` gives the old form.
    """
    # One path for every name; each check is one cheap test (an emulated step names 1,000s of
    # files), and only a name that fails one is looked at again to say which rule it breaks.
    op_type, op_name = sanitize(op_type), sanitize(op_name)
    # (sanitized: only a control character can be left to refuse, and printable text has none)
    if not (op_type.isprintable() and op_name.isprintable() and op_type and op_name):
        _check_op_fields(op_type, op_name)
    numbers = (task_id, timestamp) if stream_id is None else (task_id, stream_id, timestamp)
    if context_id is not None or thread_id is not None or device_id is not None:
        numbers += _ffts_numbers(op_type, op_name, task_type, context_id, thread_id, device_id)
    elif task_type is not None:
        raise NameFormatError("{}.{}".format(op_type, op_name),
                              "task_type is only written in FFTS+ names (give context/thread/device ids)")
    if not (type(task_id) is int and type(timestamp) is int and task_id >= 0 and timestamp >= 0
            and (stream_id is None or (type(stream_id) is int and stream_id >= 0)) and len(numbers) <= 3):
        numbers = _checked_numbers(op_type, op_name, stream_id is not None, numbers)
    return _NAME_FORMATS[len(numbers)].format(op_type, op_name, *numbers, _STATS_SUFFIX if stats else "")


#: The format of a name with 2 to 7 number fields: op_type.op_name.numbers, then the stats suffix.
_NAME_FORMATS = {count: "{}.{}" + ".{}" * count + "{}" for count in range(2, 8)}


def _check_op_fields(op_type: str, op_name: str) -> None:
    """NameFormatError naming the sanitized op field :func:`format_dump_name` cannot write, if any."""
    ident = "{}.{}".format(op_type, op_name)
    for label, text in (("op_type", op_type), ("op_name", op_name)):
        _check_name_field(ident, label, text)


def _ffts_numbers(op_type: str, op_name: str, task_type: Optional[int], context_id: Optional[int],
                  thread_id: Optional[int], device_id: Optional[int]) -> Tuple[Any, ...]:
    """The FFTS+ fields of a name (task_type, context_id, thread_id, device_id), all given or refused."""
    ident = "{}.{}".format(op_type, op_name)
    if context_id is None or thread_id is None or device_id is None:
        raise NameFormatError(ident, "context_id, thread_id and device_id go together (FFTS+ name)")
    task_type = FFTS_PLUS_TASK_TYPE if task_type is None else task_type
    if not 0 <= task_type <= _MAX_TASK_TYPE:
        raise NameFormatError(ident, "task_type must be 0-4, got {}".format(task_type))
    return task_type, context_id, thread_id, device_id


def _checked_numbers(op_type: str, op_name: str, with_stream: bool, numbers: Sequence[Any]) -> Tuple[str, ...]:
    """The number fields of a name as written (``str`` of each: an int subclass's own), or
    NameFormatError for the first that is not a non-negative int (bool is not)."""
    labels = ["task_id"] + (["stream_id"] if with_stream else []) + ["timestamp"]
    labels += ["task_type", "context_id", "thread_id", "device_id"]
    for label, value in zip(labels, numbers):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise NameFormatError("{}.{}".format(op_type, op_name),
                                  "{} must be a non-negative int, got {!r}".format(label, value))
    return tuple(map(str, numbers))


@dataclass(frozen=True)
class NameMatch:
    """TF op names whose sanitized form equals ``sanitized`` (sorted)."""

    sanitized: str
    candidates: Tuple[str, ...]

    @property
    def unique(self) -> Optional[str]:
        """The one matching TF name, or None when there is none or several."""
        return self.candidates[0] if len(self.candidates) == 1 else None

    @property
    def ambiguous(self) -> bool:
        """True when several TF names sanitize to the same string (``a/b`` vs ``a_b``)."""
        return len(self.candidates) > 1


class SanitizedIndex:
    """Sanitized name -> TF op names, built once for many look-ups."""

    def __init__(self, tf_names: Iterable[str]) -> None:
        table = defaultdict(set)  # type: Dict[str, set]
        for tf_name in tf_names:
            table[sanitize(tf_name)].add(tf_name)
        self._table = {key: tuple(sorted(names)) for key, names in table.items()}

    def match(self, sanitized: str, strip_ffts: bool = True) -> NameMatch:
        """Candidates for a sanitized name; if none and ``strip_ffts``, retry :func:`base_op_name`."""
        found = self._table.get(sanitized, ())
        if not found and strip_ffts:
            found = self._table.get(base_op_name(sanitized), ())
        return NameMatch(sanitized, found)


def match_tf_names(sanitized: str, tf_names: Iterable[str], strip_ffts: bool = True) -> NameMatch:
    """Match one sanitized dump op name back to TF op names (use SanitizedIndex for many)."""
    return SanitizedIndex(tf_names).match(sanitized, strip_ffts=strip_ffts)


# --------------------------------------------------------------------------- graph files

GRAPH_KIND_PROTO = "ge_proto"
GRAPH_KIND_ONNX = "ge_onnx"
GRAPH_KIND_READABLE = "ge_readable"
_GRAPH_FILE = re.compile(
    r"^(ge_proto|ge_onnx|ge_readable)_([0-9]+)_(?:(aclop_)?graph_([0-9]+)_)?(.+?)\.(txt|pbtxt)\Z"
)
_GRAPH_SUFFIX = {GRAPH_KIND_PROTO: "txt", GRAPH_KIND_ONNX: "pbtxt", GRAPH_KIND_READABLE: "txt"}


@dataclass(frozen=True)
class GraphFileName:
    """Fields of a GE graph dump name. Only ``ge_proto`` files are used for mapping."""

    kind: str
    index: int
    index_width: int
    graph_id: Optional[int]
    stage: str
    aclop: bool = False

    @property
    def usable_for_mapping(self) -> bool:
        """True for ge_proto text graphs; ONNX and readable dumps carry fewer attributes (§2.6)."""
        return self.kind == GRAPH_KIND_PROTO

    @property
    def is_build(self) -> bool:
        """True for the ge_proto graph of stage ``Build`` (the executed graph)."""
        return self.usable_for_mapping and self.stage == "Build"


def parse_graph_file_name(name: PathName) -> Optional[GraphFileName]:
    """Fields of a ``ge_proto``/``ge_onnx``/``ge_readable`` file name, or None for other files
    (an index or graph id over 255 digits included)."""
    match = _GRAPH_FILE.match(_basename(name))
    if not match:
        return None
    kind, index, aclop, graph_id, stage, suffix = match.groups()
    if _GRAPH_SUFFIX[kind] != suffix or len(index) > _MAX_DIGITS or len(graph_id or "") > _MAX_DIGITS:
        return None
    return GraphFileName(
        kind=kind,
        index=int(index),
        index_width=len(index),
        graph_id=None if graph_id is None else int(graph_id),
        stage=stage,
        aclop=aclop is not None,
    )


def is_build_graph_file(name: PathName) -> bool:
    """True for ``ge_proto_*_Build.txt`` (any index width, with or without ``graph_{id}_``)."""
    parsed = parse_graph_file_name(name)
    return parsed is not None and parsed.is_build


# --------------------------------------------------------------------------- reference .npy


@dataclass(frozen=True)
class NpyName:
    """Fields of a reference ``.npy`` name; ``key`` is msaccucmp's look-up key."""

    op_name: str
    output_index: int
    timestamp: int

    @property
    def key(self) -> str:
        return "{}.{}".format(self.op_name, self.output_index)


def format_npy_name(op_name: str, output_index: int, timestamp_us: int) -> str:
    """``{op_name with / and . -> _}.{output_index}.{timestamp_us}.npy`` (16-digit µs, §6.2)."""
    if not isinstance(output_index, int) or output_index < 0:
        raise NameFormatError(op_name, "output_index must be a non-negative int, got {!r}".format(output_index))
    if not isinstance(timestamp_us, int) or len(str(timestamp_us)) != _SORTABLE_TIMESTAMP_DIGITS:
        raise NameFormatError(op_name, "timestamp must be a 16-digit microsecond count, got {!r}".format(timestamp_us))
    flat = op_name.replace("/", "_").replace(".", "_")
    name = "{}.{}.{}.npy".format(flat, output_index, timestamp_us)
    if not NUMPY_DUMP_PATTERN.fullmatch(name):
        raise NameFormatError(op_name, "op name has characters msaccucmp's .npy pattern rejects (only A-Za-z0-9_-)")
    return name


_NOT_IN_NPY_PATTERN = re.compile(r"[^A-Za-z0-9_-]")
_PLAIN_STEM = re.compile(r"[A-Za-z0-9_-]+")  # a stem of only NUMPY_DUMP_PATTERN's name characters


#: op name -> the stem :func:`golden_npy_name` gave it (a capture names ~2,000 files in a row;
#: checking each whole name against the pattern cost more than making it). Bounded: beyond
#: :data:`_GOLDEN_STEMS_SIZE` names are checked each time (the first ones stay).
_GOLDEN_STEMS_SIZE = 1 << 16
_GOLDEN_STEMS = BoundedStore(_GOLDEN_STEMS_SIZE)  # type: BoundedStore[str, str]


def golden_npy_name(op_name: str, output_index: int, timestamp_us: int) -> str:
    """:func:`format_npy_name`, with the characters msaccucmp's pattern rejects turned into ``_``
    (the reference capture's name for every tensor; the renaming is listed in its manifest)."""
    stem = _GOLDEN_STEMS.get(op_name)
    if stem is None and type(op_name) is str:  # noqa: E721
        flat = op_name.replace("/", "_").replace(".", "_")
        # Only the pattern's characters, no dot: the whole name passes it with fields as checked below
        # (a capture's ~2,000 names are mostly first seen: checking each whole name cost more than making it).
        if _PLAIN_STEM.fullmatch(flat) and _GOLDEN_STEMS.add_if_room(op_name, flat):
            stem = flat
    if (stem is not None and type(output_index) is int and output_index >= 0  # noqa: E721 - no bool
            and type(timestamp_us) is int and 10 ** 15 <= timestamp_us < 10 ** 16):  # noqa: E721
        # The stem passed the pattern with such fields (its characters, no dot): so does this name.
        return "{}.{}.{}.npy".format(stem, output_index, timestamp_us)
    name = _checked_golden_npy_name(op_name, output_index, timestamp_us)
    _GOLDEN_STEMS.add_if_room(op_name, name.rsplit(".", 3)[0])
    return name


def _checked_golden_npy_name(op_name: str, output_index: int, timestamp_us: int) -> str:
    try:
        return format_npy_name(op_name, output_index, timestamp_us)
    except NameFormatError:
        flat = _NOT_IN_NPY_PATTERN.sub("_", op_name.replace("/", "_").replace(".", "_"))
        return format_npy_name(flat, output_index, timestamp_us)


def parse_npy_name(name: PathName) -> NpyName:
    """Parse a reference ``.npy`` name matching :data:`NUMPY_DUMP_PATTERN`."""
    base = _basename(name)
    if not NUMPY_DUMP_PATTERN.fullmatch(base):
        raise NameFormatError(base, "does not match msaccucmp's {op_name}.{output_index}.{timestamp}.npy pattern")
    stem, index, timestamp = base[: -len(".npy")].rsplit(".", 2)
    if len(index) > _MAX_DIGITS:
        raise NameFormatError(base, "output index longer than {} digits".format(_MAX_DIGITS))
    return NpyName(stem, int(index), int(timestamp))


# --------------------------------------------------------------------------- time folders

_TIME_DIR = re.compile(r"[0-9]{14}\Z")
_TIME_DIR_FORMAT = "%Y%m%d%H%M%S"


def parse_time_dir(name: PathName) -> Optional[datetime.datetime]:
    """Naive local datetime of a GE time folder ``YYYYMMDDhhmmss``, or None if it is not one."""
    base = _basename(name)
    if not _TIME_DIR.match(base):
        return None
    try:
        return datetime.datetime.strptime(base, _TIME_DIR_FORMAT)
    except ValueError:  # 14 digits but not a calendar time, e.g. month 13
        return None


def format_time_dir(when: datetime.datetime) -> str:
    """The folder name GE gives a dump started at ``when`` (local time)."""
    return when.strftime(_TIME_DIR_FORMAT)
