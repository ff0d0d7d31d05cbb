"""Opdebug overflow records (``Opdebug.Node_OpDebug.*`` files, reference §3.1).

An Opdebug file is an ordinary v2 dump file whose single output (DT_UINT8, FORMAT_ND, shape
[2048], size 2048, see :data:`OPDEBUG_OUTPUT`) holds one of two little-endian layouts. This
module decodes and encodes that 2048-byte payload; :func:`read_opdebug_file` and
:func:`write_opdebug_file` wrap it in the container (via ``dump_file``).

New layout, when the first u32 is 0x5A5A5A5A::

    off 0 u32 magic | 4 u32 version | 8 u32 valid | 12 u32 acc_type | 16 u32 rsv | 20 u32 data_len
    off 24: data_len bytes of u64 fields, by acc_type:
      0 AIC, 1 AIV  model_id stream_id task_id task_type context_id thread_id pc_start para_base
                    core_id block_id status            (88 B; version 1: status is 4 x u64, 112 B)
      2 AICPU       model_id stream_id task_id task_type context_id cpu_id thread_id status  (64 B)
      3 SDMA        model_id stream_id task_id task_type context_id thread_id src_addr dst_addr
                    channel_id status                  (80 B)

Old layout, no magic, exactly 2048 bytes: info blocks of u64 (model_id stream_id task_id
task_type pc_start para_base) at 0 (DHA atomic), 128 (L2 atomic) and 256 (AI Core); status u64
at 512 (DHA atomic) and 768 (L2 atomic); at 1024 AI Core kernel_code, block_idx, status.

Decoding rules, checked in this order, each failure a :class:`StatsFormatError` with the byte
offset: payload shorter than 4 bytes; new layout: payload shorter than the 24-byte header,
acc_type not 0-3, data_len past the end of the payload, data_len smaller than the acc_type's
fields; old layout: payload not exactly 2048 bytes. Bytes after the fields are ignored.

:func:`read_opdebug_file` refuses a payload over :data:`MAX_PAYLOAD_SIZE` (64 KiB) before
reading it; its cost is that of reading the dump header (see :mod:`.dump_file`: at most
4 x the header size + 64 MB) plus twice the payload.
"""
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ..errors import StatsFormatError
from .dump_file import DumpFile, DumpTensor, write_dump_file

__all__ = [
    "OPDEBUG_MAGIC",
    "OPDEBUG_PAYLOAD_SIZE",
    "MAX_PAYLOAD_SIZE",
    "OPDEBUG_OUTPUT",
    "LAYOUT_NEW",
    "LAYOUT_OLD",
    "ACC_TYPES",
    "OverflowEntry",
    "OpdebugRecord",
    "decode_opdebug",
    "encode_opdebug",
    "new_layout_fields",
    "read_opdebug_file",
    "write_opdebug_file",
]

OPDEBUG_MAGIC = 0x5A5A5A5A
OPDEBUG_PAYLOAD_SIZE = 2048
#: Largest payload :func:`read_opdebug_file` reads (GE writes 2048 bytes).
MAX_PAYLOAD_SIZE = 64 * 1024
#: How GE describes the Opdebug tensor in the dump header (DumpData.output[0], §1.4):
#: data_type DT_UINT8 (4), format ND (2); original_op.data_type 4 is GE's raw value.
OPDEBUG_OUTPUT = {
    "data_type": 4,
    "format": 2,
    "shape": (OPDEBUG_PAYLOAD_SIZE,),
    "size": OPDEBUG_PAYLOAD_SIZE,
    "original_op": {"name": "Node_OpDebug", "output_index": 0, "data_type": 4, "format": 2},
}
LAYOUT_NEW = "new"
LAYOUT_OLD = "old"
#: acc_type value -> unit name (new layout)
ACC_TYPES = {0: "AIC", 1: "AIV", 2: "AICPU", 3: "SDMA"}

_HEADER = struct.Struct("<6I")
_U64 = struct.Struct("<Q")
_COMMON = ("model_id", "stream_id", "task_id", "task_type", "context_id")
_CORE_FIELDS = _COMMON + ("thread_id", "pc_start", "para_base", "core_id", "block_id")
_NEW_FIELDS = {
    "AIC": _CORE_FIELDS + ("status",),
    "AIV": _CORE_FIELDS + ("status",),
    "AICPU": _COMMON + ("cpu_id", "thread_id", "status"),
    "SDMA": _COMMON + ("thread_id", "src_addr", "dst_addr", "channel_id", "status"),
}
_STATUS_WORDS_V1 = 4  # AIC/AIV status is 4 x u64 when version == 1

_OLD_INFO = ("model_id", "stream_id", "task_id", "task_type", "pc_start", "para_base")
# unit -> (info offset, status offset, fields read at the status offset)
_OLD_UNITS = (
    ("DHA_ATOMIC", 0, 512, ("status",)),
    ("L2_ATOMIC", 128, 768, ("status",)),
    ("AI_CORE", 256, 1024, ("kernel_code", "block_idx", "status")),
)


