"""Build protobuf message classes at runtime, without protoc-generated code.

Generated ``*_pb2.py`` modules are tied to the protobuf release that produced
them; Ascend images carry protobuf 3.x (TF 1.15) while CI runs 4.x to 7.x. So
schemas here are written as Python code that fills a
``descriptor_pb2.FileDescriptorProto``, and :func:`build_messages` turns it into
message classes through a *private* ``DescriptorPool`` (never the default pool,
so our ``toolkit.dumpdata`` / ``ge.proto`` names cannot clash with anything else
loaded in the process).

Contract::

    fp = new_file("my.proto", "my.pkg")                 # proto3 by default
    add_enum(fp, "Color", [("RED", 0), ("BLUE", 1)])
    msg = add_message(fp, "Thing")
    add_field(msg, "name", 1, "string")
    add_field(msg, "color", 2, "enum", type_name="Color")
    add_field(msg, "dims", 3, "uint64", repeated=True)
    add_map_field(msg, "attr", 4, "string", "message", value_type_name="Thing")
    classes = build_messages(fp)    # {"Thing": <class>, "Thing.AttrEntry": <class>}

``type_name`` values not starting with ``.`` are taken relative to the file's
package (``"Thing"`` -> ``".my.pkg.Thing"``, nested ``"Outer.Inner"`` likewise).
Works with protobuf 3.20.3 through 7.x: ``message_factory.GetMessageClass`` when
it exists, else ``MessageFactory(pool).GetPrototype``.

Reading descriptors across those releases: :func:`is_repeated` of a field descriptor.
"""
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as _FD

__all__ = [
    "new_file",
    "add_enum",
    "add_message",
    "add_field",
    "add_oneof",
    "add_map_field",
    "build_messages",
    "is_repeated",
]

_FDP = descriptor_pb2.FieldDescriptorProto

#: Friendly field-type names -> FieldDescriptorProto.TYPE_* values.
_TYPES = {
    "double": _FDP.TYPE_DOUBLE,
    "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32,
    "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32,
    "bool": _FDP.TYPE_BOOL,
    "string": _FDP.TYPE_STRING,
    "message": _FDP.TYPE_MESSAGE,
    "bytes": _FDP.TYPE_BYTES,
    "uint32": _FDP.TYPE_UINT32,
    "enum": _FDP.TYPE_ENUM,
    "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64,
    "sint32": _FDP.TYPE_SINT32,
    "sint64": _FDP.TYPE_SINT64,
}

_Container = Union[descriptor_pb2.FileDescriptorProto, descriptor_pb2.DescriptorProto]


def new_file(name: str, package: str, syntax: str = "proto3") -> descriptor_pb2.FileDescriptorProto:
    """Return an empty file descriptor named ``name`` in ``package``."""
    file_proto = descriptor_pb2.FileDescriptorProto()
    file_proto.name = name
    file_proto.package = package
    file_proto.syntax = syntax
    return file_proto


def add_enum(
    container: _Container, name: str, values: Iterable[Tuple[str, int]]
) -> descriptor_pb2.EnumDescriptorProto:
    """Add enum ``name`` with (value name, number) pairs to a file or a message (nested enum)."""
    enum = container.enum_type.add()
    enum.name = name
    for value_name, number in values:
        value = enum.value.add()
        value.name = value_name
        value.number = number
    return enum


def add_message(container: _Container, name: str) -> descriptor_pb2.DescriptorProto:
    """Add message ``name`` to a file, or as a nested message to a message."""
    if isinstance(container, descriptor_pb2.FileDescriptorProto):
        return container.message_type.add(name=name)
    return container.nested_type.add(name=name)


