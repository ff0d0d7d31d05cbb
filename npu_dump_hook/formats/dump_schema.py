"""The ``DumpData`` protobuf schema of Ascend dump files (``package toolkit.dumpdata``, proto3).

Built at import time from Python code (see :mod:`._proto`), so it works under
protobuf 3.20.3 through 7.x. Field numbers and names follow the current writer
schema (docs/reference/ascend-dump-formats.md §1.3). Variants (§1.5) decode without
error: OpOutput field 11 is ``offset`` here and ``arg_index`` in GE's copy (both
varints); newer/older fields we do not declare are kept as unknown fields.

Public names::

    DumpData, OpOutput, OpInput, OpBuffer, OpAttr, Workspace, Shape, OriginalOp, DimRange
    DATA_TYPES   {value: "DT_FLOAT", ...}      OutputDataType (same numbers as GE-ir DataType)
    FORMATS      {value: "NC1HWC0", ...}       OutputFormat, names without "FORMAT_"
    data_type_name(v) / data_type_value(name)  unknown values render as "DT_UNKNOWN_<v>"
    format_name(v) / format_value(name)        accept "ND" or "FORMAT_ND"; unknown -> "UNKNOWN_<v>"
"""
from typing import Dict, Union

from . import _proto
from .data_types import DATA_TYPES as _DATA_TYPES

__all__ = [
    "DumpData",
    "OpOutput",
    "OpInput",
    "OpBuffer",
    "OpAttr",
    "Workspace",
    "Shape",
    "OriginalOp",
    "DimRange",
    "DATA_TYPES",
    "FORMATS",
    "data_type_name",
    "data_type_value",
    "format_name",
    "format_value",
]

#: OutputDataType value -> enum name (the shared table of :mod:`.data_types`).
DATA_TYPES = dict(_DATA_TYPES)  # type: Dict[int, str]

_FORMAT_ORDER = (
    "NCHW NHWC ND NC1HWC0 FRACTAL_Z NC1C0HWPAD NHWC1C0 FSR_NCHW FRACTAL_DECONV C1HWNC0 "
    "FRACTAL_DECONV_TRANSPOSE FRACTAL_DECONV_SP_STRIDE_TRANS NC1HWC0_C04 FRACTAL_Z_C04 CHWN "
    "FRACTAL_DECONV_SP_STRIDE8_TRANS HWCN NC1KHKWHWC0 BN_WEIGHT FILTER_HWCK "
    "HASHTABLE_LOOKUP_LOOKUPS HASHTABLE_LOOKUP_KEYS HASHTABLE_LOOKUP_VALUE HASHTABLE_LOOKUP_OUTPUT "
    "HASHTABLE_LOOKUP_HITS C1HWNCoC0 MD NDHWC FRACTAL_ZZ FRACTAL_NZ NCDHW DHWCN NDC1HWC0 "
    "FRACTAL_Z_3D CN NC DHWNC FRACTAL_Z_3D_TRANSPOSE FRACTAL_ZN_LSTM FRACTAL_Z_G RESERVED ALL NULL "
    "ND_RNN_BIAS FRACTAL_ZN_RNN YUV YUV_A NCL FRACTAL_Z_WINO C1HWC0"
).split()

#: OutputFormat value -> short name ("NC1HWC0"; the enum spells it FORMAT_NC1HWC0).
FORMATS = {i: name for i, name in enumerate(_FORMAT_ORDER)}  # type: Dict[int, str]
FORMATS[255] = "MAX"

_DATA_TYPE_BY_NAME = {name: value for value, name in DATA_TYPES.items()}
_FORMAT_BY_NAME = {name: value for value, name in FORMATS.items()}


