"""The one DataType table of the Ascend formats (docs/reference/ascend-dump-formats.md §1.3).

GE's graph IR (``ge.proto`` ``DataType``, in Build graph files) and the dump files'
``OutputDataType`` (``DumpData`` protobuf) number data types the same way; the dump copy
adds ``DT_HIFLOAT4_SCALE`` (42) after GE-IR's last value.
"""
from typing import Dict, Tuple

__all__ = ["DATA_TYPE_NAMES", "GE_IR_DATA_TYPE_NAMES", "DATA_TYPES"]

#: Value -> name, by position: the dump files' OutputDataType.
DATA_TYPE_NAMES = tuple("DT_" + name for name in (
    "UNDEFINED FLOAT FLOAT16 INT8 UINT8 INT16 UINT16 INT32 INT64 UINT32 UINT64 BOOL DOUBLE STRING "
    "DUAL_SUB_INT8 DUAL_SUB_UINT8 COMPLEX64 COMPLEX128 QINT8 QINT16 QINT32 QUINT8 QUINT16 RESOURCE "
    "STRING_REF DUAL VARIANT BF16 INT4 UINT1 INT2 UINT2 COMPLEX32 HIFLOAT8 FLOAT8_E5M2 "
    "FLOAT8_E4M3FN FLOAT8_E8M0 FLOAT6_E3M2 FLOAT6_E2M3 FLOAT4_E2M1 FLOAT4_E1M2 HIFLOAT4 HIFLOAT4_SCALE"
).split())  # type: Tuple[str, ...]
#: GE-IR's DataType stops at DT_HIFLOAT4 (41).
GE_IR_DATA_TYPE_NAMES = DATA_TYPE_NAMES[: DATA_TYPE_NAMES.index("DT_HIFLOAT4") + 1]
DATA_TYPES = dict(enumerate(DATA_TYPE_NAMES))  # type: Dict[int, str]
