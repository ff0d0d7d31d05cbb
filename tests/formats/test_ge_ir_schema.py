"""ge_schema: the ge.proto (ge_ir) messages built at runtime match reference §2.2."""
import pytest
from google.protobuf import text_format

from npu_dump_hook.formats import ge_ir_schema


def numbers(message):
    return {field.name: field.number for field in message.DESCRIPTOR.fields}


def test_package_and_names():
    assert ge_ir_schema.ModelDef.DESCRIPTOR.full_name == "ge.proto.ModelDef"
    assert ge_ir_schema.AttrDef.DESCRIPTOR.nested_types_by_name["ListValue"].full_name == (
        "ge.proto.AttrDef.ListValue")
    # Nested classes are attributes, as in generated code (protobuf 3.x factories do not attach them).
    assert ge_ir_schema.AttrDef.ListValue.DESCRIPTOR.full_name == "ge.proto.AttrDef.ListValue"
    assert ge_ir_schema.AttrDef.ListListInt.ListInt.DESCRIPTOR.full_name == "ge.proto.AttrDef.ListListInt.ListInt"
    assert ge_ir_schema.AttrDef.ListValue.VT_LIST_INT == ge_ir_schema.AttrDef.ListValue.ListValueType.Value("VT_LIST_INT")
    # proto3: scalar defaults are not written.
    assert ge_ir_schema.OpDef(name="", id=0, stream_id=0).SerializeToString() == b""


def test_field_numbers_follow_the_reference_tables():
    assert numbers(ge_ir_schema.ModelDef) == {"name": 1, "version": 2, "custom_version": 3,
                                           "graph": 7, "attr": 11, "attr_groups": 12}
    assert numbers(ge_ir_schema.GraphDef) == {"name": 1, "input": 4, "output": 5, "op": 6,
                                           "attr": 11, "attr_groups": 12}
    assert numbers(ge_ir_schema.OpDef) == {
        "name": 1, "type": 2, "input": 5, "attr": 10, "attr_groups": 11, "has_out_attr": 20,
        "id": 21, "stream_id": 22, "input_name": 23, "src_name": 24, "src_index": 25,
        "dst_name": 26, "dst_index": 27, "input_i": 28, "output_i": 29, "workspace": 30,
        "workspace_bytes": 31, "is_input_const": 32, "input_desc": 33, "output_desc": 34,
        "subgraph_name": 35}
    assert numbers(ge_ir_schema.TensorDescriptor) == {
        "name": 1, "dtype": 2, "shape": 3, "layout": 4, "attr": 5, "attr_groups": 6,
        "has_out_attr": 9, "size": 10, "weight_size": 11, "reuse_input": 12,
        "output_tensor": 13, "device_type": 14, "input_tensor": 15, "real_dim_cnt": 16,
        "reuse_input_index": 17, "data_offset": 18, "cmps_size": 19, "cmps_tab": 20,
        "cmps_tab_offset": 21}
    assert numbers(ge_ir_schema.AttrDef) == {
        "list": 1, "s": 2, "i": 3, "f": 4, "b": 5, "bt": 7, "func": 10, "td": 11, "t": 12,
        "g": 13, "list_list_int": 14, "dt": 15, "list_list_float": 16, "expression": 17}
    assert [f.name for f in ge_ir_schema.AttrDef.DESCRIPTOR.oneofs_by_name["value"].fields] == [
        "list", "s", "i", "f", "b", "bt", "func", "td", "t", "g", "list_list_int", "dt",
        "list_list_float", "expression"]
    assert numbers(ge_ir_schema.AttrDef().list) == {
        "s": 2, "i": 3, "f": 4, "b": 5, "bt": 7, "td": 8, "t": 9, "g": 10, "na": 11,
        "dt": 12, "val_type": 20}
    assert numbers(ge_ir_schema.ShapeDef) == {"dim": 1}
    assert numbers(ge_ir_schema.TensorDef) == {"desc": 1, "data": 2}
    assert numbers(ge_ir_schema.NamedAttrs) == {"name": 1, "attr": 2}


