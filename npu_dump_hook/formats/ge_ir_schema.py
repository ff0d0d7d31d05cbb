"""GE graph IR schema (``ge_ir.proto``, ``package ge.proto``, proto3) as runtime-built messages.

Reference docs/reference/ascend-dump-formats.md §2.2. The descriptor is assembled here from a table of
field names, numbers and types (no protoc, no generated ``*_pb2`` module), so it imports
under every protobuf release from 3.20.3 to 7.x; the shared helper in ``_proto`` turns it
into message classes.

Messages (top level unless noted): ``ModelDef``, ``GraphDef``, ``OpDef``, ``AttrDef`` (nested
``AttrDef.ListValue`` with enum ``ListValueType``, ``AttrDef.ListListInt.ListInt``,
``AttrDef.ListListFloat.ListFloat``), ``NamedAttrs``, ``TensorDescriptor``, ``TensorDef``,
``ShapeDef``, ``AttrGroups``, ``OtherGroupDef``, ``AttrGroupDef``; enum ``DataType``.

Deliberate gaps: the contents of ``OtherGroupDef`` and ``AttrGroupDef`` (newest GE only,
symbolic-shape info reached through ``attr_groups``) are not modelled; their fields are
unknown to this schema, so text holding them parses only with unknown fields allowed (the
default of :func:`npu_dump_hook.formats.ge_graph.parse_model`), which drops them.
"""
from typing import Dict, List, Optional, Tuple

from google.protobuf import descriptor_pb2

from . import _proto
from .data_types import GE_IR_DATA_TYPE_NAMES

__all__ = [
    "FILE_NAME",
    "PACKAGE",
    "DATA_TYPE_NAMES",
    "LIST_VALUE_TYPE_NAMES",
    "file_descriptor_proto",
    "ModelDef",
    "GraphDef",
    "OpDef",
    "AttrDef",
    "NamedAttrs",
    "TensorDescriptor",
    "TensorDef",
    "ShapeDef",
    "AttrGroups",
    "data_type_name",
    "data_type_value",
]

FILE_NAME = "npu_dump_hook/ge_ir.proto"
PACKAGE = "ge.proto"

# ge.proto.DataType, value = position: the shared table of .data_types, up to GE-IR's last value.
DATA_TYPE_NAMES = GE_IR_DATA_TYPE_NAMES

# Attribute keys GE writes for the dump (reference §1.8, §2.4, §2.5).
ATTR_NO_TASK = "_no_task"
ATTR_ORIGINAL_OP_NAMES = "_datadump_original_op_names"
ATTR_ORIGIN_NAME = "_datadump_origin_name"
ATTR_ORIGIN_OUTPUT_INDEX = "_datadump_origin_output_index"

# ge.proto.AttrDef.ListValue.ListValueType, value = position.
LIST_VALUE_TYPE_NAMES = (
    "VT_LIST_NONE", "VT_LIST_STRING", "VT_LIST_INT", "VT_LIST_FLOAT", "VT_LIST_BOOL",
    "VT_LIST_BYTES", "VT_LIST_TENSOR_DESC", "VT_LIST_TENSOR", "VT_LIST_GRAPH",
    "VT_LIST_NAMED_ATTRS", "VT_LIST_DATA_TYPE",
)

_SCALARS = frozenset(("string", "bytes", "int64", "uint32", "float", "bool"))
_ENUMS = {"DataType": "DataType", "ListValueType": "AttrDef.ListValue.ListValueType"}

# Field spec: (name, number, type, label) where type is a scalar name, an enum name from
# _ENUMS, a message path relative to the package, or "map:<Value message>" for
# map<string, Value>; label is "" (singular) or "repeated". Order = declaration order,
# which is the key order of the msaccucmp JSON export.
_Field = Tuple[str, int, str, str]
_ATTR_MAP = "map:AttrDef"

