"""Build the GE ``Build`` graph (``ge_ir`` ModelDef) the emulated NPU writes.

One GE op per TF op the captured step executed, in execution order, as GE's TF
parser would name it (TF node names are kept; a few types are renamed the way GE
does). Ops GE would not run on the device carry ``_no_task: true`` and get no dump
files: Const / Variable / Data (Placeholder), NoOp and Identity, variable reads,
control-flow ops (If/While/Case and the v1 Switch/Merge/Enter/Exit family),
data-flow and dataset ops, and ops whose outputs are handles (resource/variant).
See the seed guide's last section and reference/ascend-dump-formats.md §2.3-2.4.
"""
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..formats import ge_ir_schema
from ..formats.ge_text import format_model

__all__ = ["EMULATED_MARK", "is_emulated_graph", "GE_TYPE_OF", "NO_TASK_TYPES", "GeOp", "ge_type", "is_no_task", "build_model", "model_text", "ge_dtype"]

#: ModelDef.custom_version of every graph the emulator writes, so post-hoc collection can
#: label emulated data as such (GE leaves the field empty in graph dumps).
EMULATED_MARK = "npu_dump_hook emulated NPU"

#: TF op type -> GE op type, where GE's parser renames it.
GE_TYPE_OF = {
    "Placeholder": "Data",
    "PlaceholderWithDefault": "Data",
    "VarHandleOp": "Variable",
    "VariableV2": "Variable",
    "MatMul": "MatMulV2",
}

NO_TASK_TYPES = frozenset(
    """Const Data Variable RefData NoOp Identity IdentityN ReadVariableOp VarIsInitializedOp
    If StatelessIf While StatelessWhile Case StatelessCase For PartitionedCall StatefulPartitionedCall
    Switch Merge Enter Exit NextIteration LoopCond RefEnter RefExit RefSwitch RefMerge ControlTrigger
    StackV2 StackPushV2 StackPopV2 TensorArrayV3 TensorArrayWriteV3 TensorArrayReadV3
    IteratorV2 Iterator MakeIterator OneShotIterator AnonymousIteratorV2 AnonymousIteratorV3
    DeleteIterator IteratorToStringHandle AssignVariableOp SaveV2 RestoreV2 MergeV2Checkpoints""".split()
)

_DTYPES = {
    "float32": "DT_FLOAT", "float16": "DT_FLOAT16", "int8": "DT_INT8", "uint8": "DT_UINT8",
    "int16": "DT_INT16", "uint16": "DT_UINT16", "int32": "DT_INT32", "int64": "DT_INT64",
    "uint32": "DT_UINT32", "uint64": "DT_UINT64", "bool": "DT_BOOL", "float64": "DT_DOUBLE",
    "string": "DT_STRING", "complex64": "DT_COMPLEX64", "complex128": "DT_COMPLEX128",
    "resource": "DT_RESOURCE", "variant": "DT_VARIANT", "bfloat16": "DT_BF16",
    "qint8": "DT_QINT8", "quint8": "DT_QUINT8", "qint32": "DT_QINT32",
}
_HANDLE_DTYPES = frozenset(("resource", "variant", "string"))


def ge_type(tf_type: str) -> str:
    return GE_TYPE_OF.get(tf_type, tf_type)


def ge_dtype(dtype_name: str) -> str:
    return _DTYPES.get(dtype_name, "DT_UNDEFINED")


class GeOp(object):
    """What the model builder needs to know of one executed TF op."""

    def __init__(self, name: str, tf_type: str, inputs: Sequence[str], control_inputs: Sequence[str],
                 output_dtypes: Sequence[str], output_shapes: Sequence[Optional[Tuple[int, ...]]]) -> None:
        self.name = name
        self.tf_type = tf_type
        self.type = ge_type(tf_type)
        self.inputs = list(inputs)
        self.control_inputs = list(control_inputs)
        self.output_dtypes = list(output_dtypes)
        self.output_shapes = list(output_shapes)

    @property
    def no_task(self) -> bool:
        return is_no_task(self.type, self.output_dtypes, self.tf_type)


def is_no_task(op_type: str, output_dtypes: Iterable[str], tf_type: str = "") -> bool:
    if op_type in NO_TASK_TYPES or tf_type in NO_TASK_TYPES:
        return True
    if op_type.endswith("Dataset") or op_type.endswith("DatasetV2") or "Dataset" in tf_type:
        return True
    dtypes = list(output_dtypes)
    return bool(dtypes) and all(d in _HANDLE_DTYPES for d in dtypes)


def _attr_s(attrs: Any, key: str, value: str) -> None:
    attrs[key].s = value.encode("utf-8")


def _attr_i(attrs: Any, key: str, value: int) -> None:
    attrs[key].i = value


def _attr_list_i(attrs: Any, key: str, values: Iterable[int]) -> None:
    entry = attrs[key].list
    entry.i.extend(values)
    entry.val_type = ge_ir_schema.AttrDef.ListValue.VT_LIST_INT


def _fill_output_desc(desc: Any, op: GeOp, index: int) -> None:
    dtype = ge_dtype(op.output_dtypes[index])
    shape = op.output_shapes[index]
    desc.dtype = ge_ir_schema.data_type_value(dtype)
    layout = "NHWC" if shape is not None and len(shape) == 4 else "ND"
    desc.layout = layout
    if shape is not None:
        desc.shape.dim.extend(shape)
    attrs = desc.attr
    _attr_s(attrs, "origin_format", layout)
    _attr_s(attrs, "origin_data_type", dtype)
    if shape is not None:
        _attr_list_i(attrs, "origin_shape", shape)
        attrs["origin_shape_initialized"].b = True
    _attr_s(attrs, "_datadump_origin_name", op.name)
    _attr_i(attrs, "_datadump_origin_output_index", index)
    _attr_s(attrs, "_datadump_origin_format", layout)
    _attr_s(attrs, "_datadump_origin_data_type", dtype)


def build_model(graph_name: str, ops: Sequence[GeOp]) -> Any:
    """A ModelDef whose first graph is the Build graph named ``graph_name``."""
    model = ge_ir_schema.ModelDef()
    model.name = graph_name
    model.custom_version = EMULATED_MARK
    graph = model.graph.add()
    graph.name = graph_name
    for order, op in enumerate(ops):
        ge_op = graph.op.add()
        ge_op.name = op.name
        ge_op.type = op.type
        ge_op.input.extend(op.inputs)
        ge_op.input.extend(name + ":-1" for name in op.control_inputs)
        ge_op.id = order
        ge_op.stream_id = 0
        if op.no_task:
            ge_op.attr["_no_task"].b = True
        else:
            _attr_i(ge_op.attr, "_fe_imply_type", 6)
        for index in range(len(op.output_dtypes)):
            _fill_output_desc(ge_op.output_desc.add(), op, index)
    return model


def model_text(model: Any) -> str:
    """The model as GE prints it (2-space indent, maps sorted by key, C++ float rendering)."""
    return format_model(model)


def is_emulated_graph(path: str) -> bool:
    """True when the graph file was written by the emulator (its mark sits in the first lines)."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return ('custom_version: "{}"'.format(EMULATED_MARK)).encode() in head