@dataclass(frozen=True)
class OverflowEntry:
    """One unit's overflow info: ordered (field, value) pairs; ``status`` may have 4 words."""

    unit: str
    values: Tuple[Tuple[str, int], ...]
    status: Tuple[int, ...]

    def as_dict(self) -> Dict[str, object]:
        out = dict(self.values)  # type: Dict[str, object]
        out["status"] = list(self.status) if len(self.status) > 1 else self.status[0]
        return out

    def get(self, name: str) -> Optional[int]:
        return dict(self.values).get(name)


@dataclass(frozen=True)
class OpdebugRecord:
    """A decoded payload. Header fields (version, valid, acc_type, data_len) are None for the old layout."""

    layout: str
    entries: Tuple[OverflowEntry, ...]
    version: Optional[int] = None
    valid: Optional[int] = None
    acc_type: Optional[int] = None
    data_len: Optional[int] = None

    def as_dict(self) -> Dict[str, object]:
        out = {"layout": self.layout}  # type: Dict[str, object]
        if self.layout == LAYOUT_NEW:
            out.update(version=self.version, valid=self.valid, acc_type=self.acc_type, data_len=self.data_len)
        out["entries"] = [dict(unit=e.unit, **e.as_dict()) for e in self.entries]
        return out


def new_layout_fields(acc_type: int, version: int) -> Tuple[Tuple[str, ...], int]:
    """(field names before status, status word count) of a new-layout payload."""
    names = _NEW_FIELDS[ACC_TYPES[acc_type]]
    words = _STATUS_WORDS_V1 if version == 1 and acc_type in (0, 1) else 1
    return names[:-1], words


def decode_opdebug(payload: bytes, path: str = "<opdebug>", base_offset: int = 0) -> OpdebugRecord:
    """Decode an Opdebug payload. ``base_offset`` (payload start in the file) shifts error offsets."""
    data = memoryview(payload).cast("B")
    if len(data) < 4:
        raise StatsFormatError(path, "Opdebug payload shorter than 4 bytes", base_offset)
    if struct.unpack_from("<I", data, 0)[0] == OPDEBUG_MAGIC:
        return _decode_new(data, path, base_offset)
    if len(data) != OPDEBUG_PAYLOAD_SIZE:
        raise StatsFormatError(
            path,
            "Opdebug payload without magic 0x5A5A5A5A must be {} bytes (old layout), found {}".format(
                OPDEBUG_PAYLOAD_SIZE, len(data)
            ),
            base_offset,
        )
    return _decode_old(data)


def _decode_new(data: memoryview, path: str, base: int) -> OpdebugRecord:
    if len(data) < _HEADER.size:
        raise StatsFormatError(path, "Opdebug header needs {} bytes".format(_HEADER.size), base)
    _magic, version, valid, acc_type, _rsv, data_len = _HEADER.unpack_from(data, 0)
    if acc_type not in ACC_TYPES:
        raise StatsFormatError(path, "Opdebug acc_type {} is not 0-3 (AIC, AIV, AICPU, SDMA)".format(acc_type), base + 12)
    if _HEADER.size + data_len > len(data):
        raise StatsFormatError(
            path, "Opdebug data_len {} runs past the {}-byte payload".format(data_len, len(data)), base + 20
        )
    names, status_words = new_layout_fields(acc_type, version)
    needed = (len(names) + status_words) * _U64.size
    if data_len < needed:
        raise StatsFormatError(
            path,
            "Opdebug data_len {} is smaller than the {} bytes of {} fields".format(data_len, needed, ACC_TYPES[acc_type]),
            base + 20,
        )
    words = _u64s(data, _HEADER.size, len(names) + status_words)
    entry = OverflowEntry(ACC_TYPES[acc_type], tuple(zip(names, words)), tuple(words[len(names) :]))
    return OpdebugRecord(LAYOUT_NEW, (entry,), version, valid, acc_type, data_len)


def _decode_old(data: memoryview) -> OpdebugRecord:
    entries = []
    for unit, info_at, status_at, status_names in _OLD_UNITS:
        info = _u64s(data, info_at, len(_OLD_INFO))
        tail = _u64s(data, status_at, len(status_names))
        values = tuple(zip(_OLD_INFO, info)) + tuple(zip(status_names[:-1], tail[:-1]))
        entries.append(OverflowEntry(unit, values, (tail[-1],)))
    return OpdebugRecord(LAYOUT_OLD, tuple(entries))


def _u64s(data: memoryview, offset: int, count: int) -> List[int]:
    return list(struct.unpack_from("<{}Q".format(count), data, offset))


