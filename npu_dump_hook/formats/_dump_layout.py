"""The numbers of the Ascend dump-file format (docs/reference/ascend-dump-formats.md §1.2-§1.4)
and the reader's limits, shared by the reader (:mod:`.dump_file`, where the public ones are
documented and importable), its rules (:mod:`._dump_rules`, :mod:`._dump_walk`) and the writer
(:mod:`._dump_writer`): payload kinds, header length bounds and limits, the v2 prefix, the
DumpData data type table (storage dtype, bits per element, logical dtype), GE's own data type
numbers, and the names of data types and formats.
"""
import struct
from typing import Any, Dict, Optional

import numpy as np

from . import dump_schema

try:  # optional: numpy types for bfloat16 / float8
    import ml_dtypes as ML_DTYPES  # type: ignore
except ImportError:  # pragma: no cover - depends on the environment
    ML_DTYPES = None

__all__ = ["KINDS", "MAX_HEADER_LEN", "MAX_READ_HEADER_LEN", "MAX_TENSORS", "MAX_DIMS", "MAX_HEADER_ITEMS",
           "PREFIX", "NANO_MAGIC", "V2", "LEGACY_FIRST_BYTES", "DTYPES", "UNKNOWN_DTYPE", "GE_DATA_TYPE",
           "GE_UNDEFINED", "PLAIN_FORMATS", "DATA_TYPE_NAMES", "FORMAT_NAMES", "ML_DTYPES", "logical_dtype",
           "bits_per_element", "FROM_NUMPY", "repeated"]

#: Payload kinds, in payload order.
KINDS = ("input", "output", "buffer", "workspace")
#: Largest header the writer produces: [1 B, 2 GiB) (reference §1.2).
MAX_HEADER_LEN = 2 ** 31 - 1
#: Largest header the reader reads (64 MiB): a real header is a few hundred bytes per tensor.
MAX_READ_HEADER_LEN = 64 * 1024 * 1024
#: Most tensors (inputs, outputs, buffers and workspaces together) and most attrs a header may list.
MAX_TENSORS = 65536
#: Most dims in one shape (and dim_range entries of one output); numpy itself holds 32 (64 in numpy 2).
MAX_DIMS = 64
#: Most items in one header: protobuf fields at any depth, each dim counting two (a dim costs the
#: most memory per header byte: 8 bytes in protobuf, a tuple slot and an int in TensorInfo).
MAX_HEADER_ITEMS = 1 << 20
PREFIX = struct.Struct("<Q")
NANO_MAGIC = b"\x5a\x5a\x5a\x5a"
V2 = "2.0"
# First byte of a DumpData written in field order: a tag of fields 1..9 with its wire type.
LEGACY_FIRST_BYTES = frozenset((0x0A, 0x10, 0x1A, 0x22, 0x2A, 0x32, 0x3A, 0x42, 0x4A))

# data type value -> (storage numpy dtype, bits per element or None if size is not checkable,
#                     logical dtype: numpy dtype string, "ml:<name>" from ml_dtypes, or None = raw only)
DTYPES = {
    0: ("i1", None, "i1"),  # DT_UNDEFINED: read as int8 (msaccucmp)
    1: ("<f4", 32, "<f4"),
    2: ("<f2", 16, "<f2"),
    3: ("i1", 8, "i1"),
    4: ("u1", 8, "u1"),
    5: ("<i2", 16, "<i2"),
    6: ("<u2", 16, "<u2"),
    7: ("<i4", 32, "<i4"),
    8: ("<i8", 64, "<i8"),
    9: ("<u4", 32, "<u4"),
    10: ("<u8", 64, "<u8"),
    11: ("?", 8, "?"),
    12: ("<f8", 64, "<f8"),
    13: ("u1", None, None),  # DT_STRING
    14: ("i1", 8, "i1"),
    15: ("u1", 8, "u1"),
    16: ("<c8", 64, "<c8"),
    17: ("<c16", 128, "<c16"),
    18: ("i1", 8, "i1"),
    19: ("<i2", 16, "<i2"),
    20: ("<i4", 32, "<i4"),
    21: ("u1", 8, "u1"),
    22: ("<u2", 16, "<u2"),
    23: ("<i8", None, "<i8"),  # DT_RESOURCE: read as int64 (msaccucmp)
    24: ("u1", None, None),
    25: ("u1", None, None),
    26: ("u1", None, None),
    27: ("<u2", 16, "ml:bfloat16"),
    28: ("u1", 4, None),  # DT_INT4, two per byte
    29: ("u1", 1, None),  # DT_UINT1, bit-packed
    30: ("u1", 2, None),
    31: ("u1", 2, None),
    32: ("u1", 32, None),  # DT_COMPLEX32: two float16
    33: ("u1", 8, None),  # DT_HIFLOAT8: no numpy type
    34: ("u1", 8, "ml:float8_e5m2"),
    35: ("u1", 8, "ml:float8_e4m3fn"),
    36: ("u1", 8, "ml:float8_e8m0fnu"),
    37: ("u1", None, None),
    38: ("u1", None, None),
    39: ("u1", 4, None),
    40: ("u1", 4, None),
    41: ("u1", 4, None),
    42: ("u1", None, None),
}
UNKNOWN_DTYPE = ("u1", None, None)

# ge::DataType numbering that GE writes, unconverted, into original_op.data_type (§1.4).
GE_DATA_TYPE = {1: 0, 2: 1, 3: 2, 7: 3, 4: 4, 5: 6, 6: 7, 9: 8, 8: 9, 10: 10, 12: 11, 11: 12, 27: 27}
GE_UNDEFINED = 28
PLAIN_FORMATS = ("NCHW", "NHWC", "ND", "HWCN", "NDHWC", "NCDHW", "DHWCN", "NC", "CN", "NCL", "CHWN")


def logical_dtype(spec: Optional[str], ml_dtypes: Any = ML_DTYPES) -> Optional[np.dtype]:
    """The numpy dtype of a DTYPES logical spec (None: raw only), "ml:" names from ``ml_dtypes``."""
    if spec is None:
        return None
    if spec.startswith("ml:"):
        found = getattr(ml_dtypes, spec[3:], None) if ml_dtypes is not None else None
        return np.dtype(found) if found is not None else None
    return np.dtype(spec)


def bits_per_element(data_type: int) -> Optional[int]:
    """Bits of one element of a DumpData data type, or None when its size is not checkable."""
    return DTYPES.get(data_type, UNKNOWN_DTYPE)[1]


def _numpy_to_data_type() -> Dict[str, int]:
    table = {}  # type: Dict[str, int]
    for value, (_storage, bits, logical) in DTYPES.items():
        dtype = logical_dtype(logical)
        if dtype is not None and bits is not None and dtype.name not in table:
            table[dtype.name] = value
    return table


FROM_NUMPY = _numpy_to_data_type()


DATA_TYPE_NAMES = dict(dump_schema.DATA_TYPES)  # the names of every defined value (a miss asks dump_schema)
FORMAT_NAMES = dict(dump_schema.FORMATS)

_FIELD_OF_KIND = {"input": "input", "output": "output", "buffer": "buffer", "workspace": "space"}


def repeated(header: Any, kind: str) -> Any:
    """The repeated field of a DumpData message that holds the tensors of ``kind``."""
    return getattr(header, _FIELD_OF_KIND[kind])