_MESSAGES = {
    "ModelDef": [
        ("name", 1, "string", ""), ("version", 2, "uint32", ""),
        ("custom_version", 3, "string", ""), ("graph", 7, "GraphDef", "repeated"),
        ("attr", 11, _ATTR_MAP, ""), ("attr_groups", 12, "AttrGroups", ""),
    ],
    "GraphDef": [
        ("name", 1, "string", ""), ("input", 4, "string", "repeated"),
        ("output", 5, "string", "repeated"), ("op", 6, "OpDef", "repeated"),
        ("attr", 11, _ATTR_MAP, ""), ("attr_groups", 12, "AttrGroups", ""),
    ],
    "OpDef": [
        ("name", 1, "string", ""), ("type", 2, "string", ""),
        ("input", 5, "string", "repeated"), ("attr", 10, _ATTR_MAP, ""),
        ("attr_groups", 11, "AttrGroups", ""), ("has_out_attr", 20, "bool", ""),
        ("id", 21, "int64", ""), ("stream_id", 22, "int64", ""),
        ("input_name", 23, "string", "repeated"), ("src_name", 24, "string", "repeated"),
        ("src_index", 25, "int64", "repeated"), ("dst_name", 26, "string", "repeated"),
        ("dst_index", 27, "int64", "repeated"), ("input_i", 28, "int64", "repeated"),
        ("output_i", 29, "int64", "repeated"), ("workspace", 30, "int64", "repeated"),
        ("workspace_bytes", 31, "int64", "repeated"),
        ("is_input_const", 32, "bool", "repeated"),
        ("input_desc", 33, "TensorDescriptor", "repeated"),
        ("output_desc", 34, "TensorDescriptor", "repeated"),
        ("subgraph_name", 35, "string", "repeated"),
    ],
    "TensorDescriptor": [
        ("name", 1, "string", ""), ("dtype", 2, "DataType", ""), ("shape", 3, "ShapeDef", ""),
        ("layout", 4, "string", ""), ("attr", 5, _ATTR_MAP, ""),
        ("attr_groups", 6, "AttrGroups", ""), ("has_out_attr", 9, "bool", ""),
        ("size", 10, "int64", ""), ("weight_size", 11, "int64", ""),
        ("reuse_input", 12, "bool", ""), ("output_tensor", 13, "bool", ""),
        ("device_type", 14, "string", ""), ("input_tensor", 15, "bool", ""),
        ("real_dim_cnt", 16, "int64", ""), ("reuse_input_index", 17, "int64", ""),
        ("data_offset", 18, "int64", ""), ("cmps_size", 19, "int64", ""),
        ("cmps_tab", 20, "string", ""), ("cmps_tab_offset", 21, "int64", ""),
    ],
    "ShapeDef": [("dim", 1, "int64", "repeated")],
    "TensorDef": [("desc", 1, "TensorDescriptor", ""), ("data", 2, "bytes", "")],
    "NamedAttrs": [("name", 1, "string", ""), ("attr", 2, _ATTR_MAP, "")],
    "AttrGroups": [
        ("other_group_def", 1, "OtherGroupDef", ""),
        ("attr_group_def", 2, "AttrGroupDef", "repeated"),
    ],
    "OtherGroupDef": [],
    "AttrGroupDef": [],
    "AttrDef.ListValue": [
        ("s", 2, "bytes", "repeated"), ("i", 3, "int64", "repeated"),
        ("f", 4, "float", "repeated"), ("b", 5, "bool", "repeated"),
        ("bt", 7, "bytes", "repeated"), ("td", 8, "TensorDescriptor", "repeated"),
        ("t", 9, "TensorDef", "repeated"), ("g", 10, "GraphDef", "repeated"),
        ("na", 11, "NamedAttrs", "repeated"), ("dt", 12, "int64", "repeated"),
        ("val_type", 20, "ListValueType", ""),
    ],
    "AttrDef.ListListInt": [("list_list_i", 1, "AttrDef.ListListInt.ListInt", "repeated")],
    "AttrDef.ListListInt.ListInt": [("list_i", 1, "int64", "repeated")],
    "AttrDef.ListListFloat": [
        ("list_list_f", 1, "AttrDef.ListListFloat.ListFloat", "repeated")],
    "AttrDef.ListListFloat.ListFloat": [("list_f", 1, "float", "repeated")],
    # Every AttrDef field belongs to `oneof value`.
    "AttrDef": [
        ("list", 1, "AttrDef.ListValue", ""), ("s", 2, "bytes", ""), ("i", 3, "int64", ""),
        ("f", 4, "float", ""), ("b", 5, "bool", ""), ("bt", 7, "bytes", ""),
        ("func", 10, "NamedAttrs", ""), ("td", 11, "TensorDescriptor", ""),
        ("t", 12, "TensorDef", ""), ("g", 13, "GraphDef", ""),
        ("list_list_int", 14, "AttrDef.ListListInt", ""), ("dt", 15, "int64", ""),
        ("list_list_float", 16, "AttrDef.ListListFloat", ""), ("expression", 17, "bytes", ""),
    ],
}
_ONEOF_MESSAGES = {"AttrDef": "value"}