def encode_opdebug(record: OpdebugRecord) -> bytes:
    """The 2048-byte payload for ``record`` (missing fields are 0); inverse of :func:`decode_opdebug`."""
    out = bytearray(OPDEBUG_PAYLOAD_SIZE)
    try:
        if record.layout == LAYOUT_NEW:
            _encode_new(record, out)
        elif record.layout == LAYOUT_OLD:
            _encode_old(record, out)
        else:
            raise ValueError("unknown Opdebug layout {!r}".format(record.layout))
    except struct.error as exc:  # a value outside u32/u64, or data_len past 2048 bytes
        raise ValueError("Opdebug record does not fit its layout: {}".format(exc))
    return bytes(out)


def _encode_new(record: OpdebugRecord, out: bytearray) -> None:
    if len(record.entries) != 1:
        raise ValueError("a new-layout Opdebug record holds exactly one entry")
    entry = record.entries[0]
    acc_type = _acc_type_of(record, entry)
    version = record.version or 0
    names, status_words = new_layout_fields(acc_type, version)
    status = tuple(entry.status) + (0,) * (status_words - len(entry.status))
    if len(status) != status_words:
        raise ValueError("{} status has {} words, layout wants {}".format(entry.unit, len(entry.status), status_words))
    known = dict(entry.values)
    words = [known.get(name, 0) for name in names] + list(status)
    data_len = record.data_len if record.data_len is not None else len(words) * _U64.size
    valid = 1 if record.valid is None else record.valid
    _HEADER.pack_into(out, 0, OPDEBUG_MAGIC, version, valid, acc_type, 0, data_len)
    struct.pack_into("<{}Q".format(len(words)), out, _HEADER.size, *words)


def _acc_type_of(record: OpdebugRecord, entry: OverflowEntry) -> int:
    by_name = {name: value for value, name in ACC_TYPES.items()}
    acc_type = record.acc_type if record.acc_type is not None else by_name.get(entry.unit)
    if acc_type not in ACC_TYPES or ACC_TYPES[acc_type] != entry.unit:
        raise ValueError("entry unit {!r} does not match acc_type {!r}".format(entry.unit, record.acc_type))
    return acc_type


def _encode_old(record: OpdebugRecord, out: bytearray) -> None:
    given = {entry.unit: entry for entry in record.entries}
    unknown = set(given) - {unit for unit, _i, _s, _n in _OLD_UNITS}
    if unknown:
        raise ValueError("old-layout Opdebug units are DHA_ATOMIC, L2_ATOMIC, AI_CORE; got {}".format(sorted(unknown)))
    for unit, info_at, status_at, status_names in _OLD_UNITS:
        entry = given.get(unit)
        known = dict(entry.values) if entry else {}
        status = entry.status[0] if entry and entry.status else 0
        struct.pack_into("<6Q", out, info_at, *[known.get(name, 0) for name in _OLD_INFO])
        tail = [known.get(name, 0) for name in status_names[:-1]] + [status]
        struct.pack_into("<{}Q".format(len(tail)), out, status_at, *tail)


def read_opdebug_file(path: Union[str, os.PathLike]) -> Tuple[Any, OpdebugRecord]:
    """(DumpHeader, decoded record) of an ``Opdebug.Node_OpDebug.*`` dump file.

    Container errors are :class:`DumpFileError`; a container without exactly one output,
    or a bad payload, raises :class:`StatsFormatError`.
    """
    with DumpFile.open(path) as dump:
        if len(dump.outputs) != 1:
            raise StatsFormatError(
                dump.path, "an Opdebug file holds exactly one output, found {}".format(len(dump.outputs)), 0
            )
        info = dump.outputs[0]
        if info.size > MAX_PAYLOAD_SIZE:
            raise StatsFormatError(dump.path, "Opdebug payload of {} bytes; GE writes {}, this reader takes at "
                                   "most {}".format(info.size, OPDEBUG_PAYLOAD_SIZE, MAX_PAYLOAD_SIZE),
                                   info.offset or 0)
        payload = dump.array("output", 0, raw=True, copy=True).tobytes()
    return dump, decode_opdebug(payload, dump.path, info.offset or 0)


def write_opdebug_file(path: Union[str, os.PathLike], record: OpdebugRecord, dump_time: Optional[int] = None) -> int:
    """Write ``record`` as GE does (container per :data:`OPDEBUG_OUTPUT`); return the file size."""
    original = OPDEBUG_OUTPUT["original_op"]
    tensor = DumpTensor(
        np.frombuffer(encode_opdebug(record), dtype=np.uint8),
        data_type=OPDEBUG_OUTPUT["data_type"],
        format=OPDEBUG_OUTPUT["format"],
        original_name=original["name"],
        original_output_index=original["output_index"],
        original_data_type=original["data_type"],
        original_format=original["format"],
    )
    return write_dump_file(path, original["name"], outputs=[tensor], dump_time=dump_time)
