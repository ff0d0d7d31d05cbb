"""Builders of GE graph messages (ops, tensor descriptors, attrs, models): the emulator and tests
make graphs with them exactly as GE lays them out."""
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from . import dump_schema as schema  # format names/values shared with the dump-file schema
from . import ge_ir_schema as ge_schema

__all__ = ["set_attr", "make_tensor_desc", "make_op", "make_model"]


# --------------------------------------------------------------------------- builders

_LIST_KINDS = ((bool, "b", "VT_LIST_BOOL"), (int, "i", "VT_LIST_INT"),
               (float, "f", "VT_LIST_FLOAT"), ((str, bytes), "s", "VT_LIST_STRING"))


def set_attr(attrs: Any, key: str, value: Any) -> None:
    """Set map entry ``attrs[key]`` (an ``attr`` map of OpDef/TensorDescriptor/GraphDef)
    from a Python value: bool -> b, int -> i, float -> f, str/bytes -> s, a list of one
    of those -> list with its val_type, an AttrDef -> copied."""
    target = attrs[key]
    target.Clear()
    if hasattr(value, "DESCRIPTOR"):
        target.CopyFrom(value)
    elif isinstance(value, bool):
        target.b = value
    elif isinstance(value, int):
        target.i = value
    elif isinstance(value, float):
        target.f = value
    elif isinstance(value, (str, bytes)):
        target.s = value.encode("utf-8") if isinstance(value, str) else value
    elif isinstance(value, (list, tuple)):
        _set_list(target.list, key, value)
    else:
        raise TypeError("attr {!r}: unsupported value type {}".format(key, type(value).__name__))


def _set_list(target: Any, key: str, values: Sequence[Any]) -> None:
    for kind, field, val_type in _LIST_KINDS:
        if all(isinstance(v, kind) and not (kind is int and isinstance(v, bool))
               for v in values):
            if field == "s":
                values = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
            getattr(target, field).extend(values)
            target.val_type = ge_schema.LIST_VALUE_TYPE_NAMES.index(val_type)
            return
    raise TypeError("attr {!r}: list items must all be bool, int, float or str".format(key))


def _dtype_value(dtype: Union[str, int]) -> int:
    return dtype if isinstance(dtype, int) else ge_schema.data_type_value(dtype)


def make_tensor_desc(dtype: Union[str, int], shape: Sequence[int], layout: str = "ND",
                     origin_format: Optional[str] = None,
                     origin_shape: Optional[Sequence[int]] = None,
                     origin_dtype: Optional[Union[str, int]] = None,
                     origin_name: Optional[str] = None,
                     origin_output_index: Optional[int] = None,
                     size: Optional[int] = None,
                     attrs: Optional[Dict[str, Any]] = None) -> Any:
    """A TensorDescriptor with the attrs GE's serializer always adds (§2.4: origin_format,
    origin_format_for_int, format_for_int, origin_shape_initialized, origin_shape,
    origin_data_type) and, when ``origin_name`` is given, the data-dump origin attrs
    (_datadump_origin_name/_output_index/_format/_data_type). Origin values default to
    the device ones."""
    desc = ge_schema.TensorDescriptor(dtype=_dtype_value(dtype), layout=layout)
    desc.shape.dim.extend(shape)
    if size is not None:
        desc.size = size
    origin_format = layout if origin_format is None else origin_format
    origin_shape = list(shape) if origin_shape is None else list(origin_shape)
    origin_dtype_name = ge_schema.data_type_name(
        _dtype_value(dtype if origin_dtype is None else origin_dtype))
    set_attr(desc.attr, "format_for_int", schema.format_value(layout))
    set_attr(desc.attr, "origin_data_type", origin_dtype_name)
    set_attr(desc.attr, "origin_format", origin_format)
    set_attr(desc.attr, "origin_format_for_int", schema.format_value(origin_format))
    set_attr(desc.attr, "origin_shape_initialized", True)
    desc.attr["origin_shape"].list.val_type = ge_schema.LIST_VALUE_TYPE_NAMES.index(
        "VT_LIST_INT")
    desc.attr["origin_shape"].list.i.extend(origin_shape)
    if origin_name is not None:
        set_attr(desc.attr, ge_schema.ATTR_ORIGIN_NAME, origin_name)
        set_attr(desc.attr, ge_schema.ATTR_ORIGIN_OUTPUT_INDEX, 0 if origin_output_index is None
                 else origin_output_index)
        set_attr(desc.attr, "_datadump_origin_format", origin_format)
        set_attr(desc.attr, "_datadump_origin_data_type", origin_dtype_name)
    for key, value in (attrs or {}).items():
        set_attr(desc.attr, key, value)
    return desc


def make_op(name: str, op_type: str, op_id: int, inputs: Sequence[str] = (),
            input_descs: Sequence[Any] = (), output_descs: Sequence[Any] = (),
            original_op_names: Optional[Sequence[str]] = None,
            no_task: Optional[bool] = None, stream_id: int = 0,
            attrs: Optional[Dict[str, Any]] = None) -> Any:
    """An OpDef as a Build graph holds it: ``inputs`` as "src:idx" ("src:-1" control),
    descs from :func:`make_tensor_desc`, ``_datadump_original_op_names`` (list s) and
    ``_no_task`` (b) when given, other attrs through :func:`set_attr`."""
    op = ge_schema.OpDef(name=name, type=op_type, id=op_id, stream_id=stream_id)
    op.input.extend(inputs)
    op.input_desc.extend(input_descs)
    op.output_desc.extend(output_descs)
    if original_op_names is not None:
        op.attr[ge_schema.ATTR_ORIGINAL_OP_NAMES].list.val_type = ge_schema.LIST_VALUE_TYPE_NAMES.index(
            "VT_LIST_STRING")
        op.attr[ge_schema.ATTR_ORIGINAL_OP_NAMES].list.s.extend(n.encode("utf-8") for n in original_op_names)
    if no_task is not None:
        set_attr(op.attr, ge_schema.ATTR_NO_TASK, no_task)
    for key, value in (attrs or {}).items():
        set_attr(op.attr, key, value)
    return op


def make_model(graphs: Sequence[Tuple[str, Sequence[Any]]], name: str = "") -> Any:
    """A ModelDef from (graph name, ops) pairs; graph[0] is the main graph."""
    model = ge_schema.ModelDef(name=name)
    for graph_name, ops in graphs:
        graph = model.graph.add(name=graph_name)
        graph.op.extend(ops)
    return model
