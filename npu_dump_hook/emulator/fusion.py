"""GE fusion patterns the ``ascend`` profile applies to the executed ops.

A fused group becomes one node of the Build graph and one dump file. Patterns (TF op types,
each arrow an edge from output 0 to input 0 of the next op)::

    Conv2D -> BiasAdd [-> Relu | Relu6]
    Conv2D [-> BiasAdd] -> FusedBatchNorm | FusedBatchNormV2 | FusedBatchNormV3   (is_training=False)
                                          [-> Relu | Relu6]
    Conv2D -> Relu | Relu6
    MatMul -> BiasAdd [-> Relu | Relu6 | Tanh | Sigmoid]

GE does this in two steps. Graph fusion passes fold a bias (``BiasAdd``'s bias becomes the
cube op's third input) and an inference BatchNorm (its scale and offset fold into the
convolution) into the cube op, which keeps its name and GE type (``Conv2D``, ``MatMulV2``).
Buffer (UB) fusion then merges the cube op with the element-wise activation behind it into a
compiled fusion op named by **concatenating the names** of the nodes it merges (FE
``FusionOpComm::CreateFusionOp``: ``conv1/Conv2D`` + ``conv1/Relu`` ->
``conv1/Conv2Dconv1/Relu``; ``{first name}_ub_fusion`` when the concatenation exceeds 512
characters) with the type of the first node. So::

    conv1/Conv2D + conv1/BiasAdd                  -> conv1/Conv2D              (Conv2D)
    conv1/Conv2D + conv1/BiasAdd + conv1/Relu     -> conv1/Conv2Dconv1/Relu    (Conv2D)
    fc1/MatMul + fc1/BiasAdd + fc1/Relu           -> fc1/MatMulfc1/Relu        (MatMulV2)

The node lists every TF op of the group in ``_datadump_original_op_names`` /
``_datadump_original_op_types`` (execution order) and its outputs are the last op's, with
``_datadump_origin_name`` / ``_datadump_origin_output_index`` pointing at that op
(docs/reference/ascend-dump-formats.md §2.4, §2.5: what msaccucmp compares with the TF tensor).

A group is formed only when every intermediate output (every output of an op but the last)
has exactly one consumer among the ops the step executes, namely the next op of the group
(TF's gradient ops read ``Relu``'s output, never the ``Conv2D``'s or ``BiasAdd``'s, so training
graphs fuse), and no op of the group but the last carries an injected fault (so a faulted
op keeps a dump of its own). Fetches of an intermediate by the training script do not stop
a fusion (GE fuses them too, and the fetched value then is the fused output's).
"""
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set

__all__ = ["FusedGroup", "PATTERNS", "MAX_NAME_CHARS", "find_groups", "fused_name"]

MAX_NAME_CHARS = 512  # FE kMaxOpNmaLen

_BN_TYPES = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_ACTIVATIONS_CONV = ("Relu", "Relu6")
_ACTIVATIONS_MATMUL = ("Relu", "Relu6", "Tanh", "Sigmoid")

#: (head type, [(member types, absorbed by graph fusion: True / appended by UB fusion: False, optional)])
PATTERNS = (
    ("Conv2D", ((("BiasAdd",), True, True), (_BN_TYPES, True, True), (_ACTIVATIONS_CONV, False, True))),
    ("MatMul", ((("BiasAdd",), True, False), (_ACTIVATIONS_MATMUL, False, True))),
)


class FusedGroup(NamedTuple):
    """One fused node: its GE ``name``, the TF ``members`` in order (the head first) and their types."""

    name: str
    members: List[str]
    types: List[str]

    @property
    def head(self) -> str:
        return self.members[0]

    @property
    def last(self) -> str:
        return self.members[-1]


def fused_name(members: Sequence[str], appended: Sequence[bool]) -> str:
    """The GE name of a group: the head's name, then each UB-fused member's name appended."""
    name = members[0] + "".join(m for m, ub in zip(members, appended) if ub)
    if len(name) > MAX_NAME_CHARS:
        return members[0] + "_ub_fusion"
    return name


def find_groups(ops: Sequence[Any], consumers: Dict[str, List[str]], faulted: Set[str],
                is_training: Callable[[str], Optional[bool]]) -> List[FusedGroup]:
    """Fused groups over ``ops`` (objects with ``name``, ``type``, ``inputs`` as logical
    ``"op:i"`` names and ``output_dtypes``), in execution order.

    ``consumers``: ``{"op:i": [consumer op names]}`` among the executed ops; ``faulted``: op
    names with an injected fault; ``is_training(op name)``: a BatchNorm's ``is_training`` attr
    (None when unknown: not fused).
    """
    by_name = {op.name: op for op in ops}
    taken = set()  # type: Set[str]
    groups = []  # type: List[FusedGroup]
    for op in ops:
        if op.name in taken:
            continue
        for head_type, steps in PATTERNS:
            if op.type != head_type:
                continue
            members, appended = _match(op, steps, by_name, consumers, faulted, is_training)
            if len(members) > 1:
                taken.update(members)
                groups.append(FusedGroup(fused_name(members, appended), members,
                                         [by_name[m].type for m in members]))
            break
    return groups


def _only_consumer(op: Any, by_name: Dict[str, Any], consumers: Dict[str, List[str]]) -> Optional[Any]:
    """The single executed consumer of ``op``'s output 0, reading it as input 0, when ``op`` has no
    other consumed output; else None."""
    for index in range(1, len(op.output_dtypes)):
        if consumers.get("{}:{}".format(op.name, index)):
            return None
    readers = consumers.get(op.name + ":0", [])
    if len(readers) != 1:
        return None
    consumer = by_name.get(readers[0])
    if consumer is None or not consumer.inputs or consumer.inputs[0] != op.name + ":0":
        return None
    if sum(1 for name in consumer.inputs if name == op.name + ":0") != 1:
        return None
    return consumer


def _match(head: Any, steps: Sequence[Any], by_name: Dict[str, Any], consumers: Dict[str, List[str]],
           faulted: Set[str], is_training: Callable[[str], Optional[bool]]) -> Any:
    members, appended = [head.name], [False]
    current = head
    for types, absorbed, optional in steps:
        nxt = None if current.name in faulted else _only_consumer(current, by_name, consumers)
        fits = nxt is not None and nxt.type in types
        if fits and nxt.type in _BN_TYPES and is_training(nxt.name) is not False:
            fits = False
        if not fits:
            if optional:
                continue
            return [head.name], [False]
        members.append(nxt.name)
        appended.append(not absorbed)
        current = nxt
    return members, appended
