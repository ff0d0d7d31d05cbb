"""The records a GE graph scan gives (:mod:`.ge_graph`, where they are public): per graph its
name and op summaries (:class:`GraphSummary`) or op count (:class:`GraphCount`), per op what graph
selection and name mapping need (:class:`OpSummary`), per output the TF tensor it comes from
(:class:`OutputOrigin`).
"""
from typing import List, NamedTuple, Optional, Tuple

__all__ = ["OutputOrigin", "OpSummary", "GraphSummary", "GraphCount"]


class OutputOrigin(NamedTuple):
    """The TF tensor one output_desc comes from; None where the attr is absent."""

    origin_name: Optional[str]
    origin_output_index: Optional[int]


class OpSummary(NamedTuple):
    """What graph selection and name mapping need from one OpDef."""

    name: str
    type: str
    id: int
    inputs: Tuple[str, ...]
    no_task: bool
    original_op_names: Optional[Tuple[str, ...]]  # None: attr absent
    outputs: Tuple[OutputOrigin, ...]


class GraphSummary(NamedTuple):
    """One GraphDef of the file (graph[0] is the main graph)."""

    name: str
    ops: List[OpSummary]


class GraphCount(NamedTuple):
    """One GraphDef's name and number of ops (see :func:`iter_graph_counts`)."""

    name: str
    op_count: int
