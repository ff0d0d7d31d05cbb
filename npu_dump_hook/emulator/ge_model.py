"""Build the GE ``Build`` graph (``ge_ir`` ModelDef) the emulated NPU writes.

One GE op per node of :mod:`.npu_graph` (the executed TF ops, fused groups, inserted
``Cast``/``TransData`` nodes), in execution order, as GE's TF parser would name it (TF node
names are kept; a few types are renamed the way GE does, :data:`GE_TYPE_OF`). Ops GE would not
run on the device carry ``_no_task: true`` and get no dump files: Const / Variable / Data
(Placeholder), NoOp and Identity, variable reads, control-flow ops (If/While/Case and the v1
Switch/Merge/Enter/Exit family), data-flow and dataset ops, and ops whose outputs are handles
(resource/variant). In-place variable updates are tasks (they get dump files). Every output
desc carries ``origin_format``/``origin_shape``/``origin_data_type`` and, when the output has a
TF origin, ``_datadump_origin_name``/``_datadump_origin_output_index`` (fused nodes: the last
TF op of the group; inserted nodes: none). Fused and inserted nodes carry
``_datadump_original_op_names``/``_datadump_original_op_types`` (``[""]`` for inserted ones).
With ``input_descs`` (the ``ascend`` profile) every op also gets its input descs, so the
device formats it reads (NC1HWC0, FRACTAL_Z, FRACTAL_NZ) are in the graph.
See docs/reference/ascend-dump-formats.md §2.3-2.5.
"""
import re
import types
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..formats import ge_ir_schema
from ..formats.ge_text import c_escape, forget_entry_texts, format_fields, format_model
from .layout import device_shape

__all__ = ["EMULATED_MARK", "is_emulated_graph", "GE_TYPE_OF", "NO_TASK_TYPES", "ge_type", "is_no_task",
           "build_model", "model_text", "graph_text", "ge_dtype", "ID_MARK", "op_shape", "op_strings", "marked_op",
           "op_format", "escaped_all"]

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
    "AssignVariableOp": "Assign",
    "AssignAddVariableOp": "AssignAdd",
    "AssignSubVariableOp": "AssignSub",
}

