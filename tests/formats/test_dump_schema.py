"""DumpData schema (reference §1.3, §1.5, §1.7) and the runtime descriptor helper."""
from google.protobuf import descriptor_pb2

from npu_dump_hook.formats import _proto, dump_schema

# §1.7: version "2.0", dump_time 1700000000123456, op_name "a/b.c", one output
# {FLOAT, ND, shape [2,2], original_op {name "a/b.c", format ND}, size 16, original_shape [2,2]}.
GOLDEN_52 = bytes.fromhex(
    "0a03322e3010c0c480c1c1c482031a1d080110021a040a02020222090a05612f622e63"
    "200230103a040a0202023205612f622e63"
)


def _golden_message():
    header = dump_schema.DumpData(version="2.0", dump_time=1700000000123456, op_name="a/b.c")
    out = header.output.add(data_type=1, format=2, size=16)
    out.shape.dim.extend([2, 2])
    out.original_shape.dim.extend([2, 2])
    out.original_op.name = "a/b.c"
    out.original_op.format = 2
    return header


def test_golden_header_bytes():
    encoded = _golden_message().SerializeToString(deterministic=True)
    assert len(encoded) == 52
    assert encoded == GOLDEN_52


def test_golden_bytes_decode_back():
    header = dump_schema.DumpData()
    header.ParseFromString(GOLDEN_52)
    assert header.version == "2.0"
    assert header.dump_time == 1700000000123456
    assert header.op_name == "a/b.c"
    (out,) = header.output
    assert (out.data_type, out.format, out.size) == (1, 2, 16)
    assert list(out.shape.dim) == [2, 2] and list(out.original_shape.dim) == [2, 2]
    assert (out.original_op.name, out.original_op.format) == ("a/b.c", 2)


def _field_numbers(message_class):
    return {f.name: f.number for f in message_class.DESCRIPTOR.fields}


def test_field_numbers_follow_reference_tables():
    assert _field_numbers(dump_schema.DumpData) == {
        "version": 1, "dump_time": 2, "output": 3, "input": 4, "buffer": 5,
        "op_name": 6, "attr": 7, "space": 8, "dfx_message": 9}
    assert _field_numbers(dump_schema.OpOutput) == {
        "data_type": 1, "format": 2, "shape": 3, "original_op": 4, "data": 5, "size": 6,
        "original_shape": 7, "sub_format": 8, "address": 9, "dim_range": 10, "offset": 11}
    assert _field_numbers(dump_schema.OpInput) == {
        "data_type": 1, "format": 2, "shape": 3, "data": 4, "size": 5, "original_shape": 6,
        "sub_format": 7, "address": 8, "offset": 9, "arg_index": 10, "input_type": 11}
    assert _field_numbers(dump_schema.OriginalOp) == {"name": 1, "output_index": 2, "data_type": 3, "format": 4}
    assert _field_numbers(dump_schema.Workspace) == {"type": 1, "data": 2, "size": 3, "arg_index": 4}
    assert _field_numbers(dump_schema.OpBuffer) == {"buffer_type": 1, "data": 2, "size": 3}


def test_enum_names_from_reference_tables():
    assert dump_schema.DATA_TYPES[1] == "DT_FLOAT"
    assert dump_schema.DATA_TYPES[27] == "DT_BF16"
    assert dump_schema.DATA_TYPES[35] == "DT_FLOAT8_E4M3FN"
    assert dump_schema.DATA_TYPES[41] == "DT_HIFLOAT4"
    assert dump_schema.FORMATS[3] == "NC1HWC0"
    assert dump_schema.FORMATS[29] == "FRACTAL_NZ"
    assert dump_schema.FORMATS[32] == "NDC1HWC0"
    assert dump_schema.FORMATS[49] == "C1HWC0"
    assert dump_schema.FORMATS[255] == "MAX"
    assert dump_schema.format_name(99) == "UNKNOWN_99"
    assert dump_schema.data_type_name(77) == "DT_UNKNOWN_77"
    assert dump_schema.format_value("FORMAT_FRACTAL_Z") == 4 == dump_schema.format_value("FRACTAL_Z")
    assert dump_schema.data_type_value("FLOAT16") == 2 == dump_schema.data_type_value("DT_FLOAT16")


def test_ge_variant_field_11_arg_index_decodes():
    # GE's dump_task.proto puts arg_index (uint32) at OpOutput 11: same varint wire type.
    out = dump_schema.OpOutput()
    out.ParseFromString(bytes.fromhex("0801" "5807"))  # data_type 1, field 11 = 7
    assert out.data_type == 1 and out.offset == 7


def test_unknown_fields_are_kept_not_fatal():
    # RT-adump OpOutput field 12 (arg_index) and a future DumpData field 20 are unknown here.
    out_bytes = bytes.fromhex("0801" "6005")  # field 12 varint 5
    header_bytes = bytes.fromhex("0a03322e30") + bytes([0x1A, len(out_bytes)]) + out_bytes + bytes.fromhex("a00101")
    header = dump_schema.DumpData()
    header.ParseFromString(header_bytes)
    assert header.version == "2.0" and header.output[0].data_type == 1
    assert header.SerializeToString() == header_bytes  # unknown fields survive a round trip


def test_md_old_field_7_workspace_decodes_as_unknown_data():
    # MD-old: DumpData 7 is `space` Workspace{2 data_addr bytes, 3 size}. Our field 7 is OpAttr
    # {1 name, 2 value}; valid UTF-8 data and an extra varint decode without error.
    workspace = bytes.fromhex("1202" "4142" "1805")  # data_addr "AB", size 5
    header = dump_schema.DumpData()
    header.ParseFromString(bytes.fromhex("3205" "612f622e63") + bytes([0x3A, len(workspace)]) + workspace)
    assert header.op_name == "a/b.c"
    assert header.attr[0].value == "AB"


def test_proto_helper_builds_maps_oneofs_nested_enums_in_private_pools():
    def build():
        fp = _proto.new_file("t/thing.proto", "t.pkg")
        thing = _proto.add_message(fp, "Thing")
        _proto.add_enum(thing, "Kind", [("A", 0), ("B", 1)])
        _proto.add_field(thing, "name", 1, "string")
        _proto.add_field(thing, "kind", 2, "enum", type_name="Thing.Kind")
        _proto.add_field(thing, "dims", 3, "int64", repeated=True)
        _proto.add_map_field(thing, "attr", 4, "string", "message", value_type_name="Value")
        value = _proto.add_message(fp, "Value")
        which = _proto.add_oneof(value, "value")
        _proto.add_field(value, "s", 1, "bytes", oneof_index=which)
        _proto.add_field(value, "i", 2, "int64", oneof_index=which)
        return fp, _proto.build_messages(fp)

    fp, classes = build()
    _, again = build()  # same file name twice: private pools do not clash
    assert set(classes) == {"Thing", "Thing.AttrEntry", "Value"}
    assert isinstance(fp, descriptor_pb2.FileDescriptorProto)
    thing = classes["Thing"](name="x", kind=1, dims=[1, -1])
    thing.attr["k"].i = 3
    encoded = thing.SerializeToString(deterministic=True)
    # name "x"; kind 1; dims packed [1, -1 (10-byte varint)]; attr entry {key "k", value {i: 3}}
    assert encoded == bytes.fromhex(
        "0a0178" "1001" "1a0b01ffffffffffffffffff01" "2207" "0a016b" "12021003")
    decoded = again["Thing"]()
    decoded.ParseFromString(encoded)
    assert decoded.attr["k"].WhichOneof("value") == "i" and decoded.dims == [1, -1]