def _build_file():
    fp = _proto.new_file("npu_dump_hook/dump_data.proto", "toolkit.dumpdata")
    _proto.add_enum(fp, "OutputDataType", [(n, v) for v, n in sorted(DATA_TYPES.items())])
    _proto.add_enum(fp, "OutputFormat", [("FORMAT_" + n, v) for v, n in sorted(FORMATS.items())])
    _proto.add_enum(fp, "BufferType", [("L1", 0)])

    shape = _proto.add_message(fp, "Shape")
    _proto.add_field(shape, "dim", 1, "uint64", repeated=True)

    original = _proto.add_message(fp, "OriginalOp")
    _proto.add_field(original, "name", 1, "string")
    _proto.add_field(original, "output_index", 2, "uint32")
    _proto.add_field(original, "data_type", 3, "enum", type_name="OutputDataType")
    _proto.add_field(original, "format", 4, "enum", type_name="OutputFormat")

    dim_range = _proto.add_message(fp, "DimRange")
    _proto.add_field(dim_range, "dim_start", 1, "uint64")
    _proto.add_field(dim_range, "dim_end", 2, "uint64")

    out = _proto.add_message(fp, "OpOutput")
    _proto.add_field(out, "data_type", 1, "enum", type_name="OutputDataType")
    _proto.add_field(out, "format", 2, "enum", type_name="OutputFormat")
    _proto.add_field(out, "shape", 3, "message", type_name="Shape")
    _proto.add_field(out, "original_op", 4, "message", type_name="OriginalOp")
    _proto.add_field(out, "data", 5, "bytes")
    _proto.add_field(out, "size", 6, "uint64")
    _proto.add_field(out, "original_shape", 7, "message", type_name="Shape")
    _proto.add_field(out, "sub_format", 8, "int32")
    _proto.add_field(out, "address", 9, "uint64")
    _proto.add_field(out, "dim_range", 10, "message", repeated=True, type_name="DimRange")
    _proto.add_field(out, "offset", 11, "uint64")  # GE's copy: arg_index uint32 (same wire type)

    inp = _proto.add_message(fp, "OpInput")
    _proto.add_field(inp, "data_type", 1, "enum", type_name="OutputDataType")
    _proto.add_field(inp, "format", 2, "enum", type_name="OutputFormat")
    _proto.add_field(inp, "shape", 3, "message", type_name="Shape")
    _proto.add_field(inp, "data", 4, "bytes")
    _proto.add_field(inp, "size", 5, "uint64")
    _proto.add_field(inp, "original_shape", 6, "message", type_name="Shape")
    _proto.add_field(inp, "sub_format", 7, "int32")
    _proto.add_field(inp, "address", 8, "uint64")
    _proto.add_field(inp, "offset", 9, "uint64")
    _proto.add_field(inp, "arg_index", 10, "uint32")
    _proto.add_field(inp, "input_type", 11, "uint32")

    buf = _proto.add_message(fp, "OpBuffer")
    _proto.add_field(buf, "buffer_type", 1, "enum", type_name="BufferType")
    _proto.add_field(buf, "data", 2, "bytes")
    _proto.add_field(buf, "size", 3, "uint64")

    attr = _proto.add_message(fp, "OpAttr")
    _proto.add_field(attr, "name", 1, "string")
    _proto.add_field(attr, "value", 2, "string")

    space = _proto.add_message(fp, "Workspace")
    _proto.add_enum(space, "SpaceType", [("LOG", 0)])
    _proto.add_field(space, "type", 1, "enum", type_name="Workspace.SpaceType")
    _proto.add_field(space, "data", 2, "bytes")
    _proto.add_field(space, "size", 3, "uint64")
    _proto.add_field(space, "arg_index", 4, "uint32")  # adump/GE copies

    dump = _proto.add_message(fp, "DumpData")
    _proto.add_field(dump, "version", 1, "string")
    _proto.add_field(dump, "dump_time", 2, "uint64")
    _proto.add_field(dump, "output", 3, "message", repeated=True, type_name="OpOutput")
    _proto.add_field(dump, "input", 4, "message", repeated=True, type_name="OpInput")
    _proto.add_field(dump, "buffer", 5, "message", repeated=True, type_name="OpBuffer")
    _proto.add_field(dump, "op_name", 6, "string")
    _proto.add_field(dump, "attr", 7, "message", repeated=True, type_name="OpAttr")
    _proto.add_field(dump, "space", 8, "message", repeated=True, type_name="Workspace")
    _proto.add_field(dump, "dfx_message", 9, "string")
    return fp


FILE_DESCRIPTOR_PROTO = _build_file()
_CLASSES = _proto.build_messages(FILE_DESCRIPTOR_PROTO)

DumpData = _CLASSES["DumpData"]
OpOutput = _CLASSES["OpOutput"]
OpInput = _CLASSES["OpInput"]
OpBuffer = _CLASSES["OpBuffer"]
OpAttr = _CLASSES["OpAttr"]
Workspace = _CLASSES["Workspace"]
Shape = _CLASSES["Shape"]
OriginalOp = _CLASSES["OriginalOp"]
DimRange = _CLASSES["DimRange"]


def data_type_name(value: int) -> str:
    """"DT_FLOAT" for 1; "DT_UNKNOWN_<v>" for values no schema copy defines."""
    name = DATA_TYPES.get(value)
    return name if name is not None else "DT_UNKNOWN_{}".format(value)


def format_name(value: int) -> str:
    """"NC1HWC0" for 3; "UNKNOWN_<v>" for values no schema copy defines."""
    name = FORMATS.get(value)
    return name if name is not None else "UNKNOWN_{}".format(value)


def data_type_value(name: Union[str, int]) -> int:
    """1 for "DT_FLOAT" (or "FLOAT", or 1). Raises KeyError for unknown names."""
    if isinstance(name, int):
        return name
    key = name if name.startswith("DT_") else "DT_" + name
    return _DATA_TYPE_BY_NAME[key]


def format_value(name: Union[str, int]) -> int:
    """3 for "NC1HWC0" or "FORMAT_NC1HWC0" (or 3). Raises KeyError for unknown names."""
    if isinstance(name, int):
        return name
    key = name[len("FORMAT_"):] if name.startswith("FORMAT_") else name
    return _FORMAT_BY_NAME[key]