NO_TASK_TYPES = frozenset(
    """Const Data Variable RefData NoOp Identity IdentityN ReadVariableOp VarIsInitializedOp
    If StatelessIf While StatelessWhile Case StatelessCase For PartitionedCall StatefulPartitionedCall
    Switch Merge Enter Exit NextIteration LoopCond RefEnter RefExit RefSwitch RefMerge ControlTrigger
    StackV2 StackPushV2 StackPopV2 TensorArrayV3 TensorArrayWriteV3 TensorArrayReadV3 TensorArrayGradV3
    IteratorV2 Iterator MakeIterator OneShotIterator AnonymousIteratorV2 AnonymousIteratorV3
    DeleteIterator IteratorToStringHandle SaveV2 RestoreV2 MergeV2Checkpoints""".split()
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
    """GE's type for a TF op type (``ResourceApplyAdam`` -> ``ApplyAdam``: resource updates become ref updates)."""
    if tf_type in GE_TYPE_OF:
        return GE_TYPE_OF[tf_type]
    if tf_type.startswith(("ResourceApply", "ResourceSparseApply", "ResourceScatter")):
        return tf_type[len("Resource"):]
    return tf_type


def ge_dtype(dtype_name: str) -> str:
    return _DTYPES.get(dtype_name, "DT_UNDEFINED")


def is_no_task(op_type: str, output_dtypes: Iterable[str], tf_type: str = "") -> bool:
    if (op_type in NO_TASK_TYPES or tf_type in NO_TASK_TYPES or op_type.endswith(("Dataset", "DatasetV2"))
            or "Dataset" in tf_type):
        return True
    dtypes = set(output_dtypes)  # (a set test: this runs for every op of every Build graph)
    return bool(dtypes) and dtypes <= _HANDLE_DTYPES


def _attr_s(attrs: Any, key: str, value: str) -> None:
    attrs[key].s = value.encode("utf-8")


def _attr_i(attrs: Any, key: str, value: int) -> None:
    attrs[key].i = value


def _attr_list_i(attrs: Any, key: str, values: Iterable[int]) -> None:
    entry = attrs[key].list
    entry.i.extend(values)
    entry.val_type = ge_ir_schema.AttrDef.ListValue.VT_LIST_INT


def _attr_list_s(attrs: Any, key: str, values: Iterable[str]) -> None:
    entry = attrs[key].list
    entry.s.extend(v.encode("utf-8") for v in values)
    entry.val_type = ge_ir_schema.AttrDef.ListValue.VT_LIST_STRING


def _fill_desc(desc: Any, held: Any, shape: Optional[Sequence[int]], tf_dtype: str,
               origin: Optional[Tuple[str, int]]) -> None:
    """A tensor desc: device dtype/layout/shape, origin attrs; ``origin`` ``(TF op, output index)``
    for an output with a TF origin, else None."""
    dtype = ge_dtype(held.dtype)
    desc.dtype = ge_ir_schema.data_type_value(dtype)
    desc.layout = held.origin_format if held.format == "ND" else held.format
    if shape is not None:
        desc.shape.dim.extend(device_shape(shape, held))
    attrs = desc.attr
    origin_dtype = ge_dtype(tf_dtype)
    _attr_s(attrs, "origin_format", held.origin_format)
    _attr_s(attrs, "origin_data_type", origin_dtype)
    if shape is not None:
        _attr_list_i(attrs, "origin_shape", shape)
        attrs["origin_shape_initialized"].b = True
    if origin is not None:
        _attr_s(attrs, "_datadump_origin_name", origin[0])
        _attr_i(attrs, "_datadump_origin_output_index", origin[1])
        _attr_s(attrs, "_datadump_origin_format", held.origin_format)
        _attr_s(attrs, "_datadump_origin_data_type", origin_dtype)


def _desc_origin(tensor: Any, output: bool) -> Optional[Tuple[str, int]]:
    return tensor.origin if output and tensor.origin is not None else None


def _fill_op(ge_op: Any, order: int, node: Any) -> None:
    """An op's own fields: name, type, data and control inputs, id, stream, task attrs (no descs)."""
    ge_op.name = node.name
    ge_op.type = node.type
    ge_op.input.extend(node.input_names)
    ge_op.input.extend(name + ":-1" for name in node.control_inputs)
    ge_op.id = order
    ge_op.stream_id = 0
    if node.no_task:
        ge_op.attr["_no_task"].b = True
    else:
        _attr_i(ge_op.attr, "_fe_imply_type", 6)
    if node.original_names is not None:
        _attr_list_s(ge_op.attr, "_datadump_original_op_names", node.original_names)
        _attr_list_s(ge_op.attr, "_datadump_original_op_types", node.original_types or [""])


def _head(graph_name: str) -> Any:
    model = ge_ir_schema.ModelDef()
    model.name = graph_name
    model.custom_version = EMULATED_MARK
    model.graph.add().name = graph_name
    return model


def build_model(graph_name: str, nodes: Sequence[Any], input_descs: bool = False) -> Any:
    """A ModelDef whose first graph is the Build graph named ``graph_name``, one op per
    :class:`~.npu_graph.NpuNode`."""
    model = _head(graph_name)
    graph = model.graph[0]
    for order, node in enumerate(nodes):
        ge_op = graph.op.add()
        _fill_op(ge_op, order, node)
        if input_descs:
            for tensor in node.inputs:
                _fill_desc(ge_op.input_desc.add(), tensor.value.held, tensor.value.shape, tensor.tf_dtype, None)
        for tensor in node.outputs:
            _fill_desc(ge_op.output_desc.add(), tensor.value.held, tensor.value.shape, tensor.tf_dtype,
                       _desc_origin(tensor, True))
    return model


def model_text(model: Any) -> str:
    """The model as GE prints it (2-space indent, maps sorted by key, C++ float rendering)."""
    return format_model(model)


#: Stands for an output's origin name in a desc text kept for many descs (control bytes: no TF
#: name, dtype or layout contains them, so the quoted, escaped form occurs once in the text).
_NAME_MARK = "\x01origin name\x01"
_QUOTED_MARK = '"' + c_escape(_NAME_MARK.encode("utf-8")) + '"'
_DESC_INDENT = "    "


class _DescTexts(object):
    """The text of each tensor desc of one graph, made once per distinct (direction, held form,
    shape, TF dtype, origin output index) and the origin name put in: a graph of 1,000s of ops
    has a few dozen distinct descs (an unrolled RNN repeats its cell's), and printing each through
    protobuf was most of the Build graph's cost."""

    def __init__(self) -> None:
        self.texts = {}  # type: Dict[Tuple[Any, ...], str]

    def text(self, tensor: Any, output: bool) -> str:
        origin = _desc_origin(tensor, output)
        text = self.marked(tensor, output, origin)
        if origin is None:
            return text
        return text.replace(_QUOTED_MARK, '"' + c_escape(origin[0].encode("utf-8")) + '"', 1)

    def marked(self, tensor: Any, output: bool, origin: Optional[Tuple[str, int]]) -> str:
        """The desc's text with :data:`_QUOTED_MARK` for its origin name (``origin``: its _desc_origin)."""
        value = tensor.value
        key = (output, value.held, value.shape, tensor.tf_dtype, origin[1] if origin is not None else None)
        text = self.texts.get(key)
        if text is None:
            desc = ge_ir_schema.TensorDescriptor()
            _fill_desc(desc, value.held, value.shape, tensor.tf_dtype,
                       (_NAME_MARK, origin[1]) if origin is not None else None)
            field = "output_desc" if output else "input_desc"
            text = self.texts[key] = "{}{} {{\n{}{}}}\n".format(_DESC_INDENT, field,
                                                               format_fields(desc, _DESC_INDENT + "  "), _DESC_INDENT)
        return text


#: Stands for a nonzero op id in a marked op (only marks and constants are in it).
ID_MARK = 2147483641


def _mark(index: int) -> str:
    return "\x01{}\x01".format(index)


def op_shape(node: Any, no_task: bool, order: int) -> Tuple[Any, ...]:
    """What the layout of an op's own fields depends on (its strings and id apart): input, control
    input and original name and type counts, no task or not, id 0 or not."""
    originals = node.original_names
    return (len(node.inputs), len(node.control_inputs), no_task, order == 0,
            None if originals is None else (len(originals), len(node.original_types or [""])))


def op_strings(node: Any) -> List[str]:
    """An op's strings in the order :func:`marked_op` numbers its marks (the order both printed
    forms take them in: name, type, inputs, control inputs, original names and types)."""
    values = [node.name, node.type]
    values.extend(node.input_names)
    values.extend(node.control_inputs)
    if node.original_names is not None:
        values.extend(node.original_names)
        values.extend(node.original_types or [""])
    return values


def marked_op(shape: Tuple[Any, ...]) -> Any:
    """The OpDef (own fields) of an op of ``shape`` whose strings are marks ``\\x01N\\x01`` numbered
    in :func:`op_strings` order, and whose id is :data:`ID_MARK` (0 for a first op)."""
    inputs, controls, no_task, first, originals = shape
    count = iter(range(1 << 30))
    marked = types.SimpleNamespace(
        name=_mark(next(count)), type=_mark(next(count)),
        input_names=[_mark(next(count)) for _ in range(inputs)],
        control_inputs=[_mark(next(count)) for _ in range(controls)], no_task=no_task,
        original_names=None if originals is None else [_mark(next(count)) for _ in range(originals[0])],
        original_types=None if originals is None else [_mark(next(count)) for _ in range(originals[1])])
    op = ge_ir_schema.OpDef()
    _fill_op(op, 0 if first else ID_MARK, marked)
    return op


def op_format(text: str, mark: Any, first: bool) -> str:
    """The printed form ``text`` of a :func:`marked_op` as a %-format of the op's escaped strings
    in order, then its id when not 0; ``mark``: the regex of a printed mark (group 1: its number).
    ValueError when the text is not of that form (the marks out of order, the id not once)."""
    pieces = mark.split(text)
    if [int(number) for number in pieces[1::2]] != list(range(len(pieces) // 2)) \
            or text.count(str(ID_MARK)) != (0 if first else 1):
        raise ValueError("unexpected marked op form: {!r}".format(text))
    pieces[0::2] = [piece.replace("%", "%%").replace(str(ID_MARK), "%d") for piece in pieces[0::2]]
    pieces[1::2] = ["%s"] * (len(pieces) // 2)
    return "".join(pieces)


def escaped_all(values: List[str], escape: Any, separator: str) -> List[str]:
    """``[escape(value) for value in values]`` with one call of ``escape`` (a char-by-char escape
    whose form of NUL is ``separator``, which leaves :data:`_PLAIN` text as it is) when no value
    holds a backslash or NUL (the escape of which could hold the separator's), none if all are plain."""
    joined = "\x00".join(values)
    if joined.count("\x00") != len(values) - 1 or "\\" in joined:
        return [escape(value) for value in values]
    if _PLAIN.match(joined):  # (most names)
        return values
    return escape(joined).split(separator)


#: Text both escapes (C and JSON) leave as it is, NUL apart: printable ASCII without " ' \
_PLAIN = re.compile("[ !#-&(-\\[\\]-~\x00]*\\Z")


def _c_escaped(text: str) -> str:
    return c_escape(text.encode("utf-8"))


_TEXT_MARK = re.compile(r"\\001(\d+)\\001")  # a mark as c_escape prints it


class _OpTexts(object):
    """The text of each op's own fields from a %-format made once per :func:`op_shape`
    (protobuf prints a marked op once, instead of every op)."""

    def __init__(self) -> None:
        self.formats = {}  # type: Dict[Tuple[Any, ...], str]

    def text(self, node: Any, order: int) -> str:
        form = self.form(op_shape(node, node.no_task, order))
        values = escaped_all(op_strings(node), _c_escaped, "\\000")  # type: List[Any]
        if order:
            values.append(order)
        return form % tuple(values)

    def form(self, shape: Tuple[Any, ...]) -> str:
        """The %-format of the own fields of an op of ``shape`` (:func:`op_shape`)."""
        form = self.formats.get(shape)
        if form is None:
            form = self.formats[shape] = op_format(format_fields(marked_op(shape), _DESC_INDENT), _TEXT_MARK,
                                                   shape[3])
        return form


def graph_text(graph_name: str, nodes: Sequence[Any], input_descs: bool = False) -> str:
    """``model_text(build_model(graph_name, nodes, input_descs))``, the same text made in parts:
    each op's own fields from :class:`_OpTexts`, its descs from :class:`_DescTexts`."""
    head = format_fields(_head(graph_name))
    closing = "}\n"  # the graph is the model's last field and its ops the graph's last: they go before it
    parts = [head[:-len(closing)]]
    ops, descs = _OpTexts(), _DescTexts()
    try:
        for order, node in enumerate(nodes):
            parts.append("  op {\n")
            parts.append(ops.text(node, order))
            if input_descs:
                parts.extend(descs.text(tensor, False) for tensor in node.inputs)
            parts.extend(descs.text(tensor, True) for tensor in node.outputs)
            parts.append("  }\n")
    finally:
        forget_entry_texts()
    parts.append(closing)
    return "".join(parts)


def is_emulated_graph(path: str) -> bool:
    """True when the graph file was written by the emulator (its mark sits in the first lines)."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return ('custom_version: "{}"'.format(EMULATED_MARK)).encode() in head