def test_enums():
    dtype = ge_ir_schema.TensorDescriptor.DESCRIPTOR.fields_by_name["dtype"].enum_type
    assert dtype.full_name == "ge.proto.DataType"
    assert {name: dtype.values_by_name[name].number for name in (
        "DT_UNDEFINED", "DT_FLOAT", "DT_FLOAT16", "DT_BOOL", "DT_STRING", "DT_BF16",
        "DT_UINT1", "DT_HIFLOAT8", "DT_FLOAT4_E1M2", "DT_HIFLOAT4")} == {
        "DT_UNDEFINED": 0, "DT_FLOAT": 1, "DT_FLOAT16": 2, "DT_BOOL": 11, "DT_STRING": 13,
        "DT_BF16": 27, "DT_UINT1": 29, "DT_HIFLOAT8": 33, "DT_FLOAT4_E1M2": 40,
        "DT_HIFLOAT4": 41}
    val_type = ge_ir_schema.AttrDef().list.DESCRIPTOR.fields_by_name["val_type"].enum_type
    assert [(v.name, v.number) for v in val_type.values][:3] == [
        ("VT_LIST_NONE", 0), ("VT_LIST_STRING", 1), ("VT_LIST_INT", 2)]
    assert val_type.values_by_name["VT_LIST_DATA_TYPE"].number == 10
    assert ge_ir_schema.data_type_name(27) == "DT_BF16"
    assert ge_ir_schema.data_type_name(250) == "DT_250"
    assert ge_ir_schema.data_type_value("DT_FLOAT16") == 2
    with pytest.raises(ValueError):
        ge_ir_schema.data_type_value("DT_NOPE")


def test_wire_bytes_hand_computed():
    # name=1 "a", type=2 "B", id=21 varint 3 (tag 21<<3 = 168 = a8 01).
    assert ge_ir_schema.OpDef(name="a", type="B", id=3).SerializeToString() == bytes.fromhex(
        "0a01611201 42a80103".replace(" ", ""))
    # A oneof member set to its default is still written (proto3 oneof has presence).
    assert ge_ir_schema.AttrDef(i=0).SerializeToString() == bytes.fromhex("1800")
    # map<string, AttrDef> attr = 10: entry {key "k" (0a 01 6b), value {b: true} (12 02 28 01)}.
    op = ge_ir_schema.OpDef()
    op.attr["k"].b = True
    assert op.SerializeToString() == bytes.fromhex("5207 0a016b 12022801".replace(" ", ""))
    # ShapeDef.dim is packed: dims [1, -1] -> 0a 0b 01 ff*9 01.
    assert ge_ir_schema.ShapeDef(dim=[1, -1]).SerializeToString() == bytes.fromhex(
        "0a0b01" + "ff" * 9 + "01")


def test_reference_text_snippet_parses():
    text = ('graph { name: "ge_default_1" op { name: "fused" type: "Conv2D" input: "src:0" '
            'input: "ctl:-1" attr { key: "_datadump_original_op_names" value { list { '
            's: "tf/A" s: "tf/B" val_type: VT_LIST_STRING } } } id: 12 stream_id: 0 '
            'input_desc { dtype: DT_FLOAT16 shape { dim: 1 dim: 16 } layout: "NC1HWC0" } '
            'output_desc { attr { key: "_datadump_origin_name" value { s: "tf/B" } } } } }')
    model = ge_ir_schema.ModelDef()
    text_format.Parse(text, model)
    op = model.graph[0].op[0]
    assert list(op.attr["_datadump_original_op_names"].list.s) == [b"tf/A", b"tf/B"]
    assert op.input_desc[0].dtype == 2 and op.id == 12
    assert op.output_desc[0].attr["_datadump_origin_name"].s == b"tf/B"
    assert ge_ir_schema.ModelDef.FromString(model.SerializeToString()) == model


def test_attr_groups_are_declared_but_opaque():
    model = ge_ir_schema.ModelDef()
    model.attr_groups.attr_group_def.add()
    assert len(model.attr_groups.attr_group_def) == 1
    assert ge_ir_schema.AttrGroups.DESCRIPTOR.fields_by_name["other_group_def"].number == 1


def test_file_descriptor_is_fresh_and_complete():
    first, second = ge_ir_schema.file_descriptor_proto(), ge_ir_schema.file_descriptor_proto()
    assert first == second and first is not second
    assert first.package == "ge.proto" and first.syntax == "proto3"
    assert sorted(m.name for m in first.message_type) == sorted([
        "AttrDef", "AttrGroupDef", "AttrGroups", "GraphDef", "ModelDef", "NamedAttrs",
        "OpDef", "OtherGroupDef", "ShapeDef", "TensorDef", "TensorDescriptor"])


def test_one_data_type_table_serves_both_formats():
    from npu_dump_hook.formats import data_types, dump_schema

    ge_values = {v.name: v.number for v in ge_ir_schema.ModelDef.DESCRIPTOR.file.enum_types_by_name["DataType"].values}
    assert ge_values == {name: value for value, name in enumerate(data_types.GE_IR_DATA_TYPE_NAMES)}
    assert dump_schema.DATA_TYPES == data_types.DATA_TYPES
    assert data_types.DATA_TYPE_NAMES[: len(data_types.GE_IR_DATA_TYPE_NAMES)] == data_types.GE_IR_DATA_TYPE_NAMES
    assert data_types.DATA_TYPES[42] == "DT_HIFLOAT4_SCALE" and ge_values["DT_HIFLOAT4"] == 41