def _fill_message(message: descriptor_pb2.DescriptorProto, path: str,
                  fields: List[_Field]) -> None:
    oneof_index = None  # type: Optional[int]
    if path in _ONEOF_MESSAGES:
        oneof_index = _proto.add_oneof(message, _ONEOF_MESSAGES[path])
    for name, number, type_name, label in fields:
        repeated = label == "repeated"
        if type_name.startswith("map:"):
            _proto.add_map_field(message, name, number, "string", "message",
                                 value_type_name=type_name[4:])
        elif type_name in _SCALARS:
            _proto.add_field(message, name, number, type_name, repeated, oneof_index=oneof_index)
        elif type_name in _ENUMS:
            _proto.add_field(message, name, number, "enum", repeated, _ENUMS[type_name],
                             oneof_index)
        else:
            _proto.add_field(message, name, number, "message", repeated, type_name, oneof_index)


def file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """A fresh ``FileDescriptorProto`` for ``ge.proto`` (proto3), built from the tables above."""
    file_proto = _proto.new_file(FILE_NAME, PACKAGE)
    _proto.add_enum(file_proto, "DataType", [(n, v) for v, n in enumerate(DATA_TYPE_NAMES)])
    built = {}  # type: Dict[str, descriptor_pb2.DescriptorProto]
    # Parents sort before their nested paths ("AttrDef" < "AttrDef.ListValue").
    for path in sorted(_MESSAGES, key=lambda p: (p.count("."), p)):
        parent, _, leaf = path.rpartition(".")
        built[path] = _proto.add_message(built[parent] if parent else file_proto, leaf)
    _proto.add_enum(built["AttrDef.ListValue"], "ListValueType",
                    [(n, v) for v, n in enumerate(LIST_VALUE_TYPE_NAMES)])
    for path in sorted(_MESSAGES):
        _fill_message(built[path], path, _MESSAGES[path])
    return file_proto


_CLASSES = _proto.build_messages(file_descriptor_proto())

ModelDef = _CLASSES["ModelDef"]
GraphDef = _CLASSES["GraphDef"]
OpDef = _CLASSES["OpDef"]
AttrDef = _CLASSES["AttrDef"]
NamedAttrs = _CLASSES["NamedAttrs"]
TensorDescriptor = _CLASSES["TensorDescriptor"]
TensorDef = _CLASSES["TensorDef"]
ShapeDef = _CLASSES["ShapeDef"]
AttrGroups = _CLASSES["AttrGroups"]


def data_type_name(value: int) -> str:
    """``DT_*`` name of a ge DataType value; unknown values as ``"DT_<value>"``."""
    if 0 <= value < len(DATA_TYPE_NAMES):
        return DATA_TYPE_NAMES[value]
    return "DT_{}".format(value)


def data_type_value(name: str) -> int:
    """Value of a ``DT_*`` name; ValueError for names outside the schema."""
    try:
        return DATA_TYPE_NAMES.index(name)
    except ValueError:
        raise ValueError("unknown ge DataType name {!r}".format(name)) from None