def add_field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    type_: str,
    repeated: bool = False,
    type_name: Optional[str] = None,
    oneof_index: Optional[int] = None,
) -> descriptor_pb2.FieldDescriptorProto:
    """Add a field. ``type_`` is a proto type word ("uint64", "message", "enum", ...);
    ``type_name`` names the message/enum type for "message"/"enum" fields."""
    if type_ not in _TYPES:
        raise ValueError("unknown protobuf field type {!r}".format(type_))
    if (type_ in ("message", "enum")) != (type_name is not None):
        raise ValueError("field {!r}: type_name is required for message/enum fields only".format(name))
    field = message.field.add()
    field.name = name
    field.number = number
    field.type = _TYPES[type_]
    field.label = _FDP.LABEL_REPEATED if repeated else _FDP.LABEL_OPTIONAL
    if type_name is not None:
        field.type_name = type_name
    if oneof_index is not None:
        field.oneof_index = oneof_index
    return field


def add_oneof(message: descriptor_pb2.DescriptorProto, name: str) -> int:
    """Declare oneof ``name`` in ``message``; pass the returned index to add_field(oneof_index=)."""
    message.oneof_decl.add(name=name)
    return len(message.oneof_decl) - 1


def add_map_field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    key_type: str,
    value_type: str,
    value_type_name: Optional[str] = None,
) -> descriptor_pb2.FieldDescriptorProto:
    """Add ``map<key_type, value_type> name = number`` (a nested ``{Name}Entry`` message,
    as protoc generates it: CamelCase of the field name + "Entry")."""
    entry_name = "".join(part[:1].upper() + part[1:] for part in name.split("_")) + "Entry"
    entry = add_message(message, entry_name)
    entry.options.map_entry = True
    add_field(entry, "key", 1, key_type)
    add_field(entry, "value", 2, value_type, type_name=value_type_name)
    return add_field(message, name, number, "message", repeated=True, type_name=message.name + "." + entry_name)


def _qualify_type_names(file_proto: descriptor_pb2.FileDescriptorProto) -> None:
    prefix = "." + file_proto.package + "." if file_proto.package else "."
    stack = list(file_proto.message_type)
    while stack:
        message = stack.pop()
        stack.extend(message.nested_type)
        for field in message.field:
            if field.type_name and not field.type_name.startswith("."):
                field.type_name = prefix + field.type_name


def _message_class(descriptor, pool: descriptor_pool.DescriptorPool) -> type:
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:  # protobuf >= 4.22
        return get_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # protobuf 3.x


def build_messages(file_proto: descriptor_pb2.FileDescriptorProto) -> Dict[str, type]:
    """Register a copy of ``file_proto`` in a fresh private pool; return its message classes.

    Keys are names relative to the package, nested ones dotted ("AttrDef.ListValue").
    """
    file_copy = descriptor_pb2.FileDescriptorProto()
    file_copy.CopyFrom(file_proto)
    _qualify_type_names(file_copy)
    pool = descriptor_pool.DescriptorPool()
    # AddSerializedFile exists, with the same meaning, in every release from 3.20 to 7.x.
    pool.AddSerializedFile(file_copy.SerializeToString())
    file_desc = pool.FindFileByName(file_copy.name)
    classes = {}  # type: Dict[str, type]
    stack = [(desc.name, desc) for desc in file_desc.message_types_by_name.values()]
    while stack:
        name, desc = stack.pop()
        classes[name] = _message_class(desc, pool)
        stack.extend((name + "." + nested.name, nested) for nested in desc.nested_types)
    _attach_nested_classes(classes)
    return classes


def _attach_nested_classes(classes: Dict[str, type]) -> None:
    """Make ``Outer.Inner`` reachable as an attribute, as in generated code.

    protobuf >= 4 message factories attach nested classes to their parent; protobuf 3.x
    (3.20.3 on TF 1.15 images) leaves that to the generated ``_pb2`` module.
    """
    for name, cls in classes.items():
        parent, _, leaf = name.rpartition(".")
        if parent and not hasattr(classes[parent], leaf):
            setattr(classes[parent], leaf, cls)


def is_repeated(field: Any) -> bool:
    """Whether a field descriptor is repeated, on every supported protobuf release."""
    # protobuf 7 dropped FieldDescriptor.label; releases before 5.x lack is_repeated.
    flag = getattr(field, "is_repeated", None)
    if flag is None:
        return field.label == _FD.LABEL_REPEATED
    return bool(flag() if callable(flag) else flag)
